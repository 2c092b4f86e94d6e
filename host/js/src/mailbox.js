// A blocking message channel between the calling thread and the sandbox
// worker: messages travel on a MessagePort (any structured-cloneable value),
// and a counter in shared memory, waited on with Atomics.wait, says one has
// arrived. Either side can block on it; the caller with a timeout, which is
// how a call's deadline is kept while the guest runs on the other thread.
import { receiveMessageOnPort } from 'node:worker_threads';

export class Mailbox {
  /** `flags` is an Int32Array on a SharedArrayBuffer; `inbox`/`outbox` index its counters. */
  constructor(port, flags, inbox, outbox) {
    this.port = port;
    this.flags = flags;
    this.inbox = inbox;
    this.outbox = outbox;
  }

  send(message) {
    this.port.postMessage(message);
    Atomics.add(this.flags, this.outbox, 1);
    Atomics.notify(this.flags, this.outbox);
  }

  /**
   * The next message, waiting for it until `until` (a performance.now()
   * time) at most; undefined if none came by then.
   */
  receive(until = Infinity) {
    for (;;) {
      // Read the counter before looking: a message posted after the look
      // bumps it, so the wait below returns at once instead of missing it.
      const seen = Atomics.load(this.flags, this.inbox);
      const m = receiveMessageOnPort(this.port);
      if (m) return m.message;
      const left = until - performance.now();
      if (left <= 0) return undefined;
      Atomics.wait(this.flags, this.inbox, seen, left === Infinity ? undefined : left);
    }
  }
}
