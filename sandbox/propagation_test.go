//go:build linux

package sandbox

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestSharedMountPropagation: where the daemon's mounts are shared (systemd
// makes every mount shared at boot), nothing the sandbox mounts (the
// protected paths, binds, a command's scratch layer) reaches the daemon's
// namespace or another command's. The tests that mount most run again in a
// child, in a mount namespace whose mounts are all shared, and its mounts
// are the same after as before. (Found in a VM booted with systemd: the
// workspace's mount, a clone of the daemon's, was its peer.)
func TestSharedMountPropagation(t *testing.T) {
	skipUnlessSandbox(t)
	if os.Getenv("PADDOCK_SHARED_PROPAGATION") != "" {
		t.Skip("the child of this test")
	}
	if os.Getuid() != 0 {
		t.Skip("needs root: it makes a mount namespace whose mounts are shared")
	}
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		t.Skip("no unshare (util-linux)")
	}
	dir := t.TempDir()
	script := `mount --make-rshared / && cat /proc/self/mountinfo > "$1/before" &&
		"$2" -test.run '^TestResident$/^(Basics|ReadOnlyRun|Binds|ProtectedPaths)$' -test.count=1 &&
		"$2" -test.run '^(TestFileBinds|TestLayerBinds|TestReadOnlyRun|TestOverlayWorkspace)$' -test.count=1 &&
		cat /proc/self/mountinfo > "$1/after"`
	cmd := exec.Command(unshare, "-m", "--propagation", "unchanged", "sh", "-c", script, "sh", dir, os.Args[0])
	cmd.Env = append(os.Environ(), "PADDOCK_SHARED_PROPAGATION=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the sandbox's tests with shared mounts: %v\n%s", err, out)
	}
	read := func(name string) []string {
		b, _ := os.ReadFile(filepath.Join(dir, name))
		return strings.Split(strings.TrimSpace(string(b)), "\n")
	}
	before, after := read("before"), read("after")
	var leaked []string
	for _, m := range after {
		if !slices.Contains(before, m) {
			leaked = append(leaked, m)
		}
	}
	if len(leaked) > 0 || len(before) == 0 {
		t.Fatalf("mounts leaked into the daemon's namespace:\n%s", strings.Join(leaked, "\n"))
	}
}
