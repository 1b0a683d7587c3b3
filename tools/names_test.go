package tools

import (
	"os"
	"path"
	"path/filepath"
	"testing"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/confine"
	"github.com/paddock-dev/paddock/confine/confinetest"
)

// TestProtectedNamesEveryOperation runs the table of names against every
// operation that changes the workspace: a spelling of protected
// configuration (case, depth, look-alike, invisible character, what Windows
// trims) is refused by each, whether it exists or not, and leaves nothing
// behind (not even a parent directory); the ordinary names beside them are
// written, edited, moved and deleted.
func TestProtectedNamesEveryOperation(t *testing.T) {
	f := newFixture(t)
	refused := func(tool string, args map[string]any, p string) {
		t.Helper()
		_, err := f.call(t, tool, args)
		if pe, ok := err.(*paddock.Error); !ok || pe.Rule != confine.RuleProtected {
			t.Errorf("%s %q: %v, want a protected_path refusal", tool, p, err)
		}
	}
	for _, n := range confinetest.Protected {
		p := n.Path
		// Not there yet: nothing may make it, nor its directories.
		dir := filepath.Join(f.ws, path.Dir(p))
		_, err := os.Lstat(dir)
		dirBefore := err == nil
		refused("write", map[string]any{"path": p, "content": "x"}, p)
		refused("move", map[string]any{"from": "a.txt", "to": p}, p)
		if _, err := os.Lstat(filepath.Join(f.ws, p)); err == nil {
			t.Fatalf("%q made", p)
		}
		if _, err := os.Lstat(dir); err == nil && !dirBefore {
			t.Errorf("%q: its directory was made", p)
		}
		// There already (the shell made it): nothing may change it.
		full := filepath.Join(f.ws, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte("old"), 0o644); err != nil {
			t.Fatal(err)
		}
		refused("write", map[string]any{"path": p, "content": "x"}, p)
		refused("edit", map[string]any{"path": p, "old_string": "old", "new_string": "new"}, p)
		refused("delete", map[string]any{"path": p}, p)
		refused("move", map[string]any{"from": p, "to": "moved"}, p)
		refused("move", map[string]any{"from": "a.txt", "to": p, "overwrite": true}, p)
		if b, err := os.ReadFile(full); err != nil || string(b) != "old" {
			t.Errorf("%q changed: %q %v", p, b, err)
		}
		// Reads stay allowed.
		if _, err := f.call(t, "read", map[string]any{"path": p}); err != nil {
			t.Errorf("read %q: %v", p, err)
		}
	}
	for _, n := range confinetest.Allowed {
		p := n.Path
		steps := []struct {
			tool string
			args map[string]any
		}{
			{"write", map[string]any{"path": p, "content": "old"}},
			{"edit", map[string]any{"path": p, "old_string": "old", "new_string": "new"}},
			{"move", map[string]any{"from": p, "to": "moved-away"}},
			{"move", map[string]any{"from": "moved-away", "to": p}},
			{"delete", map[string]any{"path": p}},
		}
		for _, s := range steps {
			if _, err := f.call(t, s.tool, s.args); err != nil {
				t.Errorf("%s %q (%s): %v", s.tool, p, n.Why, err)
				break
			}
		}
	}
}
