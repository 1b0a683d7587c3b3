package lifecycle

import (
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"syscall"

	"github.com/paddock-dev/paddock/confine"
)

// gitBlobID is the id git gives content (SHA-1 repositories).
func gitBlobID(content []byte) string {
	h := sha1.New()
	fmt.Fprintf(h, "blob %d\x00", len(content))
	h.Write(content)
	return hex.EncodeToString(h.Sum(nil))
}

// readEntry streams what git would store for the path at rel under root
// (a file's bytes, or a symbolic link's target) into w, and returns its git
// blob id and mode. Nothing of it is held in memory. A file whose size
// changes while it is read is an error.
func readEntry(r *confine.Root, rel string, w io.Writer) (id, mode string, err error) {
	fi, err := r.Lstat(rel, rel)
	if err != nil {
		return "", "", err
	}
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		t, err := r.Readlink(rel, rel)
		if err != nil {
			return "", "", err
		}
		if _, err := io.WriteString(w, t); err != nil {
			return "", "", err
		}
		return gitBlobID([]byte(t)), "120000", nil
	case fi.Mode().IsRegular():
		// Without blocking: a FIFO swapped in since the Lstat is refused
		// below, not waited on.
		f, err := r.OS().OpenFile(rel, os.O_RDONLY|syscall.O_NONBLOCK, 0)
		if err != nil {
			return "", "", err
		}
		defer f.Close()
		st, err := f.Stat()
		if err != nil {
			return "", "", err
		}
		if !st.Mode().IsRegular() {
			return "", "", fmt.Errorf("%s is not a file or a link", rel)
		}
		h := sha1.New()
		fmt.Fprintf(h, "blob %d\x00", st.Size())
		n, err := copyPooled(io.MultiWriter(h, w), f)
		if err != nil {
			return "", "", err
		}
		if n != st.Size() {
			return "", "", fmt.Errorf("%s changed while it was read", rel)
		}
		mode = "100644"
		if st.Mode().Perm()&0o111 != 0 {
			mode = "100755"
		}
		return hex.EncodeToString(h.Sum(nil)), mode, nil
	}
	return "", "", fmt.Errorf("%s is not a file or a link", rel)
}

// blobsDir holds a run's frozen blobs.
func (m *Manager) blobsDir(id string) string { return filepath.Join(m.runDir(id), "blobs") }

// blobPath is where a frozen blob of a run is kept.
func (m *Manager) blobPath(id, blob string) string { return filepath.Join(m.blobsDir(id), blob) }

// keepFile gives the file at src a second name, dst: a hard link where it
// can (no copy of a large diff), else a copy. Not synced: the caller makes
// it durable with the rest of a submission (freezeBlobs' syncfs).
func keepFile(src, dst string) error {
	if fileExists(dst) {
		return nil // kept already: its name is its content's hash
	}
	if os.Link(src, dst) == nil {
		return nil
	}
	return writeFileFrom(dst, false, func(w io.Writer) error {
		f, err := os.Open(src)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = io.Copy(w, f)
		return err
	})
}

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
