package workspace

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

func TestRemoveTreeRefusesOutside(t *testing.T) {
	dir := t.TempDir()
	outside := t.TempDir()
	keep := filepath.Join(outside, "keep")
	os.WriteFile(keep, []byte("x"), 0o644)
	for _, p := range []string{outside, dir, filepath.Join(dir, ".."), filepath.Join(dir, "a", "b"), "/", filepath.Join(dir, "../x")} {
		if err := RemoveTree(dir, p); err == nil {
			t.Errorf("RemoveTree(%s) was allowed", p)
		}
	}
	// A symlink inside the workspace to the outside is removed, not followed.
	ws := filepath.Join(dir, "r-1")
	os.MkdirAll(filepath.Join(ws, "ro"), 0o755)
	os.Symlink(outside, filepath.Join(ws, "out"))
	os.WriteFile(filepath.Join(ws, "ro", "f"), nil, 0o644)
	os.Chmod(filepath.Join(ws, "ro"), 0o500)
	if err := RemoveTree(dir, ws); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(ws); !os.IsNotExist(err) {
		t.Fatal("workspace left")
	}
	if _, err := os.Stat(keep); err != nil {
		t.Fatal("followed a symlink out")
	}
}

func TestRemoveTreeKillsProcessesInside(t *testing.T) {
	dir := t.TempDir()
	ws := filepath.Join(dir, "r-2")
	os.MkdirAll(filepath.Join(ws, "sub"), 0o755)
	cmd := exec.Command("sleep", "60")
	cmd.Dir = filepath.Join(ws, "sub")
	if err := cmd.Start(); err != nil {
		t.Skipf("no sleep: %v", err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	if err := RemoveTree(dir, ws); err != nil {
		t.Fatal(err)
	}
	err := cmd.Wait()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("process in the workspace was not killed: %v", err)
	}
}

func TestDigest(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "d", ".git"), 0o755)
	os.MkdirAll(filepath.Join(root, ".git"), 0o755)
	os.WriteFile(filepath.Join(root, "a"), []byte("1"), 0o644)
	os.WriteFile(filepath.Join(root, "d", "b"), []byte("2"), 0o644)
	os.Symlink("a", filepath.Join(root, "l"))
	d0, n, err := Digest(ctx, root)
	if err != nil || n != 2 {
		t.Fatalf("digest: %s %d %v", d0, n, err)
	}
	same := func(want bool, what string) {
		t.Helper()
		d, _, err := Digest(ctx, root)
		if err != nil {
			t.Fatal(err)
		}
		if (d == d0) != want {
			t.Fatalf("%s: digest equal = %v", what, d == d0)
		}
	}
	os.WriteFile(filepath.Join(root, ".git", "index"), []byte("git noise"), 0o644)
	same(true, "top-level .git ignored")
	os.WriteFile(filepath.Join(root, "d", ".git", "x"), []byte("nested"), 0o644)
	same(false, "nested .git counted")
	os.Remove(filepath.Join(root, "d", ".git", "x"))
	same(true, "back")
	os.Chmod(filepath.Join(root, "a"), 0o755)
	same(false, "mode")
	os.Chmod(filepath.Join(root, "a"), 0o644)
	os.Remove(filepath.Join(root, "l"))
	os.Symlink("d/b", filepath.Join(root, "l"))
	same(false, "link target")
	os.Remove(filepath.Join(root, "l"))
	os.Symlink("a", filepath.Join(root, "l"))
	os.WriteFile(filepath.Join(root, "a"), []byte("2"), 0o644)
	same(false, "content")
	os.WriteFile(filepath.Join(root, "a"), []byte("1"), 0o644)
	same(true, "restored")

	// A FIFO is hashed by its name and mode, never opened (it would block).
	if err := syscall.Mkfifo(filepath.Join(root, "fifo"), 0o644); err == nil {
		done := make(chan error, 1)
		go func() { _, _, err := Digest(ctx, root); done <- err }()
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("digest blocked on a FIFO")
		}
	}
}
