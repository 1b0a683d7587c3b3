//go:build linux

package sandbox

import (
	"context"
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

// TestFileBinds: a file bound read-only over a file of the run's home (an
// agent's routing configuration) is read, and never written, truncated,
// removed or renamed, nor its directory, itself a mount point, renamed to
// put another file in its place; the rest of the home stays writable.
func TestFileBinds(t *testing.T) {
	skipUnlessSandbox(t)
	ws, _ := newWorkspace(t)
	base := filepath.Dir(ws)
	home, conf := filepath.Join(base, "home"), filepath.Join(base, "conf")
	os.MkdirAll(filepath.Join(home, ".claude"), 0o755)
	os.Mkdir(conf, 0o755)
	os.WriteFile(filepath.Join(home, ".claude", "settings.json"), []byte("{}\n"), 0o644)
	os.WriteFile(filepath.Join(conf, "settings.json"), []byte("PADDOCK'S\n"), 0o644)
	filepath.Walk(home, func(p string, _ os.FileInfo, err error) error { os.Lchown(p, sandboxUID(), sandboxUID()); return nil })
	script := `cd /home/paddock
cat .claude/settings.json
(echo x > .claude/settings.json) 2>/dev/null && echo WROTE
(: > .claude/settings.json) 2>/dev/null && echo TRUNCATED
rm -f .claude/settings.json 2>/dev/null; [ -e .claude/settings.json ] || echo REMOVED
mv .claude/settings.json .claude/old.json 2>/dev/null && echo MOVED
echo '{"mine":1}' > /tmp/s.json; mv /tmp/s.json .claude/settings.json 2>/dev/null && echo REPLACED
mv .claude .claude-away 2>/dev/null && echo DIR-MOVED
echo state > .claude/state.json && echo STATE-WRITTEN
cat .claude/settings.json`
	spec := Spec{Argv: []string{"sh", "-c", script}, Workspace: ws, Binds: []Bind{
		{Source: home, Target: "/home/paddock"},
		{Source: filepath.Join(home, ".claude"), Target: "/home/paddock/.claude"},
		{Source: filepath.Join(conf, "settings.json"), Target: "/home/paddock/.claude/settings.json", ReadOnly: true, File: true}}}
	for _, byPath := range []bool{false, true} {
		forcePathOpen = byPath
		res := runSpec(t, spec)
		forcePathOpen = false
		out := string(res.Stdout) + string(res.Stderr)
		if out != "PADDOCK'S\nSTATE-WRITTEN\nPADDOCK'S\n" {
			t.Fatalf("a read-only file bind (by path %v):\n%s", byPath, out)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(conf, "settings.json")); string(b) != "PADDOCK'S\n" {
		t.Fatalf("the bound file changed: %q", b)
	}
	dir := Spec{Argv: []string{"true"}, Workspace: ws, Binds: []Bind{{Source: conf, Target: "/home/x", File: true}}}
	if _, err := Run(context.Background(), withUID(dir)); err == nil {
		t.Error("a directory was bound as a file")
	}
}

func withUID(s Spec) Spec {
	s.UID = sandboxUID()
	s.Env = []string{"PATH=/usr/bin:/bin"}
	return s
}
