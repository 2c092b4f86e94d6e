// The engine: the component's instances, run where a deadline can stop
// them, and the rule that each exported call runs in exactly one store
// transaction, committed only when the guest answered ok, its answer passed
// the host's checks and no limit was broken.
//
// By default the guest runs on a worker thread (src/worker.js) while the
// calling thread owns the store and serves the guest's storage operations
// one by one: a call past its deadline is stopped by terminating the worker,
// and its transaction is rolled back here. `isolation: 'thread'` runs the
// guest on the calling thread instead, where a deadline can only be checked
// after the call returns. The engine never lets one tenant's instance see
// another tenant's transaction.
import { readFileSync } from 'node:fs';
import { createHash } from 'node:crypto';
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { MessageChannel, Worker } from 'node:worker_threads';

import { ComponentInstances } from './component.js';
import {
  ClaimRefusal, LeaseholdError, SandboxError, StorageFailure, StoreError, TenantError,
} from './errors.js';
import { DEFAULT_LIMITS } from './limits.js';
import { Mailbox } from './mailbox.js';
import { Tenant } from './tenant.js';

const GEN = new URL('../gen/', import.meta.url);
const PACKAGED = new URL('bindings/', GEN);

/** The SHA-256 of the component this package was built with, in hex. */
export const COMPONENT_SHA256 = createHash('sha256')
  .update(readFileSync(new URL('leasehold.wasm', GEN)))
  .digest('hex');

/** The version of the WIT package `leasehold:engine` this host speaks. */
export const PACKAGE_VERSION = '0.3.0';

/**
 * Refuses bindings of a component that speaks another version of the
 * package, naming both, before any call: jco generated them from the
 * component's own export names, so those names say what it speaks.
 */
function checkVersion(dir) {
  let js;
  try {
    js = readFileSync(new URL('leasehold.js', dir), 'utf8');
  } catch (e) {
    throw new TypeError(`no component bindings at ${dir.href}: ${e.message}`);
  }
  const found = js.match(/leasehold:engine\/tasks@([0-9A-Za-z.+-]+)/);
  if (!found) throw new TypeError(`the component at ${dir.href} exports no leasehold:engine/tasks interface`);
  if (found[1] !== PACKAGE_VERSION) {
    throw new TypeError(
      `this component speaks leasehold:engine@${found[1]}; this host speaks ${PACKAGE_VERSION}`,
    );
  }
}

/** How long a new sandbox worker may take to load the bindings, compile the component and make a first instance. */
const WORKER_START_MS = 60_000;

/** Tenant names as the Rust host accepts them: 1-64 of [A-Za-z0-9._-]. */
const TENANT_NAME = /^[A-Za-z0-9._-]{1,64}$/;

/** A limit or rule the host enforces inside an import: it ends the call. */
class Violation extends Error {
  constructor(error) {
    super(error.message);
    this.error = error;
  }
}

/** What one call's guest sees of storage, with every guest-controlled size checked before use. */
export class CallState {
  constructor(txn, mode, limits, concurrentWriters, callTime) {
    this.txn = txn;
    this.mode = mode;
    this.limits = limits;
    this.concurrentWriters = concurrentWriters;
    // The instant the changes of this call are recorded at (kv.call-time).
    this.callTime = callTime;
    this.readBytes = 0;
    this.staged = null;
    this.violation = null;
  }

  /** Records the call's outcome and throws the error that unwinds the guest. */
  fail(kind, message) {
    this.violation ??= new SandboxError(kind, message);
    throw new Violation(this.violation);
  }

  checkKey(key) {
    if (key.length > this.limits.keyBytes) {
      this.fail('key-size', `the guest used a key of ${key.length} bytes; the cap is ${this.limits.keyBytes}`);
    }
  }

  countRead(bytes) {
    this.readBytes += bytes;
    if (this.readBytes > this.limits.callReadBytes) {
      this.fail('read-bytes', `the call read more than its budget of ${this.limits.callReadBytes} bytes`);
    }
  }

  /** Runs a store operation; a store failure ends the call as a trap. */
  store(f) {
    try {
      return f();
    } catch (e) {
      this.violation ??= new StorageFailure(`the store failed: ${e.message}`, { cause: e });
      throw new Violation(this.violation);
    }
  }
}

/** The kv import, bound to whichever call of its tenant is in progress. */
export function kvImport(slot) {
  const call = () => {
    if (!slot.call) throw new Error('storage used outside a call');
    return slot.call;
  };
  return {
    concurrentWriters() {
      return call().concurrentWriters;
    },
    callTime() {
      return BigInt(call().callTime);
    },
    get(key) {
      const c = call();
      c.checkKey(key);
      const v = c.store(() => c.txn.get(key));
      c.countRead(v ? v.length : 0);
      return v;
    },
    getMany(keys) {
      const c = call();
      if (keys.length > c.limits.scanEntries) {
        c.fail('get-many-length', `the guest asked one get-many for ${keys.length} keys; the cap is ${c.limits.scanEntries}`);
      }
      for (const k of keys) c.checkKey(k);
      const found = c.store(() => keys.map((k) => c.txn.get(k)));
      c.countRead(found.reduce((n, v) => n + (v ? v.length : 0), 0));
      return found;
    },
    scan(range, limit, reverse) {
      const c = call();
      if (limit > c.limits.scanEntries) {
        c.fail('scan-length', `the guest asked one scan for ${limit} entries; the cap is ${c.limits.scanEntries}`);
      }
      c.checkKey(range.start);
      if (range.end !== undefined) c.checkKey(range.end);
      const { entries, over } = c.store(() => c.txn.scan(range.start, range.end, limit, reverse, c.limits.scanBytes));
      if (over) c.fail('scan-bytes', `one scan read more than its budget of ${c.limits.scanBytes} bytes`);
      c.countRead(entries.reduce((n, [k, v]) => n + k.length + v.length, 0));
      return entries.map(([key, value]) => ({ key, value }));
    },
    // Held to one scan's limits as a whole: each range counts its limit (at
    // least one) against the entries' cap, all answers against the bytes'.
    scanMany(requests) {
      const c = call();
      const asked = requests.reduce((n, r) => Math.min(n + Math.max(r.limit, 1), 0xffffffff), 0);
      if (asked > c.limits.scanEntries) {
        c.fail('scan-length', `the guest asked one scan for ${asked} entries; the cap is ${c.limits.scanEntries}`);
      }
      for (const r of requests) {
        c.checkKey(r.range.start);
        if (r.range.end !== undefined) c.checkKey(r.range.end);
      }
      let left = c.limits.scanBytes;
      const out = [];
      for (const r of requests) {
        const { entries, over } = c.store(() => c.txn.scan(r.range.start, r.range.end, r.limit, r.reverse, left));
        if (over) c.fail('scan-bytes', `one scan read more than its budget of ${c.limits.scanBytes} bytes`);
        const bytes = entries.reduce((n, [k, v]) => n + k.length + v.length, 0);
        left -= Math.min(bytes, left);
        c.countRead(bytes);
        out.push(entries.map(([key, value]) => ({ key, value })));
      }
      return out;
    },
    stage(batch) {
      const c = call();
      if (c.staged) c.fail('second-batch', 'the guest staged a second batch of writes in one call');
      if (c.mode === 'read' && batch.length > 0) {
        c.fail('write-in-read-call', 'the guest staged writes in a read-only call');
      }
      let size = 0;
      const out = [];
      for (const w of batch) {
        if (w.tag === 'put') {
          const { key, value } = w.val;
          c.checkKey(key);
          if (value.length > c.limits.valueBytes) {
            c.fail('value-size', `the guest wrote a value of ${value.length} bytes; the cap is ${c.limits.valueBytes}`);
          }
          size += key.length + value.length;
          out.push({ key, value });
        } else {
          c.checkKey(w.val);
          size += w.val.length;
          out.push({ key: w.val, value: null });
        }
      }
      if (size > c.limits.callWriteBytes) {
        c.fail('write-bytes', `the call's writes came to ${size} bytes; the budget is ${c.limits.callWriteBytes}`);
      }
      c.staged = out;
    },
  };
}

/** Runs the guest on a worker thread, which is terminated when a call passes its deadline. */
class WorkerSandbox {
  #dir;
  #limits;
  #worker = null;
  #box = null;
  #madeBefore = 0;
  /** Tenants whose instance the worker drops before the next call it runs. */
  #forget = new Set();
  made = 0;
  cached = 0;

  constructor(dir, limits) {
    this.#dir = dir;
    this.#limits = limits;
  }

  #start() {
    const flags = new Int32Array(new SharedArrayBuffer(8));
    const { port1, port2 } = new MessageChannel();
    this.#worker = new Worker(new URL('./worker.js', import.meta.url), {
      workerData: {
        port: port2,
        flags,
        dir: this.#dir.href,
        memoryBytes: this.#limits.memoryBytes,
        maxInstances: this.#limits.cachedInstances,
      },
      transferList: [port2],
    });
    // An idle engine must not keep the process alive.
    this.#worker.unref();
    port1.unref();
    this.#box = new Mailbox(port1, flags, 0, 1);
    const m = this.#box.receive(performance.now() + WORKER_START_MS);
    if (!m || m.op !== 'ready') {
      this.stop();
      throw new SandboxError('trap', `the sandbox worker did not start: ${m ? m.message : 'no answer'}`);
    }
  }

  /** Runs one export; `kv` serves its storage operations here, on the calling thread. */
  run(tenant, iface, fn, args, kv, concurrentWriters, deadlineMs, callTime) {
    if (!this.#worker) this.#start();
    // Making the tenant's instance has the deadline to itself, and the
    // guest's call then a whole deadline of its own (the worker says when
    // it begins), as in the Rust host.
    let until = performance.now() + deadlineMs;
    const forget = [...this.#forget];
    this.#forget.clear();
    this.#box.send({ op: 'call', tenant, iface, fn, args, concurrentWriters, callTime, forget });
    for (;;) {
      const m = this.#box.receive(until);
      if (m === undefined) {
        // The only way to stop a guest that does not return: every tenant's
        // cached instance goes with the worker, and the next call starts a new one.
        this.stop();
        return { deadline: true };
      }
      if (m.op === 'instantiated') {
        until = performance.now() + deadlineMs;
        continue;
      }
      if (m.op === 'kv') {
        let reply;
        try {
          reply = { value: kv[m.name](...m.args) };
        } catch (e) {
          reply = { refused: e.message };
        }
        this.#box.send(reply);
        continue;
      }
      this.made = this.#madeBefore + m.made;
      this.cached = m.cached;
      return m.outcome;
    }
  }

  /**
   * Drops the tenant's instance, after a call whose guest answered but whose
   * call failed later (its answer ruled out, its commit failed). The worker
   * drops it before its next call, in the same message.
   */
  forget(tenant) {
    if (this.#worker) this.#forget.add(tenant);
  }

  stop() {
    this.#forget.clear();
    if (!this.#worker) return;
    this.#worker.terminate();
    this.#worker = null;
    this.#box = null;
    this.#madeBefore = this.made;
    this.cached = 0;
  }
}

/** Runs the guest on the calling thread: faster, but a guest that never returns blocks it. */
class ThreadSandbox {
  #instances;

  constructor(bindings, dir, limits) {
    this.#instances = new ComponentInstances(bindings, dir, limits.memoryBytes, limits.cachedInstances);
    // As the worker does before it is ready: the first call's time, checked
    // against its deadline, must not hold the thread's first instantiation.
    this.#instances.warm();
  }

  get made() {
    return this.#instances.made;
  }

  get cached() {
    return this.#instances.cached;
  }

  /** Drops the tenant's instance (see `WorkerSandbox.forget`). */
  forget(tenant) {
    this.#instances.discard(tenant);
  }

  run(tenant, iface, fn, args, kv, _concurrentWriters, deadlineMs, _callTime) {
    let started = performance.now();
    const outcome = this.#instances.run(tenant, iface, fn, args, kv, () => {
      started = performance.now();
    });
    if (performance.now() - started > deadlineMs) {
      this.#instances.discard(tenant);
      return { deadline: true };
    }
    return outcome;
  }

  stop() {
    this.#instances.clear();
  }
}

// The packaged bindings, for `isolation: 'thread'` (a worker loads its own).
const packagedBindings = await import(new URL('leasehold.js', PACKAGED).href);

export class Engine {
  #sandbox;
  #closed = false;

  /**
   * `component` is a directory `scripts/build.mjs` wrote bindings into, for
   * running another build of the world (the worker loads it);
   * `isolation` is `'worker'` (the default) or `'thread'`; `clock` is a
   * function answering milliseconds since 1970, read once per call for the
   * time its changes are recorded at (default `Date.now`; a test passes a
   * fixed one).
   */
  constructor({ store, limits = {}, component, isolation = 'worker', clock = Date.now }) {
    if (typeof clock !== 'function') {
      throw new TypeError('clock must be a function answering milliseconds since 1970');
    }
    this.clock = clock;
    if (!store || typeof store.begin !== 'function') {
      throw new TypeError('open({ store }) needs a store: new MemoryStore() or new SqliteStore(path)');
    }
    if (typeof store.concurrentWriters !== 'boolean') {
      throw new TypeError(
        'a store must say whether other processes write its keys at once: store.concurrentWriters, true or false',
      );
    }
    this.store = store;
    this.limits = Object.freeze({ ...DEFAULT_LIMITS, ...limits });
    const dir = component === undefined ? PACKAGED : new URL(`${pathToFileURL(resolve(String(component))).href}/`);
    checkVersion(dir);
    if (isolation === 'worker') {
      this.#sandbox = new WorkerSandbox(dir, this.limits);
    } else if (isolation === 'thread') {
      if (component !== undefined) throw new TypeError("isolation: 'thread' runs only the packaged component");
      this.#sandbox = new ThreadSandbox(packagedBindings, dir, this.limits);
    } else {
      throw new TypeError(`isolation must be 'worker' or 'thread', got ${isolation}`);
    }
    this.isolation = isolation;
  }

  /** The handle on one tenant: every call through it sees only that tenant's keys. */
  tenant(name) {
    if (typeof name !== 'string' || !TENANT_NAME.test(name)) {
      throw new TenantError(`invalid tenant name ${JSON.stringify(name)}: use 1-64 ASCII letters, digits, '-', '_' and '.'`);
    }
    return new Tenant(this, name);
  }

  /** Instances made so far: one per tenant on first use, again after a trap, a limit or an eviction. */
  get instancesMade() {
    return this.#sandbox.made;
  }

  /** Instances held now: at most `limits.cachedInstances`. */
  get instancesCached() {
    return this.#sandbox.cached;
  }

  /** Stops the sandbox and closes the store; every later call fails with a StorageFailure. */
  close() {
    if (this.#closed) return;
    this.#closed = true;
    this.#sandbox.stop();
    this.store.close();
  }

  /**
   * Runs one exported call, `root[iface][fn](...args)`, in one transaction.
   * `check` turns the guest's answer into the caller's, throwing on what the
   * contract rules out. `claimVerb` says the error result is a claim-error;
   * `'timer'` says it is a timer-error, whose refusals (every case but
   * `store`) are answers, as the Rust host's `Rescheduled` makes them:
   * `check(undefined, refusal)` turns one into the caller's value, and
   * like every error answer it commits nothing.
   */
  call(tenant, verb, mode, claimVerb, iface, fn, args, check) {
    if (this.#closed) throw new StorageFailure('the engine is closed');
    let txn;
    try {
      txn = this.store.begin(tenant, mode);
    } catch (e) {
      if (e instanceof LeaseholdError) throw e;
      throw new StorageFailure(`the store could not begin a transaction: ${e.message}`, { cause: e });
    }
    try {
      const at = this.clock();
      if (!Number.isSafeInteger(at)) throw new StorageFailure(`the clock answered ${at}, not integer milliseconds`);
      const call = new CallState(txn, mode, this.limits, this.store.concurrentWriters, at);
      const deadline = verb === 'check' ? this.limits.checkDeadlineMs : this.limits.deadlineMs;
      const outcome = this.#sandbox.run(
        tenant, iface, fn, args, kvImport({ call }), call.concurrentWriters, deadline, at,
      );
      // A limit the host recorded names the cause better than the trap it led to.
      if (call.violation) throw call.violation;
      if (outcome.deadline) throw new SandboxError('deadline', `the call ran past its deadline of ${deadline} ms`);
      if (outcome.memory) throw new SandboxError('memory', outcome.memory);
      if (outcome.trap !== undefined) throw new SandboxError('trap', `the guest trapped: ${outcome.trap}`);
      if (outcome.error && claimVerb === 'timer' && outcome.error.tag !== 'store') {
        const refused = check(undefined, outcome.error);
        txn.abort();
        return refused;
      }
      if (outcome.error) throw domainError(outcome.error, claimVerb);
      // An instance goes on only from a call that answered ok and committed,
      // as the Rust host's: a ruled-out answer or a failed commit drops it.
      let result;
      try {
        result = check(outcome.answer);
      } catch (e) {
        this.#sandbox.forget(tenant);
        throw e;
      }
      try {
        txn.commit(call.staged ?? []);
      } catch (e) {
        this.#sandbox.forget(tenant);
        if (e instanceof LeaseholdError) throw e;
        throw new StorageFailure(`the store could not commit: ${e.message}`, { cause: e });
      }
      return result;
    } catch (e) {
      txn.abort();
      throw e;
    }
  }
}

/** A `stale` case carries a u64 revision: a number where exact, as every answer's integers. */
const detail = (v) =>
  v.tag === 'stale' && v.val >= BigInt(Number.MIN_SAFE_INTEGER) && v.val <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(v.val) : v.val;

function domainError(variant, claimVerb) {
  if (!claimVerb) return new StoreError(variant.tag, detail(variant));
  if (claimVerb === 'timer') return new StoreError(variant.val.tag, detail(variant.val));
  if (variant.tag === 'store') return new StoreError(variant.val.tag, detail(variant.val));
  return new ClaimRefusal(variant.tag, detail(variant));
}

/**
 * The engine over `store`, with the sandbox's `limits` (see DEFAULT_LIMITS).
 * `isolation: 'thread'` trades the enforced deadline for speed; see README.
 */
export function open({ store, limits, component, isolation, clock } = {}) {
  return new Engine({ store, limits, component, isolation, clock });
}
