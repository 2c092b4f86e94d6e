// A task's reminders and escalation chain through the JavaScript host's own
// API, on both isolation modes: the new task fields and history `step` in
// the package's spelling, nextWake, one step fired per task per sweep, a
// change that re-arms the steps, and timelines refused before the guest runs
// (bad types) or by the rules (bad values), nothing written either way.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { InvalidArgument, MemoryStore, StoreError, open } from '../src/index.js';

const task = (id, extra = {}) => ({ id, run: 'r1', kind: 'k', createdAt: 0, ...extra });

const CHAIN = [
  { afterDueMs: 0, action: { escalate: ['leads'] } },
  { afterDueMs: 5_000, action: { escalate: ['directors'] } },
  { afterDueMs: 20_000, action: { expire: true } },
];

for (const isolation of ['worker', 'thread']) {
  test(`reminders, then the chain, fire one step per sweep, each in the history with its step (${isolation})`, () => {
    const clock = { at: 0 };
    const engine = open({ store: new MemoryStore(), isolation, clock: () => clock.at });
    try {
      const t = engine.tenant('acme');
      assert.equal(t.nextWake(), null);
      const opened = t.open(task('t', { candidateRoles: ['clerk'], dueAt: 10_000, remindBefore: [1_000, 3_000n, 1_000], escalation: CHAIN }));
      // Kept largest first, duplicates dropped; steps done is the engine's.
      assert.deepEqual(opened.remindBefore, [3_000, 1_000]);
      assert.deepEqual(opened.escalation, CHAIN);
      assert.equal(opened.stepsDone, 0);
      assert.deepEqual(t.get('t').escalation, CHAIN);
      assert.equal(t.nextWake(), 7_000);
      // A task with a chain is the chain's to act on, not overdue's.
      assert.deepEqual(t.overdue(100_000, 10), []);
      t.claim('t', 'alice', ['clerk']);

      const sweep = (at) => {
        clock.at = at;
        return t.expireOverdue(at, 10).map((x) => [x.id, x.state, x.assignee, x.stepsDone]);
      };
      assert.deepEqual(sweep(6_999), []);
      assert.deepEqual(sweep(7_000), [['t', 'claimed', 'alice', 1]]);
      assert.deepEqual(sweep(7_000), []);
      assert.equal(t.nextWake(), 9_000);
      // Two steps due by 12 000: one per call.
      assert.deepEqual(sweep(12_000), [['t', 'claimed', 'alice', 2]]);
      assert.deepEqual(sweep(12_000), [['t', 'escalated', null, 3]]);
      assert.deepEqual(t.get('t').candidateRoles, ['clerk', 'leads']);
      assert.deepEqual(sweep(15_000), [['t', 'escalated', null, 4]]);
      assert.equal(t.nextWake(), 30_000);
      assert.deepEqual(sweep(30_000), [['t', 'expired', null, 5]]);
      assert.equal(t.nextWake(), null);
      assert.deepEqual(sweep(100_000), []);

      const fired = t.history('t').filter((e) => e.verb === 'expire-overdue');
      assert.deepEqual(fired.map((e) => [e.at, e.before, e.after, e.step]), [
        [7_000, 'claimed', 'claimed', { reminder: 3_000 }],
        [12_000, 'claimed', 'claimed', { reminder: 1_000 }],
        [12_000, 'claimed', 'escalated', { escalation: CHAIN[0] }],
        [15_000, 'escalated', 'escalated', { escalation: CHAIN[1] }],
        [30_000, 'escalated', 'expired', { escalation: CHAIN[2] }],
      ]);
      assert.deepEqual(fired[0].changes, [{ field: 'steps-done', before: '0', after: '1' }]);
      // Every other change carries no step; the feed carries the same entries.
      assert.ok(t.history('t').filter((e) => e.verb !== 'expire-overdue').every((e) => e.step === null));
      const inFeed = t.feed(null, 100).page.entries.map((e) => e.change.task?.entry.step).filter((s) => s);
      assert.deepEqual(inFeed, fired.map((e) => e.step));
    } finally {
      engine.close();
    }
  });
}

test('update changes the reminders and the chain, re-arming what has not fired', () => {
  const clock = { at: 0 };
  const engine = open({ store: new MemoryStore(), isolation: 'thread', clock: () => clock.at });
  try {
    const t = engine.tenant('acme');
    t.open(task('u', { dueAt: 10_000, remindBefore: [3_000] }));
    assert.deepEqual(t.expireOverdue(7_000, 10).map((x) => x.stepsDone), [1]);
    const changed = t.update('u', 'olga', { remindBefore: [5_000, 2_000], escalation: [{ afterDueMs: 1_000n, action: { expire: true } }] });
    assert.deepEqual(changed.remindBefore, [5_000, 2_000]);
    assert.deepEqual(changed.escalation, [{ afterDueMs: 1_000, action: { expire: true } }]);
    // The reminder at 5 000 before is at or before the one that fired: it counts as fired.
    assert.equal(changed.stepsDone, 1);
    assert.equal(t.nextWake(), 8_000);
    const fields = t.history('u').at(-1).changes.map((c) => c.field);
    assert.ok(fields.includes('remind-before') && fields.includes('escalation'), fields.join());
    assert.deepEqual(t.expireOverdue(8_000, 10).map((x) => [x.state, x.stepsDone]), [['open', 2]]);
    assert.deepEqual(t.expireOverdue(11_000, 10).map((x) => [x.state, x.stepsDone]), [['expired', 3]]);
    assert.deepEqual(t.history('u').at(-1).step, { escalation: { afterDueMs: 1_000, action: { expire: true } } });
  } finally {
    engine.close();
  }
});

test('bad timelines are refused, by type before the guest runs and by the rules after, writing nothing', () => {
  const store = new MemoryStore();
  const engine = open({ store, isolation: 'thread', clock: () => 0 });
  try {
    const t = engine.tenant('acme');
    t.open(task('r', { dueAt: 500, remindBefore: [100] }));
    const before = store.dump('acme');
    const made = engine.instancesMade;
    const byType = [
      ['remindBefore must be an array', () => t.open(task('x', { dueAt: 500, remindBefore: 100 }))],
      ['remindBefore[1]', () => t.open(task('x', { dueAt: 500, remindBefore: [100, -1] }))],
      ['remindBefore[0]', () => t.open(task('x', { dueAt: 500, remindBefore: ['100'] }))],
      ['escalation must be an array', () => t.open(task('x', { dueAt: 500, escalation: { afterDueMs: 0, action: { expire: true } } }))],
      ['escalation[0] must be an object', () => t.open(task('x', { dueAt: 500, escalation: [0] }))],
      ['escalation[0].afterDueMs', () => t.open(task('x', { dueAt: 500, escalation: [{ afterDueMs: 2n ** 64n, action: { expire: true } }] }))],
      ['escalation[0].after is not a field', () => t.open(task('x', { dueAt: 500, escalation: [{ after: 0, action: { expire: true } }] }))],
      ['escalation[0].action must be an object', () => t.open(task('x', { dueAt: 500, escalation: [{ afterDueMs: 0, action: 'expire' }] }))],
      ['escalation[0].action must be an object with one key', () => t.open(task('x', { dueAt: 500, escalation: [{ afterDueMs: 0, action: { escalate: ['a'], expire: true } }] }))],
      ['escalation[0].action.expire must be true', () => t.open(task('x', { dueAt: 500, escalation: [{ afterDueMs: 0, action: { expire: null } }] }))],
      ['escalation[0].action.escalate', () => t.open(task('x', { dueAt: 500, escalation: [{ afterDueMs: 0, action: { escalate: 'leads' } }] }))],
      ['escalation[0].action.escalate[0]', () => t.open(task('x', { dueAt: 500, escalation: [{ afterDueMs: 0, action: { escalate: [7] } }] }))],
      ['changes.remindBefore[0]', () => t.update('r', null, { remindBefore: [0.5] })],
      ['changes.escalation must be an array', () => t.update('r', null, { escalation: 'none' })],
      ['changes.escalation[0].afterDueMs', () => t.update('r', null, { escalation: [{ afterDueMs: -5, action: { expire: true } }] })],
    ];
    for (const [field, f] of byType) {
      assert.throws(f, (e) => e instanceof InvalidArgument && e.detail.includes(field), field);
    }
    assert.equal(engine.instancesMade, made, 'a refused argument threw the instance away');
    // Values of the right types the rules refuse, naming the field.
    const byRules = [
      ['remind-before', () => t.open(task('x', { dueAt: 500, remindBefore: [501] }))],
      ['escalation', () => t.open(task('x', { escalation: [{ afterDueMs: 0, action: { expire: true } }] }))],
      ['escalation', () => t.open(task('x', { dueAt: 500, escalation: [{ afterDueMs: 0, action: { expire: true } }, { afterDueMs: 10, action: { escalate: ['x'] } }] }))],
      ['escalation', () => t.open(task('x', { dueAt: 500, escalation: [{ afterDueMs: 10, action: { escalate: ['x'] } }, { afterDueMs: 10, action: { escalate: ['y'] } }] }))],
      ['remind-before', () => t.update('r', null, { remindBefore: [0] })],
    ];
    for (const [field, f] of byRules) {
      assert.throws(f, (e) => e instanceof StoreError && !(e instanceof InvalidArgument) && e.case === 'invalid' && e.detail.includes(field), field);
    }
    assert.deepEqual(store.dump('acme'), before);
  } finally {
    engine.close();
  }
});
