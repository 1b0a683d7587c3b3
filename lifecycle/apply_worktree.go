package lifecycle

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/changeset"
	"github.com/paddock-dev/paddock/confine"
)

// Events of an apply into the working tree.
const (
	EventUndone = "changeset.undone"
	// EventApplyFailed records an apply into the working tree that did not
	// leave the tree it was approved to leave, and was rolled back.
	EventApplyFailed = "changeset.apply_failed"
)

// Journal states. An apply moves prepared → committing → done, an undo
// done → undo_prepared → undoing → undone. An apply whose commit fails or
// does not verify is rolled back the way an undo is: committing →
// undo_prepared → undoing → rolled_back. A restart finds the journal and
// finishes what it says: prepared and undo_prepared are rolled back (only
// staged contents existed; nothing of them was in place), committing and
// undoing are rolled forward (every new content was on disk first) and
// verified.
const (
	journalPrepared     = "prepared"
	journalCommitting   = "committing"
	journalDone         = "done"
	journalUndoPrepared = "undo_prepared"
	journalUndoing      = "undoing"
	journalUndone       = "undone"
	journalRolledBack   = "rolled_back"
)

// journal is the record of an apply into a project's working tree.
type journal struct {
	RunID   string        `json:"run_id"`
	Project string        `json:"project"`
	Root    string        `json:"root"`
	Hash    string        `json:"hash"`
	State   string        `json:"state"`
	Steps   []journalStep `json:"steps"`
	// Undo is the inverse of Steps while an undo or a rollback is under
	// way; Prior is the state it started from (done for an undo,
	// committing for a rollback).
	Undo  []journalStep `json:"undo,omitempty"`
	Prior string        `json:"prior,omitempty"`
	// DirModes holds the permission bits of the directories the apply
	// removes, to make them again as they were.
	DirModes map[string]fs.FileMode `json:"dir_modes,omitempty"`
}

func (m *Manager) journalPath(id string) string {
	return filepath.Join(m.runDir(id), "apply-journal.json")
}

func (m *Manager) saveJournal(j *journal) error {
	b, _ := json.MarshalIndent(j, "", "  ")
	return writeFile(m.journalPath(j.RunID), b)
}

func (m *Manager) loadJournal(id string) (*journal, error) {
	b, err := os.ReadFile(m.journalPath(id))
	if err != nil {
		return nil, err
	}
	var j journal
	if err := json.Unmarshal(b, &j); err != nil {
		return nil, err
	}
	if j.State == journalUndoing && j.Undo == nil {
		// An undo journal of an earlier version: its steps are the inverse.
		j.Undo, j.Prior = j.Steps, journalDone
	}
	if j.DirModes == nil {
		j.DirModes = map[string]fs.FileMode{}
	}
	return &j, nil
}

// crash is the test hook that stops the daemon at a numbered step of an
// apply or undo (Manager.CrashAt), to prove a restart recovers from any of
// them. A nil step (a recovery) never stops.
func (m *Manager) crash(step *int) {
	if step == nil {
		return
	}
	*step++
	if m.CrashAt > 0 && *step == m.CrashAt {
		syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {}
	}
}

func (m *Manager) hook(point string) {
	if m.testHook != nil {
		m.testHook(point)
	}
}

// ApplyToWorktree writes the approved change set into the project's working
// tree, under the project lock. It refuses if any target changed since the
// base (a created path that exists, a modified or deleted one whose content
// or mode is not the base's), and if any target is reached through a
// symbolic link or a file in the working tree that the change set does not
// remove itself: nothing is ever written through a link. Type changes are
// applied as such: a link or a file that becomes a directory is removed
// before the directory is made, and a directory that becomes a file or a
// link is removed first, if the change set empties it (anything else in it,
// an ignored file say, refuses the apply).
//
// It is all or nothing: the new contents are written and synced in
// directories that stay (never through a link) and the old ones kept
// before anything is put in place, and a journal lets a restart after kill
// -9 at any point finish it. Before it reports success it verifies the tree
// it leaves: every path of the change set holds the approved type, mode
// and content, reached without a link; if not, the apply is rolled back
// and the mismatch recorded (EventApplyFailed) and returned. The index is
// not touched.
//
// With threeWay, a modified file that the user changed too is merged line
// by line (git merge-file) instead of refused: the user's lines and the
// approved ones both land, and overlapping changes, binary files, mode
// changes, created paths that exist and deleted files that changed still
// refuse the whole apply. Undo puts the user's version back.
func (m *Manager) ApplyToWorktree(ctx context.Context, id string, threeWay bool) (*paddock.Submission, error) {
	s, err := m.applyToWorktree(ctx, id, threeWay)
	if err != nil {
		m.applyFailed(ctx, id, "worktree", err)
	}
	return s, err
}

func (m *Manager) applyToWorktree(ctx context.Context, id string, threeWay bool) (*paddock.Submission, error) {
	r, p, err := m.runAndProject(ctx, id)
	if err != nil {
		return nil, err
	}
	s, cs, err := m.approved(ctx, id, p)
	if err != nil {
		return nil, err
	}
	for _, e := range cs.Entries {
		if e.NewMode == "160000" || e.OldMode == "160000" {
			return nil, paddock.Errorf(paddock.CodeConflict, "%s is a submodule; apply this change set to a branch", e.Path)
		}
	}
	repo, err := m.checkRepo(ctx, p)
	if err != nil {
		return nil, err
	}
	// The project lock: no operator_dir run may write the tree meanwhile.
	if err := m.update(ctx, func(tx paddock.Tx) error {
		return tx.AcquireLock(ctx, &paddock.Lock{Project: p.Name, RunID: id, AcquiredAt: now()})
	}); err != nil {
		return nil, err
	}
	defer m.update(context.WithoutCancel(ctx), func(tx paddock.Tx) error {
		_, err := tx.ReleaseLock(ctx, p.Name, id)
		return err
	})
	t, err := openTree(p.Root)
	if err != nil {
		return nil, internal("opening the project failed", err)
	}
	defer t.Close()

	j := &journal{RunID: id, Project: p.Name, Root: p.Root, Hash: s.Hash, State: journalPrepared, DirModes: map[string]fs.FileMode{}}
	for i, e := range cs.Entries {
		js := journalStep{Path: e.Path, Op: e.Op, OldMode: e.OldMode, NewMode: e.NewMode, OldBlob: e.OldBlob, NewBlob: e.NewBlob}
		if e.OldMode != "" {
			js.Backup = filepath.Join(m.runDir(id), "backup", itoa(i))
		}
		if e.NewMode != "" {
			js.Src, js.NewPerm = m.blobPath(id, e.NewBlob), fileMode(e.NewMode)
		}
		j.Steps = append(j.Steps, js)
	}
	// Every target must still be as the base had it (or, with threeWay,
	// merge cleanly with it).
	var merged []string
	check := func(js *journalStep, st entryState) string {
		switch {
		case js.OldMode == "":
			if st.mode != "" {
				return "exists"
			}
		case st.mode == js.OldMode && st.blob == js.OldBlob:
		case threeWay && js.Op == paddock.OpModify && st.mode == js.OldMode && st.mode != "120000" && js.NewMode != "120000":
			blob, why := m.merge3(ctx, t, id, repo.CommonDir, r.Workspace.BaseRevision, js.Path, js.OldBlob, js.NewBlob)
			if why != "" {
				return why
			}
			js.OldBlob, js.NewBlob, js.Src = st.blob, blob, m.blobPath(id, blob)
			merged = append(merged, js.Path)
		default:
			return "changed since the base"
		}
		if st.mode != "" && st.mode != "120000" {
			js.OldPerm = st.perm
			if js.NewMode == st.mode {
				js.NewPerm = st.perm // a 0600 file the change set edits stays 0600
			}
		}
		return ""
	}
	if stale := t.plan(j.Steps, "apply", id, j.DirModes, check); len(stale) > 0 {
		hint := "apply to a branch instead, or bring the files back"
		if !threeWay {
			hint += ", or merge with --3way"
		}
		return nil, paddock.Errorf(paddock.CodeConflict, "the working tree no longer matches the base: %s; nothing was written (%s)",
			strings.Join(stale, "; "), hint).WithDetail("stale", stale)
	}
	for _, js := range j.Steps {
		if js.Backup == "" {
			continue
		}
		err := writeFileFrom(js.Backup, false, func(w io.Writer) error {
			blob, _, _, err := t.read(js.Path, w)
			if err == nil && blob != js.OldBlob {
				err = fmt.Errorf("%s changed while it was kept", js.Path)
			}
			return err
		})
		if err != nil {
			return nil, internal("keeping the old content failed; nothing was written", err)
		}
	}

	if err := m.saveJournal(j); err != nil {
		return nil, internal("writing the apply journal failed", err)
	}
	step := 0
	m.crash(&step)
	if err := t.stageAll(j.Steps, func() { m.crash(&step) }); err != nil {
		return nil, m.abort(j, t, internal("writing the new content failed; nothing was applied", err))
	}
	// Backups and new contents become durable together, before the journal
	// that lets a restart rely on them: one syncfs each instead of an fsync
	// per file.
	if err := syncBoth(filepath.Join(m.runDir(id), "backup"), p.Root); err != nil {
		return nil, m.abort(j, t, internal("syncing the new content failed; nothing was applied", err))
	}
	j.State = journalCommitting
	if err := m.saveJournal(j); err != nil {
		return nil, m.abort(j, t, internal("writing the apply journal failed", err))
	}
	m.crash(&step)
	bad, err := m.finishApply(j, t, &step)
	if err != nil {
		return nil, internal("applying failed midway and could not be rolled back; restart the daemon to finish it", err)
	}
	if len(bad) > 0 {
		m.update(ctx, func(tx paddock.Tx) error {
			_, err := tx.AppendEvent(ctx, id, EventApplyFailed, map[string]any{"hash": s.Hash, "worktree": p.Root, "mismatch": bad, "rolled_back": true})
			return err
		})
		return nil, paddock.Errorf(paddock.CodeConflict, "the working tree did not hold what was approved after the apply (%s); it was rolled back, nothing changed",
			strings.Join(bad, "; ")).WithDetail("mismatch", bad)
	}
	s.AppliedTo, s.AppliedAt = "worktree "+p.Root, now()
	if err := m.saveSubmission(s); err != nil {
		return nil, err
	}
	err = m.update(ctx, func(tx paddock.Tx) error {
		ev := map[string]any{"hash": s.Hash, "worktree": p.Root, "entries": len(j.Steps)}
		if len(merged) > 0 {
			sort.Strings(merged)
			ev["merged"] = merged
		}
		_, err := tx.AppendEvent(ctx, id, EventApplied, ev)
		return err
	})
	return s, err
}

// finishApply puts a committing apply's steps in place and verifies the
// tree it leaves. If either fails, it rolls the apply back and returns what
// did not match; an error means the rollback failed too.
func (m *Manager) finishApply(j *journal, t *tree, step *int) ([]string, error) {
	var bad []string
	m.hook("commit")
	if err := t.commit(j.Steps, j.DirModes, func() { m.crash(step) }); err != nil {
		bad = []string{err.Error()}
	} else {
		m.hook("verify")
		bad = t.verify(j.Steps)
	}
	if len(bad) == 0 {
		j.State = journalDone
		return nil, m.saveJournal(j)
	}
	m.log().Error("an apply into the working tree did not leave the approved tree; rolling it back",
		"run", j.RunID, "root", j.Root, "hash", j.Hash, "mismatch", bad)
	// From wherever the apply stopped: no check, every inverse step is
	// safe whether or not its forward step ran.
	conflicts, err := m.runUndo(j, t, journalCommitting, nil, step)
	if err == nil && len(conflicts) > 0 {
		err = errors.New(strings.Join(conflicts, "; "))
	}
	if err != nil {
		m.log().Error("the failed apply could not be rolled back", "run", j.RunID, "root", j.Root, "err", err)
	}
	return bad, err
}

// approved loads the run's approved, not yet applied, frozen change set and
// checks it against its hash and against what paddock never applies.
func (m *Manager) approved(ctx context.Context, id string, p *paddock.Project) (*paddock.Submission, *paddock.ChangeSet, error) {
	s, err := m.submission(id)
	if err != nil {
		return nil, nil, err
	}
	switch {
	case s.ApprovedBy == "":
		return nil, nil, paddock.Errorf(paddock.CodeConflict, "run %s's change set %s is not approved", id, s.Hash)
	case s.AppliedTo != "":
		return nil, nil, paddock.Errorf(paddock.CodeConflict, "run %s was applied already (%s)", id, s.AppliedTo)
	}
	cs, err := m.frozen(id, s.Hash)
	if err != nil {
		return nil, nil, internal("reading the frozen change set failed", err)
	}
	if cs.Hash != s.Hash || changeset.Verify(cs) != nil {
		return nil, nil, paddock.Errorf(paddock.CodeConflict, "the frozen change set no longer matches the approved hash; nothing was applied")
	}
	pol, err := m.policy(ctx, p)
	if err != nil {
		return nil, nil, err
	}
	if blocked := m.neverApplied(id, cs, pol); len(blocked) > 0 {
		return nil, nil, paddock.Errorf(paddock.CodeForbidden, "the change set holds entries paddock never applies: %s", strings.Join(blocked, "; ")).
			WithDetail("blocked", blocked)
	}
	return s, cs, nil
}

// neverApplied lists the entries of cs paddock never applies: those its
// labels say so, and, judged again from the frozen content whatever the
// labels say (a change set frozen by an earlier version, say), paths under
// .git and links into .git, to a protected path or out of the project.
func (m *Manager) neverApplied(id string, cs *paddock.ChangeSet, pol *confine.Policy) []string {
	var out []string
	for _, e := range cs.Entries {
		why := e.Blocked
		if why == "" && e.NewMode != "" {
			target := ""
			if e.NewMode == "120000" {
				b, err := os.ReadFile(m.blobPath(id, e.NewBlob))
				if err != nil || gitBlobID(b) != e.NewBlob {
					out = append(out, e.Path+": the link's frozen target cannot be read")
					continue
				}
				target = string(b)
			}
			why = changeset.NeverApplied(e.Path, e.NewMode == "120000", target, pol)
		}
		if why != "" {
			out = append(out, e.Path+": "+why)
		}
	}
	return out
}

// abort removes what a prepared apply staged and returns cause.
func (m *Manager) abort(j *journal, t *tree, cause error) error {
	t.unstage(j.Steps)
	os.Remove(m.journalPath(j.RunID))
	return cause
}

// Undo reverses an apply into the working tree, if every path it wrote is
// still as it wrote it: files and links come back from their backups with
// their permissions, what the apply created goes, the directories it
// removed are made again and the ones it made go when empty. Like the
// apply, it writes through no link and verifies what it leaves.
func (m *Manager) Undo(ctx context.Context, id string) (*paddock.Submission, error) {
	j, err := m.loadJournal(id)
	if err != nil || j.State != journalDone {
		return nil, paddock.Errorf(paddock.CodeConflict, "run %s has no apply into a working tree to undo", id)
	}
	t, err := openTree(j.Root)
	if err != nil {
		return nil, internal("opening the project failed", err)
	}
	defer t.Close()
	check := func(js *journalStep, st entryState) string {
		switch {
		case js.OldMode == "" && st.mode != "":
			return "exists again"
		case js.OldMode != "" && (st.mode != js.OldMode || st.blob != js.OldBlob):
			return "changed since the apply"
		}
		return ""
	}
	step := 0
	changed, err := m.runUndo(j, t, journalDone, check, &step)
	if len(changed) > 0 {
		return nil, paddock.Errorf(paddock.CodeConflict, "cannot undo: %s", strings.Join(changed, "; ")).WithDetail("changed", changed)
	}
	if errors.Is(err, errNothingChanged) {
		return nil, internal("preparing the undo failed; nothing changed", err)
	}
	if err != nil {
		return nil, internal("undoing failed midway; restart the daemon to finish it", err)
	}
	s, err := m.submission(id)
	if err != nil {
		return nil, err
	}
	s.AppliedTo = ""
	if err := m.saveSubmission(s); err != nil {
		return nil, err
	}
	err = m.update(ctx, func(tx paddock.Tx) error {
		_, err := tx.AppendEvent(ctx, id, EventUndone, map[string]string{"hash": j.Hash, "worktree": j.Root})
		return err
	})
	return s, err
}

var errNothingChanged = errors.New("nothing changed")

// runUndo takes the tree back from after j's steps to before them, from
// their backups: an undo (prior done, check judging each path first) or
// the rollback of a failed apply (prior committing, no check: it starts
// from wherever the apply stopped). It returns the conflicts that keep it
// from starting, or an error (errNothingChanged if it failed before it
// changed anything).
func (m *Manager) runUndo(j *journal, t *tree, prior string, check checkFunc, step *int) ([]string, error) {
	j.Undo = inverse(j.Steps)
	if conflicts := t.plan(j.Undo, "undo", j.RunID, j.DirModes, check); len(conflicts) > 0 {
		j.Undo = nil
		return conflicts, nil
	}
	j.Prior, j.State = prior, journalUndoPrepared
	if err := m.saveJournal(j); err != nil {
		return nil, fmt.Errorf("%w: writing the journal: %w", errNothingChanged, err)
	}
	m.crash(step)
	err := t.stageAll(j.Undo, func() { m.crash(step) })
	if err == nil {
		err = syncDirFS(j.Root)
	}
	if err != nil {
		t.unstage(j.Undo)
		j.Undo, j.State = nil, prior
		return nil, errors.Join(fmt.Errorf("%w: %w", errNothingChanged, err), m.saveJournal(j))
	}
	j.State = journalUndoing
	if err := m.saveJournal(j); err != nil {
		t.unstage(j.Undo)
		return nil, fmt.Errorf("%w: writing the journal: %w", errNothingChanged, err)
	}
	m.crash(step)
	return nil, m.finishUndo(j, t, step)
}

// finishUndo puts an undo's steps in place and verifies them.
func (m *Manager) finishUndo(j *journal, t *tree, step *int) error {
	if err := t.commit(j.Undo, j.DirModes, func() { m.crash(step) }); err != nil {
		return err
	}
	if j.Prior == journalCommitting {
		t.unstage(j.Steps) // what the failed apply staged and did not put in place
	}
	if bad := t.verify(j.Undo); len(bad) > 0 {
		m.log().Error("an undo did not leave the tree as it was before the apply", "run", j.RunID, "root", j.Root, "mismatch", bad)
		return fmt.Errorf("the working tree is not as it was before the apply: %s", strings.Join(bad, "; "))
	}
	j.State = journalUndone
	if j.Prior == journalCommitting {
		j.State = journalRolledBack
	}
	return m.saveJournal(j)
}

// recoverApplies finishes or rolls back what a killed daemon left of an
// apply or an undo, from its journal.
func (m *Manager) recoverApplies(ctx context.Context) []paddock.Finding {
	entries, _ := os.ReadDir(m.ArtifactsDir)
	var out []paddock.Finding
	for _, e := range entries {
		j, err := m.loadJournal(e.Name())
		if err != nil {
			continue
		}
		t, err := openTree(j.Root)
		if err != nil {
			continue
		}
		f := paddock.Finding{RunID: j.RunID, Path: j.Root}
		if j.State == journalUndoPrepared {
			// Only staged contents existed: remove them, and go on from
			// the state the undo started from.
			t.unstage(j.Undo)
			j.Undo, j.State = nil, j.Prior
			m.saveJournal(j)
			if j.State == journalDone {
				f.Issue, f.Action = "an undo was interrupted before anything changed", paddock.ActionRolledBack
			}
		}
		switch j.State {
		case journalPrepared:
			t.unstage(j.Steps)
			os.Remove(m.journalPath(j.RunID))
			f.Issue, f.Action = "an apply into the working tree was interrupted before anything was in place", paddock.ActionRolledBack
		case journalCommitting:
			bad, err := m.finishApply(j, t, nil)
			switch {
			case err != nil:
				m.log().Error("an interrupted apply could be neither finished nor rolled back", "run", j.RunID, "root", j.Root, "err", err)
			case len(bad) > 0:
				m.update(ctx, func(tx paddock.Tx) error {
					_, err := tx.AppendEvent(ctx, j.RunID, EventApplyFailed, map[string]any{"hash": j.Hash, "worktree": j.Root, "mismatch": bad, "rolled_back": true, "recovered": true})
					return err
				})
				f.Issue, f.Action = "an apply into the working tree was interrupted midway and did not verify", paddock.ActionRolledBack
			default:
				if s, err := m.submission(j.RunID); err == nil {
					s.AppliedTo, s.AppliedAt = "worktree "+j.Root, now()
					m.saveSubmission(s)
				}
				m.update(ctx, func(tx paddock.Tx) error {
					_, err := tx.AppendEvent(ctx, j.RunID, EventApplied, map[string]any{"hash": j.Hash, "worktree": j.Root, "recovered": true})
					return err
				})
				f.Issue, f.Action = "an apply into the working tree was interrupted midway", "finished"
			}
		case journalUndoing:
			if err := m.finishUndo(j, t, nil); err != nil {
				m.log().Error("an interrupted undo could not be finished", "run", j.RunID, "root", j.Root, "err", err)
				break
			}
			if j.Prior == journalCommitting {
				f.Issue, f.Action = "the rollback of a failed apply was interrupted midway", "finished"
				break
			}
			if s, err := m.submission(j.RunID); err == nil {
				s.AppliedTo = ""
				m.saveSubmission(s)
			}
			f.Issue, f.Action = "an undo was interrupted midway", "finished"
		}
		t.Close()
		// The killed apply held the project lock; it is over now.
		m.update(ctx, func(tx paddock.Tx) error {
			_, err := tx.ReleaseLock(ctx, j.Project, j.RunID)
			return err
		})
		if f.Action != "" {
			m.log().Info("recovered", "run", f.RunID, "issue", f.Issue, "action", f.Action)
			out = append(out, f)
		}
	}
	return out
}

// syncBoth makes the backup directory (when there is one) and the project
// durable.
func syncBoth(backup, project string) error {
	if _, err := os.Stat(backup); err == nil {
		if err := syncDirFS(backup); err != nil {
			return err
		}
	}
	return syncDirFS(project)
}

// MaxMerge bounds the files a 3-way apply merges line by line: a merge
// holds the three versions in memory.
const MaxMerge = 16 << 20

// merge3 merges the approved change to rel (from blob oldBlob to newBlob) into the target as the user has
// it now, against the base's content. It keeps the result as a frozen
// blob of the run and returns its id, or why it cannot.
func (m *Manager) merge3(ctx context.Context, t *tree, id, gitDir, baseRev, rel, oldBlob, newBlob string) (string, string) {
	ours := limitWriter{max: MaxMerge}
	_, _, _, err := t.read(rel, &ours)
	if errors.Is(err, errTooLarge) {
		return "", fmt.Sprintf("changed since the base, and is over %d MiB: too large to merge line by line", MaxMerge>>20)
	}
	if err != nil {
		return "", "changed since the base, and could not be read"
	}
	if fi, err := os.Stat(m.blobPath(id, newBlob)); err == nil && fi.Size() > MaxMerge {
		return "", fmt.Sprintf("changed since the base, and the approved content is over %d MiB: too large to merge line by line", MaxMerge>>20)
	}
	base, err := m.Git.FileAt(ctx, gitDir, baseRev, rel)
	if err != nil || gitBlobID(base) != oldBlob {
		return "", "changed since the base, and the base could not be read"
	}
	theirs, err := os.ReadFile(m.blobPath(id, newBlob))
	if err != nil {
		return "", "changed since the base, and the approved content could not be read"
	}
	out, err := m.Git.MergeFile(ctx, base, ours.buf, theirs)
	if err != nil {
		return "", "was changed in the same lines (or is binary); a 3-way merge cannot apply it"
	}
	blob := gitBlobID(out)
	if err := writeFileFrom(m.blobPath(id, blob), false, func(w io.Writer) error { _, err := w.Write(out); return err }); err != nil {
		return "", "could not keep the merged content"
	}
	return blob, ""
}
