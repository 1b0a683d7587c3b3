package lifecycle_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/sandbox"
)

// Red team of fork (issue #22): each test is an attack; it fails while the
// attack works.

// TestForkBackgroundWriterAfterFork: a process the run's command left
// behind (setsid, output elsewhere) goes on writing after the command
// returned; a fork taken meanwhile must still see a frozen file: the
// frozen layer changes under no one, in the fork or on the host.
func TestForkBackgroundWriterAfterFork(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.project(t)
	withSandbox(t, e)
	r := e.create(t, paddock.KindOverlay, "")
	sh(t, e.m, r.ID, "echo 0 > bg.txt; setsid nohup bash -c 'for i in $(seq 1 60); do echo $i > bg.txt; sleep 0.05; done' </dev/null >/dev/null 2>&1 & sleep 0.2")
	res := fork(t, e.m, r.ID, 1)
	k := res.Runs[0]
	layerFile := filepath.Join(e.state, "layers", res.Layer, "bg.txt")
	first, _ := os.ReadFile(layerFile)
	a := sh(t, e.m, k.ID, "cat bg.txt")
	time.Sleep(1 * time.Second)
	b := sh(t, e.m, k.ID, "cat bg.txt")
	again, _ := os.ReadFile(layerFile)
	if a != b || string(first) != string(again) {
		t.Fatalf("the frozen layer changed after the fork: the fork saw %q then %q; the layer held %q then %q", a, b, first, again)
	}
}

// TestForkRejectMiddle: a fork of a fork, then the middle run and the
// original rejected and gc run: the last fork still sees every layer.
func TestForkRejectMiddle(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.project(t)
	withSandbox(t, e)
	ctx := context.Background()
	r := e.create(t, paddock.KindOverlay, "")
	sh(t, e.m, r.ID, "echo 1 > one.txt")
	k := fork(t, e.m, r.ID, 1).Runs[0]
	sh(t, e.m, k.ID, "echo 2 > two.txt")
	kk := fork(t, e.m, k.ID, 2).Runs
	if _, err := e.m.Runs.Reject(ctx, k.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := e.m.GC(ctx, false); err != nil {
		t.Fatal(err)
	}
	if _, err := e.m.Runs.Reject(ctx, r.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := e.m.GC(ctx, false); err != nil {
		t.Fatal(err)
	}
	for _, x := range kk {
		if got := sh(t, e.m, x.ID, "cat one.txt two.txt"); got != "1\n2\n" {
			t.Fatalf("fork %s sees %q after its parents went", x.ID, got)
		}
		if got := changes(t, e.m, x.ID); len(got) != 2 {
			t.Fatalf("fork %s's change set %v", x.ID, got)
		}
	}
	if _, err := e.m.Runs.Reject(ctx, kk[0].ID); err != nil {
		t.Fatal(err)
	}
	e.m.GC(ctx, false)
	if got := sh(t, e.m, kk[1].ID, "cat one.txt two.txt"); got != "1\n2\n" {
		t.Fatalf("the last fork sees %q after its sibling went", got)
	}
}

// TestForkHostLinksInLayer: links planted in the run before the fork
// that name host paths (a canary directory, the daemon's state) are never
// followed by the daemon when it reads, freezes or collects the layer, and
// a fork reads no host file through them.
func TestForkHostLinksInLayer(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.project(t)
	withSandbox(t, e)
	ctx := context.Background()
	canary := t.TempDir()
	os.WriteFile(filepath.Join(canary, "keep"), []byte("host secret\n"), 0o644)
	os.Chmod(canary, 0o755)
	r := e.create(t, paddock.KindOverlay, "")
	sh(t, e.m, r.ID, "ln -s "+canary+" hostdir; ln -s "+canary+"/keep hostfile; ln -s "+e.state+" state; ln -s / root; mkfifo fifo; mkdir d; ln -s "+canary+" d/.git")
	res := fork(t, e.m, r.ID, 2)
	for _, k := range res.Runs {
		out, err := e.m.Broker.Exec(ctx, k.ID, paddock.ExecRequest{Argv: []string{"bash", "-c", "cat hostfile hostdir/keep 2>&1; ls state 2>&1 | head -3"}})
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(out.Stdout, "host secret") {
			t.Fatalf("fork %s read a host file through a link planted before the fork: %q", k.ID, out.Stdout)
		}
		done := make(chan error, 1)
		go func() { _, err := e.m.Changes.ChangeSet(ctx, k.ID); done <- err }()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("change set of fork %s: %v", k.ID, err)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("the change set of fork %s hangs (a FIFO in the frozen layer?)", k.ID)
		}
	}
	for _, k := range res.Runs {
		e.m.Runs.Reject(ctx, k.ID)
	}
	e.m.Runs.Reject(ctx, r.ID)
	if _, err := e.m.GC(ctx, false); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(canary, "keep")); err != nil || string(b) != "host secret\n" {
		t.Fatalf("the host file a link in the layer named is gone or changed: %q %v", b, err)
	}
	if _, err := os.Stat(e.state); err != nil {
		t.Fatalf("the state directory: %v", err)
	}
}

// TestForkSiblingIsolation: a write, a rename of a directory from the
// frozen layer, a hard link and a chmod in one fork show in neither its
// sibling nor the original, and leave the frozen layer's files as they
// were on the host.
func TestForkSiblingIsolation(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.project(t)
	withSandbox(t, e)
	r := e.create(t, paddock.KindOverlay, "")
	sh(t, e.m, r.ID, "mkdir -p tree/sub; echo leaf > tree/sub/leaf.txt; echo f > f.txt; chmod 644 f.txt")
	res := fork(t, e.m, r.ID, 2)
	a, b := res.Runs[0], res.Runs[1]
	layer := filepath.Join(e.state, "layers", res.Layer)
	sh(t, e.m, a.ID, "ln f.txt hard.txt; echo changed >> hard.txt; chmod 755 f.txt; mv tree moved; echo x >> moved/sub/leaf.txt; touch -d 2000-01-01 f.txt")
	sh(t, e.m, r.ID, "echo orig >> f.txt; rm -r tree")
	want := "f\nleaf\n-rw-r--r--\n"
	if got := sh(t, e.m, b.ID, "cat f.txt tree/sub/leaf.txt; stat -c %A f.txt"); got != want {
		t.Fatalf("sibling sees %q, want %q", got, want)
	}
	if bs, err := os.ReadFile(filepath.Join(layer, "f.txt")); err != nil || string(bs) != "f\n" {
		t.Fatalf("frozen f.txt on the host: %q %v", bs, err)
	}
	if bs, err := os.ReadFile(filepath.Join(layer, "tree/sub/leaf.txt")); err != nil || string(bs) != "leaf\n" {
		t.Fatalf("frozen leaf on the host: %q %v", bs, err)
	}
	if fi, err := os.Stat(filepath.Join(layer, "f.txt")); err != nil || fi.Mode().Perm() != 0o644 || fi.ModTime().Year() == 2000 {
		t.Fatalf("frozen f.txt's mode or time changed: %v %v", fi.Mode(), err)
	}
}

// TestForkCheckpointAndRestart: a checkpointed run forks; the run and
// its forks resume, survive a daemon restart, and still see what each
// should (the run's later write in no fork, a fork's in no other).
func TestForkCheckpointAndRestart(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.project(t)
	withSandbox(t, e)
	ctx := context.Background()
	r := e.create(t, paddock.KindOverlay, "")
	sh(t, e.m, r.ID, "echo base > f.txt; rm README.md")
	if _, err := e.m.Runs.Checkpoint(ctx, r.ID, "test"); err != nil {
		t.Fatal(err)
	}
	res := fork(t, e.m, r.ID, 2)
	if _, err := e.m.Runs.Resume(ctx, r.ID); err != nil {
		t.Fatal(err)
	}
	sh(t, e.m, r.ID, "echo orig > f.txt")
	sh(t, e.m, res.Runs[0].ID, "echo kid0 > f.txt")
	for _, k := range res.Runs {
		if _, err := e.m.Runs.Checkpoint(ctx, k.ID, "test"); err != nil {
			t.Fatal(err)
		}
	}
	e.m.Harnesses.Close()
	if f := e.reopen(t); len(f) != 0 {
		t.Logf("recover after restart: %+v", f)
	}
	e.m.Harnesses = &sandbox.Pool{Dir: filepath.Join(e.state, "harness")}
	t.Cleanup(e.m.Harnesses.Close)
	if os.Getuid() == 0 {
		e.m.SandboxUID = 65534
	}
	for _, k := range res.Runs {
		if _, err := e.m.Runs.Resume(ctx, k.ID); err != nil {
			t.Fatal(err)
		}
	}
	for id, want := range map[string]string{r.ID: "orig\ngone\n", res.Runs[0].ID: "kid0\ngone\n", res.Runs[1].ID: "base\ngone\n"} {
		if got := sh(t, e.m, id, "cat f.txt; test ! -e README.md && echo gone"); got != want {
			t.Errorf("%s after restart sees %q, want %q", id, got, want)
		}
	}
}

// TestForkRepeatedForksStackEmptyLayers: forking a run again and again
// (a round of tries, then another) freezes its upper layer each time, even
// when nothing changed since the last fork: each adds a layer to the run's
// stack (every lookup of the run's commands walks them all), and at
// sandbox.MaxFrozen the run can no longer fork at all. An empty upper
// layer needs no new frozen layer.
func TestForkRepeatedForksStackEmptyLayers(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.project(t)
	withSandbox(t, e)
	ctx := context.Background()
	r := e.create(t, paddock.KindOverlay, "")
	sh(t, e.m, r.ID, "echo 1 > one.txt")
	for i := 0; i < sandbox.MaxFrozen+1; i++ {
		res, err := e.m.Forks.Fork(ctx, r.ID, paddock.ForkRequest{Count: 1})
		if err != nil {
			t.Fatalf("fork %d of a run that changed nothing since its first fork: %v", i+1, err)
		}
		if _, err := e.m.Runs.Reject(ctx, res.Runs[0].ID); err != nil {
			t.Fatal(err)
		}
	}
}

// TestForkOverlayXattrs: the agent sets overlayfs's own marks (opaque,
// redirect, whiteout, in user.* and trusted.*) on files and directories
// in the run before the fork; once frozen they must hide nothing from the
// forks (the base's docs/ stays whole) and the change sets stay as the
// files are.
func TestForkOverlayXattrs(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.project(t)
	withSandbox(t, e)
	r := e.create(t, paddock.KindOverlay, "")
	before := sh(t, e.m, r.ID, "ls docs | sort; cat run.sh | wc -c")
	set := sh(t, e.m, r.ID, `touch docs/new.txt run.sh; echo x > w.txt; python3 -c '
import os
for p, names in (("docs", ("opaque", "redirect")), ("run.sh", ("whiteout", "metacopy")), ("w.txt", ("whiteout",)), (".", ("opaque",))):
    for ns in ("user", "trusted"):
        for n in names:
            try:
                os.setxattr(p, ns + ".overlay." + n, b"y")
                print("set", ns, n, p)
            except OSError as e:
                pass
'`)
	t.Logf("marks set: %q", set)
	res := fork(t, e.m, r.ID, 1)
	k := res.Runs[0]
	if out, err := exec.Command("python3", "-c", "import os,sys\nfor p in sys.argv[1:]: print(p, os.listxattr(p))", filepath.Join(e.state, "layers", res.Layer, "docs"), filepath.Join(e.state, "layers", res.Layer, "w.txt")).CombinedOutput(); err == nil {
		t.Logf("on the host: %s", out)
	}
	want := strings.Replace(before, "ü.txt\n", "new.txt\nü.txt\n", 1)
	if got := sh(t, e.m, k.ID, "ls docs | sort; cat run.sh | wc -c"); got != want {
		t.Fatalf("the fork sees %q, want %q", got, want)
	}
	if got := sh(t, e.m, k.ID, "cat w.txt"); got != "x\n" {
		t.Fatalf("the fork sees w.txt as %q", got)
	}
	got := changes(t, e.m, k.ID)
	if len(got) != 2 || got["docs/new.txt"] != "create" || got["w.txt"] != "create" {
		t.Fatalf("the fork's change set %v", got)
	}
}
