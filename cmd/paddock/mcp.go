package main

import (
	"context"
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/paddock-dev/paddock/client"
	"github.com/paddock-dev/paddock/lifecycle"
	"github.com/paddock-dev/paddock/mcpserver"
	"github.com/spf13/cobra"
)

func (a *app) mcpCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "mcp RUN",
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

Exit codes: 0 the agent closed the connection; 3 no such run; 8 no daemon.`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client(cmd.Context())
			if err != nil {
				return err
			}
			s, err := mcpserver.New(cmd.Context(), clientConfig(c.ForAgent()), args[0])
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
	return mcpserver.Config{Service: c, Version: version(),
		CallTool: func(ctx context.Context, id, name string, args json.RawMessage) (json.RawMessage, error) {
			return c.CallTool(ctx, id, name, args)
		}}
}

// managerTool runs a working tool in the daemon, for the MCP server it
// serves over HTTP.
func managerTool(m *lifecycle.Manager) mcpserver.CallTool {
	return func(ctx context.Context, id, name string, args json.RawMessage) (json.RawMessage, error) {
		out, err := m.CallTool(ctx, id, name, args)
		if err != nil {
			return nil, err
		}
		return json.Marshal(out)
	}
}
