// A task's whole life through the JavaScript host's own API, beyond what the
// scenarios pin down: the guarded handle and its stale refusal, decisions
// given as values, update's changes checked by name, the new fields of tasks
// and history entries in the package's spelling, and the component's
// package version checked when it is loaded.
import assert from 'node:assert/strict';
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { fileURLToPath } from 'node:url';

import { ClaimRefusal, InvalidArgument, MemoryStore, PACKAGE_VERSION, StoreError, open } from '../src/index.js';

const dir = mkdtempSync(join(tmpdir(), 'leasehold-js-life-'));
after(() => rmSync(dir, { recursive: true, force: true }));

const task = (id, extra = {}) => ({ id, run: 'r1', kind: 'k', createdAt: 1, ...extra });

function fresh() {
  const store = new MemoryStore();
  const engine = open({ store, clock: () => 42, isolation: 'thread' });
  return { store, engine, acme: engine.tenant('acme') };
}

test('a guarded handle refuses a stale revision with the current one, writes nothing, and records its job', () => {
  const { store, engine, acme } = fresh();
  try {
    assert.equal(acme.open(task('t1')).revision, 1);
    const before = store.dump('acme');
    assert.throws(() => acme.guarded({ revision: 5 }).claim('t1', 'ann'), (e) => {
      assert.ok(e instanceof ClaimRefusal, String(e));
      assert.equal(e.case, 'stale');
      assert.equal(e.current, 1);
      assert.equal(e.detail, 1);
      assert.match(e.message, /revision is now 1/);
      assert.equal(e.retryable, false);
      return true;
    });
    assert.deepEqual(store.dump('acme'), before);
    const claimed = acme.guarded({ revision: 1, job: 'bulk-7' }).claim('t1', 'ann');
    assert.equal(claimed.revision, 2);
    const last = acme.history('t1').at(-1);
    assert.equal(last.job, 'bulk-7');
    assert.equal(last.revision, 2);
    // The plain handle stays unguarded: the guard is for one call.
    assert.equal(acme.note('t1', 'ann', 'looking').revision, 3);
    assert.throws(() => acme.guarded({ revision: -1 }), InvalidArgument);
    assert.throws(() => acme.guarded({ revison: 1 }), (e) => e instanceof InvalidArgument && /guard\.revison/.test(e.detail));
  } finally {
    engine.close();
  }
});

test('decide keeps an outcome, reason and output given as a value; a bad one is refused naming the field', () => {
  const { engine, acme } = fresh();
  try {
    acme.open(task('pay', {
      outcomes: [
        { name: 'approved', outputSchema: { type: 'object', properties: { amount: { type: 'integer', maximum: 1000 } } } },
        { name: 'rejected', needsReason: true },
      ],
    }));
    const t = acme.get('pay');
    assert.deepEqual(t.outcomes.map((o) => [o.name, o.needsReason]), [['approved', false], ['rejected', true]]);
    assert.equal(t.outcomes[1].outputSchema, null);
    assert.deepEqual(JSON.parse(t.outcomes[0].outputSchema).properties.amount, { type: 'integer', maximum: 1000 });
    assert.equal(t.decision, null);
    assert.throws(() => acme.decide('pay', 'completed', null, { outcome: 'approved', output: { amount: 1500 } }), (e) => {
      assert.ok(e instanceof StoreError, String(e));
      assert.equal(e.case, 'invalid');
      assert.match(e.detail, /^decision\.output: \/amount: maximum/);
      return true;
    });
    assert.throws(() => acme.decide('pay', 'completed', null, { outcome: 'rejected' }), (e) => e.case === 'invalid' && /reason/.test(e.detail));
    assert.throws(() => acme.decide('pay', 'completed', null, { outcome: 'approved', reasons: 'x' }), (e) => e instanceof InvalidArgument);
    assert.equal(acme.decide('pay', 'completed', null, { outcome: 'approved', reason: 'fine', output: { amount: 900 } }), true);
    const d = acme.get('pay').decision;
    assert.deepEqual(d, { outcome: 'approved', reason: 'fine', output: '{"amount":900}', by: null, at: 42 });
    assert.deepEqual(acme.history('pay').at(-1).decision, d);
    assert.equal(acme.settle('pay', 'withdrawn'), false);
  } finally {
    engine.close();
  }
});

test('update takes the fields it names, null clears the due time, and an unknown field is refused by name', () => {
  const { store, engine, acme } = fresh();
  try {
    acme.open(task('u1', { dueAt: 500 }));
    const before = store.dump('acme');
    assert.throws(() => acme.update('u1', 'boss', { priorty: 'high' }), (e) => {
      assert.ok(e instanceof InvalidArgument);
      assert.match(e.detail, /^changes\.priorty is not a field/);
      return true;
    });
    assert.throws(() => acme.update('u1', 'boss', { priority: 'highest' }), (e) => e instanceof InvalidArgument && /changes\.priority/.test(e.detail));
    assert.throws(() => acme.update('u1', 'boss', {}), (e) => e instanceof StoreError && e.case === 'invalid');
    assert.deepEqual(store.dump('acme'), before);
    const t = acme.update('u1', 'boss', { dueAt: null, priority: 'high' });
    assert.equal(t.dueAt, null);
    assert.equal(t.priority, 'high');
    const { changes, actor } = acme.history('u1').at(-1);
    assert.equal(actor, 'boss');
    assert.deepEqual(changes, [
      { field: 'due-at', before: '500', after: 'null' },
      { field: 'priority', before: '"normal"', after: '"high"' },
    ]);
  } finally {
    engine.close();
  }
});

test('held, assign, delegate and unassign answer typed tasks; the feed names the run and kind', () => {
  const { engine, acme } = fresh();
  try {
    acme.open(task('a', { candidateRoles: ['clerk'] }));
    assert.equal(acme.assign('a', 'ann', ['lead'], { now: 0, leaseMs: 100 }, true, 'boss').leaseUntil, 100);
    assert.throws(() => acme.assign('a', 'bob', [], null, 'yes'), InvalidArgument);
    assert.deepEqual(acme.held('ann', 10).tasks.map((t) => t.id), ['a']);
    assert.throws(() => acme.delegate('a', 'bob', 'cy', ['clerk']), (e) => e instanceof ClaimRefusal && e.case === 'not-held' && e.detail === 'bob');
    assert.equal(acme.delegate('a', 'ann', 'cy', ['clerk']).assignee, 'cy');
    assert.equal(acme.unassign('a', 'boss').state, 'open');
    assert.deepEqual(acme.held('cy', 10), { tasks: [], next: null });
    const { page } = acme.feed(null, 100);
    const first = page.entries[0].change.task;
    assert.equal(first.run, 'r1');
    assert.equal(first.kind, 'k');
  } finally {
    engine.close();
  }
});

test('kinds are defined under compare-and-set; a stale expected revision names the current one', () => {
  const { engine, acme } = fresh();
  try {
    const k = acme.defineKind({ kind: 'invoice', outcomes: [{ name: 'approved', outputSchema: { type: 'object' } }] }, 0);
    assert.deepEqual(k, { kind: 'invoice', outcomes: [{ name: 'approved', needsReason: false, outputSchema: '{"type":"object"}' }], revision: 1 });
    assert.throws(() => acme.defineKind({ kind: 'invoice', outcomes: [] }, 0), (e) => {
      assert.ok(e instanceof StoreError, String(e));
      assert.equal(e.case, 'stale');
      assert.equal(e.current, 1);
      return true;
    });
    assert.deepEqual(acme.getKind('invoice'), k);
    assert.deepEqual(acme.listKinds(10).map((d) => d.kind), ['invoice']);
    assert.equal(acme.removeKind('invoice'), true);
    assert.equal(acme.getKind('invoice'), null);
  } finally {
    engine.close();
  }
});

test('a component speaking another version of the package is refused at open, naming both', () => {
  assert.equal(PACKAGE_VERSION, '0.3.0');
  const gen = fileURLToPath(new URL('../gen/bindings/', import.meta.url));
  const other = join(dir, 'bindings-0.2.0');
  cpSync(gen, other, { recursive: true });
  const file = join(other, 'leasehold.js');
  // What jco writes for a component that exports the 0.2.0 interfaces.
  writeFileSync(file, readFileSync(file, 'utf8').replaceAll('leasehold:engine/tasks@0.3.0', 'leasehold:engine/tasks@0.2.0'));
  assert.throws(() => open({ store: new MemoryStore(), component: other }), (e) => {
    assert.match(e.message, /this component speaks leasehold:engine@0\.2\.0; this host speaks 0\.3\.0/);
    return true;
  });
});
