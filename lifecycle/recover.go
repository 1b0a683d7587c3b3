package lifecycle

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/sandbox"
	"github.com/paddock-dev/paddock/workspace"
)

// Recover brings records and disk back in step after the daemon stopped,
// cleanly or not. Call it once at startup, before serving:
//
//   - requested or preparing: the half-made workspace is rolled back;
//   - cleanup_pending: the cleanup is finished;
//   - active: the session died with the daemon; the workspace is checkpointed;
//   - a live, retained or rejected workspace whose directory is gone: orphaned;
//   - retained: its retention marker is written again if it was lost.
func (m *Manager) Recover(ctx context.Context) ([]paddock.Finding, error) {
	out, err := m.recoverWorkspaces(ctx)
	if err != nil {
		return nil, err
	}
	// Then the flows' steps a crash interrupted, with the runs in order
	// (a step makes and gives back runs, which takes the lock).
	out = append(out, m.Flows.finishFlows(ctx)...)
	// Then the imports a crash cut short: rolled back.
	out = append(out, m.Bundles.recoverImports(ctx)...)
	// Then the merge queue's landings a crash interrupted.
	return append(out, m.Queue.recoverQueue(ctx)...), nil
}

func (m *Manager) recoverWorkspaces(ctx context.Context) ([]paddock.Finding, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var ws []*paddock.Workspace
	if err := m.Store.View(ctx, func(tx paddock.Tx) (err error) {
		ws, err = tx.Workspaces(ctx, paddock.StateRequested, paddock.StatePreparing, paddock.StateCleanupPending,
			paddock.StateActive, paddock.StateReady, paddock.StateCheckpointed, paddock.StateRetained, paddock.StateRejected)
		return err
	}); err != nil {
		return nil, err
	}
	// A fork a crash interrupted first: its run's layers are finished
	// before its harness or its workspace is looked at.
	out := append(m.Forks.recoverForks(ctx), m.Changes.recoverApplies(ctx)...)
	out = append(out, m.Jobs.adoptJobs(ctx)...)
	out = append(out, m.recoverHarnesses(ctx, ws)...)
	for _, w := range ws {
		if f, ok := m.Nodes.recoverAdoption(ctx, w); ok {
			out = append(out, *f)
			continue
		}
		f, err := m.recoverOne(ctx, w)
		if err != nil {
			m.log().Error("recovery failed", "run", w.RunID, "err", err)
			f = &paddock.Finding{RunID: w.RunID, Path: w.Root, State: w.State, Issue: f.Issue, Action: paddock.ActionFailed}
		}
		if f.Action != "" {
			m.log().Info("recovered", "run", f.RunID, "issue", f.Issue, "action", f.Action)
			out = append(out, *f)
		}
	}
	// A harness outlives the daemon, and so does what runs in it: the
	// agents' `paddock mcp` find their runs' sockets answering again.
	for _, w := range ws {
		switch w.State {
		case paddock.StateActive, paddock.StateReady, paddock.StateCheckpointed:
			if _, err := os.Stat(m.views.apiDir(w.RunID)); err == nil {
				if err := m.views.serveRunAPI(w.RunID); err != nil {
					m.log().Warn("the run's API socket could not be served again", "run", w.RunID, "err", err)
				}
			}
		}
	}
	return out, nil
}

func (m *Manager) recoverOne(ctx context.Context, w *paddock.Workspace) (*paddock.Finding, error) {
	f := &paddock.Finding{RunID: w.RunID, Path: w.Root, State: w.State}
	r, p, err := m.runAndProject(ctx, w.RunID)
	if err != nil {
		return f, err
	}
	switch w.State {
	case paddock.StateRequested, paddock.StatePreparing:
		f.Issue, f.Action = "interrupted while being prepared", paddock.ActionRolledBack
		return f, m.Runs.cleanup(ctx, r, p, "interrupted while being prepared; rolled back")
	case paddock.StateCleanupPending:
		f.Issue, f.Action = "interrupted while being removed", paddock.ActionCleaned
		return f, m.Runs.finishCleanup(ctx, r, p)
	}
	prov, err := m.provider(w.Kind)
	if err != nil {
		return f, err
	}
	ok, err := prov.Present(ctx, w)
	if err != nil {
		return f, err
	}
	if !ok {
		f.Issue, f.Action = "workspace directory is missing", paddock.ActionMarked
		return f, m.update(ctx, func(tx paddock.Tx) error {
			return m.transition(ctx, tx, r, paddock.StateOrphaned, "workspace directory is missing")
		})
	}
	switch w.State {
	case paddock.StateActive:
		f.Issue, f.Action = "its session ended with the daemon", paddock.ActionCheckpointed
		_, err := m.Runs.Checkpoint(ctx, r.ID, "daemon restart")
		return f, err
	case paddock.StateRetained:
		if p := m.retainedMarker(w); p != "" {
			if _, err := os.Stat(p); errors.Is(err, fs.ErrNotExist) {
				m.markRetained(w)
			}
		}
	}
	return f, nil
}

// GC finds what the records and the disk disagree about and, unless dryRun,
// cleans it. It never deletes a retained workspace: not one whose record says
// so, and not a directory with a retention marker beside it.
//
//   - a record whose directory is gone becomes orphaned, then cleaned (its git
//     metadata is removed), unless it was ever retained;
//   - a rejected workspace kept by the manual policy is cleaned;
//   - a directory under the workspaces directory with no live record is deleted.
func (m *Manager) GC(ctx context.Context, dryRun bool) ([]paddock.Finding, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	// List the directories before reading records: a directory made after
	// the listing is not judged, and one made before it has its record.
	entries, err := os.ReadDir(m.WorkspacesDir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, internal("reading the workspaces directory failed", err)
	}
	var runs []*paddock.Run
	if err := m.Store.View(ctx, func(tx paddock.Tx) (err error) {
		runs, err = tx.Runs(ctx, paddock.RunFilter{Removed: true})
		return err
	}); err != nil {
		return nil, err
	}

	var out []paddock.Finding
	known := map[string]bool{}
	for _, r := range runs {
		w := r.Workspace
		if w == nil || !m.mine(r) {
			continue // another node's workspace is on its disk, for it to collect
		}
		if w.State != paddock.StateCleaned {
			known[w.Root] = true
			known[m.auxDir(r.ID)] = true
		}
		f, err := m.gcRecord(ctx, r, dryRun)
		if err != nil {
			m.log().Error("gc failed", "run", r.ID, "err", err)
			f.Action = paddock.ActionFailed
		}
		if f.Action != "" {
			out = append(out, *f)
		}
	}

	sort.Slice(entries, func(i, j int) bool { return entries[i].Name() < entries[j].Name() })
	for _, e := range entries {
		path := filepath.Join(m.WorkspacesDir, e.Name())
		if strings.HasSuffix(e.Name(), ".retained") || known[path] || probing(e) {
			continue
		}
		f := paddock.Finding{Path: path, Issue: "directory has no live record", Action: paddock.ActionWouldClean}
		// A run's aux directory (its home) is kept with its retained workspace.
		if _, err := os.Stat(strings.TrimSuffix(path, ".aux") + ".retained"); err == nil {
			f.Action = paddock.ActionKept
		} else if !dryRun {
			f.Action = paddock.ActionCleaned
			if err := workspace.RemoveTree(m.WorkspacesDir, path); err != nil {
				m.log().Error("gc failed", "path", path, "err", err)
				f.Action = paddock.ActionFailed
			}
		}
		out = append(out, f)
	}
	out = append(out, m.Forks.gcLayers(dryRun)...)
	return append(out, m.gcSnapshots(ctx, dryRun)...), nil
}

// gcSnapshots removes the overlay snapshots no live run uses (and any a
// crash left half built), under the provider's snapshot lock, which a
// create holds while it builds one. A create's record exists before it
// asks for its snapshot, so one it is about to take is in use.
func (m *Manager) gcSnapshots(ctx context.Context, dryRun bool) []paddock.Finding {
	ov, ok := m.overlayProvider()
	if !ok {
		return nil
	}
	defer ov.LockSnapshots()()
	// The records are read under the lock: a create that took a snapshot
	// before it has its record by then.
	var runs []*paddock.Run
	if err := m.Store.View(ctx, func(tx paddock.Tx) (err error) {
		runs, err = tx.Runs(ctx, paddock.RunFilter{Removed: true})
		return err
	}); err != nil {
		m.log().Error("gc of snapshots skipped", "err", err)
		return nil
	}
	used := map[string]bool{}
	for _, r := range runs {
		if w := r.Workspace; w != nil && w.Kind == paddock.KindOverlay && w.State != paddock.StateCleaned {
			used[workspace.SnapshotDir(ov.Snapshots, r.Project, w.BaseRevision)] = true
		}
	}
	projects, _ := os.ReadDir(ov.Snapshots)
	var out []paddock.Finding
	for _, pd := range projects {
		dir := filepath.Join(ov.Snapshots, pd.Name())
		snaps, _ := os.ReadDir(dir)
		for _, sn := range snaps {
			path := filepath.Join(dir, sn.Name())
			// A snapshot's index (SHA.index) goes with it.
			if used[path] || used[strings.TrimSuffix(path, ".index")] {
				continue
			}
			f := paddock.Finding{Path: path, Issue: "snapshot no live run uses", Action: paddock.ActionWouldClean}
			if !dryRun {
				f.Action = paddock.ActionCleaned
				if err := workspace.RemoveTree(dir, path); err != nil {
					m.log().Error("gc failed", "path", path, "err", err)
					f.Action = paddock.ActionFailed
				}
			}
			out = append(out, f)
		}
		if !dryRun {
			os.Remove(dir) // only if empty
		}
	}
	return out
}

func (m *Manager) gcRecord(ctx context.Context, r *paddock.Run, dryRun bool) (*paddock.Finding, error) {
	w := r.Workspace
	f := &paddock.Finding{RunID: r.ID, Path: w.Root, State: w.State}
	if w.State == paddock.StateCleaned || w.State == paddock.StateRequested || w.State == paddock.StatePreparing {
		return f, nil // finished, or being made by a live operation (gc holds m.mu, so only after a crash, which Recover handles)
	}
	prov, err := m.provider(w.Kind)
	if err != nil {
		return f, err
	}
	switch {
	case w.State == paddock.StateCleanupPending:
		f.Issue = "cleanup did not finish"
	case w.State == paddock.StateRejected && w.CleanupPolicy == paddock.CleanupManual:
		f.Issue = "rejected; kept until gc by its cleanup policy"
	case w.State == paddock.StateOrphaned:
		f.Issue = "workspace directory is missing"
	default:
		ok, err := prov.Present(ctx, w)
		if err != nil {
			return f, err
		}
		if ok {
			return f, nil
		}
		f.Issue = "workspace directory is missing"
	}
	if !w.RetainedAt.IsZero() {
		f.Action = paddock.ActionKept
		if w.State != paddock.StateOrphaned && !dryRun {
			return f, m.update(ctx, func(tx paddock.Tx) error {
				return m.transition(ctx, tx, r, paddock.StateOrphaned, f.Issue)
			})
		}
		return f, nil
	}
	if dryRun {
		f.Action = paddock.ActionWouldClean
		return f, nil
	}
	f.Action = paddock.ActionCleaned
	p, err := m.Project(ctx, r.Project)
	if err != nil {
		return f, err
	}
	if w.State != paddock.StateCleanupPending && w.State != paddock.StateOrphaned && w.State != paddock.StateRejected {
		if err := m.update(ctx, func(tx paddock.Tx) error {
			return m.transition(ctx, tx, r, paddock.StateOrphaned, f.Issue)
		}); err != nil {
			return f, err
		}
	}
	return f, m.Runs.cleanup(ctx, r, p, f.Issue)
}

// recoverHarnesses gives back the harnesses a previous daemon left for runs
// that can run nothing more here (ended, retained, rejected, removed, or
// adopted by another node while this one was down: ws holds only this
// node's); the harnesses of this node's live runs stay, and their next
// command re-attaches (or Close gives them back).
func (m *Manager) recoverHarnesses(ctx context.Context, ws []*paddock.Workspace) []paddock.Finding {
	if m.Harnesses == nil {
		return nil
	}
	live := map[string]bool{}
	for _, w := range ws {
		switch w.State {
		case paddock.StateActive, paddock.StateReady, paddock.StateCheckpointed:
			live[w.RunID] = true
		}
	}
	var out []paddock.Finding
	for _, key := range m.Harnesses.Reap(func(key string) bool { return live[key] }) {
		out = append(out, paddock.Finding{RunID: key, Issue: "a resident sandbox outlived its run", Action: paddock.ActionCleaned})
		m.log().Info("harness released", "run", key)
	}
	return out
}

// probing says whether e is an overlay probe's directory
// (sandbox.ProbeOverlay, which runs in the workspaces directory) made
// within the last 10 minutes: one under way, not an orphan. An older one
// is a crash's leftover, cleaned as any other.
func probing(e os.DirEntry) bool {
	if !strings.HasPrefix(e.Name(), sandbox.OverlayProbePrefix) {
		return false
	}
	info, err := e.Info()
	return err == nil && time.Since(info.ModTime()) < 10*time.Minute
}
