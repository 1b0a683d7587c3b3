"""The synchronous client."""

from __future__ import annotations

import json
import time
from typing import Any, Dict, Iterator, List, Optional, Sequence

import httpx

from . import types as t
from ._attach import attach_sync
from ._codec import decode
from ._core import (DEFAULT_RETRIES, keyed, retry_wait, retryable, AGENT_HEADER, Diff, Endpoint, ExecChunk, Observer, Operations, SSEParser, _Call, _exec_request, _id,
                    answer, envelope_error, parse_exec_line, resolve_endpoint)
from .errors import PaddockError, TransportError
from .mcp import McpSession

#: How long a command may take unless the client says otherwise: None, as
#: the daemon bounds commands by their own limits.
DEFAULT_TIMEOUT = httpx.Timeout(None, connect=10.0)
#: A stream with no byte (not even the daemon's keep-alive, every 15s) for
#: this long is taken for a dead connection, and reconnected.
STREAM_IDLE = 45.0


class Client(Operations):
    """A client of one paddock daemon.

        Client()                                  # the default socket (as the CLI finds it)
        Client(socket="/srv/paddock/paddock.sock")
        Client(addr="127.0.0.1:7070", token=...)  # loopback TCP with a bearer token
        Client(addr="127.0.0.1:7070", home=...)   # ... with the daemon's token from home/token

    Errors the daemon answers with are raised as PaddockError's subclass of
    their code; a daemon that cannot be reached is TransportError. Close it
    (or use it as a context manager) to release its connections.
    """

    def __init__(self, socket: Optional[str] = None, *, addr: Optional[str] = None, token: Optional[str] = None,
                 home: Optional[str] = None, agent: bool = False, timeout: Any = DEFAULT_TIMEOUT,
                 observer: Optional[Observer] = None, retries: int = DEFAULT_RETRIES,
                 _endpoint: Optional[Endpoint] = None, _idempotency_key: Optional[str] = None) -> None:
        self.endpoint = _endpoint or resolve_endpoint(socket, addr, token, home, agent)
        self.observer = observer
        self.retries = max(0, retries)
        self._idempotency_key = _idempotency_key
        self._timeout = timeout
        transport = httpx.HTTPTransport(uds=self.endpoint.socket) if self.endpoint.socket else httpx.HTTPTransport()
        self._http = httpx.Client(base_url=self.endpoint.base_url, transport=transport, headers=self.endpoint.headers(),
                                  timeout=timeout, trust_env=False)

    # Copies.
    def _copy(self, **changes: Any) -> "Client":
        ep = Endpoint(**{**self.endpoint.__dict__, **changes})
        return Client(_endpoint=ep, timeout=self._timeout, observer=self.observer, retries=self.retries,
                      _idempotency_key=self._idempotency_key)

    def with_token(self, token: Optional[str]) -> "Client":
        """A new client on the same daemon that authenticates with token (a
        run's, from bootstrap; a principal's)."""
        return self._copy(token=token)

    def for_agent(self) -> "Client":
        """A new client whose calls are made for a run's agent (as paddock
        mcp makes them): a checkpointed run is resumed by its next call."""
        return self._copy(agent=True)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # The one request of an operation.
    def _see(self, method: str, path: str) -> None:
        if self.observer is not None:
            self.observer(method, path)

    def _do(self, call: _Call) -> Any:
        # A call whose error says nothing of it was done is made again
        # as it is, up to self.retries times, and so is a write, which
        # carries an idempotency key, whose answer was lost.
        with_key = keyed(call, self._idempotency_key)
        attempt = 0
        while True:
            try:
                return self._do_once(call)
            except (PaddockError, TransportError) as e:
                if attempt >= self.retries or not retryable(e, with_key):
                    raise
            time.sleep(retry_wait(attempt))
            attempt += 1

    def _do_once(self, call: _Call) -> Any:
        path = call.path()
        self._see(call.method, path)
        try:
            r = self._http.request(call.method, path, params=call.query_params(), content=call.json_body(),
                                   headers=call.request_headers())
        except httpx.TransportError as e:
            raise TransportError(f"{call.method} {path}: {e}") from e
        return answer(call, r.status_code, r.content)

    # Answers that are not one envelope.
    def get_change_set_diff(self, id: Any, *, hash: Optional[str] = None) -> Diff:
        """The whole unified diff of the change set (the one with hash, or
        the change set as it is now) and its hash."""
        call = self._diff_call(id, hash)
        path = call.path()
        self._see("GET", path)
        try:
            r = self._http.get(path, params=call.query_params())
        except httpx.TransportError as e:
            raise TransportError(f"diff: {e}") from e
        body = answer(call, r.status_code, r.content)
        return Diff(hash=r.headers.get("Paddock-Changeset-Hash", ""), text=body.decode("utf-8", errors="replace"))

    def _stream(self, method: str, path: str, **kw: Any):
        self._see(method, path)
        return self._http.stream(method, path, **kw)

    def _sse(self, path: str, params: List[tuple], after: int, key: str, cls: Any, reconnect: bool, grace: float) -> Iterator[Any]:
        last, gone, followed = after, None, False
        while True:
            try:
                with self._stream("GET", path, params=params, timeout=httpx.Timeout(STREAM_IDLE, connect=10.0),
                                  headers={"Last-Event-ID": str(last), "Accept": "text/event-stream"}) as r:
                    if r.status_code != 200:
                        raise envelope_error(r.status_code, r.read(), f"GET {path}")
                    followed, gone = True, None
                    parser = SSEParser()
                    for line in r.iter_lines():
                        data = parser.feed(line)
                        if data is None:
                            continue
                        item = decode(cls, json.loads(data), path)
                        n = getattr(item, key) or 0
                        if n <= last:
                            continue  # seen before the connection dropped
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
            time.sleep(0.2)

    def stream_events(self, id: Any, *, after: int = 0, reconnect: bool = True, grace: float = 10.0) -> Iterator[t.Event]:
        """A run's events after seq after, as they come (Server-Sent
        Events). When the connection drops the stream reconnects and resumes
        after the last seq it gave (Last-Event-ID): every event once, in
        order. It ends only when the caller stops iterating, on an error
        the daemon answers with, or when a daemon that answered before has
        not answered for grace seconds."""
        return self._sse(f"/v1/runs/{_id(id)}/events/stream", [], after, "seq", t.Event, reconnect, grace)

    def stream_notices(self, *, after: int = 0, types: Optional[Sequence[str]] = None, reconnect: bool = True,
                       grace: float = 10.0) -> Iterator[t.Notice]:
        """The notices of every run (the operator's firehose), after notice
        id after, resumed across reconnections as stream_events is."""
        params = [("types", ",".join(types))] if types else []
        return self._sse("/v1/events/stream", params, after, "id", t.Notice, reconnect, grace)

    def exec_stream(self, id: Any, request: Optional[t.ExecRequest] = None, /, *, stdin: Optional[bytes] = None,
                    expect_seq: Optional[int] = None, **fields: Any) -> "ExecStream":
        """Run a command confined, its output streamed as it comes:

            with client.exec_stream(run, argv=["sh", "-c", "cat"], stdin=b"hi") as s:
                for chunk in s:            # ExecChunk(stream, data)
                    ...
            s.result                       # the ExecResult, without the output
        """
        req = _exec_request(request, fields, stdin)
        call = _Call("POST", "/v1/runs/{id}/exec/stream", {"id": _id(id)}, {"expect_seq": expect_seq}, body=req)
        return ExecStream(self, call)

    def exec_attach(self, id: Any, request: Optional[t.ExecRequest] = None, /, *, stdin: Any = None,
                    stdout: Any = None, stderr: Any = None, resize: Optional[Sequence[t.TerminalSize]] = None,
                    expect_seq: Optional[int] = None, **fields: Any) -> t.ExecResult:
        """Run a command attached (an HTTP/1.1 upgrade): stdin (bytes, or a
        file-like object read until its end) is sent as it is read, the
        output written to stdout and stderr (binary file-likes) as it comes,
        and resize's sizes sent as the terminal's (with terminal=...)."""
        req = _exec_request(request, fields, None)
        path = f"/v1/runs/{_id(id)}/exec/attach" + (f"?expect_seq={expect_seq}" if expect_seq is not None else "")
        self._see("POST", path)
        return attach_sync(self.endpoint, path, req, stdin, stdout, stderr, resize)

    # MCP over streamable HTTP.
    def mcp_url(self, id: Any) -> str:
        """The run's MCP endpoint (streamable HTTP), for an MCP client; its
        requests need mcp_headers() and, on a socket, that socket."""
        return f"{self.endpoint.base_url}/v1/runs/{_id(id)}/mcp"

    def mcp_headers(self) -> Dict[str, str]:
        """The headers paddock authenticates an MCP client's requests by."""
        return self.endpoint.headers()

    def mcp_message(self, id: Any, message: Dict[str, Any], *, session_id: Optional[str] = None) -> "McpReply":
        """Send one JSON-RPC message to the run's MCP server; the reply has
        the session id and the messages answered (JSON, or an SSE stream read
        to its end)."""
        path = f"/v1/runs/{_id(id)}/mcp"
        headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
        if session_id:
            headers["Mcp-Session-Id"] = session_id
        with self._stream("POST", path, content=json.dumps(message).encode(), headers=headers) as r:
            body = r.read()
            return McpReply.of(r.status_code, r.headers, body, path)

    def mcp_stream(self, id: Any, *, session_id: str, idle: float = 5.0, limit: Optional[int] = None) -> List[Dict[str, Any]]:
        """Open the session's stream of server messages and read what comes
        until it is quiet for idle seconds (or limit messages came)."""
        path = f"/v1/runs/{_id(id)}/mcp"
        out: List[Dict[str, Any]] = []
        headers = {"Accept": "text/event-stream", "Mcp-Session-Id": session_id}
        try:
            with self._stream("GET", path, headers=headers, timeout=httpx.Timeout(idle, connect=10.0)) as r:
                if r.status_code != 200:
                    raise mcp_error(r.status_code, r.read(), path)
                parser = SSEParser()
                for line in r.iter_lines():
                    data = parser.feed(line)
                    if data is not None:
                        out.append(json.loads(data))
                        if limit is not None and len(out) >= limit:
                            break
        except httpx.ReadTimeout:
            pass  # quiet for idle: what came is the answer
        return out

    def mcp_end_session(self, id: Any, *, session_id: str) -> None:
        path = f"/v1/runs/{_id(id)}/mcp"
        self._see("DELETE", path)
        r = self._http.delete(path, headers={"Mcp-Session-Id": session_id})
        if r.status_code >= 300:
            raise mcp_error(r.status_code, r.content, path)

    def mcp_session(self, id: Any, *, client_name: str = "paddock-python", version: str = "1") -> McpSession:
        """An initialized MCP session with the run: list_tools, call_tool,
        close (also as a context manager)."""
        return McpSession.open(self, _id(id), client_name, version)

    # A run as a context manager.
    def run(self, request: Optional[t.BootstrapRequest] = None, /, **fields: Any):
        """Bootstrap a run and give it as a context manager that rejects
        the run on exit unless it was submitted:

            with client.run(project="app", task="…", agent_name="coder") as run:
                run.agent.call_tool(run.id, "write", path="x", content="y")
                run.submit()
        """
        from .run import RunSession

        return RunSession(self, self.bootstrap(request, **fields))


class McpReply:
    """What the MCP endpoint answered a message with."""

    def __init__(self, status: int, session_id: Optional[str], messages: List[Dict[str, Any]]) -> None:
        self.status = status
        self.session_id = session_id
        self.messages = messages

    @classmethod
    def of(cls, status: int, headers: Any, body: bytes, path: str) -> "McpReply":
        if status >= 300:
            raise mcp_error(status, body, path)
        ctype = headers.get("Content-Type", "")
        msgs: List[Dict[str, Any]] = []
        if ctype.startswith("text/event-stream"):
            parser = SSEParser()
            for line in body.decode("utf-8").split("\n"):
                data = parser.feed(line)
                if data is not None:
                    msgs.append(json.loads(data))
        elif body.strip():
            v = json.loads(body)
            msgs = v if isinstance(v, list) else [v]
        return cls(status, headers.get("Mcp-Session-Id"), msgs)

    @property
    def result(self) -> Any:
        """The result of the (one) response among the messages; an error
        response raises McpError."""
        from .mcp import McpError

        for m in self.messages:
            if "error" in m and "id" in m:
                raise McpError(m["error"])
            if "result" in m:
                return m["result"]
        return None


def mcp_error(status: int, body: bytes, path: str) -> Exception:
    """paddock's refusal (an envelope: unauthorized, not_found, …) as its
    PaddockError; the MCP handler's own (plain text) as McpError with the
    HTTP status as its code."""
    from .mcp import McpError

    try:
        env = json.loads(body)
    except ValueError:
        env = None
    if isinstance(env, dict) and env.get("ok") is False:
        return envelope_error(status, body, f"MCP {path}")
    return McpError({"code": status, "message": body.decode("utf-8", errors="replace").strip()})


class ExecStream:
    """A command whose output streams back: iterate for its ExecChunk
    pieces; result is its ExecResult once the iteration ended. An error the
    daemon sends instead of a result is raised."""

    def __init__(self, client: Client, call: _Call) -> None:
        self._client, self._call = client, call
        self._cm: Any = None
        self.result: Optional[t.ExecResult] = None

    def __enter__(self) -> "ExecStream":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        if self._cm is not None:
            self._cm.__exit__(None, None, None)
            self._cm = None

    def __iter__(self) -> Iterator[ExecChunk]:
        call = self._call
        path = call.path()
        try:
            self._cm = self._client._stream("POST", path, params=call.query_params(), content=call.json_body(),
                                            headers=call.request_headers())
            r = self._cm.__enter__()
            if r.headers.get("Content-Type") != "application/x-ndjson":
                raise envelope_error(r.status_code, r.read(), f"POST {call.template}")
            for line in r.iter_lines():
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
            self.close()
        raise TransportError("exec: the stream ended without a result")

    def wait(self) -> t.ExecResult:
        """Read the stream to its end (dropping the output) and give the result."""
        for _ in self:
            pass
        assert self.result is not None
        return self.result


__all__ = ["Client", "ExecStream", "McpReply", "AGENT_HEADER"]
