// Splitting a git unified diff into one piece per file, and naming each
// piece by the bytes of its path (git quotes unusual names C-style).

const enc = new TextEncoder();
const dec = new TextDecoder('utf-8', { fatal: false });

// unquote turns a git path token ("a/caf\303\251" quoted, or a/plain) into
// its bytes, without the a/ or b/ prefix.
export function unquote(tok) {
  let bytes;
  if (tok.startsWith('"')) {
    const out = [];
    for (let i = 1; i < tok.length; i++) {
      const c = tok[i];
      if (c === '"') break;
      if (c !== '\\') {
        for (const b of enc.encode(c)) out.push(b);
        continue;
      }
      const n = tok[++i];
      const simple = { a: 7, b: 8, t: 9, n: 10, v: 11, f: 12, r: 13, '\\': 92, '"': 34 };
      if (n in simple) out.push(simple[n]);
      else if (/[0-7]/.test(n)) {
        out.push(parseInt(tok.slice(i, i + 3), 8) & 0xff);
        i += 2;
      } else for (const b of enc.encode(n)) out.push(b);
    }
    bytes = Uint8Array.from(out);
  } else {
    bytes = enc.encode(tok.replace(/\t.*$/, ''));
  }
  if (bytes.length >= 2 && (bytes[0] === 0x61 || bytes[0] === 0x62) && bytes[1] === 0x2f) bytes = bytes.slice(2);
  return bytes;
}

export function bytesKey(bytes) {
  let s = '';
  for (const b of bytes) s += b.toString(16).padStart(2, '0');
  return s;
}

export function pathKey(path, b64) {
  if (b64) {
    const bin = atob(b64);
    const bytes = new Uint8Array(bin.length);
    for (let i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
    return bytesKey(bytes);
  }
  return bytesKey(enc.encode(path));
}

// The path from a "diff --git a/X b/X" line when no ---/+++ line names it
// (binary files, mode changes): split where the two halves are equal.
function fromGitLine(rest) {
  if (rest.startsWith('"')) {
    const end = rest.indexOf('" ', 1);
    // a quoted pair: "a/…" "b/…" (a quote inside is escaped as \")
    let i = 1;
    for (; i < rest.length; i++) {
      if (rest[i] === '\\') { i++; continue; }
      if (rest[i] === '"') break;
    }
    const second = rest.slice(i + 2);
    return second ? unquote(second) : unquote(rest.slice(0, end + 1));
  }
  const half = (rest.length - 1) / 2;
  if (Number.isInteger(half) && rest[half] === ' ') return unquote(rest.slice(half + 1));
  const m = rest.match(/ ("?b\/.*)$/);
  return unquote(m ? m[1] : rest);
}

// splitDiff returns [{key, name, text, lines, binary}] in the diff's order.
export function splitDiff(diff) {
  const out = [];
  if (!diff) return out;
  const lines = diff.split('\n');
  let cur = null;
  const flush = () => { if (cur) { cur.text = cur.buf.join('\n') + '\n'; delete cur.buf; out.push(cur); } };
  for (const line of lines) {
    if (line.startsWith('diff --git ')) {
      flush();
      cur = { buf: [line], minus: null, plus: null, git: fromGitLine(line.slice(11)), lines: 0, binary: false, inHunk: false };
      continue;
    }
    if (!cur) continue;
    cur.buf.push(line);
    if (cur.inHunk) { cur.lines++; continue; }
    if (line.startsWith('@@')) { cur.inHunk = true; continue; }
    if (line.startsWith('--- ')) cur.minus = line.slice(4);
    else if (line.startsWith('+++ ')) cur.plus = line.slice(4);
    else if (line.startsWith('rename to ')) cur.git = unquote('b/' + line.slice(10));
    else if (line.startsWith('GIT binary patch') || line.startsWith('Binary files ')) cur.binary = true;
  }
  flush();
  for (const f of out) {
    let bytes = f.git;
    if (f.plus && f.plus !== '/dev/null') bytes = unquote(f.plus);
    else if (f.minus && f.minus !== '/dev/null') bytes = unquote(f.minus);
    f.key = bytesKey(bytes);
    f.name = dec.decode(bytes);
    delete f.minus; delete f.plus; delete f.git; delete f.inHunk;
  }
  return out;
}
