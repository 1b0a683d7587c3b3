package changeset

import (
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/internal/durable"
)

// ErrBlobChanged is the error of a frozen blob whose bytes no longer hash
// to the id it is kept under: it is not what was approved.
var ErrBlobChanged = errors.New("the frozen blob does not hash to its id")

// BlobID is the id git gives content (SHA-1 repositories).
func BlobID(content []byte) string {
	h := sha1.New()
	fmt.Fprintf(h, "blob %d\x00", len(content))
	h.Write(content)
	return hex.EncodeToString(h.Sum(nil))
}

// blobsDir holds the store's frozen blobs.
func (s Store) blobsDir() string { return filepath.Join(s.Dir, "blobs") }

// BlobPath is where the frozen blob with git blob id id is kept. An apply
// writes from there, and gitx.CommitToBranch stores it (git checks that it
// hashes to id as it does).
func (s Store) BlobPath(id string) string { return filepath.Join(s.blobsDir(), id) }

// ReadBlob returns the frozen blob id, checked against its id: a blob that
// changed since it was frozen is refused (ErrBlobChanged).
func (s Store) ReadBlob(id string) ([]byte, error) {
	b, err := os.ReadFile(s.BlobPath(id))
	if err != nil {
		return nil, fmt.Errorf("changeset: %w", err)
	}
	if BlobID(b) != id {
		return nil, fmt.Errorf("changeset: blob %s: %w", id, ErrBlobChanged)
	}
	return b, nil
}

// FreezeBlobs keeps the new content of every created or modified entry of
// cs, read from the workspace's view now, so that an apply into a working
// tree writes exactly what was approved. An entry whose content no longer
// hashes to its blob id (the workspace changed since cs was computed) is a
// conflict: nothing of cs may be approved but what was reviewed.
//
// The blobs are durable when it returns (one syncfs for all of them), and
// so is anything else written on the store's file system.
func (s Store) FreezeBlobs(view *os.Root, cs *paddock.ChangeSet) error {
	changed := errors.New("changed")
	for _, e := range cs.Entries {
		// A blocked entry is never applied, and its path may be masked:
		// it has nothing to freeze.
		if e.Op == paddock.OpDelete || e.NewMode == "160000" || e.Blocked != "" {
			continue
		}
		// Streamed from the view to the blob's file, hashed on the way.
		// Not synced one by one: ten thousand fsyncs cost seconds. The
		// whole set is made durable below, before the submission that
		// refers to it is written.
		err := durable.WriteFileFrom(s.BlobPath(e.NewBlob), false, func(w io.Writer) error {
			blob, _, err := readEntry(view, e.Path, w)
			if err != nil || blob != e.NewBlob {
				return changed
			}
			return nil
		})
		if errors.Is(err, changed) {
			return paddock.Errorf(paddock.CodeConflict, "%s changed while the change set was being frozen; submit again", e.Path)
		}
		if err != nil {
			return fmt.Errorf("changeset: freezing %s: %w", e.NewBlob, err)
		}
	}
	if err := os.MkdirAll(s.blobsDir(), 0o700); err != nil {
		return fmt.Errorf("changeset: %w", err)
	}
	if err := durable.SyncFS(s.blobsDir()); err != nil {
		return fmt.Errorf("changeset: %w", err)
	}
	return nil
}

// readEntry streams what git would store for the path at rel under root
// (a file's bytes, or a symbolic link's target) into w, and returns its git
// blob id and mode. Nothing of it is held in memory. A file whose size
// changes while it is read is an error.
func readEntry(r *os.Root, rel string, w io.Writer) (id, mode string, err error) {
	fi, err := r.Lstat(rel)
	if err != nil {
		return "", "", err
	}
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		t, err := r.Readlink(rel)
		if err != nil {
			return "", "", err
		}
		if _, err := io.WriteString(w, t); err != nil {
			return "", "", err
		}
		return BlobID([]byte(t)), "120000", nil
	case fi.Mode().IsRegular():
		// Without blocking: a FIFO swapped in since the Lstat is refused
		// below, not waited on.
		f, err := r.OpenFile(rel, os.O_RDONLY|syscall.O_NONBLOCK, 0)
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
		n, err := durable.Copy(io.MultiWriter(h, w), f)
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
