// What the JavaScript host itself promises, beyond the scenarios: limits by
// name, a fresh instance after a trap, read calls that cannot write, tenants
// kept apart by the store, and commits that survive reopening the file.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';

import {
  ClaimRefusal, MemoryStore, SandboxError, SqliteStore, StorageFailure, StoreError, TenantError, open, DEFAULT_LIMITS,
} from '../src/index.js';
import { CallState, kvImport } from '../src/engine.js';

const dir = mkdtempSync(join(tmpdir(), 'leasehold-js-host-'));
after(() => rmSync(dir, { recursive: true, force: true }));

const task = (id, extra = {}) => ({ id, run: 'r1', kind: 'k', createdAt: 1, ...extra });

test('a limit hit fails the call by name, commits nothing, and the next call gets a fresh instance', () => {
  const store = new MemoryStore();
  const engine = open({ store, limits: { keyBytes: 48 } });
  const acme = engine.tenant('acme');
  acme.open(task('short'));
  assert.equal(engine.instancesMade, 1);
  const before = store.dump('acme');
  assert.throws(() => acme.open(task('an-id-long-enough-to-take-its-index-keys-past-the-cap')), (e) => {
    assert.ok(e instanceof SandboxError);
    assert.equal(e.limit, 'key-size');
    return true;
  });
  assert.deepEqual(store.dump('acme'), before);
  assert.equal(acme.openCount(), 1);
  assert.equal(engine.instancesMade, 2, 'the trapped instance was reused');
  assert.equal(acme.claim('short', 'bob').assignee, 'bob');
  assert.equal(engine.instancesMade, 2, 'a healthy instance was replaced');
});

test('an error answer discards the instance and commits nothing', () => {
  const store = new MemoryStore();
  const engine = open({ store });
  const acme = engine.tenant('acme');
  acme.open(task('t1', { excludedActors: ['alice'] }));
  const before = store.dump('acme');
  assert.throws(() => acme.claim('t1', 'alice'), (e) => e instanceof ClaimRefusal && e.case === 'excluded' && e.tag === 'excluded' && e.detail === 'alice');
  assert.throws(() => acme.settle('nope', 'completed'), (e) => e instanceof ClaimRefusal && e.tag === 'not-found');
  assert.equal(engine.instancesMade, 2, 'an instance went on after an error answer');
  assert.throws(() => acme.claim('t1', ''), (e) => e instanceof StoreError && e.tag === 'invalid');
  assert.deepEqual(store.dump('acme'), before);
  assert.equal(engine.instancesMade, 3, 'an instance went on after an error answer');
  // An ok answer keeps its instance for the next call.
  assert.equal(acme.openCount(), 1);
  assert.equal(acme.openCount(), 1);
  assert.equal(engine.instancesMade, 4, 'an instance was not kept after ok answers');
});

for (const isolation of ['worker', 'thread']) {
  test(`a failed commit discards the instance and commits nothing (${isolation})`, () => {
    const store = new MemoryStore();
    let failNext = false;
    // The store's own transactions, but the next commit fails.
    const failing = {
      get concurrentWriters() { return store.concurrentWriters; },
      begin(tenant, mode) {
        const txn = store.begin(tenant, mode);
        return {
          get: (...a) => txn.get(...a),
          getMany: (...a) => txn.getMany(...a),
          scan: (...a) => txn.scan(...a),
          abort: () => txn.abort(),
          commit: (batch) => {
            if (failNext) { failNext = false; throw new Error('the disk is gone'); }
            return txn.commit(batch);
          },
        };
      },
      close: () => store.close?.(),
    };
    const engine = open({ store: failing, isolation });
    const acme = engine.tenant('acme');
    acme.open(task('t1'));
    assert.equal(engine.instancesMade, 1);
    const before = store.dump('acme');
    failNext = true;
    assert.throws(() => acme.open(task('t2')), (e) => e instanceof StorageFailure && e.message.includes('the disk is gone'));
    assert.deepEqual(store.dump('acme'), before);
    assert.equal(acme.openCount(), 1);
    assert.equal(engine.instancesMade, 2, 'an instance went on after a failed commit');
    assert.equal(acme.openCount(), 1);
    assert.equal(engine.instancesMade, 2, 'a healthy instance was replaced');
    engine.close();
  });
}

test('values, scans and writes over their caps are refused by name', () => {
  const cases = [
    [{ valueBytes: 64 }, 'value-size', (t) => t.open(task('t1', { justification: { pad: 'x'.repeat(200) } }))],
    [{ callWriteBytes: 64 }, 'write-bytes', (t) => t.open(task('t1'))],
    [{ scanEntries: 2 }, 'scan-length', (t) => t.queue({ roles: [], limit: 10 })],
    [{ callReadBytes: 8 }, 'read-bytes', (t) => { t.open(task('t1')); t.get('t1'); }],
  ];
  for (const [limits, limit, f] of cases) {
    const t = open({ store: new MemoryStore(), limits }).tenant('acme');
    assert.throws(() => f(t), (e) => e instanceof SandboxError && e.limit === limit, limit);
  }
});

test('a read-only call that stages writes traps; a second batch traps', () => {
  const slot = { call: new CallState(new MemoryStore().begin('acme', 'read'), 'read', DEFAULT_LIMITS, false) };
  const kv = kvImport(slot);
  kv.stage([]);
  const write = [{ tag: 'put', val: { key: new Uint8Array([1]), value: new Uint8Array([2]) } }];
  slot.call = new CallState(new MemoryStore().begin('acme', 'read'), 'read', DEFAULT_LIMITS, false);
  assert.throws(() => kv.stage(write));
  assert.equal(slot.call.violation.kind, 'write-in-read-call');
  slot.call = new CallState(new MemoryStore().begin('acme', 'write'), 'write', DEFAULT_LIMITS, false);
  kv.stage(write);
  assert.throws(() => kv.stage(write));
  assert.equal(slot.call.violation.kind, 'second-batch');
});

test('the sqlite store keeps tenants apart however the guest spells its keys', () => {
  const store = new SqliteStore(join(dir, 'tenants.db'));
  const key = Buffer.from('task\0t1');
  store.putRaw('a', key, Buffer.from('A'));
  store.putRaw('ab', key, Buffer.from('AB'));
  const txn = store.begin('a', 'read');
  const { entries } = txn.scan(Buffer.alloc(0), undefined, 10, false, 1 << 20);
  txn.commit([]);
  assert.deepEqual(entries.map(([k, v]) => [k.toString(), v.toString()]), [['task\0t1', 'A']]);
  const engine = open({ store });
  engine.tenant('a').open(task('t1'));
  assert.equal(engine.tenant('ab').get('t1'), null);
  engine.close();
});

test('a committed call survives reopening the sqlite file and a failed one left nothing', () => {
  const path = join(dir, 'durable.db');
  let engine = open({ store: new SqliteStore(path) });
  engine.tenant('acme').open(task('t1', { dueAt: 253402300799999 }));
  assert.throws(() => engine.tenant('acme').open(task('t2', { state: 'claimed', assignee: 'bob' })), StoreError);
  engine.close();
  engine = open({ store: new SqliteStore(path) });
  const acme = engine.tenant('acme');
  assert.equal(acme.get('t1').dueAt, 253402300799999);
  assert.equal(acme.get('t2'), null);
  assert.equal(acme.openCount(), 1);
  assert.deepEqual(acme.check(), []);
  engine.close();
});

test('tenant names are checked with a clear error', () => {
  const engine = open({ store: new MemoryStore() });
  for (const bad of ['', 'a b', 'x'.repeat(65), 'ünï']) assert.throws(() => engine.tenant(bad), TenantError);
  assert.throws(() => open({}), TypeError);
});

test('answers are numbers where they fit and null where absent', () => {
  const acme = open({ store: new MemoryStore() }).tenant('acme');
  assert.equal(acme.nextDue(), null);
  assert.equal(acme.arm({ run: 'r', effect: 'e', fireAt: 10n }), 'armed');
  const [t] = acme.claimDue(10, 1, 604800000);
  assert.equal(typeof t.fireAt, 'number');
  assert.equal(acme.nextDue(), 10 + 604800000);
  assert.equal(typeof acme.pendingCount(), 'number');
});

test('reschedule answers what it did as a value, writes nothing when it refuses, and the feed says rescheduled', () => {
  const store = new MemoryStore();
  // Whether a lease has ended is judged at the call's time, the engine's clock.
  const acme = open({ store, clock: () => 60 }).tenant('acme');
  acme.arm({ run: 'r', effect: 'e', fireAt: 10, step: 2 });
  assert.deepEqual(acme.reschedule('r', 'e', 50), {
    moved: { timer: { run: 'r', case: null, effect: 'e', step: 2, phase: 'forward', fireAt: 50 }, leaseUntil: null },
  });
  acme.claimDue(50, 1, 1000);
  const before = store.dump('acme');
  assert.deepEqual(acme.reschedule('r', 'e', 90), { held: 1050 });
  assert.deepEqual(acme.reschedule('r', 'nothing', 90), { notFound: true });
  assert.deepEqual(store.dump('acme'), before);
  assert.equal(acme.reschedule('r', 'e', 90, { takeBack: true }).moved.timer.fireAt, 90);
  assert.deepEqual(acme.timersOf('r', 10), { timers: [acme.dueBetween(0, 100, 10).timers[0]], next: null });
  acme.seal('r', []);
  assert.deepEqual(acme.reschedule('r', 'e', 95), { runSealed: true });
  const whats = acme.feed(null, 100).page.entries.map((e) => e.change.timer.what);
  assert.deepEqual(whats, ['armed', 'rescheduled', 'claimed', 'rescheduled', 'retired']);
});

test('a schedule comes back as given, every variant case and policy; its occurrences are timers of its run', () => {
  const store = new MemoryStore();
  const acme = open({ store }).tenant('acme');
  const T = 1_709_942_400_000; // 2024-03-09T00:00Z: 19:00 the evening before in New York
  const pulseSpec = {
    id: 'pulse', run: 'r', case: 'c1', step: 3, phase: 'compensating',
    recurrence: { every: { everyMs: 60_000, anchor: T } }, zone: 'UTC', start: T, end: T + 3_600_000,
    gap: 'skip', repeat: 'both', overlap: 'buffer-all', catchUp: { none: true }, jitterMs: 500,
  };
  const pulse = acme.addSchedule(pulseSpec, T);
  assert.deepEqual(pulse, { spec: pulseSpec, paused: null, nextAt: T, lastAt: null, waiting: [], revision: 1 });
  const nightly = acme.addSchedule({
    id: 'nightly', run: 'r', recurrence: { cron: '30 2 * * *' }, zone: 'america/new_york', catchUp: { latestWithin: 600_000 },
  }, T);
  // Stored under the zone's canonical name, the defaults filled in.
  assert.deepEqual(nightly.spec, {
    id: 'nightly', run: 'r', case: null, step: 0, phase: 'forward', recurrence: { cron: '30 2 * * *' },
    zone: 'America/New_York', start: null, end: null, gap: 'shift-forward', repeat: 'first', overlap: 'skip',
    catchUp: { latestWithin: 600_000 }, jitterMs: 0,
  });
  const twoThirty = T + 7.5 * 3_600_000; // 02:30 in New York, 07:30Z
  assert.equal(nightly.nextAt, twoThirty);
  assert.deepEqual(acme.getSchedule('nightly'), nightly);
  assert.deepEqual(acme.nextOccurrences('pulse', BigInt(T), 3), [T + 60_000, T + 120_000, T + 180_000]);

  // Each armed occurrence is an ordinary timer of the run, carrying case, step and phase.
  const [first, second] = acme.timersOf('r', 10).timers.map((i) => i.timer);
  assert.deepEqual(first, { run: 'r', case: null, effect: `schedule/nightly/${twoThirty}`, step: 0, phase: 'forward', fireAt: twoThirty });
  assert.deepEqual({ ...second, fireAt: 0 }, { run: 'r', case: 'c1', effect: `schedule/pulse/${T}`, step: 3, phase: 'compensating', fireAt: 0 });
  assert.ok(second.fireAt >= T && second.fireAt <= T + 500, `jittered within 500 ms: ${second.fireAt}`);
  assert.deepEqual(acme.triggerSchedule('nightly', T + 5), {
    run: 'r', case: null, effect: `schedule/nightly/${T + 5}`, step: 0, phase: 'forward', fireAt: T + 5,
  });

  const paused = acme.pauseSchedule('pulse', 'maintenance');
  assert.deepEqual([paused.paused, paused.nextAt, paused.revision], ['maintenance', null, 2]);
  const resumed = acme.resumeSchedule('pulse', T + 90_000);
  assert.deepEqual([resumed.paused, resumed.nextAt], [null, T + 120_000]);
  const page = acme.listSchedules(1);
  assert.deepEqual([page.schedules.map((s) => s.spec.id), page.next], [['nightly'], 'nightly']);
  assert.deepEqual(acme.listSchedules(1, page.next).schedules, [acme.getSchedule('pulse')]);
  assert.match(acme.tzVersion(), /^20\d\d[a-z]$/);
  assert.equal(acme.removeSchedule('pulse'), true);
  assert.equal(acme.removeSchedule('pulse'), false);
  assert.equal(acme.getSchedule('pulse'), null);
  assert.deepEqual(acme.timersOf('r', 10).timers.map((i) => i.timer.effect), [`schedule/nightly/${T + 5}`, `schedule/nightly/${twoThirty}`]);
});

// ("meta", "layout") as the guest spells it: each string tagged 0x02 and ended by 0x00.
const LAYOUT_KEY = Buffer.from('026d65746100026c61796f757400', 'hex');

test('a store says whether other processes write its keys, and a fresh keyspace is laid out by it', () => {
  assert.throws(() => open({ store: { begin() {} } }), (e) => e instanceof TypeError && /concurrentWriters/.test(e.message));
  class SharedStore extends MemoryStore {
    get concurrentWriters() {
      return true;
    }
  }
  for (const [store, mark] of [[new MemoryStore(), '10/1'], [new SharedStore(), '10/64']]) {
    const t = open({ store }).tenant('acme');
    t.open(task('a'));
    t.open(task('b'));
    assert.equal(t.openCount(), 2);
    const found = store.dump('acme').find(([k]) => Buffer.from(k).equals(LAYOUT_KEY));
    assert.ok(found, 'the keyspace has a layout mark');
    assert.equal(Buffer.from(found[1]).toString(), mark);
    assert.deepEqual(t.check(), []);
  }
});

// The first element of each key of the change record, as the guest spells it.
const RECORD = ['task-log', 'history', 'feed', 'feed-head'].map((n) => Buffer.concat([Buffer.from([2]), Buffer.from(n), Buffer.from([0])]));

test('a task from before history answers a first entry, seq 0, before-history; a newer layout is refused by name', () => {
  // What an earlier build leaves in a layout-5 keyspace: the rows, no record, its own mark.
  const first = new MemoryStore();
  first.putRaw('acme', LAYOUT_KEY, Buffer.from('5/64'));
  open({ store: first }).tenant('acme').open(task('old', { candidateRoles: ['r'] }));
  const store = new MemoryStore();
  for (const [k, v] of first.dump('acme')) {
    if (!RECORD.some((p) => Buffer.from(k).subarray(0, p.length).equals(p))) store.putRaw('acme', k, v);
  }
  store.putRaw('acme', LAYOUT_KEY, Buffer.from('5/64'));
  const acme = open({ store }).tenant('acme');
  const [start, ...rest] = acme.history('old');
  assert.deepEqual(rest, []);
  assert.equal(start.seq, 0);
  assert.equal(start.verb, 'before-history');
  assert.ok(start.before == null);
  assert.equal(start.after, 'open');
  assert.equal(start.at, 1);
  assert.deepEqual(acme.check(), []);
  acme.claim('old', 'ann', ['r']);
  assert.deepEqual(acme.history('old').map((e) => [e.seq, e.verb]), [[0, 'before-history'], [1, 'claim']]);
  assert.deepEqual(acme.history('old', 0).map((e) => e.seq), [1]);
  assert.deepEqual(acme.check(), []);
  const mark = store.dump('acme').find(([k]) => Buffer.from(k).equals(LAYOUT_KEY));
  assert.equal(Buffer.from(mark[1]).toString(), '10/64/from-5');
  // A newer build's mark: every call is refused as newer-layout, naming both layouts.
  store.putRaw('acme', LAYOUT_KEY, Buffer.from('11/64'));
  const before = store.dump('acme');
  for (const call of [() => acme.history('old'), () => acme.open(task('new')), () => acme.release('old', 'ann')]) {
    assert.throws(call, (e) => {
      assert.ok(e instanceof StoreError, String(e));
      assert.equal(e.case, 'newer-layout');
      assert.match(e.detail, /layout 11 .*writes layout 10/);
      return true;
    });
  }
  assert.deepEqual(store.dump('acme'), before);
});

test('a justification nested 10,000 deep is invalid, naming the field, and stores nothing', () => {
  const store = new MemoryStore();
  const acme = open({ store }).tenant('acme');
  const deep = `${'['.repeat(10_000)}1${']'.repeat(10_000)}`;
  assert.throws(() => acme.open(task('deep', { justification: deep })), (e) => {
    assert.ok(e instanceof StoreError);
    assert.equal(e.case, 'invalid');
    assert.match(e.detail, /^justification nests 10000 levels/);
    return true;
  });
  assert.ok(acme.get('deep') == null);
  assert.deepEqual(store.dump('acme'), new MemoryStore().dump('acme'));
  // As deep as the rules allow is stored and read back as it was sent.
  const ok = `${'['.repeat(64)}1${']'.repeat(64)}`;
  assert.equal(acme.open(task('ok', { justification: ok })).justification, ok);
});

test('a subscription goes through every verb of its interface and survives reopening the sqlite file', () => {
  const path = join(dir, 'subscriptions.db');
  let engine = open({ store: new SqliteStore(path) });
  let acme = engine.tenant('acme');
  const key = new Uint8Array(32).fill(7);
  const added = acme.addSubscription('hooks', 'https://hooks.example.com/in', { tasks: true, kinds: ['k'] }, key, null, 1000);
  assert.deepEqual(added, {
    id: 'hooks',
    url: 'https://hooks.example.com/in',
    filter: { tasks: true, timers: false, verbs: [], kinds: ['k'], runs: [], settlingOnly: false },
    state: 'active',
    note: null,
    position: null,
    keys: [{ key, until: null }],
    createdAt: 1000,
    revision: 1,
    attempts: [],
    leaseHolder: null,
    leaseUntil: null,
  });
  assert.ok(added.keys[0].key instanceof Uint8Array);
  // A Buffer is a Uint8Array: it is taken as the bytes it holds.
  acme.addSubscription('other', 'http://10.0.0.7/hook', { timers: true }, Buffer.alloc(24, 1), 'f', 2000);
  acme.open(task('t1', { kind: 'k' }));
  const { head } = acme.feed(null, 10).page;

  // A delivery worker: lease, advance (the revision stays), record, release.
  assert.equal(acme.leaseSubscription('hooks', 'w1', 5000, 60_000), true);
  assert.equal(acme.leaseSubscription('hooks', 'w2', 5001, 60_000), false);
  const moved = acme.advanceSubscription('hooks', 1, head);
  assert.deepEqual([moved.position, moved.revision, moved.leaseHolder, moved.leaseUntil], [head, 1, 'w1', 65_000]);
  acme.recordSubscriptionAttempts('hooks', [{ messageId: 'msg_1', at: 5002, attempt: 1, outcome: '200', latencyMs: 15n }]);
  acme.releaseSubscription('hooks', 'w1');
  const delivered = acme.getSubscription('hooks');
  assert.deepEqual(delivered.attempts, [{ messageId: 'msg_1', at: 5002, attempt: 1, outcome: '200', latencyMs: 15 }]);
  assert.deepEqual([delivered.leaseHolder, delivered.leaseUntil], [null, null]);

  // An operator: change, pause, rotate; a worker at the old revision is told stale.
  const changed = acme.changeSubscription('hooks', 'https://hooks.example.com/v2', { tasks: true, settlingOnly: true }, 1);
  assert.deepEqual([changed.url, changed.filter.settlingOnly, changed.filter.kinds, changed.revision], ['https://hooks.example.com/v2', true, [], 2]);
  assert.throws(() => acme.advanceSubscription('hooks', 1, head), (e) => e instanceof StoreError && e.case === 'stale' && e.detail === 2);
  assert.throws(() => acme.changeSubscription('hooks', null, null, 1), (e) => e instanceof StoreError && e.case === 'stale' && e.current === 2);
  const paused = acme.setSubscriptionState('hooks', 'paused', 'by ann', 2);
  assert.deepEqual([paused.state, paused.note, paused.revision], ['paused', 'by ann', 3]);
  const next = Buffer.alloc(40, 9);
  const rotated = acme.rotateSubscriptionKey('hooks', next, 9000, 6000);
  assert.deepEqual(rotated.keys.map((k) => [Array.from(k.key), k.until]), [[Array.from(key), 9000], [Array.from(next), null]]);
  const replay = acme.rewindSubscription('hooks', 'f');
  assert.deepEqual([replay.state, replay.note, replay.position, replay.revision], ['active', null, null, 5]);
  assert.equal(acme.rewindSubscription('hooks', head).position, head);

  const page = acme.listSubscriptions(1);
  assert.deepEqual([page.subscriptions.map((s) => s.id), page.next], [['hooks'], 'hooks']);
  assert.deepEqual(acme.listSubscriptions(1, page.next), { subscriptions: [acme.getSubscription('other')], next: null });
  assert.deepEqual(acme.check(), []);
  const kept = acme.getSubscription('hooks');
  engine.close();

  engine = open({ store: new SqliteStore(path) });
  acme = engine.tenant('acme');
  assert.deepEqual(acme.getSubscription('hooks'), kept);
  assert.equal(acme.removeSubscription('hooks'), true);
  assert.equal(acme.removeSubscription('hooks'), false);
  assert.equal(acme.getSubscription('hooks'), null);
  assert.throws(() => acme.advanceSubscription('hooks', 6, head), (e) => e instanceof StoreError && e.case === 'not-found');
  assert.equal(acme.leaseSubscription('hooks', 'w1', 7000, 1000), false);
  engine.close();
});

test('search narrows by every filter field, pages by next, counts agree, and views keep their revision', () => {
  const t = open({ store: new MemoryStore() }).tenant('acme');
  t.open(task('a', { kind: 'k1', candidateRoles: ['x'], priority: 'high', case: 'c', dueAt: 50 }));
  t.open(task('b', { kind: 'k2', createdAt: 2, dueAt: 10 }));
  t.open(task('c', { kind: 'k2', createdAt: 3, priority: 'low' }));
  t.claim('a', 'ann', ['x']);
  const ids = (filter, sort = {}) => t.search({ filter, sort, limit: 10 }).tasks.map((x) => x.id);
  assert.deepEqual(ids({}), ['a', 'b', 'c']);
  assert.deepEqual(ids({ states: ['open'], kinds: ['k2'] }), ['b', 'c']);
  assert.deepEqual(ids({ assignee: 'nobody' }), ['b', 'c']);
  assert.deepEqual(ids({ assignee: { actor: 'ann' }, role: 'x', case: 'c' }), ['a']);
  assert.deepEqual(ids({ priorityAtLeast: 'normal', dueBefore: 60 }), ['a', 'b']);
  assert.deepEqual(ids({}, { key: 'due-at', descending: true }), ['c', 'a', 'b']);
  const first = t.search({ filter: {}, sort: { key: 'created-at' }, limit: 2 });
  assert.deepEqual(first.tasks.map((x) => x.id), ['a', 'b']);
  const rest = t.search({ sort: { key: 'created-at' }, limit: 2, after: first.next });
  assert.deepEqual([rest.tasks.map((x) => x.id), rest.next], [['c'], null]);
  assert.deepEqual(t.count({ states: ['open'] }), { count: 2, exact: true, next: null, index: 'counters' });
  assert.equal(t.count({ kinds: ['k2'] }).count, 2);
  assert.equal(t.count({}, { actor: 'bob', roles: [] }).count, 2);
  assert.deepEqual(t.buildSearchIndex(100), { built: true, indexed: 0 });
  const made = t.putView({ name: 'mine', filter: { assignee: 'nobody', dueAfter: 5 }, sort: { key: 'priority' }, by: 'ann' });
  assert.deepEqual([made.revision, made.by, made.filter.assignee, made.filter.dueAfter, made.sort.key], [1, 'ann', 'nobody', 5, 'priority']);
  assert.equal(t.putView({ name: 'mine' }, 1).revision, 2);
  assert.throws(() => t.putView({ name: 'mine' }, 1), (e) => e instanceof StoreError && e.case === 'stale');
  t.putView({ name: 'all' });
  assert.deepEqual(t.listViews(10).map((v) => v.name), ['all', 'mine']);
  assert.deepEqual(t.getView('mine').revision, 2);
  assert.equal(t.getView('nope'), null);
  assert.equal(t.deleteView('mine', 2), true);
  assert.equal(t.deleteView('mine'), false);
  assert.throws(() => t.search({ limit: 1, filter: { state: 'open' } }), /filter\.state is not a field/);
});
