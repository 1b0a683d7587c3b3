package apply

import (
	"os"

	"github.com/paddock-dev/paddock"
)

// Recovery is what Recover did with a run's interrupted apply or undo.
type Recovery struct {
	Journal *Journal
	// Finding reports it; its Action is "" when there was nothing to
	// finish, or when it could not be finished (that is logged).
	Finding paddock.Finding
	// Applied: an interrupted apply was finished and verified; the run's
	// change set is applied now.
	Applied bool
	// Mismatch: an interrupted apply did not verify and was rolled back.
	Mismatch []string
	// Undone: an interrupted undo was finished; the run's change set is
	// no longer applied.
	Undone bool
}

// Recover finishes or rolls back what a killed process left of run id's
// apply or undo, from its journal: prepared and undo_prepared are rolled
// back (only staged contents existed), committing and undoing are rolled
// forward and verified (an apply that does not verify is rolled back). It
// returns nil if the run has no journal or its working tree cannot be
// opened.
func (a *Applier) Recover(id string) *Recovery {
	j, err := a.loadJournal(id)
	if err != nil {
		return nil
	}
	t, err := openTree(j.Root)
	if err != nil {
		return nil
	}
	defer t.Close()
	rec := &Recovery{Journal: j, Finding: paddock.Finding{RunID: j.RunID, Path: j.Root}}
	f := &rec.Finding
	if j.State == journalUndoPrepared {
		// Only staged contents existed: remove them, and go on from
		// the state the undo started from.
		t.unstage(j.Undo)
		j.Undo, j.State = nil, j.Prior
		a.saveJournal(j)
		if j.State == journalDone {
			f.Issue, f.Action = "an undo was interrupted before anything changed", paddock.ActionRolledBack
		}
	}
	switch j.State {
	case journalPrepared:
		t.unstage(j.Steps)
		os.Remove(a.journalPath(j.RunID))
		f.Issue, f.Action = "an apply into the working tree was interrupted before anything was in place", paddock.ActionRolledBack
	case journalCommitting:
		bad, err := a.finishApply(j, t, nil)
		switch {
		case err != nil:
			a.log().Error("an interrupted apply could be neither finished nor rolled back", "run", j.RunID, "root", j.Root, "err", err)
		case len(bad) > 0:
			rec.Mismatch = bad
			f.Issue, f.Action = "an apply into the working tree was interrupted midway and did not verify", paddock.ActionRolledBack
		default:
			rec.Applied = true
			f.Issue, f.Action = "an apply into the working tree was interrupted midway", "finished"
		}
	case journalUndoing:
		if err := a.finishUndo(j, t, nil); err != nil {
			a.log().Error("an interrupted undo could not be finished", "run", j.RunID, "root", j.Root, "err", err)
			break
		}
		if j.Prior == journalCommitting {
			f.Issue, f.Action = "the rollback of a failed apply was interrupted midway", "finished"
			break
		}
		rec.Undone = true
		f.Issue, f.Action = "an undo was interrupted midway", "finished"
	}
	return rec
}
