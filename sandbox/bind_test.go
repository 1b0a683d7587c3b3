//go:build linux

package sandbox

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestBinds: directories shown beside the workspace (a run's home, its git
// directory, the project's objects) are writable or read-only as asked, to
// the mount and to Landlock alike, and only where asked.
func TestBinds(t *testing.T) {
	skipUnlessSandbox(t)
	ws, _ := newWorkspace(t)
	base := filepath.Dir(ws)
	home, objects := filepath.Join(base, "home"), filepath.Join(base, "objects")
	for _, d := range []string{home, objects} {
		os.Mkdir(d, 0o755)
		os.Chown(d, sandboxUID(), sandboxUID())
	}
	os.WriteFile(filepath.Join(objects, "blob"), []byte("OBJECT\n"), 0o644)
	os.Chown(filepath.Join(objects, "blob"), sandboxUID(), sandboxUID())
	spec := Spec{Argv: []string{"sh", "-c", "echo hi > /home/paddock/made && cat /run/paddock/git/objects/blob && " +
		"(echo x > /run/paddock/git/objects/new && echo WROTE-RO) ; (echo x > /home/other && echo WROTE-OUTSIDE); true"},
		Workspace: ws, Binds: []Bind{{Source: home, Target: "/home/paddock"}, {Source: objects, Target: "/run/paddock/git/objects", ReadOnly: true}}}
	for _, byPath := range []bool{false, true} { // a root daemon's way, an unprivileged one's
		forcePathOpen = byPath
		res := runSpec(t, spec)
		forcePathOpen = false
		out := string(res.Stdout) + string(res.Stderr)
		if !strings.Contains(out, "OBJECT") || strings.Contains(out, "WROTE") {
			t.Fatalf("binds (by path %v): %s", byPath, out)
		}
		if b, _ := os.ReadFile(filepath.Join(home, "made")); string(b) != "hi\n" {
			t.Fatalf("a write in the writable bind did not land (by path %v)", byPath)
		}
		os.Remove(filepath.Join(home, "made"))
	}
	if _, err := os.Stat(filepath.Join(objects, "new")); err == nil {
		t.Fatal("a write in the read-only bind landed")
	}
	for _, bad := range []string{"/usr/x", "/tmp", ws + "/x", "relative", "/", "/proc"} {
		s := Spec{Argv: []string{"true"}, Workspace: ws, UID: sandboxUID(), Binds: []Bind{{Source: home, Target: bad}}}
		if err := prepare(&s); err == nil {
			t.Errorf("a bind on %s was accepted", bad)
		}
	}
}
