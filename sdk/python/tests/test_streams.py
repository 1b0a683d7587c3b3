"""The streams: the event stream resumed by seq across connections cut
mid-event (by a proxy of the test's that drops each connection after a
few hundred bytes), the notices' stream, exec streamed with stdin, and an
attached exec with stdin on a terminal."""

import io
import socket
import threading

import pytest

import paddock
from conftest import record
from paddock import types as t


class CuttingProxy:
    """A TCP proxy to the daemon that closes each connection after the
    daemon sent it cuts[i] bytes (the i-th connection; the last applies to
    every later one, None never cuts)."""

    def __init__(self, target: str, cuts):
        host, port = target.rsplit(":", 1)
        self.target = (host, int(port))
        self.cuts = list(cuts)
        self.connections = 0
        self.srv = socket.create_server(("127.0.0.1", 0))
        self.addr = "127.0.0.1:%d" % self.srv.getsockname()[1]
        self.socks = []
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self):
        while True:
            try:
                c, _ = self.srv.accept()
            except OSError:
                return
            cut = self.cuts[min(self.connections, len(self.cuts) - 1)]
            self.connections += 1
            u = socket.create_connection(self.target)
            self.socks += [c, u]
            threading.Thread(target=self.pipe, args=(c, u, None), daemon=True).start()
            threading.Thread(target=self.pipe, args=(u, c, cut), daemon=True).start()

    def pipe(self, src, dst, cut):
        sent = 0
        try:
            while True:
                data = src.recv(4096)
                if not data:
                    break
                if cut is not None and sent + len(data) >= cut:
                    dst.sendall(data[:cut - sent])
                    break
                dst.sendall(data)
                sent += len(data)
        except OSError:
            pass
        for s in (src, dst):  # drop the connection both ways
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()

    def close(self):
        self.srv.close()
        for s in self.socks:
            try:
                s.close()
            except OSError:
                pass


@pytest.fixture
def busy_run(client, project):
    """A run with a few dozen events."""
    b = client.bootstrap(project=project.name, task="events", agent=t.AgentDefinition(
        name="ev", workspace="write", tools=["read", "write"]))
    agent = client.with_token(b.token)
    for i in range(20):
        agent.call_tool(b.run.id, "write", path=f"f{i}.txt", content=f"{i}\n" * 20)
    return b.run.id, agent


def test_event_stream_resumes_after_cut_connections(client, daemon, busy_run):
    run, agent = busy_run
    want = [e.seq for e in client.list_events(run, limit=1000)]
    last = want[-1]
    # Cuts at odd byte counts land inside events: their halves must not be
    # given, and the reconnection must give each of them whole, once.
    proxy = CuttingProxy(daemon.addr, [701, 1303, 2011, 997, None])
    got = []
    try:
        with paddock.Client(addr=proxy.addr, home=daemon.home, observer=record) as c:
            stream = c.stream_events(run)
            for ev in stream:
                got.append(ev)
                if ev.seq == last:
                    # More events while the stream is open, through further cuts.
                    threading.Thread(target=lambda: [agent.call_tool(run, "write", path=f"late{i}.txt", content="late")
                                                     for i in range(3)]).start()
                if ev.seq >= last and sum(1 for e in got if e.type == "tool.call" and "late" in str(e.data)) == 3:
                    break
    finally:
        proxy.close()
    assert proxy.connections >= 5, "the proxy did not cut the stream"
    seqs = [e.seq for e in got]
    assert seqs == list(range(1, seqs[-1] + 1)), "a duplicate or a gap"
    assert [e.seq for e in client.list_events(run, limit=1000)][:len(seqs)] == seqs
    assert all(e.run_id == run for e in got)


def test_event_stream_restarted_after_n_events(client, busy_run):
    run, _ = busy_run
    first = []
    for ev in client.stream_events(run):
        first.append(ev.seq)
        if len(first) == 7:
            break
    rest = []
    for ev in client.stream_events(run, after=first[-1]):
        rest.append(ev.seq)
        if len(rest) == 5:
            break
    assert first + rest == list(range(1, 13))


def test_event_stream_without_reconnect_ends_with_the_connection(client, daemon, busy_run):
    run, _ = busy_run
    proxy = CuttingProxy(daemon.addr, [900])
    try:
        with paddock.Client(addr=proxy.addr, home=daemon.home, observer=record) as c:
            with pytest.raises(paddock.TransportError):
                for _ in c.stream_events(run, reconnect=False):
                    pass
    finally:
        proxy.close()


def test_event_stream_of_an_unknown_run(client):
    with pytest.raises(paddock.NotFound):
        next(iter(client.stream_events("r-nosuchrun")))


def test_notices(client, project):
    b = client.bootstrap(project=project.name, task="notices", agent=t.AgentDefinition(
        name="n", workspace="write", tools=["write", "submit"]))
    agent = client.with_token(b.token)
    agent.call_tool(b.run.id, "write", path="n.txt", content="n")
    cs = agent.submit(b.run.id)
    seen = []
    for n in client.stream_notices(types=["changeset.submitted"]):
        seen.append(n.id)
        if n.run_id == b.run.id:
            assert n.type == "changeset.submitted" and n.project == project.name and n.data["hash"] == cs.hash
            break
    assert seen == sorted(set(seen))


def test_exec_stream_with_stdin(client, project):
    b = client.bootstrap(project=project.name, task="exec", agent=t.AgentDefinition(
        name="x", workspace="write", tools=["exec"]))
    agent = client.with_token(b.token)
    data = b"".join(b"line %d\n" % i for i in range(2000)) + b"\x00\xff binary\n"
    out, err = io.BytesIO(), io.BytesIO()
    with agent.exec_stream(b.run.id, argv=["sh", "-c", "cat; echo done >&2; exit 3"], stdin=data) as s:
        for chunk in s:
            (out if chunk.stream == "stdout" else err).write(chunk.data)
    assert out.getvalue() == data and err.getvalue() == b"done\n"
    assert s.result.exit_code == 3 and s.result.stdout == ""
    # An error instead of a result is raised.
    with pytest.raises(paddock.Forbidden):
        agent.exec_stream(b.run.id, argv=["true"], net="host").wait()


def test_exec_attach_with_stdin_on_a_terminal(client, project):
    run = client.create_run(project=project.name)
    out = io.BytesIO()
    res = client.exec_attach(run.id, argv=["sh", "-c", 'echo "size $(stty size)"; read -r a; echo "got $a"'],
                             terminal=t.TerminalSize(rows=5, cols=40), stdin=io.BytesIO(b"typed\n"), stdout=out)
    assert res.exit_code == 0
    assert b"size 5 40\r\n" in out.getvalue() and b"got typed\r\n" in out.getvalue()
    # Without a terminal: stdin's bytes, its end, and stderr apart.
    out, err = io.BytesIO(), io.BytesIO()
    res = client.exec_attach(run.id, argv=["sh", "-c", "wc -c; echo e >&2"], stdin=b"12345", stdout=out, stderr=err)
    assert res.exit_code == 0 and out.getvalue().strip() == b"5" and err.getvalue() == b"e\n"
    with pytest.raises(paddock.NotFound):
        client.exec_attach("r-nosuchrun", argv=["true"])
