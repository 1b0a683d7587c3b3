package changeset

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"strings"
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

func (d dirTree) Names(dirs []string) (map[string][]string, error) {
	root, err := os.OpenRoot(string(d))
	if err != nil {
		return nil, err
	}
	defer root.Close()
	out := map[string][]string{}
	for _, dir := range dirs {
		names, err := readNames(root, dir)
		switch {
		case errors.Is(err, fs.ErrNotExist) || errors.Is(err, errNotDir):
		case err != nil:
			return nil, err
		default:
			out[dir] = names
		}
	}
	return out, nil
}

var errNotDir = errors.New("not a directory")

// readNames lists the directory dir of root (see isDir).
func readNames(root *os.Root, dir string) ([]string, error) {
	if err := isDir(root, dir); err != nil {
		return nil, err
	}
	name := dir
	if name == "" {
		name = "."
	}
	f, err := root.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.Readdirnames(-1)
}

// isDir checks that every name on the way to dir, and dir, is a directory
// of root and not a link.
func isDir(root *os.Root, dir string) error {
	if dir == "" {
		return nil
	}
	for _, q := range prefixes(dir) {
		fi, err := root.Lstat(q)
		if err != nil {
			return err
		}
		if !fi.IsDir() {
			return errNotDir
		}
	}
	return nil
}

func (d dirTree) File(p string) ([]byte, error) {
	root, err := os.OpenRoot(string(d))
	if err != nil {
		return nil, err
	}
	defer root.Close()
	if err := isDir(root, parentDir(p)); errors.Is(err, errNotDir) {
		return nil, fs.ErrNotExist
	} else if err != nil {
		return nil, err
	}
	fi, err := root.Lstat(p)
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() || strings.Contains(p, "\x00") {
		return nil, fs.ErrNotExist
	}
	f, err := root.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, maxBaseFile))
}
