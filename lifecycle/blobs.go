package lifecycle

import (
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
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
		n, err := io.Copy(io.MultiWriter(h, w), f)
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

// entryBytes reads the entry at rel into memory, for what needs it whole
// (a line-by-line merge); one over max bytes is errTooLarge.
func entryBytes(r *confine.Root, rel string, max int64) ([]byte, error) {
	var b limitWriter
	b.max = max
	_, _, err := readEntry(r, rel, &b)
	return b.buf, err
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

// blobsDir holds a run's frozen blobs.
func (m *Manager) blobsDir(id string) string { return filepath.Join(m.runDir(id), "blobs") }

// blobPath is where a frozen blob of a run is kept.
func (m *Manager) blobPath(id, blob string) string { return filepath.Join(m.blobsDir(id), blob) }

func itoa(n int) string { return strconv.Itoa(n) }

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
