// Package dirwatch says which names of a directory tree changed between
// two looks, from the kernel's inotify: a look after each command then
// reads what the command touched instead of the whole tree.
//
// A Watcher is one inotify instance; a Tree of it watches each directory
// the caller's walk hands it (Add). A name created, written, closed after
// writing, changed in its attributes, deleted or renamed in a watched
// directory is reported by the Tree's Changes. A write through a shared
// memory mapping is reported when the file's last user lets it go (its
// close-after-write event comes at the last unmap or the process's end).
// What inotify does not report, the caller looks at itself: a write
// through another link of a file (nlink > 1), reported only in the
// directory it was made in.
package dirwatch

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// mask is what a directory's watch reports: every change to a name in it
// and the directory's own end.
const mask = unix.IN_MODIFY | unix.IN_ATTRIB | unix.IN_CLOSE_WRITE | unix.IN_CREATE |
	unix.IN_DELETE | unix.IN_MOVED_FROM | unix.IN_MOVED_TO | unix.IN_DELETE_SELF |
	unix.IN_MOVE_SELF | unix.IN_ONLYDIR

// Watcher is one inotify instance that watches many trees (a daemon's
// runs): the kernel gives a user few instances (fs.inotify.max_user_instances,
// 128 by default, shared with the user's other programs), so a daemon
// uses one. Its methods and its Trees' may be called from several
// goroutines.
type Watcher struct {
	fd     int
	budget int // the most watches it makes (Budget)

	mu     sync.Mutex
	dirs   map[int32]dirOf // watch descriptor → the tree and directory it watches
	trees  map[*Tree]bool
	closed bool
}

// Free is how many more watches the Watcher may make within its budget
// (the user's own limit may still refuse one).
func (w *Watcher) Free() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return max(w.budget-len(w.dirs), 0)
}

// Budget is the most watches a Watcher makes: half the user's limit
// (fs.inotify.max_user_watches), which the user's other programs share
// (as root: the system's own services), and at most 1<<16.
func Budget() int {
	n := 8192 // the kernel's least default
	if b, err := os.ReadFile("/proc/sys/fs/inotify/max_user_watches"); err == nil {
		if v, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && v > 0 {
			n = v
		}
	}
	return min(n/2, 1<<16)
}

type dirOf struct {
	tree *Tree
	rel  string // "" for the tree's top
}

// NewWatcher starts a Watcher that makes at most budget watches.
func NewWatcher(budget int) (*Watcher, error) {
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("inotify: %w", err)
	}
	return &Watcher{fd: fd, budget: budget, dirs: map[int32]dirOf{}, trees: map[*Tree]bool{}}, nil
}

// Tree starts watching a tree whose directories the caller adds (Add)
// before it walks them, so that nothing changed meanwhile goes
// unreported. skip names what is not the tree's (the caller's walk does
// not enter it either); it may be nil.
func (w *Watcher) Tree(skip func(rel string) bool) *Tree {
	t := &Tree{w: w, skip: skip, names: map[string]bool{}, trees: map[string]bool{}, made: map[string]bool{}}
	w.mu.Lock()
	w.trees[t] = true
	w.mu.Unlock()
	return t
}

// Close ends the Watcher and every Tree's watches.
func (w *Watcher) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return nil
	}
	w.closed = true
	return unix.Close(w.fd)
}

// ErrLimit is the Watcher's budget of watches, or the user's limit, reached.
var ErrLimit = errors.New("inotify: no more watches (fs.inotify.max_user_watches)")

// Tree is one tree's watches and what they reported since its last
// Changes.
type Tree struct {
	w    *Watcher
	skip func(rel string) bool

	// Under w.mu:
	names, trees map[string]bool
	made         map[string]bool // files made since the last look
	all          bool
	transient    bool
	watched      int
	closed       bool
}

// Add watches the directory open as fd, at rel in the tree ("" for its
// top). The watch is made through the descriptor, so no link on the way
// to rel is followed. An error (ErrLimit: the budget or the user's limit
// of watches) means the Tree can no longer tell everything: the caller
// closes it and walks the tree.
func (t *Tree) Add(fd int, rel string) error {
	t.w.mu.Lock()
	defer t.w.mu.Unlock()
	if t.closed || t.w.closed {
		return errors.New("inotify: closed")
	}
	wd, err := unix.InotifyAddWatch(t.w.fd, "/proc/self/fd/"+strconv.Itoa(fd), mask)
	if err != nil {
		if errors.Is(err, unix.ENOSPC) {
			return ErrLimit
		}
		return fmt.Errorf("inotify: watch %q: %w", rel, err)
	}
	old, ok := t.w.dirs[int32(wd)]
	switch {
	case ok && old.tree != t:
		// One watch an inode in an instance: another tree has this
		// directory (two runs handed the same directory, or nested
		// ones). It stays the other's; this tree cannot be told.
		return ErrShared
	case !ok && len(t.w.dirs) >= t.w.budget:
		unix.InotifyRmWatch(t.w.fd, uint32(wd))
		return ErrLimit
	case !ok:
		t.watched++
	}
	t.w.dirs[int32(wd)] = dirOf{t, rel}
	return nil
}

// ErrShared is a directory another Tree of the Watcher watches.
var ErrShared = errors.New("inotify: the directory is another tree's")

// Changes are what changed in a tree since its last look.
type Changes struct {
	// Names changed in place: created, written, deleted, renamed, their
	// attributes changed. A name may have become a directory (its Tree is
	// listed too) or stopped being one.
	Names []string
	// Trees are directories created, deleted or renamed (from or to):
	// everything below one is to be looked at again, and a tree still
	// there is walked with Add, since names made in it before its watch
	// went unreported.
	Trees []string
	// All says the kernel dropped events (its queue overflowed) or the
	// top directory itself went: the whole tree is to be walked. The
	// watches stay; Names and Trees are incomplete.
	All bool
	// Transient says a name was made and removed since the last look: it
	// may have been another link of a file (link(2) is told as a file
	// made), and a write through it changed that file, which no event
	// names. The whole tree is to be walked.
	Transient bool
}

// Changes reads what the kernel queued since the last call (for every
// tree: the others' are kept for them) and returns this tree's. It never
// blocks: every change a finished system call made is queued by then.
func (t *Tree) Changes() (Changes, error) {
	w := t.w
	w.mu.Lock()
	defer w.mu.Unlock()
	if t.closed || w.closed {
		return Changes{}, errors.New("inotify: closed")
	}
	if err := w.drain(); err != nil {
		return Changes{}, err
	}
	ch := Changes{All: t.all, Transient: t.transient}
	for p := range t.names {
		ch.Names = append(ch.Names, p)
	}
	for p := range t.trees {
		ch.Trees = append(ch.Trees, p)
	}
	t.names, t.trees, t.made, t.all, t.transient = map[string]bool{}, map[string]bool{}, map[string]bool{}, false, false
	return ch, nil
}

// drain files every queued event with its tree, under w.mu.
func (w *Watcher) drain() error {
	buf := make([]byte, 64<<10)
	for {
		n, err := unix.Read(w.fd, buf)
		if errors.Is(err, unix.EAGAIN) {
			return nil
		}
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return fmt.Errorf("inotify: read: %w", err)
		}
		for off := 0; off+unix.SizeofInotifyEvent <= n; {
			wd := int32(binary.NativeEndian.Uint32(buf[off:]))
			m := binary.NativeEndian.Uint32(buf[off+4:])
			l := int(binary.NativeEndian.Uint32(buf[off+12:]))
			name := strings.TrimRight(string(buf[off+unix.SizeofInotifyEvent:off+unix.SizeofInotifyEvent+l]), "\x00")
			off += unix.SizeofInotifyEvent + l
			w.event(wd, m, name)
		}
	}
}

// event files one event with its tree, under w.mu.
func (w *Watcher) event(wd int32, m uint32, name string) {
	if m&unix.IN_Q_OVERFLOW != 0 {
		for t := range w.trees {
			t.all = true // whose events were dropped, nobody knows
		}
		return
	}
	d, ok := w.dirs[wd]
	if m&unix.IN_IGNORED != 0 {
		delete(w.dirs, wd) // the directory went, or its watch was removed
		if ok {
			d.tree.watched--
		}
	}
	if !ok {
		return // a watch removed (its tree closed, its directory renamed away: a Tree covers it)
	}
	t := d.tree
	if name == "" {
		// The directory's own end: its parent's event names it. The top
		// has no parent here.
		if d.rel == "" && m&(unix.IN_DELETE_SELF|unix.IN_MOVE_SELF) != 0 {
			t.all = true
		}
		return
	}
	rel := path.Join(d.rel, name)
	if t.skip != nil && t.skip(rel) {
		return
	}
	t.names[rel] = true
	if m&unix.IN_ISDIR == 0 {
		switch {
		case m&unix.IN_CREATE != 0:
			t.made[rel] = true
		case m&unix.IN_DELETE != 0 && t.made[rel]:
			t.transient = true
		}
	}
	if m&unix.IN_ISDIR != 0 && m&(unix.IN_CREATE|unix.IN_DELETE|unix.IN_MOVED_FROM|unix.IN_MOVED_TO) != 0 {
		t.trees[rel] = true
		if m&unix.IN_MOVED_FROM != 0 {
			// Its watches and those below it go with it, wherever it
			// went: a name they report is no longer under rel.
			w.unwatch(t, func(d string) bool { return d == rel || strings.HasPrefix(d, rel+"/") })
		}
	}
}

// unwatch removes tree t's watches of the directories that match, under w.mu.
func (w *Watcher) unwatch(t *Tree, match func(rel string) bool) {
	for wd, d := range w.dirs {
		if d.tree == t && match(d.rel) {
			unix.InotifyRmWatch(w.fd, uint32(wd)) // an error: it went already
			delete(w.dirs, wd)
			t.watched--
		}
	}
}

// Watched is how many of the tree's directories are watched.
func (t *Tree) Watched() int {
	t.w.mu.Lock()
	defer t.w.mu.Unlock()
	return t.watched
}

// Close ends the tree's watches.
func (t *Tree) Close() {
	w := t.w
	w.mu.Lock()
	defer w.mu.Unlock()
	if t.closed {
		return
	}
	t.closed = true
	delete(w.trees, t)
	if !w.closed {
		w.unwatch(t, func(string) bool { return true })
	}
}
