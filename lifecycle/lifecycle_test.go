package lifecycle_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/gitx"
	"github.com/paddock-dev/paddock/gitx/gittest"
	"github.com/paddock-dev/paddock/lifecycle"
	"github.com/paddock-dev/paddock/sandbox"
	"github.com/paddock-dev/paddock/sqlite"
	"github.com/paddock-dev/paddock/workspace"
)

type env struct {
	m     *lifecycle.Manager
	repo  string
	state string
	db    string
}

func newEnv(t testing.TB) *env {
	t.Helper()
	ctx := context.Background()
	g, err := gitx.New(ctx)
	if err != nil {
		t.Skipf("git unavailable: %v", err)
	}
	base := t.TempDir()
	e := &env{state: filepath.Join(base, "state"), db: filepath.Join(base, "state", "state.db")}
	e.repo = gittest.NewRepo(t, filepath.Join(base, "src", "my app"), map[string]string{
		"README.md": "hello\n", "cmd/main.go": "package main\n", "docs/ü.txt": "unicode\n",
	})
	os.Symlink("README.md", filepath.Join(e.repo, "link"))
	os.WriteFile(filepath.Join(e.repo, "run.sh"), []byte("#!/bin/sh\n"), 0o755)
	gittest.Commit(t, e.repo, "more", nil)
	e.open(t, g)
	return e
}

func (e *env) open(t testing.TB, g *gitx.Git) {
	t.Helper()
	if g == nil {
		g = e.m.Git
	}
	wsDir := filepath.Join(e.state, "workspaces")
	os.MkdirAll(wsDir, 0o700)
	s, err := sqlite.Open(context.Background(), e.db)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	e.m, err = lifecycle.NewManager(context.Background(), lifecycle.Config{Store: s, Git: g,
		Providers: workspace.Providers(g, wsDir), WorkspacesDir: wsDir, ArtifactsDir: filepath.Join(e.state, "artifacts")})
	if err != nil {
		t.Fatal(err)
	}
}

// reopen simulates a daemon restart on the same state.
func (e *env) reopen(t *testing.T) []paddock.Finding {
	t.Helper()
	e.m.Store.Close()
	e.open(t, nil)
	f, err := e.m.Recover(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func (e *env) project(t testing.TB) *paddock.Project {
	t.Helper()
	p, err := e.m.Projects.AddProject(context.Background(), paddock.AddProjectRequest{Path: e.repo})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func (e *env) create(t *testing.T, kind paddock.WorkspaceKind, policy string) *paddock.Run {
	t.Helper()
	req := paddock.CreateRunRequest{Project: "my-app", Kind: string(kind), CleanupPolicy: policy}
	if kind == paddock.KindOperatorDir {
		req.Dir = handOver(t)
	}
	r, err := e.m.Runs.Create(context.Background(), req)
	if err != nil {
		t.Fatalf("create %s: %v", kind, err)
	}
	if r.State() != paddock.StateReady {
		t.Fatalf("created run is %s", r.State())
	}
	return r
}

// handOver makes a directory an operator hands to an operator_dir run: a
// copy of the project's README, outside the project.
func handOver(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "handed")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "README.md"), []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func mustCode(t *testing.T, err error, code paddock.Code) {
	t.Helper()
	if !paddock.IsCode(err, code) {
		t.Fatalf("error = %v, want %s", err, code)
	}
}

func states(t *testing.T, m *lifecycle.Manager, id string) []string {
	t.Helper()
	evs, err := m.Runs.Events(context.Background(), id, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for i, e := range evs {
		if e.Seq != int64(i+1) {
			t.Fatalf("event %d has seq %d", i, e.Seq)
		}
		if e.Type == paddock.TransitionEvent {
			var d paddock.TransitionData
			json.Unmarshal(e.Data, &d)
			out = append(out, string(d.To))
		}
	}
	return out
}

// TestRejectLeavesProjectByteIdentical is the rejection invariant for every kind.
func TestRejectLeavesProjectByteIdentical(t *testing.T) {
	t.Parallel()
	// The kinds whose workspace is a host directory; overlay is in TestOverlayRun.
	for _, kind := range []paddock.WorkspaceKind{paddock.KindClone, paddock.KindWorktree, paddock.KindOperatorDir} {
		t.Run(string(kind), func(t *testing.T) {
			e := newEnv(t)
			ctx := context.Background()
			e.project(t)
			before, lines := gittest.TreeDigest(t, e.repo)
			r := e.create(t, kind, "")
			w := r.Workspace
			if b, err := os.ReadFile(filepath.Join(w.Root, "README.md")); err != nil || string(b) != "hello\n" {
				t.Fatalf("workspace README: %q, %v", b, err)
			}
			if kind == paddock.KindWorktree {
				if _, err := os.Stat(filepath.Join(e.repo, ".git", "worktrees", r.ID)); err != nil {
					t.Fatalf("worktree metadata missing: %v", err)
				}
			}
			// The agent's work, in every kind: edits, new files, a
			// directory it made read-only.
			os.WriteFile(filepath.Join(w.Root, "README.md"), []byte("changed\n"), 0o644)
			os.WriteFile(filepath.Join(w.Root, "new.txt"), []byte("new\n"), 0o644)
			os.MkdirAll(filepath.Join(w.Root, "ro"), 0o755)
			os.WriteFile(filepath.Join(w.Root, "ro", "f"), nil, 0o644)
			os.Chmod(filepath.Join(w.Root, "ro"), 0o500)
			t.Cleanup(func() { os.Chmod(filepath.Join(w.Root, "ro"), 0o755) })
			if kind == paddock.KindClone {
				// A clone has its own .git: commits and branches stay in it.
				// (A worktree shares the project's object store, so a commit
				// there writes objects into the project; the sandbox keeps
				// the project's .git read-only for that reason.)
				gittest.Git(t, w.Root, "add", "-A")
				gittest.Git(t, w.Root, "commit", "-qm", "agent")
				gittest.Git(t, w.Root, "branch", "agent-branch")
				gittest.Git(t, w.Root, "config", "user.name", "agent")
			}
			if _, err := e.m.Runs.Reject(ctx, r.ID); err != nil {
				t.Fatal(err)
			}
			r, err := e.m.Runs.Remove(ctx, r.ID)
			if err != nil {
				t.Fatal(err)
			}
			if r.State() != paddock.StateCleaned || r.RemovedAt.IsZero() {
				t.Fatalf("after rm: %s", r.State())
			}
			if kind != paddock.KindOperatorDir {
				if _, err := os.Stat(w.Root); !os.IsNotExist(err) {
					t.Fatalf("workspace still on disk: %v", err)
				}
			} else if b, err := os.ReadFile(filepath.Join(w.Root, "new.txt")); err != nil || string(b) != "new\n" {
				// The directory is the operator's: paddock leaves it as the run left it.
				t.Fatalf("the handed-over directory lost the run's work: %q, %v", b, err)
			}
			gittest.RequireIdentical(t, e.repo, before, lines)
			want := []string{"preparing", "ready", "rejected", "cleanup_pending", "cleaned"}
			if got := states(t, e.m, r.ID); !slices.Equal(got, want) {
				t.Fatalf("transitions %v, want %v", got, want)
			}
		})
	}
}

func TestRetainedIsAHardStop(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	e.project(t)
	r := e.create(t, paddock.KindWorktree, "")
	if _, err := e.m.Runs.Retain(ctx, r.ID); err != nil {
		t.Fatal(err)
	}
	root := r.Workspace.Root
	_, err := e.m.Runs.Remove(ctx, r.ID)
	mustCode(t, err, paddock.CodeConflict)
	_, err = e.m.Runs.Reject(ctx, r.ID)
	mustCode(t, err, paddock.CodeConflict)
	if _, err := e.m.GC(ctx, false); err != nil {
		t.Fatal(err)
	}
	e.reopen(t) // a crash and restart
	if _, err := e.m.GC(ctx, false); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "README.md")); err != nil {
		t.Fatalf("retained workspace was touched: %v", err)
	}
	got, _ := e.m.Run(ctx, r.ID)
	if got.State() != paddock.StateRetained {
		t.Fatalf("state = %s", got.State())
	}

	// Even with its record gone (a lost database), the marker keeps gc away.
	os.Remove(e.db)
	os.Remove(e.db + "-wal")
	os.Remove(e.db + "-shm")
	e.reopen(t)
	f, err := e.m.GC(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	// The workspace and the run's aux directory (its home) both stay.
	if len(f) != 2 || f[0].Action != paddock.ActionKept || f[1].Action != paddock.ActionKept {
		t.Fatalf("gc findings = %+v", f)
	}
	if _, err := os.Stat(filepath.Join(root, "README.md")); err != nil {
		t.Fatalf("retained workspace deleted after losing its record: %v", err)
	}
}

func TestRetainedDirectoryGoneIsOrphanedNotCleaned(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	e.project(t)
	r := e.create(t, paddock.KindClone, "")
	e.m.Runs.Retain(ctx, r.ID)
	os.RemoveAll(r.Workspace.Root)
	f, err := e.m.GC(ctx, false)
	if err != nil || len(f) != 1 || f[0].Action != paddock.ActionKept {
		t.Fatalf("gc = %+v, %v", f, err)
	}
	got, _ := e.m.Run(ctx, r.ID)
	if got.State() != paddock.StateOrphaned {
		t.Fatalf("state = %s", got.State())
	}
	_, err = e.m.Runs.Remove(ctx, r.ID)
	mustCode(t, err, paddock.CodeConflict)
}

func TestCleanupPolicies(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	e.project(t)
	manual := e.create(t, paddock.KindClone, "manual")
	r, err := e.m.Runs.Reject(ctx, manual.ID)
	if err != nil || r.State() != paddock.StateRejected {
		t.Fatalf("reject manual: %v %v", r, err)
	}
	if _, err := os.Stat(manual.Workspace.Root); err != nil {
		t.Fatal("manual policy removed files on reject")
	}
	f, _ := e.m.GC(ctx, true)
	if len(f) != 1 || f[0].Action != paddock.ActionWouldClean {
		t.Fatalf("dry run = %+v", f)
	}
	if _, err := os.Stat(manual.Workspace.Root); err != nil {
		t.Fatal("dry run deleted")
	}
	f, _ = e.m.GC(ctx, false)
	if len(f) != 1 || f[0].Action != paddock.ActionCleaned {
		t.Fatalf("gc = %+v", f)
	}
	if _, err := os.Stat(manual.Workspace.Root); !os.IsNotExist(err) {
		t.Fatal("gc left a rejected manual workspace")
	}
	_, err = e.m.Runs.Create(ctx, paddock.CreateRunRequest{Project: "my-app", CleanupPolicy: "never"})
	mustCode(t, err, paddock.CodeBadRequest)
}

func TestBadInputChangesNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	p := e.project(t)
	cases := []struct {
		name string
		o    paddock.CreateRunRequest
		code paddock.Code
	}{
		{"unknown project", paddock.CreateRunRequest{Project: "nope"}, paddock.CodeNotFound},
		{"unknown ref", paddock.CreateRunRequest{Project: p.Name, Base: "no-such-branch"}, paddock.CodeBadRequest},
		{"option ref", paddock.CreateRunRequest{Project: p.Name, Base: "--upload-pack=evil"}, paddock.CodeBadRequest},
		{"unknown kind", paddock.CreateRunRequest{Project: p.Name, Kind: "vm"}, paddock.CodeBadRequest},
		{"dir without operator_dir", paddock.CreateRunRequest{Project: p.Name, Dir: "/tmp"}, paddock.CodeBadRequest},
		{"missing operator dir", paddock.CreateRunRequest{Project: p.Name, Kind: "operator_dir", Dir: "/nonexistent/x"}, paddock.CodeBadRequest},
	}
	for _, tc := range cases {
		_, err := e.m.Runs.Create(ctx, tc.o)
		if !paddock.IsCode(err, tc.code) {
			t.Errorf("%s: %v, want %s", tc.name, err, tc.code)
		}
	}
	_, err := e.m.Projects.AddProject(ctx, paddock.AddProjectRequest{Path: e.repo, Name: "other"})
	mustCode(t, err, paddock.CodeConflict) // same root twice
	_, err = e.m.Projects.AddProject(ctx, paddock.AddProjectRequest{Path: e.repo, Name: "my app"})
	mustCode(t, err, paddock.CodeBadRequest)
	_, err = e.m.Projects.AddProject(ctx, paddock.AddProjectRequest{Path: e.repo, Name: "prüfung"})
	mustCode(t, err, paddock.CodeBadRequest)
	_, err = e.m.Projects.AddProject(ctx, paddock.AddProjectRequest{Path: "relative/path"})
	mustCode(t, err, paddock.CodeBadRequest)
	runs, _ := e.m.Runs.Runs(ctx, paddock.RunFilter{Removed: true})
	if len(runs) != 0 {
		t.Fatalf("bad input made runs: %v", runs)
	}
	if entries, _ := os.ReadDir(e.m.WorkspacesDir); len(entries) != 0 {
		t.Fatalf("bad input left %v in the workspaces directory", entries)
	}
}

func TestProjectReplacedIsNoticed(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	e.project(t)
	os.RemoveAll(e.repo)
	gittest.NewRepo(t, e.repo, map[string]string{"other": "repo"})
	_, err := e.m.Runs.Create(ctx, paddock.CreateRunRequest{Project: "my-app"})
	mustCode(t, err, paddock.CodeConflict)
}

func TestOperatorDirHoldsLock(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	e.project(t)
	r := e.create(t, paddock.KindOperatorDir, "")
	if r.Workspace.Root == e.repo {
		t.Fatalf("operator dir root = %s, the project's checkout", r.Workspace.Root)
	}
	_, err := e.m.Runs.Create(ctx, paddock.CreateRunRequest{Project: "my-app", Kind: "operator_dir", Dir: handOver(t)})
	mustCode(t, err, paddock.CodeBusy)
	// Clones do not need the lock.
	e.create(t, paddock.KindClone, "")
	_, err = e.m.Projects.Unlock(ctx, "my-app", "alice", false)
	mustCode(t, err, paddock.CodeBadRequest)
	l, err := e.m.Projects.Unlock(ctx, "my-app", "alice", true)
	if err != nil || l == nil || l.RunID != r.ID {
		t.Fatalf("unlock = %+v, %v", l, err)
	}
	evs, _ := e.m.Runs.Events(ctx, r.ID, 0, 0)
	last := evs[len(evs)-1]
	if last.Type != paddock.EventLockForceRelease || !json.Valid(last.Data) || string(last.Data) != `{"by":"alice","project":"my-app"}` {
		t.Fatalf("last event = %s %s", last.Type, last.Data)
	}
	r2 := e.create(t, paddock.KindOperatorDir, "")
	// Leaving the live states releases the lock.
	if _, err := e.m.Runs.Reject(ctx, r2.ID); err != nil {
		t.Fatal(err)
	}
	p, _ := e.m.Project(ctx, "my-app")
	if p.Lock != nil {
		t.Fatalf("lock still held: %+v", p.Lock)
	}
	if _, err := os.Stat(filepath.Join(r2.Workspace.Root, "README.md")); err != nil {
		t.Fatal("rejecting an operator_dir run deleted the operator's files")
	}
}

// TestOperatorDirIsNeverTheCheckout: the directory handed to an operator_dir
// run is the operator's own, never the project's active checkout however it
// is named (record 002: the active checkout is never an agent scratchpad).
func TestOperatorDirIsNeverTheCheckout(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	e.project(t)
	links := t.TempDir()
	os.Symlink(e.repo, filepath.Join(links, "to-root"))
	os.Symlink(filepath.Join(e.repo, "cmd"), filepath.Join(links, "to-sub"))
	os.Symlink(filepath.Dir(e.repo), filepath.Join(links, "to-parent"))
	for name, dir := range map[string]string{
		"default":         "",
		"root":            e.repo,
		"root with slash": e.repo + "/",
		"root dotted":     filepath.Join(e.repo, "cmd") + "/..",
		"inside":          filepath.Join(e.repo, "cmd"),
		"git directory":   filepath.Join(e.repo, ".git"),
		"inside .git":     filepath.Join(e.repo, ".git", "refs"),
		"parent":          filepath.Dir(e.repo),
		"filesystem root": "/",
		"link to root":    filepath.Join(links, "to-root"),
		"link inside":     filepath.Join(links, "to-sub"),
		"link to parent":  filepath.Join(links, "to-parent"),
		"relative":        "handed",
	} {
		t.Run(name, func(t *testing.T) {
			_, err := e.m.Runs.Create(ctx, paddock.CreateRunRequest{Project: "my-app", Kind: "operator_dir", Dir: dir})
			mustCode(t, err, paddock.CodeBadRequest)
			if name != "relative" && !strings.Contains(err.Error(), "checkout") && !strings.Contains(err.Error(), "git directory") {
				t.Fatalf("error does not say why: %v", err)
			}
		})
	}
	if p, _ := e.m.Project(ctx, "my-app"); p.Lock != nil {
		t.Fatalf("a refused create holds the lock: %+v", p.Lock)
	}
	// A bind mount shows the checkout under another name: the same directory.
	mnt := t.TempDir()
	if err := syscall.Mount(e.repo, mnt, "", syscall.MS_BIND, ""); err != nil {
		t.Logf("bind mount case skipped: %v (needs root)", err)
		return
	}
	defer syscall.Unmount(mnt, syscall.MNT_DETACH)
	_, err := e.m.Runs.Create(ctx, paddock.CreateRunRequest{Project: "my-app", Kind: "operator_dir", Dir: filepath.Join(mnt, "cmd")})
	mustCode(t, err, paddock.CodeBadRequest)
}

func TestCheckpointResumeAndRestart(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	e.project(t)
	r := e.create(t, paddock.KindClone, "")
	res, err := e.m.Runs.Resume(ctx, r.ID)
	if err != nil || res.Run.State() != paddock.StateActive || res.Drift {
		t.Fatalf("resume = %+v, %v", res, err)
	}
	// A restart while active checkpoints the workspace.
	f := e.reopen(t)
	if len(f) != 1 || f[0].Action != paddock.ActionCheckpointed {
		t.Fatalf("recovery = %+v", f)
	}
	got, _ := e.m.Run(ctx, r.ID)
	if got.State() != paddock.StateCheckpointed || got.Workspace.Checkpoint == nil || got.Workspace.Checkpoint.Reason != "daemon restart" {
		t.Fatalf("after restart: %+v", got.Workspace)
	}
	// Drift while checkpointed is noticed on resume.
	os.WriteFile(filepath.Join(r.Workspace.Root, "README.md"), []byte("tampered\n"), 0o644)
	res, err = e.m.Runs.Resume(ctx, r.ID)
	if err != nil || !res.Drift {
		t.Fatalf("resume after drift = %+v, %v", res, err)
	}
	if _, err := e.m.Runs.Checkpoint(ctx, r.ID, "operator"); err != nil {
		t.Fatal(err)
	}
	res, _ = e.m.Runs.Resume(ctx, r.ID)
	if res.Drift {
		t.Fatal("drift reported with nothing changed")
	}
	if err := e.m.Close(ctx); err != nil {
		t.Fatal(err)
	}
	got, _ = e.m.Run(ctx, r.ID)
	if got.State() != paddock.StateCheckpointed || got.Workspace.Checkpoint.Reason != "daemon shutdown" {
		t.Fatalf("after shutdown: %s", got.State())
	}
	_, err = e.m.Runs.Remove(ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	_, err = e.m.Runs.Resume(ctx, r.ID)
	mustCode(t, err, paddock.CodeConflict)
}

// TestCrashWhilePreparing plays a daemon killed in the middle of making a
// workspace: the record says preparing and a partial directory is on disk.
func TestCrashWhilePreparing(t *testing.T) {
	t.Parallel()
	for _, kind := range []paddock.WorkspaceKind{paddock.KindClone, paddock.KindWorktree} {
		t.Run(string(kind), func(t *testing.T) {
			e := newEnv(t)
			ctx := context.Background()
			e.project(t)
			before, lines := gittest.TreeDigest(t, e.repo)
			r := e.create(t, kind, "")
			// Rewind the record to preparing, as if the daemon died before marking it ready.
			err := e.m.Store.Update(ctx, func(tx paddock.Tx) error {
				got, _ := tx.Run(ctx, r.ID)
				got.Workspace.State = paddock.StatePreparing
				return tx.UpdateWorkspace(ctx, got.Workspace)
			})
			if err != nil {
				t.Fatal(err)
			}
			f := e.reopen(t)
			if len(f) != 1 || f[0].Action != paddock.ActionRolledBack {
				t.Fatalf("recovery = %+v", f)
			}
			if _, err := os.Stat(r.Workspace.Root); !os.IsNotExist(err) {
				t.Fatalf("half-made workspace left: %v", err)
			}
			got, _ := e.m.Run(ctx, r.ID)
			if got.State() != paddock.StateCleaned {
				t.Fatalf("state = %s", got.State())
			}
			gittest.RequireIdentical(t, e.repo, before, lines)
		})
	}
}

func TestOrphans(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	e.project(t)
	before, lines := gittest.TreeDigest(t, e.repo)
	gone := e.create(t, paddock.KindWorktree, "")
	os.RemoveAll(gone.Workspace.Root) // a record with no directory
	stray := filepath.Join(e.m.WorkspacesDir, "r-stray")
	os.MkdirAll(filepath.Join(stray, "sub"), 0o755) // a directory with no record
	f := e.reopen(t)
	if len(f) != 1 || f[0].Action != paddock.ActionMarked {
		t.Fatalf("recovery = %+v", f)
	}
	found, err := e.m.GC(ctx, true)
	if err != nil || len(found) != 2 {
		t.Fatalf("dry run = %+v, %v", found, err)
	}
	found, err = e.m.GC(ctx, false)
	if err != nil || len(found) != 2 || found[0].Action != paddock.ActionCleaned || found[1].Action != paddock.ActionCleaned {
		t.Fatalf("gc = %+v, %v", found, err)
	}
	if _, err := os.Stat(stray); !os.IsNotExist(err) {
		t.Fatal("stray directory left")
	}
	gittest.RequireIdentical(t, e.repo, before, lines) // the worktree's metadata is gone too
	got, _ := e.m.Run(ctx, gone.ID)
	want := []string{"preparing", "ready", "orphaned", "cleanup_pending", "cleaned"}
	if got.State() != paddock.StateCleaned || !slices.Equal(states(t, e.m, gone.ID), want) {
		t.Fatalf("transitions %v", states(t, e.m, gone.ID))
	}
	if f, _ := e.m.GC(ctx, false); len(f) != 0 {
		t.Fatalf("second gc found %+v", f)
	}
}

func TestRemoveProject(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	e.project(t)
	r := e.create(t, paddock.KindClone, "")
	mustCode(t, e.m.Projects.RemoveProject(ctx, "my-app"), paddock.CodeConflict)
	e.m.Runs.Remove(ctx, r.ID)
	if err := e.m.Projects.RemoveProject(ctx, "my-app"); err != nil {
		t.Fatal(err)
	}
	mustCode(t, e.m.Projects.RemoveProject(ctx, "my-app"), paddock.CodeNotFound)
	if _, err := os.Stat(filepath.Join(e.repo, "README.md")); err != nil {
		t.Fatal("project files touched")
	}
}

func TestWaitEvents(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	e.project(t)
	r := e.create(t, paddock.KindClone, "")
	last := r.LastSeq
	got := make(chan []*paddock.Event, 1)
	go func() {
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		evs, _ := e.m.Runs.WaitEvents(wctx, r.ID, last, 0)
		got <- evs
	}()
	time.Sleep(50 * time.Millisecond)
	e.m.Runs.Retain(ctx, r.ID)
	evs := <-got
	if len(evs) == 0 || evs[0].Seq != last+1 {
		t.Fatalf("waited events = %v", evs)
	}
	wctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	evs, err := e.m.Runs.WaitEvents(wctx, r.ID, last+100, 0)
	if err != nil || len(evs) != 0 {
		t.Fatalf("timeout wait = %v, %v", evs, err)
	}
}

// TestCrashWhileCleaning plays a daemon killed after it marked a workspace
// cleanup_pending but before the files were gone.
func TestCrashWhileCleaning(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	e.project(t)
	before, lines := gittest.TreeDigest(t, e.repo)
	r := e.create(t, paddock.KindWorktree, "manual")
	if _, err := e.m.Runs.Reject(ctx, r.ID); err != nil {
		t.Fatal(err)
	}
	err := e.m.Store.Update(ctx, func(tx paddock.Tx) error {
		got, _ := tx.Run(ctx, r.ID)
		return paddock.Transition(ctx, tx, got.Workspace, paddock.StateCleanupPending, "removed")
	})
	if err != nil {
		t.Fatal(err)
	}
	f := e.reopen(t)
	if len(f) != 1 || f[0].Action != paddock.ActionCleaned {
		t.Fatalf("recovery = %+v", f)
	}
	if _, err := os.Stat(r.Workspace.Root); !os.IsNotExist(err) {
		t.Fatal("files left")
	}
	gittest.RequireIdentical(t, e.repo, before, lines)
}

// TestGCLeavesAProbeUnderWay: the overlay probe makes its layers in the
// workspaces directory; gc takes one made in the last minutes for a probe
// under way, not an orphan (killing its command would make overlay
// workspaces look unsupported until a restart), and cleans an older one,
// a crash's leftover.
func TestGCLeavesAProbeUnderWay(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	fresh := filepath.Join(e.m.WorkspacesDir, sandbox.OverlayProbePrefix+"fresh")
	old := filepath.Join(e.m.WorkspacesDir, sandbox.OverlayProbePrefix+"old")
	for _, d := range []string{fresh, old} {
		if err := os.MkdirAll(filepath.Join(d, "ws", "upper"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	long := time.Now().Add(-time.Hour)
	os.Chtimes(old, long, long)
	found, err := e.m.GC(ctx, false)
	if err != nil || len(found) != 1 || found[0].Path != old || found[0].Action != paddock.ActionCleaned {
		t.Fatalf("gc = %+v, %v", found, err)
	}
	if _, err := os.Stat(fresh); err != nil {
		t.Fatalf("gc removed a probe under way: %v", err)
	}
}
