"""The examples, run against the daemon: the orchestrator with the agent
played by the test (with the run's own token) and with the agent
definition's own command, and the review flow."""

import os
import sys

import pytest

from conftest import git

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples"))

import orchestrator  # noqa: E402
import review_flow  # noqa: E402


def fake_coder(agent, run_id):
    # What a coding agent does, through its run's token: write, check, submit.
    agent.call_tool(run_id, "write", path="GREETING.txt", content="hello from the test's agent\n")
    res = agent.exec(run_id, argv=["sh", "-c", "test -s GREETING.txt"])
    assert res.exit_code == 0
    agent.submit(run_id)


def test_orchestrator_with_a_played_agent(client, project):
    lines = []
    entry = orchestrator.orchestrate(client, project.name, "greet", branch="landing", play=fake_coder, log=lines.append)
    assert entry.state == "landed", lines
    assert git(project.repo, "show", f"landing:GREETING.txt") == "hello from the test's agent\n"
    assert any("changeset.submitted" in line for line in lines)


def test_orchestrator_with_the_agents_own_command(client, project):
    lines = []
    entry = orchestrator.orchestrate(client, project.name, "greet", branch="landing", log=lines.append)
    assert entry.state == "landed", lines
    assert git(project.repo, "show", "landing:GREETING.txt") == "hello from the agent\n"


def test_orchestrator_rejects_what_its_policy_refuses(client, project):
    def breaks_the_build(agent, run_id):
        agent.exec(run_id, argv=["rm", "README.md"])  # make test needs it
        agent.submit(run_id)

    lines = []
    with pytest.raises(RuntimeError, match="verify failed: test"):
        orchestrator.orchestrate(client, project.name, "break it", branch="landing", play=breaks_the_build, log=lines.append)
    run_id = lines[0].split()[1]
    assert client.get_run(run_id).workspace.state in ("rejected", "cleanup_pending", "cleaned")


def test_review_flow(client, project):
    lines = []
    entry = review_flow.review_and_land(client, project.name, "greet, reviewed", branch="landing", log=lines.append)
    assert entry.state == "landed", lines
    assert git(project.repo, "show", "landing:GREETING.txt") == "hello, reviewed\n"


def test_orchestrator_stops_when_the_agent_fails(client, project):
    def fails(agent, run_id):
        agent.call_tool(run_id, "read", path="no-such-file")

    lines = []
    with pytest.raises(RuntimeError, match="rejected before it submitted"):
        orchestrator.orchestrate(client, project.name, "fail", branch="landing", play=fails, log=lines.append)
    assert any("NotFound" in line for line in lines), lines
