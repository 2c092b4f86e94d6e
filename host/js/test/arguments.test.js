// Arguments are refused before the guest runs, never wrapped or coerced:
// every integer argument of every verb past its WIT type's range, enums
// with a typo, strings where lists belong. The refusal is an
// InvalidArgument (a StoreError with case `invalid`) naming the field; the
// store is unchanged and the tenant's instance is kept.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { InvalidArgument, LeaseholdError, MemoryStore, StoreError, open } from '../src/index.js';

const T = 1_700_000_000_000;
const S64_OUT = [2n ** 63n, -(2n ** 63n) - 1n, 2n ** 64n + BigInt(T), 1.5, Number.NaN, 2 ** 53 + 2, `${T}`];
const U32_OUT = [-1, 2 ** 32, 2 ** 32 + 2, 2n ** 32n + 2n, -1n, 0.5, '5'];
const U64_OUT = [-1, -1n, 2n ** 64n, 2n ** 64n + 5n, 2 ** 53 + 2, 0.5, '5'];
const OUT = { s64: S64_OUT, u32: U32_OUT, u64: U64_OUT };

const task = (extra = {}) => ({ id: 't1', run: 'r', kind: 'k', createdAt: T, ...extra });
const lease = (extra = {}) => ({ now: T, leaseMs: 60_000, ...extra });
const spec = (extra = {}) => ({ id: 's', run: 'r', recurrence: { cron: '* * * * *' }, zone: 'UTC', ...extra });
const KEY = new Uint8Array(32).fill(7);
const attempt = (extra = {}) => ({ messageId: 'msg_1', at: T, attempt: 1, outcome: '200', latencyMs: 12, ...extra });
const every = (extra = {}) => spec({ recurrence: { every: { everyMs: 60_000, anchor: T, ...extra } } });

/** Every integer argument of every verb: [verb and field, its WIT type, a call passing `v` there]. */
const INTEGER_ARGUMENTS = [
  ['open task.createdAt', 's64', (t, v) => t.open(task({ createdAt: v }))],
  ['open task.dueAt', 's64', (t, v) => t.open(task({ dueAt: v }))],
  ['open task.leaseUntil', 's64', (t, v) => t.open(task({ state: 'claimed', assignee: 'bob', leaseUntil: v }))],
  ['open task.remindBefore[0]', 'u64', (t, v) => t.open(task({ dueAt: T + 10, remindBefore: [v] }))],
  ['open task.escalation[0].afterDueMs', 'u64', (t, v) => t.open(task({ dueAt: T, escalation: [{ afterDueMs: v, action: { expire: true } }] }))],
  ['update changes.remindBefore[0]', 'u64', (t, v) => t.update('t0', null, { remindBefore: [v] })],
  ['update changes.escalation[0].afterDueMs', 'u64', (t, v) => t.update('t0', null, { escalation: [{ afterDueMs: v, action: { expire: true } }] })],
  ['claim lease.now', 's64', (t, v) => t.claim('t1', 'bob', [], lease({ now: v }))],
  ['claim lease.leaseMs', 'u32', (t, v) => t.claim('t1', 'bob', [], lease({ leaseMs: v }))],
  ['take-over lease.now', 's64', (t, v) => t.takeOver('t1', 'bob', 'carol', [], lease({ now: v }))],
  ['take-over lease.leaseMs', 'u32', (t, v) => t.takeOver('t1', 'bob', 'carol', [], lease({ leaseMs: v }))],
  ['renew now', 's64', (t, v) => t.renew('t1', 'bob', v, 60_000)],
  ['renew leaseMs', 'u32', (t, v) => t.renew('t1', 'bob', T, v)],
  ['reclaim-lapsed now', 's64', (t, v) => t.reclaimLapsed(v, 10)],
  ['reclaim-lapsed limit', 'u32', (t, v) => t.reclaimLapsed(T, v)],
  ['claim-next query.limit', 'u32', (t, v) => t.claimNext({ roles: [], actor: 'bob', limit: v })],
  ['claim-next lease.now', 's64', (t, v) => t.claimNext({ roles: [], actor: 'bob' }, lease({ now: v }))],
  ['claim-next lease.leaseMs', 'u32', (t, v) => t.claimNext({ roles: [], actor: 'bob' }, lease({ leaseMs: v }))],
  ['claim-batch count', 'u32', (t, v) => t.claimBatch({ roles: [], actor: 'bob' }, null, v)],
  ['claim-batch lease.now', 's64', (t, v) => t.claimBatch({ roles: [], actor: 'bob' }, lease({ now: v }), 1)],
  ['settle-and-claim count', 'u32', (t, v) => t.settleAndClaim([], { roles: [], actor: 'bob' }, null, v)],
  ['settle-and-claim lease.leaseMs', 'u32', (t, v) => t.settleAndClaim([], { roles: [], actor: 'bob' }, lease({ leaseMs: v }), 1)],
  ['queue query.limit', 'u32', (t, v) => t.queue({ roles: [], limit: v })],
  ['for-case limit', 'u32', (t, v) => t.forCase('c', v)],
  ['overdue now', 's64', (t, v) => t.overdue(v, 10)],
  ['overdue limit', 'u32', (t, v) => t.overdue(T, v)],
  ['arm timer.fireAt', 's64', (t, v) => t.arm({ run: 'r', effect: 'e', fireAt: v })],
  ['arm timer.step', 'u32', (t, v) => t.arm({ run: 'r', effect: 'e', fireAt: T, step: v })],
  ['claim-due now', 's64', (t, v) => t.claimDue(v, 10, 60_000)],
  ['claim-due limit', 'u32', (t, v) => t.claimDue(T, v, 60_000)],
  ['claim-due leaseMs', 'u32', (t, v) => t.claimDue(T, 10, v)],
  ['reschedule fireAt', 's64', (t, v) => t.reschedule('r0', 'e0', v)],
  ['timers-of limit', 'u32', (t, v) => t.timersOf('r0', v)],
  ['due-between from', 's64', (t, v) => t.dueBetween(v, T, 10)],
  ['due-between to', 's64', (t, v) => t.dueBetween(T, v, 10)],
  ['due-between limit', 'u32', (t, v) => t.dueBetween(T, T + 1, v)],
  ['add-schedule now', 's64', (t, v) => t.addSchedule(spec(), v)],
  ['add-schedule spec.step', 'u32', (t, v) => t.addSchedule(spec({ step: v }), T)],
  ['add-schedule spec.start', 's64', (t, v) => t.addSchedule(spec({ start: v }), T)],
  ['add-schedule spec.end', 's64', (t, v) => t.addSchedule(spec({ end: v }), T)],
  ['add-schedule spec.jitterMs', 'u32', (t, v) => t.addSchedule(spec({ jitterMs: v }), T)],
  ['add-schedule spec.recurrence.every.everyMs', 'u64', (t, v) => t.addSchedule(every({ everyMs: v }), T)],
  ['add-schedule spec.recurrence.every.anchor', 's64', (t, v) => t.addSchedule(every({ anchor: v }), T)],
  ['add-schedule spec.catchUp.allWithin', 'u64', (t, v) => t.addSchedule(spec({ catchUp: { allWithin: v } }), T)],
  ['add-schedule spec.catchUp.latestWithin', 'u64', (t, v) => t.addSchedule(spec({ catchUp: { latestWithin: v } }), T)],
  ['resume-schedule now', 's64', (t, v) => t.resumeSchedule('s', v)],
  ['trigger-schedule now', 's64', (t, v) => t.triggerSchedule('s', v)],
  ['next-occurrences after', 's64', (t, v) => t.nextOccurrences('s', v, 10)],
  ['next-occurrences n', 'u32', (t, v) => t.nextOccurrences('s', T, v)],
  ['list-schedules limit', 'u32', (t, v) => t.listSchedules(v)],
  ['add-subscription now', 's64', (t, v) => t.addSubscription('s', 'https://a.example', { tasks: true }, KEY, null, v)],
  ['list-subscriptions limit', 'u32', (t, v) => t.listSubscriptions(v)],
  ['change-subscription expected', 'u64', (t, v) => t.changeSubscription('s', 'https://b.example', null, v)],
  ['set-subscription-state expected', 'u64', (t, v) => t.setSubscriptionState('s', 'paused', 'x', v)],
  ['rotate-subscription-key oldUntil', 's64', (t, v) => t.rotateSubscriptionKey('s', KEY, v, T)],
  ['rotate-subscription-key now', 's64', (t, v) => t.rotateSubscriptionKey('s', KEY, T, v)],
  ['advance-subscription revision', 'u64', (t, v) => t.advanceSubscription('s', v, 'f')],
  ['lease-subscription now', 's64', (t, v) => t.leaseSubscription('s', 'w1', v, 60_000)],
  ['lease-subscription leaseMs', 'u32', (t, v) => t.leaseSubscription('s', 'w1', T, v)],
  ['record-subscription-attempts attempts[0].at', 's64', (t, v) => t.recordSubscriptionAttempts('s', [attempt({ at: v })])],
  ['record-subscription-attempts attempts[0].attempt', 'u32', (t, v) => t.recordSubscriptionAttempts('s', [attempt({ attempt: v })])],
  ['record-subscription-attempts attempts[0].latencyMs', 'u64', (t, v) => t.recordSubscriptionAttempts('s', [attempt({ latencyMs: v })])],
  ['search query.limit', 'u32', (t, v) => t.search({ limit: v })],
  ['search query.filter.dueBefore', 's64', (t, v) => t.search({ filter: { dueBefore: v }, limit: 10 })],
  ['search query.filter.dueAfter', 's64', (t, v) => t.search({ filter: { dueAfter: v }, limit: 10 })],
  ['search query.filter.createdBefore', 's64', (t, v) => t.search({ filter: { createdBefore: v }, limit: 10 })],
  ['search query.filter.createdAfter', 's64', (t, v) => t.search({ filter: { createdAfter: v }, limit: 10 })],
  ['search query.filter.overdueAt', 's64', (t, v) => t.search({ filter: { overdueAt: v }, limit: 10 })],
  ['count filter.dueBefore', 's64', (t, v) => t.count({ dueBefore: v })],
  ['build-search-index limit', 'u32', (t, v) => t.buildSearchIndex(v)],
  ['put-view expected', 'u64', (t, v) => t.putView({ name: 'v' }, v)],
  ['put-view view.filter.overdueAt', 's64', (t, v) => t.putView({ name: 'v', filter: { overdueAt: v } })],
  ['list-views limit', 'u32', (t, v) => t.listViews(v)],
  ['delete-view expected', 'u64', (t, v) => t.deleteView('v', v)],
];

/** A tenant with one open task and one armed timer, and a way to see that nothing changed. */
function fixture() {
  const store = new MemoryStore();
  const engine = open({ store });
  const t = engine.tenant('acme');
  t.open(task({ id: 't0' }));
  t.arm({ run: 'r0', effect: 'e0', fireAt: T });
  const before = store.dump('acme');
  return { engine, t, unchanged: () => assert.deepEqual(store.dump('acme'), before) };
}

function refused(f, field, what = field) {
  assert.throws(f, (e) => {
    assert.ok(e instanceof InvalidArgument, `${what}: expected an InvalidArgument, got ${e}`);
    assert.ok(e instanceof StoreError && e instanceof LeaseholdError);
    assert.equal(e.case, 'invalid');
    assert.ok(e.invalidInput);
    assert.ok(e.detail.includes(field), `${e.detail} names ${field}`);
    return true;
  }, what);
}

test('every integer argument of every verb is refused out of range, never wrapped', () => {
  const { engine, t, unchanged } = fixture();
  const made = engine.instancesMade;
  for (const [what, type, call] of INTEGER_ARGUMENTS) {
    const field = what.split(' ')[1].split('.').pop();
    for (const v of OUT[type]) {
      refused(() => call(t, v), field, `${what} = ${typeof v === 'bigint' ? `${v}n` : v}`);
    }
  }
  unchanged();
  assert.equal(engine.instancesMade, made, 'a refused argument cost an instance');
  engine.close();
});

test('the edges of each integer type reach the guest unchanged', () => {
  const { engine, t } = fixture();
  assert.equal(t.arm({ run: 'r', effect: 'max', fireAt: T, step: 2 ** 32 - 1 }), 'armed');
  assert.equal(t.arm({ run: 'r', effect: 'min', fireAt: T, step: 0n }), 'armed');
  // The rules refuse what they do not serve themselves, naming the value they got.
  const byTheRules = (v) => (e) => !(e instanceof InvalidArgument) && e.case === 'invalid' && e.detail.includes(String(v));
  assert.throws(() => t.reclaimLapsed(T, 2 ** 32 - 1), byTheRules(2 ** 32 - 1));
  for (const v of [2n ** 63n - 1n, -(2n ** 63n)]) {
    assert.throws(() => t.arm({ run: 'r', effect: 'e', fireAt: v }), byTheRules(v));
  }
  engine.close();
});

test('enum typos, strings for lists and non-strings are refused by field and keep the instance', () => {
  const { engine, t, unchanged } = fixture();
  const made = engine.instancesMade;
  const cases = [
    ['priority', () => t.open(task({ priority: 'hgih' }))],
    ['state', () => t.open(task({ state: 'Open' }))],
    ['onExpiry', () => t.open(task({ onExpiry: 'never' }))],
    ['settlement', () => t.settle('t0', 'done')],
    ['phase', () => t.arm({ run: 'r', effect: 'e', fireAt: T, phase: 'back' })],
    ['candidateRoles', () => t.open(task({ candidateRoles: 'approver' }))],
    ['roles', () => t.claim('t0', 'bob', 'approver')],
    ['excludedActors[0]', () => t.open(task({ excludedActors: [7] }))],
    ['id', () => t.get(7)],
    ['actor', () => t.claim('t0', undefined)],
    ['kind', () => t.open({ id: 'x', run: 'r', createdAt: T })],
    ['id', () => t.open(task({ id: 'bad\ud800' }))],
    ['task', () => t.open(null)],
    ['takeBack', () => t.reschedule('r0', 'e0', T, { takeBack: 'yes' })],
    ['options.takeback', () => t.reschedule('r0', 'e0', T, { takeback: true })],
    ['effect', () => t.reschedule('r0', 7, T)],
    ['run', () => t.timersOf(['r0'], 10)],
    ['after', () => t.dueBetween(T, T + 1, 10, 3)],
    ['spec.gap', () => t.addSchedule(spec({ gap: 'skip-it' }), T)],
    ['spec.repeat', () => t.addSchedule(spec({ repeat: 'twice' }), T)],
    ['spec.overlap', () => t.addSchedule(spec({ overlap: 'buffer' }), T)],
    ['spec.phase', () => t.addSchedule(spec({ phase: 'back' }), T)],
    ['spec.zone', () => t.addSchedule(spec({ zone: 7 }), T)],
    ['spec.jiter', () => t.addSchedule(spec({ jiter: 5 }), T)],
    ['spec.recurrence', () => t.addSchedule(spec({ recurrence: '* * * * *' }), T)],
    ['spec.recurrence', () => t.addSchedule(spec({ recurrence: { cron: '* * * * *', every: { everyMs: 1, anchor: T } } }), T)],
    ['spec.recurrence.every.every', () => t.addSchedule(every({ every: 5 }), T)],
    ['spec.recurrence.cron', () => t.addSchedule(spec({ recurrence: { cron: 5 } }), T)],
    ['spec.catchUp', () => t.addSchedule(spec({ catchUp: { latest: 5 } }), T)],
    ['spec.catchUp.none', () => t.addSchedule(spec({ catchUp: { none: null } }), T)],
    ['spec', () => t.addSchedule(null, T)],
    ['id', () => t.removeSchedule(7)],
    ['note', () => t.pauseSchedule('s', 5)],
    ['id', () => t.getSchedule(['s'])],
    ['after', () => t.listSchedules(10, 3)],
    ['remindBefore', () => t.open(task({ dueAt: T, remindBefore: 5 }))],
    ['escalation[0].action', () => t.open(task({ dueAt: T, escalation: [{ afterDueMs: 0, action: { expire: null } }] }))],
    ['escalation[0].action', () => t.open(task({ dueAt: T, escalation: [{ afterDueMs: 0, action: { escalat: ['x'] } }] }))],
    ['changes.escalation[0].action.escalate', () => t.update('t0', null, { escalation: [{ afterDueMs: 0, action: { escalate: 'x' } }] })],
    ['id', () => t.addSubscription(7, 'https://a.example', { tasks: true }, KEY, null, T)],
    ['url', () => t.addSubscription('s', null, { tasks: true }, KEY, null, T)],
    ['filter', () => t.addSubscription('s', 'https://a.example', null, KEY, null, T)],
    ['filter.tasks', () => t.addSubscription('s', 'https://a.example', { tasks: 'yes' }, KEY, null, T)],
    ['filter.verbs', () => t.addSubscription('s', 'https://a.example', { tasks: true, verbs: 'settle' }, KEY, null, T)],
    ['filter.kinds[0]', () => t.addSubscription('s', 'https://a.example', { tasks: true, kinds: [7] }, KEY, null, T)],
    ['filter.settling_only', () => t.addSubscription('s', 'https://a.example', { tasks: true, settling_only: true }, KEY, null, T)],
    ['key', () => t.addSubscription('s', 'https://a.example', { tasks: true }, Array.from(KEY), null, T)],
    ['key', () => t.addSubscription('s', 'https://a.example', { tasks: true }, 'a key of thirty-two characters!', null, T)],
    ['from', () => t.addSubscription('s', 'https://a.example', { tasks: true }, KEY, 7, T)],
    ['id', () => t.getSubscription(null)],
    ['after', () => t.listSubscriptions(10, 3)],
    ['url', () => t.changeSubscription('s', 7)],
    ['filter.runs', () => t.changeSubscription('s', null, { timers: true, runs: 'r1' })],
    ['state', () => t.setSubscriptionState('s', 'Paused')],
    ['state', () => t.setSubscriptionState('s', 'stopped', 'x')],
    ['note', () => t.setSubscriptionState('s', 'paused', ['x'])],
    ['key', () => t.rotateSubscriptionKey('s', null, T, T)],
    ['id', () => t.removeSubscription(['s'])],
    ['position', () => t.advanceSubscription('s', 1, null)],
    ['position', () => t.rewindSubscription('s', 5)],
    ['holder', () => t.leaseSubscription('s', null, T, 60_000)],
    ['holder', () => t.releaseSubscription('s', 7)],
    ['attempts', () => t.recordSubscriptionAttempts('s', attempt())],
    ['attempts[0].outcome', () => t.recordSubscriptionAttempts('s', [attempt({ outcome: 200 })])],
    ['attempts[0].messageId', () => t.recordSubscriptionAttempts('s', [attempt({ messageId: undefined })])],
    ['attempts[0].latency', () => t.recordSubscriptionAttempts('s', [{ ...attempt(), latency: 5 }])],
    ['query', () => t.search(null)],
    ['query.limt', () => t.search({ limt: 10 })],
    ['query.filter', () => t.search({ filter: 'open', limit: 10 })],
    ['query.filter.state', () => t.search({ filter: { state: ['open'] }, limit: 10 })],
    ['query.filter.states', () => t.search({ filter: { states: 'open' }, limit: 10 })],
    ['query.filter.states[0]', () => t.search({ filter: { states: ['Open'] }, limit: 10 })],
    ['query.filter.kinds', () => t.search({ filter: { kinds: 'k' }, limit: 10 })],
    ['query.filter.role', () => t.search({ filter: { role: ['r'] }, limit: 10 })],
    ['query.filter.priorityAtLeast', () => t.search({ filter: { priorityAtLeast: 'hi' }, limit: 10 })],
    ['query.filter.assignee', () => t.search({ filter: { assignee: 'alice' }, limit: 10 })],
    ['query.filter.assignee', () => t.search({ filter: { assignee: { nobody: true, actor: 'a' } }, limit: 10 })],
    ['query.filter.assignee.nobody', () => t.search({ filter: { assignee: { nobody: null } }, limit: 10 })],
    ['query.filter.assignee.actor', () => t.search({ filter: { assignee: { actor: 7 } }, limit: 10 })],
    ['query.sort.key', () => t.search({ sort: { key: 'due' }, limit: 10 })],
    ['query.sort.descending', () => t.search({ sort: { key: 'due-at', descending: 'yes' }, limit: 10 })],
    ['query.sort.desc', () => t.search({ sort: { key: 'due-at', desc: true }, limit: 10 })],
    ['query.after', () => t.search({ limit: 10, after: 7 })],
    ['query.viewer.actor', () => t.search({ limit: 10, viewer: { roles: ['r'] } })],
    ['query.viewer.roles', () => t.search({ limit: 10, viewer: { actor: 'a', roles: 'r' } })],
    ['filter.case', () => t.count({ case: 7 })],
    ['viewer', () => t.count({}, 'alice')],
    ['after', () => t.count({}, null, 7)],
    ['view', () => t.putView('v')],
    ['view.name', () => t.putView({ filter: {} })],
    ['view.revison', () => t.putView({ name: 'v', revison: 2 })],
    ['view.sort.key', () => t.putView({ name: 'v', sort: { key: 'queue' } })],
    ['view.by', () => t.putView({ name: 'v', by: 7 })],
    ['name', () => t.getView(null)],
    ['after', () => t.listViews(10, 3)],
    ['name', () => t.deleteView(['v'])],
  ];
  for (const [field, f] of cases) refused(f, field);
  unchanged();
  assert.equal(engine.instancesMade, made, 'a refused argument threw the instance away');
  engine.close();
});
