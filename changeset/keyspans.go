package changeset

import (
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
	"io"
	"math"
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
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		return nil
	}
	// The file is read as it is now: what git hashed may have been
	// another content (a command still running rewrote it). Spans read
	// from another content are no answer for the blob's: then every line
	// of it is taken for one inside a key.
	h := blobHasher(k.blobs[path], fi.Size())
	if h == nil {
		return everyLine
	}
	var spans []span
	spans, k.lr = keySpansOf(io.TeeReader(f, h), k.lr)
	if _, err := io.Copy(h, f); err != nil || hex.EncodeToString(h.Sum(nil)) != k.blobs[path] {
		return everyLine
	}
	return spans
}

// everyLine is the key spans of a content that could not be read as it
// was hashed: all of it.
var everyLine = []span{{1, math.MaxInt}}

// blobHasher is a hash of a blob of size bytes as git names it with id
// (SHA-1 or SHA-256, told by id's length), "blob SIZE\0" written; nil
// for an id that is neither.
func blobHasher(id string, size int64) hash.Hash {
	var h hash.Hash
	switch len(id) {
	case 2 * sha1.Size:
		h = sha1.New()
	case 2 * sha256.Size:
		h = sha256.New()
	default:
		return nil
	}
	fmt.Fprintf(h, "blob %d\x00", size)
	return h
}

func (k *keySpanReader) close() {
	k.stack.Close()
	if k.root >= 0 {
		unix.Close(k.root)
	}
}
