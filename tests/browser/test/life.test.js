// A task's whole life in the inbox: "My tasks" comes from the server, so a
// second, fresh browser context of the same reviewer shows every task it
// holds; a decision carries its outcome and reason, the history shows
// them and every note; a holder hands a task on; the operator assigns,
// unassigns and changes due time and priority.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import {
  startServer, launch, scenario, signIn, live, openTask, waitQueued, waitMine, mineIds, eventually,
} from '../support/harness.js';

const users = {
  olga: { actor: 'olga', scope: 'operator', roles: ['finance'] },
  alice: { actor: 'alice', scope: 'reviewer', roles: ['finance'] },
  bob: { actor: 'bob', scope: 'reviewer', roles: ['finance'] },
  service: { actor: 'workflow', scope: 'service' },
};
let server;
let browser;
before(async () => {
  server = await startServer(users, { extraArgs: ['--no-sweep'] });
  browser = await launch();
});
after(async () => {
  await browser?.close();
  await server?.stop();
});

test('a fresh browser shows every task held; reject with a reason; notes and history', async () => {
  await scenario(browser, 'life', async ({ page }) => {
    for (const id of ['life-1', 'life-2', 'life-3', 'life-4']) {
      await openTask(server, { id, kind: 'approve-payment' });
    }
    // Claimed elsewhere: one by a script as alice, one by bob.
    assert.equal((await server.api('alice', 'POST', '/v1/tasks/life-1/claim', { lease_ms: 600000 })).status, 200);
    assert.equal((await server.api('bob', 'POST', '/v1/tasks/life-4/claim', { lease_ms: 600000 })).status, 200);

    const first = await page('alice-first');
    await signIn(first, server.base, server.tokens.alice);
    await live(first);
    await waitMine(first, 'life-1');
    await waitQueued(first, 'life-2');
    await first.getByRole('button', { name: 'Claim approve-payment (life-2)' }).click();
    await waitMine(first, 'life-2');

    // A second, fresh context (no storage shared): the same tasks.
    const second = await page('alice-second');
    await signIn(second, server.base, server.tokens.alice);
    await live(second);
    await waitMine(second, 'life-1');
    await waitMine(second, 'life-2');
    assert.deepEqual((await mineIds(second)).sort(), ['life-1', 'life-2']);

    // A note, shown in the task's history.
    const card = second.locator('#mine .card[data-task="life-1"]');
    await card.getByLabel('Your note').fill('Asked the vendor for the receipt');
    await card.getByRole('button', { name: 'Add note: approve-payment (life-1)' }).click();
    await card.locator('.history li[data-verb="note"]').filter({ hasText: 'Asked the vendor for the receipt' }).waitFor();

    // Reject with a reason: a decision, not a withdrawal.
    await card.getByLabel('Reason').fill('No receipt after a week');
    await card.getByRole('button', { name: 'Reject: approve-payment (life-1)' }).click();
    await second.locator('#notice').filter({ hasText: 'Rejected “approve-payment” (life-1).' }).waitFor();
    await waitMine(second, 'life-1', false);
    const t = await server.api('service', 'GET', '/v1/tasks/life-1');
    assert.equal(t.body.state, 'completed');
    assert.deepEqual(
      [t.body.decision.outcome, t.body.decision.reason, t.body.decision.by],
      ['rejected', 'No receipt after a week', 'alice'],
    );
    // The history shows the decision, its reason and the note.
    const done = second.locator('#decided .card[data-task="life-1"]');
    await done.locator('.history li[data-verb="settle"]').filter({ hasText: 'rejected' })
      .filter({ hasText: 'No receipt after a week' }).waitFor();
    await done.locator('.history li[data-verb="note"]').filter({ hasText: 'Asked the vendor' }).waitFor();
    // The first context hears of it through the feed.
    await waitMine(first, 'life-1', false);

    // Hand life-2 on to bob from the first context.
    const other = first.locator('#mine .card[data-task="life-2"]');
    await other.getByLabel('Hand to (their name)').fill('bob');
    await other.getByRole('button', { name: 'Delegate: approve-payment (life-2)' }).click();
    await first.locator('#notice').filter({ hasText: 'is now bob' }).waitFor();
    await waitMine(first, 'life-2', false);
    await waitMine(second, 'life-2', false);
    assert.equal((await server.api('service', 'GET', '/v1/tasks/life-2')).body.assignee, 'bob');
  });
});

test('the operator assigns, unassigns and changes due time and priority', async () => {
  await scenario(browser, 'life-operator', async ({ page }) => {
    await openTask(server, { id: 'op-1', kind: 'approve-payment' });
    const o = await page('olga');
    await signIn(o, server.base, server.tokens.olga, '/operator');
    await live(o);
    const a = await page('alice');
    await signIn(a, server.base, server.tokens.alice);
    await live(a);

    await o.getByLabel('Id of the task to change').fill('op-1');
    await o.locator('#ch-task').press('Tab');
    await o.locator('#ch-task-state').filter({ hasText: 'held by nobody' }).waitFor();
    await o.getByLabel('Assign to').fill('alice');
    await o.getByLabel('Their roles, separated by commas').fill('finance');
    await o.getByRole('button', { name: 'Assign', exact: true }).click();
    await o.locator('#notice').filter({ hasText: 'alice now holds “approve-payment” (op-1).' }).waitFor();
    // Alice's inbox shows it at once, from the feed.
    await waitMine(a, 'op-1');

    await o.getByLabel('Priority').selectOption('urgent');
    await o.getByLabel(/^Due/).fill('2031-01-02T03:04');
    await o.getByRole('button', { name: 'Save changes' }).click();
    await o.locator('#notice').filter({ hasText: 'is now urgent' }).waitFor();
    let t = await server.api('service', 'GET', '/v1/tasks/op-1');
    assert.equal(t.body.priority, 'urgent');
    assert.equal(typeof t.body.due_at, 'number');

    await o.getByRole('button', { name: 'Unassign' }).click();
    await o.locator('#notice').filter({ hasText: 'is back in the queue' }).waitFor();
    await waitMine(a, 'op-1', false);
    await waitQueued(a, 'op-1');
    t = await server.api('service', 'GET', '/v1/tasks/op-1');
    assert.equal(t.body.state, 'open');
    await eventually(async () => (await server.api('service', 'GET', '/v1/tasks/op-1')).body.revision >= 4, 'four revisions');
  });
});
