"""exec/attach: an HTTP/1.1 Upgrade to paddock-attach, then frames both
ways (a kind byte, a 4-byte big-endian length, the payload) until the
daemon sends the result. httpx does not do upgrades, so this speaks
HTTP/1.1 itself for the one request, on a socket of its own.
"""

from __future__ import annotations

import asyncio
import json
import socket
import struct
import threading
from typing import Any, Optional, Sequence, Tuple

from . import types as t
from ._codec import decode, encode
from ._core import Endpoint, envelope_error
from .errors import DecodeError, TransportError, from_wire

PROTOCOL = "paddock-attach"
STDIN, RESIZE, EOF = b"i", b"r", b"e"
STDOUT, STDERR, RESULT = b"o", b"E", b"R"
MAX_FRAME = 1 << 20


def frame(kind: bytes, payload: bytes = b"") -> bytes:
    return kind + struct.pack(">I", len(payload)) + payload


def head(ep: Endpoint, path: str, body: bytes) -> bytes:
    host = "paddock" if ep.addr is None else ep.addr
    lines = [f"POST {path} HTTP/1.1", f"Host: {host}", "Content-Type: application/json", f"Content-Length: {len(body)}",
             "Connection: Upgrade", f"Upgrade: {PROTOCOL}"]
    lines += [f"{k}: {v}" for k, v in ep.headers().items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


def parse_head(raw: bytes) -> Tuple[int, dict]:
    lines = raw.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ", 2)
    if len(parts) < 2 or not parts[1].isdigit():
        raise TransportError(f"exec attach: not an HTTP answer: {lines[0]!r}")
    headers = {}
    for line in lines[1:]:
        k, _, v = line.partition(":")
        headers[k.strip().lower()] = v.strip()
    return int(parts[1]), headers


def dechunk(body: bytes) -> bytes:
    out, rest = b"", body
    while rest:
        size_line, _, rest = rest.partition(b"\r\n")
        n = int(size_line.split(b";")[0] or b"0", 16)
        if n == 0:
            break
        out, rest = out + rest[:n], rest[n + 2:]
    return out


def end_of(payload: bytes) -> t.ExecResult:
    try:
        end = json.loads(payload)
    except ValueError as e:
        raise DecodeError(f"exec attach: an unreadable result: {e}") from None
    if end.get("error") is not None:
        raise from_wire(end["error"])
    if end.get("result") is None:
        raise TransportError("exec attach: the daemon ended without a result")
    return decode(t.ExecResult, end["result"], "exec attach result")


def _write(out: Any, data: bytes) -> None:
    if out is None:
        return
    if callable(out) and not hasattr(out, "write"):
        out(data)
    else:
        out.write(data)


def attach_sync(ep: Endpoint, path: str, req: t.ExecRequest, stdin: Any, stdout: Any, stderr: Any,
                resize: Optional[Sequence[t.TerminalSize]]) -> t.ExecResult:
    body = json.dumps(encode(req)).encode("utf-8")
    try:
        if ep.socket:
            conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            conn.connect(ep.socket)
        else:
            host, _, port = ep.addr.rpartition(":")
            conn = socket.create_connection((host.strip("[]"), int(port)), timeout=10)
            conn.settimeout(None)
    except OSError as e:
        raise TransportError(f"exec attach: {e}") from e
    with conn:
        conn.sendall(head(ep, path, body))
        buf = b""
        while b"\r\n\r\n" not in buf:
            chunk = conn.recv(65536)
            if not chunk:
                raise TransportError("exec attach: the daemon closed the connection before answering")
            buf += chunk
        raw, _, buf = buf.partition(b"\r\n\r\n")
        status, headers = parse_head(raw)
        if status != 101:
            n = int(headers.get("content-length", "-1"))
            while n < 0 or len(buf) < n:
                chunk = conn.recv(65536)
                if not chunk:
                    break
                buf += chunk
            if headers.get("transfer-encoding") == "chunked":
                buf = dechunk(buf)
            raise envelope_error(status, buf[:n] if n >= 0 else buf, f"POST {path}")
        lock = threading.Lock()

        def send(kind: bytes, payload: bytes = b"") -> None:
            with lock:
                conn.sendall(frame(kind, payload))

        def feed() -> None:
            try:
                for size in resize or ():
                    send(RESIZE, json.dumps(encode(size)).encode())
                if isinstance(stdin, (bytes, bytearray)):
                    for i in range(0, len(stdin), 32 << 10):
                        send(STDIN, bytes(stdin[i:i + (32 << 10)]))
                else:
                    while True:
                        data = stdin.read(32 << 10)
                        if not data:
                            break
                        send(STDIN, data if isinstance(data, bytes) else data.encode())
                send(EOF)
            except OSError:
                pass  # the command ended first: the connection is closed

        feeder = None
        if stdin is not None or resize:
            feeder = threading.Thread(target=feed, daemon=True)
            feeder.start()

        def read_exact(n: int) -> bytes:
            nonlocal buf
            while len(buf) < n:
                chunk = conn.recv(65536)
                if not chunk:
                    raise TransportError("exec attach: the stream ended early")
                buf += chunk
            out, buf = buf[:n], buf[n:]
            return out

        while True:
            h = read_exact(5)
            kind, n = h[:1], struct.unpack(">I", h[1:])[0]
            if n > MAX_FRAME:
                raise TransportError(f"exec attach: a frame of {n} bytes")
            payload = read_exact(n)
            if kind == STDOUT:
                _write(stdout, payload)
            elif kind == STDERR:
                _write(stderr, payload)
            elif kind == RESULT:
                return end_of(payload)


async def attach_async(ep: Endpoint, path: str, req: t.ExecRequest, stdin: Any, stdout: Any, stderr: Any,
                       resize: Optional[Sequence[t.TerminalSize]]) -> t.ExecResult:
    body = json.dumps(encode(req)).encode("utf-8")
    try:
        if ep.socket:
            reader, writer = await asyncio.open_unix_connection(ep.socket)
        else:
            host, _, port = ep.addr.rpartition(":")
            reader, writer = await asyncio.open_connection(host.strip("[]"), int(port))
    except OSError as e:
        raise TransportError(f"exec attach: {e}") from e
    feeder = None
    try:
        writer.write(head(ep, path, body))
        await writer.drain()
        try:
            raw = await reader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError:
            raise TransportError("exec attach: the daemon closed the connection before answering") from None
        status, headers = parse_head(raw[:-4])
        if status != 101:
            n = int(headers.get("content-length", "-1"))
            rest = await (reader.readexactly(n) if n >= 0 else reader.read())
            if headers.get("transfer-encoding") == "chunked":
                rest = dechunk(rest)
            raise envelope_error(status, rest, f"POST {path}")

        async def feed() -> None:
            try:
                for size in resize or ():
                    writer.write(frame(RESIZE, json.dumps(encode(size)).encode()))
                if isinstance(stdin, (bytes, bytearray)):
                    for i in range(0, len(stdin), 32 << 10):
                        writer.write(frame(STDIN, bytes(stdin[i:i + (32 << 10)])))
                        await writer.drain()
                elif stdin is not None:
                    async for data in stdin:
                        writer.write(frame(STDIN, data))
                        await writer.drain()
                writer.write(frame(EOF))
                await writer.drain()
            except Exception:  # noqa: BLE001 - the command ended first: the connection is closed
                pass

        if stdin is not None or resize:
            feeder = asyncio.ensure_future(feed())
        while True:
            try:
                h = await reader.readexactly(5)
                kind, n = h[:1], struct.unpack(">I", h[1:])[0]
                if n > MAX_FRAME:
                    raise TransportError(f"exec attach: a frame of {n} bytes")
                payload = await reader.readexactly(n)
            except asyncio.IncompleteReadError:
                raise TransportError("exec attach: the stream ended early") from None
            if kind == STDOUT:
                _write(stdout, payload)
            elif kind == STDERR:
                _write(stderr, payload)
            elif kind == RESULT:
                return end_of(payload)
    finally:
        if feeder is not None:
            feeder.cancel()
        writer.close()
        try:
            await writer.wait_closed()
        except Exception:  # noqa: BLE001 - the daemon closed first (a broken pipe): the result is in
            pass
