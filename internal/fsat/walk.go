package fsat

import (
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
// Walkers goroutines (Spread). An entry that goes away while it is read
// is left out; root stays the caller's.
func WalkStats(root int, skip func(rel string) bool) ([]Entry, error) {
	return WalkStatsDirs(root, skip, nil)
}

// WalkStatsDirs is WalkStats that hands each directory it reads to
// entered, open, before it reads it (root itself as ""), from the walk's
// goroutines: a watch made there misses nothing the walk could.
func WalkStatsDirs(root int, skip func(rel string) bool, entered func(fd int, rel string)) ([]Entry, error) {
	w := &statWalk{skip: skip, entered: entered, spread: NewSpread(Walkers)}
	w.dir(root, "")
	return w.out, w.spread.Wait()
}

type statWalk struct {
	skip    func(string) bool
	entered func(fd int, rel string)
	spread  *Spread

	mu  sync.Mutex
	out []Entry
}

// failed records err unless it says the name went away.
func (w *statWalk) failed(err error) {
	if !NotThere(err) {
		w.spread.Fail(err)
	}
}

// dir reads the directory fd (at rel), and what is below it.
func (w *statWalk) dir(fd int, rel string) {
	if w.entered != nil {
		w.entered(fd, rel)
	}
	names, err := Names(fd)
	if err != nil {
		w.failed(err)
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
			w.failed(err)
			continue
		}
		if st.Mode&unix.S_IFMT != unix.S_IFDIR {
			found = append(found, Entry{Rel: child, St: st})
			continue
		}
		sub, err := OpenAt(fd, name, true)
		if err != nil {
			w.failed(err)
			continue
		}
		if !w.spread.TryGo(func() error { defer unix.Close(sub); w.dir(sub, child); return nil }) {
			w.dir(sub, child)
			unix.Close(sub)
		}
	}
	w.mu.Lock()
	w.out = append(w.out, found...)
	w.mu.Unlock()
}
