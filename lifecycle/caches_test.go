package lifecycle_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/gitx/gittest"
	"github.com/paddock-dev/paddock/workspace"
)

// TestCachesAreCopyOnWrite: a project cache in its default mode is, for
// each run, a copy-on-write layer over the shared directory (#30 item 5):
// a Go-like tool writes its cache in the run and reads it back in the next
// command, the shared directory never changes, another run sees the shared
// entries and none of the first run's, and the layer goes with its run. A
// change of the project's caches reaches a live run's next command; :ro
// stays strictly read-only, :rw writes the shared directory.
func TestCachesAreCopyOnWrite(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.project(t)
	withSandbox(t, e)
	uid := e.m.SandboxUID
	if uid == 0 {
		uid = os.Getuid()
	}
	set := func(req paddock.SetProjectRequest) *paddock.Project {
		t.Helper()
		p, err := e.m.Projects.SetProject(ctx, "my-app", "test", req)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	p := set(paddock.SetProjectRequest{AddCaches: []string{"go-build"}})
	if len(p.Caches) != 1 || p.Caches[0].Mode != paddock.CacheCOW {
		t.Fatalf("the default mode: %+v", p.Caches)
	}
	// The daemon's own cache, filled as the operator would (for the
	// sandbox's user).
	shared := filepath.Join(e.state, "caches", "my-app", "go-build")
	os.MkdirAll(filepath.Join(shared, "ab"), 0o755)
	os.WriteFile(filepath.Join(shared, "ab", "entry-d"), []byte("SHARED\n"), 0o644)
	filepath.Walk(filepath.Join(e.state, "caches"), func(p string, _ os.FileInfo, err error) error { os.Lchown(p, uid, uid); return nil })
	before := tree(t, shared)

	for _, kind := range []paddock.WorkspaceKind{paddock.KindOverlay, paddock.KindClone} {
		t.Run(string(kind), func(t *testing.T) {
			first := e.create(t, kind, "")
			out := sh(t, e.m, first.ID, `c=$HOME/.cache/go-build; cat $c/ab/entry-d && mkdir -p $c/x && echo built > $c/x/out-d && echo more > $c/ab/new-d && echo written`)
			if out != "SHARED\nwritten\n" {
				t.Fatalf("a Go-like tool writing its cache: %q", out)
			}
			if out := sh(t, e.m, first.ID, `cat $HOME/.cache/go-build/x/out-d $HOME/.cache/go-build/ab/new-d`); out != "built\nmore\n" {
				t.Fatalf("the run's next command: %q", out)
			}
			if after := tree(t, shared); after != before {
				t.Fatalf("a run wrote the shared cache:\n%s", after)
			}
			second := e.create(t, kind, "")
			if out := sh(t, e.m, second.ID, `c=$HOME/.cache/go-build; cat $c/ab/entry-d; ls $c/ab; ls -d $c/x 2>/dev/null; true`); out != "SHARED\nentry-d\n" {
				t.Fatalf("another run's cache: %q", out)
			}
			layer := filepath.Join(workspace.AuxDir(filepath.Join(e.state, "workspaces"), first.ID), "caches", "go-build")
			if _, err := os.Stat(filepath.Join(layer, "upper", "x", "out-d")); err != nil {
				t.Fatalf("the run's writes are not in its layer: %v", err)
			}
			if _, err := e.m.Runs.Reject(ctx, first.ID); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(layer); !os.IsNotExist(err) {
				t.Fatalf("the layer outlived its run: %v", err)
			}

			// A change reaches the live run's next command: none, then
			// strictly read-only, then the shared directory itself.
			set(paddock.SetProjectRequest{RemoveCaches: []string{"go-build"}})
			if out := sh(t, e.m, second.ID, `ls $HOME/.cache/go-build`); out != "" {
				t.Fatalf("a removed cache is still shown: %q", out)
			}
			set(paddock.SetProjectRequest{AddCaches: []string{"go-build:ro"}})
			if out := sh(t, e.m, second.ID, `cat $HOME/.cache/go-build/ab/entry-d; (echo x > $HOME/.cache/go-build/ro-d) 2>/dev/null && echo WROTE; true`); out != "SHARED\n" {
				t.Fatalf("a read-only cache: %q", out)
			}
			set(paddock.SetProjectRequest{AddCaches: []string{"go-build:rw"}})
			sh(t, e.m, second.ID, `echo shared > $HOME/.cache/go-build/rw-d`)
			if b, _ := os.ReadFile(filepath.Join(shared, "rw-d")); string(b) != "shared\n" {
				t.Fatal("a read-write cache's write did not reach the shared directory")
			}
			os.Remove(filepath.Join(shared, "rw-d"))
			set(paddock.SetProjectRequest{AddCaches: []string{"go-build"}})
			e.m.Runs.Reject(ctx, second.ID)
		})
	}
}

// tree lists the files under dir with their contents.
func tree(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		b.WriteString(strings.TrimPrefix(p, dir) + " " + fi.Mode().String())
		if fi.Mode().IsRegular() {
			c, _ := os.ReadFile(p)
			b.WriteString(" " + string(c))
		}
		b.WriteString("\n")
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// TestCheckRunCacheLayer: a check run gets a copy-on-write cache layer of
// its own, fresh: its check can write the cache and read the shared
// entries, and never sees what the agent's run wrote in its layer.
func TestCheckRunCacheLayer(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("no make here")
	}
	e := newEnv(t)
	ctx := context.Background()
	agentCtx := paddock.WithAgent(ctx)
	gittest.Commit(t, e.repo, "checks", map[string]string{
		"Makefile": "test:\n\t@c=$$HOME/.cache/go-build; if [ -e $$c/planted ]; then echo PLANTED; exit 1; fi; mkdir -p $$c/t && echo ok > $$c/t/x && cat $$c/t/x $$c/ab/entry-d\n",
	})
	e.project(t)
	withSandbox(t, e)
	if _, err := e.m.Projects.SetProject(ctx, "my-app", "test", paddock.SetProjectRequest{AddCaches: []string{"go-build"}}); err != nil {
		t.Fatal(err)
	}
	uid := e.m.SandboxUID
	if uid == 0 {
		uid = os.Getuid()
	}
	shared := filepath.Join(e.state, "caches", "my-app", "go-build")
	os.MkdirAll(filepath.Join(shared, "ab"), 0o755)
	os.WriteFile(filepath.Join(shared, "ab", "entry-d"), []byte("SHARED\n"), 0o644)
	filepath.Walk(filepath.Join(e.state, "caches"), func(p string, _ os.FileInfo, err error) error { os.Lchown(p, uid, uid); return nil })
	before := tree(t, shared)
	r := e.create(t, paddock.KindClone, "")
	sh(t, e.m, r.ID, `echo x > $HOME/.cache/go-build/planted`)
	got, err := e.m.Verifier.Verify(agentCtx, r.ID, paddock.VerifyRequest{Checks: []string{"test"}})
	if err != nil {
		t.Fatal(err)
	}
	if !got.Passed || !strings.Contains(got.Checks[0].Output, "ok\nSHARED") || got.RanIn == nil || len(got.RanIn.Caches) != 1 || len(got.RanIn.Withheld) != 0 {
		t.Fatalf("a check with a copy-on-write cache: %+v %+v", got, got.RanIn)
	}
	if after := tree(t, shared); after != before {
		t.Fatalf("a check run wrote the shared cache:\n%s", after)
	}
	e.m.Runs.Reject(ctx, r.ID)
}
