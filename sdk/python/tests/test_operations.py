"""Every operation of the API through the sync client, against the real
daemon: what each answers decodes into its dataclass and says what it
should. test_zz_coverage checks that together the tests sent them all."""

import os
import time

import pytest

import paddock
from paddock import types as t

from conftest import git, make_repo, record

AGENT = t.AgentDefinition(name="worker", workspace="write",
                          tools=["read", "write", "edit", "glob", "grep", "list", "exec", "verify", "submit",
                                 "capabilities", "plan", "request_access", "diff"])


def boot(client, project, agent=AGENT, task="work"):
    b = client.bootstrap(project=project.name, task=task, agent=agent)
    return b.run.id, client.with_token(b.token)


def test_the_daemon(client, daemon):
    assert client.health() is not None
    doc = client.get_openapi()
    assert doc["openapi"].startswith("3") and "/v1/runs" in doc["paths"]
    assert "go_gc_duration_seconds" in client.get_metrics()
    s = client.get_status()
    assert s.pid == daemon.proc.pid and s.socket == daemon.socket
    report = client.doctor()
    assert report.checks and all(c.name for c in report.checks)
    assert isinstance(client.gc(dry_run=True), list)
    assert "/ui/login?code=" in client.ui_login().url
    assert client.get_bundle_key().public_key.startswith("ed25519 ")
    with pytest.raises(paddock.Unsupported):
        client.list_nodes()  # a daemon of its own: no shared store
    assert isinstance(client.list_queue(all=True), list)
    who = client.who_am_i()
    assert who.role == "admin" and who.principal is None


def test_projects(client, workdir):
    repo = make_repo(os.path.join(workdir, "src", "projects"), {"README.md": "x\n", "Makefile": "test:\n\ttrue\n"})
    p = client.add_project(t.AddProjectRequest(path=repo, name="projects"))
    assert p.name == "projects" and p.root == repo
    assert "projects" in [x.name for x in client.list_projects()]
    assert client.get_project("projects").root == repo
    p = client.set_project("projects", protect=["secret/**"])
    assert "secret/**" in (p.protected or [])
    assert client.get_project_checkout("projects").uncommitted == 0
    manifest = client.get_project_manifest("projects")
    assert isinstance(manifest, dict) and manifest
    with pytest.raises(paddock.BadRequest):
        client.unlock_project("projects")  # nothing holds the lock, and no force
    client.unlock_project("projects", force=True)
    client.remove_project("projects")
    with pytest.raises(paddock.NotFound):
        client.get_project("projects")


def test_a_run_and_its_tools(client, project):
    run, agent = boot(client, project)
    assert client.get_run(run).id == run
    assert run in [r.id for r in client.list_runs(project=project.name)]
    assert {"read", "write"} <= {x.name for x in agent.list_tools(run)}
    assert agent.call_tool(run, "write", path="notes.txt", content="one\n")["created"] is True
    assert agent.call_tool(run, "read", {"path": "notes.txt"})
    agent.call_tool(run, "plan", steps=[{"step": "write notes", "status": "in_progress"}])
    assert client.get_artifact(run, "plan")["kind"] == "plan"
    assert client.get_artifact(run, "task")["content"]
    res = agent.exec(run, argv=["sh", "-c", "cat; echo err >&2"], stdin=b"from stdin\n")
    assert res.exit_code == 0 and res.stdout == "from stdin\n" and res.stderr == "err\n"
    inbox = client.deliver_inbox(run, "brief.txt", b"context\n")
    assert inbox.path.endswith("brief.txt") and inbox.size == 8
    caps = agent.get_capabilities(run)
    assert caps.run == run and "write" in [x.name for x in caps.tools]
    events = client.list_events(run, after=0, limit=3)
    assert [e.seq for e in events] == [1, 2, 3]
    assert client.list_events(run, after=10_000, wait=0.2) == []
    stamped = client.get_run(run).last_seq
    with pytest.raises(paddock.Conflict):
        agent.call_tool(run, "write", path="x.txt", content="x", expect_seq=stamped - 1)  # the seq rule
    ck = client.checkpoint_run(run, reason="paused")
    assert ck.workspace.state == "checkpointed"
    assert client.resume_run(run).run.workspace.state == "active"
    with pytest.raises(paddock.Unsupported):
        client.adopt_run(run)  # no other node to adopt from


def test_jobs(client, project):
    run, agent = boot(client, project)
    assert agent.get_job_status(run).state == "idle"
    job = agent.start_job(run, kind="exec", exec=t.ExecRequest(argv=["sleep", "60"]))
    assert job.state == "running"
    with pytest.raises(paddock.Busy):
        agent.start_job(run, kind="exec", exec=t.ExecRequest(argv=["true"]))
    cancelled = agent.cancel_job(run, job.id)
    assert cancelled.id == job.id
    deadline = time.monotonic() + 30
    while agent.get_job(run, job.id).state == "running":
        assert time.monotonic() < deadline
        time.sleep(0.05)
    done = agent.start_job(run, t.StartJobBody(kind="exec", exec=t.ExecRequest(argv=["true"])))
    while agent.get_job(run, done.id).state == "running":
        time.sleep(0.05)
    assert agent.get_job(run, done.id).state == "succeeded"
    assert [j.id for j in agent.list_jobs(run)] == [job.id, done.id]
    assert client.get_artifact(run, "logs")["kind"] == "logs"


def test_change_sets_and_decisions(client, project):
    run, agent = boot(client, project)
    agent.call_tool(run, "write", path="hello.txt", content="hello\n")
    cs = agent.get_change_set(run)
    assert [(e.path, e.op) for e in cs.entries] == [("hello.txt", "create")]
    diff = client.get_change_set_diff(run)
    assert diff.hash == cs.hash and "+hello" in diff.text
    assert client.blame_change_set(run).hunks
    v = agent.verify(run, checks=["test"])
    assert v.passed and v.checks[0].name == "test"
    sub = agent.submit(run, expect_hash=cs.hash)
    assert sub.hash == cs.hash
    assert client.get_change_set_diff(run, hash=cs.hash).text == diff.text
    assert client.blame_change_set(run, hash=cs.hash).hash == cs.hash
    bundle = client.get_bundle(run)
    assert bundle[:1] and len(bundle) > 100
    review = client.review_run(run)
    assert review.review_of.run == run and review.review_of.hash == cs.hash
    approved = client.approve(run, hash=cs.hash)
    assert approved.hash == cs.hash and approved.approved_at
    applied = client.apply(run, to="worktree")
    assert applied.applied_at
    with open(os.path.join(project.repo, "hello.txt")) as f:
        assert f.read() == "hello\n"
    client.undo(run)
    assert not os.path.exists(os.path.join(project.repo, "hello.txt"))
    # The bundle travels back in as a run of its own, its change set submitted.
    imported = client.import_bundle(bundle, project=project.name)
    assert imported.hash == cs.hash and imported.trusted
    # Retained runs stay; a run made without a bootstrap is rejected and removed.
    client.retain_run(imported.run.id)
    with pytest.raises(paddock.Conflict):
        client.remove_run(imported.run.id)
    made = client.create_run(project=project.name)
    client.reject_run(made.id)
    assert client.remove_run(made.id).removed_at


def test_fork(client, project):
    run, agent = boot(client, project)
    agent.call_tool(run, "write", path="base.txt", content="base\n")
    fr = client.fork_run(run, count=2)
    assert fr.run.id == run and len(fr.runs) == 2 and fr.layer
    for r in fr.runs:
        assert client.with_token(None).get_run(r.id).workspace.state == "ready"


def test_merge_queue(client, project):
    run, agent = boot(client, project)
    agent.call_tool(run, "write", path="queued.txt", content="queued\n")
    cs = agent.submit(run)
    client.approve(run, hash=cs.hash)
    entry = client.queue_add(run, branch="landing")
    assert entry.run == run and entry.branch == "landing"
    deadline = time.monotonic() + 60
    while (entry := client.get_queue_entry(run)).state != "landed":
        assert entry.state != "returned" and time.monotonic() < deadline, entry
        time.sleep(0.1)
    assert git(project.repo, "show", "landing:queued.txt") == "queued\n"
    assert run in [e.run for e in client.list_queue(project=project.name, all=True)]
    assert client.queue_undo(run).run == run
    with pytest.raises(paddock.Conflict):
        client.queue_remove(run)  # undone: no longer queued


def test_access_requests(client, project):
    run, agent = boot(client, project, agent=t.AgentDefinition(
        name="narrow", workspace="write", tools=["read", "exec", "capabilities", "request_access"],
        tool={"exec": t.ToolRule(allow=["echo"])}))
    with pytest.raises(paddock.Forbidden):
        agent.exec(run, argv=["ls"])
    req = agent.request_access(run, kind="command", command=["ls"], reason="to see the files")
    assert req.state == "pending"
    assert [r.id for r in agent.list_access_requests(run)] == [req.id]
    with pytest.raises(paddock.Forbidden):
        agent.grant_access(run, req.id)  # a run's token never grants
    assert client.grant_access(run, req.id, note="fine").state == "granted"
    assert agent.exec(run, argv=["ls"]).exit_code == 0
    other = \
        agent.request_access(run, t.AccessRequestInput(kind="tool", tool="write", reason="a typo"))
    assert client.deny_access(run, other.id, t.DenyAccessBody(note="no")).state == "denied"


def test_agents(client):
    rec = client.add_agent(file="tester.toml", source='name = "tester"\nworkspace = "read"\ntools = ["read", "grep"]\n')
    assert rec.definition.name == "tester" and rec.definition.workspace == "read"
    assert "tester" in [a.definition.name for a in client.list_agents()]
    assert client.get_agent("tester").hash == rec.hash
    assert client.remove_agent("tester")["removed"] == "tester"
    with pytest.raises(paddock.NotFound):
        client.get_agent("tester")


def test_flows(client, project):
    flow = client.start_flow(workflow="task-with-review", project=project.name, task="write hello.txt")
    assert flow.state == "coding" and flow.workflow.name == "task-with-review"
    assert flow.id in [f.id for f in client.list_flows(project=project.name)]
    coding = flow.runs["coding"]
    agent = client.for_agent()
    agent.call_tool(coding, "write", path="hello.txt", content="hello")
    flow = agent.pick_event(coding, "done", t.MenuEventRequest(note="done"))
    assert client.get_flow(flow.id).state == "reviewing"


def test_principals_and_tokens(client, daemon):
    p = client.add_principal(name="viv", kind="person", role="viewer")
    assert p.role == "viewer"
    assert [x.name for x in client.list_principals()] == ["viv"]
    assert client.set_principal("viv", role="reviewer", projects=["app1"]).role == "reviewer"
    assert client.get_principal("viv").projects == ["app1"]
    tok = client.create_token(principal="viv", expires="1h")
    assert tok.token and tok.token.startswith("pdk_tok_")
    assert [x.id for x in client.list_tokens(principal="viv")] == [tok.id]
    # The token works over TCP, for what a reviewer may do and no more.
    with paddock.Client(addr=daemon.addr, token=tok.token, observer=record) as viv:
        assert viv.who_am_i().principal == "viv"
        with pytest.raises(paddock.Forbidden):
            viv.add_project(path="/nowhere")
    assert client.revoke_token(tok.id).revoked_at
    with paddock.Client(addr=daemon.addr, token=tok.token, observer=record) as viv:
        with pytest.raises(paddock.Unauthorized):
            viv.who_am_i()
    assert client.remove_principal("viv").name == "viv"


def test_tcp_with_the_daemons_token(daemon):
    with paddock.Client(addr=daemon.addr, home=daemon.home, observer=record) as c:
        assert c.who_am_i().role == "admin"
    with paddock.Client(addr=daemon.addr, token="pdk_tok_wrong", observer=record) as c:
        with pytest.raises(paddock.Unauthorized) as e:
            c.get_status()
        assert e.value.status == 401


def test_default_socket(monkeypatch):
    monkeypatch.setenv("PADDOCK_HOME", "/srv/paddock")
    assert paddock.default_socket() == "/srv/paddock/paddock.sock"
    monkeypatch.delenv("PADDOCK_HOME")
    monkeypatch.setenv("XDG_STATE_HOME", "/x")
    assert paddock.default_socket() == "/x/paddock/paddock.sock"
    monkeypatch.delenv("XDG_STATE_HOME")
    monkeypatch.setenv("HOME", "/home/u")
    assert paddock.default_socket() == "/home/u/.local/state/paddock/paddock.sock"
    assert paddock.Client().endpoint.socket == "/home/u/.local/state/paddock/paddock.sock"
