package changeset

import (
	"slices"
	"sync"
)

// SnapshotTree is DirTree for a directory that never changes once made:
// an overlay's base snapshot, the checkout of one commit that its runs
// share read-only (what it holds is the commit's, whatever becomes of the
// directory). Each of its directories' names is read once in the daemon
// and kept: a change set of files in hundreds of directories asks for the
// same ones every time it is computed, of every run on that base.
func SnapshotTree(dir string) Tree { return snapshotTree{dirTree(dir)} }

type snapshotTree struct{ dirTree }

// snapshotNames keeps the names of snapshots' directories, by snapshot
// and directory (nil: the snapshot has no such directory). Bounded: when
// full, it starts again.
var snapshotNames = struct {
	sync.Mutex
	m map[string][]string
}{m: map[string][]string{}}

// maxSnapshotDirs bounds snapshotNames (a test sets its own): a directory's names are a few
// hundred bytes, and a large repository's change sets touch thousands.
var maxSnapshotDirs = 1 << 16

// Names is dirTree's, from what was kept where it can be.
func (t snapshotTree) Names(dirs []string) (map[string][]string, error) {
	key := func(d string) string { return string(t.dirTree) + "\x00" + d }
	out := map[string][]string{}
	var missing []string
	snapshotNames.Lock()
	for _, d := range dirs {
		v, ok := snapshotNames.m[key(d)]
		switch {
		case !ok:
			missing = append(missing, d)
		case v != nil:
			out[d] = slices.Clone(v) // the caller's to change
		}
	}
	snapshotNames.Unlock()
	if len(missing) == 0 {
		return out, nil
	}
	read, err := t.dirTree.Names(missing)
	if err != nil {
		return nil, err
	}
	snapshotNames.Lock()
	defer snapshotNames.Unlock()
	keep := len(missing) <= maxSnapshotDirs // more than it may hold: none kept
	if keep && len(snapshotNames.m)+len(missing) > maxSnapshotDirs {
		snapshotNames.m = map[string][]string{}
	}
	for _, d := range missing {
		ns, ok := read[d]
		if ok && ns == nil {
			ns = []string{} // an empty directory, which the snapshot has
		}
		if keep {
			snapshotNames.m[key(d)] = slices.Clone(ns)
		}
		if ok {
			out[d] = ns
		}
	}
	return out, nil
}
