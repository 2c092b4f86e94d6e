// A task's reminders and escalation chain, fired by the server's own
// sweeper, seen live in the reviewer's inbox. The server runs on the real
// clock with clock overrides allowed: the task is created in the past, and
// the service moves its due time so that one more step's instant has just
// passed; the sweeper, woken by that commit, fires it. So each step fires
// when the test says, and the test waits for what the page shows, never
// for a span of time.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import {
  startServer, launch, scenario, signIn, live, openTask, waitQueued, eventually,
} from '../support/harness.js';

const HOUR = 3600000;
const users = {
  alice: { actor: 'alice', scope: 'reviewer', roles: ['finance'] },
  service: { actor: 'workflow', scope: 'service' },
};
let server;
let browser;
before(async () => {
  server = await startServer(users, { extraArgs: ['--allow-clock-override'] });
  browser = await launch();
});
after(async () => {
  await browser?.close();
  await server?.stop();
});

test('A reminder and a two-step escalation chain seen firing in the inbox', async () => {
  await scenario(browser, 'reminders', async ({ page }) => {
    const now = Date.now();
    // Due tomorrow: nothing is owed yet.
    await openTask(server, {
      id: 'chain-1',
      created_at: now - 48 * HOUR,
      due_at: now + 24 * HOUR,
      remind_before: [HOUR],
      escalation: [
        { after_due_ms: 0, action: { escalate: ['leads'] } },
        { after_due_ms: 4 * HOUR, action: { escalate: ['directors'] } },
      ],
    });
    const p = await page('alice');
    await signIn(p, server.base, server.tokens.alice);
    await live(p);
    await waitQueued(p, 'chain-1');
    // The queue says what the task will do, and when.
    const row = p.locator('#queue-rows tr[data-task="chain-1"]');
    await row.locator('.timeline')
      .filter({ hasText: 'reminds 1 h before due; at due escalates to leads; at due + 4 h to directors' })
      .waitFor();
    assert.equal(await p.locator('#steps-section').isHidden(), true);

    const steps = p.locator('#steps li[data-task="chain-1"]');
    const move = async (dueAt) => {
      const r = await server.api('service', 'PATCH', '/v1/tasks/chain-1', { due_at: dueAt });
      assert.equal(r.status, 200, JSON.stringify(r.body));
    };
    // Due in half an hour: the reminder's instant has passed.
    await move(now + HOUR / 2);
    await steps.filter({ hasText: 'Reminder: due in 1 h' }).waitFor();
    await p.locator('#notice').filter({ hasText: 'Reminder: due in 1 h' }).waitFor();

    // A minute overdue: the chain's first step fires.
    await move(now - 60000);
    await steps.filter({ hasText: 'Escalated to leads (chain step 1)' }).waitFor();
    // Five hours overdue: its second step's instant has passed too.
    await move(now - 5 * HOUR);
    await steps.filter({ hasText: 'Escalated to directors (chain step 2)' }).waitFor();
    // Newest first, each once.
    await eventually(async () => (await steps.count()) === 3, 'three steps listed');
    const said = await steps.allTextContents();
    assert.match(said[0], /Escalated to directors \(chain step 2\) — “approve-payment” \(chain-1\)/);
    assert.match(said[1], /Escalated to leads \(chain step 1\)/);
    assert.match(said[2], /Reminder: due in 1 h/);

    // Still in alice's queue (her role stays a candidate), escalated.
    await waitQueued(p, 'chain-1');
    const t = await server.api('service', 'GET', '/v1/tasks/chain-1');
    assert.equal(t.body.state, 'escalated');
    assert.equal(t.body.steps_done, 3);
    assert.deepEqual(t.body.candidate_roles, ['finance', 'leads', 'directors']);

    // Claimed, its history tells the same story in words.
    await p.getByRole('button', { name: 'Claim approve-payment (chain-1)' }).click();
    const card = p.locator('#mine .card[data-task="chain-1"]');
    await card.waitFor();
    await card.getByRole('button', { name: 'History: approve-payment (chain-1)' }).click();
    const history = card.locator('.history li.step');
    await history.filter({ hasText: 'Escalated to directors (chain step 2)' }).waitFor();
    assert.deepEqual(
      (await history.allTextContents()).map((s) => s.replace(/^.*?(Reminder|Escalated)/, '$1')),
      ['Reminder: due in 1 h', 'Escalated to leads (chain step 1)', 'Escalated to directors (chain step 2)'],
    );
  });
});
