package changeset

import (
	"io"
	"io/fs"
	"os"
	"slices"
	"strings"

	"github.com/paddock-dev/paddock/internal/fsat"
	"golang.org/x/sys/unix"
)

// Tree is a tree of files as labels read it where the workspace cannot
// say: the workspace holds what the agent made of the base, so which names
// a directory of the base held, and what a changed file held, come from a
// Tree of the base; the .envrc files direnv runs on the host, tracked or
// not, from one of the project's own work tree.
type Tree interface {
	// Names returns the names the tree holds directly in each of dirs (""
	// is the top); a directory it does not have is left out.
	Names(dirs []string) (map[string][]string, error)
	// File returns what file p holds: fs.ErrNotExist when there is no
	// file there.
	File(p string) ([]byte, error)
}

// Trees are what Build reads besides the workspace.
type Trees struct {
	// Base is the run's base revision: the names a change set's paths may
	// collide with, and the .envrc files it has. Nil: the entries are
	// compared among themselves, and the workspace's unchanged .envrc
	// files stand for the base's.
	Base Tree
	// Host is the project's work tree, read only for its .envrc files
	// (often ignored, so never in the base). Nil: not read.
	Host Tree
}

// maxBaseFile bounds what DirTree.File reads of one file.
const maxBaseFile = 1 << 20

// DirTree is a Tree read from a directory: a checkout of the base that
// holds its tracked files and nothing else (an overlay's lower layer), or
// the project's work tree. It follows no symbolic link: a link is a file,
// not a directory, and a link named .envrc is not read.
func DirTree(dir string) Tree { return dirTree(dir) }

type dirTree string

// Names reads each directory once, in path order, keeping the last
// one's directories open (fsat.Stack); a directory with a link on the way
// to it is not one the tree has.
func (d dirTree) Names(dirs []string) (map[string][]string, error) {
	root, err := fsat.OpenDir(string(d))
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: string(d), Err: err}
	}
	defer unix.Close(root)
	var stack fsat.Stack
	defer stack.Close()
	out := map[string][]string{}
	for _, dir := range slices.Sorted(slices.Values(dirs)) {
		fd, err := stack.Open(root, dir)
		if fsat.NotThere(err) {
			continue
		}
		if err != nil {
			return nil, &fs.PathError{Op: "open", Path: dir, Err: err}
		}
		names, err := fsat.Names(fd)
		if err != nil {
			return nil, &fs.PathError{Op: "readdir", Path: dir, Err: err}
		}
		out[dir] = names
	}
	return out, nil
}

// filesReader is a Tree that reads many files at once for less than one
// File call each.
type filesReader interface {
	Files(paths []string) map[string][]byte
}

// readFiles reads the files of t at paths (see Tree.File): those it has,
// by path; one it cannot read is left out.
func readFiles(t Tree, paths []string) map[string][]byte {
	if r, ok := t.(filesReader); ok {
		return r.Files(paths)
	}
	out := map[string][]byte{}
	for _, p := range paths {
		if b, err := t.File(p); err == nil {
			out[p] = b
		}
	}
	return out
}

// Files reads them all through one descriptor of the tree's top and the
// directories of the last path (see File).
func (d dirTree) Files(paths []string) map[string][]byte {
	out := map[string][]byte{}
	root, err := fsat.OpenDir(string(d))
	if err != nil {
		return out
	}
	defer unix.Close(root)
	var stack fsat.Stack
	defer stack.Close()
	for _, p := range slices.Sorted(slices.Values(paths)) {
		if b, err := fileAt(root, &stack, p); err == nil {
			out[p] = b
		}
	}
	return out
}

// File opens p's directory one name at a time and then p, following no
// link; a link, a FIFO, anything but a regular file is not a file here.
func (d dirTree) File(p string) ([]byte, error) {
	root, err := fsat.OpenDir(string(d))
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: string(d), Err: err}
	}
	defer unix.Close(root)
	var stack fsat.Stack
	defer stack.Close()
	return fileAt(root, &stack, p)
}

// fileAt reads the regular file p under root, its directories opened
// through stack.
func fileAt(root int, stack *fsat.Stack, p string) ([]byte, error) {
	if strings.Contains(p, "\x00") {
		return nil, fs.ErrNotExist
	}
	fd, name, err := stack.Parent(root, p)
	if err == nil {
		fd, err = fsat.OpenAt(fd, name, false)
	}
	if fsat.NotThere(err) {
		return nil, fs.ErrNotExist
	}
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: p, Err: err}
	}
	f := os.NewFile(uintptr(fd), p)
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return nil, fs.ErrNotExist
	}
	return io.ReadAll(io.LimitReader(f, maxBaseFile))
}
