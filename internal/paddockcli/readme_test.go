package paddockcli

import (
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/paddock-dev/paddock"
)

// TestReadmeListsEveryVerb: the CLI reference, docs/CLI.md (README is a
// first page and links to it), names every verb `paddock --help` offers
// (and every project sub-verb) in its "Verbs" block, and its exit codes are
// the table exitCode maps errors to. A verb added without its line, or a
// code without its meaning, fails here rather than in a user's hands.
func TestReadmeListsEveryVerb(t *testing.T) {
	const ref = "docs/CLI.md"
	b, err := os.ReadFile("../../" + ref)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	_, verbs, ok := strings.Cut(doc, "\n## Verbs\n")
	if !ok {
		t.Fatalf("%s has no section \"Verbs\"", ref)
	}
	verbs, _, _ = strings.Cut(verbs, "\n## ")
	block := verbs
	if _, rest, ok := strings.Cut(verbs, "```"); ok {
		block, _, _ = strings.Cut(rest, "```")
	}
	a := &app{getenv: func(string) string { return "" }}
	for _, c := range rootCmd(a).Commands() {
		if c.Hidden || c.Name() == "help" {
			continue
		}
		if !regexp.MustCompile(`\bpaddock ` + regexp.QuoteMeta(c.Name()) + `\b`).MatchString(block) {
			t.Errorf("%s does not list paddock %s (%s)", ref, c.Name(), c.Short)
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
				t.Errorf("%s does not list paddock project %s (%s)", ref, sub.Name(), sub.Short)
			}
		}
	}
	_, codes, ok := strings.Cut(doc, "Exit codes:")
	if !ok {
		t.Fatalf("%s does not give the exit codes", ref)
	}
	codes, _, _ = strings.Cut(codes, "\n\n")
	for _, line := range strings.Split(exitCodesHelp, "\n")[1:] {
		var n int
		if _, err := fmt.Sscanf(strings.TrimSpace(line), "%d", &n); err != nil {
			t.Fatalf("exit code line %q", line)
		}
		if !regexp.MustCompile(fmt.Sprintf(`(^|[\s,:])%d [a-z]`, n)).MatchString(codes) {
			t.Errorf("%s's exit codes do not say what %d means (%s)", ref, n, strings.TrimSpace(line))
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
