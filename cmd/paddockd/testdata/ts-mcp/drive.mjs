// Drives paddock's MCP server with the official TypeScript SDK, over
// stdio (paddock mcp RUN) and streamable HTTP (/v1/runs/RUN/mcp), as
// cmd/paddockd's TestMCPTypeScriptSDK sets it up: the runs, the daemon's
// address and tokens come as JSON in PADDOCK_TS_MCP. Each failed check is
// printed; the exit status is 1 if any failed.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ToolListChangedNotificationSchema, ResourceUpdatedNotificationSchema } from "@modelcontextprotocol/sdk/types.js";

const cfg = JSON.parse(process.env.PADDOCK_TS_MCP);
let failures = 0;
let checks = 0;
function check(ok, what, got) {
  checks++;
  if (!ok) {
    failures++;
    console.log(`FAIL ${what}: ${typeof got === "string" ? got : JSON.stringify(got)}`);
  }
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
async function until(what, fn, ms = 10000) {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (await fn()) return true;
    await sleep(50);
  }
  check(false, what, "timed out");
  return false;
}

// connect opens a session to run on a transport: stdio, or HTTP with token.
async function connect(transport, run, token) {
  const client = new Client({ name: "ts-sdk-test", version: "1.0.0" });
  const t =
    transport === "stdio"
      ? new StdioClientTransport({ command: cfg.binary, args: ["mcp", run, "--home", cfg.home], env: { ...process.env, PADDOCK_NO_AUTOSTART: "1" }, stderr: "inherit" })
      : new StreamableHTTPClientTransport(new URL(`${cfg.base}/v1/runs/${run}/mcp`), { requestInit: { headers: { Authorization: `Bearer ${token}` } } });
  await client.connect(t);
  return client;
}

const names = async (c) => (await c.listTools()).tools.map((t) => t.name).sort();
const text = (res) => res.content.filter((c) => c.type === "text").map((c) => c.text).join("");

async function grant(run, request) {
  const res = await fetch(`${cfg.base}/v1/runs/${run}/requests/${request}/grant`, {
    method: "POST",
    headers: { Authorization: `Bearer ${cfg.operatorToken}`, "Content-Type": "application/json" },
    body: JSON.stringify({ note: "ts" }),
  });
  check(res.status === 200, "grant", String(res.status));
}

async function drive(transport, token) {
  const tag = `[${transport}]`;
  // The tools each access mode is offered.
  for (const [run, want] of [
    [cfg.write, cfg.writeTools],
    [cfg.read, cfg.readTools],
    [cfg.none, ["capabilities", "plan", "request_access"]],
  ]) {
    const c = await connect(transport, run, token);
    const got = await names(c);
    check(JSON.stringify(got) === JSON.stringify(want), `${tag} tools of ${run}`, got);
    await c.close();
  }

  // Every tool of a write run, exec's output as progress.
  const c = await connect(transport, cfg.write, token);
  const listed = (await c.listTools()).tools;
  const read = listed.find((t) => t.name === "read");
  check(read.annotations?.readOnlyHint === true && read.annotations?.destructiveHint === false, `${tag} read's hints`, read.annotations);
  const call = async (name, args) => c.callTool({ name, arguments: args });
  const ok = async (name, args) => {
    const res = await call(name, args);
    check(!res.isError, `${tag} ${name}`, text(res));
    return res;
  };
  const f = `ts-${transport}.txt`;
  await ok("write", { path: f, content: "one\n" });
  await ok("edit", { path: f, old_string: "one", new_string: "two" });
  const r = await ok("read", { path: f });
  check(r.structuredContent?.content === "two\n", `${tag} read's content`, r.structuredContent);
  await ok("stat", { path: f });
  await ok("list", {});
  await ok("glob", { pattern: "*.txt" });
  await ok("grep", { pattern: "two" });
  await ok("move", { from: f, to: f + ".moved" });
  await ok("write", { path: "gone.txt", content: "x" });
  await ok("delete", { path: "gone.txt" });
  const progress = [];
  const ex = await c.callTool({ name: "exec", arguments: { argv: ["sh", "-c", "echo first; sleep 0.2; echo second"] } }, undefined, {
    onprogress: (p) => progress.push(p),
  });
  check(!ex.isError && ex.structuredContent?.exit_code === 0 && ex.structuredContent?.stdout === "first\nsecond\n" && ex.structuredContent?.enforcement, `${tag} exec`, ex);
  await until(`${tag} exec's progress`, () => progress.map((p) => p.message).join("").includes("second"));
  check(progress.map((p) => p.message).join("") === "first\nsecond\n" && progress.every((p, i) => i === 0 || p.progress > progress[i - 1].progress), `${tag} exec's progress in order`, progress);
  const d = await ok("diff", {});
  check(text(d).includes(f + ".moved") && text(d).includes("+two") && d.structuredContent?.hash?.startsWith("sha256:"), `${tag} diff`, text(d));
  await ok("verify", { checks: ["test"] });
  const caps = await ok("capabilities", {});
  check(caps.structuredContent?.run === cfg.write, `${tag} capabilities`, caps.structuredContent);
  const plan = await ok("plan", { steps: [{ step: `drive ${transport}`, status: "in_progress" }, { step: "submit", status: "pending" }] });
  check(plan.structuredContent?.revision >= 1 && plan.structuredContent?.steps?.[0]?.status === "in_progress", `${tag} plan`, plan.structuredContent);
  const q = await ok("request_access", { kind: "network", domain: "example.com", reason: "docs" });
  check(q.structuredContent?.state === "pending", `${tag} request_access`, q.structuredContent);
  const sub = await ok("submit", { expect_hash: d.structuredContent.hash });
  check(sub.structuredContent?.hash === d.structuredContent.hash, `${tag} submit`, sub.structuredContent);

  // Error shapes: the code and one line first, the error structured.
  const esc = await call("read", { path: "../../etc/passwd" });
  check(esc.isError && text(esc).startsWith("forbidden: ") && !text(esc).includes("\n") && esc.structuredContent?.code === "forbidden", `${tag} an escape`, esc);
  const bad = await call("exec", { argv: ["true"], net: "host" });
  check(bad.isError && text(bad).startsWith("forbidden: ") && bad.structuredContent?.details?.rule === "network_not_allowed", `${tag} exec asking for a network above its ceiling`, bad);

  // Resources: listed, read, subscribed to.
  const updated = [];
  c.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => updated.push(n.params.uri));
  const base = `paddock://runs/${cfg.write}`;
  const res = (await c.listResources()).resources.map((r) => r.uri).sort();
  check(JSON.stringify(res) === JSON.stringify([base + "/changeset", base + "/changeset.diff", base + "/events"]), `${tag} resources`, res);
  await c.subscribeResource({ uri: base + "/events" });
  await ok("write", { path: `res-${transport}.txt`, content: "resource\n" });
  await until(`${tag} resources/updated`, () => updated.includes(base + "/events"));
  const cs = JSON.parse((await c.readResource({ uri: base + "/changeset" })).contents[0].text);
  check(cs.hash?.startsWith("sha256:"), `${tag} the change set resource`, cs);
  const diff = (await c.readResource({ uri: base + "/changeset.diff" })).contents[0].text;
  check(diff.includes("+resource"), `${tag} the diff resource`, diff);
  const evs = JSON.parse((await c.readResource({ uri: base + "/events" })).contents[0].text);
  check(evs.some((e) => e.type === "tool.call" && JSON.stringify(e.data).includes(`res-${transport}`)), `${tag} the event log`, evs.length);
  await c.close();

  // tools/list_changed after a grant.
  const narrowToken = transport === "stdio" ? "" : cfg.narrowToken;
  const n = await connect(transport, cfg.narrow, narrowToken);
  let changed = 0;
  n.setNotificationHandler(ToolListChangedNotificationSchema, () => changed++);
  const tool = transport === "stdio" ? "write" : "edit";
  check(!(await names(n)).includes(tool), `${tag} ${tool} before the grant`, await names(n));
  const asked = await n.callTool({ name: "request_access", arguments: { kind: "tool", tool, reason: "to fix" } });
  await grant(cfg.narrow, asked.structuredContent.id);
  await until(`${tag} tools/list_changed after the grant`, () => changed > 0);
  check((await names(n)).includes(tool), `${tag} ${tool} after the grant`, await names(n));
  await n.close();

  // A rejected run: no tools, every call answered with why.
  const rj = await connect(transport, cfg.rejected, token);
  check((await names(rj)).length === 0, `${tag} a rejected run's tools`, await names(rj));
  const rc = await rj.callTool({ name: "read", arguments: { path: "README.md" } });
  check(rc.isError && text(rc).startsWith(`conflict: run ${cfg.rejected} is `), `${tag} a call on a rejected run`, rc);
  await rj.close();
}

try {
  await drive("stdio");
  await drive("http", cfg.operatorToken);
} catch (e) {
  failures++;
  console.log(`FAIL ${e.stack || e}`);
}
console.log(`${checks} checks, ${failures} failed`);
process.exit(failures ? 1 : 0);
