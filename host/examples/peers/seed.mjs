// The peer queues' setup for `pg_bench --peers`: installs a system's schema
// in a database of its own and keeps its queue at a given backlog of no-op
// jobs, through each library's own calls.
//
//   node seed.mjs SYSTEM URL TARGET
//
// SYSTEM is `gw`/`gw-lq` (graphile-worker) or `boss1`/`boss8` (pg-boss); adds
// jobs until TARGET wait in the queue (none when as many already do), and
// prints `remaining N` (jobs waiting before it added any) and `added N`.

import { makeWorkerUtils } from "graphile-worker";
import { PgBoss } from "pg-boss";
import pg from "pg";

const [system, url, targetArg] = process.argv.slice(2);
const target = Number(targetArg);
if (!system || !url || !Number.isInteger(target)) {
  console.error("usage: node seed.mjs SYSTEM URL TARGET");
  process.exit(2);
}
const CHUNK = 20_000;

async function waiting(sql) {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return Number((await client.query(sql)).rows[0].n);
  } finally {
    await client.end();
  }
}

async function graphile() {
  const utils = await makeWorkerUtils({ connectionString: url });
  try {
    await utils.migrate();
    const have = await waiting(
      "SELECT count(*) AS n FROM graphile_worker._private_jobs",
    );
    let add = Math.max(0, target - have);
    console.log(`remaining ${have}`);
    while (add > 0) {
      const n = Math.min(add, CHUNK);
      await utils.addJobs(
        Array.from({ length: n }, () => ({ identifier: "noop", payload: {} })),
      );
      add -= n;
    }
    console.log(`added ${Math.max(0, target - have)}`);
  } finally {
    await utils.release();
  }
}

async function boss() {
  const b = new PgBoss({ connectionString: url, schedule: false, supervise: false });
  b.on("error", (e) => console.error(e));
  await b.start();
  try {
    if (!(await b.getQueue("noop"))) await b.createQueue("noop");
    const have = await waiting(
      "SELECT count(*) AS n FROM pgboss.job WHERE name = 'noop' AND state = 'created'",
    );
    let add = Math.max(0, target - have);
    console.log(`remaining ${have}`);
    while (add > 0) {
      const n = Math.min(add, CHUNK);
      await b.insert(
        "noop",
        Array.from({ length: n }, () => ({ data: {} })),
      );
      add -= n;
    }
    console.log(`added ${Math.max(0, target - have)}`);
  } finally {
    await b.stop({ graceful: false, wait: true });
  }
}

if (system === "gw" || system === "gw-lq") await graphile();
else if (system === "boss1" || system === "boss8") await boss();
else {
  console.error(`unknown system ${system}`);
  process.exit(2);
}
