package lifecycle

import (
	"encoding/json"
	"fmt"
	"os"
	"path"
	"path/filepath"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/sandbox"
)

// RunAPI serves each run its own API on a unix socket that only the run's
// commands see: whatever connects to it is the run's agent, as if it
// carried the run's token, and reaches nothing but its own run. With the
// paddock binary shown beside it, `paddock mcp` inside a run (Claude Code's
// or Codex's MCP server, say) works with no network and no token. The
// daemon's httpapi.RunSockets is one.
type RunAPI interface {
	// Listen makes sure run id's API answers on a socket at path (a file
	// in a directory of the daemon's); it does nothing if it already does.
	Listen(id, path string) error
	// Close stops serving run id and removes its socket.
	Close(id string)
	// BinDir is a host directory holding the paddock binary as "paddock",
	// shown read-only in every run's view at BinInView; "" shows none.
	BinDir() string
}

// Where a run's commands find their API, the paddock binary and an MCP
// configuration naming both.
const (
	APIInView       = "/run/paddock/api"
	SocketInView    = APIInView + "/" + apiSocket
	MCPConfigInView = APIInView + "/" + mcpConfigFile
	BinInView       = "/run/paddock/bin"
	PaddockInView   = BinInView + "/paddock"

	apiSocket     = "paddock.sock"
	mcpConfigFile = "mcp.json"
)

// The environment variables a run's commands get when the daemon serves
// runs their own API (Config.RunAPI): the client (`paddock mcp`, `paddock
// tool`, …) finds its daemon and its run through them.
const (
	EnvSocket    = paddock.EnvPrefix + "SOCKET"
	EnvRun       = paddock.EnvPrefix + "RUN"
	EnvMCPConfig = paddock.EnvPrefix + "MCP_CONFIG"
)

// apiDir is the host directory of run id's socket and MCP configuration,
// shown read-only at APIInView: a command can connect to the socket but
// neither remove nor replace it.
func (vw *views) apiDir(id string) string { return filepath.Join(vw.auxDir(id), "api") }

// serveRunAPI makes sure run id's socket answers (after a restart too).
func (vw *views) serveRunAPI(id string) error {
	if vw.RunAPI == nil {
		return nil
	}
	dir := vw.apiDir(id)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return internal("making the run's API directory failed", err)
	}
	if err := vw.RunAPI.Listen(id, filepath.Join(dir, apiSocket)); err != nil {
		return internal("serving the run's API socket failed", err)
	}
	return nil
}

// runAPIBinds shows run r its API directory and the paddock binary, and
// makes sure the socket answers; none without a RunAPI.
func (vw *views) runAPIBinds(r *paddock.Run) ([]sandbox.Bind, error) {
	if vw.RunAPI == nil {
		return nil, nil
	}
	if err := vw.serveRunAPI(r.ID); err != nil {
		// The command runs all the same; only its way to the daemon is
		// missing (the daemon is stopping, say), and its client says so.
		vw.log().Warn("a run's command gets no API socket", "run", r.ID, "err", err)
	}
	binds := []sandbox.Bind{{Source: vw.apiDir(r.ID), Target: APIInView, ReadOnly: true}}
	if bin := vw.RunAPI.BinDir(); bin != "" {
		binds = append(binds, sandbox.Bind{Source: bin, Target: BinInView, ReadOnly: true})
	}
	return binds, nil
}

// routingFiles are the files of a run's home that route its agent's own
// tools through paddock (writeAgentConfigs), each with its directory:
// read-only in the view, so that nothing the agent runs turns its
// client's own shell and editing tools back on around the broker (an
// agent rewrote both from its own shell: #29 item 5). Claude Code's
// .claude.json is not among them: it keeps its state there, and the
// tools it turns off are turned off in settings.json, whose deny rules
// no other file of its can lift.
var routingFiles = []struct{ dir, file string }{
	{".claude", "settings.json"},
	{".codex", "config.toml"},
}

// AgentToolsOff are the agent clients' own tools the routing files turn
// off, as capabilities list them: paddock's exec, write and edit stand in.
var AgentToolsOff = []string{"claude-code:Bash", "claude-code:Edit", "claude-code:Write", "claude-code:NotebookEdit",
	"codex:shell", "codex:apply_patch"}

// routingBinds show each routing file of run r's home read-only over
// itself, and its directory as a mount point of its own (which no command
// can rename away to put another file in its place).
func (vw *views) routingBinds(home string) []sandbox.Bind {
	var binds []sandbox.Bind
	for _, f := range routingFiles {
		src := filepath.Join(home, f.dir, f.file)
		if fi, err := os.Lstat(src); err != nil || !fi.Mode().IsRegular() {
			continue
		}
		binds = append(binds,
			sandbox.Bind{Source: filepath.Join(home, f.dir), Target: path.Join(HomeInView, f.dir)},
			sandbox.Bind{Source: src, Target: path.Join(HomeInView, f.dir, f.file), ReadOnly: true, File: true})
	}
	return binds
}

// runAPIEnv is what tells a run's commands where their API is.
func (vw *views) runAPIEnv(id string) []string {
	if vw.RunAPI == nil {
		return nil
	}
	return []string{EnvSocket + "=" + SocketInView, EnvRun + "=" + id, EnvMCPConfig + "=" + MCPConfigInView}
}

// writeAgentConfigs writes, into run r's new home, the configuration
// with which the MCP clients agents are made of find paddock's server for
// this run: Claude Code's (~/.claude.json, with its own acting tools
// turned off in ~/.claude/settings.json so that every act goes through
// the broker), Codex's (~/.codex/config.toml), and a plain mcpServers file
// at MCPConfigInView for any other. The home is the agent's: it may change
// them, and its commands stay confined by the kernel whatever it does.
func (vw *views) writeAgentConfigs(r *paddock.Run, home string) error {
	if vw.RunAPI == nil || vw.RunAPI.BinDir() == "" {
		return nil
	}
	// The run and its socket are named in the configuration, not only in
	// the environment: a client may start its servers with an environment
	// of its own (Codex keeps only a few variables).
	server := map[string]any{"type": "stdio", "command": PaddockInView, "args": []string{"mcp", r.ID},
		"env": map[string]string{EnvSocket: SocketInView}}
	servers := map[string]any{"paddock": server}
	claude := map[string]any{
		"mcpServers":             servers,
		"hasCompletedOnboarding": true,
	}
	if r.Workspace != nil {
		claude["projects"] = map[string]any{r.Workspace.Root: map[string]any{"hasTrustDialogAccepted": true}}
	}
	settings := map[string]any{"permissions": map[string]any{
		"allow": []string{"mcp__paddock"},
		// Claude Code's own tools that act (a shell, file writes) would
		// act inside the sandbox all the same, but around the broker:
		// paddock's exec, write and edit replace them.
		"deny": []string{"Bash", "Edit", "Write", "NotebookEdit"},
	}}
	// Codex's own shell and patch tools are turned off as Claude Code's
	// are. It asks a person before an MCP tool acts unless told otherwise;
	// paddock's broker is where this run's tool calls are decided (its
	// definition's ask rules among them), so Codex passes them on.
	codex := fmt.Sprintf(`# paddock's MCP server for this run; its broker decides each call.
[features]
shell_tool = false
apply_patch_freeform = false

[mcp_servers.paddock]
command = %q
args = ["mcp", %q]
env = { %s = %q }
default_tools_approval_mode = "approve"
`, PaddockInView, r.ID, EnvSocket, SocketInView)
	files := []struct {
		rel  string
		data any
	}{
		{".claude.json", claude},
		{path.Join(".claude", "settings.json"), settings},
		{path.Join(".codex", "config.toml"), codex},
	}
	for _, f := range files {
		var b []byte
		switch d := f.data.(type) {
		case string:
			b = []byte(d)
		default:
			var err error
			if b, err = json.MarshalIndent(d, "", "  "); err != nil {
				return err
			}
		}
		p := filepath.Join(home, filepath.FromSlash(f.rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			return err
		}
		if err := os.WriteFile(p, b, 0o600); err != nil {
			return err
		}
	}
	dir := vw.apiDir(r.ID)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	plain, err := json.MarshalIndent(map[string]any{"mcpServers": servers}, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, mcpConfigFile), plain, 0o644)
}
