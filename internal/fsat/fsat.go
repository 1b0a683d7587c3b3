// Package fsat reads a tree of files one name at a time, relative to a
// directory's descriptor, never following a symbolic link: a link an
// agent put where a directory was cannot lead the reader out of the tree,
// and a FIFO put where a file was cannot block it.
package fsat

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strings"

	"golang.org/x/sys/unix"
)

// OpenAt opens name in the directory dirfd without following a link
// (O_NONBLOCK: a FIFO opened does not block); dir asks for a directory.
func OpenAt(dirfd int, name string, dir bool) (int, error) {
	flags := unix.O_RDONLY | unix.O_NOFOLLOW | unix.O_CLOEXEC | unix.O_NONBLOCK
	if dir {
		flags |= unix.O_DIRECTORY
	}
	for {
		fd, err := unix.Openat(dirfd, name, flags, 0)
		if err != unix.EINTR {
			return fd, err
		}
	}
}

// OpenDir opens the directory dir, the top of a tree read through it.
func OpenDir(dir string) (int, error) {
	return unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
}

// Stack keeps open the directories of the last path opened through it,
// one descriptor a name, each opened without following a link: paths
// visited in order open each directory once, not once a file. Its
// descriptors are the caller's to close (Close).
type Stack struct {
	names []string
	fds   []int
}

// Open returns the descriptor of the directory rel ("" or "." is root)
// under root, which the stack keeps (the caller must not close it). A
// name on the way that is a link, or not a directory, fails it (ELOOP,
// ENOTDIR: see NotThere).
func (s *Stack) Open(root int, rel string) (int, error) {
	var parts []string
	if rel != "" && rel != "." {
		parts = strings.Split(rel, "/")
	}
	k := 0
	for k < len(parts) && k < len(s.names) && parts[k] == s.names[k] {
		k++
	}
	s.truncate(k)
	for _, name := range parts[k:] {
		parent := root
		if len(s.fds) > 0 {
			parent = s.fds[len(s.fds)-1]
		}
		fd, err := OpenAt(parent, name, true)
		if err != nil {
			return -1, err
		}
		s.names, s.fds = append(s.names, name), append(s.fds, fd)
	}
	if len(s.fds) == 0 {
		return root, nil
	}
	return s.fds[len(s.fds)-1], nil
}

// Parent returns the descriptor of the directory holding the
// slash-separated rel, which the stack keeps (as Open), and rel's last name.
func (s *Stack) Parent(root int, rel string) (int, string, error) {
	dir, name := path.Split(rel)
	fd, err := s.Open(root, strings.TrimSuffix(dir, "/"))
	return fd, name, err
}

// truncate closes the descriptors below the first k names.
func (s *Stack) truncate(k int) {
	for _, fd := range s.fds[k:] {
		unix.Close(fd)
	}
	s.names, s.fds = s.names[:k], s.fds[:k]
}

// Close closes every descriptor the stack keeps.
func (s *Stack) Close() { s.truncate(0) }

// OpenRegular opens rel (slash-separated, below root) for reading
// through the stack's directories, following no link at any step, and
// only if it is a regular file (ErrNotRegular otherwise).
func (s *Stack) OpenRegular(root int, rel string) (*os.File, error) {
	dir, name, err := s.Parent(root, rel)
	if err != nil {
		return nil, err
	}
	fd, err := OpenAt(dir, name, false)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), rel)
	fi, err := f.Stat()
	if err == nil && !fi.Mode().IsRegular() {
		err = fmt.Errorf("%s: %w", rel, ErrNotRegular)
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// ErrNotRegular is a name that is no longer (or never was) a regular file.
var ErrNotRegular = errors.New("not a regular file")

// Readlink is the target of the link name in the directory dirfd, of any
// length.
func Readlink(dirfd int, name string) (string, error) {
	for size := 256; ; size *= 2 {
		buf := make([]byte, size)
		n, err := unix.Readlinkat(dirfd, name, buf)
		if err != nil {
			return "", err
		}
		if n < len(buf) {
			return string(buf[:n]), nil
		}
	}
}

// NotThere reports an error that means the name is not there as the
// reader asked for it: missing, a link, or not a directory on the way.
func NotThere(err error) bool {
	return errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.ELOOP)
}

// Names lists the directory dirfd, unsorted, from its start; dirfd stays
// the caller's.
func Names(dirfd int) ([]string, error) {
	return readNames(dirfd, -1)
}

// Empty reports whether the directory dirfd holds nothing; dirfd stays
// the caller's.
func Empty(dirfd int) bool {
	_, err := readNames(dirfd, 1)
	return errors.Is(err, io.EOF)
}

// readNames reads up to n names (n <= 0: all) of the directory dirfd from
// its start, through a descriptor of its own sharing dirfd's offset.
func readNames(dirfd, n int) ([]string, error) {
	fd, err := unix.Dup(dirfd)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), "dir")
	defer f.Close()
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return nil, err
	}
	return f.Readdirnames(n)
}
