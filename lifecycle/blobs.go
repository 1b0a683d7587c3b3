package lifecycle

import (
	"errors"
	"io"
	"os"
	"strconv"
	"sync"

	"github.com/paddock-dev/paddock/changeset"
)

// gitBlobID is the id git gives content (see changeset.BlobID).
func gitBlobID(content []byte) string { return changeset.BlobID(content) }

var errTooLarge = errors.New("too large")

type limitWriter struct {
	buf []byte
	max int64
}

func (l *limitWriter) Write(p []byte) (int, error) {
	if int64(len(l.buf)+len(p)) > l.max {
		return 0, errTooLarge
	}
	l.buf = append(l.buf, p...)
	return len(p), nil
}

// fileMode is the permission a git mode asks for.
func fileMode(gitMode string) os.FileMode {
	if gitMode == "100755" {
		return 0o755
	}
	return 0o644
}

// blobPath is where a frozen blob of a run is kept.
func (m *Manager) blobPath(id, blob string) string { return m.changeSets(id).BlobPath(blob) }

func itoa(n int) string { return strconv.Itoa(n) }

// copyBufs are the buffers of copyPooled.
var copyBufs = sync.Pool{New: func() any { b := make([]byte, 64<<10); return &b }}

// copyPooled is io.Copy through a pooled buffer: a change set of ten
// thousand files is hashed, frozen and applied file by file, and io.Copy
// from a file into a hash allocates a fresh 32 KiB buffer every time.
func copyPooled(dst io.Writer, src io.Reader) (int64, error) {
	bp := copyBufs.Get().(*[]byte)
	defer copyBufs.Put(bp)
	// Hidden behind a plain Reader: *os.File's WriteTo would take its own buffer.
	return io.CopyBuffer(dst, struct{ io.Reader }{src}, *bp)
}
