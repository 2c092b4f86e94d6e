// Accessibility: axe-core (from npm) finds no serious or critical
// violation on either page, signed out and signed in with tasks on
// screen, at a desktop's width and a phone's; at a phone's width nothing
// needs a sideways scroll.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import {
  startServer, launch, scenario, signIn, live, openTask, waitQueued, waitMine, shot,
} from '../support/harness.js';

const axeSource = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');
const users = {
  alice: { actor: 'alice', scope: 'reviewer', roles: ['finance'] },
  olga: { actor: 'olga', scope: 'operator', roles: ['finance'] },
  service: { actor: 'workflow', scope: 'service' },
};
const PHONE = { width: 375, height: 740 };
let server;
let browser;
before(async () => {
  // Overdue tasks stay overdue for the overdue list: no sweeper here.
  server = await startServer(users, { extraArgs: ['--no-sweep'] });
  browser = await launch();
  const hour = 3600000;
  await openTask(server, { id: 'pay-a11y-1', kind: 'approve-payment', priority: 'urgent', due_at: Date.now() + 4 * hour });
  await openTask(server, { id: 'pay-a11y-2', kind: 'approve-refund', priority: 'high', justification: { reason: 'duplicate charge', amount: 80 } });
  await openTask(server, { id: 'pay-a11y-3', kind: 'approve-payment', due_at: Date.now() - hour });
});
after(async () => {
  await browser?.close();
  await server?.stop();
});

// Runs axe in the page (evaluated by the driver, so the page's CSP, which
// forbids inline script, is not loosened for it). Answers the serious and
// critical violations, each as "rule: target".
async function audit(page) {
  await page.evaluate(axeSource);
  const result = await page.evaluate(() => window.axe.run(document, { resultTypes: ['violations'] }));
  return result.violations
    .filter((v) => v.impact === 'serious' || v.impact === 'critical')
    .flatMap((v) => v.nodes.map((n) => `${v.id} (${v.impact}): ${n.target.join(' ')}`));
}

async function noSidewaysScroll(page) {
  const [scroll, width] = await page.evaluate(() => [document.documentElement.scrollWidth, window.innerWidth]);
  assert.ok(scroll <= width, `the page is ${scroll}px wide in a ${width}px window`);
}

for (const [label, viewport] of [['desktop', undefined], ['phone', PHONE]]) {
  test(`the inbox has no serious or critical accessibility violation (${label})`, async () => {
    await scenario(browser, `a11y-inbox-${label}`, async ({ page }) => {
      const p = await page(`alice-${label}`, viewport ? { viewport } : {});
      await p.goto(`${server.base}/`);
      await p.locator('#signin').waitFor();
      assert.deepEqual(await audit(p), [], 'the sign-in form');
      await signIn(p, server.base, server.tokens.alice);
      await live(p);
      await waitQueued(p, 'pay-a11y-2');
      await p.getByRole('button', { name: 'Claim approve-payment (pay-a11y-1)' }).click();
      await waitMine(p, 'pay-a11y-1');
      await p.locator('#mine .card summary').first().click();
      assert.deepEqual(await audit(p), [], 'the inbox with a held task and a queue');
      // The README's picture (docs/inbox.png is a copy of it).
      if (!viewport) await shot(p, 'readme', 'inbox');
      if (viewport) await noSidewaysScroll(p);
      // Give it back for the next run.
      await p.getByRole('button', { name: 'Release: approve-payment (pay-a11y-1)' }).click();
      await waitMine(p, 'pay-a11y-1', false);
    });
  });

  test(`the operator page has no serious or critical accessibility violation (${label})`, async () => {
    await scenario(browser, `a11y-operator-${label}`, async ({ page }) => {
      const p = await page(`olga-${label}`, viewport ? { viewport } : {});
      // A schedule on screen, and one paused with its note.
      for (const [id, zone] of [[`nightly-${label}`, 'America/New_York'], [`paused-${label}`, 'Europe/London']]) {
        const added = await server.api('olga', 'POST', '/v1/schedules', {
          id, run: 'a11y-run', zone, recurrence: { kind: 'cron', expr: '30 2 * * *' },
        });
        assert.equal(added.status, 201);
      }
      const paused = await server.api('olga', 'POST', `/v1/schedules/paused-${label}/pause`, { note: 'the warehouse is shut' });
      assert.equal(paused.status, 200);
      await signIn(p, server.base, server.tokens.olga, '/operator');
      await live(p);
      await p.locator('#overdue-rows tr[data-task="pay-a11y-3"]').waitFor();
      await p.locator(`#schedules-rows tr[data-schedule="paused-${label}"]`).filter({ hasText: 'paused: the warehouse is shut' }).waitFor();
      await p.getByRole('button', { name: 'Run the check' }).click();
      await p.locator('#check-result').filter({ hasText: 'Consistent' }).waitFor();
      assert.deepEqual(await audit(p), []);
      if (viewport) await noSidewaysScroll(p);
    });
  });
}
