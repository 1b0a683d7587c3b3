package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"

	"github.com/paddock-dev/paddock"
)

// MaxDepth is the deepest nesting of objects and arrays a request may have.
const MaxDepth = 32

// checkJSON refuses what encoding/json would accept silently: duplicate keys
// in an object (which one wins is a parser's choice, a classic smuggling
// trick) and nesting deeper than MaxDepth.
func checkJSON(body []byte) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	type level struct {
		object bool
		keys   map[string]bool
		key    bool // the next string token in an object is a key
	}
	var stack []*level
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			if len(stack) > 0 {
				return paddock.Errorf(paddock.CodeBadRequest, "invalid JSON body: it ends early")
			}
			return nil
		}
		if err != nil {
			return paddock.Errorf(paddock.CodeBadRequest, "invalid JSON body: %v", err)
		}
		var top *level
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		switch t := tok.(type) {
		case json.Delim:
			switch t {
			case '{', '[':
				if len(stack) >= MaxDepth {
					return paddock.Errorf(paddock.CodeBadRequest, "invalid JSON body: nested deeper than %d", MaxDepth)
				}
				if top != nil && top.object {
					top.key = true
				}
				stack = append(stack, &level{object: t == '{', keys: map[string]bool{}, key: t == '{'})
			default:
				stack = stack[:len(stack)-1]
			}
			continue
		case string:
			if top != nil && top.object && top.key {
				if top.keys[t] {
					return paddock.Errorf(paddock.CodeBadRequest, "invalid JSON body: duplicate key %q", t)
				}
				top.keys[t] = true
				top.key = false
				continue
			}
		}
		if top != nil && top.object {
			top.key = true
		}
	}
}
