package sandbox

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The test binary is the helper too: Run re-executes /proc/self/exe.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == HelperArg {
		HelperMain()
	}
	os.Exit(m.Run())
}

// sandboxUID is who commands run as in tests: the test's own uid, or nobody
// when the tests run as root.
func sandboxUID() int {
	if os.Getuid() == 0 {
		return 65534
	}
	return os.Getuid()
}

// newWorkspace makes a workspace the sandbox user owns, inside a directory
// holding things it must never reach.
func newWorkspace(t *testing.T) (ws, outside string) {
	t.Helper()
	base := t.TempDir()
	os.Chmod(base, 0o755)
	os.Chmod(filepath.Dir(base), 0o755) // t.TempDir makes its parent 0700
	ws = filepath.Join(base, "ws")
	outside = filepath.Join(base, "outside")
	os.MkdirAll(filepath.Join(ws, ".git", "hooks"), 0o755)
	os.WriteFile(filepath.Join(ws, "README.md"), []byte("hello\n"), 0o644)
	os.WriteFile(filepath.Join(ws, ".git", "config"), []byte("[core]\n"), 0o644)
	os.MkdirAll(outside, 0o755)
	os.WriteFile(filepath.Join(outside, "secret"), []byte("OUTSIDE\n"), 0o644)
	uid := sandboxUID()
	filepath.Walk(ws, func(p string, fi os.FileInfo, err error) error {
		if err == nil {
			os.Lchown(p, uid, uid)
		}
		return nil
	})
	return ws, outside
}

// skipUnlessSandbox skips (or, under CI, fails) where this machine cannot run
// the sandbox at all, with the reason.
func skipUnlessSandbox(t *testing.T) {
	t.Helper()
	ws, _ := newWorkspace(t)
	_, err := Run(context.Background(), Spec{Argv: []string{"/bin/true"}, Workspace: ws, UID: sandboxUID(), Env: []string{"PATH=/usr/bin:/bin"}})
	if err != nil && strings.Contains(err.Error(), "unsupported") {
		if os.Getenv("CI") == "true" {
			t.Fatalf("the sandbox cannot run on this CI machine: %v", err)
		}
		t.Skipf("the sandbox cannot run here: %v", err)
	}
}

func run(t *testing.T, ws string, argv ...string) *Result {
	t.Helper()
	return runSpec(t, Spec{Argv: argv, Workspace: ws})
}

func runSpec(t *testing.T, spec Spec) *Result {
	t.Helper()
	if spec.UID == 0 {
		spec.UID = sandboxUID()
	}
	if spec.Env == nil {
		spec.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + spec.Workspace, "LANG=C"}
	}
	if spec.Protected == nil {
		spec.Protected = []string{".git"}
	}
	res, err := Run(context.Background(), spec)
	if err != nil {
		t.Fatalf("%v: %v", spec.Argv, err)
	}
	return res
}

func TestBasics(t *testing.T) {
	skipUnlessSandbox(t)
	ws, _ := newWorkspace(t)
	res := run(t, ws, "sh", "-c", "echo hi; id -u; hostname; pwd; cat README.md; echo err >&2; exit 3")
	t.Logf("%s\n%s\n%+v", res.Stdout, res.Stderr, res.Enforcement)
	if res.ExitCode != 3 || !strings.HasPrefix(string(res.Stdout), "hi\n") || string(res.Stderr) != "err\n" {
		t.Fatalf("result: %+v", res)
	}
}
