"""The fixtures every test shares: a real daemon on a temporary state
directory ($PADDOCK_BIN serve), a project (a git repository made here),
and clients of the daemon, sync and async, that record every request."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "src"))

import paddock  # noqa: E402

#: Every (method, path) any client of the session sent, for test_coverage.
SENT: list = []


def record(method: str, path: str) -> None:
    SENT.append((method, path))


def git(repo: str, *args: str) -> str:
    env = dict(os.environ, GIT_AUTHOR_NAME="Test", GIT_AUTHOR_EMAIL="test@example.com",
               GIT_COMMITTER_NAME="Test", GIT_COMMITTER_EMAIL="test@example.com")
    return subprocess.run(["git", "-C", repo, *args], check=True, capture_output=True, text=True, env=env).stdout


def make_repo(path: str, files: dict) -> str:
    os.makedirs(path)
    git(path, "init", "-q", "-b", "main")
    for name, content in files.items():
        full = os.path.join(path, name)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "w") as f:
            f.write(content)
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "initial")
    git(path, "branch", "landing")
    return path


def _die_with_parent() -> None:
    # The daemon gets SIGKILL if pytest dies without stopping it (killed
    # itself): no daemon outlives its suite. PR_SET_PDEATHSIG is 1.
    import ctypes

    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Daemon:
    """A daemon started from $PADDOCK_BIN on home, with --listen on a free
    loopback port: stop() ends it (SIGTERM, then SIGKILL)."""

    def __init__(self, bin: str, home: str) -> None:
        self.bin, self.home = bin, home
        self.socket = os.path.join(home, "paddock.sock")
        self.port = free_port()
        self.addr = f"127.0.0.1:{self.port}"
        self.log = os.path.join(home, "..", "daemon.log")
        self.proc = None

    def start(self) -> None:
        os.makedirs(self.home, mode=0o700, exist_ok=True)
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen([self.bin, "serve", "--home", self.home, "--log-level", "warn", "--listen", self.addr],
                                         stdout=log, stderr=log, env=dict(os.environ, PADDOCK_NO_AUTOSTART="1"),
                                         start_new_session=True, preexec_fn=_die_with_parent)
        deadline = time.monotonic() + 30
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the daemon exited ({self.proc.returncode}):\n{self.tail()}")
            try:
                with paddock.Client(socket=self.socket) as c:
                    c.health()
                return
            except (paddock.TransportError, paddock.PaddockError):
                if time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(f"the daemon did not start in 30s:\n{self.tail()}")
                time.sleep(0.05)

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise RuntimeError(f"the daemon did not stop a minute after SIGTERM:\n{self.tail()}")

    def token(self) -> str:
        with open(os.path.join(self.home, "token")) as f:
            return f.read().strip()

    def tail(self, n: int = 30) -> str:
        try:
            with open(self.log, errors="replace") as f:
                return "".join(f.readlines()[-n:])
        except OSError as e:
            return str(e)


@pytest.fixture(scope="session")
def workdir():
    # Short: a unix socket's path is at most 108 bytes.
    d = tempfile.mkdtemp(prefix="pdk-py-")
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="session")
def daemon(workdir):
    bin = os.environ.get("PADDOCK_BIN")
    if not bin:
        pytest.fail("PADDOCK_BIN is not set: build ./cmd/paddockd and set it to the binary (go test ./sdk/python does)")
    home = os.path.join(workdir, "home")
    os.makedirs(os.path.join(home, "secrets"), mode=0o700)
    with open(os.path.join(home, "paddock.toml"), "w") as f:
        f.write('apply_name = "Op"\napply_email = "op@example.com"\n')
    d = Daemon(bin, home)
    d.start()
    try:
        yield d
    finally:
        d.stop()
        if os.environ.get("PADDOCK_SHOW_LOG"):
            print(d.tail(200))


@pytest.fixture(scope="session")
def client(daemon):
    with paddock.Client(socket=daemon.socket, observer=record) as c:
        yield c


_projects = {"n": 0}


@pytest.fixture
def project(client, workdir):
    """A fresh project: a git repository whose manifest's test is make test."""
    _projects["n"] += 1
    name = f"app{_projects['n']}"
    repo = make_repo(os.path.join(workdir, "src", name), {
        "README.md": "hello\n",
        "Makefile": "test:\n\ttest -f README.md\n",
    })
    p = client.add_project(path=repo, name=name)
    p.repo = repo  # type: ignore[attr-defined]
    return p
