package lifecycle_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/lifecycle"
)

// TestNodeUsesItsCloneOfTheProject: a node's copy of a project is a clone
// of it at the same path (another machine's): a daemon of its own refuses
// it (another .git than the one declared), a node checks it against the
// declared history and path and keeps its own fingerprint of it; a copy
// of another history at that path is refused either way.
func TestNodeUsesItsCloneOfTheProject(t *testing.T) {
	e := newEnv(t)
	e.project(t)
	ctx := context.Background()
	// This machine's copy: a clone of the declared repository, where it was.
	clone := filepath.Join(t.TempDir(), "clone")
	if out, err := exec.Command("git", "clone", "-q", e.repo, clone).CombinedOutput(); err != nil {
		t.Fatalf("git clone: %v\n%s", err, out)
	}
	if err := os.RemoveAll(e.repo); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(clone, e.repo); err != nil {
		t.Fatal(err)
	}
	if _, err := e.m.Runs.Create(ctx, paddock.CreateRunRequest{Project: "my-app", Kind: string(paddock.KindClone)}); !paddock.IsCode(err, paddock.CodeConflict) {
		t.Fatalf("a daemon of its own, on a clone of its project: %v", err)
	}
	e.shareCheckpoints()
	for i := range 2 { // the second create checks the fingerprint kept
		if _, err := e.m.Runs.Create(ctx, paddock.CreateRunRequest{Project: "my-app", Kind: string(paddock.KindClone)}); err != nil {
			t.Fatalf("create %d on a node whose copy is a clone: %v", i, err)
		}
	}
	if _, err := os.Stat(filepath.Join(e.state, "artifacts", "fingerprints", "my-app")); err != nil {
		t.Fatalf("the node's fingerprint is not kept: %v", err)
	}
	// Another history at the path: refused, kept fingerprint or not.
	other := filepath.Join(t.TempDir(), "other")
	for _, args := range [][]string{{"init", "-q", other}, {"-C", other, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", "other"}} {
		if out, err := exec.Command("git", args...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	os.RemoveAll(e.repo)
	if err := os.Rename(other, e.repo); err != nil {
		t.Fatal(err)
	}
	os.RemoveAll(filepath.Join(e.state, "artifacts", "fingerprints"))
	if _, err := e.m.Runs.Create(ctx, paddock.CreateRunRequest{Project: "my-app", Kind: string(paddock.KindClone)}); !paddock.IsCode(err, paddock.CodeConflict) {
		t.Fatalf("a node on another repository at the project's path: %v", err)
	}
}

// TestAdoptionKeepsItsCheckpoint: while an adoption writes the run's
// files, nothing stores a checkpoint of the half-restored run (the stored
// one is what a retry restores from); once it is done, the restored files
// are the checkpoint. A restart that finds an adoption's marker (a crash
// in the middle of one, whatever the workspace's state) gives the run back
// to the node it came from, adoptable again.
func TestAdoptionKeepsItsCheckpoint(t *testing.T) {
	lifecycle.SetCheckpointDelay(t, time.Millisecond)
	e := newEnv(t)
	// Closed first: its delayed checkpoints stop before the delay is put back.
	t.Cleanup(func() { e.m.Close(context.Background()) })
	e.project(t)
	ctx := context.Background()
	c := e.shareCheckpoints()
	r := e.create(t, paddock.KindClone, "")
	for i := range 20 {
		os.WriteFile(filepath.Join(r.Workspace.Root, fmt.Sprintf("f%02d.txt", i)), []byte(strings.Repeat("x", i+1)), 0o644)
	}
	lifecycle.StoreCheckpoint(ctx, e.m, r.ID, "test")
	want := c.hashes[len(c.hashes)-1:] // the run's last checkpoint (its first was its base, at create)
	before := len(c.hashes)
	os.RemoveAll(r.Workspace.Root) // its node is lost, and its disk with it
	if _, err := e.m.Nodes.Adopt(ctx, r.ID, "test"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond) // the checkpoint the adoption schedules
	c.mu.Lock()
	for _, h := range c.hashes[before:] {
		if h != want[0] {
			t.Fatalf("a checkpoint of another change set was stored during or after the adoption: %v, want only %s", c.hashes, want[0])
		}
	}
	c.mu.Unlock()

	// A crash in the middle of an adoption: the run is here, ready, its
	// marker left. The restart gives it back as the marker says.
	if err := lifecycle.AdoptionMarker(e.m, r.ID, "na", "/elsewhere/"+r.ID, paddock.StateActive); err != nil {
		t.Fatal(err)
	}
	found, err := e.m.Recover(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var gave bool
	for _, f := range found {
		gave = gave || (f.RunID == r.ID && f.Action == "given back")
	}
	got, _ := e.m.Run(ctx, r.ID)
	if !gave || got.Workspace.Root != "/elsewhere/"+r.ID || got.State() != paddock.StateActive {
		t.Fatalf("after a restart: %+v; the run is %s at %s", found, got.State(), got.Workspace.Root)
	}
	if _, err := os.Stat(filepath.Join(e.state, "workspaces", r.ID)); !os.IsNotExist(err) {
		t.Fatalf("the half-made workspace is still here: %v", err)
	}
}

// TestDeclaringNodeKeepsItsCheck: on the node that declared a project, a
// .git replaced later (a clone at the same path) is refused, as on a
// daemon of its own: the declared fingerprint is that node's own.
func TestDeclaringNodeKeepsItsCheck(t *testing.T) {
	e := newEnv(t)
	e.shareCheckpoints()
	e.project(t)
	clone := filepath.Join(t.TempDir(), "clone")
	if out, err := exec.Command("git", "clone", "-q", e.repo, clone).CombinedOutput(); err != nil {
		t.Fatalf("git clone: %v\n%s", err, out)
	}
	os.RemoveAll(e.repo)
	if err := os.Rename(clone, e.repo); err != nil {
		t.Fatal(err)
	}
	if _, err := e.m.Runs.Create(context.Background(), paddock.CreateRunRequest{Project: "my-app", Kind: string(paddock.KindClone)}); !paddock.IsCode(err, paddock.CodeConflict) {
		t.Fatalf("the declaring node, its project's .git replaced: %v", err)
	}
}

// TestCreatedRunsCheckpointIsItsBase: with nodes, a run's first checkpoint,
// stored when it is made without computing its change set, is the change
// set its workspace has then (empty), by hash.
func TestCreatedRunsCheckpointIsItsBase(t *testing.T) {
	e := newEnv(t)
	e.project(t)
	c := e.shareCheckpoints()
	r := e.create(t, paddock.KindClone, "")
	cs, err := e.m.Changes.ChangeSet(context.Background(), r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.hashes) != 1 || c.hashes[0] != cs.Hash {
		t.Fatalf("stored at create %v, the run's change set %s", c.hashes, cs.Hash)
	}
}

// TestCheckpointDueWaitsForTheStore: a checkpoint that comes due while
// the shared store cannot be reached is tried again until it is stored
// (found by bench/soak: it was dropped, and the run's files written since
// its last checkpoint were lost at a later adoption, although its node
// lived on with the store back).
func TestCheckpointDueWaitsForTheStore(t *testing.T) {
	lifecycle.SetCheckpointDelay(t, time.Millisecond)
	e, f, _ := faultyEnv(t)
	c := e.shareCheckpoints()
	ctx := context.Background()
	r := e.create(t, paddock.KindClone, "")
	lifecycle.StoreCheckpoint(ctx, e.m, r.ID, "test")
	os.WriteFile(filepath.Join(r.Workspace.Root, "due.txt"), []byte("x\n"), 0o644)
	c.mu.Lock()
	before := c.saves
	c.mu.Unlock()
	var failed atomic.Int32
	away := &paddock.Error{Code: paddock.CodeInternal, Message: "node na cannot reach the shared store",
		Err: fmt.Errorf("%w: dial tcp: connection refused", paddock.ErrStoreUnreachable)}
	f.set(func(s *faultStore) {
		s.run = func(id string) error {
			if id == r.ID && failed.Add(1) <= 3 {
				return away
			}
			return nil
		}
	})
	lifecycle.CheckpointSoon(e.m, r.ID)
	deadline := time.Now().Add(15 * time.Second)
	for {
		c.mu.Lock()
		saves := c.saves
		c.mu.Unlock()
		if saves > before {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no checkpoint stored 15 s after the store came back (%d reads refused)", failed.Load())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if failed.Load() < 4 {
		t.Fatalf("the checkpoint was stored after %d refused reads, want 3 refused first", failed.Load())
	}
}
