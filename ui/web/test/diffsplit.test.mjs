// node --test ui/web/test: the pure parts of the change-set view.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { splitDiff, unquote, pathKey, bytesKey } from '../src/diffsplit.js';
import { visibleString, nameFlags, hasInvisible } from '../src/escape.js';

const dec = (b) => new TextDecoder().decode(b);

test('git C-quoted names decode to their bytes', () => {
  assert.equal(dec(unquote('"b/caf\\303\\251.txt"')), 'café.txt');
  assert.equal(dec(unquote('"a/ev\\342\\200\\256il"')), 'ev\u202eil');
  assert.equal(dec(unquote('"b/tab\\there \\"q\\" back\\\\slash"')), 'tab\there "q" back\\slash');
  assert.equal(dec(unquote('b/plain name.go')), 'plain name.go');
  assert.equal(bytesKey(unquote('"b/\\377x"')), 'ff78'); // not UTF-8: the bytes still match
});

test('a diff splits into one piece per file, named by the bytes of its path', () => {
  const diff = [
    'diff --git a/main.go b/main.go',
    'index 1..2 100644',
    '--- a/main.go',
    '+++ b/main.go',
    '@@ -1 +1 @@',
    '-a',
    '+b',
    'diff --git "a/caf\\303\\251.txt" "b/caf\\303\\251.txt"',
    'new file mode 100644',
    '--- /dev/null',
    '+++ "b/caf\\303\\251.txt"',
    '@@ -0,0 +1 @@',
    '+x',
    'diff --git a/gone.txt b/gone.txt',
    'deleted file mode 100644',
    '--- a/gone.txt',
    '+++ /dev/null',
    '@@ -1 +0,0 @@',
    '-old',
    'diff --git a/logo.png b/logo.png',
    'new file mode 100644',
    'GIT binary patch',
    'literal 3',
    'abc',
    '',
    'diff --git a/with space b/with space',
    'old mode 100644',
    'new mode 100755',
    '',
  ].join('\n');
  const pieces = splitDiff(diff);
  assert.deepEqual(pieces.map((p) => p.name), ['main.go', 'café.txt', 'gone.txt', 'logo.png', 'with space']);
  assert.deepEqual(pieces.map((p) => p.binary), [false, false, false, true, false]);
  assert.equal(pieces[0].key, pathKey('main.go'));
  assert.equal(pieces[1].key, pathKey('café.txt'));
  assert.equal(pieces[1].key, pathKey('ignored', Buffer.from('café.txt').toString('base64')));
  assert.ok(pieces[0].text.startsWith('diff --git a/main.go') && pieces[0].text.includes('+b\n'));
  assert.ok(!pieces[0].text.includes('café'));
  assert.deepEqual(splitDiff(''), []);
});

test('every bidi control, zero-width and control character is escaped', () => {
  const chars = ['\u202a', '\u202b', '\u202c', '\u202d', '\u202e', '\u2066', '\u2067', '\u2068', '\u2069', '\u200e', '\u200f',
    '\u061c', '\u200b', '\u200c', '\u200d', '\u2060', '\ufeff', '\u0000', '\u001b', '\u007f', '\u0085', '\u00ad', '\u00a0', '\r', '\t', '\n',
    '\u{e0041}', '\ufe0f', '\ue00d'];
  for (const c of chars) {
    const code = c.codePointAt(0).toString(16).toUpperCase().padStart(4, '0');
    const label = c === '\ue00d' ? '\u27e8U+000D\u27e9' : '\u27e8U+' + code + '\u27e9';
    assert.equal(visibleString('a' + c + 'b'), 'a' + label + 'b', 'U+' + code);
    assert.ok(hasInvisible(c), 'U+' + code);
  }
  assert.equal(visibleString('plain ASCII, é, 漢字'), 'plain ASCII, é, 漢字');
  assert.equal(hasInvisible('pаypal'), false); // a look-alike, but visible: nameFlags flags it
});

test('odd file names are flagged', () => {
  assert.deepEqual(nameFlags('main.go'), []);
  assert.deepEqual(nameFlags('p\u0430ypal.go'), ['non-ASCII name']);
  assert.deepEqual(nameFlags('ev\u202eil.txt'), ['invisible characters in name', 'non-ASCII name']);
  assert.deepEqual(nameFlags('x\ufffd', '/w=='), ['name not UTF-8', 'invisible characters in name', 'non-ASCII name']);
});
