package paddockcli

import (
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/paddock-dev/paddock"
)

// TestReadmeListsEveryVerb: the README's "CLI at a glance" names every verb
// `paddock --help` offers (and every project sub-verb), and its exit codes
// are the table exitCode maps errors to. A verb added without its line, or
// a code without its meaning, fails here rather than in a user's hands.
func TestReadmeListsEveryVerb(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	_, glance, ok := strings.Cut(readme, "## The CLI at a glance")
	if !ok {
		t.Fatal("README has no section \"The CLI at a glance\"")
	}
	glance, _, _ = strings.Cut(glance, "\n## ")
	block := glance
	if _, rest, ok := strings.Cut(glance, "```"); ok {
		block, _, _ = strings.Cut(rest, "```")
	}
	a := &app{getenv: func(string) string { return "" }}
	for _, c := range a.rootCmd().Commands() {
		if c.Hidden || c.Name() == "help" {
			continue
		}
		if !regexp.MustCompile(`\bpaddock ` + regexp.QuoteMeta(c.Name()) + `\b`).MatchString(block) {
			t.Errorf("README's CLI at a glance does not list paddock %s (%s)", c.Name(), c.Short)
		}
		if c.Name() != "project" {
			continue
		}
		var project []string
		for _, line := range strings.Split(block, "\n") {
			if strings.HasPrefix(line, "paddock project ") {
				project = append(project, line)
			}
		}
		for _, sub := range c.Commands() {
			if !sub.Hidden && sub.Name() != "help" && !regexp.MustCompile(`\b`+regexp.QuoteMeta(sub.Name())+`\b`).MatchString(strings.Join(project, "\n")) {
				t.Errorf("README's CLI at a glance does not list paddock project %s (%s)", sub.Name(), sub.Short)
			}
		}
	}
	_, codes, ok := strings.Cut(glance, "Exit codes:")
	if !ok {
		t.Fatal("README's CLI at a glance does not give the exit codes")
	}
	codes, _, _ = strings.Cut(codes, "\n\n")
	for _, line := range strings.Split(exitCodesHelp, "\n")[1:] {
		var n int
		if _, err := fmt.Sscanf(strings.TrimSpace(line), "%d", &n); err != nil {
			t.Fatalf("exit code line %q", line)
		}
		if !regexp.MustCompile(fmt.Sprintf(`(^|[\s,:])%d [a-z]`, n)).MatchString(codes) {
			t.Errorf("README's exit codes do not say what %d means (%s)", n, strings.TrimSpace(line))
		}
	}
}

// TestEveryCodeHasAnExitCode: every error code a daemon answers is one of
// the table's exit codes, internal's alone being 1; a missing or unknown
// token (unauthorized, 401) exits as forbidden does.
func TestEveryCodeHasAnExitCode(t *testing.T) {
	for _, c := range paddock.Codes {
		got := exitCode(paddock.Errorf(c, "x"))
		if (got == exitInternal) != (c == paddock.CodeInternal) {
			t.Errorf("%s exits %d", c, got)
		}
	}
	if got := exitCode(fmt.Errorf("GET /v1/runs: %w", paddock.Errorf(paddock.CodeUnauthorized, "unknown token"))); got != exitForbidden {
		t.Errorf("unauthorized exits %d, want %d", got, exitForbidden)
	}
}
