package paddock_test

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestOtherSystems holds the Linux guard: built for another system, the
// packages that are not the sandbox's build, and the sandbox stops with
// its one sentence (sandbox/sandbox_other.go), not with a hundred
// undefined names.
func TestOtherSystems(t *testing.T) {
	if testing.Short() {
		t.Skip("compiles packages for darwin: not in -short")
	}
	// go test puts its own toolchain's bin first in the PATH.
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go command in the PATH (%v): cannot build for another system", err)
	}
	// One system stands for the others: freebsd builds as darwin does
	// (GOOS=freebsd go vet ./... says the same), and each costs a
	// standard library compiled anew on a cold cache.
	for _, goos := range []string{"darwin"} {
		build := func(pkgs ...string) (string, error) {
			cmd := exec.Command(goBin, append([]string{"build", "-o", os.DevNull}, pkgs...)...)
			cmd.Env = append(os.Environ(), "GOOS="+goos, "CGO_ENABLED=0")
			out, err := cmd.CombinedOutput()
			return string(out), err
		}
		if out, err := build("./confine", "./gitx", "./tools", "./changeset", "./apply", "./workspace"); err != nil {
			t.Errorf("GOOS=%s: the portable packages do not build: %v\n%s", goos, err, out)
		}
		out, err := build("./sandbox")
		if err == nil || !strings.Contains(out, "paddock's sandbox needs Linux") || strings.Count(out, "\n") > 2 {
			t.Errorf("GOOS=%s: building the sandbox says %v:\n%s\nwant only the guard's sentence", goos, err, out)
		}
	}
}
