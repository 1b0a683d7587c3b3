package lifecycle

import (
	"context"
	"slices"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/agent"
	"github.com/paddock-dev/paddock/gitx"
)

// Check runs.
//
// A verify decides whether an agent's work passed, so nothing the agent
// could shape may take part in it (invariant 6): not its home (`go env -w
// GOFLAGS=-run=^NONE$` there turned a failing test into "passed, 0
// tests"), not a cache it can write (a poisoned build-cache entry made a
// failing test pass), not its environment, not files it left beside the
// change set. So the checks never run in the agent's run. They run in a
// check run, made for the verify and rejected after it, as the merge
// queue's check does: the change set's bytes (exactly its entries, as the
// hash says) committed onto its base into the check run's own object store
// (never the project's), a run of its own with a home of its own, no
// secrets, no network, and only the caches the agent could not write. A review run's verify checks the change set it reviews, the
// same check run a verify of that hash by its coder makes, so the two
// agree.

// isCheckRun says whether r is a check run: its verify runs in place.
func isCheckRun(r *paddock.Run) bool { return r.ReviewOf != nil && r.ReviewOf.Check }

// checkRun makes the check run of run r's change set cs (r's now, its
// blobs not yet frozen), and returns it with what gives it back (its
// rejection, its commit's snapshot dropped). r's project is p.
func (vf *Verifier) checkRun(ctx context.Context, r *paddock.Run, p *paddock.Project, cs *paddock.ChangeSet) (*paddock.Run, func(), error) {
	src, base := r, r.Workspace.BaseRevision
	hash := cs.Hash
	var entries *paddock.ChangeSet
	switch {
	case r.ReviewOf != nil && r.ReviewOf.Commit != r.ReviewOf.Base:
		// A review run: the change set it reviews, on the reviewed base.
		coder, err := vf.Run(ctx, r.ReviewOf.Run)
		if err != nil {
			return nil, nil, err
		}
		if entries, err = vf.frozen(coder.ID, r.ReviewOf.Hash); err != nil {
			return nil, nil, internal("reading the reviewed change set failed", err)
		}
		if base, err = vf.reviewedBase(ctx, r); err != nil {
			return nil, nil, err
		}
		src, hash = coder, r.ReviewOf.Hash
	case len(cs.Entries) > 0:
		if err := vf.changes.freezeBlobs(ctx, r.ID, cs); err != nil {
			return nil, nil, err
		}
		entries = cs
	}
	ctx = vf.reviews.objectsCtx(ctx, src) // its base may be in a store of its own
	id := newID()
	check := &paddock.ReviewOf{Run: src.ID, Hash: hash, Commit: base, Base: base, Check: true}
	if entries != nil {
		commit, skipped, err := vf.reviews.commitChangeSet(ctx, src, p, entries, vf.reviews.reviewObjects(id))
		if err != nil {
			vf.views.removeAux(id)
			return nil, nil, err
		}
		check.Commit, check.Skipped = commit, skipped
		ctx = gitx.WithObjects(ctx, vf.reviews.reviewObjects(id))
	}
	// A write run, though no agent ever works in it: a build's output
	// stays for the test after it, and reports written into the
	// workspace are read; all of it goes with the run.
	tr, err := vf.reviews.createReviewRun(ctx, p, r, agent.ForAccess(paddock.AccessWrite), check, id)
	if err != nil {
		vf.views.removeAux(id)
		return nil, nil, err
	}
	done := func() {
		ctx := context.WithoutCancel(ctx)
		if _, err := vf.runs.Reject(ctx, tr.ID); err != nil {
			vf.log().Warn("giving back a verify's check run failed", "run", tr.ID, "err", err)
		}
		if check.Commit != check.Base {
			vf.dropSnapshot(ctx, p.Name, check.Commit)
		}
	}
	return tr, done, nil
}

// checkEnvironment says what a check run's commands ran in, for the
// verify's result.
func (vf *Verifier) checkEnvironment(tr *paddock.Run, p *paddock.Project) *paddock.CheckEnvironment {
	env := &paddock.CheckEnvironment{Run: tr.ID, Kind: tr.Workspace.Kind, Commit: tr.ReviewOf.Commit, Base: tr.ReviewOf.Base,
		Home: "fresh", Network: "none"}
	for _, c := range p.Caches {
		if c.Mode == paddock.CacheRW {
			env.Withheld = append(env.Withheld, c.Name)
		} else {
			env.Caches = append(env.Caches, c.Name)
		}
	}
	slices.Sort(env.Caches)
	slices.Sort(env.Withheld)
	return env
}
