package main

import (
	"context"
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/paddock-dev/paddock/client"
	"github.com/paddock-dev/paddock/internal/paddockcli"
	"github.com/paddock-dev/paddock/lifecycle"
	"github.com/paddock-dev/paddock/mcpserver"
	"github.com/spf13/cobra"
)

func mcpCmd(a paddockcli.Call) *cobra.Command {
	return &cobra.Command{
		Use:   "mcp [RUN]",
		Short: "Serve a run to an agent over MCP (stdio)",
		Long: `Serve RUN to an agent that speaks the Model Context Protocol, on standard
input and output: give it this command as its MCP server. The tools are
those RUN's agent definition, grants and state offer now (of read, write,
edit, glob, grep, list, stat, move, delete, and exec, diff, submit, verify,
capabilities, request_access); the list changes, with
notifications/tools/list_changed, when a grant or a state change alters
it. exec streams its output as progress notifications. The run's change
set (JSON and a unified diff) and its event log are resources an agent
can read and subscribe to.

Each call goes to the daemon exactly as 'paddock tool' does: through the
broker, confined to the run's workspace, recorded as an event, its answer
masked. A refusal is a tool error the agent can read (its code and a
one-line message, the error as structured content), not a protocol error.
A rejected or cleaned run lists no tools and answers every call with why.

The daemon serves the same server over streamable HTTP at
/v1/runs/RUN/mcp, for the run's token or the operator.

Inside a run, RUN may be left out: every command of a run finds its own
API socket ($PADDOCK_SOCKET, /run/paddock/api/paddock.sock) and its run
($PADDOCK_RUN), and this binary at /run/paddock/bin/paddock. That socket
reaches only its run, as the run's token does. A run's home holds the
configuration with which Claude Code (~/.claude.json) and Codex
(~/.codex/config.toml) start this server, and /run/paddock/api/mcp.json
holds the same as a plain mcpServers file for any other client.

Exit codes: 0 the agent closed the connection; 2 no RUN and none in the
environment; 3 no such run; 8 no daemon.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			run := a.Getenv(lifecycle.EnvRun)
			if len(args) == 1 {
				run = args[0]
			}
			if run == "" {
				return paddockcli.UsageError("mcp needs a run: paddock mcp RUN (inside a run, $" + lifecycle.EnvRun + " names it)")
			}
			c, err := a.Client(cmd.Context())
			if err != nil {
				return err
			}
			s, err := mcpserver.New(cmd.Context(), clientConfig(c.ForAgent()), run)
			if err != nil {
				return err
			}
			defer s.Close()
			return s.MCP().Run(cmd.Context(), &mcp.StdioTransport{})
		},
	}
}

// clientConfig serves a run as a client of the daemon (paddock mcp).
func clientConfig(c *client.Client) mcpserver.Config {
	return mcpserver.Config{Runs: c, Broker: c, Changes: c, Verifier: c, Flows: c, Version: paddockcli.VersionString(),
		CallTool: func(ctx context.Context, id, name string, args json.RawMessage) (json.RawMessage, error) {
			return c.CallTool(ctx, id, name, args)
		}}
}

// managerTool runs a working tool in the daemon, for the MCP server it
// serves over HTTP.
func managerTool(m *lifecycle.Manager) mcpserver.CallTool {
	return func(ctx context.Context, id, name string, args json.RawMessage) (json.RawMessage, error) {
		out, err := m.Broker.CallTool(ctx, id, name, args)
		if err != nil {
			return nil, err
		}
		return json.Marshal(out)
	}
}
