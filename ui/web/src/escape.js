// Making the invisible visible. Every string the page shows that came from
// the daemon (file names, diff lines, task text, event data) goes through
// here: control characters, bidirectional overrides and isolates, zero-width
// and other invisible or look-alike-space characters are shown as a marked
// escape such as ⟨U+202E⟩, never handed to the text layout to interpret.

// In running text: tab and newline are kept as they are.
const TEXT = /[\u0000-\u0008\u000B-\u001F\u007F-\u009F\u00A0\u00AD\u034F\u061C\u115F\u1160\u1680\u17B4\u17B5\u180B-\u180F\u2000-\u200F\u2028-\u202F\u205F-\u206F\u2800\u3000\u3164\uFE00-\uFE0F\uFEFF\uE000-\uF8FF\uFFA0\uFFF9-\uFFFD\u{E0000}-\u{E007F}\u{E0100}-\u{E01EF}\u{1D173}-\u{1D17A}]/gu;
// In names: tab and newline too.
const NAME = /[\u0000-\u001F\u007F-\u009F\u00A0\u00AD\u034F\u061C\u115F\u1160\u1680\u17B4\u17B5\u180B-\u180F\u2000-\u200F\u2028-\u202F\u205F-\u206F\u2800\u3000\u3164\uFE00-\uFE0F\uFEFF\uE000-\uF8FF\uFFA0\uFFF9-\uFFFD\u{E0000}-\u{E007F}\u{E0100}-\u{E01EF}\u{1D173}-\u{1D17A}]/gu;

const NAMES = {
  0x00: 'NULL', 0x07: 'BELL', 0x08: 'BACKSPACE', 0x09: 'TAB', 0x0a: 'LINE FEED', 0x0b: 'VERTICAL TAB',
  0x0c: 'FORM FEED', 0x0d: 'CARRIAGE RETURN', 0x1b: 'ESCAPE', 0x7f: 'DELETE', 0xa0: 'NO-BREAK SPACE',
  0xad: 'SOFT HYPHEN', 0x61c: 'ARABIC LETTER MARK', 0x200b: 'ZERO WIDTH SPACE',
  0x200c: 'ZERO WIDTH NON-JOINER', 0x200d: 'ZERO WIDTH JOINER', 0x200e: 'LEFT-TO-RIGHT MARK',
  0x200f: 'RIGHT-TO-LEFT MARK', 0x2028: 'LINE SEPARATOR', 0x2029: 'PARAGRAPH SEPARATOR',
  0x202a: 'LEFT-TO-RIGHT EMBEDDING', 0x202b: 'RIGHT-TO-LEFT EMBEDDING',
  0x202c: 'POP DIRECTIONAL FORMATTING', 0x202d: 'LEFT-TO-RIGHT OVERRIDE',
  0x202e: 'RIGHT-TO-LEFT OVERRIDE', 0x2060: 'WORD JOINER', 0x2066: 'LEFT-TO-RIGHT ISOLATE',
  0x2067: 'RIGHT-TO-LEFT ISOLATE', 0x2068: 'FIRST STRONG ISOLATE',
  0x2069: 'POP DIRECTIONAL ISOLATE', 0xfeff: 'ZERO WIDTH NO-BREAK SPACE (BOM)',
  0xfffd: 'REPLACEMENT CHARACTER (bytes that are not UTF-8)',
};

function codeOf(ch) {
  return 'U+' + ch.codePointAt(0).toString(16).toUpperCase().padStart(4, '0');
}

// escapeLabel is the text shown for one invisible character.
export function escapeLabel(ch) {
  return '\u27e8' + codeOf(ch === CR_STANDIN ? '\r' : ch) + '\u27e9';
}

// The diff view carries a carriage return through diff2html as this.
const CR_STANDIN = '\uE00D';

function escSpan(ch) {
  const s = document.createElement('span');
  s.className = 'esc';
  s.dataset.testid = 'escape';
  if (ch === CR_STANDIN) ch = '\r';
  const name = NAMES[ch.codePointAt(0)] || 'invisible character';
  s.title = codeOf(ch) + ' ' + name;
  s.textContent = escapeLabel(ch);
  return s;
}

function pieces(str, re, out) {
  re.lastIndex = 0;
  let last = 0;
  let m;
  while ((m = re.exec(str)) !== null) {
    if (m.index > last) out.push(document.createTextNode(str.slice(last, m.index)));
    out.push(escSpan(m[0]));
    last = m.index + m[0].length;
  }
  if (last < str.length) out.push(document.createTextNode(str.slice(last)));
  return out;
}

// visible returns str as DOM nodes, the invisibles as escapes. name: escape
// tabs and newlines too (for file names, ids, one-line labels).
export function visible(str, name = false) {
  const frag = document.createDocumentFragment();
  for (const n of pieces(String(str), name ? NAME : TEXT, [])) frag.appendChild(n);
  return frag;
}

// visibleString is the plain-text form (for attributes, titles).
export function visibleString(str) {
  return String(str).replace(NAME, escapeLabel);
}

export function hasInvisible(str) {
  NAME.lastIndex = 0;
  const r = NAME.test(String(str));
  NAME.lastIndex = 0;
  return r;
}

// escapeTree replaces, in every text node under root, the invisibles with
// escapes. Used on HTML made by the diff renderer and the highlighter.
export function escapeTree(root) {
  const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
  const hits = [];
  for (let n = walker.nextNode(); n; n = walker.nextNode()) {
    TEXT.lastIndex = 0;
    if (TEXT.test(n.nodeValue)) hits.push(n);
  }
  TEXT.lastIndex = 0;
  for (const n of hits) {
    const parts = pieces(n.nodeValue, TEXT, []);
    n.replaceWith(...parts);
  }
  return hits.length;
}

// nameFlags: what is odd about a file name. Any non-ASCII name is flagged:
// it may be a look-alike (a Cyrillic а for a Latin a) of a name the reviewer
// trusts.
export function nameFlags(path, b64) {
  const flags = [];
  if (b64) flags.push('name not UTF-8');
  if (hasInvisible(path)) flags.push('invisible characters in name');
  // eslint-disable-next-line no-control-regex
  if (/[^\x20-\x7e]/.test(path)) flags.push('non-ASCII name');
  return flags;
}
