// What a run's events say about its change set: the latest submission and
// what became of it, the latest verification. Shared by the list and the
// run page.
import { get, runPath, eventsAfter } from './api.js';

export function emptySummary() {
  return { seq: 0, sub: null, verify: null, rejected: false, enforcement: null, events: 0, bootstrapped: false };
}

// fold applies one event to a summary.
export function fold(s, ev) {
  const d = ev.data || {};
  s.seq = Math.max(s.seq, ev.seq || 0);
  s.events++;
  switch (ev.type) {
    case 'changeset.submitted':
      s.sub = { hash: d.hash, entries: d.entries, at: ev.time, approved: null, applied: null, undone: null, failed: null };
      break;
    case 'changeset.approved':
      if (s.sub && d.hash === s.sub.hash) s.sub.approved = { by: d.by, at: ev.time };
      break;
    case 'changeset.applied':
      if (s.sub) { s.sub.applied = Object.assign({ at: ev.time }, d); s.sub.undone = null; s.sub.failed = null; }
      break;
    case 'changeset.undone':
      if (s.sub) { s.sub.undone = Object.assign({ at: ev.time }, d); s.sub.applied = null; }
      break;
    case 'changeset.apply_failed':
      if (s.sub) s.sub.failed = Object.assign({ at: ev.time }, d);
      break;
    case 'verify.finished':
      s.verify = { hash: d.hash, passed: d.passed, stale: d.stale, checks: d.checks, at: ev.time };
      break;
    case 'run.bootstrapped':
      s.bootstrapped = true;
      break;
    case 'sandbox.enforced':
      s.enforcement = d;
      break;
    case 'workspace.state':
      if (d.to === 'rejected') s.rejected = true;
      break;
    default:
  }
  return s;
}

// decision names where a run's change set stands.
export function decision(run, s) {
  const st = run.workspace ? run.workspace.state : '';
  if (s.sub && s.sub.applied) return 'applied';
  if (st === 'rejected' || s.rejected) return 'rejected';
  if (s.sub && s.sub.approved) return 'approved';
  if (s.sub) return 'awaiting review';
  return st || 'no workspace';
}

export function verifyStatus(s) {
  if (!s.verify) return '';
  if (s.sub && s.verify.hash && s.verify.hash !== s.sub.hash) return s.verify.passed ? 'passed (older change set)' : 'failed (older change set)';
  if (s.verify.stale) return s.verify.passed ? 'passed (stale)' : 'failed (stale)';
  return s.verify.passed ? 'passed' : 'failed';
}

const cache = new Map(); // run id → {summary, csHash, risks, diffSize, entries, task}

// refresh brings the cached summary of run up to its last_seq.
export async function summaryOf(run) {
  let c = cache.get(run.id);
  if (!c) { c = { s: emptySummary(), risks: null, csHash: '', task: undefined }; cache.set(run.id, c); }
  if ((run.last_seq || 0) > c.s.seq) {
    const evs = await eventsAfter(run.id, c.s.seq);
    for (const ev of evs) fold(c.s, ev);
  }
  if (c.s.sub && c.s.sub.hash !== c.csHash) {
    c.csHash = c.s.sub.hash;
    try {
      const a = await get(runPath(run.id, '/artifacts/changeset'));
      const cs = a.content || {};
      const risks = new Set();
      for (const e of cs.entries || []) for (const r of e.risks || []) risks.add(r);
      c.risks = [...risks].sort();
      c.diffSize = cs.diff_size;
      c.entries = (cs.entries || []).length;
    } catch {
      c.risks = null;
    }
  }
  if (c.task === undefined && c.s.bootstrapped) {
    c.task = '';
    try {
      const t = await get(runPath(run.id, '/artifacts/task'));
      c.task = (t.content && t.content.task) || '';
    } catch { /* not bootstrapped: no task */ }
  }
  return c;
}
