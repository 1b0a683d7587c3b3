package lifecycle_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/paddock-dev/paddock"
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
	if _, err := e.m.Create(ctx, paddock.CreateRunRequest{Project: "my-app", Kind: string(paddock.KindClone)}); !paddock.IsCode(err, paddock.CodeConflict) {
		t.Fatalf("a daemon of its own, on a clone of its project: %v", err)
	}
	e.m.Cluster = &shared{store: e.m.Store, cps: map[string]paddock.RunCheckpoint{}}
	for i := range 2 { // the second create checks the fingerprint kept
		if _, err := e.m.Create(ctx, paddock.CreateRunRequest{Project: "my-app", Kind: string(paddock.KindClone)}); err != nil {
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
	if _, err := e.m.Create(ctx, paddock.CreateRunRequest{Project: "my-app", Kind: string(paddock.KindClone)}); !paddock.IsCode(err, paddock.CodeConflict) {
		t.Fatalf("a node on another repository at the project's path: %v", err)
	}
}
