// The change set: a file tree with labels, and each file's diff (unified or
// side by side, highlighted) by diff2html and highlight.js; binary and
// large files shown as such; every invisible character made visible.
import { Diff2HtmlUI } from 'diff2html/lib-esm/ui/js/diff2html-ui-base';
import hljs from './highlight.js';
import { h, clear, bytes } from './dom.js';
import { escapeTree, nameFlags, visible, visibleString } from './escape.js';
import { splitDiff, pathKey } from './diffsplit.js';

const LARGE_BYTES = 512 * 1024;
const LARGE_LINES = 5000;
const EAGER_LINES = 20000;

const CR_STANDIN = '\uE00D';

const OPS = { create: 'added', modify: 'modified', delete: 'deleted' };

function label(cls, testid, text, title) {
  return h('span', { class: 'label ' + cls, testid, title }, text);
}

// files pairs the change set's entries with the diff's pieces.
export function pairFiles(cs, diffText) {
  const pieces = splitDiff(diffText);
  const byKey = new Map();
  for (const p of pieces) if (!byKey.has(p.key)) byKey.set(p.key, p);
  const used = new Set();
  const files = [];
  for (const e of cs.entries || []) {
    const key = pathKey(e.path, e.path_b64);
    const piece = byKey.get(key) || null;
    if (piece) used.add(piece);
    files.push({ path: e.path, entry: e, piece, flags: nameFlags(e.path, e.path_b64) });
  }
  for (const p of pieces) {
    if (used.has(p)) continue;
    files.push({ path: p.name, entry: null, piece: p, flags: nameFlags(p.name) });
  }
  return files;
}

function labelsOf(f) {
  const out = [];
  const e = f.entry;
  for (const r of (e && e.risks) || []) {
    // A note says why (a name collision: the other path and how they differ).
    const note = e.notes && e.notes[r];
    out.push(label('risk', 'risk', r, 'risk: ' + r + (note ? ' (' + visibleString(note) + ')' : '')));
    if (note) out.push(label('note', 'risk-note', r + ': ' + note, 'why the entry is labelled ' + r));
  }
  for (const fl of f.flags) out.push(label('flag', 'name-flag', fl, 'the file name: ' + fl));
  if (e && e.blocked) out.push(label('blocked', 'blocked', 'blocked: ' + e.blocked));
  if (e && e.old_mode && e.new_mode && e.old_mode !== e.new_mode) out.push(label('mode', 'mode', e.old_mode + ' → ' + e.new_mode));
  else if (e && e.new_mode && e.new_mode !== '100644') out.push(label('mode', 'mode', e.new_mode === '120000' ? 'symlink' : e.new_mode));
  return out;
}

export class ChangeSetView {
  constructor(cs, diffText, { mode = 'line-by-line', onFocusFile } = {}) {
    this.cs = cs;
    this.mode = mode;
    this.onFocusFile = onFocusFile;
    this.files = pairFiles(cs, diffText);
    this.haveDiff = !!diffText;
    this.current = -1;
    this.totalLines = this.files.reduce((n, f) => n + (f.piece ? f.piece.lines : 0), 0);
    this.eager = this.totalLines <= EAGER_LINES && this.files.length <= 300;
    this.tree = this.buildTree();
    this.list = h('div', { class: 'files', testid: 'files' });
    this.observer = this.eager ? null : new IntersectionObserver((ents) => {
      for (const en of ents) if (en.isIntersecting) this.renderBody(en.target.__file, false);
    }, { rootMargin: '800px 0px' });
    this.files.forEach((f, i) => {
      f.index = i;
      f.section = this.buildSection(f);
      this.list.appendChild(f.section);
      if (this.eager) this.renderBody(f, false);
      else this.observer.observe(f.body);
    });
  }

  buildTree() {
    const root = { dirs: new Map(), files: [] };
    for (const f of this.files) {
      const parts = f.path.split('/');
      let node = root;
      for (const d of parts.slice(0, -1)) {
        if (!node.dirs.has(d)) node.dirs.set(d, { dirs: new Map(), files: [] });
        node = node.dirs.get(d);
      }
      node.files.push({ name: parts[parts.length - 1], f });
    }
    const render = (node) => {
      const ul = h('ul', { role: 'group' });
      for (const [name, sub] of node.dirs) {
        ul.appendChild(h('li', { class: 'dir' }, h('details', { open: true },
          h('summary', { 'aria-label': 'folder ' + visibleString(name) }, h('span', { class: 'dirname' }, visible(name + '/', true))),
          render(sub))));
      }
      for (const { name, f } of node.files) {
        const e = f.entry;
        const op = e ? e.op : 'unknown';
        const risky = ((e && e.risks) || []).length + f.flags.length;
        f.treeButton = h('button', {
          class: 'tree-file op-' + op, type: 'button', testid: 'file-' + f.path,
          'aria-label': (OPS[op] || op) + ' file ' + visibleString(f.path) + (risky ? ', ' + risky + ' labels' : ''),
          on: { click: () => this.focusFile(f.index) },
        }, h('span', { class: 'opmark', 'aria-hidden': 'true' }, op === 'create' ? 'A' : op === 'delete' ? 'D' : op === 'modify' ? 'M' : '?'),
        h('span', { class: 'fname' }, visible(name, true)),
        risky ? h('span', { class: 'riskdot', 'aria-hidden': 'true', title: 'labels' }, String(risky)) : null);
        ul.appendChild(h('li', { class: 'leaf' }, f.treeButton));
      }
      return ul;
    };
    return h('nav', { class: 'tree', testid: 'file-tree', 'aria-label': 'Changed files' }, render(root));
  }

  buildSection(f) {
    const e = f.entry;
    const op = e ? e.op : 'unknown';
    const size = e && e.op !== 'delete' ? bytes(e.size) : '';
    f.body = h('div', { class: 'file-body' });
    f.body.__file = f;
    const sec = h('section', {
      class: 'file', testid: 'diff-' + f.path, tabindex: '-1',
      'aria-label': (OPS[op] || op) + ' file ' + visibleString(f.path),
    },
    h('header', { class: 'file-head' },
      h('span', { class: 'op op-' + op }, OPS[op] || 'changed'),
      h('span', { class: 'path', testid: 'path' }, visible(f.path, true)),
      h('span', { class: 'labels' }, labelsOf(f)),
      size ? h('span', { class: 'size' }, size) : null),
    f.body);
    sec.addEventListener('focusin', () => { this.setCurrent(f.index); });
    return sec;
  }

  renderBody(f, force) {
    if (f.rendered && !force) return;
    const body = clear(f.body);
    const e = f.entry;
    f.rendered = true;
    if ((e && e.binary) || (f.piece && f.piece.binary)) {
      body.appendChild(h('p', { class: 'note binary', testid: 'binary' },
        'Binary file' + (e && e.op !== 'delete' ? ', ' + bytes(e.size) : '') + ': its content is not shown.'));
      return;
    }
    if (!f.piece) {
      body.appendChild(h('p', { class: 'note', testid: 'no-diff' },
        this.cs.diff_omitted || !this.haveDiff ? 'No diff text for this file.' : 'No textual change (mode or type only).'));
      return;
    }
    if (!f.showLarge && (f.piece.text.length > LARGE_BYTES || f.piece.lines > LARGE_LINES)) {
      body.appendChild(h('p', { class: 'note large', testid: 'large' },
        'Large diff: ' + f.piece.lines + ' lines, ' + bytes(f.piece.text.length) + '. ',
        h('button', {
          type: 'button', class: 'btn', testid: 'show-large', 'aria-label': 'Show the large diff of ' + visibleString(f.path),
          on: { click: () => { f.showLarge = true; this.renderBody(f, true); } },
        }, 'Show it')));
      return;
    }
    // diff2html reads \r\n as a line's end and drops the \r: a carriage
    // return is carried through it as a private-use character, then shown
    // as its escape (unless the text holds that character itself).
    const input = f.piece.text.includes(CR_STANDIN) ? f.piece.text : f.piece.text.replace(/\r/g, CR_STANDIN);
    const ui = new Diff2HtmlUI(body, input, {
      outputFormat: this.mode, drawFileList: false, matching: 'lines', highlight: true,
      synchronisedScroll: true, fileListToggle: false, fileContentToggle: false,
      stickyFileHeaders: false, colorScheme: 'light',
    }, hljs);
    ui.draw();
    // The lines' text only: diff2html's own markup uses no-break spaces.
    for (const ctn of body.querySelectorAll('.d2h-code-line-ctn')) escapeTree(ctn);
    // Hunks, for ] and [: in side-by-side, the left side's.
    const side = body.querySelector('.d2h-file-side-diff');
    const scope = side || body;
    for (const td of scope.querySelectorAll('td.d2h-info')) {
      const tr = td.closest('tr');
      if (tr && !tr.classList.contains('hunk')) {
        tr.classList.add('hunk');
        tr.tabIndex = -1;
        tr.dataset.testid = 'hunk';
      }
    }
  }

  setMode(mode) {
    this.mode = mode;
    for (const f of this.files) if (f.rendered) this.renderBody(f, true);
  }

  setCurrent(i) {
    if (i === this.current) return;
    const old = this.files[this.current];
    if (old && old.treeButton) old.treeButton.classList.remove('current');
    this.current = i;
    const f = this.files[i];
    if (f && f.treeButton) {
      f.treeButton.classList.add('current');
      f.treeButton.setAttribute('aria-current', 'true');
    }
    if (old && old.treeButton && old !== f) old.treeButton.removeAttribute('aria-current');
    this.onFocusFile && this.onFocusFile(f);
  }

  focusFile(i) {
    if (this.files.length === 0) return;
    i = Math.max(0, Math.min(this.files.length - 1, i));
    const f = this.files[i];
    this.renderBody(f, false);
    this.setCurrent(i);
    f.section.focus({ preventScroll: true });
    f.section.scrollIntoView({ block: 'start' });
  }

  nextFile(d) {
    this.focusFile(this.current < 0 ? (d > 0 ? 0 : this.files.length - 1) : this.current + d);
  }

  nextHunk(d) {
    const hunks = [...this.list.querySelectorAll('tr.hunk')];
    if (hunks.length === 0) return;
    const at = document.activeElement;
    let idx = hunks.indexOf(at);
    if (idx < 0) {
      // from the focused file, or the top of the view
      const f = this.files[this.current];
      const after = hunks.findIndex((t) => f ? f.section.contains(t) || (f.section.compareDocumentPosition(t) & Node.DOCUMENT_POSITION_FOLLOWING) : t.getBoundingClientRect().top >= 0);
      idx = after < 0 ? hunks.length : after;
      idx = d > 0 ? idx - 1 : idx;
    }
    const next = hunks[Math.max(0, Math.min(hunks.length - 1, idx + d))];
    const sec = next.closest('section.file');
    if (sec && sec.__index === undefined) sec.__index = this.files.findIndex((f) => f.section === sec);
    next.focus({ preventScroll: true });
    next.scrollIntoView({ block: 'center' });
  }
}
