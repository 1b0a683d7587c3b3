package lifecycle

import (
	"context"
	"errors"
	"os"
	"strings"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/apply"
	"github.com/paddock-dev/paddock/changeset"
	"go.opentelemetry.io/otel/attribute"
)

// MaxMerge bounds the files a 3-way apply merges line by line: a merge
// holds the three versions in memory.
const MaxMerge = apply.MaxMerge

// applier is the apply package over this Manager's run directories,
// frozen blobs, git, logger and test hooks.
func (ch *Changes) applier() *apply.Applier {
	return &apply.Applier{
		RunDir:   ch.runDir,
		BlobPath: ch.blobPath,
		Git:      ch.Git,
		Log:      ch.log(),
		CrashAt:  ch.CrashAt,
		Hook:     ch.testHook,
	}
}

// ApplyToWorktree writes the approved change set into the project's working
// tree, under the project lock (apply.Applier.Apply says how). If the tree
// it leaves is not the approved one, the apply is rolled back and the
// mismatch recorded (paddock.EventApplyFailed) and returned.
//
// With threeWay, a modified file that the user changed too is merged line
// by line (git merge-file) instead of refused. Undo puts the user's
// version back.
func (ch *Changes) ApplyToWorktree(ctx context.Context, id string, threeWay bool) (_ *paddock.Submission, err error) {
	ctx, end := ch.span(ctx, "apply", nil, attrRun.String(id), attribute.String("paddock.to", "worktree"))
	defer func() { end(err) }()
	unlock, err := ch.queue.lockLanding(id)
	if err != nil {
		return nil, err
	}
	defer unlock()
	s, err := ch.applyToWorktree(ctx, id, threeWay)
	if err != nil {
		ch.applyFailed(ctx, id, "worktree", err)
	}
	return s, err
}

func (ch *Changes) applyToWorktree(ctx context.Context, id string, threeWay bool) (*paddock.Submission, error) {
	if err := ch.reviews.refuseReview(ctx, id, "be applied"); err != nil {
		return nil, err
	}
	r, p, err := ch.runAndProject(ctx, id)
	if err != nil {
		return nil, err
	}
	s, cs, err := ch.approved(ctx, id, p)
	if err != nil {
		return nil, err
	}
	for _, e := range cs.Entries {
		if e.NewMode == "160000" || e.OldMode == "160000" {
			return nil, paddock.Errorf(paddock.CodeConflict, "%s is a submodule; apply this change set to a branch", e.Path)
		}
	}
	repo, err := ch.projects.checkRepo(ctx, p)
	if err != nil {
		return nil, err
	}
	// The project lock: no operator_dir run may write the tree meanwhile.
	if err := ch.update(ctx, func(tx paddock.Tx) error {
		return tx.AcquireLock(ctx, &paddock.Lock{Project: p.Name, RunID: id, AcquiredAt: now()})
	}); err != nil {
		return nil, err
	}
	defer func() {
		// Whatever the client does now: a lock left behind would keep
		// every operator_dir run of the project out.
		done := context.WithoutCancel(ctx)
		if err := ch.update(done, func(tx paddock.Tx) error {
			_, err := tx.ReleaseLock(done, p.Name, id)
			return err
		}); err != nil {
			ch.log().Error("releasing the project lock after an apply into the working tree failed; release it with paddock project unlock --force", "project", p.Name, "run", id, "err", err)
		}
	}()
	done, err := ch.applier().Apply(ctx, apply.Change{
		RunID: id, Project: p.Name, Root: p.Root, Hash: s.Hash, Entries: cs.Entries,
		ThreeWay: threeWay, GitDir: repo.CommonDir, BaseRevision: r.Workspace.BaseRevision,
	})
	if mm := (*apply.Mismatch)(nil); errors.As(err, &mm) {
		bad := mm.Bad
		if err := ch.record(ctx, id, paddock.EventApplyFailed, map[string]any{"hash": s.Hash, "worktree": p.Root, "mismatch": bad, "rolled_back": true}); err != nil {
			ch.log().Error("recording a rolled-back apply failed", "run", id, "err", err)
		}
		return nil, paddock.Errorf(paddock.CodeConflict, "the working tree did not hold what was approved after the apply (%s); it was rolled back, nothing changed",
			strings.Join(bad, "; ")).WithDetail("mismatch", bad)
	}
	if err != nil {
		return nil, err
	}
	s.AppliedTo, s.AppliedAt = "worktree "+p.Root, now()
	if err := ch.policies.store(s); err != nil {
		return nil, err
	}
	err = ch.update(ctx, func(tx paddock.Tx) error {
		ev := map[string]any{"hash": s.Hash, "worktree": p.Root, "entries": done.Steps, "approved_by": s.ApprovedBy}
		if len(done.Merged) > 0 {
			ev["merged"] = done.Merged
		}
		_, err := tx.AppendEvent(ctx, id, paddock.EventApplied, ev)
		return err
	})
	return s, err
}

// approved loads the run's approved, not yet applied, frozen change set and
// checks it against its hash, against its project's approval policy as it
// is now, and against what paddock never applies.
func (ch *Changes) approved(ctx context.Context, id string, p *paddock.Project) (*paddock.Submission, *paddock.ChangeSet, error) {
	s, err := ch.submission(id)
	if err != nil {
		return nil, nil, err
	}
	switch {
	case s.ApprovedBy == "" && len(s.Approvals) == 0:
		return nil, nil, paddock.Errorf(paddock.CodeConflict, "run %s's change set %s is not approved", id, s.Hash)
	case s.AppliedTo != "":
		return nil, nil, paddock.Errorf(paddock.CodeConflict, "run %s was applied already (%s)", id, s.AppliedTo)
	}
	cs, err := ch.frozen(id, s.Hash)
	if err != nil {
		return nil, nil, internal("reading the frozen change set failed", err)
	}
	if cs.Hash != s.Hash || changeset.Verify(cs) != nil {
		return nil, nil, paddock.Errorf(paddock.CodeConflict, "the frozen change set no longer matches the approved hash; nothing was applied")
	}
	// The project's approval policy as it is now: it may have grown
	// stricter since the approvals were given.
	if err := ch.policies.require(ctx, p, s, cs); err != nil {
		return nil, nil, err
	}
	pol, err := ch.views.policy(ctx, p)
	if err != nil {
		return nil, nil, err
	}
	if blocked := ch.applier().NeverApplied(id, cs, pol); len(blocked) > 0 {
		return nil, nil, paddock.Errorf(paddock.CodeForbidden, "the change set holds entries paddock never applies: %s", strings.Join(blocked, "; ")).
			WithDetail("blocked", blocked)
	}
	return s, cs, nil
}

// Undo reverses an apply into the working tree, if every path it wrote is
// still as it wrote it (apply.Applier.Undo says how), and records it.
func (ch *Changes) Undo(ctx context.Context, id string) (*paddock.Submission, error) {
	j, err := ch.applier().Undo(id)
	if err != nil {
		return nil, err
	}
	s, err := ch.submission(id)
	if err != nil {
		return nil, err
	}
	s.AppliedTo = ""
	if err := ch.policies.store(s); err != nil {
		return nil, err
	}
	err = ch.update(ctx, func(tx paddock.Tx) error {
		_, err := tx.AppendEvent(ctx, id, paddock.EventUndone, map[string]string{"hash": j.Hash, "worktree": j.Root})
		return err
	})
	return s, err
}

// recoverApplies finishes or rolls back what a killed daemon left of an
// apply or an undo, from its journal, and records it.
func (ch *Changes) recoverApplies(ctx context.Context) []paddock.Finding {
	a := ch.applier()
	entries, _ := os.ReadDir(ch.ArtifactsDir)
	var out []paddock.Finding
	for _, e := range entries {
		rec := a.Recover(e.Name())
		if rec == nil {
			continue
		}
		j, f := rec.Journal, rec.Finding
		failed := func(what string, err error) {
			if err != nil {
				ch.log().Error("recovering an apply: "+what+" failed", "run", j.RunID, "err", err)
			}
		}
		switch {
		case len(rec.Mismatch) > 0:
			failed("recording the rollback", ch.record(ctx, j.RunID, paddock.EventApplyFailed, map[string]any{"hash": j.Hash, "worktree": j.Root, "mismatch": rec.Mismatch, "rolled_back": true, "recovered": true}))
		case rec.Applied:
			if s, err := ch.submission(j.RunID); err == nil {
				s.AppliedTo, s.AppliedAt = "worktree "+j.Root, now()
				failed("marking the change set applied", ch.policies.store(s))
			}
			failed("recording the apply", ch.record(ctx, j.RunID, paddock.EventApplied, map[string]any{"hash": j.Hash, "worktree": j.Root, "recovered": true}))
		case rec.Undone:
			if s, err := ch.submission(j.RunID); err == nil {
				s.AppliedTo = ""
				failed("marking the change set not applied", ch.policies.store(s))
			}
		}
		// The killed apply held the project lock; it is over now.
		failed("releasing the project lock", ch.update(ctx, func(tx paddock.Tx) error {
			_, err := tx.ReleaseLock(ctx, j.Project, j.RunID)
			return err
		}))
		if f.Action != "" {
			ch.log().Info("recovered", "run", f.RunID, "issue", f.Issue, "action", f.Action)
			out = append(out, f)
		}
	}
	return out
}
