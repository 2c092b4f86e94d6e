// Search, counts and saved views through the package: typed pages walked by
// `next` to the end, a reviewer's view, counts that say how they were
// answered, and views kept under compare-and-set across reopening the
// SQLite file. The rules themselves are pinned by tests/scenarios/search.json.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';

import { MemoryStore, SqliteStore, StoreError, open } from '../src/index.js';

const dir = mkdtempSync(join(tmpdir(), 'leasehold-search-'));
after(() => rmSync(dir, { recursive: true, force: true }));

/** Ten tasks, two kinds, due 10 000 down to 1 000 in creation order; t3 and t6 held by alice. */
function tenant(store = new MemoryStore(), clock = () => 1) {
  const engine = open({ store, clock });
  const t = engine.tenant('acme');
  for (let i = 0; i < 10; i++) {
    t.open({
      id: `t${i}`, run: `r${i % 3}`, kind: i % 2 ? 'review' : 'approve', candidateRoles: i % 2 ? ['reviewer'] : ['approver'],
      createdAt: 100 + i, dueAt: 10_000 - i * 1000, priority: i === 7 ? 'urgent' : 'normal',
    });
  }
  t.claim('t3', 'alice', ['reviewer']);
  t.claim('t6', 'alice', ['approver']);
  return { engine, t };
}

test('a search walks by next to the end in its order, typed, and a cursor of another search is refused by name', () => {
  const { engine, t } = tenant();
  const seen = [];
  let page = t.search({ sort: { key: 'due-at' }, limit: 4 });
  for (;;) {
    assert.equal(page.index, 'by-due');
    assert.equal(page.budgetSpent, false);
    seen.push(...page.tasks.map((x) => x.id));
    if (page.next === null) break;
    page = t.search({ sort: { key: 'due-at' }, limit: 4, after: page.next });
  }
  assert.deepEqual(seen, ['t9', 't8', 't7', 't6', 't5', 't4', 't3', 't2', 't1', 't0']);
  const first = t.search({ sort: { key: 'queue-order' }, limit: 2 });
  assert.deepEqual(first.tasks.map((x) => [x.id, x.priority, x.dueAt]), [['t7', 'urgent', 3000], ['t0', 'normal', 10_000]]);
  assert.throws(
    () => t.search({ sort: { key: 'queue-order', descending: true }, limit: 2, after: first.next }),
    (e) => e instanceof StoreError && e.case === 'invalid' && e.detail.startsWith('after '),
  );
  engine.close();
});

test('filters and a reviewer viewer narrow a search; counts say whether counters answered', () => {
  const { engine, t } = tenant();
  const ids = (q) => t.search({ limit: 20, sort: { key: 'created-at' }, ...q }).tasks.map((x) => x.id);
  assert.deepEqual(ids({ filter: { assignee: { actor: 'alice' } } }), ['t3', 't6']);
  assert.deepEqual(ids({ filter: { kinds: ['review'], assignee: { nobody: true } } }), ['t1', 't5', 't7', 't9']);
  assert.deepEqual(ids({ filter: { run: 'r1', dueBefore: 9000n } }), ['t4', 't7']);
  // A reviewer sees what it holds and what it may take, nothing else.
  assert.deepEqual(ids({ viewer: { actor: 'alice', roles: ['reviewer'] } }), ['t1', 't3', 't5', 't6', 't7', 't9']);
  assert.deepEqual(t.count({ states: ['claimed'] }), { count: 2, exact: true, next: null, index: 'counters' });
  assert.deepEqual(t.count(), { count: 10, exact: true, next: null, index: 'counters' });
  assert.deepEqual(t.count({ run: 'r0' }), { count: 4, exact: true, next: null, index: 'by-run' });
  assert.equal(t.count({}, { actor: 'bob', roles: ['approver'] }).count, 4);
  assert.deepEqual(t.buildSearchIndex(100), { built: true, indexed: 0 });
  engine.close();
});

test('saved views are kept under compare-and-set, listed by name, and survive reopening the sqlite file', () => {
  const path = join(dir, 'views.db');
  let now = 5000;
  let { engine, t } = tenant(new SqliteStore(path), () => now);
  const made = t.putView({ name: 'mine', filter: { assignee: { actor: 'alice' }, dueAfter: 1 }, sort: { key: 'due-at' }, by: 'alice' });
  assert.deepEqual(made, {
    name: 'mine',
    filter: {
      states: [], kinds: [], role: null, assignee: { actor: 'alice' }, case: null, run: null, priorityAtLeast: null,
      dueBefore: null, dueAfter: 1, createdBefore: null, createdAfter: null, overdueAt: null,
    },
    sort: { key: 'due-at', descending: false },
    revision: 1,
    by: 'alice',
    at: 5000,
  });
  assert.throws(() => t.putView({ name: 'mine' }), (e) => e instanceof StoreError && e.case === 'invalid' && e.detail.startsWith('name'));
  now = 6000;
  const changed = t.putView({ ...made, sort: { key: 'created-at', descending: true }, by: 'bob' }, 1);
  assert.deepEqual([changed.revision, changed.at, changed.by, changed.sort], [2, 6000, 'bob', { key: 'created-at', descending: true }]);
  assert.throws(() => t.putView(made, 1), (e) => e instanceof StoreError && e.case === 'stale' && e.current === 2);
  assert.throws(() => t.putView({ name: 'none' }, 1), (e) => e instanceof StoreError && e.case === 'not-found');
  t.putView({ name: 'all' });
  assert.deepEqual(t.listViews(10).map((v) => v.name), ['all', 'mine']);
  assert.deepEqual(t.listViews(10, 'all').map((v) => v.name), ['mine']);
  // A view's filter and sort search as they were kept.
  const view = t.getView('mine');
  assert.deepEqual(t.search({ filter: view.filter, sort: view.sort, limit: 10 }).tasks.map((x) => x.id), ['t6', 't3']);
  engine.close();

  engine = open({ store: new SqliteStore(path) });
  t = engine.tenant('acme');
  assert.deepEqual(t.getView('mine'), view);
  assert.throws(() => t.deleteView('mine', 1), (e) => e instanceof StoreError && e.case === 'stale' && e.current === 2);
  assert.equal(t.deleteView('mine', 2), true);
  assert.equal(t.deleteView('mine'), false);
  assert.equal(t.getView('mine'), null);
  engine.close();
});
