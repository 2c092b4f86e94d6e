// The sandbox worker: runs the component's exports on a thread of its own,
// so the engine can stop a guest that never returns by terminating this
// thread. It holds the instances (a bounded cache, one per tenant) and
// nothing else: every storage operation goes to the calling thread, which
// owns the store, the transaction and every limit check.
import { workerData } from 'node:worker_threads';

import { ComponentInstances } from './component.js';
import { Mailbox } from './mailbox.js';

const { port, flags, dir, memoryBytes, maxInstances } = workerData;
// Counter 0 is the calling thread's inbox, counter 1 this worker's.
const box = new Mailbox(port, flags, 1, 0);

/** The calling thread refused a storage operation; the guest unwinds. */
class Refused extends Error {}

function ask(name, args) {
  box.send({ op: 'kv', name, args });
  const reply = box.receive();
  if (reply.refused !== undefined) throw new Refused(reply.refused);
  return reply.value;
}

function kv(concurrentWriters, callTime) {
  return {
    concurrentWriters: () => concurrentWriters,
    callTime: () => BigInt(callTime),
    get: (key) => ask('get', [key]),
    getMany: (keys) => ask('getMany', [keys]),
    scan: (range, limit, reverse) => ask('scan', [range, limit, reverse]),
    scanMany: (requests) => ask('scanMany', [requests]),
    stage: (batch) => ask('stage', [batch]),
  };
}

let instances;
try {
  const bindings = await import(new URL('leasehold.js', dir).href);
  instances = new ComponentInstances(bindings, new URL(dir), memoryBytes, maxInstances);
  // Ready only once an instance has been made: a call's deadline starts
  // when it is sent, and must count the guest's work, not this thread's
  // first instantiation.
  instances.warm();
  box.send({ op: 'ready' });
} catch (e) {
  box.send({ op: 'failed', message: e instanceof Error ? e.message : String(e) });
}

// Synchronous from here on: the worker never returns to its event loop, so a
// call is served the moment it is posted.
while (instances) {
  const m = box.receive();
  for (const tenant of m.forget ?? []) instances.discard(tenant);
  let outcome;
  try {
    outcome = instances.run(m.tenant, m.iface, m.fn, m.args, kv(m.concurrentWriters, m.callTime), () =>
      box.send({ op: 'instantiated' }));
  } catch (e) {
    // Only a fault of this host lands here; it must end the call, not the worker.
    instances.discard(m.tenant);
    outcome = { trap: `the sandbox failed: ${e instanceof Error ? e.message : String(e)}` };
  }
  box.send({ op: 'done', outcome, made: instances.made, cached: instances.cached });
}
