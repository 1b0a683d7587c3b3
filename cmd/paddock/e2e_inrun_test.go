package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/gitx/gittest"
)

// TestAgentInsideARun: a run's commands find their own run through the
// socket and the binary the daemon shows them, with no network and no
// token: paddock's CLI inside the run writes through the broker (an
// agent's recorded call), and is refused the operator's verbs and other
// runs.
func TestAgentInsideARun(t *testing.T) {
	base := t.TempDir()
	home := filepath.Join(base, "home")
	repo := gittest.NewRepo(t, filepath.Join(base, "src", "app"), map[string]string{"README.md": "hello\n"})
	startDaemon(t, home)
	cli(t, home, "project", "add", repo, "--name", "app").must(t)
	run := decode[paddock.Run](t, cli(t, home, "create", "--project", "app", "--json"))
	other := decode[paddock.Run](t, cli(t, home, "create", "--project", "app", "--json"))

	script := `p=/run/paddock/bin/paddock
echo "run=$PADDOCK_RUN socket=$PADDOCK_SOCKET"
$p tool "$PADDOCK_RUN" write --arg path=inside.txt --arg content=through-the-socket >/dev/null && echo WROTE
$p approve "$PADDOCK_RUN" --hash sha256:` + strings.Repeat("0", 64) + ` 2>&1
$p tools ` + other.ID + ` 2>&1
$p ls 2>&1
$p --addr 127.0.0.1:1 tools "$PADDOCK_RUN" >/dev/null 2>&1 || echo "NO TOKEN FILE"
cat "$PADDOCK_MCP_CONFIG"
rm -f /run/paddock/api/paddock.sock 2>/dev/null || echo "SOCKET KEPT"
`
	r := cli(t, home, "exec", run.ID, "--", "sh", "-c", script)
	for _, want := range []string{
		"run=" + run.ID + " socket=/run/paddock/api/paddock.sock",
		"WROTE",
		"does not reach POST /v1/runs/{id}/approve",
		"run " + run.ID + "'s agent (its token, or its own socket), not " + other.ID + "'s",
		"does not reach GET /v1/runs;",
		"NO TOKEN FILE",
		`"command": "/run/paddock/bin/paddock"`,
		"SOCKET KEPT",
	} {
		if !strings.Contains(r.out, want) {
			t.Errorf("inside the run, want %q in:\n%s\n%s", want, r.out, r.err)
		}
	}
	// The write is the agent's, in the run's change set and event log.
	cs := decode[paddock.ChangeSet](t, cli(t, home, "diff", run.ID, "--json"))
	if len(cs.Entries) != 1 || cs.Entries[0].Path != "inside.txt" {
		t.Fatalf("the change set after a write from inside: %+v", cs.Entries)
	}
	events := cli(t, home, "events", run.ID, "--json").must(t).out
	if !strings.Contains(events, `"tool":"write"`) && !strings.Contains(events, `"tool": "write"`) {
		t.Errorf("the write from inside is not in the run's events:\n%s", events)
	}
	if cs := decode[paddock.ChangeSet](t, cli(t, home, "diff", other.ID, "--json")); len(cs.Entries) != 0 {
		t.Errorf("the other run changed: %+v", cs.Entries)
	}
}

// TestRealAgentsFindPaddock: Claude Code and Codex, as installed from npm
// (`.ci/run` installs them globally, where a run's view shows /usr), run
// inside a run with no model and no network, and find paddock's MCP
// server configured in the run's home; Claude Code's health check starts
// it and connects. Neither can do more offline: a session needs a model.
func TestRealAgentsFindPaddock(t *testing.T) {
	var missing []string
	for _, bin := range []string{"claude", "codex"} {
		p, err := exec.LookPath(bin)
		if err == nil {
			p, err = filepath.EvalSymlinks(p)
		}
		if err != nil || !strings.HasPrefix(p, "/usr/") {
			missing = append(missing, bin)
		}
	}
	if len(missing) > 0 {
		msg := "not installed under /usr (npm install -g @anthropic-ai/claude-code @openai/codex, as .ci/run does): " + strings.Join(missing, ", ")
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	base := t.TempDir()
	home := filepath.Join(base, "home")
	repo := gittest.NewRepo(t, filepath.Join(base, "src", "app"), map[string]string{"README.md": "hello\n"})
	startDaemon(t, home)
	script := `export DISABLE_AUTOUPDATER=1 CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1
claude --version
claude mcp list 2>&1
echo ==codex
codex mcp list --json 2>/dev/null`
	r := cli(t, home, "run", "--project", repo, "--no-verify", "--", "sh", "-c", script)
	if r.code != 0 || !strings.Contains(r.out, "(Claude Code)") {
		t.Fatalf("paddock run -- claude: %d\n%s\n%s", r.code, r.out, r.err)
	}
	if !strings.Contains(r.out, "paddock: /run/paddock/bin/paddock mcp - ✔ Connected") {
		t.Errorf("claude mcp list does not show paddock connected:\n%s", r.out)
	}
	_, codexOut, _ := strings.Cut(r.out, "==codex\n")
	var servers []struct {
		Name      string `json:"name"`
		Enabled   bool   `json:"enabled"`
		Transport struct {
			Type    string   `json:"type"`
			Command string   `json:"command"`
			Args    []string `json:"args"`
		} `json:"transport"`
	}
	if err := json.Unmarshal([]byte(codexOut[:strings.LastIndex(codexOut, "]")+1]), &servers); err != nil {
		t.Fatalf("codex mcp list --json: %v\n%s", err, codexOut)
	}
	if len(servers) != 1 || servers[0].Name != "paddock" || !servers[0].Enabled || servers[0].Transport.Command != "/run/paddock/bin/paddock" {
		t.Errorf("codex's MCP servers: %+v", servers)
	}
}
