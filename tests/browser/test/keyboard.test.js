// The whole claim-and-approve flow with the keyboard alone: sign in, reach
// a task's "Claim", claim it, reach "Approve", approve it. Every control
// reached shows a visible focus ring.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, launch, scenario, live, openTask, waitQueued, waitMine } from '../support/harness.js';

const users = {
  alice: { actor: 'alice', scope: 'reviewer', roles: ['finance'] },
  service: { actor: 'workflow', scope: 'service' },
};
let server;
let browser;
before(async () => {
  server = await startServer(users);
  browser = await launch();
});
after(async () => {
  await browser?.close();
  await server?.stop();
});

// What the focused element is called, and whether its focus can be seen.
const focused = (page) => page.evaluate(() => {
  const e = document.activeElement;
  const s = getComputedStyle(e);
  return {
    name: e.getAttribute('aria-label') || e.textContent.trim(),
    tag: e.tagName,
    ring: s.outlineStyle !== 'none' && parseFloat(s.outlineWidth) >= 2,
  };
});

// Presses Tab until the control named `name` has the focus.
async function tabTo(page, name, limit = 40) {
  for (let i = 0; i < limit; i++) {
    await page.keyboard.press('Tab');
    const f = await focused(page);
    if (f.tag !== 'BODY') assert.ok(f.ring, `no visible focus on ${f.tag} “${f.name}”`);
    if (f.name === name) return;
  }
  throw new Error(`Tab never reached “${name}”`);
}

test('sign in, claim and approve with the keyboard alone', async () => {
  await scenario(browser, 'keyboard', async ({ page }) => {
    await openTask(server, { id: 'pay-kb-1', kind: 'approve-payment', priority: 'low' });
    await openTask(server, { id: 'pay-kb-2', kind: 'approve-refund' });
    const a = await page('alice');
    await a.goto(`${server.base}/`);
    // The sign-in form takes the focus once the page has asked the server
    // whether a proxy signed it in (an answer that comes after the load);
    // the token is typed, Enter sends it.
    await a.waitForFunction(() => document.activeElement?.id === 'token');
    assert.equal((await a.evaluate(() => document.activeElement.id)), 'token');
    await a.keyboard.type(server.tokens.alice);
    await a.keyboard.press('Enter');
    await live(a);
    await waitQueued(a, 'pay-kb-1');

    await tabTo(a, 'Claim approve-payment (pay-kb-1)');
    await a.keyboard.press('Enter');
    await waitMine(a, 'pay-kb-1');
    // The claimed task's card takes the focus, so its actions are next.
    assert.equal(await a.evaluate(() => document.activeElement.closest('.card')?.dataset.task), 'pay-kb-1');
    await tabTo(a, 'Approve: approve-payment (pay-kb-1)');
    await a.keyboard.press('Enter');
    await a.locator('#notice').filter({ hasText: 'Approved “approve-payment” (pay-kb-1).' }).waitFor();
    await waitMine(a, 'pay-kb-1', false);
    const t = await server.api('service', 'GET', '/v1/tasks/pay-kb-1');
    assert.equal(t.body.state, 'completed');
    assert.equal(t.body.assignee, 'alice');

    // "Give me the next" by keyboard too, then Reject.
    await tabTo(a, 'Give me the next');
    await a.keyboard.press('Enter');
    await waitMine(a, 'pay-kb-2');
    await tabTo(a, 'Reject: approve-refund (pay-kb-2)');
    await a.keyboard.press('Enter');
    await a.locator('#notice').filter({ hasText: 'Rejected “approve-refund” (pay-kb-2).' }).waitFor();
    const r = await server.api('service', 'GET', '/v1/tasks/pay-kb-2');
    // Reject is a decision: completed, with the outcome `rejected`.
    assert.equal(r.body.state, 'completed');
    assert.equal(r.body.decision.outcome, 'rejected');
    assert.equal(r.body.decision.by, 'alice');
  });
});
