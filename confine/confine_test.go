package confine

import (
	"testing"

	"github.com/paddock-dev/paddock"
)

func TestRel(t *testing.T) {
	r := &Root{dir: "/state/ws"}
	for in, want := range map[string]string{
		"a": "a", "./a": "a", "a/b/../c": "a/c", "a//b": "a/b", ".": ".", "a/": "a",
		"/state/ws": ".", "/state/ws/": ".", "/state/ws/a/b": "a/b", "/state/ws/../ws/a": "a",
	} {
		if got, err := r.Rel(in); err != nil || got != want {
			t.Errorf("Rel(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for in, rule := range map[string]string{
		"": RuleInvalidPath, "a\x00": RuleInvalidPath, "..": RuleOutside, "../x": RuleOutside,
		"a/../../x": RuleOutside, "/state/ws-evil/x": RuleOutside, "/state/wsx": RuleOutside,
		"/state": RuleOutside, "/etc/passwd": RuleOutside, string(make([]byte, MaxPath+1)): RuleInvalidPath,
	} {
		_, err := r.Rel(in)
		pe, ok := err.(*paddock.Error)
		if !ok || pe.Details["rule"] != rule {
			t.Errorf("Rel(%q) = %v, want rule %s", in, err, rule)
		}
	}
}

func TestIsDotGit(t *testing.T) {
	yes := []string{".git", ".GIT", ".Git", ".git.", ".git ", ".git. .", ".git::$INDEX_ALLOCATION", "git~1", "GIT~9",
		"\uff0egit", ".\uff47\uff49\uff54", ".g\u200cit", ".gi\u200dt", "\ufeff.git", ".\u0261it", ".g\u0456t", ".gi\u0442",
		".g\u00adit", ".git\u200b"}
	no := []string{"git", ".gitignore", ".github", "git~0", "git~10", "x.git", ".gi", ".gitt", "..git", ".g it"}
	for _, s := range yes {
		if !IsDotGit(s) {
			t.Errorf("IsDotGit(%q) = false", s)
		}
	}
	for _, s := range no {
		if IsDotGit(s) {
			t.Errorf("IsDotGit(%q) = true", s)
		}
	}
}

func TestPolicyMatch(t *testing.T) {
	p := DefaultPolicy()
	for _, s := range []string{".git/config", "a/.GIT/x", ".claude/settings.json", ".Claude/SETTINGS.local.json",
		".vscode/tasks.json", ".envrc", ".codex", ".codex/a", ".vscode", ".claude"} {
		if p.Match(s) == "" {
			t.Errorf("%s not protected", s)
		}
	}
	for _, s := range []string{"src/main.go", ".vscode/extensions.json", "docs/.envrc.md", ".claude/agents/x.md"} {
		if why := p.Match(s); why != "" {
			t.Errorf("%s protected: %s", s, why)
		}
	}
}

func TestPolicyHooks(t *testing.T) {
	p := &Policy{Hooks: []string{"scripts/git"}}
	for _, s := range []string{"scripts/git", "scripts/git/pre-commit", "Scripts/GIT/post-checkout", "scripts", "scripts/git/new/deep"} {
		if p.Match(s) == "" || p.MatchHooks(s) == "" {
			t.Errorf("%s not protected", s)
		}
	}
	for _, s := range []string{"scripts/gitx", "scripts/other.sh", "src/scripts/git/pre-commit", "pre-commit"} {
		if why := p.Match(s); why != "" {
			t.Errorf("%s protected: %s", s, why)
		}
	}
	top := &Policy{Hooks: []string{"."}}
	if top.Match("pre-commit") == "" || top.Match("Post-Checkout") == "" || top.Match("README.md") != "" || top.Match("src") != "" {
		t.Error("hooks at the top: only git's hook names are protected")
	}
}
