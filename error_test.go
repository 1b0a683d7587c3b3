package paddock_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"

	"github.com/paddock-dev/paddock"
)

// TestErrorWire holds the wire form of an Error: the rule is one of the
// details, as it was before Rule was a field, and it comes back as Rule.
func TestErrorWire(t *testing.T) {
	for _, c := range []struct {
		e    *paddock.Error
		wire string
	}{
		{paddock.Errorf(paddock.CodeForbidden, "no").WithRule("protected_path").WithDetail("path", "a/.git"),
			`{"code":"forbidden","message":"no","details":{"path":"a/.git","rule":"protected_path"}}`},
		{paddock.Errorf(paddock.CodeForbidden, "no").WithRule(paddock.RuleAccessNone),
			`{"code":"forbidden","message":"no","details":{"rule":"access_none"}}`},
		{paddock.Errorf(paddock.CodeBadRequest, "bad").WithDetail("key", "x"),
			`{"code":"bad_request","message":"bad","details":{"key":"x"}}`},
		{&paddock.Error{Code: paddock.CodeInternal, Message: "internal error", Err: errors.New("a host path")},
			`{"code":"internal","message":"internal error"}`},
	} {
		for _, v := range []any{c.e, *c.e, struct {
			E *paddock.Error `json:"error"`
		}{c.e}} {
			b, err := json.Marshal(v)
			if err != nil {
				t.Fatal(err)
			}
			if _, ok := v.(struct {
				E *paddock.Error `json:"error"`
			}); ok {
				b = b[len(`{"error":`) : len(b)-1]
			}
			if string(b) != c.wire {
				t.Errorf("%T marshals to %s, want %s", v, b, c.wire)
			}
		}
		var back paddock.Error
		if err := json.Unmarshal([]byte(c.wire), &back); err != nil {
			t.Fatal(err)
		}
		want := *c.e
		want.Err = nil
		if !reflect.DeepEqual(back, want) {
			t.Errorf("%s reads back as %#v, want %#v", c.wire, back, want)
		}
	}
}
