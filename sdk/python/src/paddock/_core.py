"""What the sync and the async client share: where the daemon is, how a
request is made, and the operations that are one JSON request and one
enveloped answer. Each operation method builds a _Call and hands it to
self._do, which the sync client runs at once and the async one returns
as a coroutine: the methods are written once for both.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import os
import random
import re
import secrets
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, TypeVar, Union
from urllib.parse import quote

import httpx

from . import types as t
from ._codec import build, decode, encode
from .errors import DecodeError, TransportError, from_wire

#: The header that marks a request made for a run's agent by an operator's
#: client: like a call with the run's token, it resumes a run a daemon
#: restart checkpointed (paddock.AgentHeader).
AGENT_HEADER = "Paddock-Agent"

#: Who calls observer(method, path) for every request a client sends.
Observer = Callable[[str, str], None]


def default_home(env: Optional[Mapping[str, str]] = None) -> str:
    """The state directory the CLI uses: $PADDOCK_HOME, else
    $XDG_STATE_HOME/paddock, else ~/.local/state/paddock."""
    env = os.environ if env is None else env
    if env.get("PADDOCK_HOME"):
        return os.path.abspath(env["PADDOCK_HOME"])
    if env.get("XDG_STATE_HOME"):
        return os.path.join(env["XDG_STATE_HOME"], "paddock")
    home = env.get("HOME") or os.path.expanduser("~")
    return os.path.join(home, ".local", "state", "paddock")


def default_socket(env: Optional[Mapping[str, str]] = None) -> str:
    """The daemon's unix socket in the default state directory."""
    return os.path.join(default_home(env), "paddock.sock")


@dataclasses.dataclass(frozen=True)
class Endpoint:
    """Where a daemon listens and with what a client authenticates: a unix
    socket (socket), or a loopback TCP address (addr, host:port) with a
    bearer token. token on a socket is a run's or a principal's; without
    one the socket's peer credentials say who calls."""

    socket: Optional[str] = None
    addr: Optional[str] = None
    token: Optional[str] = None
    agent: bool = False

    @property
    def base_url(self) -> str:
        # On the unix socket the daemon takes the Host "paddock".
        return "http://paddock" if self.addr is None else f"http://{self.addr}"

    def headers(self) -> Dict[str, str]:
        h = {}
        if self.token:
            h["Authorization"] = f"Bearer {self.token}"
        if self.agent:
            h[AGENT_HEADER] = "1"
        return h


def resolve_endpoint(socket: Optional[str], addr: Optional[str], token: Optional[str], home: Optional[str], agent: bool) -> Endpoint:
    if socket and addr:
        raise ValueError("give a socket or an addr, not both")
    if addr:
        addr = addr.removeprefix("http://").rstrip("/")
        if token is None:
            # TCP needs a token: the daemon's, from its state directory.
            path = os.path.join(home or default_home(), "token")
            try:
                with open(path, encoding="utf-8") as f:
                    token = f.read().strip()
            except OSError as e:
                raise ValueError(f"TCP needs a token: pass token= or make {path} readable ({e})") from None
        return Endpoint(addr=addr, token=token, agent=agent)
    if socket is None:
        socket = os.path.join(home, "paddock.sock") if home else default_socket()
    return Endpoint(socket=socket, token=token, agent=agent)


def seconds(v: Union[None, int, float, str]) -> Optional[str]:
    """A wait as a Go duration: 30 or 30.0 is "30s"; a string is as given."""
    if v is None or isinstance(v, str):
        return v
    return f"{float(v):g}s"


@dataclasses.dataclass
class _Call:
    method: str
    template: str  # as in openapi.json
    params: Dict[str, str] = dataclasses.field(default_factory=dict)
    query: Dict[str, Any] = dataclasses.field(default_factory=dict)
    body: Any = None  # a dataclass or dict, sent as JSON
    content: Optional[bytes] = None  # a raw body
    content_type: Optional[str] = None
    headers: Dict[str, str] = dataclasses.field(default_factory=dict)
    out: Any = None  # the type of the answer's data; None: ignored
    raw: Optional[str] = None  # "text", "bytes" or "json": the body is the answer, no envelope

    def path(self) -> str:
        return re.sub(r"\{(\w+)\}", lambda m: quote(self.params[m.group(1)], safe=""), self.template)

    def query_params(self) -> List[tuple]:
        out = []
        for k, v in self.query.items():
            if v is None or v is False:
                continue
            for item in (v if isinstance(v, (list, tuple)) else [v]):
                out.append((k, "true" if item is True else str(item)))
        return out

    def json_body(self) -> Optional[bytes]:
        if self.content is not None:
            return self.content
        if self.body is None:
            return None
        return json.dumps(encode(self.body), ensure_ascii=False).encode("utf-8")

    def request_headers(self) -> Dict[str, str]:
        h = dict(self.headers)
        if self.content_type:
            h["Content-Type"] = self.content_type
        elif self.body is not None:
            h["Content-Type"] = "application/json"
        return h


def envelope_error(status: int, body: bytes, what: str) -> Exception:
    """The exception an answer that is not a success stands for."""
    try:
        env = json.loads(body)
    except ValueError:
        return TransportError(f"{what}: status {status} with an answer that is not paddock's: {body[:200]!r}")
    if isinstance(env, dict) and env.get("ok") is False and "error" in env:
        return from_wire(env["error"], status)
    return TransportError(f"{what}: status {status} without an error envelope")


def answer(call: _Call, status: int, body: bytes) -> Any:
    """The data of an answer (its status and whole body), or the error."""
    what = f"{call.method} {call.template}"
    if status >= 300:
        raise envelope_error(status, body, what)
    if call.raw == "bytes":
        return body
    if call.raw == "text":
        return body.decode("utf-8", errors="replace")
    try:
        env = json.loads(body)
    except ValueError as e:
        raise DecodeError(f"{what}: an answer that is not JSON: {e}") from None
    if call.raw == "json":
        return env
    if not isinstance(env, dict) or env.get("ok") is not True:
        raise DecodeError(f"{what}: status {status} without a success envelope")
    if call.out is None:
        return env.get("data")
    return decode(call.out, env.get("data"), what)


def _id(v: Any) -> str:
    """A run id, from a str or anything with an id (a Run, a RunSession)."""
    if isinstance(v, str):
        return v
    i = getattr(v, "id", None)
    if isinstance(i, str):
        return i
    raise TypeError(f"expected a run id, got {type(v).__name__}")


def _body(cls, request, fields):
    return build(cls, request, fields)


@dataclasses.dataclass
class Diff:
    """A change set's whole unified diff (text, with bytes that are not
    UTF-8 replaced) and the hash of the change set it is of."""

    hash: str
    text: str


@dataclasses.dataclass
class ExecChunk:
    """A piece of a streamed command's output: stream is stdout or stderr."""

    stream: str
    data: bytes


_Ops = TypeVar("_Ops", bound="Operations")


class Operations:
    """The operations that are one request and one answer. Every method is
    its operationId in snake_case (getRun: get_run); path parameters are
    positional, the rest keyword arguments; a body is its dataclass or that
    dataclass's fields as keyword arguments."""

    #: The key a write carries instead of one of its own (with_idempotency_key).
    _idempotency_key: Optional[str] = None

    def _do(self, call: _Call) -> Any:  # pragma: no cover - the clients' own
        raise NotImplementedError

    def with_idempotency_key(self: "_Ops", key: str) -> "_Ops":
        """A client on the same daemon whose writes carry key as their
        Idempotency-Key instead of a key of their own: a caller that keeps
        the key (an orchestrator that may itself restart) makes the write
        again with it, and gets the first write's answer if it was done.
        One key names one call: make one write with the client it gives.
        It shares this client's connections (close this one, not it).
        ValueError if key is not 1 to 128 printable ASCII characters
        without spaces."""
        check_idempotency_key(key)
        c = copy.copy(self)
        c._idempotency_key = key
        return c

    # The daemon.
    def health(self) -> Dict[str, Any]:
        return self._do(_Call("GET", "/healthz"))

    def get_openapi(self) -> Dict[str, Any]:
        """The daemon's OpenAPI document, as served."""
        return self._do(_Call("GET", "/v1/openapi.json", raw="json"))

    def get_metrics(self, *, accept: Optional[str] = None) -> str:
        """Prometheus's text exposition (OpenMetrics with that Accept)."""
        return self._do(_Call("GET", "/metrics", raw="text", headers={"Accept": accept} if accept else {}))

    def get_status(self) -> t.DaemonStatus:
        return self._do(_Call("GET", "/v1/status", out=t.DaemonStatus))

    def doctor(self) -> t.DoctorReport:
        return self._do(_Call("GET", "/v1/doctor", out=t.DoctorReport))

    def gc(self, request: Optional[t.GcBody] = None, /, **fields: Any) -> List[t.Finding]:
        return self._do(_Call("POST", "/v1/gc", body=_body(t.GcBody, request, fields), out=List[t.Finding]))

    def ui_login(self) -> t.UILogin:
        return self._do(_Call("POST", "/v1/ui/login", out=t.UILogin))

    def get_bundle_key(self) -> t.BundleKey:
        return self._do(_Call("GET", "/v1/bundle-key", out=t.BundleKey))

    def list_nodes(self) -> List[t.Node]:
        return self._do(_Call("GET", "/v1/nodes", out=List[t.Node]))

    # Projects.
    def list_projects(self) -> List[t.Project]:
        return self._do(_Call("GET", "/v1/projects", out=List[t.Project]))

    def add_project(self, request: Optional[t.AddProjectRequest] = None, /, **fields: Any) -> t.Project:
        return self._do(_Call("POST", "/v1/projects", body=_body(t.AddProjectRequest, request, fields), out=t.Project))

    def get_project(self, name: str) -> t.Project:
        return self._do(_Call("GET", "/v1/projects/{name}", {"name": name}, out=t.Project))

    def set_project(self, name: str, request: Optional[t.SetProjectRequest] = None, /, **fields: Any) -> t.Project:
        return self._do(_Call("PATCH", "/v1/projects/{name}", {"name": name}, body=_body(t.SetProjectRequest, request, fields), out=t.Project))

    def remove_project(self, name: str) -> Dict[str, Any]:
        return self._do(_Call("DELETE", "/v1/projects/{name}", {"name": name}))

    def unlock_project(self, name: str, request: Optional[t.UnlockProjectBody] = None, /, **fields: Any) -> t.UnlockResult:
        return self._do(_Call("POST", "/v1/projects/{name}/unlock", {"name": name}, body=_body(t.UnlockProjectBody, request, fields), out=t.UnlockResult))

    def get_project_manifest(self, name: str) -> Dict[str, Any]:
        return self._do(_Call("GET", "/v1/projects/{name}/manifest", {"name": name}))

    def get_project_checkout(self, name: str) -> t.CheckoutStatus:
        return self._do(_Call("GET", "/v1/projects/{name}/checkout", {"name": name}, out=t.CheckoutStatus))

    # Runs.
    def list_runs(self, *, project: Optional[str] = None, all: bool = False) -> List[t.Run]:
        return self._do(_Call("GET", "/v1/runs", query={"project": project, "all": all}, out=List[t.Run]))

    def create_run(self, request: Optional[t.CreateRunRequest] = None, /, **fields: Any) -> t.Run:
        return self._do(_Call("POST", "/v1/runs", body=_body(t.CreateRunRequest, request, fields), out=t.Run))

    def bootstrap(self, request: Optional[t.BootstrapRequest] = None, /, **fields: Any) -> t.BootstrapResult:
        """Bind a new run to a project, an agent and a task; the result's
        token is the run's own credential (client.with_token(token))."""
        return self._do(_Call("POST", "/v1/bootstrap", body=_body(t.BootstrapRequest, request, fields), out=t.BootstrapResult))

    def get_run(self, id: Any) -> t.Run:
        return self._do(_Call("GET", "/v1/runs/{id}", {"id": _id(id)}, out=t.Run))

    def remove_run(self, id: Any, *, expect_seq: Optional[int] = None) -> t.Run:
        return self._do(_Call("DELETE", "/v1/runs/{id}", {"id": _id(id)}, {"expect_seq": expect_seq}, out=t.Run))

    def retain_run(self, id: Any, *, expect_seq: Optional[int] = None) -> t.Run:
        return self._do(_Call("POST", "/v1/runs/{id}/retain", {"id": _id(id)}, {"expect_seq": expect_seq}, out=t.Run))

    def reject_run(self, id: Any, *, expect_seq: Optional[int] = None) -> t.Run:
        return self._do(_Call("POST", "/v1/runs/{id}/reject", {"id": _id(id)}, {"expect_seq": expect_seq}, out=t.Run))

    def review_run(self, id: Any, request: Optional[t.ReviewRequest] = None, /, **fields: Any) -> t.Run:
        return self._do(_Call("POST", "/v1/runs/{id}/review", {"id": _id(id)}, body=_body(t.ReviewRequest, request, fields), out=t.Run))

    def fork_run(self, id: Any, request: Optional[t.ForkRequest] = None, /, **fields: Any) -> t.ForkResult:
        return self._do(_Call("POST", "/v1/runs/{id}/fork", {"id": _id(id)}, body=_body(t.ForkRequest, request, fields), out=t.ForkResult))

    def checkpoint_run(self, id: Any, request: Optional[t.CheckpointRunBody] = None, /, *, expect_seq: Optional[int] = None, **fields: Any) -> t.Run:
        return self._do(_Call("POST", "/v1/runs/{id}/checkpoint", {"id": _id(id)}, {"expect_seq": expect_seq},
                              body=_body(t.CheckpointRunBody, request, fields), out=t.Run))

    def resume_run(self, id: Any, *, expect_seq: Optional[int] = None) -> t.ResumeResult:
        return self._do(_Call("POST", "/v1/runs/{id}/resume", {"id": _id(id)}, {"expect_seq": expect_seq}, out=t.ResumeResult))

    def adopt_run(self, id: Any) -> t.AdoptResult:
        return self._do(_Call("POST", "/v1/runs/{id}/adopt", {"id": _id(id)}, out=t.AdoptResult))

    def list_events(self, id: Any, *, after: int = 0, limit: Optional[int] = None,
                    wait: Union[None, int, float, str] = None) -> List[t.Event]:
        """Events after seq after; with wait (seconds, or a Go duration),
        an empty answer is held until one arrives or wait passes."""
        return self._do(_Call("GET", "/v1/runs/{id}/events", {"id": _id(id)},
                              {"after": after, "limit": limit, "wait": seconds(wait)}, out=List[t.Event]))

    # The run's working tools and commands.
    def list_tools(self, id: Any) -> List[t.Tool]:
        return self._do(_Call("GET", "/v1/runs/{id}/tools", {"id": _id(id)}, out=List[t.Tool]))

    def call_tool(self, id: Any, name: str, args: Optional[Dict[str, Any]] = None, /, *,
                  expect_seq: Optional[int] = None, **kwargs: Any) -> Any:
        """Run a working tool (read, write, edit, glob, grep, list, plan, …)
        with its arguments, as a dict or keyword arguments; the answer is the
        tool's structured result, as JSON."""
        if args is not None and kwargs:
            raise TypeError("give the tool's arguments as a dict or as keyword arguments, not both")
        return self._do(_Call("POST", "/v1/runs/{id}/tools/{name}", {"id": _id(id), "name": name}, {"expect_seq": expect_seq},
                              body=args if args is not None else kwargs))

    def exec(self, id: Any, request: Optional[t.ExecRequest] = None, /, *, expect_seq: Optional[int] = None,
             stdin: Optional[bytes] = None, **fields: Any) -> t.ExecResult:
        """Run a command in the workspace, confined, and wait for its
        result. stdin (bytes) is what it reads."""
        req = _exec_request(request, fields, stdin)
        return self._do(_Call("POST", "/v1/runs/{id}/exec", {"id": _id(id)}, {"expect_seq": expect_seq}, body=req, out=t.ExecResult))

    def deliver_inbox(self, id: Any, name: str, content: Union[bytes, str]) -> t.InboxResult:
        """Deliver a file into the run's .paddock/inbox/."""
        if isinstance(content, str):
            content = content.encode("utf-8")
        return self._do(_Call("POST", "/v1/runs/{id}/inbox", {"id": _id(id)}, {"name": name}, content=content,
                              content_type="application/octet-stream", out=t.InboxResult))

    # Jobs.
    def start_job(self, id: Any, request: Optional[t.StartJobBody] = None, /, **fields: Any) -> t.Job:
        return self._do(_Call("POST", "/v1/runs/{id}/jobs", {"id": _id(id)}, body=_body(t.StartJobBody, request, fields), out=t.Job))

    def list_jobs(self, id: Any) -> List[t.Job]:
        return self._do(_Call("GET", "/v1/runs/{id}/jobs", {"id": _id(id)}, out=List[t.Job]))

    def get_job_status(self, id: Any) -> t.JobStatus:
        return self._do(_Call("GET", "/v1/runs/{id}/status", {"id": _id(id)}, out=t.JobStatus))

    def get_job(self, id: Any, job: str) -> t.Job:
        return self._do(_Call("GET", "/v1/runs/{id}/jobs/{job}", {"id": _id(id), "job": job}, out=t.Job))

    def cancel_job(self, id: Any, job: str) -> t.Job:
        return self._do(_Call("POST", "/v1/runs/{id}/jobs/{job}/cancel", {"id": _id(id), "job": job}, out=t.Job))

    def get_artifact(self, id: Any, kind: str) -> Dict[str, Any]:
        """One of the run's artifacts: {"kind", "content"}."""
        return self._do(_Call("GET", "/v1/runs/{id}/artifacts/{kind}", {"id": _id(id), "kind": kind}))

    # Change sets and decisions.
    def get_change_set(self, id: Any) -> t.ChangeSet:
        return self._do(_Call("GET", "/v1/runs/{id}/changeset", {"id": _id(id)}, out=t.ChangeSet))

    def blame_change_set(self, id: Any, *, hash: Optional[str] = None) -> t.Blame:
        return self._do(_Call("GET", "/v1/runs/{id}/changeset/blame", {"id": _id(id)}, {"hash": hash}, out=t.Blame))

    def get_bundle(self, id: Any) -> bytes:
        """The run's submitted change set as one signed bundle (a tar)."""
        return self._do(_Call("GET", "/v1/runs/{id}/bundle", {"id": _id(id)}, raw="bytes"))

    def import_bundle(self, bundle: bytes, *, project: Optional[str] = None, kind: Optional[str] = None,
                      trust: Optional[Sequence[str]] = None, untrusted: bool = False) -> t.ImportResult:
        return self._do(_Call("POST", "/v1/import", query={"project": project, "kind": kind, "trust": list(trust or []), "untrusted": untrusted},
                              content=bytes(bundle), content_type="application/vnd.paddock.bundle+tar", out=t.ImportResult))

    def submit(self, id: Any, request: Optional[t.SubmitBody] = None, /, *, expect_seq: Optional[int] = None, **fields: Any) -> t.ChangeSet:
        """Freeze the change set; with expect_hash, only if it is still the one reviewed."""
        return self._do(_Call("POST", "/v1/runs/{id}/submit", {"id": _id(id)}, {"expect_seq": expect_seq},
                              body=_body(t.SubmitBody, request, fields), out=t.ChangeSet))

    def approve(self, id: Any, request: Optional[t.ApproveBody] = None, /, *, expect_seq: Optional[int] = None, **fields: Any) -> t.Submission:
        return self._do(_Call("POST", "/v1/runs/{id}/approve", {"id": _id(id)}, {"expect_seq": expect_seq},
                              body=_body(t.ApproveBody, request, fields), out=t.Submission))

    def apply(self, id: Any, request: Optional[t.ApplyBody] = None, /, *, expect_seq: Optional[int] = None, **fields: Any) -> t.Submission:
        return self._do(_Call("POST", "/v1/runs/{id}/apply", {"id": _id(id)}, {"expect_seq": expect_seq},
                              body=_body(t.ApplyBody, request, fields), out=t.Submission))

    def undo(self, id: Any, *, expect_seq: Optional[int] = None) -> t.Submission:
        return self._do(_Call("POST", "/v1/runs/{id}/undo", {"id": _id(id)}, {"expect_seq": expect_seq}, out=t.Submission))

    # The merge queue.
    def list_queue(self, *, project: Optional[str] = None, all: bool = False) -> List[t.QueueEntry]:
        return self._do(_Call("GET", "/v1/queue", query={"project": project, "all": all}, out=List[t.QueueEntry]))

    def queue_add(self, id: Any, request: Optional[t.QueueAddRequest] = None, /, **fields: Any) -> t.QueueEntry:
        return self._do(_Call("POST", "/v1/runs/{id}/queue", {"id": _id(id)}, body=_body(t.QueueAddRequest, request, fields), out=t.QueueEntry))

    def get_queue_entry(self, id: Any) -> t.QueueEntry:
        return self._do(_Call("GET", "/v1/runs/{id}/queue", {"id": _id(id)}, out=t.QueueEntry))

    def queue_remove(self, id: Any) -> t.QueueEntry:
        return self._do(_Call("DELETE", "/v1/runs/{id}/queue", {"id": _id(id)}, out=t.QueueEntry))

    def queue_undo(self, id: Any) -> t.QueueEntry:
        return self._do(_Call("POST", "/v1/runs/{id}/queue/undo", {"id": _id(id)}, out=t.QueueEntry))

    # Capabilities, verification and access requests.
    def get_capabilities(self, id: Any) -> t.Capabilities:
        return self._do(_Call("GET", "/v1/runs/{id}/capabilities", {"id": _id(id)}, out=t.Capabilities))

    def verify(self, id: Any, request: Optional[t.VerifyBody] = None, /, **fields: Any) -> t.VerifyResult:
        return self._do(_Call("POST", "/v1/runs/{id}/verify", {"id": _id(id)}, body=_body(t.VerifyBody, request, fields), out=t.VerifyResult))

    def list_access_requests(self, id: Any) -> List[t.AccessRequest]:
        return self._do(_Call("GET", "/v1/runs/{id}/requests", {"id": _id(id)}, out=List[t.AccessRequest]))

    def request_access(self, id: Any, request: Optional[t.AccessRequestInput] = None, /, **fields: Any) -> t.AccessRequest:
        return self._do(_Call("POST", "/v1/runs/{id}/requests", {"id": _id(id)}, body=_body(t.AccessRequestInput, request, fields), out=t.AccessRequest))

    def grant_access(self, id: Any, request_id: str, request: Optional[t.GrantAccessBody] = None, /, **fields: Any) -> t.AccessRequest:
        return self._do(_Call("POST", "/v1/runs/{id}/requests/{request}/grant", {"id": _id(id), "request": request_id},
                              body=_body(t.GrantAccessBody, request, fields), out=t.AccessRequest))

    def deny_access(self, id: Any, request_id: str, request: Optional[t.DenyAccessBody] = None, /, **fields: Any) -> t.AccessRequest:
        return self._do(_Call("POST", "/v1/runs/{id}/requests/{request}/deny", {"id": _id(id), "request": request_id},
                              body=_body(t.DenyAccessBody, request, fields), out=t.AccessRequest))

    # Agents.
    def list_agents(self) -> List[t.AgentRecord]:
        return self._do(_Call("GET", "/v1/agents", out=List[t.AgentRecord]))

    def add_agent(self, request: Optional[t.AddAgentRequest] = None, /, **fields: Any) -> t.AgentRecord:
        return self._do(_Call("POST", "/v1/agents", body=_body(t.AddAgentRequest, request, fields), out=t.AgentRecord))

    def get_agent(self, name: str) -> t.AgentRecord:
        return self._do(_Call("GET", "/v1/agents/{name}", {"name": name}, out=t.AgentRecord))

    def remove_agent(self, name: str) -> Dict[str, Any]:
        return self._do(_Call("DELETE", "/v1/agents/{name}", {"name": name}))

    # Flows.
    def start_flow(self, request: Optional[t.StartFlowRequest] = None, /, **fields: Any) -> t.Flow:
        return self._do(_Call("POST", "/v1/flows", body=_body(t.StartFlowRequest, request, fields), out=t.Flow))

    def list_flows(self, *, project: Optional[str] = None) -> List[t.Flow]:
        return self._do(_Call("GET", "/v1/flows", query={"project": project}, out=List[t.Flow]))

    def get_flow(self, flow: str) -> t.Flow:
        return self._do(_Call("GET", "/v1/flows/{flow}", {"flow": flow}, out=t.Flow))

    def pick_event(self, id: Any, event: str, request: Optional[t.MenuEventRequest] = None, /, **fields: Any) -> t.Flow:
        return self._do(_Call("POST", "/v1/runs/{id}/menu/{event}", {"id": _id(id), "event": event},
                              body=_body(t.MenuEventRequest, request, fields), out=t.Flow))

    # Principals and tokens.
    def who_am_i(self) -> t.Caller:
        return self._do(_Call("GET", "/v1/whoami", out=t.Caller))

    def add_principal(self, request: Optional[t.PrincipalRequest] = None, /, **fields: Any) -> t.Principal:
        return self._do(_Call("POST", "/v1/principals", body=_body(t.PrincipalRequest, request, fields), out=t.Principal))

    def list_principals(self) -> List[t.Principal]:
        return self._do(_Call("GET", "/v1/principals", out=List[t.Principal]))

    def get_principal(self, name: str) -> t.Principal:
        return self._do(_Call("GET", "/v1/principals/{name}", {"name": name}, out=t.Principal))

    def set_principal(self, name: str, request: Optional[t.PrincipalRequest] = None, /, **fields: Any) -> t.Principal:
        return self._do(_Call("PATCH", "/v1/principals/{name}", {"name": name}, body=_body(t.PrincipalRequest, request, fields), out=t.Principal))

    def remove_principal(self, name: str) -> t.Principal:
        return self._do(_Call("DELETE", "/v1/principals/{name}", {"name": name}, out=t.Principal))

    def create_token(self, request: Optional[t.TokenRequest] = None, /, **fields: Any) -> t.NewToken:
        return self._do(_Call("POST", "/v1/tokens", body=_body(t.TokenRequest, request, fields), out=t.NewToken))

    def list_tokens(self, *, principal: Optional[str] = None) -> List[t.Token]:
        return self._do(_Call("GET", "/v1/tokens", query={"principal": principal}, out=List[t.Token]))

    def revoke_token(self, token: str) -> t.Token:
        return self._do(_Call("DELETE", "/v1/tokens/{token}", {"token": token}, out=t.Token))

    # Helpers for the streams, shared by both clients.
    def _diff_call(self, id: Any, hash: Optional[str]) -> _Call:
        return _Call("GET", "/v1/runs/{id}/changeset/diff", {"id": _id(id)}, {"hash": hash}, raw="bytes")


def _exec_request(request: Optional[t.ExecRequest], fields: Dict[str, Any], stdin: Optional[bytes]) -> t.ExecRequest:
    req = build(t.ExecRequest, request, fields)
    if stdin is not None:
        import base64

        if isinstance(stdin, str):
            stdin = stdin.encode("utf-8")
        req = dataclasses.replace(req, stdin=base64.b64encode(stdin).decode("ascii"))
    return req


def parse_exec_line(line: bytes) -> Any:
    """One NDJSON line of exec/stream: an ExecChunk, an ExecResult, or an
    exception to raise."""
    import base64

    try:
        obj = json.loads(line)
    except ValueError as e:
        return DecodeError(f"exec: an unreadable line: {e}")
    if obj.get("error") is not None:
        return from_wire(obj["error"])
    if obj.get("result") is not None:
        return decode(t.ExecResult, obj["result"], "exec result")
    return ExecChunk(stream=obj.get("stream", ""), data=base64.b64decode(obj.get("data") or ""))


class SSEParser:
    """Server-Sent Events, line by line: feed each line (without its end);
    an event's data is given back at the blank line that ends it. A
    connection cut inside an event gives nothing of it."""

    def __init__(self) -> None:
        self.data: List[str] = []

    def feed(self, line: str) -> Optional[str]:
        line = line.rstrip("\r\n")
        if line == "":
            if not self.data:
                return None
            data, self.data = "\n".join(self.data), []
            return data
        if line.startswith(":"):
            return None  # a comment: the keep-alive
        name, _, value = line.partition(":")
        if value.startswith(" "):
            value = value[1:]
        if name == "data":
            self.data.append(value)
        return None


#: How many times a call whose error says nothing of it was done
#: (details.done is False) is made again by a client (its retries=), and
#: a write with an idempotency key whose answer was lost.
DEFAULT_RETRIES = 4

#: The header a write's idempotency key travels in: the node that serves
#: the write makes it once, and answers it made again with the same key
#: with the first answer.
IDEMPOTENCY_HEADER = "Idempotency-Key"

#: The biggest body a node reads whole for a key (paddock.MaxKeyedBody).
MAX_KEYED_BODY = 32 << 20

#: The tools whose calls read, sent without a key (as the Go client).
READ_TOOLS = frozenset({"glob", "grep", "list", "read", "stat", "diff", "capabilities"})


#: The longest idempotency key (paddock.MaxIdempotencyKey).
MAX_IDEMPOTENCY_KEY = 128


def check_idempotency_key(key: str) -> str:
    """key, if it is one the daemon takes: 1 to MAX_IDEMPOTENCY_KEY
    printable ASCII characters, no space; ValueError otherwise."""
    if not isinstance(key, str) or not 1 <= len(key) <= MAX_IDEMPOTENCY_KEY or any(not 0x21 <= ord(c) <= 0x7e for c in key):
        raise ValueError(f"an idempotency key is 1 to {MAX_IDEMPOTENCY_KEY} printable ASCII characters without spaces, not {key!r}")
    return key


def keyed(call: "_Call", key: Optional[str] = None) -> bool:
    """Whether call is made again when its answer was lost: a write that
    carries an idempotency key (key, the caller's, or else one of its own,
    unless it has one: every POST, PUT, PATCH and DELETE with a body of at
    most MAX_KEYED_BODY), or a read tool's call, which needs none. A stream
    (exec_stream, exec_attach, MCP) is not made through it."""
    if call.method not in ("POST", "PUT", "PATCH", "DELETE"):
        return False
    if call.template == "/v1/runs/{id}/tools/{name}" and call.params.get("name") in READ_TOOLS:
        return True
    body = call.json_body()
    if body is not None and len(body) > MAX_KEYED_BODY:
        return False
    call.headers.setdefault(IDEMPOTENCY_HEADER, key or secrets.token_urlsafe(18))
    return True


def retryable(e: Exception, keyed: bool) -> bool:
    """Whether a call that failed with e is made again: one that did
    nothing (details.done is False), and a keyed one whose answer was lost
    (a forward delivered, a broken connection) or that is still being made
    (details.in_progress): its key makes it once."""
    from .errors import PaddockError
    if isinstance(e, PaddockError):
        if e.undone:
            return True
        return keyed and (e.details.get("delivered") is True or e.details.get("in_progress") is True)
    # A connection never made sent nothing, and a daemon that is not
    # there is said at once, as the Go client says it.
    sent = isinstance(e.__cause__, httpx.TransportError) and not isinstance(e.__cause__, (httpx.ConnectError, httpx.ConnectTimeout))
    return keyed and isinstance(e, TransportError) and sent


def retry_wait(attempt: int) -> float:
    """Seconds to wait before the attempt after attempt: 0.25 s, then
    twice as long each time up to 2 s, a fifth more or less at random."""
    d = min(0.25 * (2 ** attempt), 2.0)
    return d * random.uniform(0.8, 1.2)
