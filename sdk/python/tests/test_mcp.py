"""An MCP session with a run over streamable HTTP, by the client's own
messages (Debian has no Python MCP SDK): initialize, tools/list,
tools/call, the server's stream, the session's end."""

import pytest

import paddock
from conftest import record
from paddock import types as t
from paddock.mcp import McpError

AGENT = t.AgentDefinition(name="mcp", workspace="write", tools=["read", "write", "exec", "capabilities"])


def test_mcp_session(client, project):
    b = client.bootstrap(project=project.name, task="mcp", agent=AGENT)
    agent = client.with_token(b.token)
    with agent.mcp_session(b.run.id) as s:
        assert s.session_id and s.server_info["name"] == "paddock"
        assert s.protocol_version
        tools = {x["name"]: x for x in s.list_tools()}
        assert {"read", "write", "exec", "capabilities"} <= set(tools)
        assert tools["write"]["inputSchema"]["type"] == "object"
        res = s.call_tool("write", {"path": "via-mcp.txt", "content": "hello\n"})
        assert not res.get("isError"), res
        refused = s.call_tool("write", {"path": ".git/config", "content": "x"})
        assert refused["isError"] and "forbidden" in str(refused)
        # The server's stream of messages: open, read until quiet.
        msgs = agent.mcp_stream(b.run.id, session_id=s.session_id, idle=0.5)
        assert isinstance(msgs, list)
        with pytest.raises(McpError):
            s.request("no/such/method")
    assert s.session_id is None
    assert agent.call_tool(b.run.id, "read", path="via-mcp.txt")
    # The endpoint and headers an MCP SDK would use.
    assert agent.mcp_url(b.run.id) == f"http://paddock/v1/runs/{b.run.id}/mcp"
    assert agent.mcp_headers()["Authorization"] == f"Bearer {b.token}"


def test_mcp_needs_a_credential(client, daemon, project):
    b = client.bootstrap(project=project.name, task="mcp", agent=AGENT)
    with paddock.Client(addr=daemon.addr, token="pdk_run_nobody", observer=record) as stranger:
        with pytest.raises(paddock.Unauthorized):
            stranger.mcp_session(b.run.id)


def test_mcp_lists_the_tools_of_an_agent_without_capabilities(client, project):
    b = client.bootstrap(project=project.name, task="mcp", agent=t.AgentDefinition(
        name="nocaps", workspace="write", tools=["read", "write"]))
    agent = client.with_token(b.token)
    assert {x.name for x in agent.list_tools(b.run.id)} == {"read", "write"}
    with agent.mcp_session(b.run.id) as s:
        assert {x["name"] for x in s.list_tools()} == {"read", "write"}
