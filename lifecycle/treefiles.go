package lifecycle

import (
	"fmt"
	"io"
	"io/fs"

	"github.com/paddock-dev/paddock/internal/fsat"
	"golang.org/x/sys/unix"
)

// treeFiles reads the files of one tree an agent writes (a run's tree, an
// overlay's upper layer) for blame's look, by descriptor: no link on the
// way to a name is followed (fsat.Stack), so a directory an agent turned
// into a link to the host (`ln -s /etc d`) leads the daemon nowhere, where
// a read by path would have read, and kept, what the link points to.
type treeFiles struct {
	root  int
	stack fsat.Stack
}

// openTree opens the tree at dir; the caller closes it.
func openTree(dir string) (*treeFiles, error) {
	fd, err := fsat.OpenDir(dir)
	if err != nil {
		return nil, err
	}
	return &treeFiles{root: fd}, nil
}

func (t *treeFiles) close() {
	t.stack.Close()
	unix.Close(t.root)
}

// lstat is lstat of the slash-separated rel; a link or a non-directory on
// the way fails it as fsat.NotThere.
func (t *treeFiles) lstat(rel string, st *unix.Stat_t) error {
	dir, name, err := t.stack.Parent(t.root, rel)
	if err != nil {
		return err
	}
	return unix.Fstatat(dir, name, st, unix.AT_SYMLINK_NOFOLLOW)
}

// readlink is the target of the link rel.
func (t *treeFiles) readlink(rel string) (string, error) {
	dir, name, err := t.stack.Parent(t.root, rel)
	if err != nil {
		return "", err
	}
	return fsat.Readlink(dir, name)
}

// read is the content of the regular file rel, if it still has size
// bytes (a file being written is read at the next look).
func (t *treeFiles) read(rel string, size int64) ([]byte, error) {
	f, err := t.stack.OpenRegular(t.root, rel)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || fi.Size() != size {
		return nil, fmt.Errorf("%s changed while read", rel)
	}
	b := make([]byte, size)
	if _, err := io.ReadFull(f, b); err != nil {
		return nil, err
	}
	return b, nil
}

// fileType is the type a look records of a name with lstat mode mode: a
// regular file (0), a link, a character device (an overlay's whiteout);
// false for what is never part of a change set (a directory, a FIFO, a
// socket).
func fileType(mode uint32) (fs.FileMode, bool) {
	switch mode & unix.S_IFMT {
	case unix.S_IFREG:
		return 0, true
	case unix.S_IFLNK:
		return fs.ModeSymlink, true
	case unix.S_IFCHR:
		return fs.ModeDevice | fs.ModeCharDevice, true
	}
	return 0, false
}
