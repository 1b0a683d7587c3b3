"""A call whose error says nothing of it was done (details.done is False)
is made again, the same request and idempotency key each time, until it
is answered or its retries run out; so is a write that may have been done
(delivered) or is still being made (in_progress), which its key makes
once; another error is not; retries=0 makes no call twice; a read tool's
call carries no key. Against a server of the test's own, sync and
async."""

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

import paddock

UNDONE = {"ok": False, "error": {"code": "node_lost", "message": "unreached", "details": {"node": "n2", "delivered": False, "done": False}}}
DELIVERED = {"ok": False, "error": {"code": "node_lost", "message": "maybe", "details": {"node": "n2", "delivered": True}}}
BUSY = {"ok": False, "error": {"code": "busy", "message": "locked"}}
IN_PROGRESS = {"ok": False, "error": {"code": "busy", "message": "being made", "details": {"in_progress": True}}}
OK = {"ok": True, "data": {"exit_code": 0, "stdout": "", "stderr": ""}}


class Server:
    def __init__(self, answers):
        self.answers, self.seen, self.keys = answers, [], []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                outer.seen.append(f"{self.command} {self.path} {body.decode()}")
                outer.keys.append(self.headers.get("Idempotency-Key"))
                a = outer.answers[min(len(outer.seen), len(outer.answers)) - 1]
                out = json.dumps(a).encode()
                self.send_response(503 if "error" in a else 200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        self.addr = f"127.0.0.1:{self.httpd.server_address[1]}"

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


CASES = [
    ("not done, then answered", None, [UNDONE, UNDONE, OK], 3, None),
    ("not done past the retries", 2, [UNDONE], 3, paddock.NodeLost),
    ("maybe done", None, [DELIVERED, OK], 2, None),
    ("still being made", None, [IN_PROGRESS, IN_PROGRESS, OK], 3, None),
    ("maybe done past the retries", 1, [DELIVERED], 2, paddock.NodeLost),
    ("another error", None, [BUSY, OK], 1, paddock.Busy),
    ("no retries", 0, [UNDONE, OK], 1, paddock.NodeLost),
]


def kw(retries):
    return {} if retries is None else {"retries": retries}


@pytest.mark.parametrize("name,retries,answers,calls,raised", CASES, ids=[c[0] for c in CASES])
def test_retries(name, retries, answers, calls, raised):
    srv = Server(answers)
    try:
        with paddock.Client(addr=srv.addr, token="t0k3n", **kw(retries)) as client:
            if raised is None:
                client.exec("r-1", argv=["true"])
            else:
                with pytest.raises(raised) as e:
                    client.exec("r-1", argv=["true"])
                assert e.value.undone == (e.value.details.get("done") is False)
        assert len(srv.seen) == calls
        assert all(s == srv.seen[0] for s in srv.seen)
        assert srv.seen[0].startswith("POST /v1/runs/r-1/exec ")
        assert srv.keys[0] and len(srv.keys[0]) >= 20 and all(k == srv.keys[0] for k in srv.keys)
    finally:
        srv.close()


@pytest.mark.parametrize("name,retries,answers,calls,raised", CASES, ids=[c[0] for c in CASES])
async def test_retries_async(name, retries, answers, calls, raised):
    srv = Server(answers)
    try:
        async with paddock.AsyncClient(addr=srv.addr, token="t0k3n", **kw(retries)) as client:
            if raised is None:
                await client.exec("r-1", argv=["true"])
            else:
                with pytest.raises(raised):
                    await client.exec("r-1", argv=["true"])
        assert len(srv.seen) == calls
        assert all(s == srv.seen[0] for s in srv.seen)
        assert srv.keys[0] and all(k == srv.keys[0] for k in srv.keys)
    finally:
        srv.close()


def test_keys_of_writes_and_reads():
    srv = Server([DELIVERED, OK])
    try:
        with paddock.Client(addr=srv.addr, token="t0k3n") as client:
            client.call_tool("r-1", "read", {"path": "a.txt"})  # delivered, then answered: made again
            client.exec("r-1", argv=["true"])
            client.exec("r-1", argv=["true"])
        assert len(srv.seen) == 4
        assert srv.keys[0] is None and srv.keys[1] is None  # a read: no key, made again as it is
        assert srv.keys[2] and srv.keys[3] and srv.keys[2] != srv.keys[3]  # a key each
    finally:
        srv.close()


def test_copies_keep_the_retries():
    srv = Server([UNDONE, OK])
    try:
        with paddock.Client(addr=srv.addr, token="t0k3n", retries=0) as client:
            with pytest.raises(paddock.NodeLost):
                client.with_token("other").exec("r-1", argv=["true"])
        assert len(srv.seen) == 1
    finally:
        srv.close()


def test_caller_chosen_key():
    """A client from with_idempotency_key sends the caller's key, on each
    attempt and again after the caller made a new client (an orchestrator
    that restarted); a read tool's call still carries none; a key the
    daemon would refuse is refused before anything is sent."""
    srv = Server([DELIVERED, OK, OK, OK])
    try:
        with paddock.Client(addr=srv.addr, token="t0k3n") as client:
            client.with_idempotency_key("job-42/exec-1").exec("r-1", argv=["true"])
            client.with_idempotency_key("job-42/exec-1").with_token("t0k3n").call_tool("r-1", "read", {"path": "a"})
        with paddock.Client(addr=srv.addr, token="t0k3n") as again:
            again.with_idempotency_key("job-42/exec-1").exec("r-1", argv=["true"])
        assert srv.keys == ["job-42/exec-1", "job-42/exec-1", None, "job-42/exec-1"]
        for bad in ["", "has space", "x" * 129, "caf\u00e9"]:
            with pytest.raises(ValueError):
                client.with_idempotency_key(bad)
        assert len(srv.seen) == 4
    finally:
        srv.close()


async def test_caller_chosen_key_async():
    srv = Server([IN_PROGRESS, OK])
    try:
        async with paddock.AsyncClient(addr=srv.addr, token="t0k3n") as client:
            await client.with_idempotency_key("k-1").exec("r-1", argv=["true"])
            with pytest.raises(ValueError):
                client.with_idempotency_key("two words")
        assert srv.keys == ["k-1", "k-1"]
    finally:
        srv.close()
