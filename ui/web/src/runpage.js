// One run: what it was asked and allowed, what its sandbox enforced, its live
// timeline, its change set, and the decisions on it. Approve is bound to the
// hash of the change set shown on this page.
import { get, post, text, runPath, eventsAfter, follow, ApiError } from './api.js';
import { h, clear, ago, bytes, shortHash, files } from './dom.js';
import { emptySummary, fold, decision, verifyStatus } from './summary.js';
import { ChangeSetView } from './diffview.js';

function errText(e) {
  if (e instanceof ApiError) return e.code + ': ' + e.message;
  return String((e && e.message) || e);
}

function kv(pairs) {
  const dl = h('dl', { class: 'kv' });
  for (const [k, v] of pairs) {
    if (v === undefined || v === null || v === '' || (Array.isArray(v) && v.length === 0)) continue;
    dl.appendChild(h('dt', null, k));
    dl.appendChild(h('dd', null, v instanceof Node ? v : Array.isArray(v) ? v.join(', ') : String(v)));
  }
  return dl;
}

function ns(n) { return n ? (n / 1e9).toFixed(n % 1e9 ? 1 : 0) + ' s' : ''; }

function eventSummary(ev) {
  const d = ev.data || {};
  switch (ev.type) {
    case 'exec': return (d.argv || []).join(' ').slice(0, 200) + (d.exit_code !== undefined ? ' → exit ' + d.exit_code : '');
    case 'tool.call': return (d.tool || d.name || '') + (d.path ? ' ' + d.path : '') + (d.error ? ' (error: ' + d.error + ')' : '');
    case 'workspace.state': return d.from + ' → ' + d.to + (d.reason ? ' (' + d.reason + ')' : '');
    case 'changeset.submitted': return shortHash(d.hash) + ', ' + d.entries + ' entries';
    case 'changeset.approved': return shortHash(d.hash) + ' by ' + (d.by || '?');
    case 'changeset.applied': return (d.branch || d.worktree || d.to || '') + (d.commit ? ' @ ' + String(d.commit).slice(0, 12) : '');
    case 'changeset.apply_failed': return (d.code ? d.code + ': ' : '') + (d.reason || (d.mismatch ? 'rolled back' : ''));
    case 'verify.finished': return (d.passed ? 'passed' : 'failed') + (d.stale ? ' (stale)' : '') + ' ' + shortHash(d.hash);
    case 'access.requested': case 'access.granted': case 'access.denied':
      return [d.kind, d.tool, (d.command || []).join(' '), d.path, d.domain, d.limit, d.value].filter(Boolean).join(' ') + (d.reason ? ' — ' + d.reason : '');
    case 'job.started': case 'job.finished': return [d.id || d.job, d.kind, d.state, d.exit_code !== undefined ? 'exit ' + d.exit_code : ''].filter((x) => x !== undefined && x !== '').join(' ');
    default: {
      const s = JSON.stringify(d);
      return s === '{}' ? '' : s.length > 160 ? s.slice(0, 160) + '…' : s;
    }
  }
}

// Side by side needs room: a narrow window shows unified diffs unless the
// reviewer chose otherwise.
const narrow = window.matchMedia('(max-width: 900px)');

export function runPage(ctx, id) {
  const { main } = ctx;
  const st = {
    run: null, s: emptySummary(), cs: null, shownHash: '', submitted: false, stale: null, view: null,
    mode: localStorage.getItem('paddock.diffmode') || (narrow.matches ? 'line-by-line' : 'side-by-side'),
    busy: false, stopped: false, stops: [],
  };

  const title = h('h1', { testid: 'run-title' }, 'Run ', h('span', { class: 'mono' }, id));
  const meta = h('div', { class: 'meta', testid: 'run-meta' });
  const stale = h('div', { class: 'notice stale', testid: 'stale', role: 'alert', hidden: true });
  const liveState = h('span', { class: 'livestate', testid: 'stream-state' });

  // Decisions.
  const hashEl = h('code', { class: 'hash', testid: 'hash' });
  const approveBtn = h('button', { type: 'button', class: 'btn primary', testid: 'approve', 'aria-label': 'Approve the change set shown, by its hash', disabled: true }, 'Approve');
  const rejectBtn = h('button', { type: 'button', class: 'btn danger', testid: 'reject', 'aria-label': 'Reject the run', disabled: true }, 'Reject');
  const branchInput = h('input', { type: 'text', testid: 'branch-name', id: 'branch-name', placeholder: 'paddock/' + id, 'aria-label': 'Branch to apply to', autocomplete: 'off', spellcheck: 'false' });
  const applyBranchBtn = h('button', { type: 'button', class: 'btn', testid: 'apply-branch', 'aria-label': 'Apply the approved change set to the branch', disabled: true }, 'Apply to branch');
  const threeWay = h('input', { type: 'checkbox', testid: 'three-way', id: 'three-way' });
  const applyWtBtn = h('button', { type: 'button', class: 'btn', testid: 'apply-worktree', 'aria-label': 'Apply the approved change set into the working tree', disabled: true }, 'Apply to working tree');
  const undoBtn = h('button', { type: 'button', class: 'btn', testid: 'undo', 'aria-label': 'Undo the apply into the working tree', disabled: true }, 'Undo apply');
  const result = h('div', { class: 'result', testid: 'result', role: 'status', 'aria-live': 'polite' });
  const decisionEl = h('span', { class: 'state', testid: 'decision' });
  const actions = h('section', { class: 'actions card', testid: 'actions', 'aria-labelledby': 'actions-h' },
    h('h2', { id: 'actions-h' }, 'Decision'),
    h('p', null, 'Change set ', hashEl, ' · ', decisionEl),
    h('div', { class: 'row' }, approveBtn, rejectBtn),
    h('div', { class: 'row' }, h('label', { for: 'branch-name', class: 'sr' }, 'Branch'), branchInput, applyBranchBtn),
    h('div', { class: 'row' }, applyWtBtn, h('label', { class: 'check', for: 'three-way' }, threeWay, ' three-way merge'), undoBtn),
    result);

  const csSection = h('section', { class: 'changeset', testid: 'changeset', 'aria-labelledby': 'cs-h' });
  const details = h('div', { class: 'details' });
  const taskBox = h('section', { class: 'card', testid: 'task', 'aria-labelledby': 'task-h' }, h('h2', { id: 'task-h' }, 'Task'));
  const agentBox = h('section', { class: 'card', testid: 'agent', 'aria-labelledby': 'agent-h' }, h('h2', { id: 'agent-h' }, 'Agent and access'));
  const enfBox = h('section', { class: 'card', testid: 'enforcement', 'aria-labelledby': 'enf-h' }, h('h2', { id: 'enf-h' }, 'Enforced by the sandbox'));
  const verifyBox = h('section', { class: 'card', testid: 'verify', 'aria-labelledby': 'verify-h' }, h('h2', { id: 'verify-h' }, 'Verification'));
  const reqBox = h('section', { class: 'card', testid: 'requests', 'aria-labelledby': 'req-h' }, h('h2', { id: 'req-h' }, 'Access requests'));
  const reviewBox = h('section', { class: 'card', testid: 'review', 'aria-labelledby': 'rev-h', hidden: true }, h('h2', { id: 'rev-h' }, 'Review'));
  const timeline = h('ol', { class: 'timeline', testid: 'timeline', 'aria-label': 'Event timeline' });
  const tlBox = h('section', { class: 'card', 'aria-labelledby': 'tl-h' }, h('h2', { id: 'tl-h' }, 'Timeline ', liveState), timeline);

  main.appendChild(h('p', { class: 'crumbs' }, h('a', { href: '#/', testid: 'back' }, '← Runs and flows')));
  main.appendChild(title);
  main.appendChild(meta);
  main.appendChild(stale);
  main.appendChild(h('div', { class: 'run-top' }, actions, reviewBox));
  main.appendChild(csSection);
  main.appendChild(details);
  append4(details, [taskBox, agentBox, enfBox, verifyBox, reqBox, tlBox]);
  function append4(el, xs) { for (const x of xs) el.appendChild(x); }

  function say(msg, ok) {
    clear(result);
    result.className = 'result ' + (ok ? 'ok' : 'error');
    result.appendChild(h('span', null, msg));
  }

  function updateActions() {
    const s = st.s;
    const run = st.run;
    const sub = s.sub;
    const review = run && run.review_of;
    const wsState = run && run.workspace ? run.workspace.state : '';
    const gone = wsState === 'rejected' || wsState === 'cleaned' || wsState === 'cleanup_pending' || s.rejected;
    hashEl.textContent = st.shownHash ? st.shownHash : (st.cs ? 'not submitted' : '—');
    hashEl.title = st.shownHash || '';
    decisionEl.textContent = run ? decision(run, s) : '';
    const current = !!(st.submitted && sub && sub.hash === st.shownHash && !st.stale);
    approveBtn.disabled = st.busy || review || !current || !!sub.approved || !!sub.applied || gone;
    applyBranchBtn.disabled = st.busy || review || !current || !sub.approved || !!sub.applied || gone;
    applyWtBtn.disabled = applyBranchBtn.disabled;
    undoBtn.disabled = st.busy || review || !(sub && sub.applied && sub.applied.worktree);
    rejectBtn.disabled = st.busy || review || gone || !!(sub && sub.applied);
    if (review) approveBtn.title = 'A review run is read only: it is never approved or applied';
    else if (st.stale) approveBtn.title = 'A newer submission exists: reload to review it';
    else if (!st.submitted) approveBtn.title = 'Nothing submitted yet';
    else approveBtn.title = 'Approve ' + st.shownHash;
  }

  function showStale(hash) {
    st.stale = hash;
    clear(stale);
    stale.appendChild(h('strong', null, 'Newer submission. '));
    stale.appendChild(h('span', null, st.shownHash
      ? 'The change set was submitted again (' + shortHash(hash) + ') after this page showed ' + shortHash(st.shownHash) +
        '. What is shown here can no longer be approved: reload to review the new one. '
      : 'The run submitted its change set (' + shortHash(hash) + ') after this page showed its workspace. Reload to review what was submitted. '));
    stale.appendChild(h('button', { type: 'button', class: 'btn', testid: 'reload', 'aria-label': 'Reload the run to review the newer submission', on: { click: () => reload() } }, 'Reload'));
    stale.hidden = false;
    updateActions();
  }

  async function act(btn, what, fn) {
    st.busy = true;
    updateActions();
    say(what + '…', true);
    try {
      const msg = await fn();
      say(msg, true);
    } catch (e) {
      say(what + ' failed: ' + errText(e), false);
      if (e instanceof ApiError && e.code === 'conflict') checkNewer();
    } finally {
      st.busy = false;
      try {
        st.run = await get(runPath(id));
        renderMeta();
      } catch { /* the stream keeps the rest current */ }
      updateActions();
    }
  }

  async function checkNewer() {
    try {
      const evs = await eventsAfter(id, st.s.seq);
      for (const ev of evs) onEvent(ev);
    } catch { /* the stream will tell */ }
  }

  approveBtn.addEventListener('click', () => act(approveBtn, 'Approve', async () => {
    const sub = await post(runPath(id, '/approve'), { hash: st.shownHash });
    return 'Approved ' + sub.hash + (sub.approved_by ? ' (by ' + sub.approved_by + ')' : '') + '.';
  }));
  let rejectArmed = null;
  rejectBtn.addEventListener('click', () => {
    if (!rejectArmed) {
      rejectBtn.textContent = 'Confirm reject';
      rejectBtn.setAttribute('aria-label', 'Confirm: reject the run and discard its workspace');
      rejectArmed = setTimeout(() => { rejectArmed = null; rejectBtn.textContent = 'Reject'; rejectBtn.setAttribute('aria-label', 'Reject the run'); }, 6000);
      return;
    }
    clearTimeout(rejectArmed);
    rejectArmed = null;
    rejectBtn.textContent = 'Reject';
    act(rejectBtn, 'Reject', async () => {
      const run = await post(runPath(id, '/reject'));
      return 'Rejected: the workspace is ' + (run.workspace ? run.workspace.state : 'gone') + '.';
    });
  });
  applyBranchBtn.addEventListener('click', () => act(applyBranchBtn, 'Apply', async () => {
    const body = { to: 'branch' };
    if (branchInput.value.trim()) body.branch = branchInput.value.trim();
    const sub = await post(runPath(id, '/apply'), body);
    return 'Applied to ' + (sub.applied_to || 'the branch') + '.';
  }));
  applyWtBtn.addEventListener('click', () => act(applyWtBtn, 'Apply', async () => {
    const body = { to: 'worktree' };
    if (threeWay.checked) body.three_way = true;
    const sub = await post(runPath(id, '/apply'), body);
    return 'Applied into the working tree' + (sub.applied_to ? ' (' + sub.applied_to + ')' : '') + '.';
  }));
  undoBtn.addEventListener('click', () => act(undoBtn, 'Undo', async () => {
    await post(runPath(id, '/undo'));
    return 'Undone: the working tree is back as it was before the apply.';
  }));

  function renderMeta() {
    const r = st.run;
    if (!r) return;
    clear(meta);
    const ws = r.workspace || {};
    meta.appendChild(kv([
      ['Project', r.project],
      ['Agent', r.agent ? r.agent.name : ''],
      ['Access', r.access],
      ['Workspace', [ws.kind, ws.state].filter(Boolean).join(', ')],
      ['Base', ws.base_revision ? (ws.base_ref ? ws.base_ref + ' ' : '') + String(ws.base_revision).slice(0, 12) : ''],
      ['Created', r.created_at ? ago(r.created_at) + ' (' + r.created_at + ')' : ''],
      ['Removed', r.removed_at || ''],
    ]));
  }

  function renderAgent(caps) {
    const r = st.run;
    const a = (r && r.agent) || {};
    const rules = a.tool ? Object.entries(a.tool).map(([name, rule]) =>
      h('li', null, h('code', null, name), ': ',
        ['allow', 'deny', 'ask'].filter((k) => rule[k] && rule[k].length).map((k) => k + ' ' + rule[k].join(', ')).join('; '))) : [];
    const lim = a.limits || {};
    clear(agentBox).appendChild(h('h2', { id: 'agent-h' }, 'Agent and access'));
    agentBox.appendChild(kv([
      ['Definition', (a.name || '') + (r && r.agent_hash ? ' ' + shortHash(r.agent_hash) : '')],
      ['Description', a.description],
      ['Workspace', a.workspace || (r && r.access)],
      ['Tools', a.tools && a.tools.length ? a.tools : 'the built-in set of its workspace mode'],
      ['Tool rules', rules.length ? h('ul', { class: 'plain' }, rules) : ''],
      ['Network', a.net],
      ['Environment', a.env],
      ['Secrets', (r && r.secrets) || a.secrets],
      ['Limits', Object.entries(lim).map(([k, v]) => k + ' ' + v)],
      ['Command', a.command ? h('code', null, a.command.join(' ')) : ''],
      ['Now offered', caps && caps.tools ? caps.tools.map((t) => t.name) : ''],
      ['Checks', caps && caps.checks],
      ['Grants', caps && caps.grants ? caps.grants.map((g) => g.kind + ' ' + (g.tool || g.path || g.domain || (g.command || []).join(' ') || g.limit || '')) : ''],
    ]));
    if (a.instructions) agentBox.appendChild(h('details', null, h('summary', null, 'Instructions'), h('pre', { class: 'wrap' }, a.instructions)));
  }

  function renderEnforcement(e) {
    clear(enfBox).appendChild(h('h2', { id: 'enf-h' }, 'Enforced by the sandbox'));
    if (!e) { enfBox.appendChild(h('p', { class: 'muted' }, 'No command has run yet: nothing recorded.')); return; }
    const l = e.limits || {};
    enfBox.appendChild(kv([
      ['Degraded', e.degraded && e.degraded.length ? h('span', { class: 'label risk' }, e.degraded.join('; ')) : ''],
      ['Namespaces', e.namespaces],
      ['User id', e.uid],
      ['Landlock ABI', e.landlock_abi],
      ['seccomp', e.seccomp === undefined ? '' : e.seccomp ? 'yes' : 'no'],
      ['no_new_privs', e.no_new_privs === undefined ? '' : e.no_new_privs ? 'yes' : 'no'],
      ['Capabilities', e.capabilities],
      ['Network', e.net + (e.allow && e.allow.length ? ' (' + e.allow.join(', ') + ')' : '')],
      ['Private addresses', e.allow_addrs],
      ['Read only', e.read_only ? 'yes' + (e.scratch_layer ? ' (through a scratch layer)' : '') : 'no'],
      ['Read-only paths', e.read_only_paths],
      ['Unprotected', e.unprotected],
      ['Limits', [l.wall && 'wall ' + ns(l.wall), l.cpu && 'cpu ' + ns(l.cpu), l.procs && 'procs ' + l.procs + (e.procs_scope ? ' (' + e.procs_scope + ')' : ''),
        l.memory && 'memory ' + bytes(l.memory), l.file_size && 'file ' + bytes(l.file_size), l.output && 'output ' + bytes(l.output), l.tmp && 'tmp ' + bytes(l.tmp)].filter(Boolean)],
      ['Disk', e.disk],
      ['Mode', e.mode ? e.mode + (e.mode_reason ? ' (' + e.mode_reason + ')' : '') : ''],
    ]));
  }

  function renderVerify() {
    clear(verifyBox).appendChild(h('h2', { id: 'verify-h' }, 'Verification'));
    const v = st.s.verify;
    if (!v) { verifyBox.appendChild(h('p', { class: 'muted' }, 'Not verified.')); return; }
    verifyBox.appendChild(h('p', null, h('span', { class: 'verify v-' + verifyStatus(st.s).split(' ')[0], testid: 'verify-status' }, verifyStatus(st.s)),
      ' · ', shortHash(v.hash), ' · ', ago(v.at)));
    if (Array.isArray(v.checks)) {
      verifyBox.appendChild(h('ul', { class: 'plain' }, v.checks.map((c) => typeof c === 'object' && c
        ? h('li', null, (c.passed ? '✓ ' : c.skipped ? '– ' : '✗ ') + (c.name || '') + (c.skipped ? ' (skipped: ' + c.skipped + ')' : '') +
          (c.exit_code !== undefined && !c.passed ? ' (exit ' + c.exit_code + ')' : ''))
        : h('li', null, String(c)))));
    }
  }

  async function renderRequests() {
    let reqs;
    try { reqs = await get(runPath(id, '/requests')); } catch (e) {
      clear(reqBox).appendChild(h('h2', { id: 'req-h' }, 'Access requests'));
      reqBox.appendChild(h('p', { class: 'muted' }, errText(e)));
      return;
    }
    clear(reqBox).appendChild(h('h2', { id: 'req-h' }, 'Access requests'));
    if (!reqs.length) { reqBox.appendChild(h('p', { class: 'muted' }, 'None.')); return; }
    const ul = h('ul', { class: 'requests' });
    for (const q of reqs) {
      const what = [q.tool, (q.command || []).join(' '), q.path, q.domain, q.limit && q.limit + (q.value ? ' = ' + q.value : '')].filter(Boolean).join(' ');
      const li = h('li', { testid: 'request-' + q.id, class: 'req-' + q.state },
        h('span', { class: 'label' }, q.kind), ' ', h('code', null, what), ' — ', q.reason || '',
        ' ', h('span', { class: 'state' }, q.state + (q.decided_by ? ' by ' + q.decided_by : '') + (q.note ? ' (' + q.note + ')' : '')));
      if (q.state === 'pending') {
        const note = h('input', { type: 'text', testid: 'note-' + q.id, placeholder: 'note (optional)', 'aria-label': 'Note for request ' + q.id });
        const decide = (verb) => async () => {
          try {
            const body = note.value.trim() ? { note: note.value.trim() } : {};
            await post(runPath(id, '/requests/' + encodeURIComponent(q.id) + '/' + verb), body);
            say((verb === 'grant' ? 'Granted ' : 'Denied ') + q.id + '.', true);
          } catch (e) { say(verb + ' failed: ' + errText(e), false); }
          renderRequests();
        };
        li.appendChild(h('div', { class: 'row' }, note,
          h('button', { type: 'button', class: 'btn primary', testid: 'grant-' + q.id, 'aria-label': 'Grant request ' + q.id, on: { click: decide('grant') } }, 'Grant'),
          h('button', { type: 'button', class: 'btn danger', testid: 'deny-' + q.id, 'aria-label': 'Deny request ' + q.id, on: { click: decide('deny') } }, 'Deny')));
      }
      ul.appendChild(li);
    }
    reqBox.appendChild(ul);
  }

  async function renderReview() {
    const r = st.run;
    clear(reviewBox).appendChild(h('h2', { id: 'rev-h' }, 'Review'));
    let any = false;
    if (r.review_of) {
      any = true;
      const ro = r.review_of;
      reviewBox.appendChild(h('div', { testid: 'review-of' }, kv([
        ['Reviews run', h('a', { href: '#/runs/' + encodeURIComponent(ro.run) }, ro.run)],
        ['Change set', ro.hash],
        ['Commit', ro.commit],
        ['Left out', ro.skipped],
        ['Flow', ro.flow ? h('a', { href: '#/flows/' + encodeURIComponent(ro.flow) }, ro.flow) : ''],
      ])));
      if (ro.flow) {
        try {
          const f = await get('/v1/flows/' + encodeURIComponent(ro.flow));
          const mine = (f.events || []).filter((e) => e.type === 'flow.event' && e.data && e.data.run === id);
          const list = h('ul', { class: 'findings', testid: 'findings' });
          for (const e of mine) {
            const d = e.data;
            list.appendChild(h('li', null, h('strong', null, d.event || ''), d.note ? ' — ' + d.note : '',
              (d.findings && d.findings.length) ? h('ul', null, d.findings.map((x) => h('li', { testid: 'finding' }, x))) : null));
          }
          if (!mine.length && f.findings && f.findings.length) {
            for (const x of f.findings) list.appendChild(h('li', { testid: 'finding' }, x));
          }
          reviewBox.appendChild(h('h3', null, 'Findings'));
          reviewBox.appendChild(mine.length || (f.findings && f.findings.length) ? list : h('p', { class: 'muted', testid: 'findings' }, 'No findings yet.'));
        } catch (e) {
          reviewBox.appendChild(h('p', { class: 'muted' }, 'Flow: ' + errText(e)));
        }
      }
    }
    try {
      const all = await get('/v1/runs');
      const reviews = (all || []).filter((x) => x.review_of && x.review_of.run === id);
      if (reviews.length) {
        any = true;
        reviewBox.appendChild(h('h3', null, 'Reviews of this run'));
        reviewBox.appendChild(h('ul', { class: 'plain', testid: 'reviews' }, reviews.map((x) => h('li', null,
          h('a', { href: '#/runs/' + encodeURIComponent(x.id) }, x.id), ' of ', shortHash(x.review_of.hash),
          x.review_of.hash !== st.shownHash ? ' (an older submission)' : ''))));
      }
    } catch { /* not shown */ }
    reviewBox.hidden = !any;
  }

  function addEvent(ev) {
    const sum = eventSummary(ev);
    const li = h('li', { testid: 'event-' + ev.seq, class: 'ev ev-' + String(ev.type).replace(/[^a-z0-9]+/gi, '-') },
      h('span', { class: 'seq' }, '#' + ev.seq),
      h('time', { datetime: ev.time, title: ev.time }, ev.time ? new Date(ev.time).toLocaleTimeString() : ''),
      h('span', { class: 'etype' }, ev.type),
      h('span', { class: 'esum' }, sum));
    if (ev.data !== undefined) {
      li.appendChild(h('details', null, h('summary', { 'aria-label': 'Data of event ' + ev.seq }, 'data'),
        h('pre', { class: 'wrap' }, JSON.stringify(ev.data, null, 2))));
    }
    timeline.appendChild(li);
    while (timeline.childElementCount > 2000) timeline.removeChild(timeline.firstChild);
  }

  function onEvent(ev) {
    if (ev.seq <= st.s.seq) return;
    fold(st.s, ev);
    addEvent(ev);
    if (ev.type === 'changeset.submitted' && ev.data && ev.data.hash !== st.shownHash) showStale(ev.data.hash);
    if (ev.type === 'sandbox.enforced') renderEnforcement(st.s.enforcement);
    if (ev.type === 'verify.finished') renderVerify();
    if (ev.type.startsWith('access.')) renderRequests();
    if (ev.type === 'workspace.state' || ev.type.startsWith('changeset.')) {
      get(runPath(id)).then((r) => { st.run = r; renderMeta(); updateActions(); }).catch(() => {});
    }
    updateActions();
  }

  async function loadChangeSet() {
    clear(csSection);
    csSection.appendChild(h('h2', { id: 'cs-h' }, 'Change set'));
    let cs = null;
    let submitted = false;
    if (st.s.sub) {
      try {
        const a = await get(runPath(id, '/artifacts/changeset'));
        cs = a.content;
        submitted = true;
      } catch (e) {
        csSection.appendChild(h('p', { class: 'error' }, 'The submitted change set: ' + errText(e)));
      }
    }
    const ws = st.run.workspace ? st.run.workspace.state : '';
    if (!cs && st.run.review_of) {
      csSection.appendChild(h('p', { class: 'muted', testid: 'no-changeset' }, 'A review run changes nothing: it reviews ',
        h('a', { href: '#/runs/' + encodeURIComponent(st.run.review_of.run) }, 'run ' + st.run.review_of.run), '\'s change set ',
        shortHash(st.run.review_of.hash), '.'));
      updateActions();
      return;
    }
    if (!cs && !['ready', 'active', 'checkpointed', 'retained'].includes(ws)) {
      csSection.appendChild(h('p', { class: 'muted', testid: 'no-changeset' }, 'No change set: nothing was submitted and the workspace is ' + (ws || 'gone') + '.'));
      updateActions();
      return;
    }
    if (!cs) {
      try {
        cs = await get(runPath(id, '/changeset'));
        csSection.appendChild(h('p', { class: 'notice', testid: 'not-submitted' },
          'Not submitted: this is the workspace as it is now. Nothing can be approved until the run submits.'));
      } catch (e) {
        csSection.appendChild(h('p', { class: 'muted', testid: 'no-changeset' }, 'No change set: ' + errText(e)));
        st.cs = null;
        updateActions();
        return;
      }
    }
    let diff = cs.diff || '';
    if (cs.diff_omitted) {
      csSection.appendChild(h('p', { class: 'muted' }, 'The diff (' + bytes(cs.diff_size) + ') is streamed…'));
      try {
        const q = submitted ? '?hash=' + encodeURIComponent(cs.hash) : '';
        const r = await text(runPath(id, '/changeset/diff' + q));
        diff = r.body;
        csSection.lastChild.remove();
      } catch (e) {
        csSection.lastChild.textContent = 'The diff could not be read: ' + errText(e);
      }
    }
    if (st.stopped) return;
    st.cs = cs;
    st.submitted = submitted;
    st.shownHash = submitted ? cs.hash : '';
    const entries = cs.entries || [];
    const risks = new Set();
    for (const e of entries) for (const r of e.risks || []) risks.add(r);
    const unified = h('input', { type: 'radio', name: 'mode', id: 'mode-u', testid: 'view-unified', checked: st.mode === 'line-by-line' });
    const split = h('input', { type: 'radio', name: 'mode', id: 'mode-s', testid: 'view-split', checked: st.mode === 'side-by-side' });
    const setMode = (m) => { st.mode = m; localStorage.setItem('paddock.diffmode', m); if (st.view) st.view.setMode(m); };
    unified.addEventListener('change', () => setMode('line-by-line'));
    split.addEventListener('change', () => setMode('side-by-side'));
    csSection.appendChild(h('div', { class: 'cs-head' },
      h('p', { testid: 'cs-summary' }, files(entries.length) + ' · ' + bytes(cs.diff_size) + ' of diff · ',
        h('code', { title: cs.hash }, shortHash(cs.hash)), risks.size ? ' · ' : '',
        [...risks].sort().map((r) => h('span', { class: 'label risk' }, r))),
      h('fieldset', { class: 'modes' }, h('legend', { class: 'sr' }, 'Diff view'),
        h('label', { for: 'mode-u' }, unified, ' Unified'),
        h('label', { for: 'mode-s' }, split, ' Side by side')),
      h('p', { class: 'keys muted' }, 'Keys: j/k or n/p file, ] / [ hunk')));
    if (cs.ignored && cs.ignored.length) {
      csSection.appendChild(h('details', { class: 'muted' }, h('summary', null, cs.ignored.length + ' ignored paths (not in the change set)'),
        h('ul', { class: 'plain' }, cs.ignored.map((p) => h('li', null, p)))));
    }
    st.view = new ChangeSetView(cs, diff, { mode: st.mode });
    csSection.appendChild(h('div', { class: 'cs-body' }, st.view.tree, st.view.list));
    csSection.appendChild(blameBox);
    loadBlame(cs.hash, submitted);
    updateActions();
  }

  // Where each hunk came from (GET …/changeset/blame), and approving some
  // of them: the change set they make, by its own hash.
  const blameBox = h('section', { class: 'card blame', testid: 'blame', 'aria-labelledby': 'blame-h' });
  async function loadBlame(hash, submitted) {
    clear(blameBox).appendChild(h('h2', { id: 'blame-h' }, 'Where each hunk came from'));
    let b;
    try {
      b = await get(runPath(id, '/changeset/blame' + (submitted ? '?hash=' + encodeURIComponent(hash) : '')));
    } catch (e) {
      blameBox.appendChild(h('p', { class: 'muted' }, 'Not known: ' + errText(e)));
      return;
    }
    if (st.stopped || hash !== (st.cs && st.cs.hash)) return;
    const sources = b.sources || {};
    const origin = (seq) => {
      const src = sources[seq];
      if (!src) return '#' + seq;
      if (!seq) return src.what;
      return '#' + seq + ' ' + new Date(src.time).toLocaleTimeString() + ' ' + src.what;
    };
    const sub = st.s.sub;
    const choosable = submitted && sub && sub.hash === hash && !sub.approved && !sub.applied && !(st.run && st.run.review_of);
    const boxes = [];
    const list = h('ol', { class: 'plain hunks' });
    for (const hb of b.hunks || []) {
      const box = choosable ? h('input', { type: 'checkbox', id: 'hunk-' + hb.n, testid: 'hunk-' + hb.n, 'aria-label': 'Choose hunk ' + hb.n, data: { n: String(hb.n) } }) : null;
      if (box) boxes.push(box);
      list.appendChild(h('li', { testid: 'blame-hunk', data: { n: String(hb.n) } },
        box, h('label', box ? { for: 'hunk-' + hb.n } : null, h('strong', null, 'hunk ' + hb.n), ' · ', h('span', { class: 'mono' }, hb.path),
          hb.header ? h('span', { class: 'mono muted' }, ' ' + hb.header) : null),
        h('ul', { class: 'plain origins' }, (hb.seqs || []).map((q) => h('li', { testid: 'blame-origin' }, '← ' + origin(q))))));
    }
    blameBox.appendChild(list);
    if (!choosable || boxes.length < 2) return;
    const btn = h('button', { type: 'button', class: 'btn', testid: 'approve-hunks', 'aria-label': 'Approve only the chosen hunks', disabled: true }, 'Approve the chosen hunks');
    for (const x of boxes) x.addEventListener('change', () => { btn.disabled = !boxes.some((y) => y.checked) || st.stale || st.busy; });
    btn.addEventListener('click', () => act(btn, 'Approve hunks', async () => {
      const hunks = boxes.filter((x) => x.checked).map((x) => Number(x.dataset.n));
      const s = await post(runPath(id, '/approve'), { hash: st.shownHash, hunks });
      return 'Approved hunks ' + hunks.join(', ') + ' of ' + shortHash(s.part_of) + ' as change set ' + s.hash + '; an apply writes only these.';
    }));
    blameBox.appendChild(h('div', { class: 'row' }, btn, h('span', { class: 'muted' }, ' The chosen hunks make a change set of their own, approved by its own hash.')));
  }

  async function load() {
    try {
      st.run = await get(runPath(id));
    } catch (e) {
      main.appendChild(h('p', { class: 'error', testid: 'run-error', role: 'alert' }, 'Run ' + id + ': ' + errText(e)));
      return;
    }
    renderMeta();
    renderAgent(null);
    let evs = [];
    try { evs = await eventsAfter(id, 0); } catch (e) { say('Events: ' + errText(e), false); }
    for (const ev of evs) { fold(st.s, ev); addEvent(ev); }
    renderEnforcement(st.s.enforcement);
    renderVerify();
    updateActions();
    await loadChangeSet();
    if (st.stopped) return;
    // Anything that came while the change set was read.
    st.stops.push(follow(id, st.s.seq, onEvent, (s) => { liveState.textContent = '(' + s + ')'; }));
    // A refresh besides the stream (which a buffering proxy can hold up):
    // the run's last seq, and the events it says were missed.
    const watch = setInterval(async () => {
      try {
        const r = await get(runPath(id));
        if (st.stopped) return;
        if ((r.last_seq || 0) > st.s.seq) for (const ev of await eventsAfter(id, st.s.seq)) onEvent(ev);
      } catch { /* the next tick tries again */ }
    }, 10000);
    st.stops.push(() => clearInterval(watch));
    if (!st.s.bootstrapped) taskBox.appendChild(h('p', { class: 'muted' }, 'No task: the run was made without one (not bootstrapped).'));
    else get(runPath(id, '/artifacts/task')).then((t) => {
      const c = t.content || {};
      taskBox.appendChild(h('pre', { class: 'wrap task-text', testid: 'task-text' }, c.task || ''));
      if (c.inputs && Object.keys(c.inputs).length) taskBox.appendChild(h('details', null, h('summary', null, 'Inputs'), h('pre', { class: 'wrap' }, JSON.stringify(c.inputs, null, 2))));
    }).catch((e) => taskBox.appendChild(h('p', { class: 'muted' }, e.code === 'not_bootstrapped' ? 'No task: the run was made without one.' : errText(e))));
    get(runPath(id, '/capabilities')).then((caps) => {
      renderAgent(caps);
      if (!st.s.enforcement && caps.enforcement) renderEnforcement(caps.enforcement);
    }).catch(() => {});
    renderRequests();
    renderReview();
  }

  function reload() {
    // The route again: everything read anew.
    window.dispatchEvent(new HashChangeEvent('hashchange'));
  }

  function onKey(e) {
    if (e.defaultPrevented || e.ctrlKey || e.metaKey || e.altKey) return;
    const t = e.target;
    if (t && (t.tagName === 'INPUT' || t.tagName === 'TEXTAREA' || t.tagName === 'SELECT' || t.isContentEditable)) return;
    if (!st.view) return;
    switch (e.key) {
      case 'j': case 'n': st.view.nextFile(1); break;
      case 'k': case 'p': st.view.nextFile(-1); break;
      case ']': st.view.nextHunk(1); break;
      case '[': st.view.nextHunk(-1); break;
      default: return;
    }
    e.preventDefault();
  }
  document.addEventListener('keydown', onKey);
  const onNarrow = () => {
    if (localStorage.getItem('paddock.diffmode')) return;
    const m = narrow.matches ? 'line-by-line' : 'side-by-side';
    if (m === st.mode) return;
    st.mode = m;
    const radio = main.querySelector(m === 'line-by-line' ? '[data-testid="view-unified"]' : '[data-testid="view-split"]');
    if (radio) radio.checked = true;
    if (st.view) st.view.setMode(m);
  };
  narrow.addEventListener('change', onNarrow);
  ctx.onStop(() => {
    st.stopped = true;
    document.removeEventListener('keydown', onKey);
    narrow.removeEventListener('change', onNarrow);
    for (const s of st.stops) s();
  });
  load();
}
