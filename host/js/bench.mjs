// calls/s of `claim` and `queue` through the JavaScript host, on each store
// and in each isolation mode (the guest on the deadline worker, or on the
// calling thread): the workload host/python/bench.py and `cargo run
// --release --example polyglot_bench -p leasehold-host` run too
// (BENCHMARKS.md, "Other hosts"). Then the cost of a call on a cached
// instance against one that must make its instance (every call evicts).
//
//   node bench.mjs [--tasks 1000] [--runs 3]
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { COMPONENT_SHA256, MemoryStore, SqliteStore, open } from './src/index.js';

const arg = (name, dflt) => {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? Number(process.argv[i + 1]) : dflt;
};
const TASKS = arg('tasks', 1000);
const RUNS = arg('runs', 3);
const dir = mkdtempSync(join(tmpdir(), 'leasehold-bench-'));

const STORES = {
  memory: () => new MemoryStore(),
  // Each run gets a file of its own: a run claims every task it opened.
  sqlite: (run) => new SqliteStore(join(dir, `bench-${run}.db`), { durability: 'none' }),
};

function once(make, run, isolation) {
  const engine = open({ store: make(run), isolation });
  const t = engine.tenant('bench');
  for (let i = 0; i < TASKS; i++) {
    t.open({ id: `t${i}`, run: 'r', kind: 'k', candidateRoles: ['approver'], createdAt: i });
  }
  t.queue({ roles: ['approver'], limit: 50 }); // warm the instance
  let start = performance.now();
  for (let i = 0; i < TASKS; i++) {
    if (t.queue({ roles: ['approver'], actor: 'alice', limit: 50 }).tasks.length !== 50) throw new Error('short page');
  }
  const queue = TASKS / ((performance.now() - start) / 1000);
  start = performance.now();
  for (let i = 0; i < TASKS; i++) t.claim(`t${i}`, 'bob', ['approver']);
  const claim = TASKS / ((performance.now() - start) / 1000);
  engine.close();
  return { claim, queue };
}

/** µs per `get` on a cached instance, and on an instance made for the call (two tenants, room for one). */
function instances(isolation) {
  const calls = 200;
  const engine = open({ store: new MemoryStore(), isolation, limits: { cachedInstances: 1 } });
  const [a, b] = [engine.tenant('a'), engine.tenant('b')];
  a.get('x');
  let start = performance.now();
  for (let i = 0; i < calls; i++) a.get('x');
  const cached = ((performance.now() - start) * 1000) / calls;
  start = performance.now();
  for (let i = 0; i < calls; i++) (i % 2 ? a : b).get('x');
  const evicted = ((performance.now() - start) * 1000) / calls;
  engine.close();
  return { cached, evicted };
}

const median = (xs) => xs.slice().sort((a, b) => a - b)[xs.length >> 1];
console.log(`component sha256 ${COMPONENT_SHA256}; ${TASKS} tasks, median of ${RUNS} runs, node ${process.version}`);
for (const isolation of ['worker', 'thread']) {
  for (const [name, make] of Object.entries(STORES)) {
    const runs = Array.from({ length: RUNS }, (_, r) => once(make, `${isolation}-${r}`, isolation));
    const fmt = (k) => Math.round(median(runs.map((x) => x[k])));
    console.log(`js ${isolation} ${name}: claim ${fmt('claim')} calls/s, queue (limit 50) ${fmt('queue')} calls/s`);
  }
  const runs = Array.from({ length: RUNS }, () => instances(isolation));
  const fmt = (k) => Math.round(median(runs.map((x) => x[k])));
  console.log(`js ${isolation} get: cached instance ${fmt('cached')} µs/call, evicted (instance made per call) ${fmt('evicted')} µs/call`);
}
rmSync(dir, { recursive: true, force: true });
