// calls/s of `claim` and `queue` through the JavaScript host, on each store:
// the workload host/python/bench.py and `cargo run --release --example
// polyglot_bench -p leasehold-host` run too (BENCHMARKS.md, "Other hosts").
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
  sqlite: (run) => new SqliteStore(join(dir, `bench-${run}.db`), { durability: 'none' }),
};

function once(make, run) {
  const engine = open({ store: make(run) });
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

const median = (xs) => xs.slice().sort((a, b) => a - b)[xs.length >> 1];
console.log(`component sha256 ${COMPONENT_SHA256}; ${TASKS} tasks, median of ${RUNS} runs, node ${process.version}`);
for (const [name, make] of Object.entries(STORES)) {
  const runs = Array.from({ length: RUNS }, (_, r) => once(make, r));
  const fmt = (k) => Math.round(median(runs.map((x) => x[k])));
  console.log(`js ${name}: claim ${fmt('claim')} calls/s, queue (limit 50) ${fmt('queue')} calls/s`);
}
rmSync(dir, { recursive: true, force: true });
