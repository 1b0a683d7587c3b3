#!/usr/bin/env python3
"""An orchestrator: bootstrap a run for an agent, follow its events until
it submits, verify the submission, decide by an approval policy, and land
it through the merge queue.

    python3 orchestrator.py PROJECT "TASK" BRANCH

BRANCH is where the queue lands the change: a branch no working tree of
the project has checked out (the queue moves it).

The agent is the one its definition names (its command runs as the run's
agent job). A platform that runs its agent elsewhere hands it the run's id
and token instead (run.id, run.token) and passes play= to orchestrate.
"""

from __future__ import annotations

import sys
import threading
import time
from typing import Callable, Optional

import paddock
from paddock import types as t

#: The agent: it may read and write its workspace, run commands and submit.
CODER = t.AgentDefinition(
    name="coder",
    workspace="write",
    tools=["read", "write", "edit", "glob", "grep", "list", "exec", "verify", "submit", "capabilities"],
    command=["sh", "-c", "echo 'hello from the agent' > GREETING.txt && /run/paddock/bin/paddock submit \"$PADDOCK_RUN\""],
)


def policy(cs: t.ChangeSet, verified: t.VerifyResult, max_files: int = 20) -> tuple:
    """The orchestrator's approval policy: the checks passed on this very
    hash, no path the project protects changed, and the change is small."""
    if not verified.passed:
        return False, "verify failed: " + ", ".join(c.name or "?" for c in verified.checks or [] if not c.passed)
    if verified.hash != cs.hash or verified.stale:
        return False, "verify ran on another change set"
    if len(cs.entries or []) > max_files:
        return False, f"{len(cs.entries or [])} files changed, more than {max_files}"
    if not cs.entries:
        return False, "nothing changed"
    return True, "verified, small"


def land(client: paddock.Client, run_id: str, hash: str, branch: str, log: Callable[[str], None], timeout: float = 120) -> t.QueueEntry:
    """Approve hash and land it on branch through the merge queue."""
    client.approve(run_id, hash=hash)
    entry = client.queue_add(run_id, branch=branch)
    log(f"queued on {branch}: {entry.state}")
    deadline = time.monotonic() + timeout
    while entry.state not in ("landed", "returned"):
        if time.monotonic() > deadline:
            raise TimeoutError(f"run {run_id} did not land in {timeout}s: {entry.state}")
        time.sleep(0.2)
        entry = client.get_queue_entry(run_id)
    if entry.state != "landed":
        raise RuntimeError(f"the queue returned run {run_id}: {entry.reason}")
    log(f"landed on {branch} as {entry.commit}")
    return entry


def orchestrate(client: paddock.Client, project: str, task: str, *, branch: str,
                agent: t.AgentDefinition = CODER, play: Optional[Callable[[paddock.Client, str], None]] = None,
                log: Callable[[str], None] = print) -> t.QueueEntry:
    """The whole loop, for one task. play(agent_client, run_id), if given,
    plays the agent in a thread (with the run's own token) instead of the
    agent definition's command."""
    with client.run(project=project, task=task, agent=agent) as run:
        log(f"run {run.id} bootstrapped")
        job = None
        if play is None:
            job = client.start_job(run.id, kind="agent").id
        else:
            def agent_side() -> None:
                try:
                    play(run.agent, run.id)
                except Exception as e:  # the agent failed: nothing will be submitted
                    log(f"the agent failed: {e!r}")
                    client.reject_run(run.id)

            threading.Thread(target=agent_side, daemon=True).start()
        # Follow the run as it works: every event once, in order, across
        # dropped connections, until it submits.
        for ev in client.stream_events(run.id):
            log(f"  {ev.seq:3d} {ev.type}")
            if ev.type == "changeset.submitted":
                break
            if ev.type == "workspace.state" and (ev.data or {}).get("to") == "rejected":
                raise RuntimeError(f"run {run.id} was rejected before it submitted")
            if ev.type in ("job.finished", "job.interrupted") and (ev.data or {}).get("job") == job:
                logs = client.get_artifact(run.id, "logs").get("content")
                raise RuntimeError(f"the agent ended without submitting: {ev.data}\n{logs}")
        cs = client.get_change_set(run.id)
        submitted = client.get_run(run.id)
        verified = client.verify(run.id, checks=["test"])
        ok, why = policy(cs, verified)
        log(f"policy: {'approve' if ok else 'reject'} ({why})")
        if not ok:
            client.reject_run(run.id)
            raise RuntimeError(f"run {run.id} refused by the policy: {why}")
        assert submitted.review == "submitted"
        return land(client, run.id, verified.hash or cs.hash or "", branch, log)


def main() -> None:
    project, task = sys.argv[1], sys.argv[2]
    branch = sys.argv[3]
    with paddock.Client() as client:
        orchestrate(client, project, task, branch=branch)


if __name__ == "__main__":
    main()
