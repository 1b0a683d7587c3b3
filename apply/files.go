package apply

import (
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"sync"

	"github.com/paddock-dev/paddock"
	"golang.org/x/sys/unix"
)

// gitBlobID, copyPooled, writeFile, writeFileFrom and syncDirFS are
// copies of lifecycle's, which the change sets' code uses too: a few lines
// each, not worth making apply import the package that keeps a run's
// artifacts. The others moved here from lifecycle.

// gitBlobID is the id git gives content (SHA-1 repositories).
func gitBlobID(content []byte) string {
	h := sha1.New()
	fmt.Fprintf(h, "blob %d\x00", len(content))
	h.Write(content)
	return hex.EncodeToString(h.Sum(nil))
}

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

// writeFile writes path atomically and durably.
func writeFile(path string, b []byte) error {
	return writeFileFrom(path, true, func(w io.Writer) error {
		_, err := w.Write(b)
		return err
	})
}

// writeFileFrom writes path atomically with what fill writes; durably
// only when sync is set (a caller writing many files makes them durable
// together with syncDirFS). If fill fails, path is left as it was.
func writeFileFrom(path string, sync bool, fill func(io.Writer) error) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	err = fill(f)
	if err == nil && sync {
		err = f.Sync()
	}
	if err = errors.Join(err, f.Close()); err != nil {
		os.Remove(tmp)
		return err
	}
	return os.Rename(tmp, path)
}

// syncDirFS makes everything written on dir's file system durable, dir's
// own entries included: one syncfs(2) instead of an fsync per file.
func syncDirFS(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := unix.Syncfs(int(d.Fd())); err != nil {
		return fmt.Errorf("syncfs %s: %w", dir, err)
	}
	return d.Sync()
}

func internal(msg string, err error) error {
	return &paddock.Error{Code: paddock.CodeInternal, Message: msg, Err: err}
}
