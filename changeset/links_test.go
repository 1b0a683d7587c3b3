package changeset_test

import (
	"strings"
	"testing"

	"github.com/paddock-dev/paddock/changeset"
	"github.com/paddock-dev/paddock/confine"
)

// TestNeverApplied: links are judged by where their target resolves from
// the link's own directory, with every folding the path rules know.
func TestNeverApplied(t *testing.T) {
	t.Parallel()
	pol := confine.DefaultPolicy()
	cases := []struct {
		path, target string
		want         string // a word of the reason; "" for applied
	}{
		{"ci-hooks", ".git/hooks", ".git"},
		{"a/b/x", "../../.git/hooks", ".git"},
		{"x", ".GIT", ".git"},
		{"x", "./.git/", ".git"},
		{"x", ".git.", ".git"},
		{"x", ".git ", ".git"},
		{"x", ".g\u0131t", ".git"},        // dotless i
		{"x", ".gi\u200bt/hooks", ".git"}, // zero-width space
		{"x", "GIT~1", ".git"},            // an 8.3 short name
		{"x", "vendor/mod/.git/config", ".git"},
		{"x", "sub/../.git", ".git"},
		{"sub/x", "..", ""},  // the root: reaching .git through it names .git
		{"x", ".git/..", ""}, // the root again
		{"x", ".claude", "protected"},
		{"x", ".Claude/Settings.json", "protected"},
		{"a/x", "../.claude/hooks", "protected"},
		{"x", ".vscode/tasks.json", "protected"},
		{"x", ".envrc", "protected"},
		{"x", "src/main.go", ""},
		{"x", "../outside", "out of the project"},
		{"a/x", "../../outside", "out of the project"},
		{"x", "/etc/passwd", "out of the project"},
		{"x", "docs", ""},
		{"a/b/x", "../c/file.go", ""},
	}
	for _, c := range cases {
		got := changeset.NeverApplied(c.path, true, c.target, pol)
		if (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
			t.Errorf("%s -> %q: %q, want %q", c.path, c.target, got, c.want)
		}
		if file := changeset.NeverApplied(c.path, false, c.target, pol); file != "" {
			t.Errorf("the file %s: %q", c.path, file)
		}
	}
	if got := changeset.NeverApplied("sub/.Git/config", false, "", pol); !strings.Contains(got, ".git") {
		t.Errorf("a path under .git: %q", got)
	}
	// A project's own policy.
	own := &confine.Policy{Protected: []string{"deploy/*.sh"}}
	if got := changeset.NeverApplied("x", true, "deploy/run.sh", own); !strings.Contains(got, "protected") {
		t.Errorf("a project's protected path: %q", got)
	}
	if got := changeset.NeverApplied("x", true, "deploy", own); !strings.Contains(got, "protected") {
		t.Errorf("a directory holding a project's protected path: %q", got)
	}
}
