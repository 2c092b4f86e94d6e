// The sandbox, proved with the hostile fixture component the Rust suite uses
// (tests/fixtures/hostile, transpiled by scripts/build.mjs into
// gen/hostile/): a guest that loops, hoards memory, breaks a limit or
// answers what the contract rules out is stopped and reported by name, the
// host keeps serving, and nothing the guest staged commits.
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { fileURLToPath } from 'node:url';

import Database from 'better-sqlite3';

import { MemoryStore, SandboxError, SqliteStore, StorageFailure, StoreError, open } from '../src/index.js';

const HOSTILE = fileURLToPath(new URL('../gen/hostile/', import.meta.url));
if (!existsSync(HOSTILE)) throw new Error('gen/hostile/ is missing: run `npm run build` (it transpiles the hostile fixture)');

/** A deadline only a guest that never returns can pass. */
const SHORT = { deadlineMs: 1000 };

function hostile(limits = {}) {
  const store = new MemoryStore();
  const engine = open({ store, component: HOSTILE, limits });
  return { store, engine, t: engine.tenant('acme') };
}

const task = (id) => ({ id, run: 'r', kind: 'k', createdAt: 1 });

function fails(f, kind) {
  assert.throws(f, (e) => {
    assert.ok(e instanceof SandboxError, `expected a SandboxError, got ${e}`);
    assert.equal(e.kind, kind, e.message);
    return true;
  });
}

/** The engine still serves: the fixture's control call answers. */
function stillServes(t) {
  assert.equal(t.get('plain'), null);
}

test('a guest that loops forever is stopped at the deadline and the host keeps serving', () => {
  const { engine, t } = hostile(SHORT);
  fails(() => t.get('loop'), 'deadline');
  stillServes(t);
  engine.close();
});

test('a write followed by a deadline commits nothing', () => {
  const { store, engine, t } = hostile(SHORT);
  fails(() => t.open(task('write-then-loop')), 'deadline');
  fails(() => t.open(task('read-then-loop')), 'deadline');
  assert.deepEqual(store.dump('acme'), []);
  engine.close();
});

test('a guest that allocates without bound hits the memory cap by name', () => {
  const { engine, t } = hostile({ memoryBytes: 16 << 20 });
  fails(() => t.get('alloc'), 'memory');
  stillServes(t);
  engine.close();
});

test('writes commit when the guest answers ok, and none when it traps or answers an error', () => {
  const { store, engine, t } = hostile();
  fails(() => t.open(task('write-then-trap')), 'trap');
  assert.throws(() => t.open(task('write-then-error')), (e) => e instanceof StoreError && e.case === 'invalid');
  assert.deepEqual(store.dump('acme'), []);
  t.open(task('write-ok'));
  assert.deepEqual(store.dump('acme').map(([k]) => Buffer.from(k).toString()), ['hostile-ok']);
  engine.close();
});

/**
 * The memory store, but the commit after `failNext` is set fails (once), as
 * a disk that is gone or a database that went away would.
 */
function failingStore() {
  const store = new MemoryStore();
  const failing = {
    failNext: false,
    get concurrentWriters() { return store.concurrentWriters; },
    begin(tenant, mode) {
      const txn = store.begin(tenant, mode);
      return {
        get: (...a) => txn.get(...a),
        getMany: (...a) => txn.getMany(...a),
        scan: (...a) => txn.scan(...a),
        abort: () => txn.abort(),
        commit: (batch) => {
          if (failing.failNext) {
            failing.failNext = false;
            throw new Error('the disk is gone');
          }
          return txn.commit(batch);
        },
      };
    },
    close: () => store.close(),
  };
  return { store, failing };
}

test('a failed commit drops the instance: the next call finds nothing the guest kept', () => {
  const { store, failing } = failingStore();
  const engine = open({ store: failing, component: HOSTILE });
  const t = engine.tenant('acme');
  const recall = () => t.get('recall').justification;
  const commitFails = (f) => {
    failing.failNext = true;
    assert.throws(f, (e) => e instanceof StorageFailure && e.message.includes('the disk is gone'));
  };
  assert.equal(t.get('remember-kept'), null);
  // An instance goes on after a call that committed, memory and all.
  assert.equal(recall(), 'kept|2');
  // A write call whose guest answered ok, but whose commit failed.
  commitFails(() => t.open(task('write-ok')));
  assert.deepEqual(store.dump('acme'), []);
  assert.equal(recall(), '|1', 'the next call ran on the instance whose commit failed');
  // A read call's commit (of nothing) failing too.
  assert.equal(t.get('remember-again'), null);
  commitFails(() => t.get('remember-lost'));
  assert.equal(recall(), '|1', 'the next call ran on the instance whose commit failed');
  engine.close();
});

test('limits in the kv import fail the call by name and commit nothing', () => {
  const { store, engine, t } = hostile();
  fails(() => t.open(task('stage-too-large')), 'value-size');
  fails(() => t.open(task('stage-twice')), 'second-batch');
  fails(() => t.open(task('write-flood')), 'write-bytes');
  fails(() => t.get('huge-key'), 'key-size');
  fails(() => t.get('long-scan'), 'scan-length');
  fails(() => t.get('long-get-many'), 'get-many-length');
  // A scan-many is held to one scan's entries as a whole.
  fails(() => t.get('long-scan-many'), 'scan-length');
  fails(() => t.get('many-empty-scans'), 'scan-length');
  fails(() => t.get('scan-many-huge-key'), 'key-size');
  fails(() => t.get('write'), 'write-in-read-call');
  assert.deepEqual(store.dump('acme'), []);
  stillServes(t);
  engine.close();
});

test('answers the contract rules out are reported, not passed on, and commit nothing', () => {
  const { store, engine, t } = hostile();
  const calls = {
    'open under another id': () => t.open(task('wrong-id')),
    'get under another id': () => t.get('wrong-id'),
    'a claim answered under another id': () => t.claim('t1', 'alice', []),
    'an escalation answered under another id': () => t.escalate('t1'),
    'claim-due past its limit': () => t.claimDue(10, 2, 1000),
    'overdue past its limit': () => t.overdue(10, 2),
    'reclaim-lapsed answering one task twice': () => t.reclaimLapsed(10, 5),
    'claim-next answering a task nobody holds': () => t.claimNext({ roles: [], actor: 'alice' }),
    // Each writes first: the refusal must commit nothing.
    'claim-batch answering a task nobody holds': () => t.claimBatch({ roles: [], actor: 'alice' }, null, 5),
    'settle-and-claim answering none of its finished tasks': () =>
      t.settleAndClaim([{ id: 't1', settlement: 'completed' }], { roles: [], actor: 'alice' }, null, 1),
    'a move answered for another timer': () => t.reschedule('r', 'e', 10),
    'timers-of answering a timer of another run': () => t.timersOf('r', 10),
    // It writes first: the refusal must commit nothing.
    'a schedule added answered under another id': () =>
      t.addSchedule({ id: 's', run: 'r', recurrence: { cron: '* * * * *' }, zone: 'UTC' }, 10),
    'next-occurrences out of order': () => t.nextOccurrences('s', 10, 5),
    'get-schedule under another id': () => t.getSchedule('s'),
    'tz-version answering no database version': () => t.tzVersion(),
    // Neither escalated, expired nor reminded: open with no step fired, more
    // reminders fired than it has, escalated yet held. Each writes first.
    'expire-overdue answering an open task no step fired on': () => t.expireOverdue(0, 5),
    'expire-overdue answering more reminders fired than the task has': () => t.expireOverdue(1, 5),
    'expire-overdue answering an escalated task still held': () => t.expireOverdue(2, 5),
    'get-subscription under another id': () => t.getSubscription('s'),
    // It writes first: the refusal must commit nothing.
    'advance-subscription answered at another revision': () => t.advanceSubscription('s', 1, 'f'),
    'search answering one task more than its limit': () => t.search({ limit: 3 }),
    'get-view under another name': () => t.getView('v'),
  };
  for (const [what, f] of Object.entries(calls)) {
    assert.throws(f, (e) => e instanceof SandboxError && e.kind === 'malformed', what);
  }
  assert.deepEqual(store.dump('acme'), []);
  engine.close();
});

test('an expire-overdue answer a reminder leaves (pending, a reminder fired) is accepted', () => {
  const { engine, t } = hostile();
  const [swept, ...rest] = t.expireOverdue(3, 5);
  assert.deepEqual(rest, []);
  assert.deepEqual([swept.state, swept.stepsDone, swept.remindBefore], ['open', 1, [1000]]);
  engine.close();
});

test('the guest is granted no environment, arguments, files, input or network', () => {
  const { engine, t } = hostile();
  const found = JSON.parse(t.get('wasi').justification);
  assert.deepEqual(found, { env: 0, args: 0, files: 0, stdin: 0, network: false });
  engine.close();
});

test('a guest sees nothing outside its tenant however it asks', () => {
  const { store, engine } = hostile();
  store.putRaw('ab', Buffer.from('task\0t1'), Buffer.from('other'));
  store.putRaw('a', Buffer.from('mine'), Buffer.from('1'));
  const seen = JSON.parse(engine.tenant('a').get('escape').justification);
  assert.ok(seen.length > 0);
  assert.ok(seen.every((k) => k === Buffer.from('mine').toString('hex')), `saw ${seen}`);
  engine.close();
});

test('byte budgets bound what one call can make the host hold', () => {
  // The deadline is far off, so the budget, not a slow machine, ends the flood.
  const { store, engine, t } = hostile({ scanBytes: 2 << 20, callReadBytes: 4 << 20, deadlineMs: 120_000 });
  for (const k of ['big-0', 'big-1', 'big-2']) store.putRaw('acme', Buffer.from(k), new Uint8Array(1 << 20).fill(7));
  fails(() => t.get('big-scan'), 'scan-bytes');
  // Each range within one scan's bytes, all of them past.
  fails(() => t.get('big-scan-many'), 'scan-bytes');
  fails(() => t.get('read-flood'), 'read-bytes');
  stillServes(t);
  engine.close();
});

test('a call stopped at its deadline rolls back and gives up the SQLite write lock', () => {
  const dir = mkdtempSync(join(tmpdir(), 'leasehold-js-sandbox-'));
  after(() => rmSync(dir, { recursive: true, force: true }));
  const path = join(dir, 'deadline.db');
  const store = new SqliteStore(path, { lockTimeoutMs: 50 });
  const engine = open({ store, component: HOSTILE, limits: SHORT });
  fails(() => engine.tenant('acme').open(task('write-then-loop')), 'deadline');
  const other = new Database(path, { timeout: 50 });
  other.exec('BEGIN IMMEDIATE');
  other.exec('ROLLBACK');
  other.close();
  assert.deepEqual(store.dump('acme'), []);
  engine.close();
});
