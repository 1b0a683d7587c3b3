#!/usr/bin/env python3
"""An orchestrator with a review: start the task-with-review workflow, let
the coder work and pick done, let a reviewer (a read-only run at the
submitted hash) approve that head, then apply the approval policy and
land the coder's change set through the merge queue.

    python3 review_flow.py PROJECT "TASK" BRANCH

Each agent is driven here through its run's menu (pick_event), as the
agents a platform runs would do it with their own tools.
"""

from __future__ import annotations

import sys
import time
from typing import Callable, Optional

import paddock
from paddock import types as t

from orchestrator import land, policy

Agent = Callable[[paddock.Client, str], None]


def wait_state(client: paddock.Client, flow_id: str, states: tuple, timeout: float = 60) -> t.Flow:
    deadline = time.monotonic() + timeout
    while True:
        flow = client.get_flow(flow_id)
        if flow.state in states:
            return flow
        if time.monotonic() > deadline:
            raise TimeoutError(f"flow {flow_id} is still {flow.state}")
        time.sleep(0.2)


def default_coder(agent: paddock.Client, run_id: str) -> None:
    agent.call_tool(run_id, "write", path="GREETING.txt", content="hello, reviewed\n")
    agent.pick_event(run_id, "done", note="wrote the greeting")


def default_reviewer(agent: paddock.Client, run_id: str) -> None:
    menu = agent.get_capabilities(run_id).menu
    text = agent.call_tool(run_id, "read", path="GREETING.txt")
    findings = [] if "hello" in str(text) else ["the greeting is missing"]
    if findings:
        agent.pick_event(run_id, "request_changes", head=menu.head, findings=findings)
    else:
        agent.pick_event(run_id, "approve", head=menu.head)


def review_and_land(client: paddock.Client, project: str, task: str, *, branch: str,
                    coder: Optional[Agent] = None, reviewer: Optional[Agent] = None,
                    log: Callable[[str], None] = print) -> t.QueueEntry:
    flow = client.start_flow(workflow="task-with-review", project=project, task=task)
    log(f"flow {flow.id}: {flow.state}")
    coding = (flow.runs or {})["coding"]
    agent = client.for_agent()  # the orchestrator drives each run as its agent
    (coder or default_coder)(agent, coding)
    flow = wait_state(client, flow.id, ("reviewing",))
    reviewing = (flow.runs or {})["reviewing"]
    log(f"review run {reviewing} at {flow.head}")
    (reviewer or default_reviewer)(agent, reviewing)
    flow = wait_state(client, flow.id, ("awaiting_approval", "coding"))
    if flow.state != "awaiting_approval":
        raise RuntimeError(f"the reviewer asked for changes: {flow.findings}")
    cs = client.get_change_set(coding)
    verified = client.verify(coding, checks=["test"])
    ok, why = policy(cs, verified)
    log(f"policy: {'approve' if ok else 'reject'} ({why})")
    if not ok:
        client.reject_run(coding)
        raise RuntimeError(f"refused by the policy: {why}")
    return land(client, coding, flow.head or verified.hash or "", branch, log)


def main() -> None:
    project, task = sys.argv[1], sys.argv[2]
    branch = sys.argv[3]
    with paddock.Client() as client:
        review_and_land(client, project, task, branch=branch)


if __name__ == "__main__":
    main()
