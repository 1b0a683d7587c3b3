//go:build linux

package sandbox

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/paddock-dev/paddock"
	"golang.org/x/sys/unix"
)

// newOverlay makes the layers of a copy-on-write workspace: a lower layer
// with two files, empty upper and work directories, all the sandbox user's.
func newOverlay(t *testing.T) (ws string, ov *Overlay) {
	t.Helper()
	base := t.TempDir()
	os.Chmod(base, 0o755)
	os.Chmod(filepath.Dir(base), 0o755)
	ov = &Overlay{Lower: filepath.Join(base, "lower"), Upper: filepath.Join(base, "ws", "upper"), Work: filepath.Join(base, "ws", "work")}
	ws = filepath.Join(base, "ws")
	for _, d := range []string{ov.Lower, ov.Upper, ov.Work, filepath.Join(ov.Lower, "dir")} {
		os.MkdirAll(d, 0o755)
	}
	os.WriteFile(filepath.Join(ov.Lower, "keep.txt"), []byte("keep\n"), 0o644)
	os.WriteFile(filepath.Join(ov.Lower, "gone.txt"), []byte("gone\n"), 0o644)
	os.WriteFile(filepath.Join(ov.Lower, "dir", "a"), []byte("a\n"), 0o644)
	filepath.Walk(base, func(p string, fi os.FileInfo, err error) error {
		if err == nil {
			os.Lchown(p, sandboxUID(), sandboxUID())
		}
		return nil
	})
	return ws, ov
}

// TestOverlayWorkspace: commands see the merged view and write only the
// upper layer; the daemon sees the same bytes through View; the lower
// layer never changes.
func TestOverlayWorkspace(t *testing.T) {
	skipUnlessSandbox(t)
	ws, ov := newOverlay(t)
	p := &Pool{Dir: t.TempDir()}
	defer p.Close()
	spec := Spec{Argv: []string{"bash", "-c", "cat keep.txt && echo new > new.txt && echo more >> keep.txt && rm gone.txt && rm -r dir && mkdir dir && echo b > dir/b && ls"},
		Workspace: ws, UID: sandboxUID(), Env: []string{"PATH=/usr/bin:/bin"}, Overlay: ov}
	res, err := p.Run(context.Background(), "r-ov", spec)
	if err != nil {
		if strings.Contains(err.Error(), "unsupported") && os.Getenv("CI") != "true" {
			t.Skipf("overlay in a user namespace: %v", err)
		}
		t.Fatal(err)
	}
	if res.ExitCode != 0 || string(res.Stdout) != "keep\ndir\nkeep.txt\nnew.txt\n" {
		t.Fatalf("exit %d: %q %q", res.ExitCode, res.Stdout, res.Stderr)
	}
	if b, _ := os.ReadFile(filepath.Join(ov.Lower, "keep.txt")); string(b) != "keep\n" {
		t.Fatal("the lower layer changed")
	}
	if _, err := os.Stat(filepath.Join(ov.Lower, "gone.txt")); err != nil {
		t.Fatal("the lower layer lost a file")
	}
	if b, _ := os.ReadFile(filepath.Join(ov.Upper, "new.txt")); string(b) != "new\n" {
		t.Fatal("the new file is not in the upper layer")
	}
	// Nothing is mounted on the host: the workspace directory holds the layers.
	if _, err := os.Stat(filepath.Join(ws, "new.txt")); err == nil {
		t.Fatal("the merged view is visible on the host")
	}
	view, err := p.View(context.Background(), "r-ov", spec)
	if err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(view, "keep.txt")); err != nil || string(b) != "keep\nmore\n" {
		t.Fatalf("the daemon's view: %q %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(view, "gone.txt")); err == nil {
		t.Fatal("the daemon's view shows a deleted file")
	}
	if _, err := os.Stat(filepath.Join(view, "upper")); err == nil {
		t.Fatal("the daemon's view shows the layers")
	}
	// The daemon's way in is out of the commands' reach.
	res, err = p.Run(context.Background(), "r-ov", Spec{Argv: []string{"bash", "-c", "ls " + DaemonView + "; echo x > " + DaemonView + "/escape"},
		Workspace: ws, UID: sandboxUID(), Env: []string{"PATH=/usr/bin:/bin"}, Overlay: ov})
	if err != nil || res.ExitCode == 0 {
		t.Fatalf("a command reached the daemon's view: %+v %v", res, err)
	}
	if _, err := os.Stat(filepath.Join(ov.Upper, "escape")); err == nil {
		t.Fatal("a command wrote through the daemon's view")
	}
	// An allow-list network gets a harness of its own, which mounts the
	// overlay once the previous one is gone; it sees the same bytes.
	spec.Argv, spec.Net, spec.Allow = []string{"cat", "new.txt"}, NetAllow, []string{"example.com"}
	if res, err := p.Run(context.Background(), "r-ov", spec); err != nil || res.Enforcement.Mode != "resident" || string(res.Stdout) != "new\n" {
		t.Fatalf("an allow-list command on an overlay run: %+v %v", res, err)
	}
}

func TestOverlayWorkspaceByPath(t *testing.T) {
	forcePathOpen = true
	defer func() { forcePathOpen = false }()
	TestOverlayWorkspace(t)
}

// TestOverlayFrozenLayers: a forked run's view stacks its frozen layers
// between its upper layer and the lower one, topmost first, whiteouts and
// opaque directories in them hiding what lies below, with binds beside
// (their descriptors come first), whether the layers are handed over as
// detached mounts or opened by path; the frozen layers never change.
func TestOverlayFrozenLayers(t *testing.T) {
	skipUnlessSandbox(t)
	for _, byPath := range []bool{false, true} {
		ws, ov := newOverlay(t)
		base := filepath.Dir(ov.Lower)
		top, below := filepath.Join(base, "f-top"), filepath.Join(base, "f-below")
		for _, d := range []string{top, below, filepath.Join(top, "dir")} {
			os.MkdirAll(d, 0o755)
		}
		os.WriteFile(filepath.Join(top, "top.txt"), []byte("top\n"), 0o644)
		os.WriteFile(filepath.Join(top, "dir", "b"), []byte("b\n"), 0o644)
		if err := unix.Setxattr(filepath.Join(top, "dir"), "user.overlay.opaque", []byte("y"), 0); err != nil {
			t.Skipf("no user extended attributes here: %v", err)
		}
		if err := unix.Mknod(filepath.Join(top, "gone.txt"), unix.S_IFCHR, 0); err != nil {
			t.Skipf("cannot make a whiteout here: %v", err)
		}
		os.WriteFile(filepath.Join(below, "keep.txt"), []byte("keep, below\n"), 0o644)
		os.WriteFile(filepath.Join(below, "gone.txt"), []byte("hidden by the top\n"), 0o644)
		home := filepath.Join(base, "home")
		os.Mkdir(home, 0o755)
		filepath.Walk(base, func(p string, fi os.FileInfo, err error) error {
			if err == nil {
				os.Lchown(p, sandboxUID(), sandboxUID())
			}
			return nil
		})
		ov.Frozen = []string{top, below}
		forcePathOpen = byPath
		p := &Pool{Dir: t.TempDir()}
		spec := Spec{Argv: []string{"sh", "-c", "cat keep.txt top.txt; ls dir; test ! -e gone.txt && echo gone; echo mine > top.txt; echo h > /home/paddock/h"},
			Workspace: ws, UID: sandboxUID(), Env: []string{"PATH=/usr/bin:/bin"}, Overlay: ov, Binds: []Bind{{Source: home, Target: "/home/paddock"}}}
		res, err := p.Run(context.Background(), "r-frozen", spec)
		p.Close()
		forcePathOpen = false
		if err != nil {
			if strings.Contains(err.Error(), "unsupported") && os.Getenv("CI") != "true" {
				t.Skipf("overlay in a user namespace: %v", err)
			}
			t.Fatal(err)
		}
		if want := "keep, below\ntop\nb\ngone\n"; res.ExitCode != 0 || string(res.Stdout) != want {
			t.Fatalf("by path %v: exit %d: %q, want %q (%s)", byPath, res.ExitCode, res.Stdout, want, res.Stderr)
		}
		if b, _ := os.ReadFile(filepath.Join(top, "top.txt")); string(b) != "top\n" {
			t.Fatalf("by path %v: a frozen layer changed", byPath)
		}
		if b, _ := os.ReadFile(filepath.Join(ov.Upper, "top.txt")); string(b) != "mine\n" {
			t.Fatalf("by path %v: the write is not in the upper layer", byPath)
		}
		if b, _ := os.ReadFile(filepath.Join(home, "h")); string(b) != "h\n" {
			t.Fatalf("by path %v: the bind beside the frozen layers", byPath)
		}
	}
}

// TestProbeOverlayWhereTheWorkspacesAre: whether overlayfs takes an upper
// layer depends on the file system under it, so the probe runs where the
// workspaces go. In a container whose root (and /tmp) is overlayfs but
// whose state directory is a volume, probing /tmp said overlay
// workspaces could not be made; here an overlayfs directory refuses and
// the test's own temporary directory takes them.
func TestProbeOverlayWhereTheWorkspacesAre(t *testing.T) {
	skipUnlessSandbox(t)
	if os.Getuid() != 0 {
		t.Skip("mounting an overlayfs to probe on needs root")
	}
	uid := sandboxUID()
	if err := ProbeOverlay(context.Background(), t.TempDir(), uid); err != nil {
		t.Skipf("overlay workspaces do not work on this machine's temporary directory: %v", err)
	}
	// A directory on overlayfs, as a container's root file system is.
	base := t.TempDir()
	os.Chmod(base, 0o755)
	for _, d := range []string{"lower", "upper", "work", "merged"} {
		os.Mkdir(filepath.Join(base, d), 0o755)
	}
	merged := filepath.Join(base, "merged")
	opts := "lowerdir=" + filepath.Join(base, "lower") + ",upperdir=" + filepath.Join(base, "upper") + ",workdir=" + filepath.Join(base, "work")
	if err := unix.Mount("overlay", merged, "overlay", 0, opts); err != nil {
		t.Skipf("cannot mount an overlayfs here: %v", err)
	}
	t.Cleanup(func() { unix.Unmount(merged, unix.MNT_DETACH) })
	os.Chmod(merged, 0o755)
	err := ProbeOverlay(context.Background(), merged, uid)
	if !paddock.IsCode(err, paddock.CodeUnsupported) {
		t.Fatalf("probing on an overlayfs: %v, want unsupported", err)
	}
}

// TestViewDoesNotHoldTheHarness: the daemon's View makes an overlay run's
// harness when the run has none; the run's agent, whose command has a
// network and so needs a harness of its own, arriving just then is not
// refused as busy (the view runs nothing), and still sees the workspace.
// Before, View counted itself as a command until it answered, and an
// agent's start that came in that moment failed.
func TestViewDoesNotHoldTheHarness(t *testing.T) {
	skipUnlessSandbox(t)
	ws, ov := newOverlay(t)
	p := &Pool{Dir: t.TempDir()}
	defer p.Close()
	spec := Spec{Argv: []string{"cat", "keep.txt"}, Workspace: ws, UID: sandboxUID(), Env: []string{"PATH=/usr/bin:/bin"}, Overlay: ov}
	type out struct {
		res *Result
		err error
	}
	agent := make(chan out, 1)
	testHookViewMade = func() {
		testHookViewMade = nil
		host := spec
		host.Net = NetHost
		res, err := p.Run(context.Background(), "r-ov", host)
		agent <- out{res, err}
	}
	defer func() { testHookViewMade = nil }()
	if _, err := p.View(context.Background(), "r-ov", spec); err != nil {
		if strings.Contains(err.Error(), "unsupported") && os.Getenv("CI") != "true" {
			t.Skipf("overlay in a user namespace: %v", err)
		}
		t.Fatal(err)
	}
	o := <-agent
	if o.err != nil || o.res.ExitCode != 0 || string(o.res.Stdout) != "keep\n" || o.res.Enforcement.Net != string(NetHost) {
		t.Fatalf("the agent's command while the daemon's view was made: %+v %v", o.res, o.err)
	}
}
