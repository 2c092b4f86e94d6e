// The browser tests' harness: a real `leasehold serve` on a fresh redb
// file with tokens minted by `leasehold token new --json`, the system's
// Chromium driven by playwright-core (never a downloaded browser), signed-in
// pages, an API client for the test's own moves, screenshots, and waiting
// for conditions (never for a fixed time).
import { spawn, execFileSync } from 'node:child_process';
import { mkdtempSync, mkdirSync, writeFileSync, rmSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve, dirname } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';

const here = dirname(fileURLToPath(import.meta.url));
const root = resolve(here, '..', '..', '..');

export const TENANT = 'acme';

/** The `leasehold` binary: $LEASEHOLD_BIN, else the debug build. */
export function binary() {
  if (process.env.LEASEHOLD_BIN) return process.env.LEASEHOLD_BIN;
  const target = process.env.CARGO_TARGET_DIR || join(root, 'target');
  return join(target, 'debug', 'leasehold');
}

/** Where screenshots go: $LEASEHOLD_SCREENSHOTS, else tests/browser/screenshots. */
export function screenshotDir() {
  const dir = process.env.LEASEHOLD_SCREENSHOTS || join(here, '..', 'screenshots');
  mkdirSync(dir, { recursive: true });
  return dir;
}

/**
 * Starts `leasehold serve` on port 0 with one token per user. `users` maps
 * a name to {actor, scope, roles}. Answers {base, tokens, api, stop}.
 */
export async function startServer(users, { extraArgs = [] } = {}) {
  const bin = binary();
  if (!existsSync(bin)) throw new Error(`no leasehold binary at ${bin}: cargo build -p leasehold-cli`);
  const dir = mkdtempSync(join(tmpdir(), 'leasehold-browser-'));
  const tokens = {};
  const lines = [];
  for (const [name, { actor, scope, roles = [] }] of Object.entries(users)) {
    const args = ['--json', '--tenant', TENANT, 'token', 'new', '--actor', actor, '--scope', scope];
    if (roles.length) args.push('--role', ...roles);
    const out = JSON.parse(execFileSync(bin, args, { cwd: dir, encoding: 'utf8' }));
    tokens[name] = out.token;
    lines.push(out.line);
  }
  writeFileSync(join(dir, 'tokens'), `${lines.join('\n')}\n`);
  const child = spawn(bin, [
    '--db', join(dir, 'inbox.redb'), 'serve', '--listen', '127.0.0.1:0',
    '--tokens', join(dir, 'tokens'), ...extraArgs,
  ], { cwd: dir, stdio: ['ignore', 'ignore', 'pipe'], env: { ...process.env, RUST_LOG: 'warn' } });
  const log = [];
  const exited = new Promise((r) => child.once('exit', (code, signal) => r({ code, signal })));
  const base = await new Promise((ok, fail) => {
    const lines = createInterface({ input: child.stderr });
    lines.on('line', (line) => {
      log.push(line);
      if (log.length > 200) log.shift();
      const m = /listening on (\S+)/.exec(line);
      if (m) ok(m[1]);
    });
    exited.then(({ code }) => fail(new Error(`leasehold serve exited ${code} before listening:\n${log.join('\n')}`)));
  });
  const api = (who, method, route, body) => call(base, tokens[who], method, route, body);
  return {
    base,
    tokens,
    api,
    log,
    async stop() {
      child.kill('SIGTERM');
      await exited;
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** One API call; answers {status, body}. */
export async function call(base, token, method, route, body) {
  const headers = { Accept: 'application/json' };
  if (token) headers.Authorization = `Bearer ${token}`;
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  const res = await fetch(base + route, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await res.text();
  let json = null;
  try { json = text ? JSON.parse(text) : null; } catch (e) { json = text; }
  return { status: res.status, body: json, headers: res.headers };
}

/** Opens a task as the service; fails the test if the server refuses. */
export async function openTask(server, task) {
  const r = await server.api('service', 'POST', '/v1/tasks', {
    run: 'run-1', kind: 'approve-payment', candidate_roles: ['finance'],
    justification: { amount: 1200, invoice: 'INV-1' }, ...task,
  });
  if (r.status !== 200) throw new Error(`open ${task.id}: ${r.status} ${JSON.stringify(r.body)}`);
  return r.body;
}

/** The system's Chromium, headless, on a fresh profile of its own. */
export async function launch() {
  return chromium.launch({
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
    headless: true,
    args: [
      '--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync',
    ],
  });
}

/**
 * A browser context and page, watched: every dialog, uncaught error and
 * console error is recorded (and a dialog dismissed), for `assertClean`.
 */
export async function openPage(browser, { viewport = { width: 1280, height: 900 }, timezoneId = 'UTC', ...rest } = {}) {
  const context = await browser.newContext({ locale: 'en-GB', timezoneId, viewport, ...rest });
  const page = await context.newPage();
  page.setDefaultTimeout(20000);
  page.trouble = [];
  page.on('dialog', (d) => { page.trouble.push(`dialog: ${d.message()}`); d.dismiss().catch(() => {}); });
  page.on('pageerror', (e) => page.trouble.push(`uncaught: ${e.message}`));
  page.on('console', (m) => {
    // A failed HTTP status is the browser's own note about an answer the
    // page handles (a 401 probe, a 409 refusal); anything else is trouble,
    // a CSP violation first of all.
    if (m.type() === 'error' && !/^Failed to load resource: the server responded with a status of 4\d\d/.test(m.text())) {
      page.trouble.push(`console: ${m.text()}`);
    }
  });
  return page;
}

/** Signs a page in with a token, through the form, as a person would. */
export async function signIn(page, base, token, route = '/') {
  await page.goto(base + route);
  await page.locator('#token').fill(token);
  await page.locator('#token').press('Enter');
  await page.locator('#who').filter({ hasText: 'Signed in as' }).waitFor();
}

/** Waits until the page follows the change feed. */
export async function live(page) {
  await page.locator('#live[data-state="live"]').waitFor();
}

/** The queue rows' task ids, in order. */
export async function queueIds(page) {
  return page.locator('#queue-rows tr').evaluateAll((rows) => rows.map((r) => r.dataset.task));
}

/** The ids of the tasks under "My tasks". */
export async function mineIds(page) {
  return page.locator('#mine .card').evaluateAll((cards) => cards.map((c) => c.dataset.task));
}

/** Waits until `probe()` answers something truthy, polling; answers it. */
export async function eventually(probe, what, timeout = 30000) {
  const end = Date.now() + timeout;
  let last;
  for (;;) {
    last = await probe();
    if (last) return last;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what} (last: ${JSON.stringify(last)})`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** Waits until the page's queue shows (or no longer shows) a task. */
export async function waitQueued(page, id, shown = true) {
  await page.waitForFunction(([i, s]) => {
    const has = [...document.querySelectorAll('#queue-rows tr')].some((r) => r.dataset.task === i);
    return has === s;
  }, [id, shown]);
}

/** Waits until "My tasks" shows (or no longer shows) a task. */
export async function waitMine(page, id, shown = true) {
  await page.waitForFunction(([i, s]) => {
    const has = [...document.querySelectorAll('#mine .card')].some((c) => c.dataset.task === i);
    return has === s;
  }, [id, shown]);
}

/** Saves a screenshot of the page as `<test>-<name>.png`. */
export async function shot(page, test, name) {
  const safe = `${test}-${name}`.replace(/[^a-z0-9-]+/gi, '-').toLowerCase();
  await page.screenshot({ path: join(screenshotDir(), `${safe}.png`), fullPage: true });
}

/** Fails if a page met a dialog, an uncaught error or a console error. */
export function assertClean(page) {
  if (page.trouble.length) throw new Error(`the page had trouble:\n${page.trouble.join('\n')}`);
}

/**
 * Runs one test body with a registry of its pages: whatever happens, each
 * page is screenshotted as it ended; if the body passed, each must have
 * been clean. `body({page})` opens pages with `page(name, options)`.
 */
export async function scenario(browser, test, body) {
  const pages = {};
  const page = async (name, options) => {
    pages[name] = await openPage(browser, options);
    return pages[name];
  };
  try {
    await body({ page });
    for (const p of Object.values(pages)) assertClean(p);
  } finally {
    for (const [name, p] of Object.entries(pages)) await shot(p, test, name).catch(() => {});
    for (const p of Object.values(pages)) await p.context().close().catch(() => {});
  }
}
