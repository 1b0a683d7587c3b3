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
func (m *Manager) Review(ctx context.Context, id, agentName string) (*paddock.Run, error) {
	coder, _, err := m.runAndProject(ctx, id)
	if err != nil {
		return nil, err
	}
	if coder.ReviewOf != nil {
		return nil, paddock.Errorf(paddock.CodeConflict, "run %s is itself a review (of run %s); review the run it reviews", id, coder.ReviewOf.Run)
	}
	s, err := m.submission(id)
	if err != nil {
		return nil, err
	}
	live, err := m.reviewsOf(ctx, coder)
	if err != nil {
		return nil, err
	}
	for _, r := range live {
		if r.ReviewOf.Hash == s.Hash && r.ReviewOf.Flow == "" && (agentName == "" || agentName == r.Agent.Name) {
			return r, nil
		}
	}
	def, err := m.reviewerDef(ctx, cmp.Or(agentName, "reviewer"))
	if err != nil {
		return nil, err
	}
	r, err := m.makeReview(ctx, coder, def, s.Hash, newID(), "")
	if err != nil {
		return nil, err
	}
	// The older reviews (not a flow's: a flow moves its own) looked at a
	// change set the coder has replaced.
	for _, old := range live {
		if old.ReviewOf.Hash != s.Hash && old.ReviewOf.Flow == "" {
			if _, err := m.Reject(ctx, old.ID); err != nil {
				m.log().Warn("a review of an older change set could not be rejected", "run", old.ID, "err", err)
			}
		}
	}
	return r, nil
}

// reviewerDef is the definition name, which must read only.
func (m *Manager) reviewerDef(ctx context.Context, name string) (*paddock.AgentDefinition, error) {
	def, err := m.agentForCreate(ctx, paddock.CreateRunRequest{Agent: name})
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
func (m *Manager) makeReview(ctx context.Context, coder *paddock.Run, def *paddock.AgentDefinition, hash, id, flow string) (*paddock.Run, error) {
	if r, err := m.Run(ctx, id); err == nil {
		return r, nil
	}
	p, err := m.Project(ctx, coder.Project)
	if err != nil {
		return nil, err
	}
	review := &paddock.ReviewOf{Run: coder.ID, Hash: hash, Commit: coder.Workspace.BaseRevision, Base: coder.Workspace.BaseRevision, Flow: flow}
	if s, err := m.submission(coder.ID); err == nil && s.Hash == hash {
		if review.Commit, review.Skipped, err = m.reviewCommit(ctx, coder, p, hash, m.reviewObjects(id)); err != nil {
			return nil, err
		}
		// The review run is made at a commit only its own store holds
		// (on a base that may be in the coder's own).
		ctx = gitx.WithObjects(m.objectsCtx(ctx, coder), m.reviewObjects(id))
	}
	r, err := m.createReviewRun(ctx, p, coder, def, review, id)
	if err != nil {
		return nil, err
	}
	return r, m.record(ctx, coder.ID, paddock.EventReviewStarted, map[string]any{"review": r.ID, "hash": hash, "agent": def.Name, "flow": flow})
}

// reviewObjects is the object directory of review run id: paddock's, in
// the run's auxiliary directory (removed with it), borrowing the project's
// objects. The commit under review lives there and nowhere else: it is
// unapproved content, which the project's own store, readable by every
// run of the project, never holds (invariant 2).
func (m *Manager) reviewObjects(id string) string {
	return filepath.Join(m.auxDir(id), "review-objects")
}

// runObjects are the object stores of paddock's that hold run r's base:
// a review or check run's own, or, for the merge queue's check run, the
// replay's (queue.go).
func (m *Manager) runObjects(r *paddock.Run) []string {
	var out []string
	if m.uncommitted.has(r.ID) {
		out = append(out, m.uncommitted.store(r.ID)) // a base with the checkout's uncommitted changes
	}
	if r.ReviewOf != nil && m.uncommitted.has(r.ReviewOf.Run) {
		out = append(out, m.uncommitted.store(r.ReviewOf.Run)) // the reviewed run's, which its commit sits on
	}
	if r.ReviewOf == nil || r.ReviewOf.Commit == r.ReviewOf.Base {
		return out
	}
	if store := m.reviewObjects(r.ID); exists(store) {
		out = append(out, store)
	}
	if r.ReviewOf.Check {
		if store := m.queueObjects(r.ReviewOf.Run); exists(store) {
			out = append(out, store)
		}
	}
	return out
}

// objectsCtx is ctx under which git also reads run r's own object stores,
// for a review or check run whose base is the commit it holds.
func (m *Manager) objectsCtx(ctx context.Context, r *paddock.Run) context.Context {
	return gitx.WithObjects(ctx, m.runObjects(r)...)
}

// reviewCommit commits coder's submitted change set hash onto its base,
// into the object directory store: a commit no ref names, in no store of
// the project's. It leaves out what an apply never writes, and says which.
func (m *Manager) reviewCommit(ctx context.Context, coder *paddock.Run, p *paddock.Project, hash, store string) (string, []string, error) {
	cs, err := m.frozen(coder.ID, hash)
	if err != nil {
		return "", nil, internal("reading the submitted change set failed", err)
	}
	return m.commitChangeSet(ctx, coder, p, cs, store)
}

// commitChangeSet commits change set cs of run coder (its blobs frozen)
// onto coder's base, into the object directory store.
func (m *Manager) commitChangeSet(ctx context.Context, coder *paddock.Run, p *paddock.Project, cs *paddock.ChangeSet, store string) (string, []string, error) {
	ctx = m.objectsCtx(ctx, coder) // its base may be in a store of its own
	pol, err := m.policy(ctx, p)
	if err != nil {
		return "", nil, err
	}
	repo, err := m.checkRepo(ctx, p)
	if err != nil {
		return "", nil, err
	}
	ok, never := m.applier().Applicable(coder.ID, cs, pol)
	var entries []gitx.IndexEntry
	for _, e := range ok {
		ie := gitx.IndexEntry{Path: e.Path, Mode: e.NewMode, Blob: e.NewBlob}
		if e.Op != paddock.OpDelete && e.NewMode != "160000" {
			ie.File = m.blobPath(coder.ID, e.NewBlob)
		}
		entries = append(entries, ie)
	}
	msg := fmt.Sprintf("paddock: run %s's change set %s, under review\n", coder.ID, cs.Hash)
	commit, err := m.Git.CommitTreeInto(ctx, repo.CommonDir, store, coder.Workspace.BaseRevision, entries, reviewIdentity, msg)
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
func (m *Manager) reviewsOf(ctx context.Context, coder *paddock.Run) ([]*paddock.Run, error) {
	all, err := m.Runs(ctx, paddock.RunFilter{Project: coder.Project})
	if err != nil {
		return nil, err
	}
	var out []*paddock.Run
	for _, r := range all {
		// Another node's review run is its own to move or give back.
		if r.ReviewOf != nil && !r.ReviewOf.Check && r.ReviewOf.Run == coder.ID && r.Workspace != nil && m.mine(r) {
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
func (m *Manager) refuseReview(ctx context.Context, id, what string) error {
	r, err := m.Run(ctx, id)
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
func (m *Manager) moveReviews(ctx context.Context, id, hash string) {
	coder, err := m.Run(ctx, id)
	if err != nil {
		return
	}
	live, err := m.reviewsOf(ctx, coder)
	if err != nil {
		m.log().Warn("listing the run's reviews failed", "run", id, "err", err)
		return
	}
	for _, r := range live {
		if r.ReviewOf.Hash == hash || r.ReviewOf.Flow != "" {
			continue // a flow moves its own reviews
		}
		if _, err := m.Review(ctx, id, r.Agent.Name); err != nil {
			m.log().Warn("moving a review to the new change set failed", "run", id, "review", r.ID, "err", err)
			m.record(ctx, id, paddock.EventReviewStarted, map[string]any{"hash": hash, "failed": paddock.ErrorMessage(err)})
		}
		return // Review moved every older one
	}
}

// createReviewRun makes the review run at review's commit, of the coder's
// kind, its git's HEAD detached at that commit.
func (m *Manager) createReviewRun(ctx context.Context, p *paddock.Project, coder *paddock.Run, def *paddock.AgentDefinition, review *paddock.ReviewOf, id string) (*paddock.Run, error) {
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
	r, err := m.createRunID(ctx, id, paddock.CreateRunRequest{Project: p.Name, Base: review.Commit, Kind: string(kind)}, def, review)
	if err != nil {
		return nil, err
	}
	if dir := m.runGitDir(r); dir != "" {
		// The run's git borrows the stores of its commit too, shown read-only.
		for _, store := range m.runObjects(r) {
			if err := workspace.AddAlternate(dir, workspace.ObjectsInView(store)); err != nil {
				return r, internal("giving the review run's git its commit failed", err)
			}
		}
		if err := workspace.DetachHead(dir, r.ID, review.Commit); err != nil {
			m.log().Warn("the review run's HEAD stays on its branch", "run", r.ID, "err", err)
		}
	}
	return r, nil
}

// runGitDir is where run r's own git directory is on the host, by kind.
func (m *Manager) runGitDir(r *paddock.Run) string {
	switch r.Workspace.Kind {
	case paddock.KindOverlay:
		if ov, ok := m.overlayProvider(); ok {
			return filepath.Join(ov.LayersOf(r.Project, r.Workspace).Upper, ".git")
		}
	case paddock.KindClone:
		return filepath.Join(r.Workspace.Root, ".git")
	case paddock.KindWorktree:
		return filepath.Join(m.auxDir(r.ID), "git")
	}
	return ""
}
