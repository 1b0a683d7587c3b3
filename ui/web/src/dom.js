import { visible } from './escape.js';

// h builds an element. attrs: class, testid (data-testid), aria (object of
// aria-*), on (object of listeners), any other attribute or property
// (never style: the Content-Security-Policy forbids style attributes).
// String children are shown through visible(): invisibles as escapes.
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  if (attrs) {
    for (const [k, v] of Object.entries(attrs)) {
      if (v === undefined || v === null || v === false) continue;
      if (k === 'class') el.className = v;
      else if (k === 'testid') el.dataset.testid = v;
      else if (k === 'aria') for (const [a, av] of Object.entries(v)) el.setAttribute('aria-' + a, av);
      else if (k === 'on') for (const [ev, fn] of Object.entries(v)) el.addEventListener(ev, fn);
      else if (k === 'data') for (const [d, dv] of Object.entries(v)) el.dataset[d] = dv;
      else if (k === 'disabled' || k === 'checked' || k === 'value' || k === 'hidden') el[k] = v;
      else if (k === 'style') throw new Error('no style attributes');
      else el.setAttribute(k, v === true ? '' : v);
    }
  }
  append(el, children);
  return el;
}

export function append(el, children) {
  for (const c of children.flat(Infinity)) {
    if (c === undefined || c === null || c === false) continue;
    if (c instanceof Node) el.appendChild(c);
    else el.appendChild(visible(String(c)));
  }
  return el;
}

export function clear(el) {
  while (el.firstChild) el.removeChild(el.firstChild);
  return el;
}

export function ago(iso) {
  if (!iso) return '';
  const t = Date.parse(iso);
  if (Number.isNaN(t)) return '';
  const s = Math.max(0, Math.round((Date.now() - t) / 1000));
  if (s < 60) return s + 's ago';
  const m = Math.round(s / 60);
  if (m < 60) return m + 'm ago';
  const hr = Math.round(m / 60);
  if (hr < 48) return hr + 'h ago';
  return Math.round(hr / 24) + 'd ago';
}

export function bytes(n) {
  if (n === undefined || n === null) return '';
  if (n < 1024) return n + ' B';
  if (n < 1024 * 1024) return (n / 1024).toFixed(1) + ' KiB';
  return (n / 1024 / 1024).toFixed(1) + ' MiB';
}

export function shortHash(hash) {
  if (!hash) return '';
  const hex = hash.replace(/^sha256:/, '');
  return 'sha256:' + hex.slice(0, 12);
}

export function files(n) {
  return n + (n === 1 ? ' file' : ' files');
}
