// Package strictjson reads JSON one way only. encoding/json is lenient in
// ways that let one request mean two things: the value a reader, a log or
// a schema validator sees is not the value the program acts on. It accepts
// an object with a key twice (the last wins, while an event that records
// the arguments shows the first), matches a key to a struct field whatever
// its case ("Path" and "PATH" both fill "path"), and replaces invalid UTF-8
// and lone surrogate escapes with U+FFFD (a path or a file's content is
// silently changed, then written).
//
// Check refuses all of that, following I-JSON (RFC 7493: UTF-8 only, no
// lone surrogates, no duplicate names) and going further: names that
// differ only in case are duplicates too, because that is how encoding/json
// matches them to fields. Unmarshal also refuses a key that is not spelled
// exactly as its field's name: a schema says "path", so "PATH" is a
// mistake or a trick, and either way not the field a client's validator
// checked. Every refusal is an *Error naming the key.
package strictjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxDepth is the deepest nesting of objects and arrays accepted.
const MaxDepth = 32

// Error is a refusal: what is wrong, and where (a key path such as
// "edits[1].old_string", empty for the whole text).
type Error struct {
	Key string
	Msg string
}

func (e *Error) Error() string {
	if e.Key == "" {
		return e.Msg
	}
	return e.Key + ": " + e.Msg
}

// Check refuses a JSON text that is not exactly one value, holds invalid
// UTF-8 or a lone surrogate escape, has an object with a key twice (exactly
// or in another case), or nests deeper than MaxDepth.
func Check(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	type level struct {
		object bool
		keys   map[string]string // folded → as spelled
		key    bool              // the next string token is a key
		name   string            // this level's place, for messages
		index  int               // the next element's index, in an array
	}
	var stack []*level
	where := func(key string) string {
		if len(stack) == 0 {
			return ""
		}
		top := stack[len(stack)-1]
		if !top.object {
			return top.name + "[" + strconv.Itoa(top.index) + "]"
		}
		if top.name == "" {
			return key
		}
		return top.name + "." + key
	}
	var lastKey string
	for {
		start := dec.InputOffset()
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			if len(stack) > 0 {
				return &Error{Msg: "the JSON text ends early"}
			}
			return nil
		}
		if err != nil {
			return &Error{Key: where(lastKey), Msg: "invalid JSON: " + err.Error()}
		}
		var top *level
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		isKey := top != nil && top.object && top.key
		if s, ok := tok.(string); ok {
			// The decoder has replaced what it could not decode; look at
			// the token as it was sent.
			at := where(lastKey)
			if isKey {
				at = where(s)
			}
			if msg := badString(data[start:dec.InputOffset()]); msg != "" {
				return &Error{Key: at, Msg: msg}
			}
		}
		switch t := tok.(type) {
		case json.Delim:
			switch t {
			case '{', '[':
				if len(stack) >= MaxDepth {
					return &Error{Key: where(lastKey), Msg: fmt.Sprintf("nested deeper than %d", MaxDepth)}
				}
				name := where(lastKey)
				if top != nil {
					top.key = top.object // a value ends here; the next token is a key
				}
				stack = append(stack, &level{object: t == '{', keys: map[string]string{}, key: t == '{', name: name})
			default:
				stack = stack[:len(stack)-1]
				switch {
				case len(stack) == 0 && dec.More():
					return &Error{Msg: "more than one JSON value"}
				case len(stack) > 0 && !stack[len(stack)-1].object:
					stack[len(stack)-1].index++
				}
			}
			continue
		case string:
			if isKey {
				f := foldKey(t)
				if prev, dup := top.keys[f]; dup {
					if prev == t {
						return &Error{Key: where(t), Msg: fmt.Sprintf("duplicate key %q", t)}
					}
					return &Error{Key: where(t), Msg: fmt.Sprintf("duplicate key %q (as %q: keys differing only in case are one field)", t, prev)}
				}
				top.keys[f] = t
				top.key = false
				lastKey = t
				continue
			}
		}
		if top != nil {
			if top.object {
				top.key = true
			} else {
				top.index++
			}
		} else if dec.More() {
			return &Error{Msg: "more than one JSON value"}
		}
	}
}

// badString says what is wrong with a string token as sent (with what
// precedes it in the text), or "".
func badString(raw []byte) string {
	if !utf8.Valid(raw) {
		return "invalid UTF-8 in a string (send text as UTF-8; bytes go base64-encoded)"
	}
	for i := 0; i < len(raw); i++ {
		if raw[i] != '\\' {
			continue
		}
		i++
		if i >= len(raw) || raw[i] != 'u' || i+4 >= len(raw) {
			continue
		}
		r, _ := strconv.ParseUint(string(raw[i+1:i+5]), 16, 32)
		i += 4
		switch {
		case r >= 0xDC00 && r <= 0xDFFF:
			return fmt.Sprintf("a lone surrogate escape \\u%04x in a string", r)
		case r >= 0xD800 && r <= 0xDBFF:
			if i+6 >= len(raw) || raw[i+1] != '\\' || raw[i+2] != 'u' {
				return fmt.Sprintf("a lone surrogate escape \\u%04x in a string", r)
			}
			lo, _ := strconv.ParseUint(string(raw[i+3:i+7]), 16, 32)
			if lo < 0xDC00 || lo > 0xDFFF {
				return fmt.Sprintf("a lone surrogate escape \\u%04x in a string", r)
			}
			i += 6
		}
	}
	return ""
}

// foldKey folds a key as encoding/json does when it matches a key to a
// field: each rune to the smallest of its case-folding orbit.
func foldKey(s string) string {
	var b strings.Builder
	for _, r := range s {
		for {
			r2 := unicode.SimpleFold(r)
			if r2 <= r {
				r = r2
				break
			}
			r = r2
		}
		b.WriteRune(r)
	}
	return b.String()
}

// Unmarshal checks data (see Check), then decodes it into v, refusing keys
// that are not fields of v's structs as spelled there and trailing data.
func Unmarshal(data []byte, v any) error {
	if err := Check(data); err != nil {
		return err
	}
	if err := exactKeys(data, reflect.TypeOf(v), ""); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return &Error{Key: te.Field, Msg: fmt.Sprintf("want %s, not a JSON %s", te.Type, te.Value)}
		}
		return &Error{Msg: err.Error()}
	}
	return nil
}

var unmarshaler = reflect.TypeFor[json.Unmarshaler]()

// exactKeys walks data along type t and refuses an object key that is not
// exactly the JSON name of a field of the struct it fills.
func exactKeys(data []byte, t reflect.Type, at string) error {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil || reflect.PointerTo(t).Implements(unmarshaler) {
		return nil // it reads itself (json.RawMessage, time.Time, ...)
	}
	join := func(k string) string {
		if at == "" {
			return k
		}
		return at + "." + k
	}
	switch t.Kind() {
	case reflect.Struct:
		var m map[string]json.RawMessage
		if json.Unmarshal(data, &m) != nil {
			return nil // not an object: the decoder says why
		}
		fields := map[string]reflect.Type{}
		jsonFields(t, fields)
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			ft, ok := fields[k]
			if !ok {
				for name := range fields {
					if strings.EqualFold(name, k) {
						return &Error{Key: join(k), Msg: fmt.Sprintf("unknown key %q: the field is spelled %q", k, name)}
					}
				}
				return &Error{Key: join(k), Msg: fmt.Sprintf("unknown key %q", k)}
			}
			if err := exactKeys(m[k], ft, join(k)); err != nil {
				return err
			}
		}
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			return nil
		}
		var xs []json.RawMessage
		if json.Unmarshal(data, &xs) != nil {
			return nil
		}
		for i, x := range xs {
			if err := exactKeys(x, t.Elem(), at+"["+strconv.Itoa(i)+"]"); err != nil {
				return err
			}
		}
	case reflect.Map:
		var m map[string]json.RawMessage
		if json.Unmarshal(data, &m) != nil {
			return nil
		}
		for k, x := range m {
			if err := exactKeys(x, t.Elem(), join(k)); err != nil {
				return err
			}
		}
	}
	return nil
}

// jsonFields adds the JSON names of t's fields as encoding/json sees them
// (tags, untagged names, the fields of embedded structs) to out.
func jsonFields(t reflect.Type, out map[string]reflect.Type) {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				jsonFields(ft, out)
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		if _, ok := out[name]; !ok {
			out[name] = f.Type
		}
	}
}
