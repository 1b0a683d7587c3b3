//go:build linux

package sandbox

import (
	"context"
	"fmt"
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

// TestLayerBinds: a bind that is a copy-on-write layer (a shared cache) is
// writable in the view, per-exec and resident alike; the shared directory
// never changes; the run's writes are its next command's, and another
// run's layer, over the same directory, sees the shared entries and none
// of them. A command that finds the layer held by the run's harness gets
// one of its own, in memory, which ends with it.
func TestLayerBinds(t *testing.T) {
	skipUnlessSandbox(t)
	ws, _ := newWorkspace(t)
	base := filepath.Dir(ws)
	shared := filepath.Join(base, "shared")
	os.MkdirAll(filepath.Join(shared, "ab"), 0o755)
	os.WriteFile(filepath.Join(shared, "ab", "entry"), []byte("SHARED\n"), 0o644)
	os.WriteFile(filepath.Join(shared, "gone"), []byte("GONE\n"), 0o644)
	filepath.Walk(shared, func(p string, _ os.FileInfo, err error) error { os.Lchown(p, sandboxUID(), sandboxUID()); return nil })
	before := treeOf(t, shared)
	const cache = "/home/paddock/.cache/go-build"
	write := "cd " + cache + " && cat ab/entry && echo mine > ab/new && echo changed >> ab/entry && mkdir -p cd/ef && echo deep > cd/ef/x && rm gone && echo WROTE"
	read := "cd " + cache + " && cat ab/entry ab/new cd/ef/x; ls gone 2>/dev/null; true"
	layerSpec := func(upper, script string) Spec {
		return Spec{Argv: []string{"sh", "-c", script}, Workspace: ws, UID: sandboxUID(), Env: []string{"PATH=/usr/bin:/bin"},
			Protected: []string{".git"}, Binds: []Bind{{Source: shared, Target: cache, Upper: upper}}}
	}
	mustOut := func(res *Result, err error, want, what string) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if out := string(res.Stdout) + string(res.Stderr); out != want {
			t.Fatalf("%s: exit %d, %q, want %q", what, res.ExitCode, out, want)
		}
	}
	ctx := context.Background()
	for _, byPath := range []bool{false, true} { // a root daemon's way, an unprivileged one's
		forcePathOpen = byPath
		upper := filepath.Join(base, fmt.Sprintf("layer-%v", byPath))
		res, err := Run(ctx, layerSpec(upper, write))
		mustOut(res, err, "SHARED\nWROTE\n", fmt.Sprintf("per-exec write (by path %v)", byPath))
		res, err = Run(ctx, layerSpec(upper, read))
		mustOut(res, err, "SHARED\nchanged\nmine\ndeep\n", fmt.Sprintf("per-exec, the next command (by path %v)", byPath))
		if b, _ := os.ReadFile(filepath.Join(upper, "upper", "ab", "new")); string(b) != "mine\n" {
			t.Fatalf("the run's write is not in its layer (by path %v)", byPath)
		}
		// Another run's layer over the same cache.
		res, err = Run(ctx, layerSpec(filepath.Join(base, fmt.Sprintf("other-%v", byPath)), "cd "+cache+" && cat ab/entry gone && ls ab && ls -d cd 2>/dev/null; true"))
		mustOut(res, err, "SHARED\nGONE\nentry\n", "another run's layer")
		forcePathOpen = false
	}
	if after := treeOf(t, shared); after != before {
		t.Fatalf("the shared directory changed:\n%s\nwas:\n%s", after, before)
	}

	// Resident: the harness holds the layer, its commands share it.
	p := &Pool{Dir: t.TempDir()}
	defer p.Close()
	upper := filepath.Join(base, "layer-resident")
	first, err := p.Run(ctx, "r-layer", layerSpec(upper, write))
	mustOut(first, err, "SHARED\nWROTE\n", "resident write")
	res, err := p.Run(ctx, "r-layer", layerSpec(upper, read))
	mustOut(res, err, "SHARED\nchanged\nmine\ndeep\n", "resident, the next command")
	if res.Enforcement.Mode != "resident" || res.Enforcement.HarnessPID != first.Enforcement.HarnessPID {
		t.Fatalf("not one harness: %+v, %+v", first.Enforcement, res.Enforcement)
	}
	// Beside it, a command of the run in a sandbox of its own gets a layer
	// in memory: writable, over the shared directory alone, gone after.
	res, err = Run(ctx, layerSpec(upper, "cd "+cache+" && cat ab/entry && echo aside > aside && cat aside && ls ab"))
	mustOut(res, err, "SHARED\naside\nentry\n", "a command beside the harness")
	if _, err := os.Stat(filepath.Join(upper, "upper", "aside")); err == nil {
		t.Fatal("a command beside the harness wrote the harness's layer")
	}
	res, err = p.Run(ctx, "r-layer", layerSpec(upper, "cd "+cache+" && ls"))
	mustOut(res, err, "ab\ncd\n", "resident, after a command beside it")
	if after := treeOf(t, shared); after != before {
		t.Fatalf("the shared directory changed:\n%s\nwas:\n%s", after, before)
	}

	for _, bad := range []Bind{
		{Source: shared, Target: cache, Upper: "relative"},
		{Source: shared, Target: cache, Upper: filepath.Join(shared, "in")},
		{Source: shared, Target: cache, Upper: upper, ReadOnly: true},
	} {
		s := Spec{Argv: []string{"true"}, Workspace: ws, UID: sandboxUID(), Binds: []Bind{bad}}
		if err := prepare(&s); err == nil {
			t.Errorf("a layer %+v was accepted", bad)
		}
	}
}

// treeOf lists the files under dir with their contents.
func treeOf(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		fmt.Fprintf(&b, "%s %v", strings.TrimPrefix(p, dir), fi.Mode())
		if fi.Mode().IsRegular() {
			c, _ := os.ReadFile(p)
			fmt.Fprintf(&b, " %q", c)
		}
		b.WriteString("\n")
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}
