package lifecycle

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/changeset"
	"github.com/paddock-dev/paddock/gitx"
	"github.com/paddock-dev/paddock/internal/durable"
	"github.com/paddock-dev/paddock/redact"
	"github.com/paddock-dev/paddock/workspace"
)

// kernel is what every service shares: the configuration, the store and
// its events, the run and project lookups, the change-set store, and the
// lifetime of the Manager's work.
type kernel struct {
	Config

	// testHook, set by tests only, runs at named points of an apply into
	// a working tree ("commit", "verify"), to play a concurrent writer.
	testHook func(point string)

	// mu serializes operations that create or delete directories, so that gc
	// never judges a directory another operation is making.
	mu sync.Mutex

	notifyMu sync.Mutex
	changed  chan struct{} // closed and replaced whenever events were appended

	ownerOnce sync.Once
	expectMu  expectStripes                 // calls carrying expect_seq on a run, one at a time (expect.go)
	identity  atomic.Pointer[gitx.Identity] // SetIdentity's

	// ctx is the parent of the Manager's own work: Close cancels it, which
	// ends the commands running, the jobs and every service's lifetime
	// (their contexts are children of it). stop cancels it.
	ctx  context.Context
	stop context.CancelFunc
	// plans keeps the runs' plans (plan.go); uncommitted, the bases that
	// hold a checkout's uncommitted changes (uncommitted.go).
	plans       *planBook
	uncommitted *uncommittedBase
	// forgetters drop what a service keeps in memory about a run
	// (forgetRun); NewManager sets them.
	forgetters []func(id string)
	// redactors keeps the runs' secrets' names and the redactors made of
	// their values (redactors.go).
	redactors *redactors
}

// frozen loads the change set submitted under hash, with its diff file.
func (kn *kernel) frozen(id, hash string) (*paddock.ChangeSet, error) {
	return kn.changeSets(id).Frozen(hash)
}

// runDir is where a run's artifacts are kept.
func (kn *kernel) runDir(id string) string { return filepath.Join(kn.ArtifactsDir, id) }

// changeSets is where a run's change sets are kept: in its artifacts.
func (kn *kernel) changeSets(id string) changeset.Store { return changeset.Store{Dir: kn.runDir(id)} }

// blobPath is where a frozen blob of a run is kept.
func (kn *kernel) blobPath(id, blob string) string { return kn.changeSets(id).BlobPath(blob) }

func (kn *kernel) submission(id string) (*paddock.Submission, error) {
	b, err := os.ReadFile(filepath.Join(kn.runDir(id), "submission.json"))
	if errors.Is(err, os.ErrNotExist) {
		return nil, paddock.Errorf(paddock.CodeConflict, "run %s has no submitted change set; submit it first", id)
	}
	if err != nil {
		return nil, internal("reading the submission failed", err)
	}
	var s paddock.Submission
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, internal("reading the submission failed", err)
	}
	return &s, nil
}

func (kn *kernel) saveSubmission(s *paddock.Submission) error {
	b, _ := json.MarshalIndent(s, "", "  ")
	if err := durable.WriteFile(filepath.Join(kn.runDir(s.RunID), "submission.json"), b); err != nil {
		return internal("saving the submission failed", err)
	}
	return nil
}

// selfNode is this daemon's node id, or "" on a daemon of its own.
func (kn *kernel) selfNode() string {
	if kn.Cluster == nil {
		return ""
	}
	return kn.Cluster.Self().ID
}

// mine reports whether run r's workspace is this daemon's: on a daemon of
// its own every run is; with nodes, the runs this node holds (a run with
// no node is one made before nodes, which the first node to join takes).
func (kn *kernel) mine(r *paddock.Run) bool {
	return kn.Cluster == nil || r.Node == "" || r.Node == kn.selfNode()
}

// auxDir is where run id keeps its home (and a worktree run its git).
func (kn *kernel) auxDir(id string) string { return workspace.AuxDir(kn.WorkspacesDir, id) }

// Project returns one project.
func (kn *kernel) Project(ctx context.Context, name string) (p *paddock.Project, err error) {
	err = kn.Store.View(ctx, func(tx paddock.Tx) error {
		p, err = tx.Project(ctx, name)
		return err
	})
	return p, err
}

// dropSnapshot removes the overlay snapshot of project at rev if no live
// run uses it: a merge queue's check makes one per replayed commit, which
// no later run will start from.
func (kn *kernel) dropSnapshot(ctx context.Context, project, rev string) {
	ov, ok := kn.overlayProvider()
	if !ok {
		return
	}
	defer ov.LockSnapshots()()
	path := workspace.SnapshotDir(ov.Snapshots, project, rev)
	var runs []*paddock.Run
	if err := kn.Store.View(ctx, func(tx paddock.Tx) (err error) {
		runs, err = tx.Runs(ctx, paddock.RunFilter{Project: project, Removed: true})
		return err
	}); err != nil {
		return
	}
	for _, r := range runs {
		if w := r.Workspace; w != nil && w.Kind == paddock.KindOverlay && w.State != paddock.StateCleaned && w.BaseRevision == rev {
			return // in use
		}
	}
	for _, p := range []string{path, path + ".index"} {
		if _, err := os.Lstat(p); err == nil {
			if err := workspace.RemoveTree(filepath.Dir(path), p); err != nil {
				kn.log().Warn("removing a queue check's snapshot failed", "path", p, "err", err)
			}
		}
	}
}

// Run returns one run with its workspace.
func (kn *kernel) Run(ctx context.Context, id string) (r *paddock.Run, err error) {
	r, _, _, err = paddock.ReadRun(ctx, kn.Store, id, paddock.RunWith{}) // one round trip on PostgreSQL
	if err == nil {
		kn.describe(r)
	}
	return r, err
}

// describe fills in what an answer about r says beyond its record: where
// its change set stands (Review), and where an overlay workspace's layers
// are, since its root is not the view on the host.
func (kn *kernel) describe(r *paddock.Run) {
	r.Review = kn.reviewOf(r)
	w := r.Workspace
	if w == nil || w.Kind != paddock.KindOverlay || !kn.mine(r) {
		return // another node's layers are on its disk, not here
	}
	if ov, ok := kn.overlayProvider(); ok {
		l, _ := ov.LayersWithStack(r.Project, w) // a stack unread shows none
		w.OverlayLayers = &paddock.OverlayLayers{Lower: l.Lower, Upper: l.Upper, Work: l.Work, Frozen: l.Frozen}
	}
}

// reviewOf says where run r's change set stands: rejected (whatever was
// submitted), applied, approved, submitted, or "" when nothing is. A run
// whose workspace is gone (cleaned, or being) and whose submission was
// never applied was discarded (rejected, or removed, which rejects it):
// its review stays rejected, not what it was before.
func (kn *kernel) reviewOf(r *paddock.Run) string {
	if r.State() == paddock.StateRejected {
		return paddock.ReviewRejected
	}
	if !kn.mine(r) {
		return "" // its submission is on the node that holds it
	}
	s, err := kn.submission(r.ID)
	switch {
	case err != nil:
		return ""
	case !s.AppliedAt.IsZero():
		return paddock.ReviewApplied
	case r.State() == paddock.StateCleanupPending || r.State() == paddock.StateCleaned:
		return paddock.ReviewRejected
	case !s.ApprovedAt.IsZero():
		return paddock.ReviewApproved
	}
	return paddock.ReviewSubmitted
}

// runAndProject loads a run and its project.
func (kn *kernel) runAndProject(ctx context.Context, id string) (r *paddock.Run, p *paddock.Project, err error) {
	err = kn.Store.View(ctx, func(tx paddock.Tx) error {
		if r, err = tx.Run(ctx, id); err != nil {
			return err
		}
		p, err = tx.Project(ctx, r.Project)
		return err
	})
	if err == nil && r.Workspace == nil {
		err = paddock.Errorf(paddock.CodeConflict, "run %s has no workspace", id)
	}
	return r, p, err
}

// readSecret is the value of secret name (Config.Secret), kept for the
// masks: a value paddock read for anything (a command's environment, a
// credential, a check) is masked for as long as this daemon runs, even
// once the secret has another (redactors).
func (kn *kernel) readSecret(name string) (string, bool) {
	if kn.Secret == nil {
		return "", false
	}
	v, ok := kn.Secret(name)
	if ok {
		kn.redactors.note(name, v)
	}
	return v, ok
}

// redactor masks a run's declared secrets and every credential shape.
func (kn *kernel) redactor(r *paddock.Run) *redact.Redactor { return kn.redactors.forRun(r) }

// overlayProvider is the manager's overlay provider, if it has one.
func (kn *kernel) overlayProvider() (*workspace.Overlay, bool) {
	ov, ok := kn.Providers[paddock.KindOverlay].(*workspace.Overlay)
	return ov, ok
}

// forgetRun drops what the services keep in memory about run id, once
// it is gone from this node: cleaned up, or given back to another node.
// What they keep for a run only while a call holds it (its locks) goes by
// itself (runLocks).
func (kn *kernel) forgetRun(id string) {
	kn.redactors.forget(id)
	for _, forget := range kn.forgetters {
		forget(id)
	}
}

// checkOpen refuses new work once Close has begun.
func (kn *kernel) checkOpen() error {
	if kn.ctx.Err() != nil {
		return errClosed()
	}
	return nil
}

func (kn *kernel) log() *slog.Logger {
	if kn.Logger == nil {
		return slog.Default()
	}
	return kn.Logger
}

// update runs fn in a store transaction and wakes event waiters afterwards.
// A seq expectation in ctx is checked in the same transaction, first.
func (kn *kernel) update(ctx context.Context, fn func(paddock.Tx) error) error {
	return kn.write(func() error { return kn.Store.Update(ctx, expecting(ctx, fn)) })
}

// updateLazy is update through the store's UpdateLazy: a commit that
// survives the daemon's crash but, until the next update's, not the
// machine's (paddock.LazyUpdater). Only for what Calls records.
func (kn *kernel) updateLazy(ctx context.Context, fn func(paddock.Tx) error) error {
	return kn.write(func() error { return paddock.UpdateLazy(ctx, kn.Store, expecting(ctx, fn)) })
}

// expecting is fn with ctx's seq expectation checked first, in its
// transaction.
func expecting(ctx context.Context, fn func(paddock.Tx) error) func(paddock.Tx) error {
	return func(tx paddock.Tx) error {
		if err := checkExpect(ctx, tx); err != nil {
			return err
		}
		return fn(tx)
	}
}

// write makes a durable write to the store and wakes event waiters
// afterwards. A write that found the state disk full before the watchdog
// saw it is made again once the held reserve gives the daemon's state its
// room (diskreserve.go).
func (kn *kernel) write(w func() error) error {
	err := w()
	if diskFull(err) && kn.heldReserve().release(kn.log()) {
		err = w()
	}
	kn.notify()
	return err
}

// appendEvents appends evs to run id in one transaction, as update
// would, in one round trip where the store can (paddock.AppendEvents): a
// seq expectation in ctx not checked yet is checked in the same
// transaction, through update.
func (kn *kernel) appendEvents(ctx context.Context, id string, evs []paddock.EventDraft) ([]*paddock.Event, error) {
	if exp := paddock.ExpectedSeq(ctx); exp != nil && !exp.Checked {
		var out []*paddock.Event
		err := kn.update(ctx, func(tx paddock.Tx) (err error) {
			out, err = paddock.AppendEventsIn(ctx, tx, id, evs)
			return err
		})
		return out, err
	}
	var out []*paddock.Event
	err := kn.write(func() (err error) {
		out, err = paddock.AppendEvents(ctx, kn.Store, id, evs)
		return err
	})
	return out, err
}

// record appends an event that records something already done: a file
// written, a command run, a branch made. It is written whatever becomes of
// the request: a client that disconnects once the effect happened must not
// erase its record.
func (kn *kernel) record(ctx context.Context, id, typ string, data any) error {
	_, err := kn.appendEvents(context.WithoutCancel(ctx), id, []paddock.EventDraft{{Type: typ, Data: data}})
	return err
}

func (kn *kernel) notify() {
	kn.notifyMu.Lock()
	if kn.changed != nil {
		close(kn.changed)
	}
	kn.changed = make(chan struct{})
	kn.notifyMu.Unlock()
}

func (kn *kernel) waitChan() <-chan struct{} {
	kn.notifyMu.Lock()
	defer kn.notifyMu.Unlock()
	if kn.changed == nil {
		kn.changed = make(chan struct{})
	}
	return kn.changed
}

// transition is paddock.Transition plus the consequences the manager owns:
// leaving the live states releases the project lock.
func (kn *kernel) transition(ctx context.Context, tx paddock.Tx, r *paddock.Run, to paddock.WorkspaceState, reason string) error {
	if err := paddock.Transition(ctx, tx, r.Workspace, to, reason); err != nil {
		return err
	}
	if !live(to) && needsLock(r.Workspace.Kind) {
		released, err := tx.ReleaseLock(ctx, r.Project, r.ID)
		if err != nil {
			return err
		}
		if released {
			if _, err := tx.AppendEvent(ctx, r.ID, paddock.EventLockReleased, map[string]string{"project": r.Project}); err != nil {
				return err
			}
		}
	}
	return nil
}

// retainedMarker is a file beside a retained workspace's directory. It keeps
// gc away from the directory even if the state database is lost.
func (kn *kernel) retainedMarker(w *paddock.Workspace) string {
	if filepath.Dir(w.Root) != filepath.Clean(kn.WorkspacesDir) {
		return ""
	}
	return w.Root + ".retained"
}

func (kn *kernel) markRetained(w *paddock.Workspace) {
	if p := kn.retainedMarker(w); p != "" {
		body := "run " + w.RunID + " retained at " + w.RetainedAt.Format(time.RFC3339) + "\n"
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			kn.log().Warn("cannot write retention marker", "run", w.RunID, "err", err)
		}
	}
}

func (kn *kernel) provider(k paddock.WorkspaceKind) (paddock.WorkspaceProvider, error) {
	kn.ownerOnce.Do(func() {
		// Once, before any use: the provider is shared by every create.
		if ov, ok := kn.Providers[paddock.KindOverlay].(*workspace.Overlay); ok && ov.Owner == 0 {
			ov.Owner = kn.SandboxUID
		}
	})
	p, ok := kn.Providers[k]
	if !ok {
		return nil, paddock.Errorf(paddock.CodeUnsupported, "workspace kind %s is not available here", k)
	}
	return p, nil
}
