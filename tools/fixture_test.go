package tools

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/paddock-dev/paddock/confine"
	"github.com/paddock-dev/paddock/gitx/gittest"
)

const secret = "OUTSIDE-SECRET"

// fixture is a workspace beside things it must never reach.
type fixture struct {
	base, ws, outside, evil string
	root                    *confine.Root
}

// newFixture builds:
//
//	base/outside/secret.txt, base/outside/dir/x   what must never be reached
//	base/ws-evil/secret                           the sibling-prefix directory
//	base/ws/                                      the workspace, with links out
func newFixture(t testing.TB) *fixture {
	t.Helper()
	base := t.TempDir()
	f := &fixture{base: base, ws: filepath.Join(base, "ws"), outside: filepath.Join(base, "outside"), evil: filepath.Join(base, "ws-evil")}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range []string{f.ws + "/sub/deep", f.outside + "/dir", f.evil} {
		must(os.MkdirAll(d, 0o755))
	}
	must(os.WriteFile(f.outside+"/secret.txt", []byte(secret+"\n"), 0o644))
	must(os.WriteFile(f.outside+"/dir/x", []byte(secret+"\n"), 0o644))
	must(os.WriteFile(f.evil+"/secret", []byte(secret+"\n"), 0o644))
	must(os.WriteFile(f.ws+"/a.txt", []byte("alpha\nbeta\ngamma\n"), 0o644))
	must(os.WriteFile(f.ws+"/sub/b.txt", []byte("inside b\n"), 0o644))
	must(os.WriteFile(f.ws+"/sub/deep/c.go", []byte("package deep\n"), 0o644))
	links := map[string]string{
		"link-file":  "../outside/secret.txt",
		"link-abs":   f.outside + "/secret.txt",
		"link-dir":   "../outside",
		"chain1":     "chain2",
		"chain2":     "sub/../../outside/secret.txt",
		"dangling":   "../outside/newfile",
		"loop":       "loop",
		"abs-inside": f.ws + "/a.txt",
		"proc-root":  "/proc/self/root",
		"proc-cwd":   "/proc/self/cwd",
		"evil-link":  "../ws-evil",
		"ok-link":    "sub/b.txt",
	}
	for name, target := range links {
		must(os.Symlink(target, filepath.Join(f.ws, name)))
	}
	must(syscall.Mkfifo(f.ws+"/fifo", 0o644))
	if os.Geteuid() == 0 {
		must(syscall.Mknod(f.ws+"/dev", syscall.S_IFCHR|0o644, 1<<8|3)) // like /dev/null
	}
	must(os.Link(f.outside+"/secret.txt", f.ws+"/hardlink"))
	r, err := confine.Open(f.ws, nil)
	must(err)
	t.Cleanup(func() { r.Close() })
	f.root = r
	return f
}

// outsideDigest fingerprints everything the workspace must not touch.
func (f *fixture) outsideDigest(t testing.TB) string {
	a, _ := gittest.TreeDigest(t, f.outside)
	b, _ := gittest.TreeDigest(t, f.evil)
	return a + b
}

func (f *fixture) call(t testing.TB, name string, args map[string]any) (any, error) {
	t.Helper()
	tool, ok := registry[name]
	if !ok {
		t.Fatalf("no tool %s", name)
	}
	raw, _ := json.Marshal(args)
	res, _, err := tool.Call(context.Background(), f.root, raw)
	if err != nil {
		return nil, err
	}
	return res, nil
}

func leaks(res any) bool {
	b, _ := json.Marshal(res)
	return strings.Contains(string(b), secret) || strings.Contains(string(b), "T1VUU0lERS1TRUNSRVQ") // base64
}
