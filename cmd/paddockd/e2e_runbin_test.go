package main

import (
	"debug/buildinfo"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/gitx/gittest"
	"github.com/paddock-dev/paddock/internal/paddockcli"
)

// isCLI reports whether the binary at path is a build of the CLI
// (cmd/paddock).
func isCLI(t *testing.T, path string) bool {
	t.Helper()
	bi, err := buildinfo.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return paddockcli.IsCLIBuild(bi)
}

// TestRunsGetTheCLI: a run's view holds the CLI beside paddockd, as the
// operator's install does, when the CLI is this build's: the paddock an
// agent's shell calls inside the run is the fast one, and what it does not
// hold (paddock mcp, an agent's MCP server) it hands to the paddockd beside
// it there. A CLI of another build beside the daemon is not shown: runs
// then get paddockd as their paddock.
func TestRunsGetTheCLI(t *testing.T) {
	base := t.TempDir()
	home := filepath.Join(base, "home")
	repo := gittest.NewRepo(t, filepath.Join(base, "src", "app"), map[string]string{"README.md": "hello\n"})
	startDaemon(t, home)
	if !isCLI(t, filepath.Join(home, "bin", "paddock")) || isCLI(t, filepath.Join(home, "bin", daemonName)) {
		t.Fatalf("<state>/bin holds paddock (want the CLI) and %s (want the whole binary) the other way round", daemonName)
	}
	cli(t, home, "project", "add", repo, "--name", "app").must(t)
	run := decode[paddock.Run](t, cli(t, home, "create", "--project", "app", "--json"))
	script := `p=/run/paddock/bin/paddock
$p tools "$PADDOCK_RUN" >/dev/null && echo TOOLS
$p mcp --help | grep -q 'MCP' && echo MCP-HELP
test -x /run/paddock/bin/paddockd && echo PADDOCKD`
	r := cli(t, home, "exec", run.ID, "--", "sh", "-c", script)
	for _, want := range []string{"TOOLS", "MCP-HELP", "PADDOCKD"} {
		if !strings.Contains(r.out, want) {
			t.Errorf("inside the run, want %q in:\n%s\n%s", want, r.out, r.err)
		}
	}

	// A paddock beside the daemon that is not this build's CLI (here, the
	// whole binary under the CLI's name): runs get paddockd as paddock.
	dir := filepath.Join(base, "other")
	os.MkdirAll(dir, 0o755)
	whole, err := os.ReadFile(filepath.Join(filepath.Dir(binary), daemonName))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{daemonName, "paddock"} {
		if err := os.WriteFile(filepath.Join(dir, name), whole, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	home2 := filepath.Join(base, "home2")
	d := startDaemonWith(t, home2, filepath.Join(dir, daemonName))
	if isCLI(t, filepath.Join(home2, "bin", "paddock")) {
		t.Error("a daemon beside a paddock that is not its CLI showed runs that paddock")
	}
	if log, _ := os.ReadFile(d.log.Name()); !strings.Contains(string(log), "not a build of cmd/paddock") {
		t.Errorf("the daemon did not say why runs get its own binary:\n%s", log)
	}
}
