// The lease: a claim under a short lease counts down, "Keep working"
// extends it, and left alone it lapses (the server's sweeper reclaims it)
// and the task comes back to the queue on both pages with no reload. Then
// a reviewer whose lease lapsed while someone else claimed the task
// presses "Approve": they are told it is no longer theirs, and nothing
// changes.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import {
  startServer, launch, scenario, signIn, live, openTask, waitQueued, waitMine, mineIds, eventually,
} from '../support/harness.js';

const users = {
  alice: { actor: 'alice', scope: 'reviewer', roles: ['finance'] },
  bob: { actor: 'bob', scope: 'reviewer', roles: ['finance'] },
  service: { actor: 'workflow', scope: 'service' },
};
// Long enough that "Keep working" is pressed well inside it on a loaded
// machine; short enough that the test waits for a lapse in seconds.
const LEASE_SECONDS = 8;
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

const leaseUntil = async (p, id) => Number(await p.locator(`#mine .card[data-task="${id}"]`).getAttribute('data-lease-until'));
const left = async (p, id) => {
  const text = await p.locator(`#mine .card[data-task="${id}"] .left`).textContent();
  const [m, s] = text.split(':').map(Number);
  return m * 60 + s;
};

test('a short lease counts down, keep working extends it, and a lapse returns the task to both queues', async () => {
  await scenario(browser, 'lease', async ({ page }) => {
    await openTask(server, { id: 'pay-lease', kind: 'approve-payment' });
    const a = await page('alice');
    const b = await page('bob');
    await signIn(a, server.base, server.tokens.alice);
    await signIn(b, server.base, server.tokens.bob);
    await live(a);
    await live(b);
    await waitQueued(b, 'pay-lease');

    await a.locator('#lease-seconds').fill(String(LEASE_SECONDS));
    await a.getByRole('button', { name: 'Claim approve-payment (pay-lease)' }).click();
    await waitMine(a, 'pay-lease');
    await waitQueued(b, 'pay-lease', false);

    // It counts down.
    const first = await left(a, 'pay-lease');
    assert.ok(first <= LEASE_SECONDS && first > 0, `${first}`);
    await eventually(async () => (await left(a, 'pay-lease')) < first, 'the countdown to move');

    // Keep working moves the lease end later, and the server agrees.
    const before = await leaseUntil(a, 'pay-lease');
    await a.getByRole('button', { name: 'Keep working: approve-payment (pay-lease)' }).click();
    await eventually(async () => (await leaseUntil(a, 'pay-lease')) > before, 'the lease end to move');
    const renewed = await server.api('service', 'GET', '/v1/tasks/pay-lease');
    assert.equal(renewed.body.assignee, 'alice');
    assert.equal(renewed.body.lease_until, await leaseUntil(a, 'pay-lease'));
    assert.ok(renewed.body.lease_until > before);

    // Left alone, it lapses: back in both queues, out of Alice's tasks,
    // and she is told why, all without a reload.
    await waitMine(a, 'pay-lease', false);
    await waitQueued(a, 'pay-lease');
    await waitQueued(b, 'pay-lease');
    await a.locator('#notice').filter({ hasText: 'ran out: it went back to the queue' }).waitFor();
    const lapsed = await server.api('service', 'GET', '/v1/tasks/pay-lease');
    assert.equal(lapsed.body.state, 'open');
    assert.equal(lapsed.body.assignee, null);
  });
});

test('approving after the lease lapsed and someone else claimed it is refused in words, and changes nothing', async () => {
  await scenario(browser, 'lapsed-holder', async ({ page }) => {
    await openTask(server, { id: 'pay-late', kind: 'approve-payment' });
    const a = await page('alice');
    // Alice's page loses its live connection (a laptop lid closed, a proxy
    // cut): it cannot hear of the lapse, so her card stays on screen.
    await a.route('**/v1/events', (route) => route.abort());
    await signIn(a, server.base, server.tokens.alice);
    await waitQueued(a, 'pay-late');
    await a.locator('#lease-seconds').fill('2');
    await a.getByRole('button', { name: 'Claim approve-payment (pay-late)' }).click();
    await waitMine(a, 'pay-late');

    // The lease lapses and is reclaimed (by the server's sweeper, or by
    // this sweep of the test's own once the lease has ended), and Bob
    // takes the task.
    await eventually(async () => {
      const t = await server.api('service', 'GET', '/v1/tasks/pay-late');
      if (t.body.state === 'open') return true;
      await server.api('service', 'POST', '/v1/reclaim-lapsed', {});
      return false;
    }, 'the lapsed lease to be reclaimed');
    const claimed = await server.api('bob', 'POST', '/v1/tasks/pay-late/claim', { lease_ms: 600000 });
    assert.equal(claimed.status, 200);
    assert.deepEqual(await mineIds(a), ['pay-late'], 'the stale card is still there');

    await a.getByRole('button', { name: 'Approve: approve-payment (pay-late)' }).click();
    await a.locator('#alert').filter({ hasText: 'is no longer yours: bob holds it now. Nothing was changed.' }).waitFor();
    await waitMine(a, 'pay-late', false);
    const after = await server.api('service', 'GET', '/v1/tasks/pay-late');
    assert.equal(after.body.state, 'claimed');
    assert.equal(after.body.assignee, 'bob');
    // The aborted event stream is the browser's own console note, not the page's.
    a.trouble = a.trouble.filter((t) => !/net::ERR_FAILED/.test(t));
  });
});
