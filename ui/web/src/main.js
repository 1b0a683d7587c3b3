// paddock's review page: hash routes #/ (runs and flows), #/runs/ID,
// #/flows/ID. Logged in through `paddock ui`'s one-time URL; the session
// cookie goes with every request, the CSRF token with every change.
import { session, ApiError } from './api.js';
import { h, clear } from './dom.js';
import { listPage } from './list.js';
import { runPage } from './runpage.js';
import { flowPage } from './flowpage.js';

const main = document.getElementById('main');
let stop = null;

function route() {
  if (stop) { try { stop(); } catch { /* leaving the page anyway */ } stop = null; }
  clear(main);
  const hash = location.hash.replace(/^#/, '') || '/';
  let m;
  const ctx = { main, onStop: (fn) => { stop = fn; } };
  if ((m = hash.match(/^\/runs\/([^/]+)$/))) runPage(ctx, decodeURIComponent(m[1]));
  else if ((m = hash.match(/^\/flows\/([^/]+)$/))) flowPage(ctx, decodeURIComponent(m[1]));
  else listPage(ctx);
  main.focus({ preventScroll: true });
}

async function start() {
  try {
    await session();
  } catch (e) {
    clear(main);
    document.body.classList.add('logged-out');
    if (e instanceof ApiError && (e.status === 403 || e.status === 401)) {
      main.appendChild(h('p', { class: 'logged-out-msg', testid: 'logged-out', role: 'alert' },
        'Not logged in: run ', h('code', null, 'paddock ui'), ' in a terminal.'));
    } else {
      main.appendChild(h('p', { class: 'error', testid: 'session-error', role: 'alert' },
        'The daemon did not answer: ' + (e.message || e)));
    }
    return;
  }
  window.addEventListener('hashchange', route);
  route();
}

start();
