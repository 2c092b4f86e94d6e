// Two reviewers in two browser contexts press "Claim" on one task at once:
// exactly one holds it, and the other is told who took it, in words, and
// the task leaves their queue.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import {
  startServer, launch, scenario, signIn, live, openTask, waitQueued, waitMine, mineIds, queueIds,
} from '../support/harness.js';

const users = {
  alice: { actor: 'alice', scope: 'reviewer', roles: ['finance'] },
  bob: { actor: 'bob', scope: 'reviewer', roles: ['finance'] },
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

test('two reviewers claim one task: one holds it, the other is told who took it', async () => {
  await scenario(browser, 'race', async ({ page }) => {
    await openTask(server, { id: 'pay-race', kind: 'approve-payment' });
    const a = await page('alice');
    const b = await page('bob');
    for (const [p, who] of [[a, 'alice'], [b, 'bob']]) {
      await signIn(p, server.base, server.tokens[who]);
      await live(p);
      await waitQueued(p, 'pay-race');
    }
    // Each page's claim is held at the network until both have been sent,
    // so the two claims meet at the server whatever order the clicks ran in.
    let held = [];
    let release;
    const both = new Promise((r) => { release = r; });
    for (const p of [a, b]) {
      await p.route('**/v1/tasks/*/claim', async (route) => {
        held.push(route);
        if (held.length === 2) release();
        await both;
        await route.continue();
      });
    }
    // Both answers, not just both sends: until then a claim may still be on
    // its way to the server.
    const answered = [a, b].map((p) => p.waitForResponse(
      (r) => r.request().method() === 'POST' && /\/v1\/tasks\/[^/]+\/claim$/.test(new URL(r.url()).pathname),
    ));
    await Promise.all([
      a.getByRole('button', { name: 'Claim approve-payment (pay-race)' }).click(),
      b.getByRole('button', { name: 'Claim approve-payment (pay-race)' }).click(),
    ]);
    await both;
    const statuses = (await Promise.all(answered)).map((r) => r.status()).sort();
    assert.deepEqual(statuses, [200, 409], 'one claim holds, the other is refused');

    const task = await server.api('service', 'GET', '/v1/tasks/pay-race');
    assert.equal(task.body.state, 'claimed');
    const winner = task.body.assignee;
    assert.ok(winner === 'alice' || winner === 'bob', winner);
    const [won, lost] = winner === 'alice' ? [a, b] : [b, a];

    await waitMine(won, 'pay-race');
    await lost.locator('#alert').filter({ hasText: `${winner} took it a moment ago.` }).waitFor();
    await waitQueued(lost, 'pay-race', false);
    assert.deepEqual(await mineIds(lost), []);
    assert.deepEqual(await queueIds(won), []);
    // Exactly one holds it, still.
    const again = await server.api('service', 'GET', '/v1/tasks/pay-race');
    assert.equal(again.body.assignee, winner);
  });
});

test('a claim made on another page leaves my queue without a reload', async () => {
  await scenario(browser, 'live-claim', async ({ page }) => {
    const a = await page('alice');
    await signIn(a, server.base, server.tokens.alice);
    await live(a);
    await openTask(server, { id: 'pay-live', kind: 'approve-payment' });
    // A task opened after the page loaded arrives by the feed.
    await waitQueued(a, 'pay-live');
    const claimed = await server.api('bob', 'POST', '/v1/tasks/pay-live/claim', { lease_ms: 600000 });
    assert.equal(claimed.status, 200);
    await waitQueued(a, 'pay-live', false);
  });
});

test('a claim made as me elsewhere shows up under My tasks without a reload', async () => {
  await scenario(browser, 'live-mine', async ({ page }) => {
    await openTask(server, { id: 'pay-elsewhere', kind: 'approve-payment' });
    const a = await page('alice');
    await signIn(a, server.base, server.tokens.alice);
    await live(a);
    await waitQueued(a, 'pay-elsewhere');
    // Alice claims in another tab (here, straight through the API).
    const claimed = await server.api('alice', 'POST', '/v1/tasks/pay-elsewhere/claim', { lease_ms: 600000 });
    assert.equal(claimed.status, 200);
    await waitMine(a, 'pay-elsewhere');
    await waitQueued(a, 'pay-elsewhere', false);
    // And a reload keeps it: the page asks the server for what it held.
    await a.reload();
    await waitMine(a, 'pay-elsewhere');
  });
});
