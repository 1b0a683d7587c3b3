package lifecycle_test

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/gitx"
	"github.com/paddock-dev/paddock/lifecycle"
)

// shared stands for the shared store's cluster side (package postgres) on
// top of the test's own store: checkpoints kept in memory, and a take that
// runs fn in one of the store's transactions.
type shared struct {
	store  paddock.Store
	mu     sync.Mutex
	cps    map[string]paddock.RunCheckpoint
	saves  int
	hashes []string // every checkpoint saved, in order
}

// shareCheckpoints makes e's Manager a node whose checkpoints go to a
// shared store held in memory, and returns it.
func (e *env) shareCheckpoints() *shared {
	c := &shared{store: e.m.Store, cps: map[string]paddock.RunCheckpoint{}}
	e.m.Cluster = c
	return c
}

func (c *shared) Self() paddock.Node {
	return paddock.Node{ID: "nb", Epoch: 2, State: paddock.NodeAlive}
}
func (c *shared) SaveCheckpoint(ctx context.Context, cp *paddock.RunCheckpoint) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.saves++
	c.hashes = append(c.hashes, cp.Hash)
	cp.Node = "nb"
	c.cps[cp.RunID] = *cp
	return nil
}
func (c *shared) LoadCheckpoint(ctx context.Context, id string) (*paddock.RunCheckpoint, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	cp, ok := c.cps[id]
	if !ok {
		return nil, paddock.Errorf(paddock.CodeNotFound, "run %s has no checkpoint", id)
	}
	return &cp, nil
}
func (c *shared) TakeRun(ctx context.Context, id string, fn func(paddock.Tx) error) (string, error) {
	return "na", c.store.Update(ctx, fn)
}
func (c *shared) Nodes(ctx context.Context) ([]paddock.Node, error) { return nil, nil }
func (c *shared) ReleaseRun(ctx context.Context, id, to string, fn func(paddock.Tx) error) error {
	return c.store.Update(ctx, fn)
}

// TestFailedAdoptionCanBeRetried: a run of a lost node with a checkpoint
// is adopted, and the adoption fails on a step of this node's (its
// workspace cannot be made: a full disk, a path in the way). fail cleaned
// the run up, so it is cleaned for good: its checkpoint is still in the
// shared store, but Adopt takes only a live run, on this node or any
// other. One failed attempt lost the run's work, which the issue's
// adoption promises never to lose silently. A failed adoption must leave
// the run adoptable again.
func TestFailedAdoptionCanBeRetried(t *testing.T) {
	e := newEnv(t)
	e.project(t)
	ctx := context.Background()
	c := e.shareCheckpoints()
	r := e.create(t, paddock.KindClone, "")
	if err := os.WriteFile(filepath.Join(r.Workspace.Root, "work.txt"), []byte("an hour of the agent's work\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	made := c.saves // the run's base, stored when it was made
	lifecycle.StoreCheckpoint(ctx, e.m, r.ID, "test")
	if c.saves != made+1 {
		t.Fatalf("checkpoint not stored: %d", c.saves)
	}
	// The node that held the run is gone, and its disk with it; on this
	// node, something is in the way of the workspace.
	if err := os.RemoveAll(r.Workspace.Root); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(r.Workspace.Root, []byte("in the way"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := e.m.Nodes.Adopt(ctx, r.ID, "test"); err == nil {
		t.Fatal("an adoption whose workspace cannot be made succeeded")
	}
	os.Remove(r.Workspace.Root)
	res, err := e.m.Nodes.Adopt(ctx, r.ID, "test")
	if err != nil {
		got, _ := e.m.Run(ctx, r.ID)
		t.Fatalf("adopting again once the way is clear: %v (the run is %s, its checkpoint still stored)", err, got.State())
	}
	b, err := os.ReadFile(filepath.Join(res.Run.Workspace.Root, "work.txt"))
	if err != nil || string(b) != "an hour of the agent's work\n" {
		t.Fatalf("restored work.txt: %q %v", b, err)
	}
}

// TestAdoptionRemovesALeftoverOfAnEarlierHold: a node that held a run,
// was lost and was started again while the run was adopted elsewhere
// still has the run's workspace directory. Adopting the run back failed on
// it (mkdir: file exists; 37 of 108 adoptions in bench/soak's 30 minutes)
// and the run went back to its lost node. The adoption must take the run,
// and what the run holds afterwards is its checkpoint, not the leftover.
func TestAdoptionRemovesALeftoverOfAnEarlierHold(t *testing.T) {
	e := newEnv(t)
	e.project(t)
	ctx := context.Background()
	e.shareCheckpoints()
	r := e.create(t, paddock.KindClone, "")
	if err := os.WriteFile(filepath.Join(r.Workspace.Root, "work.txt"), []byte("checkpointed\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	lifecycle.StoreCheckpoint(ctx, e.m, r.ID, "test")
	// The earlier hold wrote on after its last checkpoint: lost with it.
	if err := os.WriteFile(filepath.Join(r.Workspace.Root, "stale.txt"), []byte("after the checkpoint\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := e.m.Nodes.Adopt(ctx, r.ID, "test")
	if err != nil {
		t.Fatalf("adopting a run whose old workspace is still on this node's disk: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(res.Run.Workspace.Root, "work.txt")); err != nil || string(b) != "checkpointed\n" {
		t.Fatalf("restored work.txt: %q %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(res.Run.Workspace.Root, "stale.txt")); err == nil {
		t.Fatal("the adopted run holds a file of the leftover, not of its checkpoint")
	}
}

// TestUnchangedCheckpointIsNotStoredAgain: every job start and end, and
// every checkpoint, packs the run's whole change set (up to the change
// set's limit, 256 MiB by default) and writes it to the shared store,
// replacing the last one, even when nothing changed. A run's agent starts
// jobs and checkpoints with its own token: each call costs the shared
// database a rewrite of the whole change set (and its WAL the same), for
// every node. A checkpoint with the same change set as the one stored
// must not be written again.
func TestUnchangedCheckpointIsNotStoredAgain(t *testing.T) {
	e := newEnv(t)
	e.project(t)
	ctx := context.Background()
	c := e.shareCheckpoints()
	r := e.create(t, paddock.KindClone, "")
	if err := os.WriteFile(filepath.Join(r.Workspace.Root, "work.txt"), []byte("work\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	made := c.saves // the run's base, stored when it was made
	for range 3 {
		lifecycle.StoreCheckpoint(ctx, e.m, r.ID, "job start")
	}
	if c.saves != made+1 {
		t.Fatalf("the same change set was written to the shared store %d times", c.saves-made)
	}
	if err := os.WriteFile(filepath.Join(r.Workspace.Root, "work.txt"), []byte("more work\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	lifecycle.StoreCheckpoint(ctx, e.m, r.ID, "job end")
	if c.saves != made+2 {
		t.Fatalf("a changed change set was not stored: %d writes", c.saves-made)
	}
}

// TestAdoptionRestoresNothingOutsideOrProtected: a checkpoint is the
// agent's files, packed by the node that held the run; what an adoption
// writes from it goes through the working tools, with the run's
// protections. A checkpoint naming paths outside the workspace, under
// .git (its hooks run on the operator's next git command) or protected
// ones (an editor's or an agent's settings) restores none of them, and
// deletes nothing there; the ordinary file is restored.
func TestAdoptionRestoresNothingOutsideOrProtected(t *testing.T) {
	e := newEnv(t)
	e.project(t)
	ctx := context.Background()
	c := e.shareCheckpoints()
	r := e.create(t, paddock.KindClone, "")
	root := r.Workspace.Root
	if err := os.RemoveAll(root); err != nil {
		t.Fatal(err)
	}
	outside := filepath.Join(t.TempDir(), "abs.txt")
	type entry struct {
		Path    []byte `json:"path"`
		Deleted bool   `json:"deleted,omitempty"`
		Mode    string `json:"mode,omitempty"`
	}
	entries := []entry{
		{Path: []byte(".git/hooks/pre-commit"), Mode: "100755"},
		{Path: []byte(".git/config"), Mode: "100644"},
		{Path: []byte("../escape.txt"), Mode: "100644"},
		{Path: []byte("sub/../../escape2.txt"), Mode: "100644"},
		{Path: []byte(outside), Mode: "100644"},
		{Path: []byte(".envrc"), Mode: "100644"},
		{Path: []byte(".claude/settings.json"), Mode: "100644"},
		{Path: []byte("README.md"), Deleted: true},
		{Path: []byte(".git/HEAD"), Deleted: true},
		{Path: []byte("ok.txt"), Mode: "100644"},
	}
	man, _ := json.Marshal(map[string]any{"base_revision": r.Workspace.BaseRevision, "hash": "h", "entries": entries})
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	add := func(name string, b []byte) {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o600, Size: int64(len(b)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		tw.Write(b)
	}
	add("manifest.json", man)
	for i, en := range entries {
		if !en.Deleted {
			add("f/"+strconv.Itoa(i), []byte("#!/bin/sh\necho owned > /tmp/owned\n"))
		}
	}
	tw.Close()
	c.cps[r.ID] = paddock.RunCheckpoint{RunID: r.ID, Node: "na", BaseRevision: r.Workspace.BaseRevision, Hash: "h", Entries: len(entries), Content: buf.Bytes()}
	res, err := e.m.Nodes.Adopt(ctx, r.ID, "test")
	if err != nil {
		t.Fatal(err)
	}
	root = res.Run.Workspace.Root
	if _, err := os.Stat(filepath.Join(root, "ok.txt")); err != nil {
		t.Fatalf("the ordinary file was not restored: %v", err)
	}
	for _, p := range []string{filepath.Join(root, ".git/hooks/pre-commit"), filepath.Join(root, "../escape.txt"), filepath.Join(root, "../../escape2.txt"),
		filepath.Join(root, "../escape2.txt"), outside, filepath.Join(root, ".envrc"), filepath.Join(root, ".claude/settings.json")} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("an adoption wrote %s", p)
		}
	}
	if b, err := os.ReadFile(filepath.Join(root, ".git/config")); err == nil && strings.Contains(string(b), "owned") {
		t.Error("an adoption wrote .git/config")
	}
	if _, err := os.Stat(filepath.Join(root, ".git/HEAD")); err != nil {
		t.Errorf("an adoption deleted .git/HEAD: %v", err)
	}
	if _, err := os.Stat(filepath.Join(root, "README.md")); err == nil {
		t.Error("an ordinary delete was not restored")
	}
}

// TestAdoptionCarriesOrNamesTheSubmission: a run submitted its change set
// on the node that held it (its submission, like its frozen change sets,
// its provenance and its jobs' logs and results, is a file in that node's
// artifacts directory), and the node was lost. The adoption restores the
// files and the bootstrap record only, and says nothing of the rest: the
// run's events say it submitted, the operator's approve of that very
// change set is refused ("submit it first"), and the adoption's record
// names no loss. What the checkpoint does not carry must be carried, or
// named in the adoption's record.
func TestAdoptionCarriesOrNamesTheSubmission(t *testing.T) {
	e := newEnv(t)
	e.project(t)
	ctx := context.Background()
	e.shareCheckpoints()
	r := e.create(t, paddock.KindClone, "")
	if err := os.WriteFile(filepath.Join(r.Workspace.Root, "work.txt"), []byte("work\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cs, err := e.m.Changes.Submit(ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	lifecycle.StoreCheckpoint(ctx, e.m, r.ID, "job end")
	// The node is lost, and its disk with it.
	os.RemoveAll(r.Workspace.Root)
	os.RemoveAll(filepath.Join(e.state, "artifacts", r.ID))
	if _, err := e.m.Nodes.Adopt(ctx, r.ID, "test"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.m.Changes.Approve(ctx, r.ID, cs.Hash, "op"); err == nil {
		return // carried
	}
	evs, err := e.m.Runs.Events(ctx, r.ID, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range evs {
		if (ev.Type == paddock.EventAdopted || ev.Type == paddock.EventResumed) && strings.Contains(string(ev.Data), "submission") {
			return // named
		}
	}
	t.Fatalf("the run submitted %s before its node was lost; adopted, its approval is refused, and the adoption names no loss", cs.Hash)
}

// TestAdoptionBackDropsAnEarlierHoldsSubmission: a node that takes a run
// back (it held it once, and kept its artifacts) while the files it
// restores are not the run's last submitted change set does not keep the
// submission record of its earlier hold (found by bench/soak): the run
// read that hold's stale review, and an apply there would have applied
// its frozen change set.
func TestAdoptionBackDropsAnEarlierHoldsSubmission(t *testing.T) {
	e := newEnv(t)
	e.project(t)
	ctx := context.Background()
	e.shareCheckpoints()
	r := e.create(t, paddock.KindClone, "")
	os.WriteFile(filepath.Join(r.Workspace.Root, "a.txt"), []byte("a\n"), 0o644)
	lifecycle.StoreCheckpoint(ctx, e.m, r.ID, "test") // a.txt only
	os.WriteFile(filepath.Join(r.Workspace.Root, "b.txt"), []byte("b\n"), 0o644)
	cs, err := e.m.Changes.Submit(ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.m.Changes.Approve(ctx, r.ID, cs.Hash, "op"); err != nil {
		t.Fatal(err)
	}
	// The node's workspace is gone (its run adopted elsewhere, and back),
	// its artifacts directory kept.
	os.RemoveAll(r.Workspace.Root)
	if _, err := e.m.Nodes.Adopt(ctx, r.ID, "test"); err != nil {
		t.Fatal(err)
	}
	got, err := e.m.Runs.Run(ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Review == paddock.ReviewApproved || got.Review == paddock.ReviewSubmitted {
		t.Fatalf("adopted back with other files, the run reads review %q from the earlier hold", got.Review)
	}
	_, err = e.m.Changes.Apply(ctx, r.ID, "stale", gitx.Identity{Name: "Op", Email: "op@example.com"})
	mustCode(t, err, paddock.CodeConflict)
}
