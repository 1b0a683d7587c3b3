// An MCP session with a run's MCP server (/v1/runs/{id}/mcp, streamable
// HTTP) through the official MCP TypeScript SDK, over the Paddock client's
// own transport (the unix socket or TCP) and credentials: the operator's,
// or a run's token from its session.

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { Paddock } from "./client.js";

export interface McpOptions {
  /** Who the MCP client says it is (clientInfo); default @paddock/sdk. */
  name?: string;
  version?: string;
}

/**
 * The streamable HTTP transport to a run's MCP endpoint, through p's
 * connection and credentials; give it to an MCP Client of your own.
 */
export function mcpTransport(p: Paddock, runId: string): StreamableHTTPClientTransport {
  const url = new URL(`${p.transport.baseUrl}/v1/runs/${encodeURIComponent(runId)}/mcp`);
  return new StreamableHTTPClientTransport(url, { fetch: (input, init) => p.fetch(input, init) });
}

/**
 * A connected MCP client of a run: the same tools, resources and
 * notifications as `paddock mcp RUN` on stdio. Close it when done (it
 * ends the session: DELETE /v1/runs/{id}/mcp).
 */
export async function connectMcp(p: Paddock, runId: string, o: McpOptions = {}): Promise<Client & AsyncDisposable> {
  const client = new Client({ name: o.name ?? "@paddock/sdk", version: o.version ?? "0.1.0" });
  const transport = mcpTransport(p, runId);
  await client.connect(transport);
  return Object.assign(client, {
    async [Symbol.asyncDispose]() {
      await transport.terminateSession().catch(() => {});
      await client.close();
    },
  });
}
