// Every operation of openapi.json, through the SDK, against a real
// daemon; every error code a client can provoke, as its typed error.
// The last test checks that each operation was sent at least once (the
// Go side's TestContract keeps the same list).

import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { readFileSync, existsSync } from "node:fs";
import { createServer, connect, type Socket } from "node:net";
import { join } from "node:path";
import {
  Paddock,
  PaddockError,
  errorCodes,
  connectMcp,
  BadRequestError,
  NotFoundError,
  ConflictError,
  BusyError,
  UnauthorizedError,
  ForbiddenError,
  UnsupportedError,
  RunMismatchError,
  NotBootstrappedError,
  AttributionLeakError,
  TooLargeError,
  type ErrorCode,
  type RunSession,
} from "@paddock/sdk";
import { startDaemon, makeRepo, git, type Daemon } from "./daemon.js";
import { RouteRecorder, operations, openapiPath } from "./routes.js";

const secret = "pdk-s3cr3t/Value+42";
let d: Daemon;
let op: Paddock; // the operator, on the unix socket
let repo: string;
const routes = new RouteRecorder();
const provoked = new Set<ErrorCode>();

/** Asserts that p rejects with the typed error of code, and records it. */
async function expectCode<T>(p: Promise<T>, code: ErrorCode, cls?: new (...a: any[]) => PaddockError): Promise<PaddockError> {
  try {
    await p;
  } catch (err) {
    assert.ok(err instanceof PaddockError, `want ${code}, got ${err}`);
    assert.equal(err.code, code, `want ${code}, got ${err.code}: ${err.message}`);
    if (cls) assert.ok(err instanceof cls, `${code} is not a ${cls.name}`);
    provoked.add(code);
    return err;
  }
  assert.fail(`want ${code}, it succeeded`);
}

/** A run bootstrapped for a plain writing agent, as a session. */
function boot(task: string, project = "app"): Promise<RunSession> {
  return op.bootstrap({ project, task, agent: { name: "worker", workspace: "write" } });
}

before(async () => {
  d = await startDaemon({ secrets: { API_TOKEN: secret } });
  op = d.client({ onRequest: routes.observe });
  repo = makeRepo(join(d.base, "src", "app"), { "README.md": "hello\n", Makefile: "test:\n\ttest -f README.md\n" });
  makeRepo(join(d.base, "src", "plain"), { "README.md": "no manifest\n" });
  makeRepo(join(d.base, "src", "spare"), { "README.md": "spare\n" });
});

after(async () => {
  if (process.exitCode) console.log(d?.logTail(40));
  await d?.stop();
});

test("the daemon: health, its document, metrics, status, doctor, gc, the review page, nodes, whoami", async () => {
  assert.ok((await op.health()) !== undefined);
  const doc = await op.openapi();
  assert.deepEqual(doc, JSON.parse(readFileSync(openapiPath, "utf8")), "the daemon serves this checkout's openapi.json");
  assert.match(await op.metrics(), /^# (HELP|TYPE) /m);
  const st = await op.status();
  assert.equal(st.socket, d.socket);
  assert.equal(st.listen, d.listen);
  assert.ok((await op.doctor()).checks !== undefined || true);
  assert.ok(Array.isArray(await op.gc({ dry_run: true })));
  assert.match((await op.uiLogin()).url ?? "", /\/ui\/login\?code=/);
  assert.match((await op.bundles.key()).public_key ?? "", /^ed25519 /);
  // Nodes need a shared store: a daemon of its own answers unsupported.
  await expectCode(op.nodes(), "unsupported", UnsupportedError);
  const who = await op.whoami();
  assert.equal(who.role, "admin");
});

test("projects: add, list, get, set, remove, unlock, manifest, checkout", async () => {
  const app = await op.projects.add({ path: repo });
  assert.equal(app.name, "app");
  await op.projects.add({ path: join(d.base, "src", "plain") });
  await op.projects.add({ path: join(d.base, "src", "spare") });
  assert.deepEqual((await op.projects.list()).map((p) => p.name).sort(), ["app", "plain", "spare"]);
  assert.equal((await op.projects.get("app")).name, "app");
  await expectCode(op.projects.get("nope"), "not_found", NotFoundError);
  const set = await op.projects.set("app", { protect: ["secret/**"] });
  assert.ok(JSON.stringify(set).includes("secret/**"));
  await op.projects.remove("spare");
  await expectCode(op.projects.remove("spare"), "not_found");
  await expectCode(op.projects.unlock("app"), "bad_request", BadRequestError);
  await op.projects.unlock("app", { force: true });
  assert.ok(JSON.stringify(await op.projects.manifest("app")).includes("test"));
  assert.equal((await op.projects.checkout("app")).uncommitted, 0);
});

test("agents: add, refuse a bad one, list, get, remove", async () => {
  const source = 'name = "tester"\ndescription = "reads code and runs the tests"\nworkspace = "write"\ntools = ["read", "glob", "exec", "verify", "capabilities", "request_access"]\n\n[tool.exec]\nallow = ["echo"]\n';
  const rec = await op.agents.add({ file: "tester.toml", source });
  assert.equal(rec.definition?.name, "tester");
  const bad = await expectCode(op.agents.add({ file: "bad.toml", source: 'name = "bad"\ntools = ["read"]\ncolour = "red"\n' }), "bad_request");
  assert.ok(bad.message.length > 0);
  assert.ok((await op.agents.list()).some((a) => JSON.stringify(a).includes("tester")));
  assert.ok(JSON.stringify(await op.agents.get("tester")).includes("tester"));
  await expectCode(op.agents.get("nobody"), "not_found");
  await op.agents.remove("tester");
});

let first: RunSession;
let agent: Paddock;

test("a bootstrapped run, driven by its agent: tools, exec, jobs, events, capabilities, access requests", async () => {
  first = await op.bootstrap({
    project: "app",
    task: "write a greeting",
    agent: { name: "greeter", workspace: "write", secrets: ["API_TOKEN"], command: ["sh", "-c", "echo hello > greeting.txt"] },
  });
  assert.match(first.token ?? "", /^pdk_run_/);
  agent = new Paddock({ transport: d.tcp(first.token), onRequest: routes.observe }); // the agent, on TCP with its run's token
  const id = first.id;
  assert.equal((await agent.runs.get(id)).id, id);
  assert.equal((await agent.jobs.status(id)).state, "idle");
  assert.ok((await agent.runs.artifact(id, "task")).content);
  await expectCode(agent.runs.artifact(id, "plan"), "conflict", ConflictError);
  assert.ok((await agent.runs.tools(id)).some((t) => t.name === "write"));
  await agent.runs.callTool(id, "write", { path: "notes/plan.md", content: "plan\n" });
  assert.ok(JSON.stringify(await agent.runs.callTool(id, "read", { path: "notes/plan.md" })).includes("plan"));
  await expectCode(agent.runs.callTool(id, "read", { path: "missing.txt" }), "not_found");
  const esc = await expectCode(agent.runs.callTool(id, "read", { path: "../../etc/passwd" }), "forbidden", ForbiddenError);
  assert.equal(esc.status, 403);
  await expectCode(agent.runs.callTool(id, "read", { path: "notes/plan.md", bogus: 1 }), "bad_request");
  await expectCode(agent.runs.callTool(id, "write", { path: "big.txt", content: "x".repeat(1_100_000) }), "too_large", TooLargeError);
  const ex = await agent.runs.exec(id, { argv: ["sh", "-c", "echo done > exec.txt && echo ran"] });
  assert.equal(ex.exit_code, 0);
  assert.equal(ex.stdout, "ran\n");
  // A job in the background: busy while it runs, then cancelled.
  const job = await agent.jobs.start(id, { kind: "exec", exec: { argv: ["sleep", "60"] } });
  await expectCode(agent.jobs.start(id, { kind: "exec", exec: { argv: ["true"] } }), "busy", BusyError);
  const cancelled = await agent.jobs.cancel(id, job.id!);
  assert.ok(cancelled.id === job.id);
  const done = await agent.jobs.wait(id, job.id!);
  assert.notEqual(done.state, "running");
  assert.ok((await agent.jobs.list(id)).some((j) => j.id === job.id));
  // The agent's own command, as a job.
  const ag = await agent.jobs.start(id, { kind: "agent" });
  assert.equal((await agent.jobs.wait(id, ag.id!)).state, "succeeded");
  const evs = await agent.runs.events(id, { after: 0 });
  assert.ok(evs.length > 3);
  assert.deepEqual(evs.map((e) => e.seq), evs.map((_, i) => i + 1), "seq has no gaps and no repeats");
  const caps = await agent.runs.capabilities(id);
  assert.equal(caps.run, id);
  // Access requests: asked by the agent, decided by the operator.
  const ask = await agent.runs.requestAccess(id, { kind: "network", domain: "example.com", reason: "docs" });
  assert.equal(ask.state, "pending");
  await expectCode(agent.runs.requestAccess(id, { kind: "sudo" as any, reason: "everything" }), "bad_request");
  assert.equal((await agent.runs.accessRequests(id)).length, 1);
  await expectCode(agent.runs.grant(id, ask.id!), "forbidden");
  assert.equal((await op.runs.grant(id, ask.id!, { note: "ok" })).state, "granted");
  await expectCode(op.runs.grant(id, ask.id!), "conflict");
  const ask2 = await agent.runs.requestAccess(id, { kind: "tool", tool: "delete", reason: "cleanup" });
  assert.equal((await op.runs.deny(id, ask2.id!, { note: "no" })).state, "denied");
  // The inbox is the orchestrator's: the run's own token may not deliver.
  const inbox = await op.runs.deliver(id, "brief.txt", "context from the orchestrator\n");
  assert.ok(JSON.stringify(inbox).includes("brief.txt"));
  await expectCode(agent.runs.deliver(id, "self.txt", "x"), "forbidden");
});

test("a streamed exec with stdin, and an attached one with stdin streamed as it is read", async () => {
  const id = first.id;
  const proc = agent.runs.execStream(id, { argv: ["sh", "-c", "cat; echo to-stderr >&2; exit 3"] }, { stdin: "line one\nline two\n" });
  const chunks: string[] = [];
  for await (const c of proc) chunks.push(`${c.stream}:${Buffer.from(c.data).toString()}`);
  const res = await proc.result;
  assert.equal(res.exit_code, 3);
  assert.equal(chunks.filter((c) => c.startsWith("stdout:")).map((c) => c.slice(7)).join(""), "line one\nline two\n");
  assert.ok(chunks.some((c) => c === "stderr:to-stderr\n"));
  // Attached: the command answers each line as it comes, so the second
  // line is sent only once the first one's echo is back.
  let answered!: () => void;
  let gotFirst = new Promise<void>((r) => (answered = r));
  async function* typing() {
    yield "first\n";
    await gotFirst;
    yield Buffer.from("second\n");
  }
  const at = agent.runs.execAttach(id, { argv: ["sh", "-c", 'while read -r l; do echo "got $l"; done; echo eof'] }, { stdin: typing() });
  let out = "";
  for await (const c of at) {
    out += Buffer.from(c.data).toString();
    if (out.includes("got first")) answered();
  }
  assert.equal(out, "got first\ngot second\neof\n");
  assert.equal((await at.result).exit_code, 0);
  // On a terminal: its size, and a refusal before any switch is an envelope.
  const tty = await op.runs.execAttach(id, { argv: ["sh", "-c", "stty size"], terminal: { rows: 5, cols: 40 } }).text();
  assert.match(tty.stdout, /5 40/);
  await expectCode(agent.runs.execAttach(id, { argv: ["true"], allow_degraded: true }).result, "forbidden");
  // Cancelled by its signal: the connection drops, which ends the command.
  const ac = new AbortController();
  const long = agent.runs.execStream(id, { argv: ["sleep", "30"] }, { signal: ac.signal });
  setTimeout(() => ac.abort(new Error("stop")), 300);
  await assert.rejects(long.result, /stop/);
});

test("the change set: diff, blame, submit, bundle and import, approve, apply", async () => {
  const id = first.id;
  const cs = await agent.runs.changeSet(id);
  assert.match(cs.hash ?? "", /^sha256:/);
  const diff = await op.runs.diff(id);
  assert.equal(diff.hash, cs.hash);
  assert.match(diff.diff, /\+hello/);
  await agent.runs.callTool(id, "write", { path: "notes/after.md", content: "after the review\n" });
  await expectCode(agent.runs.submit(id, { expect_hash: cs.hash }), "conflict");
  const sub = await agent.runs.submit(id);
  assert.notEqual(sub.hash, cs.hash);
  assert.ok((await op.runs.blame(id, { hash: sub.hash })).hunks!.length > 0);
  assert.equal((await agent.runs.artifact(id, "changeset")).kind, "changeset");
  await expectCode(agent.runs.approve(id, { hash: sub.hash! }), "forbidden");
  await expectCode(op.runs.approve(id, { hash: "sha256:" + "0".repeat(64) }), "conflict");
  const ok = await op.runs.approve(id, { hash: sub.hash! });
  assert.equal(ok.hash, sub.hash);
  const applied = await op.runs.apply(id, { to: "branch" });
  assert.ok(applied.applied_to);
  const branch = applied.applied_to!.split(" @ ")[0]!; // "refs/heads/paddock/RUN @ COMMIT"
  assert.equal(git(repo, "show", `${branch}:greeting.txt`), "hello");
  await expectCode(op.runs.apply(id, { to: "branch" }), "conflict");
});

test("run tokens: another run's is run_mismatch, an unknown one unauthorized; attribution_leak; not_bootstrapped; unsupported", async () => {
  const second = await boot("something else", "app");
  await expectCode(agent.runs.get(second.id), "run_mismatch", RunMismatchError);
  const stranger = new Paddock({ transport: d.tcp("pdk_run_forged"), onRequest: routes.observe });
  const un = await expectCode(stranger.runs.get(second.id), "unauthorized", UnauthorizedError);
  assert.equal(un.status, 401);
  const a2 = second.agent;
  await a2.runs.callTool(second.id, "write", { path: "CREDITS.md", content: "Co-Authored-By: Claude <noreply@anthropic.com>\n" });
  await expectCode(a2.runs.submit(second.id), "attribution_leak", AttributionLeakError);
  await second.close(); // not submitted: rejected
  assert.ok(["rejected", "cleanup_pending", "cleaned"].includes((await op.runs.get(second.id)).workspace?.state ?? ""));
  assert.ok((await op.runs.list({ project: "app", all: true })).some((r) => r.id === second.id));
  const plain = await boot("verify with no manifest", "plain");
  await expectCode(plain.agent.jobs.start(plain.id, { kind: "verify" }), "unsupported");
  await plain.close();
  const bare = await op.runs.create({ project: "app" });
  await expectCode(op.runs.artifact(bare.id!, "task"), "not_bootstrapped", NotBootstrappedError);
  await op.runs.reject(bare.id!);
  await op.runs.remove(bare.id!);
  // A run of a lost node is adopted on a shared store only.
  await expectCode(op.runs.adopt(bare.id!), "unsupported");
});

test("checkpoint, resume, review, verify, worktree apply and undo, retain, fork", async () => {
  await using s = await boot("apply into the working tree", "app");
  const a = s.agent;
  await a.runs.callTool(s.id, "write", { path: "applied.txt", content: "applied\n" });
  await op.runs.checkpoint(s.id, { reason: "paused for the night" });
  await op.runs.resume(s.id);
  const v = await a.runs.verify(s.id, { checks: ["test"] });
  assert.equal(v.passed, true);
  await expectCode(a.runs.verify(s.id, { checks: ["deploy" as any] }), "bad_request");
  const sub = await a.runs.submit(s.id);
  const rv = await op.runs.review(s.id);
  assert.equal(rv.review_of?.run, s.id);
  assert.equal((await op.runs.review(s.id)).id, rv.id, "the same review run, found by hash");
  await op.runs.approve(s.id, { hash: sub.hash! });
  await op.runs.apply(s.id, { to: "worktree" });
  assert.equal(readFileSync(join(repo, "applied.txt"), "utf8"), "applied\n");
  await op.runs.undo(s.id);
  assert.equal(existsSync(join(repo, "applied.txt")), false);
  await expectCode(op.runs.undo(s.id), "conflict");
  await op.runs.retain(s.id);
  await expectCode(op.runs.remove(s.id), "conflict");
  // A fork (unsupported where the run is no overlay).
  const f = await op.runs.create({ project: "app" });
  try {
    const fr = await op.runs.fork(f.id!, { count: 2 });
    assert.equal(fr.runs?.length, 2);
  } catch (err) {
    assert.ok(err instanceof UnsupportedError, String(err));
  }
});

test("bundles, the merge queue, and the notices of every run", async () => {
  await using s = await boot("land through the queue", "app");
  await s.agent.runs.exec(s.id, { argv: ["sh", "-c", "echo bundled > bundled.txt"] });
  const sub = await s.agent.runs.submit(s.id);
  const bundle = await op.bundles.get(s.id);
  assert.ok(bundle.length > 512);
  const imp = await op.bundles.import(bundle, { project: "app" });
  assert.equal(imp.hash, sub.hash);
  assert.equal(imp.trusted, true);
  git(repo, "branch", "landing");
  await op.runs.approve(s.id, { hash: sub.hash! });
  const q = await op.queue.add(s.id, { branch: "landing" });
  assert.equal(q.branch, "landing");
  const landed = await op.queue.settle(s.id);
  assert.equal(landed.state, "landed", JSON.stringify(landed));
  assert.equal(git(repo, "show", "landing:bundled.txt"), "bundled");
  assert.ok((await op.queue.list({ project: "app", all: true })).some((e) => e.run === s.id));
  await op.queue.undo(s.id);
  await expectCode(op.queue.remove(s.id), "conflict");
  // The firehose: a submission, from the start.
  const ac = new AbortController();
  for await (const n of op.notices({ types: ["changeset.submitted"], signal: ac.signal })) {
    assert.equal(n.type, "changeset.submitted");
    break;
  }
});

test("a flow with a review: the coder's and the reviewer's menus", async () => {
  const f = await op.flows.start({ workflow: "task-with-review", project: "app", task: "write hello.txt" });
  assert.ok((await op.flows.list({ project: "app" })).some((x) => x.id === f.id));
  const coder = f.runs![f.state!]!;
  const asAgent = op.forAgent();
  await asAgent.runs.callTool(coder, "write", { path: "hello.txt", content: "hello" });
  const after = await asAgent.flows.pick(coder, "done");
  const reviewer = after.runs![after.state!]!;
  assert.notEqual(reviewer, coder);
  await expectCode(asAgent.flows.pick(reviewer, "approve", { head: "sha256:stale" }), "conflict");
  const head = (await op.flows.get(f.id!)).head;
  const end = await asAgent.flows.pick(reviewer, "approve", { head });
  assert.ok(end.state);
});

test("principals and tokens: made, read, changed, used, revoked, removed", async () => {
  await op.principals.add({ name: "viv", role: "viewer" });
  assert.equal((await op.principals.list()).length, 1);
  const tok = await op.tokens.create({ principal: "viv", expires: "1h" });
  const viv = new Paddock({ transport: d.tcp(tok.token), onRequest: routes.observe });
  assert.equal((await viv.whoami()).principal, "viv");
  await expectCode(viv.projects.add({ path: repo }), "forbidden");
  assert.equal((await op.principals.set("viv", { role: "reviewer", projects: ["app"] })).role, "reviewer");
  assert.deepEqual((await op.principals.get("viv")).projects, ["app"]);
  assert.deepEqual((await op.tokens.list({ principal: "viv" })).map((t) => t.id), [tok.id]);
  assert.ok((await op.tokens.revoke(tok.id!)).revoked_at);
  await expectCode(viv.whoami(), "unauthorized");
  await op.principals.remove("viv");
});

test("an MCP session through the SDK: initialize, its stream, tools, a call, its end", async () => {
  await using s = await boot("over MCP", "app");
  const mcpAgent = new Paddock({ transport: d.tcp(s.token), onRequest: routes.observe });
  await using mcp = await connectMcp(mcpAgent, s.id);
  const tools = (await mcp.listTools()).tools.map((t) => t.name);
  assert.ok(tools.includes("write") && tools.includes("submit"), tools.join(","));
  const w = await mcp.callTool({ name: "write", arguments: { path: "mcp.txt", content: "over mcp\n" } });
  assert.ok(!w.isError, JSON.stringify(w));
  const r = await mcp.callTool({ name: "read", arguments: { path: "../../etc/passwd" } });
  assert.ok(r.isError);
  assert.equal((r.structuredContent as any)?.code, "forbidden");
  // Wait for the session's own stream (GET) to be open, as the SDK opens it after initialize.
  for (let i = 0; i < 100 && !routes.seen.has("GET /v1/runs/{id}/mcp"); i++) await new Promise((r) => setTimeout(r, 20));
  const cs = await op.runs.changeSet(s.id);
  assert.ok(JSON.stringify(cs).includes("mcp.txt"));
});

test("an interrupted event stream resumes after the last seq seen: no repeat, no gap", async () => {
  await using s = await boot("many events");
  // A proxy in front of the daemon's TCP listener that can drop every
  // connection at once, and reads the Last-Event-ID each one asks for.
  const [host, port] = [d.listen.slice(0, d.listen.lastIndexOf(":")), Number(d.listen.slice(d.listen.lastIndexOf(":") + 1))];
  const open = new Set<Socket>();
  const asked: number[] = [];
  const proxy = createServer((c) => {
    const up = connect(port, host);
    open.add(c);
    c.once("data", (b) => {
      const m = /last-event-id: (\d+)/i.exec(b.toString());
      if (m) asked.push(Number(m[1]));
    });
    c.pipe(up).pipe(c);
    const end = () => (c.destroy(), up.destroy(), open.delete(c));
    c.on("error", end).on("close", end);
    up.on("error", end).on("close", end);
  });
  await new Promise<void>((r) => proxy.listen(0, "127.0.0.1", r));
  const proxied = `127.0.0.1:${(proxy.address() as { port: number }).port}`;
  const { tcp } = await import("@paddock/sdk");
  const t = tcp(proxied, d.token);
  try {
    const viaProxy = new Paddock({ transport: t, onRequest: routes.observe });
    const resumedAfter: number[] = [];
    const ac = new AbortController();
    const seen: number[] = [];
    // The agent writes while the stream is read: 3 rounds of 8 writes,
    // every connection dropped after each of the first two rounds is seen.
    const writes = (async () => {
      let target = 0;
      for (let round = 0; round < 3; round++) {
        for (let i = 0; i < 8; i++) await s.agent.runs.callTool(s.id, "write", { path: `f${round}-${i}.txt`, content: `${i}\n` });
        target = (await op.runs.get(s.id)).last_seq!;
        const deadline = Date.now() + 20_000;
        while ((seen.at(-1) ?? 0) < target) {
          if (Date.now() > deadline) throw new Error(`the stream stopped at ${seen.at(-1)} of ${target}`);
          await new Promise((r) => setTimeout(r, 10));
        }
        if (round < 2) for (const c of open) c.destroy();
      }
      return target;
    })();
    // The writer ends the stream once the last event was seen.
    const last = writes.finally(() => ac.abort(new Error("done")));
    await assert.rejects(
      (async () => {
        for await (const e of viaProxy.runs.follow(s.id, { signal: ac.signal, retryDelay: 20, onReconnect: (after) => resumedAfter.push(after) })) {
          seen.push(e.seq!);
        }
      })(),
      /done/,
    );
    const lastSeq = await last;
    assert.ok(seen.length >= lastSeq && lastSeq > 24);
    assert.deepEqual(seen, Array.from({ length: seen.length }, (_, i) => i + 1), "every seq once, in order");
    assert.ok(resumedAfter.length >= 2, `reconnected ${resumedAfter.length} times`);
    // Each reconnection asked for what followed the last seq it had given.
    assert.deepEqual(asked.slice(1, 1 + resumedAfter.length), resumedAfter);
    assert.equal(asked[0], 0);
  } finally {
    await t.close();
    proxy.close();
    for (const c of open) c.destroy();
  }
});

test("every error code a client can provoke was provoked, as its own class", () => {
  const missing = errorCodes.filter((c) => !provoked.has(c) && c !== "internal" && c !== "node_lost");
  assert.deepEqual(missing, [], "internal is no client's to provoke; node_lost needs nodes sharing a store");
});

test("every operation of openapi.json was sent", () => {
  const all = operations();
  assert.equal(all.length, 84);
  const missing = all.map((o) => `${o.method} ${o.path}`).filter((k) => !routes.seen.has(k));
  assert.deepEqual(missing, []);
  assert.deepEqual(routes.unmatched, []);
});
