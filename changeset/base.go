package changeset

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"strings"
)

// BaseTree is the base revision as labels read it where the workspace
// cannot say: the workspace holds what the agent made of the base, so which
// names a directory held, and what a changed file held, come from here.
type BaseTree interface {
	// Names returns the names base holds directly in each of dirs ("" is
	// the top); a directory base does not have is left out.
	Names(dirs []string) (map[string][]string, error)
	// File returns what file p held at base: fs.ErrNotExist when base has
	// no file there.
	File(p string) ([]byte, error)
}

// maxBaseFile bounds what DirTree.File reads of one file.
const maxBaseFile = 1 << 20

// DirTree is a BaseTree read from a checkout of the base that holds its
// tracked files and nothing else (an overlay's lower layer). It follows no
// symbolic link: a link is a file of the base, not a directory.
func DirTree(dir string) BaseTree { return dirTree(dir) }

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
