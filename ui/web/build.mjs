// npm run build: the review page's sources (src/) bundled by esbuild into
// ../dist, reproducibly: the same sources and lockfile give the same bytes
// (no timestamps, no absolute paths, no source maps). ../dist/BUILD.json
// records the sha256 of every file under ui/web (node_modules left out),
// package-lock.json among them, and of every output, so a test can tell
// that dist was rebuilt after a source change.
import { build, version } from 'esbuild';
import { createHash } from 'node:crypto';
import { readFileSync, writeFileSync, readdirSync, mkdirSync, rmSync, copyFileSync, statSync } from 'node:fs';
import { join, relative, sep } from 'node:path';
import { fileURLToPath } from 'node:url';

const web = fileURLToPath(new URL('.', import.meta.url));
const dist = join(web, '..', 'dist');

const sha = (file) => createHash('sha256').update(readFileSync(file)).digest('hex');

function walk(dir, out = []) {
  for (const name of readdirSync(dir).sort()) {
    if (name === 'node_modules') continue;
    const p = join(dir, name);
    if (statSync(p).isDirectory()) walk(p, out); else out.push(p);
  }
  return out;
}

rmSync(dist, { recursive: true, force: true });
mkdirSync(dist, { recursive: true });

const common = {
  absWorkingDir: web,
  bundle: true,
  minify: true,
  sourcemap: false,
  legalComments: 'eof',
  charset: 'ascii',
  logLevel: 'warning',
  target: ['chrome110', 'firefox115', 'safari16'],
};
await build({ ...common, entryPoints: ['src/main.js'], outfile: join(dist, 'app.js'), format: 'iife' });
await build({ ...common, entryPoints: ['src/app.css'], outfile: join(dist, 'app.css') });
copyFileSync(join(web, 'src', 'index.html'), join(dist, 'index.html'));

const rel = (base, p) => relative(base, p).split(sep).join('/');
const sources = {};
for (const f of walk(web)) sources[rel(web, f)] = sha(f);
const outputs = {};
for (const f of walk(dist)) outputs[rel(dist, f)] = sha(f);
const record = { esbuild: version, sources, outputs };
writeFileSync(join(dist, 'BUILD.json'), JSON.stringify(record, null, 2) + '\n');
for (const [f, h] of Object.entries(outputs)) console.log(f, statSync(join(dist, f)).size, h.slice(0, 12));
