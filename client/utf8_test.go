package client

import (
	"strings"
	"testing"

	"github.com/paddock-dev/paddock"
)

// TestRequestsMustBeUTF8: a request holding a string that is not UTF-8 is
// refused before it is sent (encoding/json would send U+FFFD instead),
// naming where it is.
func TestRequestsMustBeUTF8(t *testing.T) {
	for _, tc := range []struct {
		v     any
		where string
	}{
		{paddock.ExecRequest{Argv: []string{"sh", "-c", "touch n\xe9"}}, "argv[2]"},
		{paddock.ExecRequest{Argv: []string{"true"}, Env: []string{"A=\xff"}}, "env[0]"},
		{map[string]any{"path": "x", "content": "caf\xe9"}, "content"},
	} {
		err := notUTF8(tc.v)
		if !paddock.IsCode(err, paddock.CodeBadRequest) || !strings.Contains(err.Error(), tc.where) {
			t.Errorf("%v: %v, want bad_request naming %s", tc.v, err, tc.where)
		}
	}
	if err := notUTF8(paddock.ExecRequest{Argv: []string{"echo", "café ✓"}}); err != nil {
		t.Fatal(err)
	}
}
