// The error classes, without a daemon: each code's class, a code this SDK
// does not know, and what a caller reads off an error.

import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { errorCodes, paddockError, isPaddockError, PaddockError, ConflictError, ForbiddenError, TransportError } from "@paddock/sdk";
import { openapiPath } from "./routes.js";

test("the codes are error.go's, in its order, and openapi.json's", () => {
  const src = readFileSync(fileURLToPath(new URL("../../../../error.go", import.meta.url)), "utf8");
  const list = /var Codes = \[\]Code\{([^}]*)\}/.exec(src)![1]!.split(",").map((s) => s.trim()).filter(Boolean);
  const consts = new Map([...src.matchAll(/(Code\w+)\s+Code = "(\w+)"/g)].map((m) => [m[1]!, m[2]!]));
  assert.deepEqual(errorCodes, list.map((n) => consts.get(n)));
  const doc = JSON.parse(readFileSync(openapiPath, "utf8"));
  assert.deepEqual([...errorCodes].sort(), [...doc.components.schemas.Error.properties.code.enum].sort());
});

test("each code has its own class, a PaddockError", () => {
  const names = new Set<string>();
  for (const code of errorCodes) {
    const e = paddockError({ code, message: "why", details: { rule: "r", key: "k" } }, 418);
    assert.ok(e instanceof PaddockError && e instanceof Error);
    assert.equal(e.code, code);
    assert.equal(e.message, "why");
    assert.equal(e.status, 418);
    assert.equal(e.rule, "r");
    assert.equal(e.details.key, "k");
    assert.notEqual(e.constructor, PaddockError);
    assert.equal(e.name, e.constructor.name);
    names.add(e.constructor.name);
    assert.ok(isPaddockError(e, code) && !isPaddockError(e, code === "busy" ? "conflict" : "busy"));
  }
  assert.equal(names.size, errorCodes.length);
  assert.ok(paddockError({ code: "conflict", message: "" }) instanceof ConflictError);
  assert.ok(!(paddockError({ code: "conflict", message: "" }) instanceof ForbiddenError));
  assert.match(String(paddockError({ code: "forbidden", message: "no" }).stack), /^ForbiddenError: no\n/);
  assert.equal(String(paddockError({ code: "busy", message: "locked" })), "BusyError busy: locked");
});

test("a code from a newer daemon is a plain PaddockError that keeps it", () => {
  const e = paddockError({ code: "rate_limited", message: "slow down" });
  assert.equal(e.constructor, PaddockError);
  assert.equal(e.code, "rate_limited");
  assert.deepEqual(e.details, {});
  assert.ok(!isPaddockError(new TransportError("x")));
});

test("nothing listening is a TransportError that says so", async () => {
  const { Paddock, unixSocket } = await import("@paddock/sdk");
  await using t = unixSocket("/nonexistent/paddock.sock");
  const p = new Paddock({ transport: t });
  await assert.rejects(p.health(), (err: unknown) => err instanceof TransportError && err.unreachable && /unreachable/.test(err.message));
  await assert.rejects(p.runs.execAttach("r-x", { argv: ["true"] }).result, (err: unknown) => err instanceof TransportError && err.unreachable);
});

test("fromEnv finds the daemon as the paddock CLI does", async () => {
  const { fromEnv, defaultSocketPath } = await import("@paddock/sdk");
  assert.equal(defaultSocketPath({ PADDOCK_HOME: "/srv/pd" }), "/srv/pd/paddock.sock");
  assert.equal(defaultSocketPath({ XDG_STATE_HOME: "/x" }), "/x/paddock/paddock.sock");
  assert.equal(defaultSocketPath({ HOME: "/home/u" }), "/home/u/.local/state/paddock/paddock.sock");
  const cases: [NodeJS.ProcessEnv, object, string?][] = [
    [{ PADDOCK_HOME: "/srv/pd", PADDOCK_SOCKET: "/run/x.sock" }, { socketPath: "/srv/pd/paddock.sock" }],
    [{ HOME: "/home/u", PADDOCK_SOCKET: "/run/x.sock" }, { socketPath: "/run/x.sock" }],
    [{ PADDOCK_ADDR: "127.0.0.1:7070", PADDOCK_TOKEN: "pdk_tok_a" }, { host: "127.0.0.1", port: 7070 }, "pdk_tok_a"],
    [{ PADDOCK_ADDR: "[::1]:7071", PADDOCK_TOKEN: "t" }, { host: "::1", port: 7071 }, "t"],
  ];
  for (const [env, endpoint, token] of cases) {
    await using t = fromEnv(env);
    assert.deepEqual(t.endpoint, endpoint, JSON.stringify(env));
    assert.equal(t.token, token);
  }
  assert.throws(() => fromEnv({ PADDOCK_ADDR: "127.0.0.1:7070", PADDOCK_HOME: "/nonexistent" }), /needs the token in \/nonexistent\/token/);
});
