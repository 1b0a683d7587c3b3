"""An MCP session with a run, over MCP's streamable HTTP transport.

Debian has no Python MCP SDK, so this is the transport's few messages by
hand: initialize, the initialized notification, tools/list, tools/call and
the session's end, each one POST (DELETE for the end) to the run's /mcp
endpoint with paddock's auth. An MCP SDK can use the same endpoint
instead: client.mcp_url(run) and client.mcp_headers() (on a socket, the
HTTP client must connect to that socket).
"""

from __future__ import annotations

import itertools
from typing import Any, Dict, List, Optional

PROTOCOL_VERSION = "2025-06-18"


class McpError(Exception):
    """A JSON-RPC error response of the run's MCP server."""

    def __init__(self, error: Dict[str, Any]) -> None:
        super().__init__(f"MCP error {error.get('code')}: {error.get('message')}")
        self.code = error.get("code")
        self.message = error.get("message")
        self.data = error.get("data")


def _initialize(name: str, version: str, id: int) -> Dict[str, Any]:
    return {"jsonrpc": "2.0", "id": id, "method": "initialize",
            "params": {"protocolVersion": PROTOCOL_VERSION, "capabilities": {}, "clientInfo": {"name": name, "version": version}}}


class McpSession:
    """An initialized session: server_info, list_tools(), call_tool(), close()."""

    def __init__(self, client: Any, run_id: str, session_id: Optional[str], init: Dict[str, Any]) -> None:
        self.client, self.run_id, self.session_id = client, run_id, session_id
        self.server_info = init.get("serverInfo", {})
        self.protocol_version = init.get("protocolVersion")
        self._ids = itertools.count(2)

    @classmethod
    def open(cls, client: Any, run_id: str, name: str, version: str) -> "McpSession":
        reply = client.mcp_message(run_id, _initialize(name, version, 1))
        s = cls(client, run_id, reply.session_id, reply.result or {})
        client.mcp_message(run_id, {"jsonrpc": "2.0", "method": "notifications/initialized"}, session_id=s.session_id)
        return s

    def request(self, method: str, params: Optional[Dict[str, Any]] = None) -> Any:
        msg = {"jsonrpc": "2.0", "id": next(self._ids), "method": method, "params": params or {}}
        return self.client.mcp_message(self.run_id, msg, session_id=self.session_id).result

    def list_tools(self) -> List[Dict[str, Any]]:
        return self.request("tools/list").get("tools", [])

    def call_tool(self, name: str, arguments: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
        """The tool's result: content, structuredContent, isError (a
        refusal is a result with isError, carrying paddock's code)."""
        return self.request("tools/call", {"name": name, "arguments": arguments or {}})

    def close(self) -> None:
        if self.session_id:
            self.client.mcp_end_session(self.run_id, session_id=self.session_id)
            self.session_id = None

    def __enter__(self) -> "McpSession":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class AsyncMcpSession(McpSession):
    """McpSession for AsyncClient: its methods are coroutines."""

    @classmethod
    async def open(cls, client: Any, run_id: str, name: str, version: str) -> "AsyncMcpSession":  # type: ignore[override]
        reply = await client.mcp_message(run_id, _initialize(name, version, 1))
        s = cls(client, run_id, reply.session_id, reply.result or {})
        await client.mcp_message(run_id, {"jsonrpc": "2.0", "method": "notifications/initialized"}, session_id=s.session_id)
        return s

    async def request(self, method: str, params: Optional[Dict[str, Any]] = None) -> Any:  # type: ignore[override]
        msg = {"jsonrpc": "2.0", "id": next(self._ids), "method": method, "params": params or {}}
        return (await self.client.mcp_message(self.run_id, msg, session_id=self.session_id)).result

    async def list_tools(self) -> List[Dict[str, Any]]:  # type: ignore[override]
        return (await self.request("tools/list")).get("tools", [])

    async def call_tool(self, name: str, arguments: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:  # type: ignore[override]
        return await self.request("tools/call", {"name": name, "arguments": arguments or {}})

    async def close(self) -> None:  # type: ignore[override]
        if self.session_id:
            await self.client.mcp_end_session(self.run_id, session_id=self.session_id)
            self.session_id = None

    async def __aenter__(self) -> "AsyncMcpSession":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()
