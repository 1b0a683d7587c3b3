// An approval policy an orchestrator applies before it approves a change
// set: the checks passed on exactly the submitted bytes, the change is
// small, and it touches no path a person must look at. paddock's own
// policy (the project's approval_policy: how many approvals, from whom)
// still holds on top of it; this one decides whether the orchestrator
// gives its approval at all.

import type { ChangeSet, VerifyResult } from "@paddock/sdk";

export interface Policy {
  /** At most this many added and removed lines, in all. */
  maxLines: number;
  /** Paths (prefixes) that always go to a person. */
  humanOnly: string[];
}

export const defaultPolicy: Policy = { maxLines: 400, humanOnly: [".github/", "deploy/", "Makefile"] };

export interface Decision {
  approve: boolean;
  reason: string;
}

/** Decides on a submitted change set, its diff and the verify run on its hash. */
export function decide(policy: Policy, cs: ChangeSet, diff: string, verify: VerifyResult): Decision {
  if (!verify.passed) return { approve: false, reason: `checks failed: ${verify.checks?.filter((c) => !c.passed).map((c) => c.name).join(", ")}` };
  if (verify.hash !== cs.hash || verify.stale) return { approve: false, reason: "the checks ran on another change set" };
  const lines = diff.split("\n").filter((l) => /^[+-](?![+-]{2} )/.test(l)).length;
  if (lines > policy.maxLines) return { approve: false, reason: `${lines} changed lines, more than ${policy.maxLines}` };
  const paths = (cs.entries ?? []).map((e) => e.path ?? "");
  const sensitive = paths.filter((p) => policy.humanOnly.some((h) => p === h || p.startsWith(h)));
  if (sensitive.length) return { approve: false, reason: `touches ${sensitive.join(", ")}: a person decides` };
  if (paths.length === 0) return { approve: false, reason: "nothing changed" };
  return { approve: true, reason: `${paths.length} files, ${lines} lines, checks passed` };
}
