package fsat

import (
	"errors"
	"path"
	"sync"

	"golang.org/x/sys/unix"
)

// Entry is a name of a tree and what lstat says of it.
type Entry struct {
	Rel string // slash-separated, relative to the tree's top
	St  unix.Stat_t
}

// WalkStats lists every entry below the directory root that is not a
// directory, with its lstat data, descending into no link and into no
// directory skip names (skip may be nil). Directories are read on up to
// workers goroutines: lstats are most of a walk's time, and a goroutine
// in a system call leaves its processor to another. An entry that goes
// away while it is read is left out; root stays the caller's.
func WalkStats(root, workers int, skip func(rel string) bool) ([]Entry, error) {
	w := &statWalk{skip: skip, free: make(chan struct{}, max(workers-1, 0))}
	w.dir(root, "")
	w.wg.Wait()
	return w.out, errors.Join(w.errs...)
}

type statWalk struct {
	skip func(string) bool
	free chan struct{} // a token per goroutine that may start
	wg   sync.WaitGroup

	mu   sync.Mutex
	out  []Entry
	errs []error
}

func (w *statWalk) fail(err error) {
	w.mu.Lock()
	w.errs = append(w.errs, err)
	w.mu.Unlock()
}

// dir reads the directory fd (at rel), and what is below it.
func (w *statWalk) dir(fd int, rel string) {
	names, err := Names(fd)
	if err != nil {
		if !NotThere(err) {
			w.fail(err)
		}
		return
	}
	var found []Entry
	for _, name := range names {
		child := path.Join(rel, name)
		if w.skip != nil && w.skip(child) {
			continue
		}
		var st unix.Stat_t
		if err := unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			if !NotThere(err) {
				w.fail(err)
			}
			continue
		}
		if st.Mode&unix.S_IFMT != unix.S_IFDIR {
			found = append(found, Entry{Rel: child, St: st})
			continue
		}
		sub, err := OpenAt(fd, name, true)
		if err != nil {
			if !NotThere(err) {
				w.fail(err)
			}
			continue
		}
		select {
		case w.free <- struct{}{}:
			w.wg.Add(1)
			go func() {
				defer w.wg.Done()
				defer func() { <-w.free }()
				defer unix.Close(sub)
				w.dir(sub, child)
			}()
		default:
			w.dir(sub, child)
			unix.Close(sub)
		}
	}
	w.mu.Lock()
	w.out = append(w.out, found...)
	w.mu.Unlock()
}
