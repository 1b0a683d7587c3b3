//go:build linux

package sandbox

import (
	"errors"
	"fmt"
	"path"
	"sort"
	"strings"

	"golang.org/x/sys/unix"
)

// protectNode is one directory or file on the way to the protected paths:
// a protected path itself (target), or a directory above one.
type protectNode struct {
	target   bool
	children map[string]*protectNode
}

// protect makes the protected paths (relative to the workspace) read-only
// in the view whose workspace is mounted at ws, by binding each onto itself
// read-only.
//
//   - A protected path that does not exist yet is made first, as an empty
//     directory (when create is set: the workspace is writable and
//     paddock's own), so that there is something to mount over: a command
//     can then create neither it nor anything in it. An empty directory is
//     no content: git, and so every change set, leaves it out. Where
//     nothing may be made (an operator's own directory, writable) a
//     missing path is reported as skipped.
//   - Each directory between the workspace and a protected path is bound
//     onto itself: a mount point cannot be renamed or removed, so a command
//     cannot move a protected path's parent aside and make a new one in its
//     place.
//   - Every step goes through descriptors opened beneath ws without
//     following symbolic links: a link on the way (which a command may have
//     made) is never followed out of the workspace; the path it stands on is
//     reported as skipped instead.
//
// It returns the paths made read-only and those it had to skip, with why.
func protect(ws string, paths []string, create, writable bool) (ro, skipped []string, err error) {
	root := &protectNode{children: map[string]*protectNode{}}
	for _, p := range paths {
		p = path.Clean("/" + p)[1:]
		if p == "" {
			continue
		}
		n := root
		for _, c := range strings.Split(p, "/") {
			if n.target {
				break // under a path made read-only whole
			}
			next := n.children[c]
			if next == nil {
				next = &protectNode{children: map[string]*protectNode{}}
				n.children[c] = next
			}
			n = next
		}
		if !n.target {
			n.target, n.children = true, nil
		}
	}
	fd, err := unix.Open(ws, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("protect: open the workspace: %w", err)
	}
	defer unix.Close(fd)
	w := &protectWalk{create: create, writable: writable}
	if err := w.children(fd, "", root); err != nil {
		return nil, nil, err
	}
	return w.ro, w.skipped, nil
}

type protectWalk struct {
	create, writable bool
	ro, skipped      []string
}

// children protects what lies below the directory dirfd (at rel), shallow
// before deep: a bind of a directory hides whatever was mounted below it.
func (w *protectWalk) children(dirfd int, rel string, n *protectNode) error {
	names := make([]string, 0, len(n.children))
	for c := range n.children {
		names = append(names, c)
	}
	sort.Strings(names)
	for _, c := range names {
		if err := w.node(dirfd, path.Join(rel, c), c, n.children[c]); err != nil {
			return err
		}
	}
	return nil
}

func (w *protectWalk) node(parent int, rel, name string, n *protectNode) error {
	fd, err := unix.Openat(parent, name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOENT) && w.create {
		if err = unix.Mkdirat(parent, name, 0o755); err == nil || errors.Is(err, unix.EEXIST) {
			fd, err = unix.Openat(parent, name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		}
	}
	switch {
	case errors.Is(err, unix.ENOENT) && !w.writable:
		return nil // a read-only workspace: nothing can be made there anyway
	case errors.Is(err, unix.ENOENT) && !w.create:
		w.skipped = append(w.skipped, rel+": does not exist, and nothing is made in the operator's own directory")
		return nil
	case errors.Is(err, unix.EACCES) || errors.Is(err, unix.EPERM) || errors.Is(err, unix.EROFS):
		w.skipped = append(w.skipped, rel+": could not be made ("+err.Error()+")")
		return nil
	case err != nil:
		return fmt.Errorf("protect %s: %w", rel, err)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fmt.Errorf("protect %s: %w", rel, err)
	}
	isDir := st.Mode&unix.S_IFMT == unix.S_IFDIR
	switch {
	case st.Mode&unix.S_IFMT == unix.S_IFLNK:
		w.skipped = append(w.skipped, rel+": a symbolic link")
		return nil
	case !isDir && !n.target:
		w.skipped = append(w.skipped, rel+": not a directory")
		return nil
	case !isDir && st.Mode&unix.S_IFMT != unix.S_IFREG:
		w.skipped = append(w.skipped, rel+": not a file or a directory")
		return nil
	}
	mounted, err := bindSelf(parent, name, fd, &st, n.target)
	if err != nil {
		return fmt.Errorf("protect %s: %w", rel, err)
	}
	defer unix.Close(mounted)
	if n.target {
		w.ro = append(w.ro, rel)
		if !isDir && st.Nlink > 1 {
			// The mount covers this name, not the file's other names.
			w.skipped = append(w.skipped, rel+": a file with other hard links, writable through them")
		}
		return nil
	}
	return w.children(mounted, rel, n)
}

// bindSelf binds the file or directory fd (name in parent) onto itself,
// read-only if ro, and returns a descriptor of the new mount's root,
// reopened by name and checked to be the same inode.
func bindSelf(parent int, name string, fd int, st *unix.Stat_t, ro bool) (int, error) {
	self := fmt.Sprintf("/proc/self/fd/%d", fd)
	if err := unix.Mount(self, self, "", unix.MS_BIND, ""); err != nil {
		return -1, fmt.Errorf("bind: %w", err)
	}
	// The path walk from parent crosses into what is now mounted there.
	m, err := unix.Openat(parent, name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("reopen: %w", err)
	}
	var mst unix.Stat_t
	if err := unix.Fstat(m, &mst); err != nil || mst.Dev != st.Dev || mst.Ino != st.Ino {
		unix.Close(m)
		return -1, errors.New("it was replaced while it was being mounted")
	}
	if ro {
		if err := remountRO(fmt.Sprintf("/proc/self/fd/%d", m)); err != nil {
			unix.Close(m)
			return -1, fmt.Errorf("remount read-only: %w", err)
		}
	}
	return m, nil
}
