// src/schema.ts is generated from httpapi/openapi.json; regenerating it
// must give the same file, so the SDK's types cannot drift from the API.
// (npm run generate writes it again.)

import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { openapiPath } from "./routes.js";

const pkg = fileURLToPath(new URL("../../", import.meta.url)); // sdk/typescript/

test("src/schema.ts is what openapi-typescript generates from httpapi/openapi.json", () => {
  const dir = mkdtempSync(join(tmpdir(), "pdk-ts-gen-"));
  try {
    const out = join(dir, "schema.ts");
    const cli = join(pkg, "node_modules", "openapi-typescript", "bin", "cli.js");
    execFileSync(process.execPath, [cli, openapiPath, "-o", out], { cwd: pkg, stdio: ["ignore", "ignore", "pipe"] });
    const want = readFileSync(out, "utf8");
    const got = readFileSync(join(pkg, "src", "schema.ts"), "utf8");
    assert.ok(got === want, "src/schema.ts differs from a fresh generation: run npm run generate in sdk/typescript and commit it");
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
