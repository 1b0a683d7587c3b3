"""client.run: a run as a context manager that rejects the run on exit
unless it was submitted."""

import time

import pytest

from paddock import types as t

AGENT = t.AgentDefinition(name="ctx", workspace="write", tools=["read", "write", "submit"])


def test_an_unsubmitted_run_is_rejected(client, project):
    with client.run(project=project.name, task="leave it", agent=AGENT) as run:
        run.agent.call_tool(run.id, "write", path="x.txt", content="x")
        assert run.refresh().workspace.state == "active"
    assert run.rejected
    assert client.get_run(run.id).workspace.state in ("rejected", "cleanup_pending", "cleaned")


def test_a_failing_orchestrator_leaves_no_run_waiting(client, project):
    with pytest.raises(ZeroDivisionError):
        with client.run(project=project.name, task="fail", agent=AGENT) as run:
            1 / 0
    assert run.rejected


def test_a_submitted_run_is_left_for_its_decision(client, project):
    with client.run(t.BootstrapRequest(project=project.name, task="submit", agent=AGENT)) as run:
        run.agent.call_tool(run.id, "write", path="x.txt", content="x")
        cs = run.submit()
        assert run.wait_for_submission(timeout=10).data["hash"] == cs.hash
    assert not run.rejected
    assert client.get_run(run.id).review == "submitted"


def test_a_run_decided_meanwhile_is_left_alone(client, project):
    with client.run(project=project.name, task="rejected already", agent=AGENT) as run:
        client.reject_run(run.id)
    assert not run.rejected


def test_a_rejected_submission_stays_rejected(client, project):
    with client.run(project=project.name, task="reject it", agent=AGENT) as run:
        run.agent.call_tool(run.id, "write", path="x.txt", content="x")
        run.submit()
        client.reject_run(run.id)
    deadline = time.monotonic() + 30
    while (got := client.get_run(run.id)).workspace.state != "cleaned":
        assert time.monotonic() < deadline, got.workspace.state
        time.sleep(0.05)
    assert got.review == "rejected", got.review
