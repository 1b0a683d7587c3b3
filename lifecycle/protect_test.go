package lifecycle

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/bmatcuk/doublestar/v4"
	"github.com/paddock-dev/paddock/confine"
)

// TestProtectedAheadPaths: the default policy is enforceable ahead, path by
// path; a wildcard name protects its directory; what cannot be named ahead,
// and paths past the view's limit, are reported, not dropped in silence.
func TestProtectedAheadPaths(t *testing.T) {
	t.Parallel()
	paths, unenforced := protectedAhead(confine.DefaultProtected)
	want := []string{".git", ".claude", ".claude/hooks", ".codex", ".cursor", ".mcp.json", ".vscode/settings.json",
		".vscode/tasks.json", ".vscode/launch.json", ".vscode/mcp.json", ".devcontainer", ".devcontainer.json",
		".gemini", ".amazonq", ".roo", ".kiro", ".windsurf", ".continue", ".clinerules", ".opencode",
		".zed/settings.json", ".zed/tasks.json", ".zed/debug.json", ".exrc", ".vimrc", ".gvimrc", ".nvimrc",
		".nvim.lua", ".envrc", ".paddock"}
	if !reflect.DeepEqual(paths, want) || len(unenforced) != 0 {
		t.Fatalf("default policy: %v, unenforced %v", paths, unenforced)
	}
	paths, unenforced = protectedAhead([]string{"*.key", "**/secrets/*", "a/*/b", "config/app.yml", "deploy/*.sh"})
	if !reflect.DeepEqual(paths, []string{".git", "config/app.yml", "deploy"}) || len(unenforced) != 3 {
		t.Fatalf("paths %v, unenforced %v", paths, unenforced)
	}

	dir := t.TempDir()
	for i := 0; i < maxProtectedInSandbox+10; i++ {
		os.WriteFile(filepath.Join(dir, fmt.Sprintf("k%03d.key", i)), []byte("k"), 0o600)
	}
	paths, unenforced = protectedSpec([]string{"**/*.key"}, protectedIn(dir, []string{"**/*.key"}))
	if len(paths) != maxProtectedInSandbox || len(unenforced) != 2 || !strings.HasPrefix(unenforced[1], "more than 256") {
		t.Fatalf("%d paths, unenforced %v", len(paths), unenforced)
	}
}

// TestProtectedInCoversEveryMatch: what a glob of every pattern finds is
// made read-only by the view's spec, itself or a directory above it,
// though protectedIn globs only the patterns protectedAhead cannot name.
func TestProtectedInCoversEveryMatch(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, f := range []string{".codex/config.toml", ".vscode/settings.json", "src/.envrc", "src/a/b.key", "top.key", ".envrc",
		".claude/settings.local.json", ".claude/hooks/pre.sh", "deploy/run.sh", "a/x/b", ".zed/tasks.json"} {
		os.MkdirAll(filepath.Join(dir, filepath.Dir(f)), 0o755)
		os.WriteFile(filepath.Join(dir, f), []byte("x"), 0o600)
	}
	patterns := append(append([]string(nil), confine.DefaultProtected...), "**/*.key", "src/**/.envrc", "*.key", "missing/**", "deploy/*.sh", "a/*/b")
	paths, _ := protectedSpec(patterns, protectedIn(dir, patterns))
	covered := func(p string) bool {
		for _, q := range paths {
			if p == q || strings.HasPrefix(p, q+"/") {
				return true
			}
		}
		return false
	}
	fsys := os.DirFS(dir)
	n := 0
	for _, pat := range patterns {
		matches, _ := doublestar.Glob(fsys, pat, doublestar.WithNoFollow())
		for _, mt := range matches {
			n++
			if !covered(mt) {
				t.Errorf("%s (of %s) is not read-only in the view: %v", mt, pat, paths)
			}
		}
	}
	for _, p := range []string{"src/a/b.key", "top.key", "src/.envrc", "a/x/b", ".codex", ".claude/hooks", "deploy"} {
		if !slices.Contains(paths, p) {
			t.Errorf("%s is not among %v", p, paths)
		}
	}
	if n < 12 {
		t.Fatalf("only %d matches: the tree is not what the test means", n)
	}
}
