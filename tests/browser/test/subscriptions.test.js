// The operator page's webhook subscriptions, against a receiver run by the
// test: a subscription shows its state, its lag and its last attempt as
// deliveries arrive; Pause, Resume and Delete (pressed twice) act through
// the API and the row follows; axe finds no serious or critical violation
// with the table on screen, at a desktop's width and a phone's.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { startServer, launch, scenario, signIn, live, openTask, eventually } from '../support/harness.js';

const axeSource = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');
const users = {
  olga: { actor: 'olga', scope: 'operator', roles: ['finance'] },
  service: { actor: 'workflow', scope: 'service' },
};
const PHONE = { width: 375, height: 740 };
let server;
let browser;
let receiver;
const received = [];

before(async () => {
  // A receiver on loopback, answering 204 to every delivery.
  receiver = createServer((req, res) => {
    let body = '';
    req.on('data', (c) => { body += c; });
    req.on('end', () => {
      received.push({ id: req.headers['webhook-id'], body });
      res.writeHead(204).end();
    });
  });
  await new Promise((ok) => receiver.listen(0, '127.0.0.1', ok));
  server = await startServer(users, {
    extraArgs: ['--no-sweep', '--webhooks-allow-http', '--webhooks-allow-range', '127.0.0.0/8'],
  });
  browser = await launch();
});
after(async () => {
  await browser?.close();
  await server?.stop();
  await new Promise((ok) => (receiver ? receiver.close(ok) : ok()));
});

async function audit(page) {
  await page.evaluate(axeSource);
  const result = await page.evaluate(() => window.axe.run(document, { resultTypes: ['violations'] }));
  return result.violations
    .filter((v) => v.impact === 'serious' || v.impact === 'critical')
    .flatMap((v) => v.nodes.map((n) => `${v.id} (${v.impact}): ${n.target.join(' ')}`));
}

async function subscribe(path, filter) {
  const r = await server.api('olga', 'POST', '/v1/subscriptions', {
    url: `http://127.0.0.1:${receiver.address().port}${path}`, filter,
  });
  assert.equal(r.status, 201, JSON.stringify(r.body));
  return r.body.subscription.id;
}

test('a subscription shows its deliveries, and pauses, resumes and deletes from the page', async () => {
  await scenario(browser, 'subscriptions', async ({ page }) => {
    const id = await subscribe('/settled', { timers: false, settling_only: true, kinds: ['approve-payment'] });
    const o = await page('olga');
    await signIn(o, server.base, server.tokens.olga, '/operator');
    await live(o);
    const row = o.locator(`#subscriptions-rows tr[data-subscription="${id}"]`);
    await row.filter({ hasText: 'settled tasks, only of kinds approve-payment' }).waitFor();
    await row.filter({ hasText: 'none yet' }).waitFor();

    // A task settles: its settling change arrives, and the row says so.
    await openTask(server, { id: 'hook-1' });
    const settled = await server.api('service', 'POST', '/v1/tasks/hook-1/settle', { settlement: 'withdrawn' });
    assert.equal(settled.status, 200);
    await eventually(() => received.some((r) => JSON.parse(r.body).type === 'task.settle'), 'the settle delivered');
    await row.filter({ hasText: '204 in' }).waitFor();
    await row.filter({ hasText: 'caught up' }).waitFor();

    await o.getByRole('button', { name: `Pause ${id}` }).click();
    await o.locator('#notice').filter({ hasText: 'is paused' }).waitFor();
    await row.filter({ hasText: 'paused by olga' }).waitFor();
    let shown = await server.api('olga', 'GET', `/v1/subscriptions/${id}`);
    assert.equal(shown.body.state, 'paused');

    await o.getByRole('button', { name: `Resume ${id}` }).click();
    await o.locator('#notice').filter({ hasText: 'is resumed' }).waitFor();
    await o.getByRole('button', { name: `Pause ${id}` }).waitFor();
    shown = await server.api('olga', 'GET', `/v1/subscriptions/${id}`);
    assert.equal(shown.body.state, 'active');

    // Delete asks twice.
    await o.getByRole('button', { name: `Delete ${id}` }).click();
    shown = await server.api('olga', 'GET', `/v1/subscriptions/${id}`);
    assert.equal(shown.status, 200, 'one press deletes nothing');
    await o.getByRole('button', { name: `Really delete ${id}` }).click();
    await o.locator('#notice').filter({ hasText: 'is deleted' }).waitFor();
    await row.waitFor({ state: 'detached' });
    await o.locator('#subscriptions-empty').waitFor();
    shown = await server.api('olga', 'GET', `/v1/subscriptions/${id}`);
    assert.equal(shown.status, 404);
  });
});

for (const [label, viewport] of [['desktop', undefined], ['phone', PHONE]]) {
  test(`the subscriptions have no serious or critical accessibility violation (${label})`, async () => {
    await scenario(browser, `a11y-subscriptions-${label}`, async ({ page }) => {
      const id = await subscribe(`/a11y/${label}/${'long-path-segment-'.repeat(6)}`, {});
      const paused = await server.api('olga', 'POST', `/v1/subscriptions/${id}/pause`, { note: 'the receiver is being upgraded' });
      assert.equal(paused.status, 200);
      const p = await page(`olga-${label}`, viewport ? { viewport } : {});
      await signIn(p, server.base, server.tokens.olga, '/operator');
      await live(p);
      await p.locator(`#subscriptions-rows tr[data-subscription="${id}"]`)
        .filter({ hasText: 'the receiver is being upgraded' }).waitFor();
      assert.deepEqual(await audit(p), []);
      if (viewport) {
        const [scroll, width] = await p.evaluate(() => [document.documentElement.scrollWidth, window.innerWidth]);
        assert.ok(scroll <= width, `the page is ${scroll}px wide in a ${width}px window`);
      }
    });
  });
}
