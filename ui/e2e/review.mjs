// The review page in headless Chromium, driven by playwright-core. Run by
// paddock's Go e2e test as `node ui/e2e/review.mjs` with:
//   PADDOCK_UI_URL  the one-time login URL (`paddock ui --no-open`)
//   PADDOCK_RUN     a submitted run
//   PADDOCK_EXPECT  {"files":[paths], "snippets":[strings in the diff], "risk":[labels]}
//   PADDOCK_BRANCH  the branch to apply to (review)
//   PADDOCK_MODE    review | stale | csrf | hunks
//   CHROMIUM        the browser executable; ARTIFACTS a directory for screenshots
// Prints one JSON line {"ok":true,...} and exits 0, or says what failed
// (ARTIFACTS/failure.png first) and exits 1. Console errors, page errors and
// Content-Security-Policy violations fail every mode.
import { chromium } from 'playwright-core';
import { createInterface } from 'node:readline';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';

const env = process.env;
const mode = env.PADDOCK_MODE || 'review';
const artifacts = env.ARTIFACTS || '.';
const run = env.PADDOCK_RUN || '';
const loginURL = env.PADDOCK_UI_URL || '';
const expected = JSON.parse(env.PADDOCK_EXPECT || '{}');
const LIMIT_MS = Number(env.PADDOCK_E2E_TIMEOUT_MS || 180000);
// Characters that must never reach the page's text as they are.
const INVISIBLE = /[\u202A-\u202E\u2066-\u2069\u200B-\u200F\u061C\u2028\u2029\uFEFF]/u;

const problems = [];
const steps = [];
let browser;
let page;

function step(s) { steps.push(s); }

async function fail(why) {
  try {
    if (page) await page.screenshot({ path: join(artifacts, 'failure.png'), fullPage: true });
  } catch { /* the screenshot is a courtesy */ }
  console.log(JSON.stringify({ ok: false, mode, run, error: String(why && why.stack ? why.message : why), problems, steps }));
  try { if (browser) await browser.close(); } catch { /* exiting anyway */ }
  process.exit(1);
}

function check(cond, why) { if (!cond) throw new Error(why); }

// A failed resource is a console error in Chromium; these are the ones a
// mode provokes on purpose.
function expectedFailure(text, url) {
  if (!/Failed to load resource: the server responded with a status of (\d+)/.test(text)) return false;
  const status = Number(RegExp.$1);
  if (mode === 'stale' && status === 409 && /\/approve(\?|$)/.test(url)) return true;
  if (mode === 'csrf' && status === 403 && /\/reject(\?|$)/.test(url)) return true;
  return false;
}

function readLine() {
  return new Promise((resolve) => {
    const rl = createInterface({ input: process.stdin });
    rl.once('line', (l) => { resolve(l); rl.close(); });
    rl.once('close', () => resolve(null));
  });
}

async function login() {
  check(loginURL, 'PADDOCK_UI_URL is not set');
  step('login');
  const res = await page.goto(loginURL, { waitUntil: 'load' });
  check(res && res.ok(), 'the login URL answered ' + (res && res.status()));
  check(new URL(page.url()).pathname === '/ui/', 'the login did not land on /ui/ but ' + page.url());
  await page.getByTestId('main').waitFor();
  await page.waitForFunction(() => !document.querySelector('.loading'), null, { timeout: 15000 });
  check(await page.getByTestId('logged-out').count() === 0, 'the page says it is not logged in');
}

async function openRun() {
  step('find the run in the list');
  const row = page.getByTestId('run-row-' + run);
  await row.waitFor({ timeout: 20000 });
  await page.getByTestId('run-link-' + run).click();
  await page.waitForURL((u) => u.hash === '#/runs/' + encodeURIComponent(run));
  step('open the run');
  await page.waitForFunction(() => {
    const h = document.querySelector('[data-testid="hash"]');
    return h && /^sha256:/.test(h.textContent) && document.querySelector('[data-testid="files"]');
  }, null, { timeout: 30000 });
  return (await page.getByTestId('hash').textContent()).trim();
}

async function reviewMode() {
  check(run, 'PADDOCK_RUN is not set');
  await login();
  const hash = await openRun();
  if (expected.hash) check(hash === expected.hash, 'the page shows change set ' + hash + ', not ' + expected.hash);
  step('files');
  for (const f of expected.files || []) {
    check(await page.getByTestId('file-' + f).isVisible(), 'the file tree does not show ' + JSON.stringify(f));
    check(await page.getByTestId('diff-' + f).count() === 1, 'no diff section for ' + JSON.stringify(f));
  }
  step('snippets');
  const filesText = await page.getByTestId('files').innerText();
  for (const s of expected.snippets || []) check(filesText.includes(s), 'the diff does not show ' + JSON.stringify(s));
  step('risk labels');
  const risks = await page.getByTestId('changeset').getByTestId('risk').allTextContents();
  for (const r of expected.risk || []) check(risks.includes(r), 'no risk label ' + JSON.stringify(r) + ' (shown: ' + risks.join(', ') + ')');
  step('invisible characters shown as escapes');
  const raw = await page.evaluate((src) => {
    const re = new RegExp(src, 'u');
    const out = [];
    const w = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
    for (let n = w.nextNode(); n; n = w.nextNode()) if (re.test(n.nodeValue)) out.push(n.nodeValue.slice(0, 80));
    return out;
  }, INVISIBLE.source);
  check(raw.length === 0, 'raw invisible characters in the page text: ' + JSON.stringify(raw));
  const escapes = await page.getByTestId('files').getByTestId('escape').allTextContents();
  check(escapes.includes('\u27e8U+202E\u27e9'), 'the bidi override is not shown as the escape \u27e8U+202E\u27e9 (escapes shown: ' + escapes.join(' ') + ')');
  step('keyboard');
  await page.locator('body').click({ position: { x: 5, y: 5 } });
  await page.keyboard.press('j');
  const focusedFile = await page.evaluate(() => document.activeElement && document.activeElement.dataset.testid);
  check(focusedFile && focusedFile.startsWith('diff-'), 'j did not move to a file (focus: ' + focusedFile + ')');
  await page.keyboard.press(']');
  const focusedHunk = await page.evaluate(() => document.activeElement && document.activeElement.dataset.testid);
  check(focusedHunk === 'hunk', '] did not move to a hunk (focus: ' + focusedHunk + ')');
  step('screenshots');
  await page.evaluate(() => window.scrollTo(0, 0));
  await page.screenshot({ path: join(artifacts, 'run-1280.png'), fullPage: true });
  await page.setViewportSize({ width: 390, height: 844 });
  await page.waitForTimeout(300);
  const overflow = await page.evaluate(() => document.documentElement.scrollWidth);
  await page.screenshot({ path: join(artifacts, 'run-390.png'), fullPage: true });
  check(overflow <= 392, 'at 390 px the page is ' + overflow + ' px wide');
  check(await page.getByTestId('approve').isVisible(), 'at 390 px approve is not visible');
  await page.setViewportSize({ width: 1280, height: 800 });
  step('approve');
  const approve = page.getByTestId('approve');
  check(await approve.isEnabled(), 'approve is disabled');
  await approve.click();
  await page.waitForFunction(() => /Approved|failed/.test(document.querySelector('[data-testid="result"]').textContent), null, { timeout: 20000 });
  const approved = await page.getByTestId('result').textContent();
  check(approved.includes('Approved ' + hash), 'approve: ' + approved);
  step('apply to a branch');
  if (env.PADDOCK_BRANCH) await page.getByTestId('branch-name').fill(env.PADDOCK_BRANCH);
  await page.waitForFunction(() => !document.querySelector('[data-testid="apply-branch"]').disabled, null, { timeout: 10000 });
  await page.getByTestId('apply-branch').click();
  await page.waitForFunction(() => /Applied|failed/.test(document.querySelector('[data-testid="result"]').textContent), null, { timeout: 60000 });
  const applied = (await page.getByTestId('result').textContent()).trim();
  check(applied.startsWith('Applied to '), 'apply: ' + applied);
  if (env.PADDOCK_BRANCH) check(applied.includes(env.PADDOCK_BRANCH), 'apply did not name the branch: ' + applied);
  return { hash, approved: approved.trim(), applied, files: (expected.files || []).length };
}

async function staleMode() {
  check(run, 'PADDOCK_RUN is not set');
  await login();
  const hash = await openRun();
  await page.waitForFunction(() => !document.querySelector('[data-testid="approve"]').disabled, null, { timeout: 10000 });
  step('ready');
  console.log('READY');
  const line = await readLine();
  check(line !== null, 'stdin closed before the go-ahead line');
  step('wait for the newer-submission notice');
  await page.getByTestId('stale').waitFor({ state: 'visible', timeout: 20000 });
  const notice = (await page.getByTestId('stale').textContent()).trim();
  check(/newer submission/i.test(notice), 'the stale notice says: ' + notice);
  check(await page.getByTestId('approve').isDisabled(), 'approve is still enabled under a newer submission');
  step('approve the old hash anyway');
  // As a page whose notice came late would: the button forced on, the click
  // sends the hash shown, and the daemon must refuse it.
  await page.evaluate(() => {
    const b = document.querySelector('[data-testid="approve"]');
    b.disabled = false;
    b.click();
  });
  await page.waitForFunction(() => /failed/.test(document.querySelector('[data-testid="result"]').textContent), null, { timeout: 20000 });
  const refused = (await page.getByTestId('result').textContent()).trim();
  check(/conflict/.test(refused), 'the approve of the old hash was not refused as a conflict: ' + refused);
  step('nothing approved');
  const approvals = await page.evaluate(async (id) => {
    const r = await fetch('/v1/runs/' + encodeURIComponent(id) + '/events', { credentials: 'same-origin' });
    const env = await r.json();
    return (env.data || []).filter((e) => e.type === 'changeset.approved').length;
  }, run);
  check(approvals === 0, approvals + ' approvals recorded');
  check(await page.getByTestId('stale').isVisible(), 'the notice went away');
  return { hash, notice, refused };
}

// hunks: each hunk names the call that wrote it (PADDOCK_EXPECT.origins,
// by hunk number), and approving only some hunks (PADDOCK_EXPECT.choose).
async function hunksMode() {
  check(run, 'PADDOCK_RUN is not set');
  await login();
  const hash = await openRun();
  step('where each hunk came from');
  await page.getByTestId('blame-hunk').first().waitFor({ timeout: 20000 });
  for (const [n, want] of Object.entries(expected.origins || {})) {
    const li = page.locator('[data-testid="blame-hunk"][data-n="' + n + '"]');
    check(await li.count() === 1, 'no hunk ' + n + ' in the blame card');
    const said = await li.getByTestId('blame-origin').allTextContents();
    check(said.some((x) => x.includes(want)), 'hunk ' + n + ' comes from ' + JSON.stringify(said) + ', not ' + JSON.stringify(want));
  }
  step('approve some hunks');
  for (const n of expected.choose || []) await page.getByTestId('hunk-' + n).check();
  const btn = page.getByTestId('approve-hunks');
  check(await btn.isEnabled(), 'approve the chosen hunks is disabled');
  await btn.click();
  await page.waitForFunction(() => /Approved hunks|failed/.test(document.querySelector('[data-testid="result"]').textContent), null, { timeout: 20000 });
  const said = (await page.getByTestId('result').textContent()).trim();
  check(said.startsWith('Approved hunks ' + (expected.choose || []).join(', ')), 'approve hunks: ' + said);
  return { hash, approved: said };
}

async function csrfMode() {
  check(run, 'PADDOCK_RUN is not set');
  await login();
  step('a POST without the CSRF header');
  const got = await page.evaluate(async (id) => {
    const path = '/v1/runs/' + encodeURIComponent(id);
    const control = await fetch(path, { credentials: 'same-origin' });
    const r = await fetch(path + '/reject', {
      method: 'POST', credentials: 'same-origin', headers: { 'Content-Type': 'application/json' }, body: '{}',
    });
    let body = null;
    try { body = await r.json(); } catch { /* status is what counts */ }
    const after = await (await fetch(path, { credentials: 'same-origin' })).json();
    return { control: control.status, status: r.status, body, state: after.data && after.data.workspace && after.data.workspace.state };
  }, run);
  check(got.control === 200, 'the session could not read the run (' + got.control + '): the refusal below proves nothing');
  check(got.status === 403, 'a POST without the CSRF header answered ' + got.status + ' ' + JSON.stringify(got.body));
  check(got.state !== 'rejected', 'the run was rejected all the same');
  return { status: got.status, state: got.state };
}

const guard = setTimeout(() => fail('timed out after ' + LIMIT_MS + ' ms'), LIMIT_MS);

try {
  mkdirSync(artifacts, { recursive: true });
  check(env.CHROMIUM, 'CHROMIUM is not set');
  browser = await chromium.launch({ executablePath: env.CHROMIUM, args: ['--no-sandbox'], headless: true });
  const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
  await context.addInitScript(() => {
    document.addEventListener('securitypolicyviolation', (e) => {
      console.error('CSP violation: ' + e.violatedDirective + ' ' + (e.blockedURI || '') + ' ' + (e.sourceFile || '') + ':' + (e.lineNumber || ''));
    });
  });
  page = await context.newPage();
  page.on('console', (m) => {
    if (m.type() !== 'error') return;
    const url = (m.location() && m.location().url) || '';
    if (expectedFailure(m.text(), url)) return;
    problems.push('console error: ' + m.text() + (url ? ' (' + url + ')' : ''));
  });
  page.on('pageerror', (e) => problems.push('page error: ' + e.message));
  let out;
  if (mode === 'review') out = await reviewMode();
  else if (mode === 'stale') out = await staleMode();
  else if (mode === 'csrf') out = await csrfMode();
  else if (mode === 'hunks') out = await hunksMode();
  else throw new Error('PADDOCK_MODE must be review, stale, csrf or hunks, not ' + mode);
  await page.waitForTimeout(200);
  check(problems.length === 0, 'the page logged errors');
  clearTimeout(guard);
  console.log(JSON.stringify({ ok: true, mode, run, ...out }));
  await browser.close();
  process.exit(0);
} catch (e) {
  await fail(e);
}
