package apply

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/changeset"
	"github.com/paddock-dev/paddock/confine"
	"github.com/paddock-dev/paddock/internal/durable"
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

// Journal is the record of an apply into a project's working tree, kept
// in the run's directory (apply-journal.json) while the apply, its undo or
// its rollback is under way, and after, for the undo.
type Journal struct {
	RunID   string `json:"run_id"`
	Project string `json:"project"`
	Root    string `json:"root"`
	Hash    string `json:"hash"`
	State   string `json:"state"`
	Steps   []Step `json:"steps"`
	// Undo is the inverse of Steps while an undo or a rollback is under
	// way; Prior is the state it started from (done for an undo,
	// committing for a rollback).
	Undo  []Step `json:"undo,omitempty"`
	Prior string `json:"prior,omitempty"`
	// DirModes holds the permission bits of the directories the apply
	// removes, to make them again as they were.
	DirModes map[string]fs.FileMode `json:"dir_modes,omitempty"`
}

// An Applier applies approved change sets into working trees, undoes
// them, and finishes or rolls back what a killed process left of either.
// What it keeps outside the working tree (the journal, the backups of old
// contents, a 3-way merge's result) is kept in the run's directory.
type Applier struct {
	// RunDir is the directory of a run's artifacts: its journal and the
	// backups of the contents an apply replaces are kept there.
	RunDir func(id string) string
	// BlobPath is where a run's frozen blob is kept: an apply's new
	// contents are read from there, and a 3-way merge's result is kept
	// there.
	BlobPath func(id, blob string) string
	// Git reads the base and merges, for a 3-way apply.
	Git Git
	// Log receives what went wrong in a rollback or a recovery; nil is
	// slog.Default().
	Log *slog.Logger
	// CrashAt, when positive, kills the process at that step of an apply
	// or an undo (Kill). Tests use it; nothing else sets it.
	CrashAt int
	// Kill stops the process at CrashAt, and never returns; nil sends
	// SIGKILL to the process. A test of this package stops the goroutine
	// instead (runtime.Goexit).
	Kill func()
	// Hook, set by tests only, runs at named points of an apply ("commit",
	// "verify"), to play a concurrent writer.
	Hook func(point string)
}

// Git is what a 3-way apply asks of git (gitx.Git): the base's content of
// a path, and a line-by-line merge.
type Git interface {
	FileAt(ctx context.Context, gitDir, rev, path string) ([]byte, error)
	MergeFile(ctx context.Context, base, ours, theirs []byte) ([]byte, error)
}

func (a *Applier) log() *slog.Logger {
	if a.Log == nil {
		return slog.Default()
	}
	return a.Log
}

func (a *Applier) journalPath(id string) string {
	return filepath.Join(a.RunDir(id), "apply-journal.json")
}

func (a *Applier) saveJournal(j *Journal) error {
	b, _ := json.MarshalIndent(j, "", "  ")
	return durable.WriteFile(a.journalPath(j.RunID), b)
}

func (a *Applier) loadJournal(id string) (*Journal, error) {
	b, err := os.ReadFile(a.journalPath(id))
	if err != nil {
		return nil, err
	}
	var j Journal
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
// apply or undo (CrashAt), to prove a restart recovers from any of
// them. A nil step (a recovery) never stops.
func (a *Applier) crash(step *int) {
	if step == nil {
		return
	}
	*step++
	if a.CrashAt > 0 && *step == a.CrashAt {
		if a.Kill != nil {
			a.Kill()
		}
		syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {}
	}
}

func (a *Applier) hook(point string) {
	if a.Hook != nil {
		a.Hook(point)
	}
}

// A Change is an approved change set to apply into a project's working
// tree.
type Change struct {
	RunID, Project, Hash string
	// Root is the project's working tree.
	Root    string
	Entries []paddock.ChangeEntry
	// ThreeWay merges a modified file the user changed too (see Apply),
	// against the base: BaseRevision in the repository at GitDir.
	ThreeWay             bool
	GitDir, BaseRevision string
}

// Applied is what an apply did.
type Applied struct {
	Steps  int      // the paths it wrote
	Merged []string // the files it merged line by line (ThreeWay), sorted
}

// Mismatch is an apply that did not leave the tree it was approved to
// leave, and was rolled back: nothing changed. Bad says what differed.
type Mismatch struct{ Bad []string }

func (e *Mismatch) Error() string {
	return "the working tree did not hold what was approved after the apply: " + strings.Join(e.Bad, "; ")
}

// Apply writes the approved change set c into the project's working tree;
// the caller holds the project lock. It refuses if any target changed since the
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
// -9 at any point finish it (Recover). Before it reports success it verifies the tree
// it leaves: every path of the change set holds the approved type, mode
// and content, reached without a link; if not, the apply is rolled back
// and the mismatch logged and returned (*Mismatch). The index is
// not touched.
//
// With ThreeWay, a modified file that the user changed too is merged line
// by line (git merge-file) instead of refused: the user's lines and the
// approved ones both land, and overlapping changes, binary files, mode
// changes, created paths that exist and deleted files that changed still
// refuse the whole apply. Undo puts the user's version back.
func (a *Applier) Apply(ctx context.Context, c Change) (*Applied, error) {
	id, threeWay := c.RunID, c.ThreeWay
	t, err := openTree(c.Root)
	if err != nil {
		return nil, internal("opening the project failed", err)
	}
	defer t.Close()

	j := &Journal{RunID: id, Project: c.Project, Root: c.Root, Hash: c.Hash, State: journalPrepared, DirModes: map[string]fs.FileMode{}}
	for i, e := range c.Entries {
		js := Step{Path: e.Path, Op: e.Op, OldMode: e.OldMode, NewMode: e.NewMode, OldBlob: e.OldBlob, NewBlob: e.NewBlob}
		if e.OldMode != "" {
			js.Backup = filepath.Join(a.RunDir(id), "backup", strconv.Itoa(i))
		}
		if e.NewMode != "" {
			js.Src, js.NewPerm = a.BlobPath(id, e.NewBlob), fileMode(e.NewMode)
		}
		j.Steps = append(j.Steps, js)
	}
	// Every target must still be as the base had it (or, with threeWay,
	// merge cleanly with it).
	var merged []string
	check := func(js *Step, st entryState) string {
		switch {
		case js.OldMode == "":
			if st.mode != "" {
				return "exists"
			}
		case st.mode == js.OldMode && st.blob == js.OldBlob:
		case threeWay && js.Op == paddock.OpModify && st.mode == js.OldMode && st.mode != "120000" && js.NewMode != "120000":
			blob, why := a.merge3(ctx, t, id, c.GitDir, c.BaseRevision, js.Path, js.OldBlob, js.NewBlob)
			if why != "" {
				return why
			}
			js.OldBlob, js.NewBlob, js.Src = st.blob, blob, a.BlobPath(id, blob)
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
		err := durable.WriteFileFrom(js.Backup, false, func(w io.Writer) error {
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

	if err := a.saveJournal(j); err != nil {
		return nil, internal("writing the apply journal failed", err)
	}
	step := 0
	a.crash(&step)
	if err := t.stageAll(j.Steps, func() { a.crash(&step) }); err != nil {
		return nil, a.abort(j, t, internal("writing the new content failed; nothing was applied", err))
	}
	// Backups and new contents become durable together, before the journal
	// that lets a restart rely on them: one syncfs each instead of an fsync
	// per file.
	if err := syncBoth(filepath.Join(a.RunDir(id), "backup"), c.Root); err != nil {
		return nil, a.abort(j, t, internal("syncing the new content failed; nothing was applied", err))
	}
	j.State = journalCommitting
	if err := a.saveJournal(j); err != nil {
		return nil, a.abort(j, t, internal("writing the apply journal failed", err))
	}
	a.crash(&step)
	bad, err := a.finishApply(j, t, &step)
	if err != nil {
		return nil, internal("applying failed midway and could not be rolled back; restart the daemon to finish it", err)
	}
	if len(bad) > 0 {
		return nil, &Mismatch{Bad: bad}
	}
	sort.Strings(merged)
	return &Applied{Steps: len(j.Steps), Merged: merged}, nil
}

// finishApply puts a committing apply's steps in place and verifies the
// tree it leaves. If either fails, it rolls the apply back and returns what
// did not match; an error means the rollback failed too.
func (a *Applier) finishApply(j *Journal, t *tree, step *int) ([]string, error) {
	var bad []string
	a.hook("commit")
	if err := t.commit(j.Steps, j.DirModes, func() { a.crash(step) }); err != nil {
		bad = []string{err.Error()}
	} else {
		a.hook("verify")
		bad = t.verify(j.Steps)
	}
	if len(bad) == 0 {
		j.State = journalDone
		return nil, a.saveJournal(j)
	}
	a.log().Error("an apply into the working tree did not leave the approved tree; rolling it back",
		"run", j.RunID, "root", j.Root, "hash", j.Hash, "mismatch", bad)
	// From wherever the apply stopped: no check, every inverse step is
	// safe whether or not its forward step ran.
	conflicts, err := a.runUndo(j, t, journalCommitting, nil, step)
	if err == nil && len(conflicts) > 0 {
		err = errors.New(strings.Join(conflicts, "; "))
	}
	if err != nil {
		a.log().Error("the failed apply could not be rolled back", "run", j.RunID, "root", j.Root, "err", err)
	}
	return bad, err
}

// NeverApplied lists the entries of run id's change set cs that paddock never applies: those its
// labels say so, and, judged again from the frozen content whatever the
// labels say (a change set frozen by an earlier version, say), paths under
// .git and links into .git, to a protected path or out of the project.
func (a *Applier) NeverApplied(id string, cs *paddock.ChangeSet, pol *confine.Policy) []string {
	var out []string
	for _, e := range cs.Entries {
		if why := a.neverApplied(id, e, pol); why != "" {
			out = append(out, e.Path+": "+why)
		}
	}
	return out
}

// Applicable splits cs's entries into those an apply may write and, by
// path, why each other one is never applied.
func (a *Applier) Applicable(id string, cs *paddock.ChangeSet, pol *confine.Policy) ([]paddock.ChangeEntry, map[string]string) {
	var ok []paddock.ChangeEntry
	never := map[string]string{}
	for _, e := range cs.Entries {
		if why := a.neverApplied(id, e, pol); why != "" {
			never[e.Path] = why
			continue
		}
		ok = append(ok, e)
	}
	return ok, never
}

func (a *Applier) neverApplied(id string, e paddock.ChangeEntry, pol *confine.Policy) string {
	why := e.Blocked
	if why == "" && e.NewMode != "" {
		target := ""
		if e.NewMode == "120000" {
			b, err := os.ReadFile(a.BlobPath(id, e.NewBlob))
			if err != nil || changeset.BlobID(b) != e.NewBlob {
				return "the link's frozen target cannot be read"
			}
			target = string(b)
		}
		why = changeset.NeverApplied(e.Path, e.NewMode == "120000", target, pol)
	}
	return why
}

// abort removes what a prepared apply staged and returns cause.
func (a *Applier) abort(j *Journal, t *tree, cause error) error {
	t.unstage(j.Steps)
	os.Remove(a.journalPath(j.RunID))
	return cause
}

// Undo reverses an apply into the working tree, if every path it wrote is
// still as it wrote it: files and links come back from their backups with
// their permissions, what the apply created goes, the directories it
// removed are made again and the ones it made go when empty. Like the
// apply, it writes through no link and verifies what it leaves. It returns
// the journal of the apply it undid.
func (a *Applier) Undo(id string) (*Journal, error) {
	j, err := a.loadJournal(id)
	if err != nil || j.State != journalDone {
		return nil, paddock.Errorf(paddock.CodeConflict, "run %s has no apply into a working tree to undo", id)
	}
	t, err := openTree(j.Root)
	if err != nil {
		return nil, internal("opening the project failed", err)
	}
	defer t.Close()
	check := func(js *Step, st entryState) string {
		switch {
		case js.OldMode == "" && st.mode != "":
			return "exists again"
		case js.OldMode != "" && (st.mode != js.OldMode || st.blob != js.OldBlob):
			return "changed since the apply"
		}
		return ""
	}
	step := 0
	changed, err := a.runUndo(j, t, journalDone, check, &step)
	if len(changed) > 0 {
		return nil, paddock.Errorf(paddock.CodeConflict, "cannot undo: %s", strings.Join(changed, "; ")).WithDetail("changed", changed)
	}
	if errors.Is(err, errNothingChanged) {
		return nil, internal("preparing the undo failed; nothing changed", err)
	}
	if err != nil {
		return nil, internal("undoing failed midway; restart the daemon to finish it", err)
	}
	return j, nil
}

var errNothingChanged = errors.New("nothing changed")

// runUndo takes the tree back from after j's steps to before them, from
// their backups: an undo (prior done, check judging each path first) or
// the rollback of a failed apply (prior committing, no check: it starts
// from wherever the apply stopped). It returns the conflicts that keep it
// from starting, or an error (errNothingChanged if it failed before it
// changed anything).
func (a *Applier) runUndo(j *Journal, t *tree, prior string, check checkFunc, step *int) ([]string, error) {
	j.Undo = inverse(j.Steps)
	if conflicts := t.plan(j.Undo, "undo", j.RunID, j.DirModes, check); len(conflicts) > 0 {
		j.Undo = nil
		return conflicts, nil
	}
	j.Prior, j.State = prior, journalUndoPrepared
	if err := a.saveJournal(j); err != nil {
		return nil, fmt.Errorf("%w: writing the journal: %w", errNothingChanged, err)
	}
	a.crash(step)
	err := t.stageAll(j.Undo, func() { a.crash(step) })
	if err == nil {
		err = durable.SyncFS(j.Root)
	}
	if err != nil {
		t.unstage(j.Undo)
		j.Undo, j.State = nil, prior
		return nil, errors.Join(fmt.Errorf("%w: %w", errNothingChanged, err), a.saveJournal(j))
	}
	j.State = journalUndoing
	if err := a.saveJournal(j); err != nil {
		t.unstage(j.Undo)
		return nil, fmt.Errorf("%w: writing the journal: %w", errNothingChanged, err)
	}
	a.crash(step)
	return nil, a.finishUndo(j, t, step)
}

// finishUndo puts an undo's steps in place and verifies them.
func (a *Applier) finishUndo(j *Journal, t *tree, step *int) error {
	if err := t.commit(j.Undo, j.DirModes, func() { a.crash(step) }); err != nil {
		return err
	}
	if j.Prior == journalCommitting {
		t.unstage(j.Steps) // what the failed apply staged and did not put in place
	}
	if bad := t.verify(j.Undo); len(bad) > 0 {
		a.log().Error("an undo did not leave the tree as it was before the apply", "run", j.RunID, "root", j.Root, "mismatch", bad)
		return fmt.Errorf("the working tree is not as it was before the apply: %s", strings.Join(bad, "; "))
	}
	j.State = journalUndone
	if j.Prior == journalCommitting {
		j.State = journalRolledBack
	}
	return a.saveJournal(j)
}

// syncBoth makes the backup directory (when there is one) and the project
// durable.
func syncBoth(backup, project string) error {
	if _, err := os.Stat(backup); err == nil {
		if err := durable.SyncFS(backup); err != nil {
			return err
		}
	}
	return durable.SyncFS(project)
}

// MaxMerge bounds the files a 3-way apply merges line by line: a merge
// holds the three versions in memory.
const MaxMerge = 16 << 20

// merge3 merges the approved change to rel (from blob oldBlob to newBlob) into the target as the user has
// it now, against the base's content. It keeps the result as a frozen
// blob of the run and returns its id, or why it cannot.
func (a *Applier) merge3(ctx context.Context, t *tree, id, gitDir, baseRev, rel, oldBlob, newBlob string) (string, string) {
	ours := limitWriter{max: MaxMerge}
	_, _, _, err := t.read(rel, &ours)
	if errors.Is(err, errTooLarge) {
		return "", fmt.Sprintf("changed since the base, and is over %d MiB: too large to merge line by line", MaxMerge>>20)
	}
	if err != nil {
		return "", "changed since the base, and could not be read"
	}
	if fi, err := os.Stat(a.BlobPath(id, newBlob)); err == nil && fi.Size() > MaxMerge {
		return "", fmt.Sprintf("changed since the base, and the approved content is over %d MiB: too large to merge line by line", MaxMerge>>20)
	}
	base, err := a.Git.FileAt(ctx, gitDir, baseRev, rel)
	if err != nil || changeset.BlobID(base) != oldBlob {
		return "", "changed since the base, and the base could not be read"
	}
	theirs, err := os.ReadFile(a.BlobPath(id, newBlob))
	if err != nil {
		return "", "changed since the base, and the approved content could not be read"
	}
	out, err := a.Git.MergeFile(ctx, base, ours.buf, theirs)
	if err != nil {
		return "", "was changed in the same lines (or is binary); a 3-way merge cannot apply it"
	}
	blob := changeset.BlobID(out)
	if err := durable.WriteFileFrom(a.BlobPath(id, blob), false, func(w io.Writer) error { _, err := w.Write(out); return err }); err != nil {
		return "", "could not keep the merged content"
	}
	return blob, ""
}
