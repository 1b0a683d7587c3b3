package lifecycle_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/lifecycle"
	"github.com/paddock-dev/paddock/workspace"
)

// fakeRunAPI records what the Manager asks of the daemon's run sockets.
type fakeRunAPI struct {
	mu     sync.Mutex
	listen []string
	closed []string
	bin    string
}

func (f *fakeRunAPI) Listen(id, path string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.listen = append(f.listen, id+" "+filepath.Base(path))
	return nil
}

func (f *fakeRunAPI) Close(id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = append(f.closed, id)
}

func (f *fakeRunAPI) BinDir() string { return f.bin }

// A run's home tells Claude Code and Codex where paddock's MCP server
// is, its socket is served again after a restart, and it is closed with
// the run.
func TestRunAPI(t *testing.T) {
	e := newEnv(t)
	api := &fakeRunAPI{bin: t.TempDir()}
	e.m.RunAPI = api
	e.project(t)
	r := e.create(t, paddock.KindClone, "")
	home := filepath.Join(workspace.AuxDir(e.m.WorkspacesDir, r.ID), "home")

	var claude struct {
		MCPServers map[string]struct {
			Command string            `json:"command"`
			Args    []string          `json:"args"`
			Env     map[string]string `json:"env"`
		} `json:"mcpServers"`
		Projects map[string]map[string]any `json:"projects"`
	}
	readJSON(t, filepath.Join(home, ".claude.json"), &claude)
	if s := claude.MCPServers["paddock"]; s.Command != lifecycle.PaddockInView || !slices.Equal(s.Args, []string{"mcp", r.ID}) || s.Env[lifecycle.EnvSocket] != lifecycle.SocketInView {
		t.Errorf("Claude Code's paddock server is %+v", s)
	}
	if claude.Projects[r.Workspace.Root]["hasTrustDialogAccepted"] != true {
		t.Errorf("the workspace is not trusted in .claude.json: %v", claude.Projects)
	}
	var settings struct {
		Permissions struct{ Allow, Deny []string } `json:"permissions"`
	}
	readJSON(t, filepath.Join(home, ".claude", "settings.json"), &settings)
	for _, tool := range []string{"Bash", "Write", "Edit"} {
		if !slices.Contains(settings.Permissions.Deny, tool) {
			t.Errorf("Claude Code's own %s is not denied: %v", tool, settings.Permissions.Deny)
		}
	}
	codex, err := os.ReadFile(filepath.Join(home, ".codex", "config.toml"))
	if err != nil || !strings.Contains(string(codex), "[mcp_servers.paddock]\ncommand = \""+lifecycle.PaddockInView+"\"\nargs = [\"mcp\", \""+r.ID+"\"]\nenv = { PADDOCK_SOCKET = \"/run/paddock/api/paddock.sock\" }\ndefault_tools_approval_mode = \"approve\"\n") ||
		!strings.Contains(string(codex), "[features]\nshell_tool = false\n") {
		t.Errorf("Codex's config: %q, %v", codex, err)
	}
	var plain map[string]map[string]map[string]any
	readJSON(t, filepath.Join(workspace.AuxDir(e.m.WorkspacesDir, r.ID), "api", "mcp.json"), &plain)
	if plain["mcpServers"]["paddock"]["command"] != lifecycle.PaddockInView {
		t.Errorf("mcp.json: %v", plain)
	}

	// The socket is made when a command's view is (not tested here: it
	// needs the sandbox), and again on a restart, for each live run whose
	// agent may still be talking through it.
	e.m.Store.Close()
	e.open(t, nil)
	e.m.RunAPI = api
	if _, err := e.m.Recover(context.Background()); err != nil {
		t.Fatal(err)
	}
	if want := r.ID + " paddock.sock"; !slices.Contains(api.listen, want) {
		t.Errorf("after a restart the run's socket was not served again: %v", api.listen)
	}
	if _, err := e.m.Runs.Reject(context.Background(), r.ID); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(api.closed, r.ID) {
		t.Errorf("rejecting the run did not close its socket: %v", api.closed)
	}

	// Without a binary to show, a run gets no configuration naming it.
	api.bin = ""
	r2 := e.create(t, paddock.KindClone, "")
	if _, err := os.Stat(filepath.Join(workspace.AuxDir(e.m.WorkspacesDir, r2.ID), "home", ".claude.json")); !os.IsNotExist(err) {
		t.Errorf("a run with no paddock in its view got a Claude Code configuration: %v", err)
	}
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// TestAgentExecNetwork: however an agent reaches exec (its token, its
// run's socket, either MCP transport: all are agent calls), its command
// gets no network unless it asks, and never more than its definition's
// ceiling, and its capabilities say so; the operator still chooses per
// command.
func TestAgentExecNetwork(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.project(t)
	withSandbox(t, e)
	r := e.create(t, paddock.KindClone, "")
	agentCtx := paddock.WithAgent(ctx)
	res, err := e.m.Broker.Exec(agentCtx, r.ID, paddock.ExecRequest{Argv: []string{"true"}})
	if err != nil || res.Enforcement.Net != "none" {
		t.Fatalf("an agent's command with no network asked: %+v %v", res, err)
	}
	for _, net := range []string{"host", "allow=example.com"} {
		if _, err := e.m.Broker.Exec(agentCtx, r.ID, paddock.ExecRequest{Argv: []string{"true"}, Net: net}); !paddock.IsCode(err, paddock.CodeForbidden) {
			t.Errorf("an agent's command asked for %s: %v", net, err)
		}
		if _, err := e.m.Jobs.StartJob(agentCtx, r.ID, paddock.StartJobRequest{Kind: paddock.JobExec, Exec: &paddock.ExecRequest{Argv: []string{"true"}, Net: net}}); !paddock.IsCode(err, paddock.CodeForbidden) {
			t.Errorf("an agent's job asked for %s: %v", net, err)
		}
	}
	if _, err := e.m.Broker.Exec(agentCtx, r.ID, paddock.ExecRequest{Argv: []string{"true"}, AllowDegraded: true}); !paddock.IsCode(err, paddock.CodeForbidden) {
		t.Errorf("an agent asked for a degraded sandbox: %v", err)
	}
	if caps, err := e.m.Broker.Capabilities(agentCtx, r.ID); err != nil || caps.Net != "none" {
		t.Errorf("the agent is told its commands get %q (%v)", caps.Net, err)
	}
	// The operator is told what holds: none by default, and a ceiling of
	// none (the built-in coder has no network); its own command still
	// gets what it asks for.
	caps, err := e.m.Broker.Capabilities(ctx, r.ID)
	if err != nil || caps.Net != "none" || caps.NetCeiling != "none" {
		t.Errorf("the operator is told %q, ceiling %q (%v)", caps.Net, caps.NetCeiling, err)
	}
	// The limits shown are those a command gets: the daemon's ceilings,
	// though the built-in coder names none (#29 item 6).
	if l := caps.Limits; l.Timeout != "10m0s" || l.Procs == 0 || l.Memory == 0 || l.Output == 0 {
		t.Errorf("the limits shown: %+v", l)
	}
	if res, err := e.m.Broker.Exec(ctx, r.ID, paddock.ExecRequest{Argv: []string{"true"}, Net: "host"}); err != nil || res.Enforcement.Net != "host" {
		t.Errorf("the operator's command with the host's network: %+v %v", res, err)
	}
}

// TestCapabilitiesWithoutASandbox: where the daemon cannot confine a
// command, exec and verify are not offered (every call would be refused
// as unsupported) and capabilities say why; the file tools still are.
func TestCapabilitiesWithoutASandbox(t *testing.T) {
	e := newEnv(t)
	e.project(t)
	lifecycle.SandboxFails(e.m, paddock.Errorf(paddock.CodeUnsupported, "no user namespaces"))
	r := e.create(t, paddock.KindClone, "")
	caps, err := e.m.Broker.Capabilities(paddock.WithAgent(context.Background()), r.ID)
	if err != nil {
		t.Fatal(err)
	}
	var offered []string
	for _, tc := range caps.Tools {
		offered = append(offered, tc.Name)
	}
	if slices.Contains(offered, "exec") || slices.Contains(offered, "verify") || !slices.Contains(offered, "write") {
		t.Fatalf("offered without a sandbox: %v", offered)
	}
	if !strings.Contains(caps.Unavailable["exec"], "no user namespaces") || caps.Unavailable["verify"] == "" {
		t.Fatalf("capabilities do not say why: %+v", caps.Unavailable)
	}
}

// TestRoutingIsReadOnly: the files of a run's home that route its agent's
// own tools through paddock cannot be rewritten from inside the run (an
// agent turned Claude Code's Bash and Codex's shell back on from its own
// shell: issue #29 item 5): not written, removed, replaced or moved away
// with their directory, in a write run and a read one; the rest of the
// home stays the agent's; capabilities name the tools that are off.
func TestRoutingIsReadOnly(t *testing.T) {
	e := newEnv(t)
	e.m.RunAPI = &fakeRunAPI{bin: t.TempDir()}
	e.project(t)
	withSandbox(t, e)
	agentCtx := paddock.WithAgent(context.Background())
	for _, kind := range []paddock.WorkspaceKind{paddock.KindOverlay, paddock.KindClone} {
		r := e.create(t, kind, "")
		home := filepath.Join(workspace.AuxDir(e.m.WorkspacesDir, r.ID), "home")
		before := map[string][]byte{}
		for _, f := range []string{".claude/settings.json", ".codex/config.toml"} {
			b, err := os.ReadFile(filepath.Join(home, f))
			if err != nil {
				t.Fatal(err)
			}
			before[f] = b
		}
		attack := `cd ~
echo '{"permissions":{"allow":["Bash"]}}' > .claude/settings.json 2>/dev/null && echo WROTE-CLAUDE
printf '[features]\nshell_tool = true\n' > .codex/config.toml 2>/dev/null && echo WROTE-CODEX
rm -f .claude/settings.json .codex/config.toml 2>/dev/null
mv .claude .claude.old 2>/dev/null && echo MOVED-CLAUDE
mv .codex .codex.old 2>/dev/null && echo MOVED-CODEX
echo '{}' > /tmp/s.json && mv /tmp/s.json .claude/settings.json 2>/dev/null && echo REPLACED
echo kept > .claude/history.jsonl && echo STATE
echo mine > notes.txt && echo HOME`
		res, err := e.m.Broker.Exec(agentCtx, r.ID, paddock.ExecRequest{Argv: []string{"sh", "-c", attack}})
		if err != nil {
			t.Fatal(err)
		}
		if res.Stdout != "STATE\nHOME\n" {
			t.Errorf("%s: the agent's shell against its routing files:\n%s%s", kind, res.Stdout, res.Stderr)
		}
		for f, b := range before {
			if now, err := os.ReadFile(filepath.Join(home, f)); err != nil || string(now) != string(b) {
				t.Errorf("%s: %s changed: %q %v", kind, f, now, err)
			}
		}
		caps, err := e.m.Broker.Capabilities(agentCtx, r.ID)
		if err != nil || !slices.Contains(caps.AgentToolsOff, "claude-code:Bash") || !slices.Contains(caps.AgentToolsOff, "codex:shell") {
			t.Errorf("%s: capabilities do not say the agent's own tools are off: %v %v", kind, caps.AgentToolsOff, err)
		}
	}
}
