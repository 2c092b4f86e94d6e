// The engine's own promises beyond one call: a bounded number of instances
// however many tenants it serves, the same error classes and fields as the
// Python package, a busy SQLite file reported as a retryable LockTimeout,
// a closed engine refusing calls with a StorageFailure, and the in-thread
// isolation mode.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';

import Database from 'better-sqlite3';

import {
  ClaimRefusal, LockTimeout, MemoryStore, SandboxError, SqliteStore, StorageFailure, open,
} from '../src/index.js';

const dir = mkdtempSync(join(tmpdir(), 'leasehold-js-engine-'));
after(() => rmSync(dir, { recursive: true, force: true }));

const task = (id, extra = {}) => ({ id, run: 'r1', kind: 'k', createdAt: 1, ...extra });

test('many tenants hold at most cachedInstances instances, least recently used evicted first', () => {
  const engine = open({ store: new MemoryStore(), limits: { cachedInstances: 4 } });
  for (let i = 0; i < 40; i++) {
    const t = engine.tenant(`tenant-${i}`);
    t.open(task('a'));
    assert.equal(t.openCount(), 1);
    assert.ok(engine.instancesCached <= 4, `${engine.instancesCached} instances held`);
  }
  assert.equal(engine.instancesMade, 40);
  engine.tenant('tenant-39').get('a');
  assert.equal(engine.instancesMade, 40, 'a cached instance was made again');
  assert.equal(engine.tenant('tenant-0').get('a').id, 'a');
  assert.equal(engine.instancesMade, 41, 'an evicted instance was not made again');
  assert.equal(engine.instancesCached, 4);
  engine.close();
});

test('cachedInstances: 0 makes a fresh instance for every call, as the Rust host does', () => {
  const engine = open({ store: new MemoryStore(), limits: { cachedInstances: 0 } });
  const t = engine.tenant('acme');
  t.open(task('a'));
  assert.equal(t.get('a').id, 'a');
  assert.equal(t.claim('a', 'bob').assignee, 'bob');
  assert.equal(engine.instancesMade, 3);
  assert.equal(engine.instancesCached, 0);
  engine.close();
});

test('a refusal has one spelling in both packages: case and detail, tag kept as an alias', () => {
  const engine = open({ store: new MemoryStore() });
  const t = engine.tenant('acme');
  t.open(task('t1'));
  t.claim('t1', 'bob');
  assert.throws(() => t.claim('t1', 'alice'), (e) => {
    assert.ok(e instanceof ClaimRefusal);
    assert.deepEqual([e.case, e.detail, e.tag, e.retryable, e.invalidInput], ['already-claimed', 'bob', 'already-claimed', true, false]);
    assert.deepEqual(e.variant, { tag: 'already-claimed', val: 'bob' });
    return true;
  });
  engine.close();
});

test('a busy SQLite file is a retryable LockTimeout, and the call succeeds once the lock is free', () => {
  const path = join(dir, 'busy.db');
  const store = new SqliteStore(path, { lockTimeoutMs: 50 });
  const engine = open({ store });
  const t = engine.tenant('acme');
  const other = new Database(path);
  other.exec('BEGIN IMMEDIATE');
  assert.throws(() => t.open(task('t1')), (e) => e instanceof LockTimeout && e instanceof StorageFailure && e.retryable);
  other.exec('ROLLBACK');
  other.close();
  assert.equal(t.open(task('t1')).id, 't1');
  engine.close();
});

test('a call after close is a StorageFailure, not the driver\'s error', () => {
  for (const store of [new SqliteStore(join(dir, 'closed.db')), new MemoryStore()]) {
    const engine = open({ store });
    const t = engine.tenant('acme');
    t.open(task('t1'));
    engine.close();
    assert.throws(() => t.get('t1'), (e) => e instanceof StorageFailure && /closed/.test(e.message));
  }
  const store = new SqliteStore(join(dir, 'closed-store.db'));
  const engine = open({ store });
  store.close();
  assert.throws(() => engine.tenant('acme').get('t1'), (e) => e instanceof StorageFailure && !(e instanceof LockTimeout));
});

test("isolation: 'thread' runs the same rules on the calling thread and checks the deadline after the call", () => {
  const store = new MemoryStore();
  const engine = open({ store, isolation: 'thread' });
  const t = engine.tenant('acme');
  t.open(task('t1'));
  assert.equal(t.claim('t1', 'bob').assignee, 'bob');
  engine.close();
  const late = open({ store, isolation: 'thread', limits: { deadlineMs: 0 } });
  const before = store.dump('acme');
  assert.throws(() => late.tenant('acme').open(task('t2')), (e) => e instanceof SandboxError && e.limit === 'deadline');
  assert.deepEqual(store.dump('acme'), before);
  assert.throws(() => open({ store, isolation: 'process' }), TypeError);
});

test('a memory cap below what the component needs at start fails the call by name, not the host', () => {
  const engine = open({ store: new MemoryStore(), limits: { memoryBytes: 64 << 10 } });
  assert.throws(() => engine.tenant('acme').openCount(), (e) => e instanceof SandboxError && e.limit === 'memory');
  engine.close();
});

test('the memory cap is written into a core module as each memory maximum, never raising one', async () => {
  const { capMemories, MemoryCapTooLow } = await import('../src/component.js');
  const PAGE = 65536;
  // (module (memory N [M]) (export "m" (memory 0)))
  const module = (limits) => Uint8Array.of(
    0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00,
    0x05, limits.length + 1, 0x01, ...limits,
    0x07, 0x05, 0x01, 0x01, 0x6d, 0x02, 0x00,
  );
  const maximum = (bytes) => {
    const m = new WebAssembly.Instance(new WebAssembly.Module(bytes)).exports.m;
    for (let grown = 0; ; grown++) {
      try {
        m.grow(1);
      } catch {
        return m.buffer.byteLength / PAGE;
      }
      if (grown > 64) return Infinity;
    }
  };
  assert.equal(maximum(capMemories(module([0x00, 0x01]), 4 * PAGE)), 4, 'no maximum: the cap becomes one');
  assert.equal(maximum(capMemories(module([0x01, 0x01, 0x02]), 4 * PAGE)), 2, 'a lower maximum is kept');
  assert.equal(maximum(capMemories(module([0x01, 0x01, 0x08]), 4 * PAGE)), 4, 'a higher maximum is lowered');
  assert.throws(() => capMemories(module([0x00, 0x05]), 4 * PAGE), MemoryCapTooLow);
});
