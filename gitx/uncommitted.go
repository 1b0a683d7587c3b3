package gitx

import (
	"bytes"
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// WorkTree is a project's checkout, as paddock reads it beside the
// repository's own tools: only ever read.
type WorkTree struct {
	Git    *Git
	Root   string // the work tree
	GitDir string // its repository's (common) git directory
}

// CommitUncommittedInto commits the uncommitted changes of the checkout
// (what `git status` lists against HEAD, untracked files included and
// ignored ones not) onto base, which must be its HEAD, into objectDir, a
// directory of paddock's that borrows the project's objects: the project's
// own store, index and working tree are never written (Uncommitted's
// status only reads). Each file's content is what is in the working tree,
// hashed without filters, as a change set hashes it. changed is how many
// paths it took; with none, commit is base and nothing is written.
func (w WorkTree) CommitUncommittedInto(ctx context.Context, objectDir, base string, who Identity, message string) (commit string, changed int, err error) {
	if err := CheckRef(base); err != nil {
		return "", 0, err
	}
	root := w.Root
	out, err := w.Git.run(ctx, repoAt(root), "status", "--porcelain=v1", "-z", "--untracked-files=all", "--no-renames", "--ignore-submodules=all")
	if err != nil {
		return "", 0, err
	}
	tmp, err := os.MkdirTemp("", "paddock-uncommitted-")
	if err != nil {
		return "", 0, fmt.Errorf("gitx: uncommitted: %w", err)
	}
	defer os.RemoveAll(tmp)
	format := formatOf(base)
	var entries []IndexEntry
	for rest := out; len(rest) > 0; {
		var entry []byte
		entry, rest, _ = bytes.Cut(rest, []byte{0})
		if len(entry) < 4 {
			continue
		}
		p := string(entry[3:])
		e, err := worktreeEntry(root, p, format, tmp, len(entries))
		if err != nil {
			return "", 0, err
		}
		entries = append(entries, e)
	}
	if len(entries) == 0 {
		return base, 0, nil
	}
	commit, err = w.Git.CommitTreeInto(ctx, w.GitDir, objectDir, base, entries, who, message)
	return commit, len(entries), err
}

// worktreeEntry is path p of the work tree at root as an index entry: its
// content, mode and blob, or a removal when it is not there. A link's
// target is written to a file of tmp, which the entry names.
func worktreeEntry(root, p string, format objectFormat, tmp string, n int) (IndexEntry, error) {
	full := filepath.Join(root, filepath.FromSlash(p))
	fi, err := os.Lstat(full)
	if os.IsNotExist(err) {
		return IndexEntry{Path: p}, nil
	}
	if err != nil {
		return IndexEntry{}, fmt.Errorf("gitx: uncommitted: %w", err)
	}
	switch {
	case fi.Mode()&os.ModeSymlink != 0:
		target, err := os.Readlink(full)
		if err != nil {
			return IndexEntry{}, fmt.Errorf("gitx: uncommitted: %w", err)
		}
		f := filepath.Join(tmp, fmt.Sprintf("link-%d", n))
		if err := os.WriteFile(f, []byte(target), 0o600); err != nil {
			return IndexEntry{}, fmt.Errorf("gitx: uncommitted: %w", err)
		}
		return IndexEntry{Path: p, Mode: "120000", Blob: blobOf(format, []byte(target)), File: f}, nil
	case fi.Mode().IsRegular():
		mode := "100644"
		if fi.Mode()&0o111 != 0 {
			mode = "100755"
		}
		blob, err := blobOfFile(format, full)
		if err != nil {
			return IndexEntry{}, err
		}
		if strings.ContainsAny(full, "\n\r") {
			return IndexEntry{}, fmt.Errorf("gitx: uncommitted: a path with a line break: %q", p)
		}
		return IndexEntry{Path: p, Mode: mode, Blob: blob, File: full}, nil
	}
	return IndexEntry{}, fmt.Errorf("gitx: uncommitted: %s is neither a file nor a link", p)
}

func blobOf(format objectFormat, b []byte) string {
	h := format.new()
	fmt.Fprintf(h, "blob %d\x00", len(b))
	h.Write(b)
	return hex.EncodeToString(h.Sum(nil))
}

func blobOfFile(format objectFormat, path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("gitx: uncommitted: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", fmt.Errorf("gitx: uncommitted: %w", err)
	}
	h := format.new()
	fmt.Fprintf(h, "blob %d\x00", fi.Size())
	if n, err := io.Copy(h, f); err != nil || n != fi.Size() {
		return "", fmt.Errorf("gitx: uncommitted: %s changed while it was read", path)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
