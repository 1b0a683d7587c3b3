"""The asynchronous client: AsyncClient has every method of Client, as
coroutines (the streams as async iterators), on httpx.AsyncClient."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any, AsyncIterator, Dict, List, Optional, Sequence

import httpx

from . import types as t
from ._attach import attach_async
from ._codec import decode
from ._core import (DEFAULT_RETRIES, keyed, retry_wait, retryable, Diff, Endpoint, ExecChunk, Observer, Operations, SSEParser, _Call, _exec_request, _id, answer,
                    envelope_error, parse_exec_line, resolve_endpoint)
from .client import DEFAULT_TIMEOUT, STREAM_IDLE, McpReply, mcp_error
from .errors import PaddockError, TransportError
from .mcp import AsyncMcpSession
from .run import _AsyncRunStarter


class AsyncClient(Operations):
    """Client, for asyncio: the same constructor and methods, each a
    coroutine; stream_events, stream_notices and exec_stream are async
    iterators. Close it with aclose() or async with."""

    def __init__(self, socket: Optional[str] = None, *, addr: Optional[str] = None, token: Optional[str] = None,
                 home: Optional[str] = None, agent: bool = False, timeout: Any = DEFAULT_TIMEOUT,
                 observer: Optional[Observer] = None, retries: int = DEFAULT_RETRIES,
                 _endpoint: Optional[Endpoint] = None, _idempotency_key: Optional[str] = None) -> None:
        self.endpoint = _endpoint or resolve_endpoint(socket, addr, token, home, agent)
        self.observer = observer
        self.retries = max(0, retries)
        self._idempotency_key = _idempotency_key
        self._timeout = timeout
        transport = httpx.AsyncHTTPTransport(uds=self.endpoint.socket) if self.endpoint.socket else httpx.AsyncHTTPTransport()
        self._http = httpx.AsyncClient(base_url=self.endpoint.base_url, transport=transport, headers=self.endpoint.headers(),
                                       timeout=timeout, trust_env=False)

    def _copy(self, **changes: Any) -> "AsyncClient":
        ep = Endpoint(**{**self.endpoint.__dict__, **changes})
        return AsyncClient(_endpoint=ep, timeout=self._timeout, observer=self.observer, retries=self.retries,
                           _idempotency_key=self._idempotency_key)

    def with_token(self, token: Optional[str]) -> "AsyncClient":
        return self._copy(token=token)

    def for_agent(self) -> "AsyncClient":
        return self._copy(agent=True)

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()

    def _see(self, method: str, path: str) -> None:
        if self.observer is not None:
            self.observer(method, path)

    async def _do(self, call: _Call) -> Any:  # type: ignore[override]
        # A call whose error says nothing of it was done is made again
        # as it is, up to self.retries times, and so is a write, which
        # carries an idempotency key, whose answer was lost.
        with_key = keyed(call, self._idempotency_key)
        attempt = 0
        while True:
            try:
                return await self._do_once(call)
            except (PaddockError, TransportError) as e:
                if attempt >= self.retries or not retryable(e, with_key):
                    raise
            await asyncio.sleep(retry_wait(attempt))
            attempt += 1

    async def _do_once(self, call: _Call) -> Any:
        path = call.path()
        self._see(call.method, path)
        try:
            r = await self._http.request(call.method, path, params=call.query_params(), content=call.json_body(),
                                         headers=call.request_headers())
        except httpx.TransportError as e:
            raise TransportError(f"{call.method} {path}: {e}") from e
        return answer(call, r.status_code, r.content)

    async def get_change_set_diff(self, id: Any, *, hash: Optional[str] = None) -> Diff:
        call = self._diff_call(id, hash)
        path = call.path()
        self._see("GET", path)
        try:
            r = await self._http.get(path, params=call.query_params())
        except httpx.TransportError as e:
            raise TransportError(f"diff: {e}") from e
        body = answer(call, r.status_code, r.content)
        return Diff(hash=r.headers.get("Paddock-Changeset-Hash", ""), text=body.decode("utf-8", errors="replace"))

    def _stream(self, method: str, path: str, **kw: Any):
        self._see(method, path)
        return self._http.stream(method, path, **kw)

    async def _sse(self, path: str, params: List[tuple], after: int, key: str, cls: Any, reconnect: bool,
                   grace: float) -> AsyncIterator[Any]:
        last, gone, followed = after, None, False
        while True:
            try:
                async with self._stream("GET", path, params=params, timeout=httpx.Timeout(STREAM_IDLE, connect=10.0),
                                        headers={"Last-Event-ID": str(last), "Accept": "text/event-stream"}) as r:
                    if r.status_code != 200:
                        raise envelope_error(r.status_code, await r.aread(), f"GET {path}")
                    followed, gone = True, None
                    parser = SSEParser()
                    async for line in r.aiter_lines():
                        data = parser.feed(line)
                        if data is None:
                            continue
                        item = decode(cls, json.loads(data), path)
                        n = getattr(item, key) or 0
                        if n <= last:
                            continue
                        last = n
                        yield item
            except PaddockError:
                raise
            except httpx.TransportError as e:
                if not reconnect or not followed:
                    raise TransportError(f"GET {path}: {e}") from e
                if gone is None:
                    gone = time.monotonic()
                elif time.monotonic() - gone > grace:
                    raise TransportError(f"GET {path}: the daemon has not answered for {grace}s: {e}") from e
            if not reconnect:
                return
            await asyncio.sleep(0.2)

    def stream_events(self, id: Any, *, after: int = 0, reconnect: bool = True, grace: float = 10.0) -> AsyncIterator[t.Event]:
        """Client.stream_events, as an async iterator."""
        return self._sse(f"/v1/runs/{_id(id)}/events/stream", [], after, "seq", t.Event, reconnect, grace)

    def stream_notices(self, *, after: int = 0, types: Optional[Sequence[str]] = None, reconnect: bool = True,
                       grace: float = 10.0) -> AsyncIterator[t.Notice]:
        params = [("types", ",".join(types))] if types else []
        return self._sse("/v1/events/stream", params, after, "id", t.Notice, reconnect, grace)

    def exec_stream(self, id: Any, request: Optional[t.ExecRequest] = None, /, *, stdin: Optional[bytes] = None,
                    expect_seq: Optional[int] = None, **fields: Any) -> "AsyncExecStream":
        """Client.exec_stream: async with / async for; result at the end."""
        req = _exec_request(request, fields, stdin)
        return AsyncExecStream(self, _Call("POST", "/v1/runs/{id}/exec/stream", {"id": _id(id)}, {"expect_seq": expect_seq}, body=req))

    async def exec_attach(self, id: Any, request: Optional[t.ExecRequest] = None, /, *, stdin: Any = None,
                          stdout: Any = None, stderr: Any = None, resize: Optional[Sequence[t.TerminalSize]] = None,
                          expect_seq: Optional[int] = None, **fields: Any) -> t.ExecResult:
        """Client.exec_attach; stdin is bytes or an async iterable of bytes."""
        req = _exec_request(request, fields, None)
        path = f"/v1/runs/{_id(id)}/exec/attach" + (f"?expect_seq={expect_seq}" if expect_seq is not None else "")
        self._see("POST", path)
        return await attach_async(self.endpoint, path, req, stdin, stdout, stderr, resize)

    def mcp_url(self, id: Any) -> str:
        return f"{self.endpoint.base_url}/v1/runs/{_id(id)}/mcp"

    def mcp_headers(self) -> Dict[str, str]:
        return self.endpoint.headers()

    async def mcp_message(self, id: Any, message: Dict[str, Any], *, session_id: Optional[str] = None) -> McpReply:
        path = f"/v1/runs/{_id(id)}/mcp"
        headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
        if session_id:
            headers["Mcp-Session-Id"] = session_id
        async with self._stream("POST", path, content=json.dumps(message).encode(), headers=headers) as r:
            body = await r.aread()
            return McpReply.of(r.status_code, r.headers, body, path)

    async def mcp_stream(self, id: Any, *, session_id: str, idle: float = 5.0, limit: Optional[int] = None) -> List[Dict[str, Any]]:
        path = f"/v1/runs/{_id(id)}/mcp"
        out: List[Dict[str, Any]] = []
        try:
            async with self._stream("GET", path, headers={"Accept": "text/event-stream", "Mcp-Session-Id": session_id},
                                    timeout=httpx.Timeout(idle, connect=10.0)) as r:
                if r.status_code != 200:
                    raise mcp_error(r.status_code, await r.aread(), path)
                parser = SSEParser()
                async for line in r.aiter_lines():
                    data = parser.feed(line)
                    if data is not None:
                        out.append(json.loads(data))
                        if limit is not None and len(out) >= limit:
                            break
        except httpx.ReadTimeout:
            pass
        return out

    async def mcp_end_session(self, id: Any, *, session_id: str) -> None:
        path = f"/v1/runs/{_id(id)}/mcp"
        self._see("DELETE", path)
        r = await self._http.delete(path, headers={"Mcp-Session-Id": session_id})
        if r.status_code >= 300:
            raise mcp_error(r.status_code, r.content, path)

    async def mcp_session(self, id: Any, *, client_name: str = "paddock-python", version: str = "1") -> AsyncMcpSession:
        return await AsyncMcpSession.open(self, _id(id), client_name, version)

    def run(self, request: Optional[t.BootstrapRequest] = None, /, **fields: Any) -> _AsyncRunStarter:
        """Client.run, for async with: bootstraps on entry, rejects on exit
        unless the run was submitted."""
        return _AsyncRunStarter(self, request, fields)


class AsyncExecStream:
    """ExecStream for AsyncClient."""

    def __init__(self, client: AsyncClient, call: _Call) -> None:
        self._client, self._call = client, call
        self._cm: Any = None
        self.result: Optional[t.ExecResult] = None

    async def __aenter__(self) -> "AsyncExecStream":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        if self._cm is not None:
            cm, self._cm = self._cm, None
            await cm.__aexit__(None, None, None)

    async def __aiter__(self) -> AsyncIterator[ExecChunk]:
        call = self._call
        path = call.path()
        try:
            self._cm = self._client._stream("POST", path, params=call.query_params(), content=call.json_body(),
                                            headers=call.request_headers())
            r = await self._cm.__aenter__()
            if r.headers.get("Content-Type") != "application/x-ndjson":
                raise envelope_error(r.status_code, await r.aread(), f"POST {call.template}")
            async for line in r.aiter_lines():
                if not line.strip():
                    continue
                item = parse_exec_line(line.encode("utf-8"))
                if isinstance(item, Exception):
                    raise item
                if isinstance(item, t.ExecResult):
                    self.result = item
                    return
                yield item
        except httpx.TransportError as e:
            raise TransportError(f"exec: the stream ended early: {e}") from e
        finally:
            await self.aclose()
        raise TransportError("exec: the stream ended without a result")

    async def wait(self) -> t.ExecResult:
        async for _ in self:
            pass
        assert self.result is not None
        return self.result
