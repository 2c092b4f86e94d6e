// Bulk jobs through the package, on both stores: a job started over a
// filter and run to its end with progress, each task changed once with its
// history naming the job; a job resumed on a reopened SQLite file after
// its process stopped half-way; cancel, get, list and runnable; a job over
// no task; bad input refused naming the field. The rules themselves are
// pinned by tests/scenarios/jobs.json.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';

import { InvalidArgument, MemoryStore, SqliteStore, StoreError, open } from '../src/index.js';

const dir = mkdtempSync(join(tmpdir(), 'leasehold-jobs-'));
after(() => rmSync(dir, { recursive: true, force: true }));

const STORES = {
  memory: () => new MemoryStore(),
  sqlite: (name) => new SqliteStore(join(dir, `${name}.db`), { durability: 'none' }),
};

/** `n` open tasks `t00`…, kind `approve` (even) or `review` (odd), created at 100 + i. */
function fill(t, n) {
  for (let i = 0; i < n; i++) {
    t.open({ id: `t${String(i).padStart(2, '0')}`, run: 'r', kind: i % 2 ? 'review' : 'approve', createdAt: 100 + i });
  }
}

/** How many of a task's history entries name `job`. */
const byJob = (t, id, job) => t.history(id).filter((e) => e.job === job).length;

for (const [kind, make] of Object.entries(STORES)) {
  test(`a job runs to its end with progress, each task changed once and its history naming the job (${kind})`, () => {
    const engine = open({ store: make(`run-${kind}`), clock: () => 1 });
    const t = engine.tenant('acme');
    fill(t, 10);
    const started = t.startJob('urgent', { kinds: ['approve'] }, { update: { priority: 'urgent' } }, 'ops', 1000);
    assert.deepEqual(started, {
      id: 'urgent',
      filter: {
        states: [], kinds: ['approve'], role: null, assignee: null, case: null, run: null, priorityAtLeast: null,
        dueBefore: null, dueAfter: null, createdBefore: null, createdAfter: null, overdueAt: null,
      },
      action: { update: { priority: 'urgent' } },
      by: 'ops',
      state: 'counting',
      total: 0,
      done: 0,
      skipped: 0,
      failed: 0,
      lastFailures: [],
      lastSkipped: [],
      createdAt: 1000,
    });
    assert.deepEqual(t.runnableJobs(), ['urgent']);
    const seen = [];
    const ended = t.runJob('urgent', { onProgress: (j) => seen.push([j.state, j.done]) });
    // One count, then one task a step.
    assert.deepEqual(seen, [['running', 0], ['running', 1], ['running', 2], ['running', 3], ['running', 4], ['done', 5]]);
    assert.deepEqual([ended.state, ended.total, ended.done, ended.skipped, ended.failed], ['done', 5, 5, 0, 0]);
    for (let i = 0; i < 10; i++) {
      const id = `t${String(i).padStart(2, '0')}`;
      assert.equal(t.get(id).priority, i % 2 ? 'normal' : 'urgent', id);
      assert.equal(byJob(t, id, 'urgent'), i % 2 ? 0 : 1, id);
    }
    assert.deepEqual(t.runnableJobs(), []);
    // A job with no work left answers as it stands.
    assert.deepEqual(t.runJob('urgent'), ended);
    engine.close();
  });

  test(`cancel, get, list and runnable; a job over no task; bad input named (${kind})`, () => {
    const engine = open({ store: make(`misc-${kind}`), clock: () => 1 });
    const t = engine.tenant('acme');
    fill(t, 6);
    t.claim('t01', 'ann', []);
    t.claim('t03', 'ann', []);
    const assigned = t.runJob(t.startJob('to-bob', { states: ['open'] }, { assign: { to: 'bob' } }, null, 1000).id);
    assert.deepEqual([assigned.done, assigned.action], [4, { assign: { to: 'bob', roles: [], overrideRoles: false } }]);
    assert.deepEqual(t.search({ filter: { assignee: { actor: 'bob' } }, limit: 10 }).tasks.length, 4);

    t.startJob('back', { assignee: { actor: 'bob' } }, 'release', null, 1000);
    t.stepJob('back');
    const one = t.stepJob('back');
    assert.deepEqual([one.state, one.total, one.done], ['running', 4, 1]);
    const cancelled = t.cancelJob('back');
    assert.deepEqual([cancelled.state, cancelled.done], ['cancelled', 1]);
    assert.deepEqual(t.runJob('back'), cancelled);
    assert.equal(t.search({ filter: { assignee: { actor: 'bob' } }, limit: 10 }).tasks.length, 3);

    const empty = t.startJob('none', { kinds: ['nothing'] }, 'withdraw', null, 1000);
    assert.deepEqual([empty.state, empty.total], ['counting', 0]);
    assert.deepEqual([t.stepJob('none').state, t.getJob('none').total], ['done', 0]);

    t.startJob('later', {}, 'escalate', null, 1000);
    assert.deepEqual(t.runnableJobs(10), ['later']);
    assert.deepEqual(t.listJobs().map((j) => [j.id, j.state]), [
      ['back', 'cancelled'], ['later', 'counting'], ['none', 'done'], ['to-bob', 'done'],
    ]);
    assert.deepEqual(t.listJobs(2, 'back').map((j) => j.id), ['later', 'none']);
    assert.equal(t.getJob('nope'), null);

    const invalid = (field) => (e) => e instanceof StoreError && e.case === 'invalid' && e.detail.startsWith(field);
    assert.throws(() => t.startJob('later', {}, 'release', null, 1000), invalid('id: a job "later" exists'));
    assert.throws(() => t.startJob('x', {}, { assign: { to: '' } }, null, 1000), invalid('action.assign.to'));
    assert.throws(() => t.startJob('x', { kinds: [''] }, 'release', null, 1000), invalid('filter.kinds'));
    assert.throws(() => t.startJob('x', {}, 'release', '', 1000), invalid('by'));
    assert.throws(() => t.listJobs(0), invalid('limit'));
    assert.throws(() => t.stepJob('nope'), (e) => e instanceof StoreError && e.case === 'not-found' && e.detail === 'nope');
    assert.throws(() => t.cancelJob('nope'), (e) => e instanceof StoreError && e.case === 'not-found');
    // Refused by this host before the guest runs, naming the argument.
    assert.throws(() => t.startJob('x', {}, 'unassign', null, 1000), (e) => e instanceof InvalidArgument && /^action /.test(e.detail));
    assert.throws(() => t.startJob('x', {}, { assign: { to: 'a', lease: 5 } }, null, 1000), InvalidArgument);
    assert.throws(() => t.runJob('later', { onProgress: 'no' }), InvalidArgument);
    assert.equal(t.getJob('x'), null);
    engine.close();
  });
}

test('a job its process left half-way is finished on the reopened SQLite file, no task changed twice', () => {
  const path = join(dir, 'resume.db');
  let engine = open({ store: new SqliteStore(path), clock: () => 1 });
  let t = engine.tenant('acme');
  fill(t, 8);
  t.startJob('wd', {}, 'withdraw', 'ops', 1000);
  for (let i = 0; i < 4; i++) t.stepJob('wd');
  assert.deepEqual([t.getJob('wd').done, t.getJob('wd').total], [3, 8]);
  engine.close();

  engine = open({ store: new SqliteStore(path), clock: () => 2 });
  t = engine.tenant('acme');
  assert.deepEqual(t.runnableJobs(), ['wd']);
  const ended = t.runJob('wd');
  assert.deepEqual([ended.state, ended.done, ended.skipped, ended.failed], ['done', 8, 0, 0]);
  for (let i = 0; i < 8; i++) {
    const id = `t${String(i).padStart(2, '0')}`;
    assert.equal(t.get(id).state, 'withdrawn');
    assert.equal(byJob(t, id, 'wd'), 1, id);
  }
  engine.close();
});
