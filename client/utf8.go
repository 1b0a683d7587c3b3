package client

import (
	"encoding/json"
	"fmt"
	"reflect"
	"unicode/utf8"

	"github.com/paddock-dev/paddock"
)

// notUTF8 finds a string in a request that is not UTF-8, and says where:
// JSON carries text only, and encoding/json would send such a string with
// U+FFFD in place of its bytes, so that a command or a path would silently
// not be the one asked for. Bytes travel as files, or in the fields made
// for them (a tool's content_base64).
func notUTF8(v any) error {
	if where := findNotUTF8(reflect.ValueOf(v), ""); where != "" {
		return paddock.Errorf(paddock.CodeBadRequest, "%s is not valid UTF-8; the API carries text: write the bytes from inside the command (printf '\\351'), or send content as content_base64", where).WithDetail("key", where)
	}
	return nil
}

func findNotUTF8(v reflect.Value, at string) string {
	if !v.IsValid() {
		return ""
	}
	if v.Type() == reflect.TypeOf(json.RawMessage(nil)) {
		return "" // sent as it is: the daemon refuses what is not UTF-8, naming the key
	}
	switch v.Kind() {
	case reflect.String:
		if !utf8.ValidString(v.String()) {
			return nameOr(at, "a value")
		}
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			return findNotUTF8(v.Elem(), at)
		}
	case reflect.Slice, reflect.Array:
		if v.Kind() == reflect.Slice && v.Type().Elem().Kind() == reflect.Uint8 {
			return "" // []byte is sent as base64
		}
		for i := 0; i < v.Len(); i++ {
			if w := findNotUTF8(v.Index(i), fmt.Sprintf("%s[%d]", at, i)); w != "" {
				return w
			}
		}
	case reflect.Map:
		it := v.MapRange()
		for it.Next() {
			k := fmt.Sprint(it.Key().Interface())
			if !utf8.ValidString(k) {
				return nameOr(at, "a key")
			}
			if w := findNotUTF8(it.Value(), join(at, k)); w != "" {
				return w
			}
		}
	case reflect.Struct:
		t := v.Type()
		for i := 0; i < t.NumField(); i++ {
			if !t.Field(i).IsExported() {
				continue
			}
			name := t.Field(i).Name
			if tag, _, _ := splitTag(t.Field(i).Tag.Get("json")); tag != "" && tag != "-" {
				name = tag
			}
			if w := findNotUTF8(v.Field(i), join(at, name)); w != "" {
				return w
			}
		}
	}
	return ""
}

func splitTag(tag string) (string, string, bool) {
	for i := 0; i < len(tag); i++ {
		if tag[i] == ',' {
			return tag[:i], tag[i+1:], true
		}
	}
	return tag, "", false
}

func join(at, name string) string {
	if at == "" {
		return name
	}
	return at + "." + name
}

func nameOr(at, def string) string {
	if at == "" {
		return def
	}
	return at
}
