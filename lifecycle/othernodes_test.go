package lifecycle_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/gitx"
	"github.com/paddock-dev/paddock/gitx/gittest"
	"github.com/paddock-dev/paddock/lifecycle"
	"github.com/paddock-dev/paddock/postgres"
	"github.com/paddock-dev/paddock/postgres/pgtest"
	"github.com/paddock-dev/paddock/workspace"
)

// nodeEnvs makes two Managers on one PostgreSQL database, each joined as a
// node with a state directory of its own, on one project: two paddock
// daemons of one cluster on this machine, as TestClusterOfThree runs them.
func nodeEnvs(t *testing.T) (a, b *env, sa, sb *postgres.Store) {
	t.Helper()
	ctx := context.Background()
	g, err := gitx.New(ctx)
	if err != nil {
		t.Skipf("git unavailable: %v", err)
	}
	base := t.TempDir()
	dsn := pgtest.Need(t).Database(t, base)
	repo := gittest.NewRepo(t, filepath.Join(base, "src", "my app"), map[string]string{"README.md": "hello\n"})
	mk := func(id string) (*env, *postgres.Store) {
		e := &env{state: filepath.Join(base, id, "state"), repo: repo}
		wsDir := filepath.Join(e.state, "workspaces")
		os.MkdirAll(wsDir, 0o700)
		s, err := postgres.Open(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		if _, err := s.Join(ctx, postgres.NodeConfig{ID: id, Home: id, Address: "http://127.0.0.1:1", Capacity: 8, Lease: 30 * time.Second}); err != nil {
			t.Fatal(err)
		}
		e.m, err = lifecycle.NewManager(ctx, lifecycle.Config{Store: s, Cluster: s, Git: g,
			Providers: workspace.Providers(g, wsDir), WorkspacesDir: wsDir, ArtifactsDir: filepath.Join(e.state, "artifacts")})
		if err != nil {
			t.Fatal(err)
		}
		return e, s
	}
	a, sa = mk("na")
	b, sb = mk("nb")
	a.project(t)
	return a, b, sa, sb
}

// TestMovingReviewsLeavesOtherNodesRuns: a coder run and its review run
// are on node na; na stops and the coder is adopted on nb, where it
// submits again. Moving the reviews to the new change set rejects the
// older review, which is still na's: nb rejects it in the shared store and
// starts its cleanup (cleanup_pending); only the workspace provider's
// direct-child check keeps nb from removing na's directory (on this
// machine, na's files), and na, restarting, finds the run cleanup_pending
// and finishes the removal itself. A node must not act on another node's
// run: moving reviews leaves the others' alone (or asks their node).
func TestMovingReviewsLeavesOtherNodesRuns(t *testing.T) {
	a, b, sa, _ := nodeEnvs(t)
	ctx := context.Background()
	coder := a.create(t, paddock.KindClone, "")
	if _, err := a.m.Broker.CallTool(ctx, coder.ID, "write", json.RawMessage(`{"path":"feature.txt","content":"first try\n"}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := a.m.Changes.Submit(ctx, coder.ID); err != nil {
		t.Fatal(err)
	}
	rv, err := a.m.Reviews.Review(ctx, coder.ID, "")
	if err != nil {
		t.Fatal(err)
	}
	if rv.Node != "na" {
		t.Fatalf("the review run is on %q", rv.Node)
	}
	lifecycle.StoreCheckpoint(ctx, a.m, coder.ID, "job end")
	if err := sa.Leave(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := b.m.Nodes.Adopt(ctx, coder.ID, "test"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.m.Broker.CallTool(ctx, coder.ID, "write", json.RawMessage(`{"path":"feature.txt","content":"second try\n"}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := b.m.Changes.Submit(ctx, coder.ID); err != nil {
		t.Fatal(err)
	}
	old, err := b.m.Run(ctx, rv.ID)
	if err != nil {
		t.Fatal(err)
	}
	_, statErr := os.Stat(rv.Workspace.Root)
	if old.Node != "na" || old.State() != paddock.StateReady || statErr != nil {
		t.Fatalf("node nb acted on na's review run %s: it is on %q, %s; its workspace on na: %v", rv.ID, old.Node, old.State(), statErr)
	}
}

// TestGCLeavesOtherNodesRuns: gc on node nb judges every run of the shared
// store against its own disk: a run of na's, whose workspace is on na's
// disk (here: not where nb looks), is found "missing", marked orphaned
// and cleaned, from nb, while na works in it. A node's gc must judge its
// own runs only.
func TestGCLeavesOtherNodesRuns(t *testing.T) {
	a, b, _, _ := nodeEnvs(t)
	ctx := context.Background()
	r := a.create(t, paddock.KindClone, "")
	// na's disk, which nb does not see.
	away := r.Workspace.Root + ".on-na"
	if err := os.Rename(r.Workspace.Root, away); err != nil {
		t.Fatal(err)
	}
	found, err := b.m.GC(ctx, false)
	os.Rename(away, r.Workspace.Root)
	if err != nil {
		t.Fatal(err)
	}
	got, err := a.m.Run(ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range found {
		if f.RunID == r.ID {
			t.Errorf("nb's gc: %+v", f)
		}
	}
	if got.State() != paddock.StateReady {
		t.Fatalf("na's run is %s after nb's gc", got.State())
	}
}
