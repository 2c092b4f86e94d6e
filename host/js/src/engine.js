// The engine: the transpiled component, one instance per tenant, and the rule
// that each exported call runs in exactly one store transaction, committed
// only when the guest answered ok, its answer passed the host's checks and no
// limit was broken.
//
// An instance is reused for its tenant's calls and replaced after anything
// that may leave it broken (a trap, a limit, a host failure inside an
// import). The kv import reads the transaction of the call in progress; a
// tenant's instance is only ever handed that tenant's transaction.
import { readFileSync } from 'node:fs';
import { createHash } from 'node:crypto';

import { instantiate } from '../gen/bindings/leasehold.js';
import { ClaimRefusal, LeaseholdError, SandboxError, StorageFailure, StoreError, TenantError } from './errors.js';
import { DEFAULT_LIMITS } from './limits.js';
import { Tenant } from './tenant.js';

const GEN = new URL('../gen/', import.meta.url);

/** The SHA-256 of the component this package was built with, in hex. */
export const COMPONENT_SHA256 = createHash('sha256')
  .update(readFileSync(new URL('leasehold.wasm', GEN)))
  .digest('hex');

// Core modules are compiled once per process; every instance shares them.
const modules = new Map();
function coreModule(path) {
  let m = modules.get(path);
  if (!m) modules.set(path, (m = new WebAssembly.Module(readFileSync(new URL(`bindings/${path}`, GEN)))));
  return m;
}

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
  constructor(txn, mode, limits, concurrentWriters) {
    this.txn = txn;
    this.mode = mode;
    this.limits = limits;
    this.concurrentWriters = concurrentWriters;
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

/** One tenant's instance of the component, made on first use and after a trap. */
class Instance {
  constructor() {
    this.slot = { call: null };
    this.root = null;
    this.memories = [];
    this.made = 0;
  }

  exports() {
    if (!this.root) {
      const kv = kvImport(this.slot);
      const memories = [];
      this.root = instantiate(
        coreModule,
        // jco looks the interface up by its unversioned name in sync mode.
        { 'leasehold:engine/kv': kv, 'leasehold:engine/kv@0.2.0': kv, 'leasehold:engine/types@0.2.0': {} },
        (module, imports) => {
          const inst = new WebAssembly.Instance(module, imports);
          for (const v of Object.values(inst.exports)) if (v instanceof WebAssembly.Memory) memories.push(v);
          return inst;
        },
      );
      this.memories = memories;
      this.made += 1;
    }
    return this.root;
  }

  memoryBytes() {
    return this.memories.reduce((n, m) => n + m.buffer.byteLength, 0);
  }

  discard() {
    this.root = null;
    this.memories = [];
  }
}

/** jco throws an export's error result as a ComponentError carrying the variant. */
const isErrorResult = (e) =>
  e instanceof Error && e.constructor.name === 'ComponentError' && e.payload && typeof e.payload.tag === 'string';

export class Engine {
  #tenants = new Map();

  constructor({ store, limits = {} }) {
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
  }

  /** The handle on one tenant: every call through it sees only that tenant's keys. */
  tenant(name) {
    if (typeof name !== 'string' || !TENANT_NAME.test(name)) {
      throw new TenantError(`invalid tenant name ${JSON.stringify(name)}: use 1-64 ASCII letters, digits, '-', '_' and '.'`);
    }
    let t = this.#tenants.get(name);
    if (!t) this.#tenants.set(name, (t = new Tenant(this, name, new Instance())));
    return t;
  }

  close() {
    this.store.close();
  }

  /**
   * Runs one exported call in one transaction. `f` calls the export on the
   * root; `check` turns the guest's answer into the caller's, throwing on
   * what the contract rules out. `claimVerb` says the error result is a
   * claim-error.
   */
  call(tenant, instance, verb, mode, claimVerb, f, check) {
    const txn = this.store.begin(tenant, mode);
    const call = new CallState(txn, mode, this.limits, this.store.concurrentWriters);
    const started = performance.now();
    let answer;
    let failure = null;
    instance.slot.call = call;
    try {
      answer = f(instance.exports());
    } catch (e) {
      failure = e;
    } finally {
      instance.slot.call = null;
    }
    try {
      if (call.violation) {
        instance.discard();
        throw call.violation;
      }
      if (failure) {
        if (isErrorResult(failure)) throw domainError(failure.payload, claimVerb);
        instance.discard();
        // jco refuses an argument of the wrong type before the guest runs.
        if (failure instanceof LeaseholdError || failure instanceof TypeError) throw failure;
        throw new SandboxError('trap', `the guest trapped: ${failure.message}`, { cause: failure });
      }
      const deadline = verb === 'check' ? this.limits.checkDeadlineMs : this.limits.deadlineMs;
      const elapsed = performance.now() - started;
      if (elapsed > deadline) {
        throw new SandboxError('deadline', `the call ran ${Math.round(elapsed)} ms, past its deadline of ${deadline} ms`);
      }
      const memory = instance.memoryBytes();
      if (memory > this.limits.memoryBytes) {
        instance.discard();
        throw new SandboxError('memory', `the instance holds ${memory} bytes of memory; the cap is ${this.limits.memoryBytes}`);
      }
      const result = check(answer);
      try {
        txn.commit(call.staged ?? []);
      } catch (e) {
        throw new StorageFailure(`the store could not commit: ${e.message}`, { cause: e });
      }
      return result;
    } catch (e) {
      txn.abort();
      throw e;
    }
  }
}

function domainError(variant, claimVerb) {
  if (!claimVerb) return new StoreError(variant);
  if (variant.tag === 'store') return new StoreError(variant.val);
  return new ClaimRefusal(variant);
}

/** The engine over `store`, with the sandbox's `limits` (see DEFAULT_LIMITS). */
export function open({ store, limits } = {}) {
  return new Engine({ store, limits });
}
