package lifecycle

import (
	"cmp"
	"log/slog"
	"maps"
	"path"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/internal/dirwatch"
	"github.com/paddock-dev/paddock/internal/fsat"
	"golang.org/x/sys/unix"
)

// A whole tree's look after each command (a clone's, a worktree's) read
// every name of the tree: 12,000 lstats and 600 directory reads, 67-78 ms
// after each command on a 12,000-file clone, which the run's next command
// waited for. After the first walk, the kernel says what changed
// (inotify: internal/dirwatch), and a look reads only that. Where the
// kernel cannot tell (its queue overflowed, the user's watches ran out,
// no inotify), the look walks the tree as before.

// watchFrom is the least number of files a tree's walk finds for its
// next looks to be told by the kernel instead: a small tree's walk costs
// less than its watches.
const watchFrom = 1000

// watchRetry is how long a run whose watches ran out (the daemon's budget
// spent by other runs' trees, or the kernel's) walks after each command
// before a walk tries to watch its tree again: the other runs may have
// given theirs back since.
const watchRetry = time.Minute

// treeWatches is the daemon's one inotify instance, made when a tree
// first needs it: the kernel gives a user few (128 by default, shared
// with the user's other programs), and a daemon has many runs.
type treeWatches struct {
	log  func() *slog.Logger
	from int // watchFrom (a test's own)
	// budget is the watches the daemon may hold (0: dirwatch.Budget), and
	// retry how long a run whose watches ran out walks before its walk
	// tries to watch again (watchRetry): tests' own.
	budget int
	retry  time.Duration

	mu     sync.Mutex
	w      *dirwatch.Watcher
	failed bool // no inotify here: every look walks
}

// free is how many more watches the daemon's instance may make: its whole
// budget before it is made, 0 where inotify is not had.
func (tw *treeWatches) free() int {
	tw.mu.Lock()
	defer tw.mu.Unlock()
	switch {
	case tw.failed:
		return 0
	case tw.w == nil:
		return cmp.Or(tw.budget, dirwatch.Budget())
	}
	return tw.w.Free()
}

// tree starts a watched tree, or returns nil where inotify is not had.
func (tw *treeWatches) tree() *dirwatch.Tree {
	tw.mu.Lock()
	defer tw.mu.Unlock()
	if tw.w == nil && !tw.failed {
		w, err := dirwatch.NewWatcher(cmp.Or(tw.budget, dirwatch.Budget()))
		if err != nil {
			tw.failed = true
			tw.log().Warn("a clone's or a worktree's look after each command walks its whole tree", "err", err)
			return nil
		}
		tw.w = w
	}
	if tw.w == nil {
		return nil
	}
	return tw.w.Tree(topNotRuns)
}

// close ends the watches (the manager's Close).
func (tw *treeWatches) close() {
	tw.mu.Lock()
	defer tw.mu.Unlock()
	if tw.w != nil {
		tw.w.Close()
		tw.w, tw.failed = nil, true
	}
}

// topNotRuns names what the walk of a run's tree skips: its .git and
// .paddock are not the run's files.
func topNotRuns(rel string) bool { return rel == ".git" || rel == ".paddock" }

// treeWatch is a run's watched tree, in its provState.
type treeWatch struct {
	tree *dirwatch.Tree
	root string // the tree's top, as the run's workspace had it
	off  bool   // the user's watches ran out: this run's looks walk
	// offAt is when they ran out: a walk watchRetry after tries again,
	// if the daemon may make as many watches as the tree has directories
	// (dirs, at its last walk while off); warned, whether the log said so
	// already.
	offAt  time.Time
	dirs   int
	warned bool
	// large: the last walk found at least watchFrom files. A tree is
	// watched from its second walk: a small one never needs the daemon's
	// inotify instance.
	large bool
	// linked are the files with more than one link: a write through
	// another is not reported here, so each look reads them again.
	linked map[string]bool
	// pending are names a look found changing: the next reads them again.
	pending map[string]bool
	// walkNext: the last look failed after the kernel told it what
	// changed; the next walks.
	walkNext bool
	touches  int // looks told by the kernel (a test's)

	// addErr is the first watch a walk could not make (entered), from
	// the walk's goroutines.
	addMu  sync.Mutex
	addErr error
}

// drop ends the run's watches; off says not to watch again for
// watchRetry.
func (tw *treeWatch) drop(off bool) {
	if tw.tree != nil {
		tw.tree.Close()
		tw.tree = nil
	}
	if off && !tw.off {
		tw.off, tw.offAt = true, time.Now()
	}
}

// forWalk is the tree to hand a walk of root's directories to: the run's
// watched tree, one started for it, or nil where the run's looks walk.
func (tw *treeWatch) forWalk(root string, watches *treeWatches) *dirwatch.Tree {
	if tw.tree != nil && tw.root != root {
		tw.drop(false) // the workspace moved (restored elsewhere)
	}
	if tw.off && time.Since(tw.offAt) >= cmp.Or(watches.retry, watchRetry) && watches.free() >= tw.dirs {
		// This walk tries again, where the tree's watches fit: a walk
		// that spent the last of them would leave other runs' new
		// directories unwatched. A watch it cannot make turns it off
		// again.
		tw.off = false
	}
	if tw.tree == nil && !tw.off && tw.large {
		tw.tree, tw.root = watches.tree(), root
	}
	return tw.tree
}

// entered is the walk's hook that watches each directory it enters (at
// rel below under): a watch that cannot be made is kept in addErr, for
// watchFailed.
func (tw *treeWatch) entered(under string) func(fd int, rel string) {
	tree := tw.tree
	if tree == nil {
		return nil
	}
	return func(fd int, rel string) {
		if err := tree.Add(fd, path.Join(under, rel)); err != nil {
			tw.addMu.Lock()
			tw.addErr = cmp.Or(tw.addErr, err)
			tw.addMu.Unlock()
		}
	}
}

// watchFailed says whether a watch of the walk just made failed: then
// the run's looks walk for watchRetry at least, and the log says so the
// first time.
func (tw *treeWatch) watchFailed(log *slog.Logger) bool {
	err := tw.addErr
	tw.addErr = nil
	if err == nil {
		return false
	}
	if !tw.warned {
		log.Warn("a run's look after each command walks its whole tree", "err", err)
		tw.warned = true
	} else {
		log.Debug("a run's tree still cannot be watched", "err", err)
	}
	tw.drop(true)
	return true
}

// walked keeps what a whole walk found: its linked files, and whether the
// tree is large enough to watch.
func (tw *treeWatch) walked(entries []fsat.Entry, from int, log *slog.Logger) {
	tw.linked = map[string]bool{}
	for _, e := range entries {
		if e.St.Nlink > 1 && e.St.Mode&unix.S_IFMT == unix.S_IFREG {
			tw.linked[e.Rel] = true
		}
	}
	tw.large = len(entries) >= from
	if !tw.watchFailed(log) && !tw.large {
		tw.drop(false)
	}
	if tw.off {
		tw.dirs = dirsOf(entries) // what a walk that tries again will watch
	}
}

// dirsOf is how many directories hold the entries, the top's included
// (one that holds no file but through a directory below it is counted;
// an empty one is not).
func dirsOf(entries []fsat.Entry) int {
	dirs := map[string]bool{"": true}
	for _, e := range entries {
		for d := path.Dir(e.Rel); d != "." && !dirs[d]; d = path.Dir(d) {
			dirs[d] = true
		}
	}
	return len(dirs)
}

// trackTouched is trackTree for a watched tree: only the names the kernel
// says changed since the last look (and what is below a directory made,
// removed or renamed) are read again. It reports false, having recorded
// nothing, where the kernel cannot tell: the walk then does. A look that
// fails after the kernel told it has the next look walk (walkNext): what
// it was told is not told again.
func (pv *Provenance) trackTouched(r *paddock.Run, seq int64, st *provState) (bool, error) {
	tw := &st.tree
	if tw.tree == nil || tw.root != r.Workspace.Root {
		return false, nil
	}
	ch, err := tw.tree.Changes()
	if err != nil {
		tw.drop(false)
		return false, nil
	}
	if ch.All || ch.Transient || tw.walkNext {
		return false, nil // the walk re-watches what it finds
	}
	touched := map[string]bool{}
	for _, set := range []map[string]bool{tw.linked, tw.pending} {
		for p := range set {
			touched[p] = true
		}
	}
	for _, p := range ch.Names {
		touched[p] = true
	}
	tf, err := openTree(r.Workspace.Root)
	if err != nil {
		return false, nil // the walk says why
	}
	defer tf.close()
	if len(ch.Trees) > 0 {
		below, ok, err := pv.treesAgain(r, tf, st, ch.Trees)
		if err != nil || !ok {
			return false, err
		}
		for p := range below {
			touched[p] = true
		}
	}
	names := slices.Sorted(maps.Keys(touched)) // each directory on the way opened once
	now := maps.Clone(st.last)
	tw.pending = map[string]bool{}
	for _, p := range names {
		linked, err := pv.lookAgain(r, tf, p, st, now)
		if err != nil {
			return true, err
		}
		if linked && !tw.linked[p] {
			// A link made to a file: whose other names it has, and what
			// was written through them, no event said. The walk reads
			// them all (and keeps every linked file to read again).
			return false, nil
		}
		if !linked {
			delete(tw.linked, p)
		}
	}
	tw.touches++
	return true, pv.trackChanges(r, seq, st, now)
}

// treesAgain is every name to read again below the directories trees: what
// the base, the journal or a look had there, and what is there now (each
// such directory walked, and watched). It reports false where a watch
// could not be made: the walk then does.
func (pv *Provenance) treesAgain(r *paddock.Run, tf *treeFiles, st *provState, trees []string) (map[string]bool, bool, error) {
	below := map[string]bool{}
	under := func(p string) bool {
		for _, t := range trees {
			if p == t || strings.HasPrefix(p, t+"/") {
				return true
			}
		}
		return false
	}
	for _, known := range []map[string]string{st.base, st.last} {
		for p := range known {
			if under(p) {
				below[p] = true
			}
		}
	}
	for _, t := range trees {
		fd, err := tf.stack.Open(tf.root, t)
		if fsat.NotThere(err) {
			continue // gone, or no longer a directory: its names are read as gone
		}
		if err != nil {
			return nil, false, err
		}
		entries, err := fsat.WalkStatsDirs(fd, nil, st.tree.entered(t))
		if err != nil {
			return nil, false, err
		}
		for _, e := range entries {
			below[path.Join(t, e.Rel)] = true
		}
	}
	if st.tree.watchFailed(pv.log().With("run", r.ID)) {
		return nil, false, nil
	}
	return below, true, nil
}

// lookAgain reads the name rel of the tree tf into now, which holds how
// the tree differs from the base: as trackTree's walk would have found it
// (a name below a link is not there). It says whether rel is a file with
// other links.
func (pv *Provenance) lookAgain(r *paddock.Run, tf *treeFiles, rel string, st *provState, now map[string]string) (linked bool, _ error) {
	delete(now, rel)
	var sys unix.Stat_t
	err := tf.lstat(rel, &sys)
	if err != nil && !fsat.NotThere(err) {
		return false, err // not readable (as a walk would fail): the next look walks
	}
	typ, ok := fileType(sys.Mode)
	if err != nil || !ok { // gone, or a directory, a FIFO, a socket: no file here
		if _, ok := st.base[rel]; ok {
			now[rel] = "" // gone from the tree
		}
		return false, nil
	}
	linked = typ.IsRegular() && sys.Nlink > 1
	if err := pv.trackFile(r, tf, rel, typ, st, now, st.base); err != nil {
		return linked, err
	}
	b, ok := now[rel]
	switch {
	case !ok:
		// Changing while read: as the journal last had it, until the next
		// look reads it again.
		st.tree.pending[rel] = true
		if prev, had := st.last[rel]; had {
			now[rel] = prev
		}
	case st.base[rel] == b:
		delete(now, rel) // as the base has it
	}
	return linked, nil
}
