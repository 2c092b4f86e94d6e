// The worker loop (src/task-worker.js) over real stores. Nothing here waits
// on wall time: the workers run on a virtual clock whose sleep moves it, and
// the tests wait for the workers' own events. Covered: a backlog shared by
// two workers, each task handled and settled exactly once; a handler that
// throws (released and retried, or left to its lease); a handler that
// outlives its lease (renewed, nobody else gets the task); shutdown with
// handlers running (what finished settled, what had not started released,
// what is still running left to its lease); and a worker killed with
// SIGKILL whose tasks come back after their leases, returned to the queue
// by another worker (no sweeper runs), which finishes them.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { fileURLToPath } from 'node:url';

import { InvalidArgument, MemoryStore, SqliteStore, TaskWorker, open } from '../src/index.js';

const dir = mkdtempSync(join(tmpdir(), 'leasehold-worker-'));
after(() => rmSync(dir, { recursive: true, force: true }));

/** A clock the workers' sleeps move forward (unless woken first), one event-loop turn per sleep. */
function virtualTime(start = 1_000_000) {
  const clock = { t: start };
  const sleep = (ms, signal) =>
    new Promise((resolve) => {
      setImmediate(() => {
        if (!signal?.aborted) clock.t += ms;
        resolve();
      });
    });
  return { clock, now: () => clock.t, sleep };
}

/** Records a worker's events; `count(name, n)` resolves once `n` of them happened. */
function recorder() {
  const events = [];
  const waiters = [];
  const check = () => {
    for (const w of [...waiters]) {
      if (events.filter(([n]) => n === w.name).length >= w.n) {
        waiters.splice(waiters.indexOf(w), 1);
        w.resolve();
      }
    }
  };
  return {
    events,
    of: (name) => events.filter(([n]) => n === name).map(([, d]) => d),
    onEvent: (name, d) => {
      events.push([name, d]);
      check();
    },
    count: (name, n) =>
      new Promise((resolve) => {
        waiters.push({ name, n, resolve });
        check();
      }),
  };
}

function gate() {
  let open;
  const p = new Promise((resolve) => {
    open = resolve;
  });
  return { p, open };
}

function fill(t, ids) {
  ids.forEach((id, i) => t.open({ id, run: 'r', kind: 'job', candidateRoles: ['op'], createdAt: i + 1 }));
}

const ids = (n, p = 't') => Array.from({ length: n }, (_, i) => `${p}${String(i).padStart(2, '0')}`);

function engineOn(store) {
  return open({ store: store ?? new MemoryStore(), isolation: 'thread' });
}

test('two workers share a backlog: every task handled and settled exactly once', async () => {
  const engine = engineOn(new SqliteStore(join(dir, 'backlog.db'), { durability: 'none' }));
  const t = engine.tenant('acme');
  const all = ids(30);
  fill(t, all);
  const time = virtualTime();
  const seen = [];
  const rec = recorder();
  const make = (actor) =>
    new TaskWorker(t, {
      actor, roles: ['op'], concurrency: 3, batch: 4, ...time, onEvent: rec.onEvent,
      handler: async (task) => {
        await new Promise((r) => setImmediate(r));
        seen.push([task.id, actor]);
      },
    });
  const [a, b] = [make('w1'), make('w2')];
  const runs = [a.run(), b.run()];
  await rec.count('settled', all.length);
  const [sa, sb] = await Promise.all([a.stop(), b.stop(), ...runs]);
  assert.deepEqual(seen.map(([id]) => id).sort(), all);
  assert.equal(sa.settled + sb.settled, all.length);
  assert.equal(sa.claimed + sb.claimed, all.length);
  assert.equal(sa.failed + sb.failed + sa.lost + sb.lost + sa.errors + sb.errors, 0);
  for (const [id, actor] of seen) assert.deepEqual([t.get(id).state, t.get(id).assignee], ['completed', actor], id);
  // One call per batch: each fetch after the first settles the last batch.
  assert.ok(sa.calls + sb.calls < all.length, `${sa.calls + sb.calls} calls for ${all.length} tasks`);
  assert.equal(t.openCount(), 0);
  engine.close();
});

test('a handler that throws has its task released and tried again; the count says so', async () => {
  const engine = engineOn();
  const t = engine.tenant('acme');
  fill(t, ['a', 'b', 'c', 'd', 'e']);
  const tries = {};
  const rec = recorder();
  const w = new TaskWorker(t, {
    actor: 'w1', roles: ['op'], concurrency: 2, batch: 2, ...virtualTime(), onEvent: rec.onEvent,
    handler: async (task) => {
      tries[task.id] = (tries[task.id] ?? 0) + 1;
      if (task.id === 'c' && tries.c === 1) throw new Error('flaky');
    },
  });
  const run = w.run();
  await rec.count('settled', 5);
  const stats = await w.stop();
  await run;
  assert.deepEqual(tries, { a: 1, b: 1, c: 2, d: 1, e: 1 });
  assert.deepEqual([stats.failed, stats.released, stats.handled, stats.settled], [1, 1, 5, 5]);
  assert.deepEqual(rec.of('failed').map((d) => [d.id, d.error.message]), [['c', 'flaky']]);
  assert.ok(t.history('c').some((e) => e.verb === 'release' && e.actor === 'w1'));
  engine.close();
});

test("onError 'lease' leaves a failed task held until its lease lapses; reclaimLapsed returns it", async () => {
  const engine = engineOn();
  const t = engine.tenant('acme');
  fill(t, ['x']);
  const rec = recorder();
  const w = new TaskWorker(t, {
    actor: 'w1', roles: ['op'], onError: 'lease', leaseMs: 10_000, ...virtualTime(), onEvent: rec.onEvent,
    handler: () => {
      throw new Error('broken');
    },
  });
  const run = w.run();
  await rec.count('failed', 1);
  const stats = await w.stop({ deadlineMs: 0 });
  await run;
  assert.deepEqual([stats.failed, stats.released], [1, 0]);
  const held = t.get('x');
  assert.deepEqual([held.state, held.assignee], ['claimed', 'w1']);
  assert.deepEqual(t.reclaimLapsed(held.leaseUntil - 1, 10), []);
  assert.deepEqual(t.reclaimLapsed(held.leaseUntil, 10).map((x) => [x.id, x.state]), [['x', 'open']]);
  engine.close();
});

test('a handler that outlives its lease has it renewed: nobody else gets the task', async () => {
  const engine = engineOn();
  const t = engine.tenant('acme');
  fill(t, ['slow']);
  const time = virtualTime();
  const rec = recorder();
  const g = gate();
  const w = new TaskWorker(t, {
    actor: 'w1', roles: ['op'], leaseMs: 1000, ...time, onEvent: rec.onEvent, handler: () => g.p,
  });
  const run = w.run();
  await rec.count('claimed', 1);
  const firstEnd = rec.of('claimed')[0].task.leaseUntil;
  await rec.count('renewed', 4);
  const now = time.clock.t;
  assert.ok(now >= firstEnd + 1000, 'the handler has run past two leases');
  const task = t.get('slow');
  assert.deepEqual([task.state, task.assignee], ['claimed', 'w1']);
  assert.ok(task.leaseUntil > now);
  assert.deepEqual(t.claimBatch({ roles: ['op'], actor: 'w2' }, { now, leaseMs: 1000 }, 5), []);
  assert.deepEqual(t.reclaimLapsed(now, 10), []);
  g.open({ settlement: 'completed', decision: { outcome: 'done', reason: 'slowly' } });
  await rec.count('settled', 1);
  const stats = await w.stop();
  await run;
  assert.ok(stats.renewed >= 4);
  const done = t.get('slow');
  assert.deepEqual([done.state, done.assignee, done.decision.outcome, done.decision.by], ['completed', 'w1', 'done', 'w1']);
  engine.close();
});

test('shutdown settles what finished, releases what had not started and leaves the still running to their leases', async () => {
  const engine = engineOn();
  const t = engine.tenant('acme');
  fill(t, ['a', 'b', 'c', 'd', 'e', 'f']);
  const rec = recorder();
  const gates = {};
  const signals = {};
  const w = new TaskWorker(t, {
    actor: 'w1', roles: ['op'], concurrency: 2, batch: 4, leaseMs: 10_000, ...virtualTime(), onEvent: rec.onEvent,
    handler: (task, { signal }) => {
      gates[task.id] = gate();
      signals[task.id] = signal;
      return gates[task.id].p;
    },
  });
  const run = w.run();
  await rec.count('started', 2);
  assert.deepEqual(rec.of('started').map((d) => d.task.id), ['a', 'b']);
  gates.a.open();
  await rec.count('started', 3); // c takes a's place; d waits in the buffer
  const stats = await w.stop({ deadlineMs: 60_000 });
  await run;
  assert.deepEqual(
    [stats.claimed, stats.handled, stats.settled, stats.released, stats.abandoned],
    [4, 1, 1, 1, 2],
  );
  const state = (id) => [t.get(id).state, t.get(id).assignee];
  assert.deepEqual(state('a'), ['completed', 'w1']);
  assert.deepEqual(state('d'), ['open', null]);
  assert.deepEqual(state('b'), ['claimed', 'w1']);
  assert.deepEqual(state('c'), ['claimed', 'w1']);
  assert.deepEqual([state('e'), state('f')], [['open', null], ['open', null]]);
  assert.ok(signals.b.aborted && signals.c.aborted, 'the abandoned handlers were told');
  // b and c come back once their leases lapse.
  const end = Math.max(t.get('b').leaseUntil, t.get('c').leaseUntil);
  assert.deepEqual(t.reclaimLapsed(end, 10).map((x) => x.id).sort(), ['b', 'c']);
  engine.close();
});

test('a worker killed with SIGKILL: its tasks come back after their leases and a second worker finishes them', async () => {
  const path = join(dir, 'killed.db');
  let engine = engineOn(new SqliteStore(path));
  fill(engine.tenant('acme'), ['k1', 'k2', 'k3', 'k4', 'k5']);
  engine.close();
  const leaseMs = 600_000;
  const child = spawn(process.execPath, [fileURLToPath(new URL('support/killed-worker.mjs', import.meta.url)), path, String(leaseMs)], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const line = await new Promise((resolve, reject) => {
    let out = '';
    child.stdout.on('data', (b) => {
      out += b;
      if (out.includes('\n')) resolve(out.split('\n')[0]);
    });
    child.on('exit', (code) => reject(new Error(`the worker exited (${code}) before it claimed`)));
  });
  const exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve(signal)));
  child.kill('SIGKILL');
  assert.equal(await exited, 'SIGKILL');
  const claimed = JSON.parse(line);
  assert.deepEqual(claimed, ['k1', 'k2', 'k3']);

  engine = engineOn(new SqliteStore(path));
  const t = engine.tenant('acme');
  const held = t.held('doomed', 10).tasks;
  assert.deepEqual(held.map((x) => x.id), claimed);
  // Nothing comes back before the leases end; everything after, brought
  // back by the second worker itself (no sweeper runs here).
  const end = Math.max(...held.map((x) => x.leaseUntil));
  const start = Math.min(...held.map((x) => x.leaseUntil));
  assert.deepEqual(t.reclaimLapsed(start - 1, 10), []);

  const rec = recorder();
  const handled = [];
  const w = new TaskWorker(t, {
    actor: 'heir', roles: ['op'], ...virtualTime(end), onEvent: rec.onEvent,
    handler: (task) => {
      handled.push(task.id);
    },
  });
  const run = w.run();
  await rec.count('settled', 5);
  const stats = await w.stop();
  await run;
  assert.deepEqual(rec.of('reclaimed').flatMap((d) => d.ids), claimed);
  assert.equal(stats.reclaimed, 3);
  assert.deepEqual(handled.sort(), ['k1', 'k2', 'k3', 'k4', 'k5']);
  for (const id of handled) assert.deepEqual([t.get(id).state, t.get(id).assignee], ['completed', 'heir']);
  engine.close();
});

test('a worker refuses options it cannot run with', () => {
  const engine = engineOn();
  const t = engine.tenant('acme');
  const h = () => {};
  assert.throws(() => new TaskWorker(t, { handler: h }), InvalidArgument);
  assert.throws(() => new TaskWorker(t, { actor: 'w', handler: h, batch: 101 }), InvalidArgument);
  assert.throws(() => new TaskWorker(t, { actor: 'w', handler: h, onError: 'ignore' }), InvalidArgument);
  assert.throws(() => new TaskWorker(t, { actor: 'w', handler: h, reclaimMs: -1 }), InvalidArgument);
  assert.throws(() => new TaskWorker(t, { actor: 'w' }), InvalidArgument);
  engine.close();
});

test('settleAndClaim refuses a malformed finished entry before the guest runs, naming it', () => {
  const engine = engineOn();
  const t = engine.tenant('acme');
  const q = { roles: ['op'], actor: 'w1' };
  const refused = (done, field) =>
    assert.throws(() => t.settleAndClaim(done, q, null, 1), (e) => e instanceof InvalidArgument && e.detail.includes(field), field);
  refused('a', 'done');
  refused([{ id: 'a', settlement: 'done' }], 'done[0].settlement');
  refused([{ id: 'a', settlement: 'completed', extra: 1 }], 'done[0].extra');
  refused([{ id: 7, settlement: 'completed' }], 'done[0].id');
  refused([{ id: 'a', settlement: 'completed', decision: { outcome: 1 } }], 'decision.outcome');
  engine.close();
});
