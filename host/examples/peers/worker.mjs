// One worker process of a peer queue for `pg_bench --peers` (see
// pg_bench/peers.rs): takes no-op jobs off one shared queue until told to
// stop, speaking the same lines on stdin/stdout as pg_bench's own workers.
//
//   node worker.mjs SYSTEM URL
//
// SYSTEM is one of:
//   gw      graphile-worker as it runs by default: one job at a time
//           (concurrentJobs 1), no local queue, each job completed alone.
//   gw-lq   graphile-worker with its local queue and batched completion, as
//           its performance page runs it (perfTest/graphile.config.js):
//           concurrentJobs 24, maxPoolSize 25, localQueue { size: 500,
//           refetchDelay 10 ms }, completeJobBatchDelay 0, failJobBatchDelay 0.
//   boss1   pg-boss, fetch() of one job, then complete() of it.
//   boss8   pg-boss, fetch(name, { batchSize: 8 }), then one complete() of
//           the eight ids.
//
// pg-boss's work() runs the same fetch and complete per batch, but between
// fetches it waits its polling interval (2 s by default; the burst options
// that skip the wait read a cached backlog count); the loop below is work()'s
// body without the wait, the fastest way pg-boss documents.
//
// Protocol: prints `ready` once connected (and, for graphile-worker, once
// its runner holds the first job(s) at the gate); reads `go`, works; reads
// `stop`, prints `claims N secs S retries 0 calls N` with the jobs done
// meanwhile, shuts down the way the library says to, prints `total M` (jobs
// done by the exit), and exits.

import { createInterface } from "node:readline";
import { Logger, run } from "graphile-worker";
import { PgBoss } from "pg-boss";

const [system, url] = process.argv.slice(2);
if (!system || !url) {
  console.error("usage: node worker.mjs SYSTEM URL");
  process.exit(2);
}

const lines = createInterface({ input: process.stdin });
const nextLine = (() => {
  const waiting = [];
  const queued = [];
  lines.on("line", (l) => (waiting.length ? waiting.shift()(l) : queued.push(l)));
  lines.on("close", () => {
    while (waiting.length) waiting.shift()("stop");
    queued.push("stop");
  });
  return () =>
    new Promise((resolve) =>
      queued.length ? resolve(queued.shift()) : waiting.push(resolve),
    );
})();

let done = 0;
let counting = false;
let started = 0n;
let stopping = false;
let release;
const gate = new Promise((r) => (release = r));

function report() {
  const secs = Number(process.hrtime.bigint() - started) / 1e9;
  console.log(`claims ${done} secs ${secs} retries 0 calls ${done}`);
}

async function graphile(localQueue) {
  const worker = localQueue
    ? {
        concurrentJobs: 24,
        maxPoolSize: 25,
        localQueue: { size: 500, refetchDelay: { durationMs: 10 } },
        completeJobBatchDelay: 0,
        failJobBatchDelay: 0,
      }
    : {};
  let first;
  const held = new Promise((r) => (first = r));
  const runner = await run({
    connectionString: url,
    noHandleSignals: true,
    logger: quietLogger(),
    preset: { worker },
    taskList: {
      noop: async () => {
        if (!counting) {
          first();
          await gate;
        }
        done += 1;
      },
    },
  });
  await held;
  console.log("ready");
  await nextLine();
  started = process.hrtime.bigint();
  counting = true;
  release();
  await nextLine();
  report();
  await runner.stop();
  console.log(`total ${done}`);
}

async function boss(batchSize) {
  const b = new PgBoss({ connectionString: url, schedule: false, migrate: false });
  b.on("error", (e) => console.error(e));
  await b.start();
  console.log("ready");
  await nextLine();
  started = process.hrtime.bigint();
  const stopped = nextLine().then(() => {
    stopping = true;
    report();
  });
  while (!stopping) {
    const jobs = await b.fetch("noop", { batchSize });
    if (jobs.length === 0) {
      console.log("empty");
      break;
    }
    await b.complete(
      "noop",
      jobs.map((j) => j.id),
    );
    done += jobs.length;
  }
  await stopped;
  await b.stop({ graceful: true, wait: true });
  console.log(`total ${done}`);
}

function quietLogger() {
  // graphile-worker logs each job at info level; a benchmark's stdout
  // carries the protocol, so only warnings and errors are kept (stderr).
  return new Logger(() => (level, message) => {
    if (level === "error" || level === "warning") console.error(message);
  });
}

switch (system) {
  case "gw":
    await graphile(false);
    break;
  case "gw-lq":
    await graphile(true);
    break;
  case "boss1":
    await boss(1);
    break;
  case "boss8":
    await boss(8);
    break;
  default:
    console.error(`unknown system ${system}`);
    process.exit(2);
}
process.exit(0);
