package lifecycle

import (
	"context"
	"crypto/rand"
	"encoding/base32"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/sandbox"
	"github.com/paddock-dev/paddock/workspace"
)

// Forks forks a run into a new one at a point of its history.
type Forks struct {
	*kernel
	// the services it calls
	broker *Broker
	jobs   *Jobs
	runs   *Runs
	views  *views

	// runUses keeps a fork from freezing a run's upper layer while a call
	// of the broker (a tool, a command, verify) reads or writes it: each
	// holds it shared for its duration; a fork takes it, or is refused.
	runUses runLocks
	// settleEffects waits for the look at a run's files after its last
	// call (Provenance.settle).
	settleEffects func(id string)
}

// Forks (issue #22): an overlay run's upper layer frozen where it lies, and
// runs stacked on it, each with an empty upper layer and a harness of its
// own; the run forked goes on over the same frozen layer (workspace/layers.go
// holds the layout and the journal).
//
// The order makes a kill at any point leave no fork or a whole one:
//
//  1. the forks' records are made, preparing (a crash from here on: the
//     next start rolls them back, as any run interrupted while preparing);
//  2. the journal is written;
//  3. the run's upper layer is frozen (renames; a crash: Recover finishes
//     the freeze from the journal, which changes no file the run sees);
//  4. each fork's layers are made on the frozen one;
//  5. one transaction marks every fork ready and records run.forked on the
//     run: the fork is made, whole;
//  6. the journal is removed.

// useRun marks a call on run id under way; a fork of the run waits for
// no call (it is refused while one runs).
func (fk *Forks) useRun(id string) (release func(), err error) {
	release, ok := fk.runUses.tryRLock(id)
	if !ok {
		return nil, paddock.Errorf(paddock.CodeBusy, "run %s is being forked; try again in a moment", id)
	}
	return release, nil
}

// Fork freezes run id's current files into a layer and makes req.Count
// runs stacked on it, each at the run's project, base, agent definition,
// access and grants, with an empty upper layer of its own; their change
// sets are against the same base, the frozen layer's changes included.
// The run goes on over the frozen layer, on a new upper layer: what it
// writes after the fork no fork sees. Only an overlay run forks.
func (fk *Forks) Fork(ctx context.Context, id string, req paddock.ForkRequest) (*paddock.ForkResult, error) {
	n := req.Count
	if n == 0 {
		n = 1
	}
	if n < 1 || n > paddock.MaxFork {
		return nil, paddock.Errorf(paddock.CodeBadRequest, "a fork makes 1 to %d runs, not %d", paddock.MaxFork, req.Count)
	}
	if err := fk.checkOpen(); err != nil {
		return nil, err
	}
	if err := fk.jobs.refuseWhileJobRuns(ctx, id); err != nil {
		return nil, err
	}
	op, err := fk.planFork(ctx, id, req.At)
	if err != nil {
		return nil, err
	}

	// No call of the broker on the run, no harness, no other fork
	// meanwhile; gc waits (m.mu). The look at the files after the last
	// call, which runs after its answer, is waited for first.
	fk.settleEffects(id)
	unuse, ok := fk.runUses.tryLock(id)
	if !ok {
		return nil, paddock.Errorf(paddock.CodeBusy, "run %s has a call or a command under way; fork it when it ends", id)
	}
	defer unuse()
	if fk.Harnesses != nil {
		unhold, err := fk.Harnesses.Hold(id)
		if err != nil {
			return nil, err
		}
		defer unhold()
	}
	fk.mu.Lock()
	defer fk.mu.Unlock()
	// Read again under the lock: a reject or rm may have come between.
	if op.r, op.p, err = fk.forkable(ctx, id); err != nil {
		return nil, err
	}
	grants, err := fk.broker.AccessRequests(ctx, id)
	if err != nil {
		return nil, err
	}
	repo, err := fk.views.repoOf(ctx, op.p)
	if err != nil {
		return nil, err
	}
	// 1. The records, preparing.
	if err := op.records(ctx, n, grants); err != nil {
		return nil, err
	}
	fk.hook("fork:records")
	op.done = context.WithoutCancel(ctx) // from here on the fork is finished or rolled back
	// 2. The journal; 3. the freeze.
	stack, err := op.freeze()
	if err != nil {
		return nil, err
	}
	// 4. The forks' layers on it.
	if err := op.prepare(stack, repo.CommonDir); err != nil {
		return nil, err
	}
	// 5. Every fork ready and the fork recorded, at once; 6. done.
	if err := op.recordForked(stack); err != nil {
		return nil, err
	}
	return op.result()
}

// forkOp is one fork under way: the run it forks, the stack its forks
// stand on, and the runs it makes.
type forkOp struct {
	fk    *Forks
	id    string
	r     *paddock.Run
	p     *paddock.Project
	ov    *workspace.Overlay
	below []string // the run's frozen layers the forks stand on
	reuse bool     // on the same stack: no new frozen layer
	j     *workspace.ForkJournal
	kids  []*paddock.Run
	done  context.Context // the fork's context once it must finish or roll back
}

// planFork checks that run id can be forked (at layer at, if given) and
// settles the stack its forks stand on.
func (fk *Forks) planFork(ctx context.Context, id, at string) (*forkOp, error) {
	r, _, err := fk.forkable(ctx, id)
	if err != nil {
		return nil, err
	}
	prov, err := fk.provider(paddock.KindOverlay)
	if err != nil {
		return nil, err
	}
	ov := prov.(*workspace.Overlay)
	below, err := ov.Stack(r.Workspace)
	if err != nil {
		return nil, internal("reading the run's layers failed", err)
	}
	// A run that changed nothing since its last freeze (its upper layer
	// holds only its own .git) is forked again on the same stack: a new,
	// empty frozen layer would only make every stack deeper.
	reuse := len(below) > 0 && holdsOnlyGit(ov.LayersOf(r.Project, r.Workspace).Upper)
	if at != "" {
		// At an earlier freeze: the stack from that layer down, as the
		// run's files were when it was frozen.
		i := slices.Index(below, at)
		if i < 0 {
			return nil, paddock.Errorf(paddock.CodeNotFound, "run %s stacks on no layer %s (its layers: %s; each fork's run.forked event names the one it froze)", id, at, strings.Join(below, ", "))
		}
		below, reuse = below[i:], true
	}
	if !reuse && len(below)+1 > sandbox.MaxFrozen {
		return nil, paddock.Errorf(paddock.CodeConflict, "run %s stacks on %d frozen layers; a run stacks on at most %d", id, len(below), sandbox.MaxFrozen)
	}
	return &forkOp{fk: fk, id: id, r: r, ov: ov, below: below, reuse: reuse}, nil
}

// records makes the n forks' records, preparing, in one transaction.
func (op *forkOp) records(ctx context.Context, n int, grants []*paddock.AccessRequest) error {
	op.j = &workspace.ForkJournal{Layer: newLayerID(), Run: op.id, Root: op.r.Workspace.Root}
	if op.reuse {
		op.j.Layer = op.below[0]
	}
	op.kids = make([]*paddock.Run, n)
	for i := range op.kids {
		op.kids[i] = op.fk.forkRecord(op.r, newID())
		op.j.Children = append(op.j.Children, op.kids[i].ID)
	}
	return op.fk.update(ctx, func(tx paddock.Tx) error {
		for _, k := range op.kids {
			if err := op.fk.createForkRecord(ctx, tx, op.r, k, op.j.Layer, grants); err != nil {
				return err
			}
		}
		return nil
	})
}

// fail rolls the fork back: its runs cleaned, and the run left with the
// shape the freeze gives it (the same files) if its layer was frozen.
func (op *forkOp) fail(msg string, cause error, frozen bool) error {
	fk, ov := op.fk, op.ov
	fk.log().Error("fork failed", "run", op.id, "err", cause)
	for _, k := range op.kids {
		if err := fk.runs.cleanup(op.done, k, op.p, "fork failed; rolled back"); err != nil {
			fk.log().Error("rolling back a fork failed", "run", k.ID, "err", err)
		}
	}
	if _, err := os.Lstat(ov.LayerDir(op.j.Layer)); frozen && errors.Is(err, fs.ErrNotExist) {
		frozen = false // nothing moved: the run is as it was
		ov.EndFork(op.j.Layer)
	}
	if frozen {
		if err := ov.Freeze(op.j); err != nil {
			fk.log().Error("finishing a freeze failed; the next start finishes it", "run", op.id, "err", err)
			return internal(msg, errors.Join(cause, err))
		}
		ov.EndFork(op.j.Layer)
	}
	var pe *paddock.Error
	if errors.As(cause, &pe) {
		return cause
	}
	return internal(msg, cause)
}

// freeze writes the fork's journal and freezes the run's upper layer
// into a new frozen layer, and returns the stack the forks stand on. None
// when the stack is reused: the forks not made ready are rolled back by
// Recover as any preparing run.
func (op *forkOp) freeze() ([]string, error) {
	if op.reuse {
		return op.below, nil
	}
	if err := op.ov.BeginFork(op.j); err != nil {
		return nil, op.fail("writing the fork's journal failed", err, false)
	}
	op.fk.hook("fork:journal")
	if err := op.ov.Freeze(op.j); err != nil {
		return nil, op.fail("freezing the run's layer failed", err, true)
	}
	op.fk.hook("fork:frozen")
	return append([]string{op.j.Layer}, op.below...), nil
}

// prepare makes each fork's layers on stack, and its home.
func (op *forkOp) prepare(stack []string, gitDir string) error {
	fk := op.fk
	for _, k := range op.kids {
		if err := op.ov.PrepareOn(op.done, op.p, k.Workspace, stack, gitDir); err != nil {
			return op.fail("preparing a fork failed", err, true)
		}
		if fk.SandboxUID != 0 {
			if err := chownTree(k.Workspace.Root, fk.SandboxUID); err != nil {
				fk.log().Error("handing the workspace to the sandbox user failed", "run", k.ID, "err", err)
			}
		}
		if err := fk.views.prepareAux(k); err != nil {
			return op.fail("making a fork's home failed", err, true)
		}
		fk.hook("fork:prepared")
	}
	return nil
}

// recordForked makes every fork ready and records the fork, in one
// transaction; then the journal goes (a crash before: Recover finds the
// freeze done and the forks ready, and only removes it).
func (op *forkOp) recordForked(stack []string) error {
	fk, done := op.fk, op.done
	if err := fk.update(done, func(tx paddock.Tx) error {
		for _, k := range op.kids {
			if err := fk.transition(done, tx, k, paddock.StateReady, ""); err != nil {
				return err
			}
		}
		_, err := tx.AppendEvent(done, op.id, paddock.EventRunForked, map[string]any{"layer": op.j.Layer, "runs": op.kidIDs(), "stack": stack})
		return err
	}); err != nil {
		return op.fail("recording the fork failed", err, true)
	}
	fk.hook("fork:recorded")
	if !op.reuse {
		if err := op.ov.EndFork(op.j.Layer); err != nil {
			fk.log().Warn("removing a fork's journal failed", "run", op.id, "err", err)
		}
	}
	fk.log().Info("run forked", "run", op.id, "layer", op.j.Layer, "runs", op.kidIDs())
	return nil
}

func (op *forkOp) kidIDs() []string {
	ids := make([]string, len(op.kids))
	for i, k := range op.kids {
		ids[i] = k.ID
	}
	return ids
}

// result is the forked run and its forks, as they are now.
func (op *forkOp) result() (*paddock.ForkResult, error) {
	res := &paddock.ForkResult{Layer: op.j.Layer}
	var err error
	if res.Run, err = op.fk.Run(op.done, op.id); err != nil {
		return nil, err
	}
	for _, k := range op.kidIDs() {
		kr, err := op.fk.Run(op.done, k)
		if err != nil {
			return nil, err
		}
		res.Runs = append(res.Runs, kr)
	}
	return res, nil
}

// holdsOnlyGit reports whether an upper layer holds nothing but the run's
// own .git: the run changed no file since it was last frozen.
func holdsOnlyGit(upper string) bool {
	ents, err := os.ReadDir(upper)
	if err != nil {
		return false
	}
	for _, e := range ents {
		if e.Name() != ".git" {
			return false
		}
	}
	return true
}

// forkable returns run id and its project if the run can be forked.
func (fk *Forks) forkable(ctx context.Context, id string) (*paddock.Run, *paddock.Project, error) {
	r, p, err := fk.runAndProject(ctx, id)
	if err != nil {
		return nil, nil, err
	}
	if r.Workspace == nil || r.Workspace.Kind != paddock.KindOverlay {
		kind := "no workspace"
		if r.Workspace != nil {
			kind = "a " + string(r.Workspace.Kind) + " workspace"
		}
		return nil, nil, paddock.Errorf(paddock.CodeUnsupported, "run %s has %s; a fork freezes an overlay workspace's layer, so only an overlay run forks (make it with --kind overlay)", id, kind)
	}
	switch r.Workspace.State {
	case paddock.StateReady, paddock.StateActive, paddock.StateCheckpointed:
	default:
		return nil, nil, paddock.Errorf(paddock.CodeConflict, "run %s is %s; only a ready, active or checkpointed run forks", id, r.Workspace.State)
	}
	if r.ReviewOf != nil {
		return nil, nil, paddock.Errorf(paddock.CodeConflict, "run %s is a review run; it holds a submitted change set and is never forked", id)
	}
	return r, p, nil
}

// forkRecord is the record of a fork of r, with id: r's project, base,
// access, definition, secrets and cleanup policy, its own workspace.
func (fk *Forks) forkRecord(r *paddock.Run, id string) *paddock.Run {
	t := now()
	w := r.Workspace
	return &paddock.Run{ID: id, Project: r.Project, Access: r.Access, Agent: r.Agent, AgentHash: r.AgentHash,
		Secrets: r.Secrets, IncludeIgnored: r.IncludeIgnored, CreatedAt: t,
		Workspace: &paddock.Workspace{ID: "w-" + id[2:], RunID: id, Kind: paddock.KindOverlay,
			Root: filepath.Join(fk.WorkspacesDir, id), Fingerprint: w.Fingerprint, BaseRef: w.BaseRef, BaseRevision: w.BaseRevision,
			Branch: w.Branch, State: paddock.StateRequested, CleanupPolicy: w.CleanupPolicy, CreatedAt: t, UpdatedAt: t}}
}

// createForkRecord writes fork k of r, preparing, with its run.created
// event (forked_from) and copies of r's granted access requests.
func (fk *Forks) createForkRecord(ctx context.Context, tx paddock.Tx, r, k *paddock.Run, layer string, grants []*paddock.AccessRequest) error {
	if err := tx.CreateRun(ctx, k); err != nil {
		return err
	}
	w := k.Workspace
	name := ""
	if k.Agent != nil {
		name = k.Agent.Name
	}
	if _, err := tx.AppendEvent(ctx, k.ID, paddock.EventRunCreated, byPrincipal(ctx, map[string]string{"project": k.Project, "kind": string(w.Kind),
		"base_ref": w.BaseRef, "base_revision": w.BaseRevision, "root": w.Root, "agent": name, "agent_hash": k.AgentHash,
		"forked_from": r.ID, "layer": layer})); err != nil {
		return err
	}
	for _, g := range grants {
		if g.State != paddock.RequestGranted {
			continue
		}
		c := *g
		var raw [6]byte
		rand.Read(raw[:])
		c.ID, c.RunID = "q-"+hex.EncodeToString(raw[:]), k.ID
		c.Note = strings.TrimSpace(c.Note + " (granted to " + r.ID + " before the fork)")
		if err := tx.AccessRequests().Create(ctx, &c); err != nil {
			return err
		}
		if _, err := tx.AppendEvent(ctx, k.ID, paddock.EventAccessGranted, &c); err != nil {
			return err
		}
	}
	return fk.transition(ctx, tx, k, paddock.StatePreparing, "forked from "+r.ID)
}

// recoverForks finishes the freezes a crash interrupted (the forks it left
// preparing are rolled back by recoverOne, as any run interrupted while
// being prepared).
func (fk *Forks) recoverForks(ctx context.Context) []paddock.Finding {
	ov, ok := fk.overlayProvider()
	if !ok {
		return nil
	}
	js, err := ov.Forks()
	if err != nil {
		fk.log().Error("reading the forks' journals failed", "err", err)
		return nil
	}
	var out []paddock.Finding
	for _, j := range js {
		f := paddock.Finding{RunID: j.Run, Path: j.Root, Issue: "interrupted while forking (layer " + j.Layer + ")", Action: paddock.ActionRolledBack}
		_, err := fk.Run(ctx, j.Run)
		if _, serr := os.Stat(j.Root); paddock.IsCode(err, paddock.CodeNotFound) || errors.Is(serr, fs.ErrNotExist) {
			ov.EndFork(j.Layer) // no run to finish (gc takes the layer)
			continue
		}
		if err := ov.Freeze(j); err != nil {
			fk.log().Error("finishing a freeze failed", "run", j.Run, "layer", j.Layer, "err", err)
			f.Action = paddock.ActionFailed
		} else if err := ov.EndFork(j.Layer); err != nil {
			f.Action = paddock.ActionFailed
		}
		out = append(out, f)
	}
	return out
}

// gcLayers removes the frozen layers no workspace stacks on any more.
func (fk *Forks) gcLayers(dryRun bool) []paddock.Finding {
	ov, ok := fk.overlayProvider()
	if !ok {
		return nil
	}
	// The layers first, then what uses them: a layer made meanwhile is
	// not listed, and one listed was journalled before it was made.
	ids, err := ov.LayerIDs()
	if err != nil {
		fk.log().Error("listing frozen layers failed", "err", err)
		return nil
	}
	used, err := ov.InUse()
	if err != nil {
		fk.log().Error("reading the workspaces' stacks failed", "err", err)
		return nil
	}
	var out []paddock.Finding
	for _, id := range ids {
		if used[id] {
			continue
		}
		f := paddock.Finding{Path: ov.LayerDir(id), Issue: "frozen layer no run stacks on", Action: paddock.ActionCleaned}
		if dryRun {
			f.Action = paddock.ActionWouldClean
		} else if err := ov.RemoveLayer(id); err != nil {
			fk.log().Error("removing a frozen layer failed", "layer", id, "err", err)
			f.Action = paddock.ActionFailed
		}
		out = append(out, f)
	}
	return out
}

// forkedAt is the seq of run id's run.created if a fork made it (0 if
// not): diff --blame says what the run was forked with came from there.
func (fk *Forks) forkedAt(ctx context.Context, id string) int64 {
	evs, err := fk.runs.Events(ctx, id, 0, 1)
	if err != nil || len(evs) == 0 || evs[0].Type != paddock.EventRunCreated {
		return 0
	}
	var d struct {
		ForkedFrom string `json:"forked_from"`
	}
	if json.Unmarshal(evs[0].Data, &d) != nil || d.ForkedFrom == "" {
		return 0
	}
	return evs[0].Seq
}

// hook runs the test hook at point, if a test set one.
func (fk *Forks) hook(point string) {
	if fk.testHook != nil {
		fk.testHook(point)
	}
}

// newLayerID returns a frozen layer's id such as "l-k4m2q7xa".
func newLayerID() string {
	var b [5]byte
	rand.Read(b[:])
	return "l-" + strings.ToLower(base32.StdEncoding.EncodeToString(b[:]))
}
