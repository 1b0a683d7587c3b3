// One flow: its workflow, state, runs by state, head, findings and log.
import { get } from './api.js';
import { h, clear, ago, shortHash } from './dom.js';

export function flowPage(ctx, id) {
  const { main } = ctx;
  let timer = null;
  let stopped = false;
  let lastSig = '';
  const body = h('div', { testid: 'flow' });
  main.appendChild(h('p', { class: 'crumbs' }, h('a', { href: '#/', testid: 'back' }, '← Runs and flows')));
  main.appendChild(h('h1', null, 'Flow ', h('span', { class: 'mono' }, id)));
  main.appendChild(body);

  function render(f) {
    clear(body);
    const wf = f.workflow || {};
    const dl = h('dl', { class: 'kv' });
    const add = (k, v) => { if (v === undefined || v === '' || v === null) return; dl.appendChild(h('dt', null, k)); dl.appendChild(h('dd', null, v)); };
    add('Project', f.project);
    add('Workflow', wf.name + (wf.description ? ' — ' + wf.description : ''));
    add('State', h('span', { class: 'state', testid: 'flow-state' }, f.state + (f.ended ? ' (ended ' + ago(f.ended) + ')' : '')));
    add('Round', String(f.round || 0) + (wf.max_rounds ? ' of ' + wf.max_rounds : ''));
    add('Head', f.head ? shortHash(f.head) : '');
    add('Updated', ago(f.updated_at));
    body.appendChild(h('section', { class: 'card' }, h('h2', null, 'Flow'), dl,
      h('h3', null, 'Task'), h('pre', { class: 'wrap', testid: 'flow-task' }, f.task || '')));
    const runs = f.runs || {};
    body.appendChild(h('section', { class: 'card', testid: 'flow-runs' }, h('h2', null, 'Runs by state'),
      h('ul', { class: 'plain' }, (wf.states || []).map((s) => h('li', { class: s.name === f.state ? 'current' : '' },
        h('strong', null, s.name), s.agent ? ' (' + s.agent + (s.reviews ? ', reviews ' + s.reviews : '') + ')' : '', s.end ? ' · end' : '', ': ',
        runs[s.name] ? h('a', { href: '#/runs/' + encodeURIComponent(runs[s.name]), testid: 'flow-run-' + s.name }, runs[s.name]) : '—',
        s.transitions && s.transitions.length ? h('div', { class: 'muted' }, 'menu: ' + s.transitions.map((t) => t.event + ' → ' + t.to).join(', ')) : null)))));
    body.appendChild(h('section', { class: 'card', testid: 'findings' }, h('h2', null, 'Latest findings'),
      f.findings && f.findings.length ? h('ul', null, f.findings.map((x) => h('li', { testid: 'finding' }, x))) : h('p', { class: 'muted' }, 'None.')));
    body.appendChild(h('section', { class: 'card' }, h('h2', null, 'Log'),
      h('ol', { class: 'timeline', testid: 'flow-log' }, (f.events || []).map((e) => {
        const d = e.data || {};
        return h('li', { testid: 'flow-event-' + e.seq },
          h('span', { class: 'seq' }, '#' + e.seq), h('time', { datetime: e.at, title: e.at }, e.at ? new Date(e.at).toLocaleTimeString() : ''),
          h('span', { class: 'etype' }, e.type),
          h('span', { class: 'esum' }, [d.event, d.from && d.to ? d.from + ' → ' + d.to : d.to || d.state, d.run ? 'run ' + d.run : '', d.note, d.reason].filter(Boolean).join(' · ')),
          d.findings && d.findings.length ? h('ul', null, d.findings.map((x) => h('li', null, x))) : null);
      }))));
  }

  async function load() {
    try {
      const f = await get('/v1/flows/' + encodeURIComponent(id));
      const sig = f.version + ' ' + f.updated_at + ' ' + (f.events || []).length;
      if (!stopped && sig !== lastSig) { lastSig = sig; render(f); }
    } catch (e) {
      clear(body).appendChild(h('p', { class: 'error', role: 'alert' }, 'Flow ' + id + ': ' + (e.message || e)));
    }
    if (!stopped) timer = setTimeout(load, 4000);
  }
  load();
  ctx.onStop(() => { stopped = true; clearTimeout(timer); });
}
