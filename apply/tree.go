package apply

import (
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"

	"github.com/paddock-dev/paddock/changeset"
	"github.com/paddock-dev/paddock/internal/durable"
	"github.com/paddock-dev/paddock/internal/fsat"
	"golang.org/x/sys/unix"
)

// tree is a project's working tree opened for an apply or an undo. Unlike
// an os.Root or a confine.Root, which follow a symbolic link as long as it
// stays inside, a tree follows none: every directory on the way to a path
// is opened by itself with O_NOFOLLOW, at the moment of use, and every
// operation acts on the last name through its parent's descriptor (the
// *at system calls). A link in the user's tree — there when the apply
// checked, or swapped in since — is never written through, read through or
// removed through; it is only ever read, replaced or removed itself.
type tree struct {
	dir  string   // the project's path, for messages and syncfs
	root *os.File // the project's directory
}

// errLinkInPath is how a tree reports that a directory on the way to a path
// is not a directory: a symbolic link, a file, or something else.
type errLinkInPath struct {
	Dir  string // the component, relative to the root
	What string // "a symbolic link", "a file", "not a directory"
}

func (e *errLinkInPath) Error() string {
	return fmt.Sprintf("%s is %s in the working tree; paddock never writes through one", e.Dir, e.What)
}

func openTree(dir string) (*tree, error) {
	f, err := os.OpenFile(dir, os.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return nil, err
	}
	return &tree{dir: dir, root: f}, nil
}

func (t *tree) Close() error { return t.root.Close() }

// splitPath checks rel (a change set's path: slash-separated, relative,
// clean) and splits it.
func splitPath(rel string) ([]string, error) {
	parts := strings.Split(rel, "/")
	for _, c := range parts {
		if c == "" || c == "." || c == ".." || strings.IndexByte(c, 0) >= 0 {
			return nil, fmt.Errorf("invalid path %q", rel)
		}
	}
	return parts, nil
}

// parent opens the directory holding rel, component by component without
// following links, and returns its descriptor (the caller closes it) and
// rel's last name. An ancestor that is missing is fs.ErrNotExist; one that
// is not a directory is *errLinkInPath.
func (t *tree) parent(rel string) (int, string, error) {
	parts, err := splitPath(rel)
	if err != nil {
		return -1, "", err
	}
	fd, err := unix.Dup(int(t.root.Fd()))
	if err != nil {
		return -1, "", err
	}
	for i, c := range parts[:len(parts)-1] {
		next, err := fsat.OpenAt(fd, c, true)
		if err != nil {
			if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) {
				err = &errLinkInPath{Dir: strings.Join(parts[:i+1], "/"), What: whatIs(fd, c)}
			} else if errors.Is(err, unix.ENOENT) {
				err = fs.ErrNotExist
			}
			unix.Close(fd)
			return -1, "", err
		}
		unix.Close(fd)
		fd = next
	}
	return fd, parts[len(parts)-1], nil
}

// whatIs names what name in dirfd is, for a message.
func whatIs(dirfd int, name string) string {
	var st unix.Stat_t
	if unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW) != nil {
		return "not a directory"
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFLNK:
		return "a symbolic link"
	case unix.S_IFREG:
		return "a file"
	}
	return "not a directory"
}

// at runs fn on rel's parent and last name.
func (t *tree) at(rel string, fn func(dirfd int, name string) error) error {
	fd, name, err := t.parent(rel)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	return fn(fd, name)
}

// lstat describes rel itself (a link is not followed).
func (t *tree) lstat(rel string) (st unix.Stat_t, err error) {
	err = t.at(rel, func(fd int, name string) error {
		err := unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW)
		if errors.Is(err, unix.ENOENT) {
			return fs.ErrNotExist
		}
		return err
	})
	return st, err
}

// read streams what git would store for rel (a file's bytes, a link's
// target) into w, and returns its blob id, git mode and permission bits.
func (t *tree) read(rel string, w io.Writer) (blob, mode string, perm fs.FileMode, err error) {
	err = t.at(rel, func(dirfd int, name string) error {
		var st unix.Stat_t
		if err := unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			if errors.Is(err, unix.ENOENT) {
				return fs.ErrNotExist
			}
			return err
		}
		perm = fs.FileMode(st.Mode & 0o7777)
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFLNK:
			target, err := fsat.Readlink(dirfd, name)
			if err != nil {
				return err
			}
			if _, err := io.WriteString(w, target); err != nil {
				return err
			}
			blob, mode = changeset.BlobID([]byte(target)), "120000"
			return nil
		case unix.S_IFREG:
			// Non-blocking and no-follow: a FIFO or a link swapped in
			// since the stat is refused, not waited on or followed.
			fd, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
			if err != nil {
				return err
			}
			f := os.NewFile(uintptr(fd), rel)
			defer f.Close()
			fi, err := f.Stat()
			if err != nil {
				return err
			}
			if !fi.Mode().IsRegular() {
				return fmt.Errorf("%s is not a file or a link", rel)
			}
			h := sha1.New()
			fmt.Fprintf(h, "blob %d\x00", fi.Size())
			n, err := durable.Copy(io.MultiWriter(h, w), f)
			if err != nil {
				return err
			}
			if n != fi.Size() {
				return fmt.Errorf("%s changed while it was read", rel)
			}
			blob, mode, perm = hex.EncodeToString(h.Sum(nil)), "100644", fi.Mode().Perm()
			if perm&0o111 != 0 {
				mode = "100755"
			}
			return nil
		case unix.S_IFDIR:
			return errIsDir
		}
		return fmt.Errorf("%s is not a file or a link", rel)
	})
	return blob, mode, perm, err
}

var errIsDir = errors.New("a directory")

// readDir lists the names in the directory rel ("" for the root).
func (t *tree) readDir(rel string) ([]string, error) {
	var names []string
	open := func(dirfd int, name string) error {
		fd, err := fsat.OpenAt(dirfd, name, true)
		if err != nil {
			return err
		}
		f := os.NewFile(uintptr(fd), rel)
		defer f.Close()
		names, err = f.Readdirnames(-1)
		return err
	}
	var err error
	if rel == "" {
		err = open(int(t.root.Fd()), ".")
	} else {
		err = t.at(rel, open)
	}
	return names, err
}

// remove removes the file or link rel; one that is not there is no error
// (nor one behind a link or a file: it is not there either, reached without
// a link), nor is a directory (a retried step finds the directory made in
// its place).
func (t *tree) remove(rel string) error {
	err := t.at(rel, func(fd int, name string) error { return unix.Unlinkat(fd, name, 0) })
	var lp *errLinkInPath
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, unix.ENOENT) || errors.Is(err, unix.EISDIR) || errors.As(err, &lp) {
		return nil
	}
	return err
}

// rmdir removes the empty directory rel; one that is not there (reached
// without a link), or is no longer a directory (a retried step finds the
// file put in its place), is no error.
func (t *tree) rmdir(rel string) error {
	err := t.at(rel, func(fd int, name string) error { return unix.Unlinkat(fd, name, unix.AT_REMOVEDIR) })
	var lp *errLinkInPath
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) || errors.As(err, &lp) {
		return nil
	}
	return err
}

// mkdir makes the directory rel with exactly perm (the umask does not
// apply); an existing directory is left as it is.
func (t *tree) mkdir(rel string, perm fs.FileMode) error {
	return t.at(rel, func(dirfd int, name string) error {
		err := unix.Mkdirat(dirfd, name, uint32(perm))
		if errors.Is(err, unix.EEXIST) {
			var st unix.Stat_t
			if unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR {
				return nil
			}
			return &errLinkInPath{Dir: rel, What: whatIs(dirfd, name)}
		}
		if err != nil {
			return err
		}
		fd, err := fsat.OpenAt(dirfd, name, true)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		return unix.Fchmod(fd, uint32(perm))
	})
}

// create makes the new file rel with exactly perm; it fails if anything is
// there already.
func (t *tree) create(rel string, perm fs.FileMode) (*os.File, error) {
	var f *os.File
	err := t.at(rel, func(dirfd int, name string) error {
		fd, err := unix.Openat(dirfd, name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, uint32(perm))
		if err != nil {
			return err
		}
		f = os.NewFile(uintptr(fd), rel)
		if err := f.Chmod(perm); err != nil {
			f.Close()
			return err
		}
		return nil
	})
	return f, err
}

// symlink makes the link rel to target.
func (t *tree) symlink(target, rel string) error {
	return t.at(rel, func(fd int, name string) error { return unix.Symlinkat(target, fd, name) })
}

// rename moves from over to; neither is followed if it is a link.
func (t *tree) rename(from, to string) error {
	return t.at(from, func(ffd int, fname string) error {
		return t.at(to, func(tfd int, tname string) error { return unix.Renameat(ffd, fname, tfd, tname) })
	})
}
