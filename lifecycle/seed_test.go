package lifecycle_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/gitx/gittest"
	"github.com/paddock-dev/paddock/lifecycle"
)

// TestCloneChangeSetSeeded: a clone run's files are recorded as its
// checkout wrote them when it is made, by a create and by an adoption, so
// that its first change set reads only what changed since; and that
// change set still sees an edit made at once after the create, at the
// same size and with the modification time set back, and every change
// the adoption restored.
func TestCloneChangeSetSeeded(t *testing.T) {
	e := newEnv(t)
	files := map[string]string{}
	for i := range 40 {
		files[fmt.Sprintf("pkg%d/f%02d.go", i%4, i)] = fmt.Sprintf("package p // %02d\n", i)
	}
	gittest.Commit(t, e.repo, "many", files)
	e.project(t)
	e.shareCheckpoints()
	ctx := context.Background()

	r := e.create(t, paddock.KindClone, "")
	stat, err := os.ReadFile(filepath.Join(e.state, "artifacts", r.ID, "gitcache", "stat"))
	if err != nil {
		t.Fatalf("the create recorded no files: %v", err)
	}
	if n := bytes.Count(stat, []byte(".go\x00100644\x00")); n < len(files)/2 {
		t.Errorf("the create recorded %d of the %d files", n, len(files))
	}
	if !bytes.Contains(stat, []byte("pkg1/f01.go\x00100644\x00")) {
		t.Error("the create did not record the file edited below: the test proves nothing")
	}
	p := filepath.Join(r.Workspace.Root, "pkg1/f01.go")
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte("package q // 01\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Chtimes(p, fi.ModTime(), fi.ModTime())
	os.Remove(filepath.Join(r.Workspace.Root, "pkg2/f02.go"))
	cs, err := e.m.Changes.ChangeSet(ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got := changedPaths(cs); !slices.Equal(got, []string{"pkg1/f01.go", "pkg2/f02.go"}) {
		t.Fatalf("first change set after the create: %q", got)
	}

	lifecycle.StoreCheckpoint(ctx, e.m, r.ID, "test")
	if err := os.RemoveAll(filepath.Join(e.state, "artifacts", r.ID, "gitcache")); err != nil {
		t.Fatal(err)
	}
	res, err := e.m.Nodes.Adopt(ctx, r.ID, "test")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(e.state, "artifacts", r.ID, "gitcache", "stat")); err != nil {
		t.Fatalf("the adoption recorded no files: %v", err)
	}
	adopted, err := e.m.Changes.ChangeSet(ctx, res.Run.ID)
	if err != nil {
		t.Fatal(err)
	}
	if adopted.Hash != cs.Hash {
		t.Fatalf("after the adoption the change set is %q (%s), before it %q (%s)", changedPaths(adopted), adopted.Hash, changedPaths(cs), cs.Hash)
	}
}

func changedPaths(cs *paddock.ChangeSet) []string {
	var paths []string
	for _, e := range cs.Entries {
		paths = append(paths, e.Path)
	}
	slices.Sort(paths)
	return paths
}
