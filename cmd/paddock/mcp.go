package main

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/client"
	"github.com/paddock-dev/paddock/strictjson"
	"github.com/spf13/cobra"
)

func (a *app) mcpCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "mcp RUN",
		Short: "Serve a run's tools to an agent over MCP (stdio)",
		Long: `Serve the tools RUN is offered (those of read, write, edit, glob, grep,
list, stat, move, delete that its agent definition grants, and its control
tools capabilities, request_access and verify) as Model Context Protocol tools on
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
	caps, err := c.Capabilities(ctx, id)
	if err != nil {
		return nil, err
	}
	addControlTools(server, c, id, caps)
	for _, t := range offered {
		name := t.Name
		server.AddTool(&mcp.Tool{Name: name, Description: t.Description, InputSchema: t.Schema},
			func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				args := req.Params.Arguments
				if len(args) == 0 {
					args = json.RawMessage(`{}`)
				}
				out, err := c.CallTool(ctx, id, name, args)
				return toolResult(out, err)
			})
	}
	return server, nil
}

// toolResult is an answer as MCP carries it: a refusal is a tool error the
// agent reads (its code, message and rule), not a protocol error.
func toolResult(out json.RawMessage, err error) (*mcp.CallToolResult, error) {
	if err != nil {
		refusal, _ := json.Marshal(map[string]any{"code": paddock.ErrorCode(err), "message": paddock.ErrorMessage(err), "details": errorDetails(err)})
		return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: string(refusal)}}}, nil
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(out)}}, StructuredContent: out}, nil
}

// controlTools are the control tools MCP serves, with their input schemas.
var controlTools = []struct {
	name, description, schema string
}{
	{paddock.ToolCapabilities, "What this run may do now: the tools offered and how they are narrowed, the network, limits, environment, the checks verify runs, the grants and pending requests, and what the sandbox enforced. Derived from the agent's definition and grants, never from prose.",
		`{"type":"object","additionalProperties":false,"properties":{}}`},
	{paddock.ToolRequestAccess, "Ask for more than this run's definition grants: a tool, a command (an argv prefix for exec), a path (for a writing tool), a network domain or a limit, with the reason. The request stays pending until a person or the orchestrator decides; capabilities then shows it granted or denied.",
		`{"type":"object","additionalProperties":false,"required":["kind","reason"],"properties":{"kind":{"type":"string","enum":["tool","command","path","network","limit"]},"tool":{"type":"string"},"command":{"type":"array","items":{"type":"string"}},"path":{"type":"string"},"domain":{"type":"string"},"limit":{"type":"string","enum":["timeout","cpu","procs","memory","file_size","output","tmp"]},"value":{"type":"string"},"reason":{"type":"string"}}}`},
	{paddock.ToolVerify, "Run the project's checks (build, test, lint, format-check: those its manifest declares, read from the base revision) in this run's sandbox; pick checks by name, never a command. The result is tied to the change set's hash.",
		`{"type":"object","additionalProperties":false,"properties":{"checks":{"type":"array","items":{"type":"string","enum":["build","test","lint","format-check"]}}}}`},
}

// addControlTools serves the control tools the run's capabilities offer.
func addControlTools(server *mcp.Server, c *client.Client, id string, caps *paddock.Capabilities) {
	offered := map[string]bool{}
	for _, t := range caps.Tools {
		offered[t.Name] = true
	}
	for _, ct := range controlTools {
		if !offered[ct.name] {
			continue
		}
		name := ct.name
		server.AddTool(&mcp.Tool{Name: name, Description: ct.description, InputSchema: json.RawMessage(ct.schema)},
			func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				var res any
				var err error
				switch name {
				case paddock.ToolCapabilities:
					res, err = c.Capabilities(ctx, id)
				case paddock.ToolRequestAccess:
					var in paddock.AccessRequestInput
					if err = strictjson.Unmarshal(req.Params.Arguments, &in); err == nil {
						res, err = c.RequestAccess(ctx, id, in)
					}
				case paddock.ToolVerify:
					var in paddock.VerifyRequest
					if args := req.Params.Arguments; len(args) > 0 {
						err = strictjson.Unmarshal(args, &in)
					}
					if err == nil {
						res, err = c.Verify(ctx, id, in)
					}
				}
				var se *strictjson.Error
				if errors.As(err, &se) {
					err = paddock.Errorf(paddock.CodeBadRequest, "%s: %v", name, err)
				}
				if err != nil {
					return toolResult(nil, err)
				}
				out, merr := json.Marshal(res)
				return toolResult(out, merr)
			})
	}
}

// errorDetails are a paddock error's details (the rule that refused, the
// path as given), if it has any.
func errorDetails(err error) map[string]any {
	if pe, ok := err.(*paddock.Error); ok {
		return pe.PublicDetails()
	}
	return nil
}
