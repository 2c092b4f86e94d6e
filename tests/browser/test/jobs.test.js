// Bulk actions on the operator page: a job over a saved view's tasks is
// confirmed with the view's exact count, started, and followed to its end
// (the progress bar full, "done N of N"); every task is changed, and a
// task's history names the job, through the API and in the holder's
// inbox. A job the sweeper never steps is
// cancelled from the page. axe finds no serious or critical violation
// with the confirmation open, nor with the progress on screen. (That a
// view the operator makes shows in a reviewer's inbox with its count is
// views.test.js's.)
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { startServer, launch, scenario, signIn, live, openTask } from '../support/harness.js';

const axeSource = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');
const users = {
  olga: { actor: 'olga', scope: 'operator', roles: ['finance'] },
  bob: { actor: 'bob', scope: 'reviewer', roles: ['finance'] },
  service: { actor: 'workflow', scope: 'service' },
};
// Enough that the job takes many of the sweeper's turns.
const TASKS = 40;
let browser;

before(async () => {
  browser = await launch();
});
after(async () => {
  await browser?.close();
});

async function audit(page) {
  await page.evaluate(axeSource);
  const result = await page.evaluate(() => window.axe.run(document, { resultTypes: ['violations'] }));
  return result.violations
    .filter((v) => v.impact === 'serious' || v.impact === 'critical')
    .flatMap((v) => v.nodes.map((n) => `${v.id} (${v.impact}): ${n.target.join(' ')}`));
}

// Opens the tasks of the view and some that are not its; saves the view.
async function seed(server, view) {
  for (let i = 0; i < TASKS; i++) await openTask(server, { id: `bulk-${String(i).padStart(2, '0')}` });
  await openTask(server, { id: 'leave-1', kind: 'approve-leave' });
  await openTask(server, { id: 'pay-done' });
  const settled = await server.api('service', 'POST', '/v1/tasks/pay-done/settle', { settlement: 'withdrawn' });
  assert.equal(settled.status, 200);
  const made = await server.api('olga', 'PUT', `/v1/views/${encodeURIComponent(view)}`, {
    filter: { states: ['open'], kinds: ['approve-payment'] },
  });
  assert.equal(made.status, 200, JSON.stringify(made.body));
}

// Chooses the view and an action on the page and opens the confirmation.
async function ask(o, view, act) {
  await o.locator(`#bulk-view option[value="${view}"]`).waitFor({ state: 'attached' });
  await o.getByLabel('Saved view', { exact: true }).selectOption(view);
  await act();
  await o.getByRole('button', { name: 'Count and confirm…' }).click();
  const dialog = o.getByRole('alertdialog', { name: 'Start this bulk action?' });
  await dialog.waitFor();
  return dialog;
}

test('a bulk assign from the operator page confirms the exact count and shows its progress to the end', async () => {
  // The sweeper runs: it is what steps the job.
  const server = await startServer(users);
  try {
    await scenario(browser, 'jobs', async ({ page }) => {
      await seed(server, 'Payments to hand on');
      const o = await page('olga');
      await signIn(o, server.base, server.tokens.olga, '/operator');
      await live(o);

      const dialog = await ask(o, 'Payments to hand on', async () => {
        await o.getByLabel('Action', { exact: true }).selectOption('assign');
        await o.getByLabel('Assign the tasks to').fill('bob');
        await o.getByLabel("The assignee's roles, separated by commas").fill('finance');
      });
      // The exact count of the view: its open payments, not the leave
      // request nor the settled payment.
      await dialog.getByText(`This will assign ${TASKS} tasks to bob.`).waitFor();
      assert.equal(await o.locator('#bulk-confirm').getAttribute('data-count'), String(TASKS));
      assert.equal(await o.evaluate(() => document.activeElement.id), 'bulk-back', 'Cancel has the focus');
      assert.deepEqual(await audit(o), [], 'the confirmation');
      // Nothing is started until it is confirmed.
      assert.deepEqual((await server.api('olga', 'GET', '/v1/jobs')).body.jobs, []);

      await dialog.getByRole('button', { name: 'Confirm' }).click();
      await dialog.waitFor({ state: 'hidden' });
      const box = o.locator('#job');
      await box.waitFor();
      const id = await box.getAttribute('data-job');
      assert.match(id, /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-/, 'named by the server');

      // Followed to its end: the state, the words and the bar.
      await o.locator('#job[data-state="done"]').waitFor({ timeout: 60000 });
      await o.locator('#job-status').filter({ hasText: `Finished: done ${TASKS} of ${TASKS}, 0 skipped, 0 failed.` }).waitFor();
      assert.equal(await o.locator('#job-bar').evaluate((b) => [b.value, b.max].join(' of ')), `${TASKS} of ${TASKS}`);
      await o.locator('#job-news').filter({ hasText: `done ${TASKS} of ${TASKS}` }).waitFor();
      assert.ok(await o.getByRole('button', { name: 'Cancel the job' }).isHidden(), 'nothing to cancel at the end');
      const listed = o.locator(`#jobs-rows tr[data-job="${id}"]`);
      await listed.filter({ hasText: `${TASKS} of ${TASKS} done` }).waitFor();
      assert.equal(await listed.getAttribute('data-state'), 'done');
      assert.deepEqual(await audit(o), [], 'the finished job');

      // Every task of the view is bob's now; the others are as they were.
      const job = await server.api('olga', 'GET', `/v1/jobs/${id}`);
      assert.equal(job.status, 200);
      assert.equal(job.body.state, 'done');
      assert.equal(job.body.by, 'olga');
      assert.deepEqual([job.body.total, job.body.done, job.body.skipped, job.body.failed], [TASKS, TASKS, 0, 0]);
      for (let i = 0; i < TASKS; i++) {
        const t = await server.api('olga', 'GET', `/v1/tasks/bulk-${String(i).padStart(2, '0')}`);
        assert.equal(t.body.assignee, 'bob', t.body.id);
        assert.equal(t.body.state, 'claimed', t.body.id);
      }
      assert.equal((await server.api('olga', 'GET', '/v1/tasks/leave-1')).body.assignee, null);
      // The task's history names the job, once.
      const history = await server.api('olga', 'GET', '/v1/tasks/bulk-07/history');
      assert.equal(history.status, 200);
      const byJob = history.body.entries.filter((e) => e.job === id);
      assert.equal(byJob.length, 1, JSON.stringify(history.body.entries));
      assert.equal(byJob[0].verb, 'assign');
      assert.equal(byJob[0].assignee, 'bob');

      // Bob holds them, and his inbox's history of one says which job.
      const b = await page('bob');
      await signIn(b, server.base, server.tokens.bob, '/');
      await live(b);
      await b.getByRole('button', { name: 'History: approve-payment (bulk-07)' }).click();
      await b.locator('#mine .card[data-task="bulk-07"] .history li[data-verb="assign"]')
        .filter({ hasText: `(bulk job ${id})` }).waitFor();
    });
  } finally {
    await server.stop();
  }
});

test('a job is cancelled from the operator page, and a refused start says why', async () => {
  // No sweeper: the job stays where it starts until it is cancelled.
  const server = await startServer(users, { extraArgs: ['--no-sweep'] });
  try {
    await scenario(browser, 'jobs-cancel', async ({ page }) => {
      await seed(server, 'Payments');
      const o = await page('olga');
      await signIn(o, server.base, server.tokens.olga, '/operator');
      await live(o);

      // The confirmation starts nothing unless confirmed: Enter presses
      // Cancel, which has the focus; Escape closes it too.
      let dialog = await ask(o, 'Payments', () => o.getByLabel('Action', { exact: true }).selectOption('priority'));
      await dialog.getByText(`This will change the priority of ${TASKS} tasks to normal.`).waitFor();
      await o.keyboard.press('Enter');
      await dialog.waitFor({ state: 'hidden' });
      dialog = await ask(o, 'Payments', async () => {});
      await o.keyboard.press('Escape');
      await dialog.waitFor({ state: 'hidden' });
      assert.deepEqual((await server.api('olga', 'GET', '/v1/jobs')).body.jobs, []);

      dialog = await ask(o, 'Payments', () => o.locator('#bulk-priority-fields').getByLabel('urgent').check());
      await dialog.getByText(`This will change the priority of ${TASKS} tasks to urgent.`).waitFor();
      await dialog.getByRole('button', { name: 'Confirm' }).click();
      await o.locator('#job[data-state="counting"]').waitFor();
      const id = await o.locator('#job').getAttribute('data-job');
      assert.deepEqual(await audit(o), [], 'a job in progress');
      await o.getByRole('button', { name: 'Cancel the job' }).click();
      await o.locator('#job[data-state="cancelled"]').waitFor();
      await o.locator('#job-status').filter({ hasText: 'Cancelled: done 0 of' }).waitFor();
      await o.locator(`#jobs-rows tr[data-job="${id}"][data-state="cancelled"]`).waitFor();
      const job = await server.api('olga', 'GET', `/v1/jobs/${id}`);
      assert.equal(job.body.state, 'cancelled');
      assert.equal((await server.api('olga', 'GET', '/v1/tasks/bulk-00')).body.priority, 'normal', 'no task changed');

      // A start the server refuses is said as the page says other refusals.
      await o.getByLabel('Action', { exact: true }).selectOption('assign');
      await o.getByLabel('Assign the tasks to').fill('x'.repeat(300));
      dialog = await ask(o, 'Payments', async () => {});
      await dialog.getByRole('button', { name: 'Confirm' }).click();
      await o.locator('#alert').filter({ hasText: 'The bulk action was not started' }).waitFor();
      assert.equal((await server.api('olga', 'GET', '/v1/jobs')).body.jobs.length, 1, 'only the cancelled job');
    });
  } finally {
    await server.stop();
  }
});
