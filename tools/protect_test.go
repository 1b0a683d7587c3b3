package tools

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/confine"
)

// TestProtectedPaths: writes under anything that folds to .git, and to agent
// or editor configuration, are refused, whether or not the path exists, and
// through links too. Reads stay allowed.
func TestProtectedPaths(t *testing.T) {
	f := newFixture(t)
	os.MkdirAll(filepath.Join(f.ws, ".git", "hooks"), 0o755)
	os.WriteFile(filepath.Join(f.ws, ".git", "config"), []byte("[core]\n"), 0o644)
	os.MkdirAll(filepath.Join(f.ws, ".vscode"), 0o755)
	os.WriteFile(filepath.Join(f.ws, ".vscode", "settings.json"), []byte("{}"), 0o644)
	os.Symlink(".git", filepath.Join(f.ws, "gitlink"))
	os.Symlink(".vscode/settings.json", filepath.Join(f.ws, "settings-link"))
	refused := []string{
		".git/config", ".git/hooks/post-checkout", ".git", ".GIT/config", ".Git/HEAD",
		".git./config", ".git /config", ".git. . /config", ".git::$INDEX_ALLOCATION/config",
		"git~1/config", "GIT~2/x", "sub/.git/config", "sub/deep/.git",
		"\uff0egit/config",           // full-width full stop
		".\uff47\uff49\uff54/config", // full-width g i t
		".g\u200cit/config",          // zero-width non-joiner (ignored by HFS+)
		".gi\u200dt/hooks/x",         // zero-width joiner
		"\ufeff.git/config",          // byte-order mark
		".\u0261it/config",           // Latin script g
		".g\u0456t/config",           // Cyrillic i
		".gi\u0442/config",           // Cyrillic te
		"gitlink/config",             // a link into .git
		".claude/settings.json", ".claude/settings.local.json", ".CLAUDE/Settings.json",
		".codex/config.toml", ".cursor/rules/x.mdc", ".mcp.json", ".vscode/settings.json",
		".vscode/tasks.json", ".envrc", "settings-link", ".devcontainer/devcontainer.json",
		".paddock/inbox/x.txt",
	}
	for _, p := range refused {
		for _, call := range []struct {
			tool string
			args map[string]any
		}{
			{"write", map[string]any{"path": p, "content": "x"}},
			{"edit", map[string]any{"path": p, "old_string": "core", "new_string": "x"}},
			{"delete", map[string]any{"path": p, "recursive": true}},
			{"move", map[string]any{"from": "a.txt", "to": p}},
		} {
			_, err := f.call(t, call.tool, call.args)
			pe, ok := err.(*paddock.Error)
			if !ok || pe.Rule != confine.RuleProtected {
				t.Errorf("%s %q: %v, want a protected_path refusal", call.tool, p, err)
			}
		}
	}
	// Moving a protected file away, or a directory holding one, is refused too.
	for _, from := range []string{".vscode/settings.json", ".vscode", ".git"} {
		if _, err := f.call(t, "move", map[string]any{"from": from, "to": "elsewhere"}); err == nil {
			t.Errorf("move from %s allowed", from)
		}
	}
	// Not protected: look-alikes that no file system or eye would confuse.
	for _, p := range []string{"git/config", ".gitignore", ".github/workflows/ci.yml", ".gitx", "a.git", ".claude/agents.md", ".vscode/extensions.json"} {
		if _, err := f.call(t, "write", map[string]any{"path": p, "content": "x"}); err != nil {
			t.Errorf("write %q refused: %v", p, err)
		}
	}
	// Reads of protected paths are allowed.
	if _, err := f.call(t, "read", map[string]any{"path": ".git/config"}); err != nil {
		t.Errorf("read .git/config: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(f.ws, ".git", "config")); string(b) != "[core]\n" {
		t.Fatal(".git/config changed")
	}
}

// TestProtectedPolicyIsConfigurable: a project can add patterns or drop the defaults.
func TestProtectedPolicyIsConfigurable(t *testing.T) {
	f := newFixture(t)
	r, err := confine.Open(f.ws, &confine.Policy{Protected: []string{"secrets/**"}})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	f.root = r
	if _, err := f.call(t, "write", map[string]any{"path": "secrets/key", "content": "x"}); err == nil {
		t.Error("custom pattern not applied")
	}
	if _, err := f.call(t, "write", map[string]any{"path": ".envrc", "content": "x"}); err != nil {
		t.Errorf("dropped default still applied: %v", err)
	}
	if _, err := f.call(t, "write", map[string]any{"path": ".git/config", "content": "x"}); err == nil {
		t.Error(".git rule dropped with the defaults")
	}
	if err := (&confine.Policy{Protected: []string{"[bad"}}).Validate(); err == nil {
		t.Error("invalid pattern accepted")
	}
}
