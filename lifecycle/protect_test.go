package lifecycle

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

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
