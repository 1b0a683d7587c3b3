package lifecycle

import (
	"cmp"
	"context"
	"fmt"
	"path/filepath"
	"slices"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/gitx"
	"github.com/paddock-dev/paddock/workspace"
)

// Reviews makes review runs over a change set, in objects of their own.
type Reviews struct {
	*kernel
	// the services it calls
	changes  *Changes
	projects *Projects
	queue    *Queue
	runs     *Runs
	views    *views
}

// reviewIdentity authors the commit that holds a change set under review:
// it names no person and is never a ref of the project.
var reviewIdentity = gitx.Identity{Name: "paddock review", Email: "review@paddock.invalid"}

// Review makes (or finds) the review run of run id's submitted change set:
// a read run, with the agent definition agentName (the built-in reviewer
// by default; a definition that writes is refused), whose workspace is
// exactly the submitted change set on its base, by hash. The change set is
// committed from its frozen blobs onto the base, a commit no ref of the
// project names, and the review run starts at that commit: its git sees
// the coder's work as HEAD, its commands run over a throwaway layer
// (builds and tests work, nothing outlives a command), and it can never
// submit, approve or apply. Asked again for the same hash, it answers the
// same live review run; once the coder submitted again, it makes a new one
// and rejects the older.
func (rv *Reviews) Review(ctx context.Context, id, agentName string) (*paddock.Run, error) {
	coder, _, err := rv.runAndProject(ctx, id)
	if err != nil {
		return nil, err
	}
	if coder.ReviewOf != nil {
		return nil, paddock.Errorf(paddock.CodeConflict, "run %s is itself a review (of run %s); review the run it reviews", id, coder.ReviewOf.Run)
	}
	s, err := rv.submission(id)
	if err != nil {
		return nil, err
	}
	live, err := rv.reviewsOf(ctx, coder)
	if err != nil {
		return nil, err
	}
	for _, r := range live {
		if r.ReviewOf.Hash == s.Hash && r.ReviewOf.Flow == "" && (agentName == "" || agentName == r.Agent.Name) {
			return r, nil
		}
	}
	def, err := rv.reviewerDef(ctx, cmp.Or(agentName, "reviewer"))
	if err != nil {
		return nil, err
	}
	r, err := rv.makeReview(ctx, coder, def, s.Hash, newID(), "")
	if err != nil {
		return nil, err
	}
	// The older reviews (not a flow's: a flow moves its own) looked at a
	// change set the coder has replaced.
	for _, old := range live {
		if old.ReviewOf.Hash != s.Hash && old.ReviewOf.Flow == "" {
			if _, err := rv.runs.Reject(ctx, old.ID); err != nil {
				rv.log().Warn("a review of an older change set could not be rejected", "run", old.ID, "err", err)
			}
		}
	}
	return r, nil
}

// reviewerDef is the definition name, which must read only.
func (rv *Reviews) reviewerDef(ctx context.Context, name string) (*paddock.AgentDefinition, error) {
	def, err := rv.runs.agentForCreate(ctx, paddock.CreateRunRequest{Agent: name})
	if err != nil {
		return nil, err
	}
	if cmp.Or(def.Workspace, string(paddock.AccessWrite)) != string(paddock.AccessRead) {
		return nil, paddock.Errorf(paddock.CodeBadRequest, "agent %s has workspace %s; a review run is read only (give a definition with workspace = \"read\")",
			def.Name, cmp.Or(def.Workspace, "write"))
	}
	return def, nil
}

// makeReview makes review run id (of flow, if set) of coder's change set
// hash with def: its submitted change set committed onto its base, or,
// when hash is not what coder submitted (a flow's coder that submitted
// nothing: an empty change set), its base itself. If run id exists already
// (a flow's step finished after a restart) it is that run.
func (rv *Reviews) makeReview(ctx context.Context, coder *paddock.Run, def *paddock.AgentDefinition, hash, id, flow string) (*paddock.Run, error) {
	if r, err := rv.Run(ctx, id); err == nil {
		return r, nil
	}
	p, err := rv.Project(ctx, coder.Project)
	if err != nil {
		return nil, err
	}
	review := &paddock.ReviewOf{Run: coder.ID, Hash: hash, Commit: coder.Workspace.BaseRevision, Base: coder.Workspace.BaseRevision, Flow: flow}
	if s, err := rv.submission(coder.ID); err == nil && s.Hash == hash {
		if review.Commit, review.Skipped, err = rv.reviewCommit(ctx, coder, p, hash, rv.reviewObjects(id)); err != nil {
			return nil, err
		}
		// The review run is made at a commit only its own store holds
		// (on a base that may be in the coder's own).
		ctx = gitx.WithObjects(rv.objectsCtx(ctx, coder), rv.reviewObjects(id))
	}
	r, err := rv.createReviewRun(ctx, p, coder, def, review, id)
	if err != nil {
		return nil, err
	}
	return r, rv.record(ctx, coder.ID, paddock.EventReviewStarted, map[string]any{"review": r.ID, "hash": hash, "agent": def.Name, "flow": flow})
}

// reviewObjects is the object directory of review run id: paddock's, in
// the run's auxiliary directory (removed with it), borrowing the project's
// objects. The commit under review lives there and nowhere else: it is
// unapproved content, which the project's own store, readable by every
// run of the project, never holds (invariant 2).
func (rv *Reviews) reviewObjects(id string) string {
	return filepath.Join(rv.auxDir(id), "review-objects")
}

// runObjects are the object stores of paddock's that hold run r's base:
// a review or check run's own, or, for the merge queue's check run, the
// replay's (queue.go).
func (rv *Reviews) runObjects(r *paddock.Run) []string {
	var out []string
	if rv.uncommitted.has(r.ID) {
		out = append(out, rv.uncommitted.store(r.ID)) // a base with the checkout's uncommitted changes
	}
	if r.ReviewOf != nil && rv.uncommitted.has(r.ReviewOf.Run) {
		out = append(out, rv.uncommitted.store(r.ReviewOf.Run)) // the reviewed run's, which its commit sits on
	}
	if r.ReviewOf == nil || r.ReviewOf.Commit == r.ReviewOf.Base {
		return out
	}
	if store := rv.reviewObjects(r.ID); exists(store) {
		out = append(out, store)
	}
	if r.ReviewOf.Check {
		if store := rv.queue.queueObjects(r.ReviewOf.Run); exists(store) {
			out = append(out, store)
		}
	}
	return out
}

// objectsCtx is ctx under which git also reads run r's own object stores,
// for a review or check run whose base is the commit it holds.
func (rv *Reviews) objectsCtx(ctx context.Context, r *paddock.Run) context.Context {
	return gitx.WithObjects(ctx, rv.runObjects(r)...)
}

// reviewCommit commits coder's submitted change set hash onto its base,
// into the object directory store: a commit no ref names, in no store of
// the project's. It leaves out what an apply never writes, and says which.
func (rv *Reviews) reviewCommit(ctx context.Context, coder *paddock.Run, p *paddock.Project, hash, store string) (string, []string, error) {
	cs, err := rv.frozen(coder.ID, hash)
	if err != nil {
		return "", nil, internal("reading the submitted change set failed", err)
	}
	return rv.commitChangeSet(ctx, coder, p, cs, store)
}

// commitChangeSet commits change set cs of run coder (its blobs frozen)
// onto coder's base, into the object directory store.
func (rv *Reviews) commitChangeSet(ctx context.Context, coder *paddock.Run, p *paddock.Project, cs *paddock.ChangeSet, store string) (string, []string, error) {
	ctx = rv.objectsCtx(ctx, coder) // its base may be in a store of its own
	pol, err := rv.views.policy(ctx, p)
	if err != nil {
		return "", nil, err
	}
	repo, err := rv.projects.checkRepo(ctx, p)
	if err != nil {
		return "", nil, err
	}
	ok, never := rv.changes.applier().Applicable(coder.ID, cs, pol)
	var entries []gitx.IndexEntry
	for _, e := range ok {
		ie := gitx.IndexEntry{Path: e.Path, Mode: e.NewMode, Blob: e.NewBlob}
		if e.Op != paddock.OpDelete && e.NewMode != "160000" {
			ie.File = rv.blobPath(coder.ID, e.NewBlob)
		}
		entries = append(entries, ie)
	}
	msg := fmt.Sprintf("paddock: run %s's change set %s, under review\n", coder.ID, cs.Hash)
	commit, err := rv.Git.CommitTreeInto(ctx, repo.CommonDir, store, coder.Workspace.BaseRevision, entries, reviewIdentity, msg)
	if err != nil {
		return "", nil, internal("committing the change set for review failed; the project is unchanged", err)
	}
	var skipped []string
	for path := range never {
		skipped = append(skipped, path)
	}
	slices.Sort(skipped)
	return commit, skipped, nil
}

// reviewsOf lists the live review runs of run coder.
func (rv *Reviews) reviewsOf(ctx context.Context, coder *paddock.Run) ([]*paddock.Run, error) {
	all, err := rv.runs.Runs(ctx, paddock.RunFilter{Project: coder.Project})
	if err != nil {
		return nil, err
	}
	var out []*paddock.Run
	for _, r := range all {
		// Another node's review run is its own to move or give back.
		if r.ReviewOf != nil && !r.ReviewOf.Check && r.ReviewOf.Run == coder.ID && r.Workspace != nil && rv.mine(r) {
			switch r.Workspace.State {
			case paddock.StateReady, paddock.StateActive, paddock.StateCheckpointed:
				out = append(out, r)
			}
		}
	}
	return out, nil
}

// refuseReview refuses what a review run can never do: submit, approve,
// apply, undo.
func (rv *Reviews) refuseReview(ctx context.Context, id, what string) error {
	r, err := rv.Run(ctx, id)
	if err != nil || r.ReviewOf == nil {
		return err
	}
	return paddock.Errorf(paddock.CodeForbidden, "run %s reviews run %s's change set %s; a review run can never %s (its findings are its answer)",
		r.ID, r.ReviewOf.Run, r.ReviewOf.Hash, what).WithRule(paddock.RuleReviewRun)
}

// moveReviews follows a new submission of run id: each live review of an
// older change set is replaced by one of the new (made with the same
// definition), the older rejected. What fails is recorded, never the
// submission's failure.
func (rv *Reviews) moveReviews(ctx context.Context, id, hash string) {
	coder, err := rv.Run(ctx, id)
	if err != nil {
		return
	}
	live, err := rv.reviewsOf(ctx, coder)
	if err != nil {
		rv.log().Warn("listing the run's reviews failed", "run", id, "err", err)
		return
	}
	for _, r := range live {
		if r.ReviewOf.Hash == hash || r.ReviewOf.Flow != "" {
			continue // a flow moves its own reviews
		}
		if _, err := rv.Review(ctx, id, r.Agent.Name); err != nil {
			rv.log().Warn("moving a review to the new change set failed", "run", id, "review", r.ID, "err", err)
			if err := rv.record(ctx, id, paddock.EventReviewStarted, map[string]any{"hash": hash, "failed": paddock.ErrorMessage(err)}); err != nil {
				rv.log().Warn("recording a review's failed move failed", "run", id, "err", err)
			}
		}
		return // Review moved every older one
	}
}

// createReviewRun makes the review run at review's commit, of the coder's
// kind, its git's HEAD detached at that commit.
func (rv *Reviews) createReviewRun(ctx context.Context, p *paddock.Project, coder *paddock.Run, def *paddock.AgentDefinition, review *paddock.ReviewOf, id string) (*paddock.Run, error) {
	if def.Workspace != string(paddock.AccessRead) && !review.Check {
		return nil, paddock.Errorf(paddock.CodeBadRequest, "agent %s does not read only; a review run is read only", def.Name)
	}
	// A worktree would be the project's own (.git/worktrees) at a commit
	// its store does not hold, and an operator's directory is the
	// operator's: a review of either is a clone.
	kind := coder.Workspace.Kind
	if kind == paddock.KindWorktree || kind == paddock.KindOperatorDir {
		kind = paddock.KindClone
	}
	r, err := rv.runs.create(ctx, newRun{id: id, req: paddock.CreateRunRequest{Project: p.Name, Base: review.Commit, Kind: string(kind)}, def: def, review: review})
	if err != nil {
		return nil, err
	}
	if dir := rv.runGitDir(r); dir != "" {
		// The run's git borrows the stores of its commit too, shown read-only.
		for _, store := range rv.runObjects(r) {
			if err := workspace.AddAlternate(dir, workspace.ObjectsInView(store)); err != nil {
				return r, internal("giving the review run's git its commit failed", err)
			}
		}
		if err := workspace.DetachHead(dir, r.ID, review.Commit); err != nil {
			rv.log().Warn("the review run's HEAD stays on its branch", "run", r.ID, "err", err)
		}
	}
	return r, nil
}

// runGitDir is where run r's own git directory is on the host, by kind.
func (rv *Reviews) runGitDir(r *paddock.Run) string {
	switch r.Workspace.Kind {
	case paddock.KindOverlay:
		if ov, ok := rv.overlayProvider(); ok {
			return filepath.Join(ov.LayersOf(r.Project, r.Workspace).Upper, ".git")
		}
	case paddock.KindClone:
		return filepath.Join(r.Workspace.Root, ".git")
	case paddock.KindWorktree:
		return filepath.Join(rv.auxDir(r.ID), "git")
	}
	return ""
}
