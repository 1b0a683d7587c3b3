package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestStateDirectoryIsClosed: a state directory that already exists open
// to others is made 0700 at start, so that no other process of the
// sandbox's uid on the machine reaches the shared base snapshots (owned by
// that uid, for the overlay's copy-up) and changes what runs see.
func TestStateDirectoryIsClosed(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root: it tries the snapshot as another uid")
	}
	base := t.TempDir()
	os.Chmod(base, 0o755)
	home := filepath.Join(base, "home")
	os.MkdirAll(home, 0o755)
	repo := newRepo(t, filepath.Join(base, "src", "app"), 2)
	startDaemon(t, home)
	if fi, err := os.Stat(home); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("state directory: %v %v, want 0700", fi.Mode(), err)
	}
	cli(t, home, "project", "add", repo).must(t)
	id := strings.TrimSpace(cli(t, home, "create", "-p", "app", "--kind", "overlay").out)
	if id == "" {
		t.Skip("no overlay runs on this machine")
	}
	snaps, _ := filepath.Glob(filepath.Join(home, "snapshots", "app", "*", "README.md"))
	if len(snaps) != 1 {
		t.Fatalf("snapshot: %v", snaps)
	}
	before, _ := os.ReadFile(snaps[0])
	w := exec.Command("sh", "-c", "echo planted >> "+snaps[0])
	w.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	if out, err := w.CombinedOutput(); err == nil {
		t.Fatalf("uid 65534 wrote the shared snapshot: %s", out)
	}
	if after, _ := os.ReadFile(snaps[0]); string(after) != string(before) {
		t.Fatal("the snapshot changed")
	}
	cli(t, home, "reject", id).must(t)
}
