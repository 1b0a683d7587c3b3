// Red team 3: a run whose agent wrote HTML and script everywhere it could
// (file names, contents, the commands in its events) opened in the review
// page in headless Chromium, in both diff views. Run by cmd/paddock's
// TestRedteam3ReviewPageEscapesAgentHTML with PADDOCK_UI_URL, PADDOCK_RUN,
// CHROMIUM. Prints one JSON line: what ran (window.__pwned), what was
// injected (elements with on* attributes, img/svg/iframe/script the
// page did not make), CSP violations, and whether the payload shows as text.
import { chromium } from 'playwright-core';

const env = process.env;
const run = env.PADDOCK_RUN;
const out = { ok: true, pwned: null, injected: [], csp: [], shown: false, errors: [] };
let browser;
try {
  browser = await chromium.launch({ executablePath: env.CHROMIUM, args: ['--no-sandbox'], headless: true });
  const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
  await context.addInitScript(() => {
    document.addEventListener('securitypolicyviolation', (e) => {
      console.error('CSP violation: ' + e.violatedDirective + ' ' + (e.blockedURI || ''));
    });
  });
  const page = await context.newPage();
  page.on('console', (m) => { if (m.type() === 'error' && m.text().startsWith('CSP violation')) out.csp.push(m.text()); });
  page.on('pageerror', (e) => out.errors.push(e.message));
  await page.goto(env.PADDOCK_UI_URL, { waitUntil: 'load' });
  await page.goto(new URL('/ui/#/runs/' + encodeURIComponent(run), page.url()).href, { waitUntil: 'load' });
  await page.waitForFunction(() => document.querySelector('[data-testid="files"] .d2h-file-wrapper'), null, { timeout: 30000 });
  const probe = async () => page.evaluate(() => {
    const bad = [];
    for (const el of document.querySelectorAll('*')) {
      for (const a of el.getAttributeNames()) if (/^on/i.test(a)) bad.push(el.tagName + '[' + a + ']');
      if (/^(IMG|IFRAME|OBJECT|EMBED)$/i.test(el.tagName) || (el.tagName === 'SCRIPT' && !el.src)) bad.push(el.tagName);
    }
    return { pwned: window.__pwned || null, bad, text: document.body.innerText };
  });
  for (const view of ['view-unified', 'view-split']) {
    const radio = page.getByTestId(view);
    if (await radio.count()) { await radio.check(); await page.waitForTimeout(300); }
    const p = await probe();
    out.pwned = out.pwned || p.pwned;
    out.injected.push(...p.bad.map((b) => view + ': ' + b));
    out.shown = out.shown || p.text.includes('onerror=');
  }
} catch (e) {
  out.ok = false;
  out.errors.push(String(e && e.message || e));
}
console.log(JSON.stringify(out));
if (browser) await browser.close();
process.exit(0);
