// Runs and flows: project, agent, state, age, change-set size, risk labels,
// verify status; filters and search; kept fresh by polling.
import { get } from './api.js';
import { h, clear, ago, bytes, files } from './dom.js';
import { summaryOf, decision, verifyStatus } from './summary.js';

const POLL_MS = 3000;
const filters = { q: '', project: '', state: '' };

export function listPage(ctx) {
  const { main } = ctx;
  let timer = null;
  let stopped = false;
  let runs = [];
  let flows = [];
  const sums = new Map();

  const search = h('input', {
    type: 'search', id: 'q', testid: 'search', placeholder: 'Search runs and flows', 'aria-label': 'Search runs and flows',
    value: filters.q, on: { input: () => { filters.q = search.value; draw(); } },
  });
  const projectSel = h('select', { testid: 'filter-project', 'aria-label': 'Filter by project', on: { change: () => { filters.project = projectSel.value; draw(); } } });
  const stateSel = h('select', { testid: 'filter-state', 'aria-label': 'Filter by state', on: { change: () => { filters.state = stateSel.value; draw(); } } },
    ['', 'awaiting review', 'approved', 'applied', 'rejected', 'active', 'ready', 'checkpointed', 'retained'].map((s) =>
      h('option', { value: s }, s || 'any state')));
  stateSel.value = filters.state;
  const status = h('p', { class: 'status', testid: 'list-status', 'aria-live': 'polite' });
  const runsBody = h('tbody', { testid: 'runs' });
  const flowsBody = h('tbody', { testid: 'flows' });

  main.appendChild(h('h1', null, 'Runs and flows'));
  main.appendChild(h('div', { class: 'filters', role: 'search' },
    h('label', { class: 'grow' }, h('span', { class: 'sr' }, 'Search'), search),
    h('label', null, h('span', { class: 'sr' }, 'Project'), projectSel),
    h('label', null, h('span', { class: 'sr' }, 'State'), stateSel)));
  main.appendChild(status);
  main.appendChild(h('section', { 'aria-labelledby': 'runs-h' },
    h('h2', { id: 'runs-h' }, 'Runs'),
    h('table', { class: 'grid runs-table' },
      h('thead', null, h('tr', null, ['Run', 'Project', 'Agent', 'State', 'Age', 'Change set', 'Risks', 'Verify'].map((c) => h('th', { scope: 'col' }, c)))),
      runsBody)));
  main.appendChild(h('section', { 'aria-labelledby': 'flows-h' },
    h('h2', { id: 'flows-h' }, 'Flows'),
    h('table', { class: 'grid flows-table' },
      h('thead', null, h('tr', null, ['Flow', 'Project', 'Workflow', 'State', 'Round', 'Updated', 'Task'].map((c) => h('th', { scope: 'col' }, c)))),
      flowsBody)));

  function matches(fields) {
    const q = filters.q.trim().toLowerCase();
    if (!q) return true;
    return fields.some((f) => String(f || '').toLowerCase().includes(q));
  }

  let lastSig = '';
  // draw redraws the tables when what they show changed, keeping the focus
  // on the same link.
  function draw() {
    const sig = JSON.stringify([filters, runs.map((r) => [r.id, r.last_seq, r.workspace && r.workspace.state, ago(r.created_at)]),
      flows.map((f) => [f.id, f.version, f.state, ago(f.updated_at)]), [...sums.entries()].map(([k, c]) => [k, c.s.seq, c.risks, c.task])]);
    if (sig === lastSig) return;
    lastSig = sig;
    const focused = document.activeElement && main.contains(document.activeElement) ? document.activeElement.dataset.testid : '';
    redraw();
    if (focused) {
      const again = main.querySelector('[data-testid="' + CSS.escape(focused) + '"]');
      if (again && again !== document.activeElement) again.focus({ preventScroll: true });
    }
  }

  function redraw() {
    const projects = [...new Set([...runs.map((r) => r.project), ...flows.map((f) => f.project)])].sort();
    if (projectSel.options.length !== projects.length + 1 || [...projectSel.options].slice(1).some((o, i) => o.value !== projects[i])) {
      clear(projectSel);
      projectSel.appendChild(h('option', { value: '' }, 'any project'));
      for (const p of projects) projectSel.appendChild(h('option', { value: p }, p));
      projectSel.value = filters.project;
    }
    clear(runsBody);
    let shown = 0;
    for (const r of runs) {
      const c = sums.get(r.id);
      const s = c ? c.s : null;
      const state = s ? decision(r, s) : (r.workspace ? r.workspace.state : '');
      const agent = r.agent ? r.agent.name : '';
      if (filters.project && r.project !== filters.project) continue;
      if (filters.state && state !== filters.state && !(r.workspace && r.workspace.state === filters.state)) continue;
      if (!matches([r.id, r.project, agent, state, c && c.task, r.review_of && r.review_of.run])) continue;
      shown++;
      const href = '#/runs/' + encodeURIComponent(r.id);
      const size = c && c.entries !== undefined && s && s.sub
        ? files(c.entries) + ', ' + bytes(c.diffSize)
        : (s && s.sub ? files(s.sub.entries) : '—');
      runsBody.appendChild(h('tr', { testid: 'run-row-' + r.id, class: 'state-' + state.replace(/\s+/g, '-') },
        h('td', { 'data-label': 'Run' }, h('a', { href, testid: 'run-link-' + r.id, 'aria-label': 'Open run ' + r.id }, r.id),
          r.review_of ? h('span', { class: 'label review' }, 'review of ' + r.review_of.run) : null,
          c && c.task ? h('div', { class: 'task-line' }, c.task.split('\n')[0].slice(0, 140)) : null),
        h('td', { 'data-label': 'Project' }, r.project),
        h('td', { 'data-label': 'Agent' }, agent + (r.access ? ' (' + r.access + ')' : '')),
        h('td', { 'data-label': 'State' }, h('span', { class: 'state', testid: 'state' }, state)),
        h('td', { 'data-label': 'Age', title: r.created_at }, ago(r.created_at)),
        h('td', { 'data-label': 'Change set' }, size),
        h('td', { 'data-label': 'Risks' }, ((c && c.risks) || []).map((x) => h('span', { class: 'label risk', testid: 'risk' }, x))),
        h('td', { 'data-label': 'Verify' }, s ? h('span', { class: 'verify v-' + (verifyStatus(s).split(' ')[0] || 'none') }, verifyStatus(s) || '—') : '')));
    }
    if (shown === 0) runsBody.appendChild(h('tr', null, h('td', { colspan: '8', class: 'empty' }, runs.length ? 'No run matches.' : 'No runs yet.')));
    clear(flowsBody);
    let fshown = 0;
    for (const f of flows) {
      if (filters.project && f.project !== filters.project) continue;
      if (filters.state && f.state !== filters.state) continue;
      if (!matches([f.id, f.project, f.task, f.state, f.workflow && f.workflow.name])) continue;
      fshown++;
      flowsBody.appendChild(h('tr', { testid: 'flow-row-' + f.id },
        h('td', { 'data-label': 'Flow' }, h('a', { href: '#/flows/' + encodeURIComponent(f.id), testid: 'flow-link-' + f.id, 'aria-label': 'Open flow ' + f.id }, f.id)),
        h('td', { 'data-label': 'Project' }, f.project),
        h('td', { 'data-label': 'Workflow' }, (f.workflow && f.workflow.name) || ''),
        h('td', { 'data-label': 'State' }, h('span', { class: 'state' }, f.state + (f.ended ? ' (ended)' : ''))),
        h('td', { 'data-label': 'Round' }, String(f.round || 0)),
        h('td', { 'data-label': 'Updated', title: f.updated_at }, ago(f.updated_at)),
        h('td', { 'data-label': 'Task' }, (f.task || '').split('\n')[0].slice(0, 140))));
    }
    if (fshown === 0) flowsBody.appendChild(h('tr', null, h('td', { colspan: '7', class: 'empty' }, flows.length ? 'No flow matches.' : 'No flows.')));
  }

  async function load() {
    try {
      const [r, f] = await Promise.all([get('/v1/runs'), get('/v1/flows').catch(() => [])]);
      if (stopped) return;
      runs = (r || []).slice().sort((a, b) => (b.created_at || '').localeCompare(a.created_at || ''));
      flows = (f || []).slice().sort((a, b) => (b.updated_at || '').localeCompare(a.updated_at || ''));
      status.textContent = runs.length + ' runs, ' + flows.length + ' flows; updated ' + new Date().toLocaleTimeString();
      status.classList.remove('error');
      draw();
      // Summaries, a few at a time; each is cached by the run's last seq.
      const queue = runs.slice();
      const worker = async () => {
        for (let run = queue.shift(); run && !stopped; run = queue.shift()) {
          try { sums.set(run.id, await summaryOf(run)); } catch { /* shown without its summary */ }
        }
      };
      await Promise.all([worker(), worker(), worker(), worker()]);
      if (!stopped) draw();
    } catch (e) {
      status.textContent = 'Could not load runs: ' + (e.message || e);
      status.classList.add('error');
    }
    if (!stopped) timer = setTimeout(load, POLL_MS);
  }
  draw();
  load();
  ctx.onStop(() => { stopped = true; clearTimeout(timer); });
}
