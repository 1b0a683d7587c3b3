//go:build linux

package projquota

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// QuotaFS mounts a small ext4 made with project quotas (-O quota,project,
// mounted prjquota) for a test, and unmounts it when the test ends. It
// skips, with the reason, where this machine cannot (not root, no
// mkfs.ext4, no loop device).
func QuotaFS(t *testing.T) string {
	t.Helper()
	if os.Getuid() != 0 {
		t.Skip("needs root: it mounts an ext4 with project quotas")
	}
	mkfs, err := exec.LookPath("mkfs.ext4")
	if err != nil {
		t.Skip("no mkfs.ext4 (e2fsprogs)")
	}
	dir := t.TempDir()
	img, mnt := filepath.Join(dir, "fs.img"), filepath.Join(dir, "mnt")
	os.Mkdir(mnt, 0o755)
	if out, err := exec.Command(mkfs, "-q", "-F", "-O", "quota,project", img, "32M").CombinedOutput(); err != nil {
		t.Skipf("mkfs.ext4 -O quota,project: %v %s", err, out)
	}
	if out, err := exec.Command("mount", "-o", "loop,prjquota", img, mnt).CombinedOutput(); err != nil {
		t.Skipf("this kernel cannot mount an ext4 with project quotas from a loop device (no loop device, or built without CONFIG_QFMT_V2: dmesg says which): %v %s", err, out)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(mnt, 0); err != nil {
			unix.Unmount(mnt, unix.MNT_DETACH)
		}
	})
	return mnt
}

// TestProjectQuota: a directory's project quota bounds what is written in
// it, nested directories and files made later included, as the write
// happens; lifted, the writes go through.
func TestProjectQuota(t *testing.T) {
	mnt := QuotaFS(t)
	if err := Supported(mnt); err != nil {
		t.Fatalf("an ext4 with prjquota: %v", err)
	}
	dir := filepath.Join(mnt, "run")
	os.MkdirAll(filepath.Join(dir, "old"), 0o755)
	os.WriteFile(filepath.Join(dir, "old", "f"), make([]byte, 1<<20), 0o644)
	id := ID("r-test")
	if err := Set(dir, id, 4<<20); err != nil {
		t.Fatal(err)
	}
	used, limit, err := Usage(mnt, id)
	if err != nil || limit != 4<<20 || used < 1<<20 {
		t.Fatalf("usage %d of %d (%v); want the 1 MiB already there counted, of 4 MiB", used, limit, err)
	}
	os.MkdirAll(filepath.Join(dir, "a", "b"), 0o755)
	f, err := os.Create(filepath.Join(dir, "a", "b", "big"))
	if err != nil {
		t.Fatal(err)
	}
	_, werr := f.Write(make([]byte, 8<<20))
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if !errors.Is(werr, unix.EDQUOT) {
		t.Fatalf("8 MiB into a 4 MiB project: %v, want EDQUOT", werr)
	}
	// Outside the project the file system takes it.
	if err := os.WriteFile(filepath.Join(mnt, "outside"), make([]byte, 8<<20), 0o644); err != nil {
		t.Fatalf("outside the project: %v", err)
	}
	os.Remove(filepath.Join(mnt, "outside"))
	if err := Clear(dir, id); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "a", "b", "big"), make([]byte, 8<<20), 0o644); err != nil {
		t.Fatalf("after Clear: %v", err)
	}
}

// TestNoProjectQuota: a file system without project quotas says why.
func TestNoProjectQuota(t *testing.T) {
	if err := Supported(t.TempDir()); err == nil {
		t.Skip("this machine's temporary directory has project quotas")
	} else {
		t.Log(err)
	}
}
