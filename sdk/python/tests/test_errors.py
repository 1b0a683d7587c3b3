"""Every error code a client can provoke comes back as its exception
class, with the daemon's code, message, details and HTTP status. (internal
is nothing a client should cause; node_lost needs a cluster: the Go
cluster tests provoke both.)"""

import pytest

import paddock
from paddock import types as t
from paddock.errors import ERRORS, from_wire

STATUS = {"bad_request": 400, "not_found": 404, "conflict": 409, "busy": 423, "unauthorized": 401, "forbidden": 403,
          "unsupported": 501, "run_mismatch": 403, "not_bootstrapped": 409, "attribution_leak": 422, "too_large": 413}

provoked = set()


def expect(cls, fn, *args, **kw):
    with pytest.raises(cls) as e:
        fn(*args, **kw)
    err = e.value
    assert type(err) is cls and isinstance(err, paddock.PaddockError)
    assert err.code == cls.code and err.message and err.status == STATUS[cls.code], err
    assert str(err).startswith(cls.code + ": ")
    provoked.add(cls.code)
    return err


@pytest.fixture
def run(client, project):
    b = client.bootstrap(project=project.name, task="errors", agent=t.AgentDefinition(
        name="errs", workspace="write", tools=["read", "write", "exec", "submit", "verify"]))
    return b.run.id, client.with_token(b.token)


def test_bad_request(client, run):
    id, agent = run
    err = expect(paddock.BadRequest, agent.call_tool, id, "read", path="x", bogus=1)
    assert err.details.get("key") == "bogus"


def test_not_found(client, run):
    id, agent = run
    expect(paddock.NotFound, client.get_project, "nope")
    expect(paddock.NotFound, agent.call_tool, id, "read", path="missing.txt")


def test_conflict(client, run):
    id, agent = run
    agent.call_tool(id, "write", path="a.txt", content="a")
    cs = agent.submit(id)
    expect(paddock.Conflict, client.approve, id, hash="sha256:" + "0" * 64)
    client.approve(id, hash=cs.hash)


def test_busy(client, run):
    id, agent = run
    job = agent.start_job(id, kind="exec", exec=t.ExecRequest(argv=["sleep", "60"]))
    try:
        expect(paddock.Busy, agent.start_job, id, kind="exec", exec=t.ExecRequest(argv=["true"]))
    finally:
        agent.cancel_job(id, job.id)


def test_unauthorized(client, run):
    id, _ = run
    expect(paddock.Unauthorized, client.with_token("pdk_run_stranger").get_run, id)


def test_forbidden(client, run):
    id, agent = run
    err = expect(paddock.Forbidden, agent.call_tool, id, "write", path=".git/config", content="x")
    assert err.rule  # the policy that refused, from details.rule
    expect(paddock.Forbidden, agent.approve, id, hash="sha256:00")  # a decision is not the agent's


def test_unsupported(client, workdir):
    import os

    from conftest import make_repo

    plain = make_repo(os.path.join(workdir, "src", "plain"), {"README.md": "no manifest\n"})
    client.add_project(path=plain, name="plain")
    b = client.bootstrap(project="plain", task="verify", agent=t.AgentDefinition(name="v", workspace="write", tools=["verify"]))
    expect(paddock.Unsupported, client.with_token(b.token).verify, b.run.id)


def test_run_mismatch(client, project, run):
    id, agent = run
    other = client.bootstrap(project=project.name, task="other", agent=t.AgentDefinition(name="o", workspace="write", tools=["read"]))
    expect(paddock.RunMismatch, client.with_token(other.token).get_job_status, id)


def test_not_bootstrapped(client, project):
    made = client.create_run(project=project.name)
    expect(paddock.NotBootstrapped, client.get_artifact, made.id, "task")


def test_attribution_leak(client, run):
    id, agent = run
    agent.call_tool(id, "write", path="CREDITS.md", content="Co-Authored-By: Claude <noreply@anthropic.com>\n")
    expect(paddock.AttributionLeak, agent.submit, id)


def test_too_large(client, run):
    id, agent = run
    expect(paddock.TooLarge, agent.call_tool, id, "write", path="big.txt", content="x" * 1_100_000)


def test_every_code_provoked():
    # Runs after the tests above (file order): each provoked its code.
    assert provoked == set(STATUS), set(STATUS) - provoked


def test_every_code_has_its_class():
    codes = {"bad_request", "not_found", "conflict", "busy", "unauthorized", "forbidden", "unsupported",
             "run_mismatch", "not_bootstrapped", "attribution_leak", "too_large", "node_lost", "internal"}
    assert set(ERRORS) == codes
    for code, cls in ERRORS.items():
        e = from_wire({"code": code, "message": "m", "details": {"rule": "r"}}, 418)
        assert type(e) is cls and e.code == code and e.rule == "r" and e.status == 418
    # A code this version does not know is still a PaddockError, with its code.
    e = from_wire({"code": "brand_new", "message": "m"})
    assert type(e) is paddock.PaddockError and e.code == "brand_new"


def test_the_codes_match_the_daemons(client):
    # The Error schema's description lists every code with its status.
    desc = client.get_openapi()["components"]["schemas"]["Error"]["description"]
    for code in ERRORS:
        assert code in desc, code
