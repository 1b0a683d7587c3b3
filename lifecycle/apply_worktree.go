package lifecycle

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
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
)

// Journal states. An apply moves prepared → committing → done, an undo
// done → undoing → undone. A restart finds the journal and finishes what
// it says: prepared is rolled back (nothing was in place yet), committing
// and undoing are rolled forward (every new content was on disk first).
const (
	journalPrepared   = "prepared"
	journalCommitting = "committing"
	journalDone       = "done"
	journalUndoing    = "undoing"
	journalUndone     = "undone"
)

// journal is the record of an apply into a project's working tree.
type journal struct {
	RunID   string        `json:"run_id"`
	Project string        `json:"project"`
	Root    string        `json:"root"`
	Hash    string        `json:"hash"`
	State   string        `json:"state"`
	Steps   []journalStep `json:"steps"`
}

type journalStep struct {
	Path    string           `json:"path"`
	Op      paddock.ChangeOp `json:"op"`
	OldMode string           `json:"old_mode,omitempty"`
	NewMode string           `json:"new_mode,omitempty"`
	OldBlob string           `json:"old_blob,omitempty"`
	NewBlob string           `json:"new_blob,omitempty"`
	// Temp is the new content, written beside the target, then renamed over it.
	Temp string `json:"temp,omitempty"`
	// Backup holds the old content in the run's artifacts, for undo.
	Backup string `json:"backup,omitempty"`
	// Dirs lists the directories made for this entry, deepest last.
	Dirs []string `json:"dirs,omitempty"`
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
	return &j, json.Unmarshal(b, &j)
}

// crash is the test hook that stops the daemon at a numbered step of an
// apply or undo (Manager.CrashAt), to prove a restart recovers from any of them.
func (m *Manager) crash(step *int) {
	*step++
	if m.CrashAt > 0 && *step == m.CrashAt {
		syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {}
	}
}

// ApplyToWorktree writes the approved change set into the project's working
// tree, under the project lock. It refuses if any target changed since the
// base (a created path that exists, a modified or deleted one whose content
// or mode is not the base's). It is all or nothing: the new contents are
// written and fsynced beside their targets and the old ones kept before
// anything is renamed into place, and a journal lets a restart after kill -9
// at any point finish it. The index is not touched.
//
// With threeWay, a modified file that the user changed too is merged line
// by line (git merge-file) instead of refused: the user's lines and the
// approved ones both land, and overlapping changes, binary files, mode
// changes, created paths that exist and deleted files that changed still
// refuse the whole apply. Undo puts the user's version back.
func (m *Manager) ApplyToWorktree(ctx context.Context, id string, threeWay bool) (*paddock.Submission, error) {
	r, p, err := m.runAndProject(ctx, id)
	if err != nil {
		return nil, err
	}
	s, cs, err := m.approved(id)
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
	root, err := confine.Open(p.Root, &confine.Policy{})
	if err != nil {
		return nil, internal("opening the project failed", err)
	}
	defer root.Close()

	// Every target must still be as the base had it (or, with threeWay,
	// merge cleanly with it).
	var stale []string
	merged := map[string]string{} // path -> blob id of the merged content
	for _, e := range cs.Entries {
		blob, mode, err := readEntry(root, e.Path, io.Discard)
		switch {
		case e.Op == paddock.OpCreate:
			if err == nil || !paddock.IsCode(err, paddock.CodeNotFound) {
				stale = append(stale, e.Path+" exists")
			}
		case err == nil && blob == e.OldBlob && mode == e.OldMode:
		case threeWay && err == nil && e.Op == paddock.OpModify && mode == e.OldMode:
			blob, why := m.merge3(ctx, root, id, repo.CommonDir, r.Workspace.BaseRevision, e)
			if why != "" {
				stale = append(stale, e.Path+" "+why)
				continue
			}
			merged[e.Path] = blob
		default:
			stale = append(stale, e.Path+" changed since the base")
		}
	}
	if len(stale) > 0 {
		hint := "apply to a branch instead, or bring the files back"
		if !threeWay {
			hint += ", or merge with --3way"
		}
		return nil, paddock.Errorf(paddock.CodeConflict, "the working tree no longer matches the base: %s; nothing was written (%s)",
			strings.Join(stale, "; "), hint).WithDetail("stale", stale)
	}

	j := &journal{RunID: id, Project: p.Name, Root: p.Root, Hash: s.Hash, State: journalPrepared}
	step := 0
	for i, e := range cs.Entries {
		js := journalStep{Path: e.Path, Op: e.Op, OldMode: e.OldMode, NewMode: e.NewMode, OldBlob: e.OldBlob, NewBlob: e.NewBlob}
		if e.Op != paddock.OpCreate {
			js.Backup = filepath.Join(m.runDir(id), "backup", itoa(i))
			err := writeFileFrom(js.Backup, false, func(w io.Writer) error {
				_, _, err := readEntry(root, e.Path, w)
				return err
			})
			if err != nil {
				return nil, m.abort(j, root, internal("keeping the old content failed", err))
			}
		}
		if b, ok := merged[e.Path]; ok {
			js.NewBlob = b
		}
		if e.Op != paddock.OpDelete {
			js.Dirs = missingDirs(root, path.Dir(e.Path))
			js.Temp = path.Join(path.Dir(e.Path), fmt.Sprintf(".paddock-apply-%s-%d", id, i))
		}
		j.Steps = append(j.Steps, js)
	}
	if err := m.saveJournal(j); err != nil {
		return nil, internal("writing the apply journal failed", err)
	}
	m.crash(&step)
	for _, js := range j.Steps {
		if js.Temp == "" {
			continue
		}
		if err := writeTemp(root, js, m.blobPath(id, js.NewBlob)); err != nil {
			return nil, m.abort(j, root, internal("writing the new content failed; nothing was applied", err))
		}
		m.crash(&step)
	}
	// Backups and new contents become durable together, before the journal
	// that lets a restart rely on them: one syncfs each instead of an fsync
	// per file.
	if err := syncBoth(filepath.Join(m.runDir(id), "backup"), p.Root); err != nil {
		return nil, m.abort(j, root, internal("syncing the new content failed; nothing was applied", err))
	}
	j.State = journalCommitting
	if err := m.saveJournal(j); err != nil {
		return nil, m.abort(j, root, internal("writing the apply journal failed", err))
	}
	m.crash(&step)
	if err := m.rollForward(j, root, &step); err != nil {
		return nil, internal("applying failed midway; restart the daemon to finish it", err)
	}
	s.AppliedTo, s.AppliedAt = "worktree "+p.Root, now()
	if err := m.saveSubmission(s); err != nil {
		return nil, err
	}
	err = m.update(ctx, func(tx paddock.Tx) error {
		ev := map[string]any{"hash": s.Hash, "worktree": p.Root, "entries": len(j.Steps)}
		if len(merged) > 0 {
			paths := make([]string, 0, len(merged))
			for k := range merged {
				paths = append(paths, k)
			}
			sort.Strings(paths)
			ev["merged"] = paths
		}
		_, err := tx.AppendEvent(ctx, id, EventApplied, ev)
		return err
	})
	return s, err
}

// approved loads the run's approved, not yet applied, frozen change set and
// checks it against its hash and against what paddock never applies.
func (m *Manager) approved(id string) (*paddock.Submission, *paddock.ChangeSet, error) {
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
	var blocked []string
	for _, e := range cs.Entries {
		if e.Blocked != "" {
			blocked = append(blocked, e.Path+": "+e.Blocked)
		}
	}
	if len(blocked) > 0 {
		return nil, nil, paddock.Errorf(paddock.CodeForbidden, "the change set holds entries paddock never applies: %s", strings.Join(blocked, "; ")).
			WithDetail("blocked", blocked)
	}
	return s, cs, nil
}

// missingDirs lists the directories from the root down to dir that do not exist yet.
func missingDirs(root *confine.Root, dir string) []string {
	var out []string
	for d := dir; d != "." && d != "/"; d = path.Dir(d) {
		if _, err := root.Lstat(d, d); err == nil {
			break
		}
		out = append([]string{d}, out...)
	}
	return out
}

// writeTemp writes a step's new content, streamed from the file src,
// beside its target, not yet synced (the caller makes all of them durable
// at once with syncDirFS), with its mode; a symbolic link is made as a link.
func writeTemp(root *confine.Root, js journalStep, src string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	for _, d := range js.Dirs {
		if err := root.OS().Mkdir(d, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return err
		}
	}
	root.OS().Remove(js.Temp) // a leftover of an earlier, aborted attempt
	if js.NewMode == "120000" {
		target, err := io.ReadAll(io.LimitReader(in, 1<<16)) // a link's target
		if err != nil {
			return err
		}
		return root.OS().Symlink(string(target), js.Temp)
	}
	f, err := root.OS().OpenFile(js.Temp, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, fileMode(js.NewMode))
	if err != nil {
		return err
	}
	_, err = io.Copy(f, in)
	if err == nil {
		err = f.Chmod(fileMode(js.NewMode))
	}
	return errors.Join(err, f.Close())
}

// rollForward puts every step in place; each is safe to repeat.
func (m *Manager) rollForward(j *journal, root *confine.Root, step *int) error {
	for _, js := range j.Steps {
		switch js.Op {
		case paddock.OpDelete:
			if err := root.OS().Remove(js.Path); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
		default:
			if _, err := root.OS().Lstat(js.Temp); errors.Is(err, fs.ErrNotExist) {
				continue // renamed already
			}
			if err := root.OS().Rename(js.Temp, js.Path); err != nil {
				return err
			}
		}
		if step != nil {
			m.crash(step)
		}
	}
	j.State = journalDone
	return m.saveJournal(j)
}

// abort removes what a prepared apply wrote and returns cause.
func (m *Manager) abort(j *journal, root *confine.Root, cause error) error {
	m.rollBack(j, root)
	return cause
}

// rollBack removes the temporary files and the directories a prepared apply
// made (nothing of it was in place yet), and its journal.
func (m *Manager) rollBack(j *journal, root *confine.Root) {
	removeTemps(j.Steps, root)
	os.Remove(m.journalPath(j.RunID))
}

// removeTemps removes steps' temporary files and the directories made for them.
func removeTemps(steps []journalStep, root *confine.Root) {
	for i := len(steps) - 1; i >= 0; i-- {
		js := steps[i]
		if js.Temp != "" {
			root.OS().Remove(js.Temp)
		}
		for k := len(js.Dirs) - 1; k >= 0; k-- {
			root.OS().Remove(js.Dirs[k]) // only if empty
		}
	}
}

// Undo reverses an apply into the working tree, if every file it wrote is
// still as it wrote it.
func (m *Manager) Undo(ctx context.Context, id string) (*paddock.Submission, error) {
	j, err := m.loadJournal(id)
	if err != nil || j.State != journalDone {
		return nil, paddock.Errorf(paddock.CodeConflict, "run %s has no apply into a working tree to undo", id)
	}
	root, err := confine.Open(j.Root, &confine.Policy{})
	if err != nil {
		return nil, internal("opening the project failed", err)
	}
	defer root.Close()
	var changed []string
	for _, js := range j.Steps {
		blob, mode, err := readEntry(root, js.Path, io.Discard)
		if js.Op == paddock.OpDelete {
			if err == nil {
				changed = append(changed, js.Path+" exists again")
			}
		} else if err != nil || blob != js.NewBlob || mode != js.NewMode {
			changed = append(changed, js.Path+" changed since the apply")
		}
	}
	if len(changed) > 0 {
		return nil, paddock.Errorf(paddock.CodeConflict, "cannot undo: %s", strings.Join(changed, "; ")).WithDetail("changed", changed)
	}
	// Prepare the old contents beside their targets, then swap them in.
	undo := &journal{RunID: id, Project: j.Project, Root: j.Root, Hash: j.Hash, State: journalUndoing}
	for i, js := range j.Steps {
		u := journalStep{Path: js.Path, OldMode: js.NewMode, NewMode: js.OldMode, OldBlob: js.NewBlob, NewBlob: js.OldBlob}
		switch js.Op {
		case paddock.OpCreate:
			u.Op, u.Dirs = paddock.OpDelete, js.Dirs
		default:
			u.Op = paddock.OpModify
			u.Temp = path.Join(path.Dir(js.Path), fmt.Sprintf(".paddock-undo-%s-%d", id, i))
			if err := writeTemp(root, u, js.Backup); err != nil {
				removeTemps(append(undo.Steps, u), root)
				return nil, internal("preparing the undo failed; nothing changed", err)
			}
		}
		undo.Steps = append(undo.Steps, u)
	}
	if err := syncDirFS(j.Root); err != nil {
		removeTemps(undo.Steps, root)
		return nil, internal("preparing the undo failed; nothing changed", err)
	}
	b, _ := json.MarshalIndent(undo, "", "  ")
	if err := writeFile(m.journalPath(id), b); err != nil {
		return nil, internal("writing the undo journal failed", err)
	}
	if err := m.finishUndo(undo, root); err != nil {
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

// finishUndo puts the old contents back and removes what the apply created.
func (m *Manager) finishUndo(u *journal, root *confine.Root) error {
	for _, us := range u.Steps {
		if us.Op == paddock.OpDelete {
			if err := root.OS().Remove(us.Path); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
			for k := len(us.Dirs) - 1; k >= 0; k-- {
				root.OS().Remove(us.Dirs[k])
			}
			continue
		}
		if _, err := root.OS().Lstat(us.Temp); errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err := root.OS().Rename(us.Temp, us.Path); err != nil {
			return err
		}
	}
	u.State = journalUndone
	return m.saveJournal(u)
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
		root, err := confine.Open(j.Root, &confine.Policy{})
		if err != nil {
			continue
		}
		f := paddock.Finding{RunID: j.RunID, Path: j.Root}
		switch j.State {
		case journalPrepared:
			m.rollBack(j, root)
			f.Issue, f.Action = "an apply into the working tree was interrupted before anything was in place", paddock.ActionRolledBack
		case journalCommitting:
			if err := m.rollForward(j, root, nil); err == nil {
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
			if err := m.finishUndo(j, root); err == nil {
				if s, err := m.submission(j.RunID); err == nil {
					s.AppliedTo = ""
					m.saveSubmission(s)
				}
				f.Issue, f.Action = "an undo was interrupted midway", "finished"
			}
		}
		root.Close()
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

// merge3 merges the approved change to e into the target as the user has
// it now, against the base's content. It keeps the result as a frozen
// blob of the run and returns its id, or why it cannot.
func (m *Manager) merge3(ctx context.Context, root *confine.Root, id, gitDir, baseRev string, e paddock.ChangeEntry) (string, string) {
	ours, err := entryBytes(root, e.Path, MaxMerge)
	if errors.Is(err, errTooLarge) {
		return "", fmt.Sprintf("changed since the base, and is over %d MiB: too large to merge line by line", MaxMerge>>20)
	}
	if err != nil {
		return "", "changed since the base, and could not be read"
	}
	if fi, err := os.Stat(m.blobPath(id, e.NewBlob)); err == nil && fi.Size() > MaxMerge {
		return "", fmt.Sprintf("changed since the base, and the approved content is over %d MiB: too large to merge line by line", MaxMerge>>20)
	}
	base, err := m.Git.FileAt(ctx, gitDir, baseRev, e.Path)
	if err != nil || gitBlobID(base) != e.OldBlob {
		return "", "changed since the base, and the base could not be read"
	}
	theirs, err := os.ReadFile(m.blobPath(id, e.NewBlob))
	if err != nil {
		return "", "changed since the base, and the approved content could not be read"
	}
	out, err := m.Git.MergeFile(ctx, base, ours, theirs)
	if err != nil {
		return "", "was changed in the same lines (or is binary); a 3-way merge cannot apply it"
	}
	blob := gitBlobID(out)
	if err := writeFileFrom(m.blobPath(id, blob), false, func(w io.Writer) error { _, err := w.Write(out); return err }); err != nil {
		return "", "could not keep the merged content"
	}
	return blob, ""
}
