// The same orchestrator with a review: a flow of the built-in
// task-with-review workflow, where a coder works, a reviewer reads
// exactly what it submitted and approves it or sends it back with
// findings, and what the reviewer approved reaches the orchestrator,
// which runs the checks, applies its approval policy and lands it
// through the merge queue.
//
// The agents of each state are the platform's own (launch): an agent
// works through the run's tools (or MCP, connectMcp) and picks the next
// event from its run's menu (flows.pick).
//
//   node build/examples/review-flow.js PROJECT BRANCH "TASK"
// (the agents are then driven by whoever reads the run ids it prints).

import { pathToFileURL } from "node:url";
import { Paddock, type ChangeSet, type Flow, type QueueEntry } from "@paddock/sdk";
import { decide, defaultPolicy, type Decision, type Policy } from "./policy.js";

export interface ReviewFlowOptions {
  project: string;
  task: string;
  branch: string;
  /** Starts the agent of a flow's state on its run (coding: the coder, reviewing: the reviewer). */
  launch?: (state: string, run: string, flow: Flow) => Promise<void>;
  policy?: Policy;
  timeoutMs?: number;
  log?: (line: string) => void;
}

export interface ReviewOutcome {
  flow: string;
  /** The coder's run, whose change set lands. */
  run?: string;
  state: string;
  rounds: number;
  /** The reviewer's findings along the way. */
  findings: string[];
  decision?: Decision;
  queued?: QueueEntry;
}

export async function reviewFlow(paddock: Paddock, o: ReviewFlowOptions): Promise<ReviewOutcome> {
  const log = o.log ?? console.log;
  const deadline = Date.now() + (o.timeoutMs ?? 30 * 60_000);
  let flow = await paddock.flows.start({ workflow: "task-with-review", project: o.project, task: o.task });
  log(`flow ${flow.id}: ${flow.state}`);
  const findings: string[] = [];
  let launched = "";
  // Each state's agent is launched once per run; the flow moves when it picks.
  while (!flow.ended) {
    const run = flow.runs?.[flow.state!];
    const key = `${flow.state}/${run}/${flow.round}`;
    if (run && key !== launched) {
      launched = key;
      log(`${flow.state} (round ${flow.round}): run ${run}`);
      await (o.launch ?? (async (s, r) => log(`  waiting for the ${s} agent of ${r} (paddock mcp ${r})`)))(flow.state!, run, flow);
    }
    if (Date.now() > deadline) throw new Error(`flow ${flow.id} is still ${flow.state}`);
    await new Promise((r) => setTimeout(r, 100));
    const next = await paddock.flows.get(flow.id!);
    if (next.findings?.length && JSON.stringify(next.findings) !== JSON.stringify(flow.findings)) {
      findings.push(...next.findings);
      log(`  findings: ${next.findings.join("; ")}`);
    }
    flow = next;
  }
  log(`flow ended: ${flow.state}`);
  const coder = flow.runs?.["coding"];
  const out: ReviewOutcome = { flow: flow.id!, run: coder, state: flow.state!, rounds: flow.round ?? 0, findings };
  if (flow.state !== "awaiting_approval" || !coder || flow.unsubmitted) return out;

  // What the reviewer approved is the coder's submitted change set.
  const r = await paddock.runs.get(coder);
  await using session = paddock.session(r); // rejected if it turns out never submitted
  const cs = (await paddock.runs.artifact(coder, "changeset")).content as ChangeSet;
  const verify = await paddock.runs.verify(coder);
  const { diff } = await paddock.runs.diff(coder, { hash: cs.hash });
  out.decision = decide(o.policy ?? defaultPolicy, cs, diff, verify);
  log(`policy: ${out.decision.approve ? "approve" : "hold"}: ${out.decision.reason}`);
  if (!out.decision.approve) return out;
  await paddock.runs.approve(session.id, { hash: cs.hash! });
  await paddock.queue.add(session.id, { branch: o.branch });
  out.queued = await paddock.queue.settle(session.id);
  log(`queue: ${out.queued.state}${out.queued.reason ? `: ${out.queued.reason}` : ""}`);
  return out;
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const [project, branch, task] = process.argv.slice(2);
  if (!project || !branch || !task) {
    console.error("usage: review-flow.js PROJECT BRANCH TASK");
    process.exit(2);
  }
  await using paddock = new Paddock();
  const out = await reviewFlow(paddock, { project, branch, task });
  process.exitCode = out.queued?.state === "landed" ? 0 : 1;
}
