package lifecycle_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

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
	editAsBefore(t, filepath.Join(r.Workspace.Root, "pkg1/f01.go"), "package q // 01\n")
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

// TestWorktreeChangeSetSeeded: a worktree run's files are recorded as its
// checkout wrote them, unless the project's config converts what a
// checkout writes (core.autocrlf), and either way its first change set
// sees an edit made at once after the create (same size, modification
// time set back) and what the conversion wrote, as an unseeded one does.
func TestWorktreeChangeSetSeeded(t *testing.T) {
	for _, autocrlf := range []bool{false, true} {
		t.Run(fmt.Sprintf("autocrlf=%v", autocrlf), func(t *testing.T) {
			e := newEnv(t)
			files := map[string]string{}
			for i := range 20 {
				files[fmt.Sprintf("pkg%d/f%02d.go", i%4, i)] = fmt.Sprintf("package p // %02d\n", i)
			}
			gittest.Commit(t, e.repo, "many", files)
			if autocrlf {
				gittest.Git(t, e.repo, "config", "core.autocrlf", "true")
			}
			e.project(t)
			r := e.create(t, paddock.KindWorktree, "")
			stat, _ := os.ReadFile(filepath.Join(e.state, "artifacts", r.ID, "gitcache", "stat"))
			if n := bytes.Count(stat, []byte(".go\x00100644\x00")); (n >= len(files)/2) == autocrlf {
				t.Fatalf("the create recorded %d of the %d files", n, len(files))
			}
			editAsBefore(t, filepath.Join(r.Workspace.Root, "pkg1/f01.go"), "package q // 01\n")
			cs, err := e.m.Changes.ChangeSet(context.Background(), r.ID)
			if err != nil {
				t.Fatal(err)
			}
			got := changedPaths(cs)
			if !autocrlf && !slices.Equal(got, []string{"pkg1/f01.go"}) {
				t.Fatalf("first change set: %q", got)
			}
			// Every file the checkout converted to CRLF differs from its blob.
			if autocrlf && len(got) <= len(files)/2 {
				t.Fatalf("first change set of a converting checkout: %q", got)
			}
		})
	}
}

// editAsBefore writes content to the file at p, as an agent can at once
// after a checkout: its modification time set back to what it was (the
// content here is the same size as before).
func editAsBefore(t *testing.T, p, content string) {
	t.Helper()
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(p, fi.ModTime(), fi.ModTime()); err != nil {
		t.Fatal(err)
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

// TestCloneSeedOnEveryPath: every path that makes a clone run records
// its files as checked out (create, bootstrap by name and inline, a
// review of a clone, adoption, import), and on each the first change set
// holds what was written after: an edit at once after the run was made
// (same size, modification time set back), and an import's changes,
// which it writes after the checkout.
func TestCloneSeedOnEveryPath(t *testing.T) {
	lifecycle.SetCheckpointDelay(t, time.Millisecond)
	e := newEnv(t)
	ctx := context.Background()
	e.project(t)
	withSandbox(t, e)
	e.shareCheckpoints()
	t.Cleanup(func() { e.m.Close(context.Background()) })
	e.m.BundleKeyFile = filepath.Join(e.state, "bundle.key")
	bootstrap := func(t *testing.T, req paddock.BootstrapRequest) *paddock.Run {
		t.Helper()
		req.Project, req.Task, req.Kind = "my-app", "t", "clone"
		b, err := e.m.Jobs.Bootstrap(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		return b.Run
	}
	paths := []struct {
		name string
		make func(t *testing.T) string
		want []string // besides the edit
	}{
		{"create", func(t *testing.T) string { return e.create(t, paddock.KindClone, "").ID }, nil},
		{"bootstrap by name", func(t *testing.T) string { return bootstrap(t, paddock.BootstrapRequest{AgentName: "coder"}).ID }, nil},
		{"bootstrap inline", func(t *testing.T) string {
			return bootstrap(t, paddock.BootstrapRequest{Agent: paddock.AgentDefinition{Name: "mine", Workspace: "write"}}).ID
		}, nil},
		{"review of a clone", func(t *testing.T) string {
			r := e.create(t, paddock.KindClone, "")
			writeAndSubmit(t, e.m, r.ID, "sent.txt")
			rv, err := e.m.Reviews.Review(ctx, r.ID, "")
			if err != nil {
				t.Fatal(err)
			}
			if rv.Workspace.Kind != paddock.KindClone {
				t.Fatalf("a review of a clone is made %s", rv.Workspace.Kind)
			}
			return rv.ID
		}, nil},
		{"adoption", func(t *testing.T) string {
			r := bootstrap(t, paddock.BootstrapRequest{AgentName: "coder"})
			lifecycle.StoreCheckpoint(ctx, e.m, r.ID, "test")
			os.RemoveAll(r.Workspace.Root) // its node is lost, and its disk with it
			os.RemoveAll(filepath.Join(e.state, "artifacts", r.ID, "gitcache"))
			if _, err := e.m.Nodes.Adopt(ctx, r.ID, "test"); err != nil {
				t.Fatal(err)
			}
			return r.ID
		}, nil},
		{"import", func(t *testing.T) string {
			r := bootstrap(t, paddock.BootstrapRequest{AgentName: "coder"})
			writeAndSubmit(t, e.m, r.ID, "sent.txt")
			var buf bytes.Buffer
			if err := e.m.Bundles.Bundle(ctx, r.ID, &buf); err != nil {
				t.Fatal(err)
			}
			res, err := e.m.Bundles.Import(ctx, paddock.ImportRequest{Project: "my-app", Kind: "clone"}, &buf)
			if err != nil {
				t.Fatal(err)
			}
			return res.Run.ID
		}, []string{"sent.txt"}},
	}
	for _, p := range paths {
		t.Run(p.name, func(t *testing.T) {
			id := p.make(t)
			r, err := e.m.Run(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if r.Workspace.Kind != paddock.KindClone {
				t.Fatalf("the run is %s, not a clone", r.Workspace.Kind)
			}
			stat, err := os.ReadFile(filepath.Join(e.state, "artifacts", id, "gitcache", "stat"))
			if err != nil || !bytes.Contains(stat, []byte("cmd/main.go\x00100644\x00")) {
				t.Fatalf("the run's files were not recorded as checked out (%v)", err)
			}
			editAsBefore(t, filepath.Join(r.Workspace.Root, "cmd/main.go"), "package mine\n")
			cs, err := e.m.Changes.ChangeSet(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			want := append([]string{"cmd/main.go"}, p.want...)
			slices.Sort(want)
			if got := changedPaths(cs); !slices.Equal(got, want) {
				t.Fatalf("the first change set holds %q, want %q", got, want)
			}
		})
	}
}
