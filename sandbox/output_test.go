//go:build linux

package sandbox

import (
	"bytes"
	"io"
	"testing"
)

// TestStreamedOutputIsNotHeld: a streamed command's output passes up to its
// limit, and the result holds only its first LiveKeep bytes, however much
// the command writes; an answered one holds up to the limit.
func TestStreamedOutputIsNotHeld(t *testing.T) {
	chunk := bytes.Repeat([]byte("x"), 32<<10)
	for _, tc := range []struct {
		name      string
		live      bool
		held      int
		truncated bool
	}{
		{"streamed", true, LiveKeep, true},
		{"answered", false, 4 << 20, true},
	} {
		var passed countWriter
		spec := &Spec{Limits: Limits{Output: 4 << 20}, Stdout: &passed, Stderr: io.Discard, LiveOnly: tc.live}
		out, _ := outputs(spec)
		for i := 0; i < 400; i++ { // 12.5 MiB
			out.Write(chunk)
		}
		if passed.n != 4<<20 || out.buf.Len() != tc.held || out.truncated != tc.truncated {
			t.Errorf("%s: passed %d, held %d, truncated %v; want %d, %d, %v", tc.name, passed.n, out.buf.Len(), out.truncated, 4<<20, tc.held, tc.truncated)
		}
	}
}

type countWriter struct{ n int }

func (c *countWriter) Write(p []byte) (int, error) { c.n += len(p); return len(p), nil }
