package lifecycle

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/broker"
	"github.com/paddock-dev/paddock/changeset"
	"github.com/paddock-dev/paddock/changeset/hunks"
	"github.com/paddock-dev/paddock/confine"
	"github.com/paddock-dev/paddock/internal/durable"
	"github.com/paddock-dev/paddock/internal/fsat"
	"github.com/paddock-dev/paddock/workspace"
	"golang.org/x/sys/unix"
)

// Provenance records which call wrote each hunk of a run's change (diff --blame) and approves hunks.
type Provenance struct {
	*kernel
	// the services it calls
	changes  *Changes
	forks    *Forks
	nodes    *Nodes
	projects *Projects
	reviews  *Reviews
	runs     *Runs
	policies *Policies

	provMu     runLocks // run id's journal's lock: runs track their effects side by side, each run's calls one after the other
	provStates sync.Map // run id → *provState, under its provMu lock
	// pendingLooks are the looks left for after their call's answer
	// (run id → *pendingLook), under the journal's lock and not begun:
	// whoever waits for the lock begins the run's first (lockJournal).
	pendingLooks sync.Map
	life         *lifetime // the looks at the runs' files after their calls
	watches      treeWatches
}

// Where every hunk came from. After each call that can change the run's
// files (a writing tool, a command), its files are looked at again (an
// overlay's layers, or a whole tree, each read again only where a file's
// stat changed), and what changed since the last look is appended to the run's
// provenance journal (<artifacts>/RUN/provenance.jsonl): the call's event
// seq and, per path, the blob id it now has (the content is kept under
// provenance/, up to maxTracked bytes). Blame follows each file of a
// change set from its base through those versions, line by line, and
// names for each hunk the calls that wrote its lines.

// maxTracked bounds a file whose versions the journal keeps: larger ones
// are blamed as a whole, to the last call that changed them.
const maxTracked = 1 << 20

// provRecord is one line of the journal.
type provRecord struct {
	Seq     int64             `json:"seq"`
	Time    time.Time         `json:"time"`
	Changes map[string]string `json:"changes"` // path → blob id ("" when gone)
}

func (pv *Provenance) provDir(id string) string { return filepath.Join(pv.runDir(id), "provenance") }
func (pv *Provenance) provJournal(id string) string {
	return filepath.Join(pv.runDir(id), "provenance.jsonl")
}

// changesFiles reports whether a call of tool can change a run's files.
func changesFiles(tool string) bool {
	return tool == paddock.ToolExec || slices.Contains(broker.WriteTools, tool)
}

// readJournal reads run id's journal (a torn last line, from a crash, is
// left out).
func (pv *Provenance) readJournal(id string) ([]provRecord, error) {
	f, err := os.Open(pv.provJournal(id))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []provRecord
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	for sc.Scan() {
		var r provRecord
		if json.Unmarshal(sc.Bytes(), &r) == nil {
			out = append(out, r)
		}
	}
	return out, sc.Err()
}

// trackEffects appends to run r's journal what its files are now where
// they differ from what the journal last said (or from the base): the
// effects of the call recorded as event seq. It never fails the call: a
// journal it cannot write leaves those hunks unattributed. written, if
// not empty, are the only files the call wrote (see trackWritten).
func (pv *Provenance) trackEffects(ctx context.Context, r *paddock.Run, seq int64, written ...string) {
	if r.Access != paddock.AccessWrite || r.Workspace == nil || r.ReviewOf != nil {
		return
	}
	pv.nodes.checkpointSoon(r.ID)
	// The journal's lock is taken before the call is answered and given
	// back once the files are looked at, in the background: the answer
	// does not wait for the look, and what comes after it does (the
	// run's next call that can change its files, settle; blame; forget).
	unlock := pv.lockJournal(r.ID)
	// The look is part of the call: a fork, which freezes the upper layer
	// it reads, waits for it as for the call (the broker's use of the run
	// is still held here, so this one is always had).
	unuse, used := pv.forks.runUses.tryRLock(r.ID)
	ctx = context.WithoutCancel(ctx)
	track := func() {
		defer unlock()
		if used {
			defer unuse()
		}
		// A call that waited for the lock while its run was cleaned up
		// tracks nothing: forgetRun dropped the run's state, and tracking
		// would only make it again, for a run that is gone.
		if cur, err := pv.Run(ctx, r.ID); err != nil || cur.Workspace == nil ||
			cur.Workspace.State == paddock.StateCleanupPending || cur.Workspace.State == paddock.StateCleaned {
			return
		}
		start := time.Now()
		err := pv.trackEffectsLocked(ctx, r, seq, written)
		pv.log().Debug("effects recorded for blame", "run", r.ID, "seq", seq, "took", time.Since(start), "err", err)
	}
	// Begun once the call's answer is on its way (paddock.AfterAnswer),
	// or as soon as anything waits for the lock above (lockJournal): the
	// run's next call, which the lock keeps after it, may come in the same
	// request (an adoption writes file after file) or from a client
	// quicker than this call's.
	look := &pendingLook{start: func() {
		if !pv.life.goBackground(track) {
			track() // closing: looked at now, before the daemon's end
		}
	}}
	pv.pendingLooks.Store(r.ID, look)
	// A waiter counted before the look was stored may have missed it
	// (lockJournal): it is begun now. One counted after finds it.
	if pv.provMu.contended(r.ID) {
		pv.beginLook(r.ID, look)
		return
	}
	paddock.AfterAnswer(ctx, func() { pv.beginLook(r.ID, look) })
}

// pendingLook is a look at a run's files left for after its call's
// answer; it begins once.
type pendingLook struct {
	once  sync.Once
	start func()
}

// beginLook begins look, run id's, unless it has begun.
func (pv *Provenance) beginLook(id string, look *pendingLook) {
	look.once.Do(func() {
		pv.pendingLooks.CompareAndDelete(id, look)
		look.start()
	})
}

// lockJournal takes run id's journal's lock, first beginning the look
// that holds it, if it waits for its call's answer. It is counted among
// the lock's waiters before it looks for one: a look stored after that
// is begun by trackEffects, which sees it waiting (runLocks.contended).
func (pv *Provenance) lockJournal(id string) (unlock func()) {
	return pv.provMu.lockAfter(id, func() {
		if v, ok := pv.pendingLooks.Load(id); ok {
			pv.beginLook(id, v.(*pendingLook))
		}
	})
}

// settle waits for the look at run id's files after its last call
// (trackEffects): a call that can change them runs after it, so that each
// call's effects are its own.
func (pv *Provenance) settle(id string) { pv.lockJournal(id)() }

func (pv *Provenance) trackEffectsLocked(ctx context.Context, r *paddock.Run, seq int64, written []string) error {
	st := pv.provStateOf(r.ID)
	if !st.loaded {
		recs, err := pv.readJournal(r.ID)
		if err != nil {
			return err
		}
		for _, rec := range recs {
			for p, b := range rec.Changes {
				st.last[p] = b
			}
		}
		st.loaded = true
	}
	if r.Workspace.Kind == paddock.KindOverlay {
		if ov, ok := pv.overlayProvider(); ok {
			// A forked run's frozen layers hold its changes too; at a
			// fork's first look, what it was forked with is the fork's.
			l, err := ov.LayersWithStack(r.Project, r.Workspace)
			if err != nil {
				return err
			}
			// (Asked only then: it reads the store, and this runs after
			// every command.)
			if len(st.last) == 0 && len(l.Frozen) > 0 {
				if at := pv.forks.forkedAt(ctx, r.ID); at > 0 {
					if err := pv.trackUpper(r, at, l.Frozen, st); err != nil {
						return err
					}
				}
			}
			if len(written) > 0 && (len(st.last) > 0 || len(l.Frozen) == 0) {
				if done, err := pv.trackWritten(r, seq, l.Upper, written, st, nil); done || err != nil {
					return err
				}
			}
			return pv.trackUpper(r, seq, append([]string{l.Upper}, l.Frozen...), st)
		}
	}
	// A whole tree's walk costs what the tree holds, after each call: a
	// call that says what it wrote has only those files read.
	if len(written) > 0 {
		if err := pv.loadBase(ctx, r, st); err != nil {
			return err
		}
		if done, err := pv.trackWritten(r, seq, r.Workspace.Root, written, st, st.base); done || err != nil {
			return err
		}
	}
	return pv.trackTree(ctx, r, seq, st)
}

// appendJournal appends one record to run id's journal and to st.
func (pv *Provenance) appendJournal(id string, seq int64, changes map[string]string, st *provState) error {
	b, err := json.Marshal(provRecord{Seq: seq, Time: time.Now().UTC(), Changes: changes})
	if err != nil {
		return err
	}
	if err := os.MkdirAll(pv.runDir(id), 0o700); err != nil {
		return err
	}
	f, err := os.OpenFile(pv.provJournal(id), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(append(b, '\n'))
	if err = errors.Join(err, f.Close()); err != nil {
		return err
	}
	for p, b := range changes {
		st.last[p] = b
	}
	return nil
}

// provState is what a run's tracking keeps between calls: the journal's
// last word on each path, and (overlay runs) each upper file's stat and
// blob id, so that only what changed is read again.
type provState struct {
	loaded bool
	base   map[string]string // a whole-tree workspace's base: path → blob
	last   map[string]string
	seen   map[string]upperFile
	tree   treeWatch // a whole tree's watches (treelook.go)
	dirs   layerDirs // an overlay's layers' directories, as listed (layerwalk.go)
}

// fileOf is what a look keeps of a file's lstat data (of type typ).
func fileOf(sys *unix.Stat_t, typ fs.FileMode) upperFile {
	return upperFile{size: sys.Size, mtime: sys.Mtim.Nano(), ctime: sys.Ctim.Nano(), ino: sys.Ino, mode: typ}
}

// seenAs returns the blob st last read for rel, if f says the file is as
// it was then.
func (st *provState) seenAs(rel string, f upperFile) (string, bool) {
	old, ok := st.seen[rel]
	if ok && old.size == f.size && old.mtime == f.mtime && old.ctime == f.ctime && old.ino == f.ino && old.mode == f.mode {
		return old.blob, true
	}
	return "", false
}

type upperFile struct {
	size, mtime, ctime int64
	ino                uint64
	mode               fs.FileMode
	blob               string
}

// forget drops run id's tracking state (forgetRun), under the journal's
// lock: a call tracking meanwhile finishes first, and one waiting finds
// the run cleaned and tracks nothing (trackEffects).
func (pv *Provenance) forget(id string) {
	defer pv.lockJournal(id)()
	if st, ok := pv.provStates.LoadAndDelete(id); ok {
		st.(*provState).tree.drop(false)
	}
}

func (pv *Provenance) provStateOf(id string) *provState {
	v, _ := pv.provStates.LoadOrStore(id, &provState{last: map[string]string{}, seen: map[string]upperFile{},
		tree: treeWatch{linked: map[string]bool{}, pending: map[string]bool{}}})
	return v.(*provState)
}

// trackUpper records what changed in an overlay run's upper layer since
// the last look: the layer holds only what the run changed, so its walk
// costs what changed, and a file whose stat is as it was is not read
// again. A whiteout is a deletion; a file too large to keep is recorded by
// a version id of its own (blamed whole). layers are the upper layer and a
// forked run's frozen layers under it, topmost first: what a higher layer
// holds hides the same path and what lies below it in the lower ones.
func (pv *Provenance) trackUpper(r *paddock.Run, seq int64, layers []string, st *provState) error {
	now := map[string]string{}
	hides := map[string]bool{} // the higher layers' files, whiteouts and opaque directories
	for _, upper := range layers {
		if err := pv.trackLayer(r, upper, st, now, hides); err != nil {
			return err
		}
	}
	return pv.trackChanges(r, seq, st, now)
}

// trackLayer reads one layer of trackUpper's into now, but what a higher
// layer hides (hides, to which it adds its own).
func (pv *Provenance) trackLayer(r *paddock.Run, upper string, st *provState, now map[string]string, hides map[string]bool) error {
	tf, err := openTree(upper)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer tf.close()
	var own []string
	if st.dirs == nil {
		st.dirs = layerDirs{}
	}
	err = st.dirs.walk(upper, layerVisit{
		skip: func(rel string) bool { return rel == ".git" || rel == ".paddock" || hidden(rel, hides) },
		dir: func(rel string, opaque bool) {
			if opaque {
				own = append(own, rel)
			}
		},
		file: func(rel string, d fs.DirEntry) error {
			own = append(own, rel)
			return pv.trackFile(r, tf, rel, d.Type(), st, now, nil)
		},
	})
	for _, p := range own {
		hides[p] = true
	}
	return err
}

// trackFile reads the file rel of tree tf (rel in the workspace, of type
// typ) into now, and into st.seen: again only when its stat changed since
// st last saw it. A file being changed or gone meanwhile (a link now on
// its way included) is left for the next look.
func (pv *Provenance) trackFile(r *paddock.Run, tf *treeFiles, rel string, typ fs.FileMode, st *provState, now, base map[string]string) error {
	var sys unix.Stat_t
	if err := tf.lstat(rel, &sys); err != nil {
		return nil // gone meanwhile: the next look sees it
	}
	f := fileOf(&sys, typ)
	if blob, ok := st.seenAs(rel, f); ok {
		now[rel] = blob
		return nil
	}
	switch {
	case typ&fs.ModeCharDevice != 0 && sys.Rdev == 0:
		f.blob = "" // a whiteout: deleted
	case typ&fs.ModeSymlink != 0:
		t, err := tf.readlink(rel)
		if err != nil {
			return nil
		}
		f.blob = changeset.BlobID([]byte(t))
	case typ.IsRegular() && f.size <= maxTracked:
		b, err := tf.read(rel, f.size)
		if err != nil {
			return nil // changing: the next look reads it
		}
		f.blob = changeset.BlobID(b)
		if base == nil || base[rel] != f.blob { // a file as the base has it is no version
			if err := pv.keepVersion(r, f.blob, b); err != nil {
				return err
			}
		}
	case typ.IsRegular():
		f.blob = fmt.Sprintf("large-%d-%d", f.size, f.mtime)
	default:
		return nil // a FIFO, a socket: never part of a change set
	}
	st.seen[rel] = f
	now[rel] = f.blob
	return nil
}

// trackWritten is trackUpper, or trackTree, for a call that wrote only
// the regular files written (a write or an edit tool's path): what else
// the journal says stands, and only those files are read from the upper
// layer or the tree, not the whole of it (a walk of it after each call
// made a run's calls cost more the more it had written, or the larger
// its tree). It reports false, having recorded nothing, where the files
// are not simply there (not a regular file of the layer, under a
// directory the layer made opaque, paddock's own): the walk then tells.
// base, for a whole tree, is the base's blobs: a file written back as
// the base has it is no change.
func (pv *Provenance) trackWritten(r *paddock.Run, seq int64, upper string, written []string, st *provState, base map[string]string) (bool, error) {
	// Only the written files can have changed: they alone are compared
	// with the journal (a copy of all it says, compared whole, made each
	// write cost what the run had written before it).
	now := make(map[string]string, len(written))
	among := make([]string, 0, len(written))
	tf, err := openTree(upper)
	if err != nil {
		return false, nil
	}
	defer tf.close()
	for _, rel := range written {
		rel = path.Clean(rel)
		if !fs.ValidPath(rel) || rel == "." || confine.IsDotGit(rel) || rel == ".paddock" || strings.HasPrefix(rel, ".paddock/") {
			return false, nil
		}
		for d := path.Dir(rel); d != "."; d = path.Dir(d) {
			if workspace.Opaque(filepath.Join(upper, filepath.FromSlash(d))) {
				return false, nil
			}
		}
		var sys unix.Stat_t
		if err := tf.lstat(rel, &sys); err != nil || sys.Mode&unix.S_IFMT != unix.S_IFREG {
			return false, nil
		}
		delete(now, rel)
		among = append(among, rel)
		if err := pv.trackFile(r, tf, rel, 0, st, now, base); err != nil {
			return false, err
		}
		b, ok := now[rel]
		if !ok {
			return false, nil // changing while read: the walk tells
		}
		if base != nil && base[rel] == b {
			delete(now, rel) // as the base has it
		}
	}
	return true, pv.trackChangesAmong(r, seq, st, now, among)
}

// trackTree is trackUpper for a workspace that is a whole tree (a clone,
// a worktree, a directory handed over): every file is walked, read again
// only when its stat changed, and what differs from the base's blobs (or
// is gone from it) is what the run changed. The base's listing is read
// once a run. Once walked, a large tree is watched, and a look reads only
// what the kernel says changed (trackTouched).
func (pv *Provenance) trackTree(ctx context.Context, r *paddock.Run, seq int64, st *provState) error {
	if err := pv.loadBase(ctx, r, st); err != nil {
		return err
	}
	done, err := pv.trackTouched(r, seq, st)
	if !done && err == nil {
		var now map[string]string
		if now, err = pv.treeNow(r, st); err == nil {
			err = pv.trackChanges(r, seq, st, now)
		}
	}
	st.tree.walkNext = err != nil
	return err
}

// treeNow is how run r's whole tree differs from its base, walked: path →
// blob, "" for a file gone from it.
func (pv *Provenance) treeNow(r *paddock.Run, st *provState) (map[string]string, error) {
	now := map[string]string{}
	if err := pv.walkTree(r, st, now); err != nil {
		return nil, err
	}
	present := make(map[string]bool, len(now))
	for p, b := range now {
		present[p] = true
		if st.base[p] == b {
			delete(now, p) // as the base has it
		}
	}
	for p := range st.base {
		if !present[p] {
			now[p] = "" // gone from the tree
		}
	}
	return now, nil
}

// walkTree reads the files of run r's whole tree into now: by their
// stat, on a few goroutines, and only those whose stat changed since st
// last saw them are read again (trackFile). Its .git and .paddock are not
// the run's files.
func (pv *Provenance) walkTree(r *paddock.Run, st *provState, now map[string]string) error {
	root, err := fsat.OpenDir(r.Workspace.Root)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer unix.Close(root)
	// Watched from before the walk: what changes meanwhile is told too.
	tw := &st.tree
	tw.forWalk(r.Workspace.Root, &pv.watches)
	entries, err := fsat.WalkStatsDirs(root, topNotRuns, tw.entered(""))
	if err != nil {
		tw.drop(false)
		return err
	}
	tw.walked(entries, pv.watches.from, pv.log().With("run", r.ID))
	tw.pending = map[string]bool{}
	// In order, so that each directory on the way is opened once.
	slices.SortFunc(entries, func(a, b fsat.Entry) int { return strings.Compare(a.Rel, b.Rel) })
	tf := &treeFiles{root: root}
	defer tf.stack.Close()
	for _, e := range entries {
		typ, ok := fileType(e.St.Mode)
		if !ok {
			continue // a FIFO, a socket: never part of a change set
		}
		if blob, ok := st.seenAs(e.Rel, fileOf(&e.St, typ)); ok {
			now[e.Rel] = blob
			continue
		}
		if err := pv.trackFile(r, tf, e.Rel, typ, st, now, st.base); err != nil {
			return err
		}
	}
	return nil
}

// loadBase reads the base's blobs of run r into st, once a run.
func (pv *Provenance) loadBase(ctx context.Context, r *paddock.Run, st *provState) error {
	if st.base != nil {
		return nil
	}
	p, err := pv.Project(ctx, r.Project)
	if err != nil {
		return err
	}
	repo, err := pv.projects.checkRepo(ctx, p)
	if err != nil {
		return err
	}
	st.base, err = pv.Git.TreeBlobs(pv.reviews.objectsCtx(ctx, r), repo.CommonDir, r.Workspace.BaseRevision)
	return err
}

// hidden says whether rel or a directory above it is in hides.
func hidden(rel string, hides map[string]bool) bool {
	if len(hides) == 0 {
		return false
	}
	for p := rel; ; p = path.Dir(p) {
		if hides[p] {
			return true
		}
		if !strings.Contains(p, "/") {
			return false
		}
	}
}

// trackChanges records in run r's journal how now differs from its last
// word on each path.
func (pv *Provenance) trackChanges(r *paddock.Run, seq int64, st *provState, now map[string]string) error {
	return pv.journalChanges(r, seq, st, st.changesTo(now))
}

// trackChangesAmong is trackChanges where only the paths among can have
// changed: now holds those of them the run changes from the base, and
// what the journal says of every other path stands.
func (pv *Provenance) trackChangesAmong(r *paddock.Run, seq int64, st *provState, now map[string]string, among []string) error {
	return pv.journalChanges(r, seq, st, st.changesAmong(now, among))
}

// changesTo is what differs between the journal (st.last) and now, the
// paths the run changes from the base (path → blob): a path now holds
// that the journal says otherwise, at its blob; one the journal says is
// changed and now does not hold, as the base has it ("base"). A path
// back as the base has it is no longer seen (st.seen).
func (st *provState) changesTo(now map[string]string) map[string]string {
	changes := map[string]string{}
	for p, b := range now {
		st.changed(changes, p, b, true)
	}
	for p := range st.last {
		if _, ok := now[p]; !ok {
			st.changed(changes, p, "", false)
		}
	}
	return changes
}

// changesAmong is changesTo for the paths among alone: now holds those of
// them the run changes, and every other path is as the journal says.
func (st *provState) changesAmong(now map[string]string, among []string) map[string]string {
	changes := map[string]string{}
	for _, p := range among {
		b, ok := now[p]
		st.changed(changes, p, b, ok)
	}
	return changes
}

// changed puts in changes what path p is now, where the journal says
// otherwise: blob b if the run changes it (ok), else as the base has it.
func (st *provState) changed(changes map[string]string, p, b string, ok bool) {
	prev, had := st.last[p]
	switch {
	case ok && (!had || prev != b):
		changes[p] = b
	case !ok && had && prev != "base":
		changes[p] = "base" // no longer changed: as the base has it
		delete(st.seen, p)
	}
}

// journalChanges appends changes, if there are any, to run r's journal.
func (pv *Provenance) journalChanges(r *paddock.Run, seq int64, st *provState, changes map[string]string) error {
	if len(changes) == 0 {
		return nil
	}
	return pv.appendJournal(r.ID, seq, changes, st)
}

// keepVersion keeps a version of a file, masked as the diff is (the run's
// declared secrets, credential shapes): only the frozen blobs hold a
// change's bytes unmasked. Masking keeps lines as lines, so the versions
// still follow each other, and the diff's hunks, line for line.
func (pv *Provenance) keepVersion(r *paddock.Run, blob string, b []byte) error {
	dst := filepath.Join(pv.provDir(r.ID), blob)
	if _, err := os.Stat(dst); err == nil {
		return nil
	}
	masked := pv.redactor(r).Bytes(b)
	return durable.WriteFileFrom(dst, false, func(w io.Writer) error { _, err := w.Write(masked); return err })
}

// Blame says, for each hunk of run id's change set (the submitted one
// with that hash; with none, the submitted one or else the live one), which tool calls
// and commands wrote its lines: their events' seq, time and what they
// were. Hunks are numbered as approve --hunks takes them.
func (pv *Provenance) Blame(ctx context.Context, id, hash string) (*paddock.Blame, error) {
	r, p, err := pv.runAndProject(ctx, id)
	if err != nil {
		return nil, err
	}
	var cs *paddock.ChangeSet
	if hash == "" {
		// The submitted change set, if there is one: the one approve
		// --hunks numbers.
		if s, err := pv.submission(id); err == nil {
			hash = cmp.Or(s.PartOf, s.Hash)
		}
	}
	if hash != "" {
		if hash, err = changeset.ParseHash(hash); err != nil {
			return nil, err
		}
		if cs, err = pv.frozen(id, hash); err != nil {
			return nil, paddock.Errorf(paddock.CodeNotFound, "run %s has no submitted change set %s", id, hash)
		}
	} else if cs, err = pv.changes.ChangeSet(ctx, id); err != nil {
		return nil, err
	}
	sections, err := pv.sectionsOf(cs)
	if err != nil {
		return nil, err
	}
	repo, err := pv.projects.checkRepo(ctx, p)
	if err != nil {
		return nil, err
	}
	unlock := pv.lockJournal(id)
	recs, err := pv.readJournal(id)
	unlock()
	if err != nil {
		return nil, internal("reading the run's provenance failed", err)
	}
	entries := map[string]paddock.ChangeEntry{}
	for _, e := range cs.Entries {
		entries[e.Path] = e
	}
	out := &paddock.Blame{Run: id, Hash: cs.Hash, Hunks: []paddock.HunkBlame{}}
	seqs := map[int64]bool{}
	for _, s := range sections {
		e, ok := entries[s.Path]
		origins := map[int][]int64{}
		if ok && len(s.Hunks) > 0 && !e.Binary && e.Size <= maxTracked {
			origins = pv.blameSection(pv.reviews.objectsCtx(ctx, r), r, repo.CommonDir, r.Workspace.BaseRevision, s, e, recs)
		}
		lastTouch := lastChange(recs, s.Path)
		units := s.Hunks
		if len(units) == 0 {
			units = []*hunks.Hunk{{N: s.N}}
		}
		for _, h := range units {
			hb := paddock.HunkBlame{N: h.N, Path: s.Path, Header: strings.TrimRight(h.Header, "\n"), Seqs: origins[h.N]}
			if hb.Seqs == nil {
				hb.Seqs = []int64{lastTouch} // a whole-file unit: the last call that changed it
			}
			for _, q := range hb.Seqs {
				seqs[q] = true
			}
			out.Hunks = append(out.Hunks, hb)
		}
	}
	out.Sources, err = pv.sources(ctx, id, seqs)
	return out, err
}

// sectionsOf reads cs's diff into its sections.
func (pv *Provenance) sectionsOf(cs *paddock.ChangeSet) ([]*hunks.Section, error) {
	d, err := changeset.OpenDiff(cs)
	if err != nil {
		return nil, internal("reading the diff failed", err)
	}
	defer d.Close()
	sections, err := hunks.ParseDiff(d)
	if err != nil {
		var pe *paddock.Error
		if errors.As(err, &pe) {
			return nil, err
		}
		return nil, internal("reading the diff failed", err)
	}
	return sections, nil
}

// lastChange is the seq of the last journal record that changed path (0: none).
func lastChange(recs []provRecord, path string) int64 {
	for i := len(recs) - 1; i >= 0; i-- {
		if _, ok := recs[i].Changes[path]; ok {
			return recs[i].Seq
		}
	}
	return 0
}

// blameSection follows e's file from the base through the journal's
// versions of it to its content in the change set.
func (pv *Provenance) blameSection(ctx context.Context, r *paddock.Run, gitDir, base string, s *hunks.Section, e paddock.ChangeEntry, recs []provRecord) map[int][]int64 {
	// Every version is compared masked, as the versions are kept and as
	// the diff shows them.
	red := pv.redactor(r)
	baseB, err := pv.Git.FileAt(ctx, gitDir, base, e.Path)
	if err != nil {
		baseB = nil // a new file
	}
	baseB = red.Bytes(baseB)
	var versions []changeset.Version
	for _, rec := range recs {
		blob, ok := rec.Changes[e.Path]
		if !ok {
			continue
		}
		var content []byte
		switch blob {
		case "":
		case "base":
			content = baseB
		default:
			b, err := os.ReadFile(filepath.Join(pv.provDir(r.ID), blob))
			if err != nil {
				continue // not kept (too large): the versions around it tell
			}
			content = b
		}
		versions = append(versions, changeset.Version{Seq: rec.Seq, Content: content})
	}
	final, err := pv.changeSets(r.ID).ReadBlob(e.NewBlob)
	if err != nil {
		final, err = os.ReadFile(filepath.Join(pv.provDir(r.ID), e.NewBlob))
	}
	if err == nil {
		final = red.Bytes(final)
		if len(versions) == 0 || string(versions[len(versions)-1].Content) != string(final) {
			versions = append(versions, changeset.Version{Seq: 0, Content: final}) // what no recorded call explains
		}
	}
	return changeset.HunkOrigins(s, changeset.LineOrigins(baseB, versions))
}

// sources describes the events seqs name.
func (pv *Provenance) sources(ctx context.Context, id string, seqs map[int64]bool) (map[int64]paddock.HunkSource, error) {
	out := map[int64]paddock.HunkSource{}
	for seq := range seqs {
		if seq == 0 {
			out[0] = paddock.HunkSource{What: "not recorded (a change no tool call or command recorded explains)"}
			continue
		}
		evs, err := pv.runs.Events(ctx, id, seq-1, 1)
		if err != nil {
			return nil, err
		}
		if len(evs) == 0 {
			continue
		}
		out[seq] = paddock.HunkSource{Seq: seq, Time: evs[0].Time, Type: evs[0].Type, What: describe(evs[0])}
	}
	return out, nil
}

// describe says in one line what an event's call was.
func describe(e *paddock.Event) string {
	var d struct {
		Tool string          `json:"tool"`
		Args json.RawMessage `json:"args"`
		Argv []string        `json:"argv"`
	}
	json.Unmarshal(e.Data, &d)
	switch {
	case len(d.Argv) > 0:
		s := strings.Join(d.Argv, " ")
		if len(s) > 120 {
			s = s[:117] + "..."
		}
		return "exec: " + s
	case d.Tool != "":
		var a struct{ Path, From, To string }
		json.Unmarshal(d.Args, &a)
		switch {
		case a.From != "":
			return d.Tool + " " + a.From + " → " + a.To
		case a.Path != "":
			return d.Tool + " " + a.Path
		}
		return d.Tool
	}
	return e.Type
}

// ApproveHunks approves only the chosen hunks of run id's submitted change
// set hash (see changeset.Partial): the change set they make is frozen
// beside it, under its own hash, and becomes what is approved and what an
// apply writes. The whole change set is still there to approve instead
// (a new submission replaces both).
func (pv *Provenance) ApproveHunks(ctx context.Context, id, hash string, picked []int, by string) (*paddock.Submission, error) {
	if err := pv.reviews.refuseReview(ctx, id, "be approved"); err != nil {
		return nil, err
	}
	hash, err := changeset.ParseHash(hash)
	if err != nil {
		return nil, err
	}
	r, p, err := pv.runAndProject(ctx, id)
	if err != nil {
		return nil, err
	}
	s, err := pv.submission(id)
	if err != nil {
		return nil, err
	}
	full := cmp.Or(s.PartOf, s.Hash)
	if hash != full {
		return nil, paddock.Errorf(paddock.CodeConflict, "%s differs from the hash of run %s's submitted change set; nothing was approved. Review the change set (paddock diff %s --blame) and approve the hash you reviewed", hash, id, id)
	}
	if s.AppliedTo != "" {
		return nil, paddock.Errorf(paddock.CodeConflict, "run %s was applied already (%s)", id, s.AppliedTo)
	}
	if err := pv.policies.check(ctx, p, id, by); err != nil {
		return nil, err
	}
	cs, err := pv.frozen(id, full)
	if err != nil {
		return nil, internal("reading the submitted change set failed", err)
	}
	sections, err := pv.sectionsOf(cs)
	if err != nil {
		return nil, err
	}
	repo, err := pv.projects.checkRepo(ctx, p)
	if err != nil {
		return nil, err
	}
	store := pv.changeSets(id)
	if chosen := slices.Compact(slices.Sorted(slices.Values(picked))); len(chosen) == hunks.Units(sections) && chosen[0] == 1 && chosen[len(chosen)-1] == len(chosen) {
		return pv.changes.Approve(ctx, id, full, by) // every hunk: the whole change set
	}
	part, blobs, err := changeset.Partial(cs, sections, picked,
		func(path string) ([]byte, error) {
			b, err := pv.Git.FileAt(pv.reviews.objectsCtx(ctx, r), repo.CommonDir, r.Workspace.BaseRevision, path)
			if err != nil {
				return nil, internal("reading the base failed", err)
			}
			return b, nil
		},
		func(e paddock.ChangeEntry) ([]byte, error) {
			b, err := store.ReadBlob(e.NewBlob)
			if err != nil {
				return nil, internal("reading the frozen change set failed", err)
			}
			return b, nil
		})
	if err != nil {
		return nil, err
	}
	f, err := store.CreateDiff()
	if err != nil {
		return nil, internal("saving the approved hunks failed", err)
	}
	_, werr := io.WriteString(f, part.Diff)
	if err := errors.Join(werr, f.Close()); err != nil {
		os.Remove(f.Name())
		return nil, internal("saving the approved hunks failed", err)
	}
	defer os.Remove(f.Name())
	part.DiffFile = f.Name()
	if part.DiffOmitted {
		part.Diff = ""
		if part.Hash, err = changeset.Hash(part); err != nil {
			return nil, internal("hashing the approved hunks failed", err)
		}
	}
	for blob, content := range blobs {
		if err := durable.WriteFileFrom(store.BlobPath(blob), false, func(w io.Writer) error { _, err := w.Write(content); return err }); err != nil {
			return nil, internal("saving the approved hunks failed", err)
		}
	}
	if err := store.KeepFrozenDiff(part); err != nil {
		return nil, internal("saving the approved hunks failed", err)
	}
	if err := durable.SyncFS(store.Dir); err != nil {
		return nil, internal("saving the approved hunks failed", err)
	}
	if err := store.Save(part); err != nil {
		return nil, internal("saving the approved hunks failed", err)
	}
	slices.Sort(picked)
	picked = slices.Compact(picked)
	return pv.approvePart(ctx, p, s, part, picked, by)
}

// approvePart records ctx's caller's approval of part, the change set
// picked hunks of s make, under the project's policy: approvals of the
// same part (the same hunks) add up; another part starts anew.
func (pv *Provenance) approvePart(ctx context.Context, p *paddock.Project, s *paddock.Submission, part *paddock.ChangeSet, picked []int, by string) (*paddock.Submission, error) {
	id, full := s.RunID, cmp.Or(s.PartOf, s.Hash)
	defer pv.policies.lock(id)()
	approved := &paddock.Submission{RunID: id, Hash: part.Hash, SubmittedAt: s.SubmittedAt, PartOf: full, Hunks: picked}
	if cur, err := pv.submission(id); err != nil {
		return nil, err
	} else if cur.Hash == part.Hash && cur.PartOf == full && cur.AppliedTo == "" {
		approved = cur
	} else if cur.AppliedTo != "" || cmp.Or(cur.PartOf, cur.Hash) != full {
		return nil, paddock.Errorf(paddock.CodeConflict, "run %s's submission changed while its hunks were being approved; nothing was approved", id)
	}
	return pv.policies.approve(ctx, p, approved, part, by, map[string]any{"part_of": full, "hunks": picked, "entries": len(part.Entries)})
}
