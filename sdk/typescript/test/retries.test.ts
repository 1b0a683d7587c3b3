// A call whose error says nothing of it was done (details.done === false)
// is made again, the same request and idempotency key each time, until it
// is answered or its retries run out; so is a write that may have been done
// (delivered) or is still being made (in_progress), which its key makes
// once; another error is not; retries: 0 makes no call twice; a read tool's
// call carries no key. Against a server of the test's own.

import { test } from "node:test";
import assert from "node:assert/strict";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { Paddock, tcp, isPaddockError } from "@paddock/sdk";

const undone = { ok: false, error: { code: "node_lost", message: "unreached", details: { node: "n2", delivered: false, done: false } } };
const delivered = { ok: false, error: { code: "node_lost", message: "maybe", details: { node: "n2", delivered: true } } };
const busy = { ok: false, error: { code: "busy", message: "locked" } };
const inProgress = { ok: false, error: { code: "busy", message: "being made", details: { in_progress: true } } };
const ok = { ok: true, data: { id: "r-1" } };

async function serve(answers: object[]) {
  const bodies: string[] = [];
  const keys: (string | undefined)[] = [];
  const server = createServer((req, res) => {
    let body = "";
    req.on("data", (c) => (body += c));
    req.on("end", () => {
      bodies.push(`${req.method} ${req.url} ${body}`);
      keys.push(req.headers["idempotency-key"] as string | undefined);
      const a = answers[Math.min(bodies.length, answers.length) - 1]!;
      res.writeHead("error" in a ? 503 : 200, { "content-type": "application/json" });
      res.end(JSON.stringify(a));
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const { port } = server.address() as AddressInfo;
  return { bodies, keys, server, transport: tcp(`127.0.0.1:${port}`, "t0k3n") };
}

for (const tc of [
  { name: "not done, then answered", retries: undefined, answers: [undone, undone, ok], calls: 3, code: "" },
  { name: "not done past the retries", retries: 2, answers: [undone], calls: 3, code: "node_lost" },
  { name: "maybe done", retries: undefined, answers: [delivered, ok], calls: 2, code: "" },
  { name: "still being made", retries: undefined, answers: [inProgress, inProgress, ok], calls: 3, code: "" },
  { name: "maybe done past the retries", retries: 1, answers: [delivered], calls: 2, code: "node_lost" },
  { name: "another error", retries: undefined, answers: [busy, ok], calls: 1, code: "busy" },
  { name: "no retries", retries: 0, answers: [undone, ok], calls: 1, code: "node_lost" },
]) {
  test(`retries: ${tc.name}`, async () => {
    const s = await serve(tc.answers);
    const paddock = new Paddock({ transport: s.transport, retries: tc.retries });
    try {
      const call = paddock.runs.exec("r-1", { argv: ["true"] });
      if (tc.code === "") {
        await call;
      } else {
        await assert.rejects(call, (e) => isPaddockError(e, tc.code as "busy"));
      }
      assert.equal(s.bodies.length, tc.calls);
      for (const b of s.bodies) assert.equal(b, s.bodies[0]);
      assert.match(s.bodies[0]!, /^POST \/v1\/runs\/r-1\/exec \{"argv":\["true"\]\}$/);
      assert.ok(s.keys[0] && s.keys[0].length >= 20, `key ${s.keys[0]}`);
      for (const k of s.keys) assert.equal(k, s.keys[0]);
    } finally {
      await paddock.transport.close();
      s.server.close();
    }
  });
}

test("retries: an aborted call stops waiting", async () => {
  const s = await serve([undone]);
  const paddock = new Paddock({ transport: s.transport });
  try {
    const start = Date.now();
    await assert.rejects(paddock.runs.exec("r-1", { argv: ["true"] }, { signal: AbortSignal.timeout(100) }));
    assert.ok(Date.now() - start < 2000, `took ${Date.now() - start} ms`);
  } finally {
    await paddock.transport.close();
    s.server.close();
  }
});

test("retries: each write has a key of its own; a read tool's call none, made again as it is", async () => {
  const s = await serve([delivered, ok]);
  const paddock = new Paddock({ transport: s.transport });
  try {
    await paddock.runs.callTool("r-1", "read", { path: "a.txt" });
    await paddock.runs.exec("r-1", { argv: ["true"] });
    await paddock.runs.exec("r-1", { argv: ["true"] });
    assert.equal(s.bodies.length, 4);
    assert.equal(s.keys[0], undefined);
    assert.equal(s.keys[1], undefined);
    assert.ok(s.keys[2] && s.keys[3] && s.keys[2] !== s.keys[3], `keys ${s.keys}`);
  } finally {
    await paddock.transport.close();
    s.server.close();
  }
});

test("retries: a key the caller keeps, on each attempt and from a new client; none on a read; a bad key refused", async () => {
  const s = await serve([delivered, ok, ok, ok]);
  const paddock = new Paddock({ transport: s.transport });
  try {
    await paddock.withIdempotencyKey("job-42/exec-1").runs.exec("r-1", { argv: ["true"] });
    await paddock.withIdempotencyKey("job-42/exec-1").withToken("t0k3n").runs.callTool("r-1", "read", { path: "a" });
    const again = new Paddock({ transport: s.transport });
    await again.withIdempotencyKey("job-42/exec-1").runs.exec("r-1", { argv: ["true"] });
    assert.deepEqual(s.keys, ["job-42/exec-1", "job-42/exec-1", undefined, "job-42/exec-1"]);
    for (const bad of ["", "has space", "x".repeat(129), "café"]) {
      assert.throws(() => paddock.withIdempotencyKey(bad), TypeError);
      assert.throws(() => new Paddock({ transport: s.transport, idempotencyKey: bad }), TypeError);
    }
    assert.equal(s.bodies.length, 4);
  } finally {
    await paddock.transport.close();
    s.server.close();
  }
});
