package main

import (
	"context"
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/client"
	"github.com/spf13/cobra"
)

func (a *app) mcpCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "mcp RUN",
		Short: "Serve a run's working tools to an agent over MCP (stdio)",
		Long: `Serve the working tools RUN is offered (read, write, edit, glob, grep, list,
stat, move, delete; fewer for a read run) as Model Context Protocol tools on
standard input and output, for an agent that speaks MCP: give it this
command as its MCP server. Each call goes to the daemon exactly as
'paddock tool' does: confined to the run's workspace, recorded as an event,
its answer masked. A refusal is a tool error the agent can read (its code,
message and rule), not a protocol error.

Exit codes: 0 the agent closed the connection; 3 no such run; 8 no daemon.`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client(cmd.Context())
			if err != nil {
				return err
			}
			server, err := mcpServer(cmd.Context(), c.ForAgent(), args[0])
			if err != nil {
				return err
			}
			return server.Run(cmd.Context(), &mcp.StdioTransport{})
		},
	}
}

// mcpServer makes an MCP server whose tools are run id's working tools,
// each call forwarded to the daemon.
func mcpServer(ctx context.Context, c *client.Client, id string) (*mcp.Server, error) {
	offered, err := c.Tools(ctx, id)
	if err != nil {
		return nil, err
	}
	server := mcp.NewServer(&mcp.Implementation{Name: "paddock", Version: version()}, nil)
	for _, t := range offered {
		name := t.Name
		server.AddTool(&mcp.Tool{Name: name, Description: t.Description, InputSchema: t.Schema},
			func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				args := req.Params.Arguments
				if len(args) == 0 {
					args = json.RawMessage(`{}`)
				}
				out, err := c.CallTool(ctx, id, name, args)
				if err != nil {
					refusal, _ := json.Marshal(map[string]any{"code": paddock.ErrorCode(err), "message": paddock.ErrorMessage(err), "details": errorDetails(err)})
					return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: string(refusal)}}}, nil
				}
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(out)}}, StructuredContent: out}, nil
			})
	}
	return server, nil
}

// errorDetails are a paddock error's details (the rule that refused, the
// path as given), if it has any.
func errorDetails(err error) map[string]any {
	if pe, ok := err.(*paddock.Error); ok {
		return pe.PublicDetails()
	}
	return nil
}
