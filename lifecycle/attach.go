package lifecycle

import (
	"io"
	"sync"
	"time"

	"github.com/paddock-dev/paddock/redact"
)

// flushAfter is how long an attached command's output may wait in the
// redactor for the rest of its line: a prompt ("name? ", a shell's "$ ",
// a full-screen agent's redraw) has no newline, and someone is watching.
const flushAfter = 5 * time.Millisecond

// idleFlush passes output on through a masking Writer, and flushes what
// the Writer holds back (the unfinished line, not the start of a declared
// secret) flushAfter after it began to hold it.
type idleFlush struct {
	mu      sync.Mutex
	w       *redact.Writer
	armed   bool
	stopped bool
}

func (f *idleFlush) Write(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	n, err := f.w.Write(p)
	if f.w.Held() && !f.armed && !f.stopped {
		f.armed = true
		time.AfterFunc(flushAfter, f.flush)
	}
	return n, err
}

func (f *idleFlush) flush() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.armed = false
	if !f.stopped {
		f.w.Flush()
	}
}

// stop ends the flushing; the Writer's Close passes on the rest.
func (f *idleFlush) stop() {
	f.mu.Lock()
	f.stopped = true
	f.mu.Unlock()
}

// flushingOutputs wraps an attached command's masked outputs (either may
// be nil) so that what they hold back shows within flushAfter; stop ends
// that before the Writers are closed.
func flushingOutputs(out, errw *redact.Writer) (stdout, stderr io.Writer, stop func()) {
	var fs []*idleFlush
	wrap := func(w *redact.Writer) io.Writer {
		if w == nil {
			return nil
		}
		f := &idleFlush{w: w}
		fs = append(fs, f)
		return f
	}
	stdout, stderr = wrap(out), wrap(errw)
	return stdout, stderr, func() {
		for _, f := range fs {
			f.stop()
		}
	}
}
