// Text from users stays in its place: a task whose kind holds a
// right-to-left override (U+202E) reorders none of the words beside it,
// and an id that is one unbroken 256-character word wraps instead of
// widening the page, in the inbox and on the operator page.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, launch, scenario, signIn, live, openTask, waitQueued, waitMine } from '../support/harness.js';

const users = {
  alice: { actor: 'alice', scope: 'reviewer', roles: ['finance'] },
  olga: { actor: 'olga', scope: 'operator', roles: ['finance'] },
  service: { actor: 'workflow', scope: 'service' },
};
const RLO = '\u202E';
const KIND = `${RLO}approve-refund`;
// As long as a name may be.
const ID = 'w'.repeat(256);
let server;
let browser;
before(async () => {
  // The task stays overdue for the operator's list: no sweeper here.
  server = await startServer(users, { extraArgs: ['--no-sweep'] });
  browser = await launch();
  await openTask(server, {
    id: ID, kind: KIND, due_at: Date.now() - 3600000,
    justification: { note: `${RLO}paid twice`, reference: 'r'.repeat(256) },
  });
});
after(async () => {
  await browser?.close();
  await server?.stop();
});

async function noSidewaysScroll(page) {
  const [scroll, width] = await page.evaluate(() => [document.documentElement.scrollWidth, window.innerWidth]);
  assert.ok(scroll <= width, `the page is ${scroll}px wide in a ${width}px window`);
}

// Where a piece of an element's text is drawn: the box around `needle`
// (which may span text nodes; it must fit on one line), as {left, right, top}.
async function textBox(page, selector, needle) {
  return page.locator(selector).evaluate((root, n) => {
    const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
    const nodes = [];
    let text = '';
    for (let t = walker.nextNode(); t; t = walker.nextNode()) {
      nodes.push({ node: t, from: text.length });
      text += t.data;
    }
    const at = text.indexOf(n);
    if (at < 0) return null;
    const place = (i) => {
      const hit = nodes.filter((x) => x.from <= i).pop();
      return [hit.node, i - hit.from];
    };
    const range = document.createRange();
    range.setStart(...place(at));
    const [last, offset] = place(at + n.length - 1);
    range.setEnd(last, offset + 1);
    const r = range.getBoundingClientRect();
    return { left: r.left, right: r.right, top: r.top };
  }, needle);
}

// The words after the user's text are drawn after it, as written.
async function keepsOrder(page, selector, userText, after) {
  const u = await textBox(page, selector, userText);
  const a = await textBox(page, selector, after);
  assert.ok(u && a, `${selector} shows both pieces`);
  assert.ok(Math.abs(a.top - u.top) < 2, `${selector}: on one line (${JSON.stringify({ u, a })})`);
  assert.ok(a.left >= u.right - 1,
    `${selector}: "${after}" is drawn at ${a.left}px, left of the user's text (${u.left}–${u.right}px)`);
}

async function isolated(page, selector) {
  const found = await page.locator(selector).evaluateAll((els) => els.map((e) => getComputedStyle(e).unicodeBidi));
  assert.ok(found.length > 0, `${selector} is on the page`);
  for (const b of found) assert.equal(b, 'isolate', `${selector} keeps its direction to itself`);
}

test('a right-to-left override and a long word in a task disturb nothing in the inbox', async () => {
  await scenario(browser, 'bidi-inbox', async ({ page }) => {
    const a = await page('alice');
    await signIn(a, server.base, server.tokens.alice);
    await live(a);
    await waitQueued(a, ID);
    const row = `#queue-rows tr[data-task="${ID}"]`;
    await isolated(a, `${row} .kind`);
    await isolated(a, `${row} .task-id`);
    await isolated(a, `${row} .justification`);
    // One field's override leaves the next field where it is.
    await keepsOrder(a, `${row} .justification`, `${RLO}paid twice`, ',');
    await noSidewaysScroll(a);

    await a.locator(`${row} button.claim`).click();
    await waitMine(a, ID);
    await a.locator('#notice').filter({ hasText: 'You hold' }).waitFor();
    await noSidewaysScroll(a);
    // "You hold “KIND” (ID)." with the closing quote where it is written.
    await keepsOrder(a, '#notice', KIND, '”');
    const card = `#mine .card[data-task="${ID}"]`;
    await isolated(a, `${card} .kind`);
    await isolated(a, `${card} .task-id`);
    // The full justification shows the override as an escape, not as itself.
    await a.locator(`${card} summary`).click();
    const pre = await a.locator(`${card} pre`).textContent();
    assert.ok(!pre.includes(RLO), 'no raw override in the full justification');
    assert.deepEqual(JSON.parse(pre), { note: `${RLO}paid twice`, reference: 'r'.repeat(256) });
    await noSidewaysScroll(a);

    // Give it back for the operator's test.
    await a.locator(`${card} button.release`).click();
    await waitMine(a, ID, false);
  });
});

test('a right-to-left override and a long word in a task disturb nothing on the operator page', async () => {
  await scenario(browser, 'bidi-operator', async ({ page }) => {
    const o = await page('olga');
    await signIn(o, server.base, server.tokens.olga, '/operator');
    await live(o);
    const row = `#overdue-rows tr[data-task="${ID}"]`;
    await o.locator(row).waitFor();
    await isolated(o, `${row} .kind`);
    await isolated(o, `${row} .task-id`);
    await noSidewaysScroll(o);

    await o.getByLabel('Task id').fill(ID);
    await o.getByLabel('Task id').press('Tab');
    await o.locator('#to-task-state').filter({ hasText: 'held by' }).waitFor();
    await keepsOrder(o, '#to-task-state', KIND, '”,');
    await noSidewaysScroll(o);
  });
});
