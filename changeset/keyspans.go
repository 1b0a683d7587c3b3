package changeset

import (
	"os"

	"golang.org/x/sys/unix"

	"github.com/paddock-dev/paddock/internal/fsat"
)

// keySpanReader gives masking the key spans of a placed file's new
// content (see maskDiff): from its blob's facts where label kept them (a
// change set computed again reads none of its files for them), else from
// the file in the workspace, opened one name at a time from the last
// path's directories (fsat.Stack), never through a link.
type keySpanReader struct {
	root  int               // the workspace's descriptor, -1 if it cannot be opened
	blobs map[string]string // each path's new blob id, as git's snapshot has it
	stack fsat.Stack
	lr    *lineReader
}

func newKeySpanReader(root string, blobs map[string]string) *keySpanReader {
	fd, err := fsat.OpenDir(root)
	if err != nil {
		fd = -1
	}
	return &keySpanReader{root: fd, blobs: blobs}
}

// of is the key spans of path's new content; none for a file that cannot
// be read.
func (k *keySpanReader) of(path string) []span {
	if c, ok := factsOf(k.blobs[path]); ok && !c.manyKeys {
		return c.keys
	}
	if k.root < 0 {
		return nil
	}
	dir, name, err := k.stack.Parent(k.root, path)
	if err != nil {
		return nil
	}
	fd, err := fsat.OpenAt(dir, name, false)
	if err != nil {
		return nil
	}
	f := os.NewFile(uintptr(fd), path)
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return nil
	}
	var spans []span
	spans, k.lr = keySpansOf(f, k.lr)
	return spans
}

func (k *keySpanReader) close() {
	k.stack.Close()
	if k.root >= 0 {
		unix.Close(k.root)
	}
}
