package lifecycle

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
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

// TestProtectedInSkipsAbsentTops: protectedInUpper finds what a glob of
// every pattern finds, the patterns whose first name is not at the top
// skipped.
func TestProtectedInSkipsAbsentTops(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, f := range []string{".codex/config.toml", ".vscode/settings.json", "src/.envrc", "src/a/b.key", "top.key", ".envrc", "{odd}/x", ".claude/settings.local.json"} {
		os.MkdirAll(filepath.Join(dir, filepath.Dir(f)), 0o755)
		os.WriteFile(filepath.Join(dir, f), []byte("x"), 0o600)
	}
	patterns := append(slicesClone(confine.DefaultProtected), "**/*.key", "src/**/.envrc", `\{odd}/*`, "*.key", "missing/**")
	got := protectedInUpper(dir, patterns)
	var want []string // every pattern globbed
	fsys := os.DirFS(dir)
	for _, pat := range patterns {
		matches, _ := doublestar.Glob(fsys, pat, doublestar.WithNoFollow())
		for _, mt := range matches {
			if fi, err := fs.Stat(fsys, mt); err == nil && (fi.Mode().IsRegular() || fi.IsDir()) {
				want = append(want, filepath.ToSlash(mt))
			}
		}
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("protectedIn: %v\nwant %v", got, want)
	}
	for _, p := range []string{".codex", ".codex/config.toml", ".vscode/settings.json", ".envrc", "src/a/b.key", "top.key", "src/.envrc", ".claude/settings.local.json"} {
		if !slicesContains(got, p) {
			t.Errorf("%s is not among %v", p, got)
		}
	}
	if got := protectedInUpper(filepath.Join(dir, "nowhere"), patterns); len(got) != 0 {
		t.Fatalf("a missing root: %v", got)
	}
}

func slicesClone(s []string) []string { return append([]string(nil), s...) }
func slicesContains(s []string, v string) bool {
	return strings.Contains("\x00"+strings.Join(s, "\x00")+"\x00", "\x00"+v+"\x00")
}
