package vmtest

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// loadModules inserts the guest kernel's modules named, in order, from the
// kernel package unpacked on the host (PADDOCK_VM_CACHE, seen through the
// host's root): what the guest's initramfs does not load itself.
func loadModules(t *testing.T, names ...string) {
	t.Helper()
	cache := os.Getenv("PADDOCK_VM_CACHE")
	if cache == "" {
		cache = "/var/cache/paddock-vm"
	}
	dirs, _ := filepath.Glob(filepath.Join(cache, "kernels", "*", "lib", "modules", kernelRelease()))
	if len(dirs) == 0 {
		t.Skipf("no modules of %s under %s", kernelRelease(), cache)
	}
	for _, name := range names {
		var found string
		filepath.WalkDir(dirs[0], func(p string, d os.DirEntry, err error) error {
			if err == nil && !d.IsDir() && (d.Name() == name+".ko" || d.Name() == name+".ko.xz" || d.Name() == name+".ko.zst") {
				found = p
				return filepath.SkipAll
			}
			return nil
		})
		if found == "" {
			continue // built in
		}
		if out, err := exec.Command("insmod", found).CombinedOutput(); err != nil && !strings.Contains(string(out), "File exists") {
			t.Logf("insmod %s: %v %s", found, err, out)
		}
	}
}

// TestGuestProjectQuota: a state directory on an ext4 with project quotas
// gives each overlay run's upper layer the run's disk quota from the
// kernel: a write past it fails as it happens (no 500 ms watchdog), the
// run goes on once it removes files, and the record says which held it.
func TestGuestProjectQuota(t *testing.T) {
	bin := guest(t)
	loadModules(t, "crc32c_generic", "libcrc32c", "crc16", "mbcache", "jbd2", "ext4", "quota_tree", "quota_v2", "loop")
	repo, home, base := limitsSetup(t)
	img := filepath.Join(base, "state.img")
	if out, err := exec.Command("mkfs.ext4", "-q", "-F", "-O", "quota,project", img, "160M").CombinedOutput(); err != nil {
		t.Fatalf("mkfs.ext4: %v %s", err, out)
	}
	// The state directory is the ext4, mounted over the setup's home.
	conf, _ := os.ReadFile(filepath.Join(home, "paddock.toml"))
	if out, err := exec.Command("mount", "-o", "loop,prjquota", img, home).CombinedOutput(); err != nil {
		t.Fatalf("mount -o loop,prjquota: %v %s", err, out)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(home, 0); err != nil {
			t.Errorf("unmount the state disk: %v", err)
			syscall.Unmount(home, syscall.MNT_DETACH)
		}
	})
	os.Chmod(home, 0o755)
	// Top-level keys, before limitsSetup's [exec_limits] table.
	conf = append([]byte("disk_quota = \"16MiB\"\ndisk_reserve = \"4MiB\"\n"), conf...)
	// The limits of limitsSetup would stop the writer first: lift them.
	conf = []byte(strings.Replace(string(conf), "memory = \"64MiB\"", "memory = \"512MiB\"", 1))
	if err := os.WriteFile(filepath.Join(home, "paddock.toml"), conf, 0o600); err != nil {
		t.Fatal(err)
	}
	startDaemon(t, bin, home)
	c := cli{t: t, bin: bin, home: home}
	waitDaemon(t, c)
	c.must(nil, "project", "add", repo, "--name", "vm")
	var run struct {
		ID        string `json:"id"`
		Workspace struct {
			Kind string `json:"kind"`
		} `json:"workspace"`
	}
	c.must(&run, "create", "--project", "vm", "--kind", "overlay", "--json")
	res := c.exec(t, run.ID, "--", "sh", "-c", "head -c 40000000 /dev/zero > big; echo rc=$?; ls -l big")
	var full struct {
		Enforcement struct {
			Disk string `json:"disk"`
		} `json:"enforcement"`
		Killed string `json:"killed"`
	}
	out, _ := c.run("exec", run.ID, "--json", "--", "true")
	json.Unmarshal([]byte(out), &full)
	t.Logf("40 MB into a 16 MiB quota: exit %d, stdout %q, stderr %q, killed %q; disk: %s", res.ExitCode, res.Stdout, res.Stderr, res.Killed, full.Enforcement.Disk)
	if !strings.Contains(res.Stderr, "quota") || strings.Contains(res.Stdout, "rc=0") {
		t.Errorf("a write past the run's quota did not fail with EDQUOT: %q %q", res.Stdout, res.Stderr)
	}
	if res.Killed != "" {
		t.Errorf("the kernel refused the write, yet the command was killed: %s", res.Killed)
	}
	if !strings.Contains(full.Enforcement.Disk, "project quota") {
		t.Errorf("the record does not say the file system's quota held: %q", full.Enforcement.Disk)
	}
	if ok := c.exec(t, run.ID, "--", "sh", "-c", "rm -f big && head -c 1000000 /dev/zero > small && echo ok"); strings.TrimSpace(ok.Stdout) != "ok" {
		t.Errorf("after removing the file the run could not write: %+v", ok)
	}
}
