"""AsyncClient against the daemon: a run as an async context manager, the
event stream as an async iterator resumed across cut connections, exec
streamed with stdin, attached, and an MCP session."""

import asyncio
import io

import pytest

import paddock
from conftest import record
from paddock import types as t

from test_streams import CuttingProxy

AGENT = t.AgentDefinition(name="async", workspace="write", tools=["read", "write", "exec", "submit", "capabilities"])


async def test_a_run_end_to_end(daemon, project):
    async with paddock.AsyncClient(socket=daemon.socket, observer=record) as client:
        async with client.run(project=project.name, task="async", agent=AGENT) as run:
            await run.agent.call_tool(run.id, "write", path="a.txt", content="async\n")
            waiter = asyncio.ensure_future(run.wait_for_submission(timeout=30))
            await asyncio.sleep(0.1)
            cs = await run.submit()
            ev = await waiter
            assert ev.type == "changeset.submitted" and ev.data["hash"] == cs.hash
            diff = await client.get_change_set_diff(run.id)
            assert "+async" in diff.text
        assert not run.rejected  # submitted: left for a decision
        assert (await client.get_run(run.id)).review == "submitted"


async def test_an_unsubmitted_run_is_rejected_on_exit(daemon, project):
    async with paddock.AsyncClient(socket=daemon.socket, observer=record) as client:
        with pytest.raises(RuntimeError):
            async with client.run(project=project.name, task="abandon", agent=AGENT) as run:
                await run.agent.call_tool(run.id, "write", path="a.txt", content="x")
                raise RuntimeError("the orchestrator failed")
        assert run.rejected
        assert (await client.get_run(run.id)).workspace.state in ("rejected", "cleanup_pending", "cleaned")


async def test_event_stream_resumes(daemon, project):
    async with paddock.AsyncClient(socket=daemon.socket, observer=record) as client:
        b = await client.bootstrap(project=project.name, task="events", agent=AGENT)
        agent = client.with_token(b.token)
        for i in range(15):
            await agent.call_tool(b.run.id, "write", path=f"f{i}.txt", content="x" * 50)
        last = (await client.get_run(b.run.id)).last_seq
        proxy = CuttingProxy(daemon.addr, [555, 1201, 1999, None])
        try:
            async with paddock.AsyncClient(addr=proxy.addr, home=daemon.home, observer=record) as c:
                seqs = []
                async for ev in c.stream_events(b.run.id):
                    seqs.append(ev.seq)
                    if ev.seq == last:
                        break
        finally:
            proxy.close()
        assert proxy.connections >= 4
        assert seqs == list(range(1, last + 1))
        await agent.aclose()


async def test_exec_stream_and_attach(daemon, project):
    async with paddock.AsyncClient(socket=daemon.socket, observer=record) as client:
        b = await client.bootstrap(project=project.name, task="exec", agent=AGENT)
        agent = client.with_token(b.token)
        out = b""
        async with agent.exec_stream(b.run.id, argv=["sh", "-c", "tr a-z A-Z"], stdin=b"shout\n") as s:
            async for chunk in s:
                out += chunk.data
        assert out == b"SHOUT\n" and s.result.exit_code == 0

        async def typed():
            yield b"one "
            await asyncio.sleep(0.05)
            yield b"two\n"

        buf = io.BytesIO()
        res = await agent.exec_attach(b.run.id, argv=["sh", "-c", "read -r a; echo \"got $a\""], stdin=typed(), stdout=buf)
        assert res.exit_code == 0 and buf.getvalue() == b"got one two\n"
        await agent.aclose()


async def test_mcp_session(daemon, project):
    async with paddock.AsyncClient(socket=daemon.socket, observer=record) as client:
        b = await client.bootstrap(project=project.name, task="mcp", agent=AGENT)
        agent = client.with_token(b.token)
        async with await agent.mcp_session(b.run.id) as s:
            names = [x["name"] for x in await s.list_tools()]
            assert {"read", "write", "exec"} <= set(names)
            res = await s.call_tool("write", {"path": "m.txt", "content": "via mcp\n"})
            assert not res.get("isError"), res
        assert (await agent.call_tool(b.run.id, "read", path="m.txt"))
        await agent.aclose()
