// The examples, run against a real daemon: the test plays the agents, as
// a platform's would (the orchestrator's agent over MCP with its run's
// token; the flow's coder and reviewer through their runs' tools and
// menus), and checks what landed.

import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { join } from "node:path";
import { Paddock, connectMcp, type Flow } from "@paddock/sdk";
import { orchestrate } from "../examples/orchestrator.js";
import { reviewFlow } from "../examples/review-flow.js";
import { startDaemon, makeRepo, git, type Daemon } from "./daemon.js";

let d: Daemon;
let op: Paddock;
let repo: string;
const lines: string[] = [];
const log = (l: string) => lines.push(l);

before(async () => {
  d = await startDaemon();
  op = d.client();
  repo = makeRepo(join(d.base, "src", "shop"), { "README.md": "shop\n", Makefile: "test:\n\ttest -f README.md\n" });
  git(repo, "branch", "landing");
  await op.projects.add({ path: repo });
});

after(async () => {
  if (process.exitCode || process.env.PADDOCK_TS_VERBOSE) console.log(lines.join("\n") + "\n" + d?.logTail(40));
  await d?.stop();
});

test("the orchestrator: bootstrap, events, submission, verify, policy, merge queue", async () => {
  const out = await orchestrate(op, {
    project: "shop",
    task: "add a price list",
    branch: "landing",
    agentName: "coder",
    log,
    timeoutMs: 60_000,
    // The agent: an MCP client with its run's token, as an agent CLI would be.
    launch: async (run) => {
      await using mcp = await connectMcp(run.agent, run.id, { name: "played-agent" });
      const w = await mcp.callTool({ name: "write", arguments: { path: "prices.txt", content: "apple 1\npear 2\n" } });
      assert.ok(!w.isError, JSON.stringify(w));
      const s = await mcp.callTool({ name: "submit", arguments: {} });
      assert.ok(!s.isError, JSON.stringify(s));
    },
  });
  assert.equal(out.decision.approve, true, out.decision.reason);
  assert.equal(out.queued?.state, "landed", JSON.stringify(out.queued));
  assert.equal(git(repo, "show", "landing:prices.txt"), "apple 1\npear 2");
  const types = out.events.map((e) => e.type);
  assert.ok(types.includes("changeset.submitted"), types.join(","));
  assert.deepEqual(out.events.map((e) => e.seq), out.events.map((_, i) => i + 1));
  // Landed, so the session did not reject it.
  assert.notEqual((await op.runs.get(out.run)).workspace?.state, "rejected");
});

test("the orchestrator's policy holds what a person must see, and the run is kept for them", async () => {
  const out = await orchestrate(op, {
    project: "shop",
    task: "change the build",
    branch: "landing",
    agentName: "coder",
    log,
    timeoutMs: 60_000,
    launch: async (run) => {
      await run.agent.runs.callTool(run.id, "write", { path: "Makefile", content: "test:\n\ttrue\n" });
      await run.agent.runs.submit(run.id);
    },
  });
  assert.equal(out.decision.approve, false);
  assert.match(out.decision.reason, /Makefile/);
  assert.equal(out.queued, undefined);
  assert.equal((await op.runs.get(out.run)).review, "submitted");
});

test("the orchestrator rejects the run when its agent never submits", async () => {
  let id = "";
  await assert.rejects(
    orchestrate(op, {
      project: "shop",
      task: "never finishes",
      branch: "landing",
      agentName: "coder",
      log,
      timeoutMs: 500,
      launch: async (run) => {
        id = run.id;
      },
    }),
    /no submission in time/,
  );
  assert.ok(["rejected", "cleanup_pending", "cleaned"].includes((await op.runs.get(id)).workspace?.state ?? ""));
});

test("the review flow: a round of findings, then an approval, checked and landed", async () => {
  const agent = op.forAgent(); // the flow's runs are driven by the platform, as their agents
  const launch = async (state: string, run: string, flow: Flow) => {
    if (state === "coding") {
      // The coder: a typo in round 0, fixed once the reviewer says so.
      const content = flow.round === 0 ? "helo\n" : "hello\n";
      await agent.runs.callTool(run, "write", { path: "greeting.txt", content });
      await agent.flows.pick(run, "done");
      return;
    }
    // The reviewer reads exactly what is under review (its head).
    const head = (await op.flows.get(flow.id!)).head!;
    const read = (await agent.runs.callTool(run, "read", { path: "greeting.txt" })) as { content?: string };
    if (read.content?.includes("helo")) {
      await agent.flows.pick(run, "request_changes", { head, findings: ["greeting.txt: helo is a typo"] });
    } else {
      await agent.flows.pick(run, "approve", { head, note: "reads well" });
    }
  };
  const out = await reviewFlow(op, { project: "shop", task: "greet", branch: "landing", launch, log, timeoutMs: 60_000 });
  assert.equal(out.state, "awaiting_approval");
  assert.equal(out.rounds, 1);
  assert.deepEqual(out.findings, ["greeting.txt: helo is a typo"]);
  assert.equal(out.decision?.approve, true, out.decision?.reason);
  assert.equal(out.queued?.state, "landed", JSON.stringify(out.queued));
  assert.equal(git(repo, "show", "landing:greeting.txt"), "hello");
});
