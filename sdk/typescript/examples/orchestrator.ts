// An orchestrator, the way a platform would write one with @paddock/sdk:
// it bootstraps a run for an agent, streams the run's events, waits for
// the agent to submit, runs the project's checks on exactly what was
// submitted, applies an approval policy, and lands the change through the
// merge queue. If anything throws half-way, `await using` rejects the run.
//
// Run it against a daemon (PADDOCK_HOME, or PADDOCK_ADDR and PADDOCK_TOKEN):
//
//   node build/examples/orchestrator.js PROJECT BRANCH "TASK" AGENT_NAME
//
// where AGENT_NAME is a stored agent definition with a command (paddock
// agent add): the agent is started as the run's agent job.

import { pathToFileURL } from "node:url";
import { Paddock, type ChangeSet, type Event, type QueueEntry, type RunSession } from "@paddock/sdk";
import { decide, defaultPolicy, type Decision, type Policy } from "./policy.js";

export interface OrchestrateOptions {
  project: string;
  task: string;
  /** The branch the merge queue lands it on. */
  branch: string;
  /** A stored agent definition's name. */
  agentName?: string;
  /** Starts the agent on the run: by default its definition's command, as the run's agent job. */
  launch?: (run: RunSession) => Promise<void>;
  policy?: Policy;
  /** How long the agent has to submit. */
  timeoutMs?: number;
  log?: (line: string) => void;
}

export interface Outcome {
  run: string;
  hash?: string;
  decision: Decision;
  /** The queue entry once it settled (landed, or returned with a reason), when the policy approved. */
  queued?: QueueEntry;
  /** Every event of the run the stream gave while the orchestrator watched. */
  events: Event[];
}

export async function orchestrate(paddock: Paddock, o: OrchestrateOptions): Promise<Outcome> {
  const log = o.log ?? console.log;
  await using run = await paddock.bootstrap({ project: o.project, task: o.task, agent_name: o.agentName });
  log(`run ${run.id} bootstrapped for ${run.run.agent?.name}`);

  // Watch the run's events as they come; the stream resumes by itself if
  // the connection drops. The submission is one of them.
  const watching = new AbortController();
  const events: Event[] = [];
  let submitted!: (hash: string) => void;
  const submission = new Promise<string>((resolve) => (submitted = resolve));
  const watcher = (async () => {
    for await (const e of paddock.runs.follow(run.id, { signal: watching.signal })) {
      events.push(e);
      log(`  #${e.seq} ${e.type}`);
      if (e.type === "changeset.submitted") submitted((e.data as { hash: string }).hash);
    }
  })().catch((err) => {
    if (!watching.signal.aborted) throw err;
  });

  try {
    await (o.launch ?? ((r) => paddock.jobs.start(r.id, { kind: "agent" }).then(() => undefined)))(run);
    const timeout = AbortSignal.timeout(o.timeoutMs ?? 10 * 60_000);
    const hash = await Promise.race([
      submission,
      new Promise<never>((_, reject) => timeout.addEventListener("abort", () => reject(new Error(`run ${run.id}: no submission in time`)))),
    ]);
    log(`submitted ${hash}`);

    // The checks run on a check run holding exactly the submitted bytes.
    const verify = await paddock.runs.verify(run.id);
    log(`verify: ${verify.passed ? "passed" : "failed"} (${verify.checks?.map((c) => `${c.name} ${c.passed ? "ok" : "FAIL"}`).join(", ")})`);
    const cs = (await paddock.runs.artifact(run.id, "changeset")).content as ChangeSet;
    const { diff } = await paddock.runs.diff(run.id, { hash });
    const decision = decide(o.policy ?? defaultPolicy, cs, diff, verify);
    log(`policy: ${decision.approve ? "approve" : "hold"}: ${decision.reason}`);
    if (!decision.approve) {
      // Submitted, so the session would keep it: a person looks at it.
      return { run: run.id, hash, decision, events };
    }
    const approval = await paddock.runs.approve(run.id, { hash });
    log(`approved; the project's policy ${approval.policy?.met === false ? `still needs ${approval.policy.reason}` : "is met"}`);
    await paddock.queue.add(run.id, { branch: o.branch });
    const queued = await paddock.queue.settle(run.id);
    log(`queue: ${queued.state}${queued.reason ? `: ${queued.reason}` : ""}${queued.commit ? ` at ${queued.commit}` : ""}`);
    return { run: run.id, hash, decision, queued, events };
  } finally {
    watching.abort();
    await watcher;
  }
}

// Run directly: node build/examples/orchestrator.js PROJECT BRANCH TASK AGENT_NAME
if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const [project, branch, task, agentName] = process.argv.slice(2);
  if (!project || !branch || !task || !agentName) {
    console.error("usage: orchestrator.js PROJECT BRANCH TASK AGENT_NAME");
    process.exit(2);
  }
  await using paddock = new Paddock();
  const out = await orchestrate(paddock, { project, branch, task, agentName });
  process.exitCode = out.queued?.state === "landed" ? 0 : 1;
}
