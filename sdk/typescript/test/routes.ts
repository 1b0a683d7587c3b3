// The operations of openapi.json and the route a request's path falls
// under, as the daemon's own table (and Go's http.ServeMux) matches it:
// a literal segment wins over a parameter.

import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";

/** httpapi/openapi.json of this checkout (the tests run from build/test/). */
export const openapiPath = fileURLToPath(new URL("../../../../httpapi/openapi.json", import.meta.url));

export interface Operation {
  method: string;
  path: string;
  operationId: string;
}

export function operations(): Operation[] {
  const doc = JSON.parse(readFileSync(openapiPath, "utf8")) as { paths: Record<string, Record<string, { operationId: string }>> };
  const ops: Operation[] = [];
  for (const [path, item] of Object.entries(doc.paths)) {
    for (const [method, op] of Object.entries(item)) {
      if (["get", "post", "put", "patch", "delete"].includes(method)) ops.push({ method: method.toUpperCase(), path, operationId: op.operationId });
    }
  }
  return ops;
}

/** Records the (method, path template) of each request it is told of. */
export class RouteRecorder {
  readonly seen = new Set<string>();
  readonly unmatched: string[] = [];
  readonly #routes: { key: string; method: string; re: RegExp; literals: number }[];

  constructor(ops: Operation[] = operations()) {
    this.#routes = ops.map((o) => {
      const segs = o.path.split("/");
      const re = new RegExp("^" + segs.map((s) => (/^\{.+\}$/.test(s) ? "[^/]+" : s.replace(/[.*+?^$()|[\]\\]/g, "\\$&"))).join("/") + "$");
      return { key: `${o.method} ${o.path}`, method: o.method, re, literals: segs.filter((s) => !s.startsWith("{")).length };
    });
  }

  /** An observer for PaddockOptions.onRequest. */
  observe = (method: string, path: string): void => {
    const hits = this.#routes.filter((r) => r.method === method && r.re.test(path)).sort((a, b) => b.literals - a.literals);
    if (hits.length) this.seen.add(hits[0]!.key);
    else this.unmatched.push(`${method} ${path}`);
  };
}
