// The daemon's JSON API, through the session cookie. Every mutating request
// carries the session's CSRF token.

let csrf = '';

export class ApiError extends Error {
  constructor(status, code, message, details) {
    super(message || code || 'HTTP ' + status);
    this.status = status;
    this.code = code || 'internal';
    this.details = details;
  }
}

async function envelope(res) {
  let env;
  try {
    env = await res.json();
  } catch {
    throw new ApiError(res.status, res.status === 403 ? 'forbidden' : 'internal', 'HTTP ' + res.status + ' without a JSON answer');
  }
  if (!env || env.ok !== true) {
    const e = (env && env.error) || {};
    throw new ApiError(res.status, e.code, e.message, e.details);
  }
  return env.data;
}

// session asks who we are: the CSRF token when logged in; a 403 otherwise.
export async function session() {
  const res = await fetch('/ui/session', { credentials: 'same-origin', cache: 'no-store' });
  const data = await envelope(res);
  csrf = (data && data.csrf) || '';
  return data;
}

export async function api(method, path, body, signal) {
  const opts = { method, credentials: 'same-origin', cache: 'no-store', headers: { Accept: 'application/json' }, signal };
  if (method !== 'GET') {
    opts.headers['X-Paddock-CSRF'] = csrf;
    opts.headers['Content-Type'] = 'application/json';
    opts.body = JSON.stringify(body === undefined ? {} : body);
  }
  const res = await fetch(path, opts);
  return envelope(res);
}

export const get = (path, signal) => api('GET', path, undefined, signal);
export const post = (path, body) => api('POST', path, body);

export function runPath(id, rest = '') {
  return '/v1/runs/' + encodeURIComponent(id) + rest;
}

// text fetches a raw body (the streamed diff).
export async function text(path, signal) {
  const res = await fetch(path, { credentials: 'same-origin', cache: 'no-store', signal });
  if (!res.ok) return envelope(res);
  return { body: await res.text(), headers: res.headers };
}

// allEvents reads a run's events after seq, page by page.
export async function eventsAfter(id, after, signal) {
  const out = [];
  for (;;) {
    const page = await get(runPath(id, '/events?after=' + after + '&limit=500'), signal);
    if (!page || page.length === 0) break;
    out.push(...page);
    after = page[page.length - 1].seq;
    if (page.length < 500) break;
  }
  return out;
}

// follow calls onEvent for each event of run id after seq, live: Server-Sent
// Events read through fetch (EventSource hears only events it names, and
// the daemon names them by type), resumed after the last seq on a drop;
// when the stream cannot be had, a long poll. Returns a stop function.
export function follow(id, after, onEvent, onState) {
  const ctl = new AbortController();
  let last = after;
  let failures = 0;
  const deliver = (ev) => {
    if (typeof ev.seq === 'number' && ev.seq <= last) return;
    last = ev.seq;
    onEvent(ev);
  };
  const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
  async function stream() {
    const res = await fetch(runPath(id, '/events/stream?after=' + last), {
      credentials: 'same-origin', cache: 'no-store', signal: ctl.signal, headers: { Accept: 'text/event-stream' },
    });
    if (!res.ok || !(res.headers.get('Content-Type') || '').startsWith('text/event-stream') || !res.body) {
      throw new Error('no event stream (HTTP ' + res.status + ')');
    }
    onState && onState('live');
    failures = 0;
    const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
    let buf = '';
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buf += value;
      let i;
      while ((i = buf.search(/\r?\n\r?\n/)) >= 0) {
        const block = buf.slice(0, i);
        buf = buf.slice(buf[i] === '\r' ? i + 4 : i + 2);
        let data = '';
        for (const line of block.split(/\r?\n/)) {
          if (line.startsWith('data:')) data += (data ? '\n' : '') + line.slice(5).replace(/^ /, '');
        }
        if (data) {
          try { deliver(JSON.parse(data)); } catch { /* not an event */ }
        }
      }
    }
  }
  async function poll() {
    const evs = await get(runPath(id, '/events?after=' + last + '&wait=25s&limit=500'), ctl.signal);
    onState && onState('live (polling)');
    for (const ev of evs || []) deliver(ev);
  }
  (async () => {
    while (!ctl.signal.aborted) {
      try {
        if (failures < 3) await stream(); else await poll();
      } catch (e) {
        if (ctl.signal.aborted) return;
        failures++;
        onState && onState('reconnecting');
        await sleep(Math.min(5000, 500 * failures));
      }
    }
  })();
  return () => ctl.abort();
}
