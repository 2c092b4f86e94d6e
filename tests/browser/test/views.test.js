// Saved views: a view the operator makes on the operator page appears as
// a tab in a reviewer's inbox with its count, as the reviewer sees it
// (never a task it may not see); clicking the tab lists the view's tasks a
// page at a time; the count follows the change feed; a view deleted on the
// operator page (pressed twice) is gone. axe finds no serious or critical
// violation with the tabs on screen.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { startServer, launch, scenario, signIn, live, openTask } from '../support/harness.js';

const axeSource = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');
const users = {
  olga: { actor: 'olga', scope: 'operator', roles: ['finance'] },
  alice: { actor: 'alice', scope: 'reviewer', roles: ['finance'] },
  service: { actor: 'workflow', scope: 'service' },
};
// More than the inbox's page of a view (50), so that it pages.
const PAYMENTS = 53;
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

async function audit(page) {
  await page.evaluate(axeSource);
  const result = await page.evaluate(() => window.axe.run(document, { resultTypes: ['violations'] }));
  return result.violations
    .filter((v) => v.impact === 'serious' || v.impact === 'critical')
    .flatMap((v) => v.nodes.map((n) => `${v.id} (${v.impact}): ${n.target.join(' ')}`));
}

const viewRows = (page) => page.locator('#view-rows tr').evaluateAll((rows) => rows.map((r) => r.dataset.task));

test('a view the operator makes is a tab in the inbox with its count, and lists its tasks', async () => {
  await scenario(browser, 'views', async ({ page }) => {
    // Payments alice may take; one offered to legal, which she may not
    // see; one of another kind; one settled.
    for (let i = 0; i < PAYMENTS; i++) {
      await openTask(server, { id: `pay-${String(i).padStart(2, '0')}` });
    }
    await openTask(server, { id: 'pay-legal', candidate_roles: ['legal'] });
    await openTask(server, { id: 'other-1', kind: 'approve-leave' });
    await openTask(server, { id: 'pay-done' });
    const done = await server.api('service', 'POST', '/v1/tasks/pay-done/settle', { settlement: 'withdrawn' });
    assert.equal(done.status, 200);

    // The operator makes the view through the page's form.
    const o = await page('olga');
    await signIn(o, server.base, server.tokens.olga, '/operator');
    await live(o);
    await o.locator('#views-empty').waitFor();
    await o.getByLabel('Name (as the tab shows it)').fill('Payments to take');
    await o.locator('#view-form input[name="state"][value="open"]').check();
    await o.getByLabel('Kinds, separated by commas (empty: any)').fill('approve-payment');
    await o.getByLabel('Sorted by').selectOption('created_at');
    await o.getByRole('button', { name: 'Save the view' }).click();
    await o.locator('#notice').filter({ hasText: 'is made' }).waitFor();
    const row = o.locator('#views-rows tr[data-view="Payments to take"]');
    await row.filter({ hasText: 'in open; of kind approve-payment, by created at' }).waitFor();
    const stored = await server.api('alice', 'GET', `/v1/views/${encodeURIComponent('Payments to take')}`);
    assert.equal(stored.status, 200);
    assert.deepEqual(stored.body.filter.kinds, ['approve-payment']);
    assert.deepEqual(stored.body.filter.states, ['open']);
    assert.equal(stored.body.by, 'olga');

    // The reviewer's inbox shows it as a tab, counted as she sees it: the
    // legal task is not hers to see, so it is not counted.
    const a = await page('alice');
    await signIn(a, server.base, server.tokens.alice, '/');
    await live(a);
    const tab = a.getByRole('tab', { name: /Payments to take/ });
    await tab.locator('.count').filter({ hasText: String(PAYMENTS) }).waitFor();
    assert.equal(await tab.getAttribute('aria-selected'), 'false');
    await tab.click();
    assert.equal(await tab.getAttribute('aria-selected'), 'true');
    await a.locator('#view-rows tr').nth(49).waitFor();
    let ids = await viewRows(a);
    assert.equal(ids.length, 50, 'one page of the view');
    assert.deepEqual(ids.slice(0, 3), ['pay-00', 'pay-01', 'pay-02']);
    assert.ok(!ids.includes('pay-legal') && !ids.includes('other-1') && !ids.includes('pay-done'));
    await a.getByRole('button', { name: 'Show more' }).click();
    await a.locator('#view-rows tr').nth(PAYMENTS - 1).waitFor();
    ids = await viewRows(a);
    assert.equal(ids.length, PAYMENTS);
    assert.equal(new Set(ids).size, PAYMENTS, 'no task twice');
    assert.ok(!ids.includes('pay-legal'));
    await a.getByRole('button', { name: 'Show more' }).waitFor({ state: 'hidden' });
    assert.deepEqual(await audit(a), []);

    // The count follows the feed: one more payment, one fewer when she
    // claims one.
    await openTask(server, { id: 'pay-new' });
    await tab.locator('.count').filter({ hasText: String(PAYMENTS + 1) }).waitFor();
    const claimed = await server.api('alice', 'POST', '/v1/tasks/pay-00/claim', {});
    assert.equal(claimed.status, 200);
    await tab.locator('.count').filter({ hasText: String(PAYMENTS) }).waitFor();

    // Deleted on the operator page, pressed twice; gone for everyone.
    await o.getByRole('button', { name: 'Delete the view Payments to take' }).click();
    let still = await server.api('olga', 'GET', `/v1/views/${encodeURIComponent('Payments to take')}`);
    assert.equal(still.status, 200, 'one press deletes nothing');
    await o.getByRole('button', { name: 'Delete the view Payments to take' }).click();
    await o.locator('#notice').filter({ hasText: 'is deleted' }).waitFor();
    await row.waitFor({ state: 'detached' });
    still = await server.api('olga', 'GET', `/v1/views/${encodeURIComponent('Payments to take')}`);
    assert.equal(still.status, 404);
  });
});

test('a reviewer cannot make a view, and the operator page says why a view was refused', async () => {
  await scenario(browser, 'views-refused', async ({ page }) => {
    const made = await server.api('alice', 'PUT', '/v1/views/mine', {});
    assert.equal(made.status, 403);
    const first = await server.api('olga', 'PUT', '/v1/views/Taken', {});
    assert.equal(first.status, 200);
    const o = await page('olga');
    await signIn(o, server.base, server.tokens.olga, '/operator');
    await live(o);
    await o.locator('#views-rows tr[data-view="Taken"]').waitFor();
    await o.getByLabel('Name (as the tab shows it)').fill('Taken');
    await o.getByRole('button', { name: 'Save the view' }).click();
    await o.locator('#alert').filter({ hasText: 'was not made (name)' }).waitFor();
    const still = await server.api('olga', 'GET', '/v1/views/Taken');
    assert.equal(still.body.revision, 1, 'nothing changed');
  });
});
