package manifest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
)

// maxGoTestLine bounds the line GoTestWriter holds; a longer one is passed
// through as text, whole, and not read as an event.
const maxGoTestLine = 1 << 20

// GoTestWriter reads `go test -json` output as it is written: it writes
// the text go test would have printed (each event's Output, and any line
// that is not an event, as is) to the writer under it, and counts the
// results. Every test and subtest that ends counts once; a package that
// fails with no failed test (a build failure, a panic in TestMain, a
// timeout) counts as one failure under its import path.
type GoTestWriter struct {
	w      io.Writer
	line   []byte
	long   bool // inside a line longer than maxGoTestLine
	events int
	counts Counts
	// pkgFailed holds the packages with a failed test.
	pkgFailed map[string]bool
	err       error
}

// NewGoTestWriter returns a GoTestWriter writing text to w.
func NewGoTestWriter(w io.Writer) *GoTestWriter {
	return &GoTestWriter{w: w, pkgFailed: map[string]bool{}}
}

// Write reads p's complete lines; it fails only when the writer under it does.
func (g *GoTestWriter) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 && g.err == nil {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			g.line = append(g.line, p...)
			if len(g.line) > maxGoTestLine {
				g.text(g.line)
				g.line, g.long = g.line[:0], true
			}
			break
		}
		g.line = append(g.line, p[:i+1]...)
		if g.long || len(g.line) > maxGoTestLine {
			g.text(g.line)
			g.long = false
		} else {
			g.event(g.line)
		}
		g.line, p = g.line[:0], p[i+1:]
	}
	return n, g.err
}

// Close reads a last line that has no newline.
func (g *GoTestWriter) Close() error {
	if len(g.line) > 0 {
		if g.long {
			g.text(g.line)
		} else {
			g.event(g.line)
		}
		g.line = nil
	}
	return g.err
}

// Counts are the results read so far.
func (g *GoTestWriter) Counts() Counts { return g.counts }

// Events is how many events were read.
func (g *GoTestWriter) Events() int { return g.events }

type goTestEvent struct {
	Action  string
	Package string
	Test    string
	Output  *string
}

func (g *GoTestWriter) event(line []byte) {
	var ev goTestEvent
	if len(bytes.TrimSpace(line)) == 0 || line[0] != '{' || json.Unmarshal(line, &ev) != nil || ev.Action == "" {
		g.text(line)
		return
	}
	g.events++
	if ev.Output != nil {
		g.text([]byte(*ev.Output))
	}
	switch {
	case ev.Test != "" && ev.Action == "pass":
		g.counts.pass()
	case ev.Test != "" && ev.Action == "skip":
		g.counts.skip()
	case ev.Test != "" && ev.Action == "fail":
		g.counts.fail(ev.Package+"."+ev.Test, true)
		g.pkgFailed[ev.Package] = true
	case ev.Test == "" && ev.Action == "fail" && !g.pkgFailed[ev.Package]:
		g.counts.fail(ev.Package, true)
	}
}

func (g *GoTestWriter) text(b []byte) {
	if g.err == nil {
		_, g.err = g.w.Write(b)
	}
}

// ParseGoTestJSON counts `go test -json` output (lines that are not events,
// such as a build's errors on stderr, are passed over). Input with no
// event at all is an error.
func ParseGoTestJSON(r io.Reader) (Counts, error) {
	g := NewGoTestWriter(io.Discard)
	if _, err := io.Copy(g, r); err != nil {
		return g.Counts(), fmt.Errorf("go test -json: %w", err)
	}
	g.Close()
	if g.Events() == 0 {
		return g.Counts(), fmt.Errorf("go test -json: %w", ErrNotResults)
	}
	return g.Counts(), nil
}

// GoTestText writes the text of `go test -json` output r to w: what a
// person reads instead of JSON lines.
func GoTestText(w io.Writer, r io.Reader) error {
	g := NewGoTestWriter(w)
	if _, err := io.Copy(g, r); err != nil {
		return err
	}
	return g.Close()
}
