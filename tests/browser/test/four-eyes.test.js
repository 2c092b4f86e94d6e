// Four eyes: the reviewer who raised a task never sees it offered, not in
// the queue, not by "Give me the next", not when the feed reports it; a
// reviewer it is offered to does.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import {
  startServer, launch, scenario, signIn, live, openTask, waitQueued, queueIds,
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

test('the reviewer who raised a task never sees it offered', async () => {
  await scenario(browser, 'four-eyes', async ({ page }) => {
    await openTask(server, { id: 'inv-by-alice', kind: 'approve-payment', excluded_actors: ['alice'], priority: 'urgent' });
    await openTask(server, { id: 'legal-only', kind: 'approve-contract', candidate_roles: ['legal'] });
    const a = await page('alice');
    const b = await page('bob');
    await signIn(a, server.base, server.tokens.alice);
    await signIn(b, server.base, server.tokens.bob);
    await live(a);
    await live(b);
    await waitQueued(b, 'inv-by-alice');
    // One she may take, opened after hers, so that her queue has loaded
    // past the excluded one (and the feed has carried both).
    await openTask(server, { id: 'inv-by-carol', kind: 'approve-payment', excluded_actors: ['carol'] });
    await waitQueued(a, 'inv-by-carol');
    await waitQueued(b, 'inv-by-carol');
    assert.deepEqual(await queueIds(a), ['inv-by-carol']);
    assert.deepEqual(await queueIds(b), ['inv-by-alice', 'inv-by-carol'], 'urgent first');

    // "Give me the next" gives Alice the one she may take, then nothing.
    await a.locator('#lease-seconds').fill('600');
    await a.getByRole('button', { name: 'Give me the next' }).click();
    await a.locator('#notice').filter({ hasText: 'You hold “approve-payment” (inv-by-carol).' }).waitFor();
    await a.getByRole('button', { name: 'Give me the next' }).click();
    await a.locator('#notice').filter({ hasText: 'Nothing is waiting for you.' }).waitFor();
    const t = await server.api('service', 'GET', '/v1/tasks/inv-by-alice');
    assert.equal(t.body.state, 'open');
    assert.equal(t.body.assignee, null);
    assert.equal(await a.locator('text=inv-by-alice').count(), 0, 'never on her page');
    assert.equal(await a.locator('text=legal-only').count(), 0, 'nor a task of another role');
  });
});
