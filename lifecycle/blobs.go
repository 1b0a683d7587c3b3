package lifecycle

import (
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"

	"github.com/paddock-dev/paddock/confine"
)

// gitBlobID is the id git gives content (SHA-1 repositories).
func gitBlobID(content []byte) string {
	h := sha1.New()
	fmt.Fprintf(h, "blob %d\x00", len(content))
	h.Write(content)
	return hex.EncodeToString(h.Sum(nil))
}

// entryContent reads what git would store for the path at rel under root:
// a file's bytes, or a symbolic link's target; and its git mode.
func entryContent(r *confine.Root, rel string) ([]byte, string, error) {
	fi, err := r.Lstat(rel, rel)
	if err != nil {
		return nil, "", err
	}
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		t, err := r.Readlink(rel, rel)
		return []byte(t), "120000", err
	case fi.Mode().IsRegular():
		f, err := r.OS().Open(rel)
		if err != nil {
			return nil, "", err
		}
		defer f.Close()
		b, err := io.ReadAll(f)
		mode := "100644"
		if fi.Mode().Perm()&0o111 != 0 {
			mode = "100755"
		}
		return b, mode, err
	}
	return nil, "", fmt.Errorf("%s is not a file or a link", rel)
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
