package workspace

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// Digest hashes the tree at root as a checkpoint records it: every path with
// its type, permission bits and content (or link target), in walk order, with
// the top-level .git left out (git's own bookkeeping changes on reads). Links
// are never followed. It returns the digest and the number of files hashed.
func Digest(ctx context.Context, root string) (string, int, error) {
	h := sha256.New()
	files := 0
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if rel == ".git" {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "%s\x00%o\x00", rel, fi.Mode())
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			io.WriteString(h, target)
		case fi.Mode().IsRegular():
			// No follow, no block: the tree may change under the walk, and a
			// file swapped for a FIFO or a link must not hang or mislead it.
			f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
			if err != nil {
				return err
			}
			if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
				f.Close()
				return fmt.Errorf("%s changed while it was hashed", rel)
			}
			_, err = io.Copy(h, f)
			f.Close()
			if err != nil {
				return err
			}
			files++
		}
		h.Write([]byte{0})
		return nil
	})
	if err != nil {
		return "", 0, fmt.Errorf("workspace: digest: %w", err)
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil)), files, nil
}
