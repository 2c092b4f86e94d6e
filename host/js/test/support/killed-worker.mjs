// A worker killed mid-batch, for worker.test.js: it claims tasks of the
// SQLite file given, starts handlers that never finish, prints the ids it
// claimed once its handlers run, and waits to be killed with SIGKILL.
import { SqliteStore, TaskWorker, open } from '../../src/index.js';

const [path, leaseMs] = process.argv.slice(2);
const engine = open({ store: new SqliteStore(path), isolation: 'thread' });
const claimed = [];
let started = 0;
const worker = new TaskWorker(engine.tenant('acme'), {
  actor: 'doomed',
  roles: ['op'],
  concurrency: 2,
  batch: 3,
  leaseMs: Number(leaseMs),
  handler: () => new Promise(() => {}),
  onEvent: (name, d) => {
    if (name === 'claimed') claimed.push(d.task.id);
    if (name === 'started' && ++started === 2) process.stdout.write(`${JSON.stringify(claimed)}\n`);
  },
});
worker.run();
