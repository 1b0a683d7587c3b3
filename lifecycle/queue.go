package lifecycle

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/agent"
	"github.com/paddock-dev/paddock/changeset"
	"github.com/paddock-dev/paddock/gitx"
	"github.com/paddock-dev/paddock/internal/durable"
	"github.com/paddock-dev/paddock/workspace"
	"go.opentelemetry.io/otel/attribute"
)

// Queue is the merge queue: it lands approved runs on their branch one at a time.
type Queue struct {
	*kernel
	// the services it calls
	broker   *Broker
	changes  *Changes
	projects *Projects
	reviews  *Reviews
	runs     *Runs
	verifier *Verifier

	// queueMu guards the merge queue's document; queueRunning says its
	// worker is draining it, queueAgain that an entry came meanwhile.
	queueMu      sync.Mutex
	queueRunning bool
	queueAgain   bool
	landMu       runLocks  // an apply or a landing of a run at a time
	life         *lifetime // the worker's
}

// The merge queue: approved change sets land on a branch one after the
// other, each replayed onto the branch's tip as it is then, checked there,
// and landed only if its checks pass.
//
// The queue is one document (<artifacts>/queue.json), rewritten whole and
// durably at every step, each step's intent before its effect: an entry is
// "testing" before its throwaway run is made, "landing" with the commit
// and the tip it moves from before the branch moves. The branch moves by
// one compare-and-swap; Recover finishes or undoes what a crash cut.

// keptFinished bounds the finished entries the queue keeps for `ls --all`.
const keptFinished = 200

// maxLandTries bounds how often an entry is replayed again because the
// branch moved while it was checked.
const maxLandTries = 3

type queueDoc struct {
	Entries []*paddock.QueueEntry `json:"entries"`
}

func (q *Queue) queuePath() string { return filepath.Join(q.ArtifactsDir, "queue.json") }

// loadQueue reads the queue; the caller holds queueMu.
func (q *Queue) loadQueue() (*queueDoc, error) {
	d := &queueDoc{}
	b, err := os.ReadFile(q.queuePath())
	if errors.Is(err, fs.ErrNotExist) {
		return d, nil
	}
	if err != nil {
		return nil, internal("reading the merge queue failed", err)
	}
	if err := json.Unmarshal(b, d); err != nil {
		return nil, internal("reading the merge queue failed", err)
	}
	return d, nil
}

// saveQueue writes the queue whole and durably, keeping the newest
// finished entries only; the caller holds queueMu.
func (q *Queue) saveQueue(d *queueDoc) error {
	finished := 0
	kept := make([]*paddock.QueueEntry, 0, len(d.Entries))
	for i := len(d.Entries) - 1; i >= 0; i-- {
		e := d.Entries[i]
		if queueLive(e.State) || e.State == paddock.QueueReturned || e.State == paddock.QueueLanded {
			kept = append(kept, e)
			continue
		}
		if finished++; finished <= keptFinished {
			kept = append(kept, e)
		}
	}
	slices.Reverse(kept)
	d.Entries = kept
	b, err := json.MarshalIndent(d, "", "  ")
	if err != nil {
		return internal("saving the merge queue failed", err)
	}
	if err := durable.WriteFile(q.queuePath(), b); err != nil {
		return internal("saving the merge queue failed", err)
	}
	return nil
}

func queueLive(state string) bool {
	return state == paddock.QueueQueued || state == paddock.QueueTesting || state == paddock.QueueLanding
}

// updateQueue changes the queue under its lock and saves it.
func (q *Queue) updateQueue(fn func(d *queueDoc) error) error {
	q.queueMu.Lock()
	defer q.queueMu.Unlock()
	d, err := q.loadQueue()
	if err != nil {
		return err
	}
	if err := fn(d); err != nil {
		return err
	}
	return q.saveQueue(d)
}

// entryOf is run id's newest entry in d.
func (d *queueDoc) entryOf(id string) *paddock.QueueEntry {
	for i := len(d.Entries) - 1; i >= 0; i-- {
		if d.Entries[i].Run == id {
			return d.Entries[i]
		}
	}
	return nil
}

// QueueAdd puts run id's approved change set in its project's merge queue
// for branch (see paddock.QueueAddRequest). Asked again while the entry
// waits, it answers the same entry; an entry that came back is queued
// again, with the replay a person accepted if they name one.
func (q *Queue) QueueAdd(ctx context.Context, id string, req paddock.QueueAddRequest, by string) (*paddock.QueueEntry, error) {
	if err := q.checkOpen(); err != nil {
		return nil, err
	}
	if err := q.reviews.refuseReview(ctx, id, "be queued"); err != nil {
		return nil, err
	}
	r, p, err := q.runAndProject(ctx, id)
	if err != nil {
		return nil, err
	}
	defer q.landMu.lock(id)()
	s, _, err := q.changes.approved(ctx, id, p)
	if err != nil {
		return nil, err
	}
	if req.Branch == "" {
		return nil, paddock.Errorf(paddock.CodeBadRequest, "name the branch the change set lands on (--to BRANCH)")
	}
	if err := q.landable(ctx, p, req.Branch); err != nil {
		return nil, err
	}
	if req.Accept != "" && (len(req.Accept) != 40 && len(req.Accept) != 64 || strings.Trim(req.Accept, "0123456789abcdef") != "") {
		return nil, paddock.Errorf(paddock.CodeBadRequest, "--accept %q: want the tree id paddock queue show printed", req.Accept)
	}
	var out paddock.QueueEntry
	added := false
	err = q.updateQueue(func(d *queueDoc) error {
		if e := d.entryOf(id); e != nil && e.Hash == s.Hash && queueLive(e.State) {
			out = *e
			return nil
		}
		t := now()
		e := &paddock.QueueEntry{Run: id, Project: r.Project, Branch: req.Branch, Hash: s.Hash, State: paddock.QueueQueued,
			AddedAt: t, AddedBy: by, Accept: req.Accept, UpdatedAt: t}
		d.Entries = append(d.Entries, e)
		out, added = *e, true
		return nil
	})
	if err != nil {
		return nil, err
	}
	if added {
		if err := q.record(ctx, id, paddock.EventQueueAdded, map[string]string{"branch": req.Branch, "hash": s.Hash, "by": by, "accept": req.Accept}); err != nil {
			return nil, err
		}
		q.kickQueue()
	}
	return &out, nil
}

// landable refuses a branch the queue cannot land on: one that does not
// exist, or the one checked out in the project's working tree (moving it
// would move it under the user's files).
func (q *Queue) landable(ctx context.Context, p *paddock.Project, branch string) error {
	if _, err := q.Git.Resolve(ctx, p.Root, "refs/heads/"+branch); err != nil {
		return paddock.Errorf(paddock.CodeNotFound, "project %s has no branch %s", p.Name, branch)
	}
	out, err := q.Git.CheckedOut(ctx, p.Root)
	if err != nil {
		return internal("listing the project's working trees failed", err)
	}
	if slices.Contains(out, branch) {
		return paddock.Errorf(paddock.CodeConflict, "branch %s is checked out in a working tree of project %s (git worktree list): moving it would move it under those files. Land on another branch, or check out another one first", branch, p.Name)
	}
	return nil
}

// Queue lists the merge queue: the live and returned entries, of project
// if named; all also lists the finished ones.
func (q *Queue) Queue(ctx context.Context, project string, all bool) ([]*paddock.QueueEntry, error) {
	if project != "" {
		if _, err := q.Project(ctx, project); err != nil {
			return nil, err
		}
	}
	q.queueMu.Lock()
	defer q.queueMu.Unlock()
	d, err := q.loadQueue()
	if err != nil {
		return nil, err
	}
	out := []*paddock.QueueEntry{}
	for _, e := range d.Entries {
		if project != "" && e.Project != project {
			continue
		}
		// Without all, each run's newest entry, if it waits or came back:
		// a run queued again is no longer where it came back from.
		if !all && (d.entryOf(e.Run) != e || !(queueLive(e.State) || e.State == paddock.QueueReturned)) {
			continue
		}
		out = append(out, e)
	}
	return out, nil
}

// QueueEntry returns run id's newest queue entry.
func (q *Queue) QueueEntry(ctx context.Context, id string) (*paddock.QueueEntry, error) {
	q.queueMu.Lock()
	defer q.queueMu.Unlock()
	d, err := q.loadQueue()
	if err != nil {
		return nil, err
	}
	e := d.entryOf(id)
	if e == nil {
		return nil, paddock.Errorf(paddock.CodeNotFound, "run %s was never queued", id)
	}
	if len(e.Merged) > 0 && e.Commit != "" {
		if p, err := q.Project(ctx, e.Project); err == nil {
			if repo, err := q.projects.checkRepo(ctx, p); err == nil {
				if d, err := q.Git.DiffCommits(q.queueObjectsCtx(ctx, id), repo.CommonDir, e.Tip, e.Commit, e.Merged); err == nil {
					e.Diff = q.broker.redactorFor(ctx, id).String(string(d))
				}
			}
		}
	}
	return e, nil
}

// QueueRemove takes run id out of the queue, waiting or returned; an
// entry being checked or landed is not taken out.
func (q *Queue) QueueRemove(ctx context.Context, id, by string) (*paddock.QueueEntry, error) {
	var out paddock.QueueEntry
	err := q.updateQueue(func(d *queueDoc) error {
		e := d.entryOf(id)
		switch {
		case e == nil:
			return paddock.Errorf(paddock.CodeNotFound, "run %s is not queued", id)
		case e.State == paddock.QueueTesting || e.State == paddock.QueueLanding:
			return paddock.Errorf(paddock.CodeConflict, "run %s is being %s; it can be taken out once it is done", id, strings.TrimSuffix(e.State, "ing")+"ed")
		case e.State != paddock.QueueQueued && e.State != paddock.QueueReturned:
			return paddock.Errorf(paddock.CodeConflict, "run %s is not in the queue (%s)", id, e.State)
		}
		e.State, e.Reason, e.UpdatedAt = paddock.QueueRemoved, "taken out by "+by, now()
		out = *e
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &out, q.record(ctx, id, paddock.EventQueueRemoved, map[string]string{"by": by})
}

// QueueUndo moves the branch a queued run landed on back where it was,
// if nothing landed on it since (a compare-and-swap). The run can then be
// queued again.
func (q *Queue) QueueUndo(ctx context.Context, id, by string) (*paddock.QueueEntry, error) {
	_, p, err := q.runAndProject(ctx, id)
	if err != nil {
		return nil, err
	}
	repo, err := q.projects.checkRepo(ctx, p)
	if err != nil {
		return nil, err
	}
	var out paddock.QueueEntry
	err = q.updateQueue(func(d *queueDoc) error {
		e := d.entryOf(id)
		if e == nil || e.State != paddock.QueueLanded {
			return paddock.Errorf(paddock.CodeConflict, "run %s has not landed through the queue", id)
		}
		if err := q.landable(ctx, p, e.Branch); err != nil {
			return err
		}
		who, err := q.author(ctx, p.Root, gitx.Identity{})
		if err != nil {
			return err
		}
		err = q.Git.MoveBranch(ctx, repo.CommonDir, e.Branch, e.Tip, e.Commit, who, "paddock queue: undo run "+id)
		if errors.Is(err, gitx.ErrRefMoved) {
			return paddock.Errorf(paddock.CodeConflict, "branch %s moved on since run %s landed; nothing was undone (revert its commit %s instead)", e.Branch, id, e.Commit)
		}
		if err != nil {
			return internal("moving the branch back failed", err)
		}
		e.State, e.Reason, e.UpdatedAt = paddock.QueueUndone, "undone by "+by, now()
		out = *e
		return nil
	})
	if err != nil {
		return nil, err
	}
	if s, err := q.submission(id); err == nil {
		s.AppliedTo, s.AppliedAt = "", time.Time{}
		if err := q.changes.policies.store(s); err != nil {
			return nil, err
		}
	}
	return &out, q.record(ctx, id, paddock.EventQueueUndone, map[string]string{"branch": out.Branch, "from": out.Commit, "to": out.Tip, "by": by})
}

// lockLanding takes run id's landing lock, which an apply holds for its
// whole length and the queue while it adds the run and while it moves the
// branch: one approval lands once. A run the queue holds is refused: it
// lands there, or is taken out first.
func (q *Queue) lockLanding(id string) (unlock func(), err error) {
	unlock = q.landMu.lock(id)
	q.queueMu.Lock()
	d, err := q.loadQueue()
	q.queueMu.Unlock()
	if err != nil {
		unlock()
		return nil, err
	}
	if e := d.entryOf(id); e != nil && queueLive(e.State) {
		unlock()
		return nil, paddock.Errorf(paddock.CodeConflict, "run %s is in the merge queue for branch %s (%s): it lands there, or take it out first (paddock queue rm %s)", id, e.Branch, e.State, id)
	}
	return unlock, nil
}

// kickQueue makes sure the queue's worker is draining it.
func (q *Queue) kickQueue() {
	q.queueMu.Lock()
	defer q.queueMu.Unlock()
	if q.queueRunning {
		q.queueAgain = true
		return
	}
	q.queueRunning = true
	q.life.goBackground(q.drainQueue)
}

// drainQueue lands the queued entries one at a time, in the order they
// were added, until none waits.
func (q *Queue) drainQueue() {
	for {
		var next *paddock.QueueEntry
		q.queueMu.Lock()
		if d, err := q.loadQueue(); err == nil {
			for _, e := range d.Entries {
				if e.State == paddock.QueueQueued {
					c := *e
					next = &c
					break
				}
			}
		}
		if next == nil || q.life.ctx.Err() != nil {
			again := q.queueAgain && q.life.ctx.Err() == nil
			q.queueAgain = false
			if !again {
				q.queueRunning = false
				q.queueMu.Unlock()
				return
			}
			q.queueMu.Unlock()
			continue
		}
		q.queueMu.Unlock()
		q.landOne(q.life.ctx, next)
	}
}

// setEntry saves e's new state (found by run and add time).
func (q *Queue) setEntry(e *paddock.QueueEntry) error {
	return q.updateQueue(func(d *queueDoc) error {
		for i, x := range d.Entries {
			if x.Run == e.Run && x.AddedAt.Equal(e.AddedAt) {
				if x.State == paddock.QueueRemoved {
					return paddock.Errorf(paddock.CodeConflict, "run %s was taken out of the queue", e.Run)
				}
				e.UpdatedAt = now()
				c := *e
				d.Entries[i] = &c
				return nil
			}
		}
		return paddock.Errorf(paddock.CodeNotFound, "run %s's queue entry is gone", e.Run)
	})
}

// returnEntry gives e back to a person, saying why.
func (q *Queue) returnEntry(ctx context.Context, e *paddock.QueueEntry, reason string) {
	q.log().Info("queue: returned", "run", e.Run, "branch", e.Branch, "reason", reason)
	e.State, e.Reason = paddock.QueueReturned, reason
	if err := q.setEntry(e); err != nil {
		q.log().Warn("recording a queue entry's return failed", "run", e.Run, "err", err)
	}
	if err := q.record(ctx, e.Run, paddock.EventQueueReturned, map[string]any{"branch": e.Branch, "reason": reason, "tip": e.Tip, "tree": e.Tree, "merged": e.Merged}); err != nil {
		q.log().Warn("recording a queue entry's return failed", "run", e.Run, "err", err)
	}
}

// landOne replays, checks and lands one entry, or gives it back.
func (q *Queue) landOne(ctx context.Context, e *paddock.QueueEntry) {
	ctx, end := q.span(ctx, "queue.land", nil, attrRun.String(e.Run), attrProject.String(e.Project), attribute.String("paddock.branch", e.Branch))
	var landErr error
	defer func() { end(landErr) }()
	for try := 1; ; try++ {
		retry, err := q.tryLand(ctx, e)
		if err != nil {
			landErr = err
			if ctx.Err() != nil {
				return // stopping: Recover takes it up again
			}
			q.returnEntry(ctx, e, paddock.ErrorMessage(err))
			return
		}
		if !retry {
			return
		}
		if try == maxLandTries {
			q.returnEntry(ctx, e, fmt.Sprintf("branch %s moved while the change set was checked, %d times; queue it again", e.Branch, try))
			return
		}
	}
}

// tryLand is one attempt at landing e; retry says the branch moved while
// it was checked.
func (q *Queue) tryLand(ctx context.Context, e *paddock.QueueEntry) (retry bool, err error) {
	e.State, e.TestRun, e.Reason = paddock.QueueTesting, "", ""
	if err := q.setEntry(e); err != nil {
		return false, err
	}
	r, p, err := q.runAndProject(ctx, e.Run)
	if err != nil {
		return false, err
	}
	s, cs, err := q.changes.approved(ctx, e.Run, p)
	if err != nil {
		return false, err
	}
	if s.Hash != e.Hash {
		return false, paddock.Errorf(paddock.CodeConflict, "run %s was submitted again since it was queued; approve and queue the new change set", e.Run)
	}
	if err := q.landable(ctx, p, e.Branch); err != nil {
		return false, err
	}
	repo, err := q.projects.checkRepo(ctx, p)
	if err != nil {
		return false, err
	}
	tip, err := q.Git.Resolve(ctx, p.Root, "refs/heads/"+e.Branch)
	if err != nil {
		return false, err
	}
	scratch, err := os.MkdirTemp("", "paddock-queue-")
	if err != nil {
		return false, internal("replaying the change set failed", err)
	}
	defer os.RemoveAll(scratch)
	entries, merged, err := q.replay(ctx, repo.CommonDir, r, cs, tip.SHA, scratch)
	if err != nil {
		return false, err
	}
	who, err := q.author(ctx, p.Root, gitx.Identity{})
	if err != nil {
		return false, err
	}
	msg := fmt.Sprintf("paddock: land run %s\n\nChange set %s, approved by %s, through the merge queue.\n", e.Run, s.Hash, s.ApprovedBy)
	// The replay is committed into an object store of the queue's own
	// (never the project's: a replay that fails its check, or that waits
	// for a person to accept what the branch merged in, leaves nothing
	// there), with its dates fixed, so that the commit landed later is
	// this very one (landCommit).
	who.When = time.Unix(now().Unix(), 0)
	store := q.queueObjects(e.Run)
	os.RemoveAll(store) // an earlier try's
	commit, err := q.Git.CommitTreeInto(ctx, repo.CommonDir, store, tip.SHA, entries, who, msg)
	if err != nil {
		return false, internal("committing the replayed change set failed; the branch is unchanged", err)
	}
	// Git reads the replay's store as well from here on, but the write of
	// the landed commit into the project, which must not find its objects
	// there (it would then skip writing them), uses projectCtx.
	projectCtx := context.WithoutCancel(ctx)
	ctx = gitx.WithObjects(ctx, store)
	tree, err := q.Git.TreeOf(ctx, repo.CommonDir, commit)
	if err != nil {
		return false, internal("reading the replayed tree failed", err)
	}
	e.Tip, e.Commit, e.Tree, e.Merged = tip.SHA, commit, tree, merged
	if tipTree, err := q.Git.TreeOf(ctx, repo.CommonDir, tip.SHA); err == nil && tipTree == tree {
		return false, paddock.Errorf(paddock.CodeConflict, "branch %s holds this change set already (its tree is the replay's): nothing to land", e.Branch)
	}
	if len(merged) > 0 && e.Accept != tree {
		return false, paddock.Errorf(paddock.CodeConflict, "branch %s changed %s since the change set's base: what would land differs from what was approved. Review it (paddock queue show %s) and accept it with paddock queue add %s --to %s --accept %s",
			e.Branch, strings.Join(merged, ", "), e.Run, e.Run, e.Branch, tree)
	}
	if err := q.setEntry(e); err != nil {
		return false, err
	}
	q.log().Info("queue: checking", "run", e.Run, "branch", e.Branch, "tip", e.Tip, "commit", commit)
	if err := q.checkLanding(ctx, e, p); err != nil {
		return false, err
	}
	q.log().Info("queue: landing", "run", e.Run, "branch", e.Branch, "commit", commit)
	// The branch moves under the run's landing lock, with the run still
	// not applied elsewhere, and still landable.
	defer q.landMu.lock(e.Run)()
	if s, err := q.submission(e.Run); err != nil || s.AppliedTo != "" || s.Hash != e.Hash {
		return false, paddock.Errorf(paddock.CodeConflict, "run %s was applied or submitted again while it was checked; nothing landed", e.Run)
	}
	if err := q.landable(ctx, p, e.Branch); err != nil {
		return false, err
	}
	e.State = paddock.QueueLanding
	if err := q.setEntry(e); err != nil {
		return false, err
	}
	// Only now, checked and about to land, is the commit written into the
	// project's own store: the same commit (same entries, parent, message
	// and dates), as an apply writes an approved change set.
	if again, err := q.Git.CommitTree(projectCtx, repo.CommonDir, tip.SHA, entries, who, msg); err != nil || again != commit {
		return false, internal("writing the checked commit into the project failed; the branch is unchanged", fmt.Errorf("%s, not %s: %v", again, commit, err))
	}
	err = q.Git.MoveBranch(ctx, repo.CommonDir, e.Branch, commit, tip.SHA, who, "paddock queue: land run "+e.Run)
	if errors.Is(err, gitx.ErrRefMoved) {
		q.log().Info("queue: the branch moved; replaying again", "run", e.Run, "branch", e.Branch)
		e.State = paddock.QueueQueued
		return true, q.setEntry(e)
	}
	if err != nil {
		return false, internal("moving the branch failed; it is unchanged", err)
	}
	os.RemoveAll(store) // landed: the project holds the commit now
	return false, q.landed(ctx, e)
}

// landed records that e's commit is on its branch.
func (q *Queue) landed(ctx context.Context, e *paddock.QueueEntry) error {
	e.State, e.Reason = paddock.QueueLanded, ""
	if err := q.setEntry(e); err != nil {
		return err
	}
	if s, err := q.submission(e.Run); err == nil {
		s.AppliedTo, s.AppliedAt = "refs/heads/"+e.Branch+" @ "+e.Commit+" (merge queue)", now()
		if err := q.changes.policies.store(s); err != nil {
			return err
		}
	}
	if err := q.record(ctx, e.Run, paddock.EventQueueLanded, map[string]any{"branch": e.Branch, "from": e.Tip, "commit": e.Commit, "merged": e.Merged}); err != nil {
		return err
	}
	return q.record(ctx, e.Run, paddock.EventApplied, map[string]string{"hash": e.Hash, "branch": e.Branch, "commit": e.Commit})
}

// replay makes the index entries of cs on tip: an entry whose path the
// branch left as it was at the run's base is taken as approved; one the
// branch changed the same way is already there; one both changed is merged
// line by line (its path is in merged: its diff is not the one approved);
// anything else is a conflict. Merged contents are written under scratch.
func (q *Queue) replay(ctx context.Context, gitDir string, r *paddock.Run, cs *paddock.ChangeSet, tip, scratch string) (entries []gitx.IndexEntry, merged []string, err error) {
	base := r.Workspace.BaseRevision
	var paths []string
	for _, e := range cs.Entries {
		paths = append(paths, e.Path)
	}
	atBase, err := q.Git.EntriesAt(ctx, gitDir, base, paths)
	if err != nil {
		return nil, nil, internal("reading the base failed", err)
	}
	atTip := atBase
	if tip != base {
		if atTip, err = q.Git.EntriesAt(ctx, gitDir, tip, paths); err != nil {
			return nil, nil, internal("reading the branch failed", err)
		}
	}
	var conflicts []string
	// A directory of a path the change set writes that the branch made
	// something else (a file, a link) is a conflict git would not name.
	parents := map[string]bool{}
	for _, e := range cs.Entries {
		if e.Op == paddock.OpDelete {
			continue
		}
		for d := path.Dir(e.Path); d != "." && d != "/"; d = path.Dir(d) {
			parents[d] = true
		}
	}
	if len(parents) > 0 && tip != base {
		atTipDirs, err := q.Git.EntriesAt(ctx, gitDir, tip, slices.Sorted(maps.Keys(parents)))
		if err != nil {
			return nil, nil, internal("reading the branch failed", err)
		}
		for _, e := range cs.Entries {
			for d := path.Dir(e.Path); d != "." && d != "/"; d = path.Dir(d) {
				if te, ok := atTipDirs[d]; ok && te.Mode != "040000" {
					conflicts = append(conflicts, e.Path+" (the branch made "+d+" a file)")
					break
				}
			}
		}
	}
	for _, e := range cs.Entries {
		b, t := atBase[e.Path], atTip[e.Path]
		want := gitx.TreeEntry{Mode: e.NewMode, Blob: e.NewBlob}
		if e.Op == paddock.OpDelete {
			want = gitx.TreeEntry{}
		}
		ie := gitx.IndexEntry{Path: e.Path, Mode: e.NewMode, Blob: e.NewBlob}
		if e.Op != paddock.OpDelete && e.NewMode != "160000" {
			ie.File = q.blobPath(r.ID, e.NewBlob)
		}
		switch {
		case t == b:
			entries = append(entries, ie)
		case t == want:
			// The branch made the same change: nothing to add.
		case e.Op == paddock.OpModify && isFile(b.Mode) && isFile(t.Mode) && isFile(e.NewMode):
			content, err := q.mergeEntry(ctx, gitDir, r.ID, e, base, tip)
			if errors.Is(err, gitx.ErrMergeConflict) {
				conflicts = append(conflicts, e.Path)
				continue
			}
			if err != nil {
				return nil, nil, err
			}
			file := filepath.Join(scratch, fmt.Sprint(len(entries)))
			if err := os.WriteFile(file, content, 0o600); err != nil {
				return nil, nil, internal("replaying the change set failed", err)
			}
			mode := e.NewMode
			if e.NewMode == b.Mode {
				mode = t.Mode // only the branch changed the mode
			}
			entries = append(entries, gitx.IndexEntry{Path: e.Path, Mode: mode, Blob: changeset.BlobID(content), File: file})
			merged = append(merged, e.Path)
		default:
			conflicts = append(conflicts, e.Path)
		}
	}
	if len(conflicts) > 0 {
		return nil, nil, paddock.Errorf(paddock.CodeConflict, "the change set conflicts with what the branch (now at %s) changed since the run's base in %s; redo the run's work on the branch (a new run at its tip) and submit again",
			tip[:12], strings.Join(conflicts, ", ")).WithDetail("conflicts", conflicts)
	}
	return entries, merged, nil
}

func isFile(mode string) bool { return mode == "100644" || mode == "100755" }

// mergeEntry merges, line by line, the approved content of e with what
// the branch's tip made of the same base file.
func (q *Queue) mergeEntry(ctx context.Context, gitDir, run string, e paddock.ChangeEntry, base, tip string) ([]byte, error) {
	baseB, err := q.Git.FileAt(ctx, gitDir, base, e.Path)
	if err != nil {
		return nil, internal("reading the base failed", err)
	}
	tipB, err := q.Git.FileAt(ctx, gitDir, tip, e.Path)
	if err != nil {
		return nil, internal("reading the branch failed", err)
	}
	ours, err := q.changeSets(run).ReadBlob(e.NewBlob)
	if err != nil {
		return nil, internal("reading the frozen change set failed", err)
	}
	if bytes.IndexByte(baseB, 0) >= 0 || bytes.IndexByte(tipB, 0) >= 0 || bytes.IndexByte(ours, 0) >= 0 {
		return nil, gitx.ErrMergeConflict // binary: never merged
	}
	return q.Git.MergeFile(ctx, baseB, tipB, ours)
}

// queueObjects is where run id's replay for the merge queue is committed
// until it lands: an object directory of paddock's, in the run's
// artifacts, borrowing the project's objects.
func (q *Queue) queueObjects(id string) string {
	return filepath.Join(q.runDir(id), "queue-objects")
}

// queueObjectsCtx is ctx under which git also reads run id's replay.
func (q *Queue) queueObjectsCtx(ctx context.Context, id string) context.Context {
	if store := q.queueObjects(id); exists(store) {
		return gitx.WithObjects(ctx, store)
	}
	return ctx
}

// checkLanding runs the project's manifest checks on e's commit in a
// throwaway read run, given back after. No checks declared: nothing to
// run, and the entry says so.
func (q *Queue) checkLanding(ctx context.Context, e *paddock.QueueEntry, p *paddock.Project) error {
	def := agent.ForAccess(paddock.AccessRead)
	// A check run (checkrun.go): its checks, and the recipes they run,
	// come from the branch's tip (its Base): a change set never chooses
	// what checks it.
	check := &paddock.ReviewOf{Run: e.Run, Hash: e.Hash, Commit: e.Commit, Base: e.Tip, Check: true}
	tr, err := q.runs.create(ctx, newRun{req: paddock.CreateRunRequest{Project: p.Name, Base: e.Commit}, def: def, review: check})
	if err != nil {
		return err
	}
	if dir := q.reviews.runGitDir(tr); dir != "" {
		// Its git borrows the replay's store, where its commit is.
		for _, store := range q.reviews.runObjects(tr) {
			if err := workspace.AddAlternate(dir, workspace.ObjectsInView(store)); err != nil {
				q.log().Warn("the queue's check run's git cannot read its commit", "run", tr.ID, "err", err)
			}
		}
	}
	defer func() {
		if _, err := q.runs.Reject(context.WithoutCancel(ctx), tr.ID); err != nil {
			q.log().Warn("giving back a queue's test run failed", "run", tr.ID, "err", err)
		}
		q.dropSnapshot(context.WithoutCancel(ctx), p.Name, e.Commit)
	}()
	e.TestRun = tr.ID
	if err := q.setEntry(e); err != nil {
		return err
	}
	if err := q.record(ctx, e.Run, paddock.EventQueueTesting, map[string]any{"branch": e.Branch, "tip": e.Tip, "commit": e.Commit, "test_run": tr.ID, "merged": e.Merged}); err != nil {
		// The entry names its test run already; a store's hiccup here must
		// not hand an approved change back to a person.
		q.log().Warn("recording a queue entry's test run failed", "run", e.Run, "test_run", tr.ID, "err", err)
	}
	res, err := q.verifier.Verify(ctx, tr.ID, paddock.VerifyRequest{})
	if paddock.IsCode(err, paddock.CodeUnsupported) && strings.Contains(paddock.ErrorMessage(err), "declares no") {
		e.Reason = "the project's manifest declares no checks: landed unchecked"
		return nil
	}
	if err != nil {
		return err
	}
	if !res.Passed {
		var failed []string
		said := ""
		for _, c := range res.Checks {
			if !c.Passed && c.Skipped == "" {
				failed = append(failed, c.Name)
				if lines := strings.Split(strings.TrimSpace(c.Output), "\n"); said == "" && lines[len(lines)-1] != "" {
					said = ": " + strings.TrimSpace(lines[len(lines)-1])
				}
			}
		}
		return paddock.Errorf(paddock.CodeConflict, "check %s failed on the change set replayed onto %s%s (it ran in run %s)", strings.Join(failed, ", "), e.Branch, said, tr.ID)
	}
	return nil
}

// recoverQueue finishes what a crash cut: an entry being checked is
// queued again; one being landed is landed if its branch holds its commit,
// queued again if the branch is still at its tip, and returned otherwise.
// Then the worker drains the queue.
func (q *Queue) recoverQueue(ctx context.Context) []paddock.Finding {
	var out []paddock.Finding
	var landedNow []*paddock.QueueEntry
	var cut []string // test runs a crash left
	err := q.updateQueue(func(d *queueDoc) error {
		for _, e := range d.Entries {
			switch e.State {
			case paddock.QueueTesting:
				e.State = paddock.QueueQueued
				if e.TestRun != "" {
					cut = append(cut, e.TestRun)
				}
				out = append(out, paddock.Finding{RunID: e.Run, Issue: "its merge queue check was cut short", Action: "queued again"})
			case paddock.QueueLanding:
				at := ""
				if p, err := q.Project(ctx, e.Project); err == nil {
					if r, err := q.Git.Resolve(ctx, p.Root, "refs/heads/"+e.Branch); err == nil {
						at = r.SHA
					}
				}
				switch at {
				case e.Commit:
					c := *e
					landedNow = append(landedNow, &c)
					out = append(out, paddock.Finding{RunID: e.Run, Issue: "its landing was cut short after the branch moved", Action: "landed"})
				case e.Tip:
					e.State = paddock.QueueQueued
					out = append(out, paddock.Finding{RunID: e.Run, Issue: "its landing was cut short", Action: "queued again"})
				default:
					e.State, e.Reason = paddock.QueueReturned, "a restart cut its landing short, and the branch has moved since"
					out = append(out, paddock.Finding{RunID: e.Run, Issue: "its landing was cut short", Action: "returned"})
				}
			}
		}
		return nil
	})
	if err != nil {
		q.log().Error("recovering the merge queue failed", "err", err)
		return nil
	}
	for _, e := range landedNow {
		if err := q.landed(ctx, e); err != nil {
			q.log().Error("recording a landing failed", "run", e.Run, "err", err)
		}
	}
	for _, id := range cut {
		if _, err := q.runs.Reject(ctx, id); err != nil && !paddock.IsCode(err, paddock.CodeNotFound) {
			q.log().Warn("giving back a queue's cut test run failed", "run", id, "err", err)
		}
	}
	q.kickQueue()
	return out
}
