package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/gitx/gittest"
)

// TestRunVerb: paddock run, as a developer types it in a repository: the
// project registered on first use, the command run in a new run, its change
// set and checks shown, then submitted for review (no terminal), or
// approved and applied at the terminal's prompt; a command that changed
// nothing leaves nothing behind; a failing one's exit code comes back.
func TestRunVerb(t *testing.T) {
	base := t.TempDir()
	home := filepath.Join(base, "home")
	repo := gittest.NewRepo(t, filepath.Join(base, "src", "calc"), map[string]string{
		"go.mod":       "module example.com/calc\n\ngo 1.22\n",
		"calc.go":      "package calc\n\nfunc Add(a, b int) int { return a + b }\n",
		"calc_test.go": "package calc\n\nimport \"testing\"\n\nfunc TestAdd(t *testing.T) {\n\tif Add(2, 2) != 4 {\n\t\tt.Fatal(Add(2, 2))\n\t}\n}\n",
	})
	startDaemon(t, home)

	// No terminal: submitted for review, with the command that approves it.
	r := cli(t, home, "run", "--project", filepath.Join(repo, "."), "--", "sh", "-c", "echo 'package calc\n\n// Sub subtracts.\nfunc Sub(a, b int) int { return a - b }' > sub.go")
	if r.code != 0 || !strings.Contains(r.out, "sub.go") || !strings.Contains(r.out, "submitted for review: paddock approve") || !strings.Contains(r.err, "paddock: ran go") {
		t.Fatalf("run: %d\n%s\n%s", r.code, r.out, r.err)
	}
	if ps := decode[[]*paddock.Project](t, cli(t, home, "project", "ls", "--json")); len(ps) != 1 || ps[0].Root != repo {
		t.Fatalf("projects: %+v", ps)
	}
	m := regexp.MustCompile(`paddock approve (r-\S+) --hash (\S+)`).FindStringSubmatch(r.out)
	if m == nil || !strings.Contains(r.out, "change set "+m[2]+": passed") {
		t.Fatalf("the change set's checks: %s", r.out)
	}
	cli(t, home, "approve", m[1], "--hash", m[2]).must(t)

	// Nothing changed: nothing kept.
	if r := cli(t, home, "run", "--project", repo, "--", "true"); r.code != 0 || !strings.Contains(r.err, "changed nothing") {
		t.Fatalf("a run that changes nothing: %d %s", r.code, r.err)
	}
	// The command's failure is the verb's exit code; its work is still up
	// for review.
	if r := cli(t, home, "run", "--project", repo, "--no-verify", "--", "sh", "-c", "echo half > half.txt; exit 3"); r.code != 3 || !strings.Contains(r.out, "half.txt") {
		t.Fatalf("a failing command: %d %s %s", r.code, r.out, r.err)
	}

	// At a terminal: approve and apply to a branch, from the prompt.
	out := cliOnTerminalIn(t, home, "a\n", "run", "--project", repo, "--no-verify", "--apply", "branch=feature", "--", "sh", "-c", "echo from-the-agent > agent.txt")
	if !strings.Contains(out, "[a]pprove and apply, [r]eject, or [k]eep for later?") || !strings.Contains(out, "applied to") {
		t.Fatalf("the prompt:\n%s", out)
	}
	if got := gittest.Git(t, repo, "show", "feature:agent.txt"); got != "from-the-agent" {
		t.Fatalf("the branch holds %q", got)
	}
	// The checkout itself was never written.
	if _, err := os.Stat(filepath.Join(repo, "agent.txt")); !os.IsNotExist(err) {
		t.Fatalf("the checkout got agent.txt: %v", err)
	}
	// Reject at the prompt: the run is gone from the listing's live runs.
	out = cliOnTerminalIn(t, home, "r\n", "run", "--project", repo, "--no-verify", "--", "sh", "-c", "echo no > no.txt")
	if !strings.Contains(out, "rejected r-") {
		t.Fatalf("reject at the prompt:\n%s", out)
	}
	if r := cli(t, home, "run", "--project", base, "--", "true"); r.code != execFailed || !strings.Contains(r.err, "not in a git repository") {
		t.Fatalf("outside a repository: %d %s", r.code, r.err)
	}
}
