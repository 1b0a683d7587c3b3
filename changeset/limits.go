package changeset

import (
	"bytes"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/gitx"
)

// Limits bound what a change set may hold, so that computing,
// storing and showing one stays within bounded memory and time.
type Limits struct {
	MaxEntries int   // paths changed (default 20,000)
	MaxFile    int64 // bytes of one new or changed file (default 100 MiB)
	MaxTotal   int64 // bytes of all new content together (default 256 MiB)
}

// WithDefaults gives each limit that is not set its default.
func (l Limits) WithDefaults() Limits {
	if l.MaxEntries <= 0 {
		l.MaxEntries = 20000
	}
	if l.MaxFile <= 0 {
		l.MaxFile = 100 << 20
	}
	if l.MaxTotal <= 0 {
		l.MaxTotal = 256 << 20
	}
	return l
}

// Counts is what a change set will hold, counted before any of it is read:
// an overlay run's upper layer says it (see workspace.Upper).
type Counts struct {
	Files       int    // the paths that are not directories
	Bytes       int64  // the regular files' sizes together
	Largest     string // the biggest regular file
	LargestSize int64  // its size
}

// CheckCounts applies the limits to what an overlay run's upper layer
// holds, read from the host's side of it, before the change set reads any
// of it.
func (l Limits) CheckCounts(c Counts) error {
	switch {
	case c.Files > l.MaxEntries:
		return paddock.Errorf(paddock.CodeTooLarge, "the change set has more than %d entries; nothing was frozen (raise the limit, or split the work)", l.MaxEntries)
	case c.LargestSize > l.MaxFile:
		return paddock.Errorf(paddock.CodeTooLarge, "%s is %d bytes, over the change set's file limit of %d", c.Largest, c.LargestSize, l.MaxFile)
	case c.Bytes > l.MaxTotal:
		return paddock.Errorf(paddock.CodeTooLarge, "the change set's new content passes %d bytes; nothing was frozen", l.MaxTotal)
	}
	return nil
}

// Check refuses a change set over the limits, from git's raw entries and the
// sizes of their files as size gives them (what was read of the workspace;
// a path it does not know weighs nothing), before any diff is rendered
// (it is gitx.DiffOptions.Check).
func (l Limits) Check(raw []byte, withheld []gitx.Withheld, size func(path string) (int64, bool)) error {
	fields := bytes.Split(raw, []byte{0})
	// The withheld files are entries too (labelled, never applied).
	for _, w := range withheld {
		fields = append(fields, []byte(":"), []byte(w.Path))
	}
	entries, total := 0, int64(0)
	for i := 0; i+1 < len(fields); i += 2 {
		entries++
		if entries > l.MaxEntries {
			return paddock.Errorf(paddock.CodeTooLarge, "the change set has more than %d entries; nothing was frozen (raise the limit, or split the work)", l.MaxEntries)
		}
		if bytes.HasSuffix(fields[i], []byte(" D")) {
			continue
		}
		n, ok := size(string(fields[i+1]))
		if !ok {
			continue
		}
		if n > l.MaxFile {
			return paddock.Errorf(paddock.CodeTooLarge, "%s is %d bytes, over the change set's file limit of %d", fields[i+1], n, l.MaxFile)
		}
		if total += n; total > l.MaxTotal {
			return paddock.Errorf(paddock.CodeTooLarge, "the change set's new content passes %d bytes; nothing was frozen", l.MaxTotal)
		}
	}
	return nil
}
