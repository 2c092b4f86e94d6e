// The operator's view: the counters (moving with the feed), the overdue
// list, the consistency check, and take-over, with its refusals in words.
// A reviewer's token is told the page is not for it.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, launch, scenario, signIn, live, openTask, eventually } from '../support/harness.js';

const users = {
  olga: { actor: 'olga', scope: 'operator', roles: ['finance'] },
  alice: { actor: 'alice', scope: 'reviewer', roles: ['finance'] },
  bob: { actor: 'bob', scope: 'reviewer', roles: ['finance'] },
  service: { actor: 'workflow', scope: 'service' },
};
let server;
let browser;
before(async () => {
  // Overdue tasks stay overdue for the overdue list: no sweeper here.
  server = await startServer(users, { extraArgs: ['--no-sweep'] });
  browser = await launch();
});
after(async () => {
  await browser?.close();
  await server?.stop();
});

const count = async (p, id) => Number(await p.locator(`#${id}`).textContent());

test('counters, overdue list, check and take-over', async () => {
  await scenario(browser, 'operator', async ({ page }) => {
    await openTask(server, { id: 'late-1', kind: 'approve-payment', due_at: Date.now() - 3600000 });
    await openTask(server, { id: 'pay-op', kind: 'approve-payment', excluded_actors: ['alice'] });
    const o = await page('olga');
    await signIn(o, server.base, server.tokens.olga, '/operator');
    await live(o);
    await o.locator('#overdue-rows tr[data-task="late-1"]').waitFor();
    await eventually(async () => (await count(o, 'open-count')) === 2, 'two open tasks');
    assert.equal(await count(o, 'leased-count'), 0);

    // Bob claims under a lease elsewhere: the counters move, no reload.
    const claimed = await server.api('bob', 'POST', '/v1/tasks/pay-op/claim', { lease_ms: 600000 });
    assert.equal(claimed.status, 200);
    await eventually(async () => (await count(o, 'leased-count')) === 1, 'the leased count to move');
    assert.notEqual(await o.locator('#next-lease-end').textContent(), 'none');

    await o.getByRole('button', { name: 'Run the check' }).click();
    await o.locator('#check-result').filter({ hasText: 'Consistent: nothing is out of place' }).waitFor();

    // Taking over for Alice, who raised it, is refused in words.
    await o.getByLabel('Task id').fill('pay-op');
    await o.getByLabel('Task id').press('Tab');
    await o.locator('#to-task-state').filter({ hasText: 'held by bob' }).waitFor();
    assert.equal(await o.getByLabel('From (who holds it now)').inputValue(), 'bob');
    await o.getByLabel('To (leave empty for yourself)').fill('alice');
    await o.getByRole('button', { name: 'Take over' }).click();
    await o.locator('#alert').filter({ hasText: 'alice raised this, so someone else must approve it.' }).waitFor();
    let t = await server.api('service', 'GET', '/v1/tasks/pay-op');
    assert.equal(t.body.assignee, 'bob', 'nothing changed');

    // From someone who does not hold it: refused in words.
    await o.getByLabel('To (leave empty for yourself)').fill('');
    await o.getByLabel('From (who holds it now)').fill('carol');
    await o.getByRole('button', { name: 'Take over' }).click();
    await o.locator('#alert').filter({ hasText: 'carol does not hold this task.' }).waitFor();

    // The operator takes it over for itself.
    await o.getByLabel('From (who holds it now)').fill('bob');
    await o.getByRole('button', { name: 'Take over' }).click();
    await o.locator('#notice').filter({ hasText: 'You now hold “approve-payment” (pay-op), taken over from bob.' }).waitFor();
    t = await server.api('service', 'GET', '/v1/tasks/pay-op');
    assert.equal(t.body.assignee, 'olga');
    await eventually(async () => (await count(o, 'leased-count')) === 0, 'the take-over without a lease to count');
  });
});

test('a reviewer token is told the operator page is not for it', async () => {
  await scenario(browser, 'operator-as-reviewer', async ({ page }) => {
    const a = await page('alice');
    await signIn(a, server.base, server.tokens.alice, '/operator');
    await a.locator('#alert').filter({ hasText: "This page is for operator tokens; yours is a reviewer's." }).waitFor();
    assert.equal(await a.locator('#app').isVisible(), false);
  });
});
