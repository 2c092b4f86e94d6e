// The component's instances: jco's bindings, core modules compiled with the
// memory cap written into them, and a bounded cache of one instance per
// tenant, least recently used evicted first. Runs one export and reports how
// it ended as plain data, so the same code serves inside the deadline worker
// and on the calling thread. It never touches a store: the kv import it is
// handed does.
import { readdirSync, readFileSync } from 'node:fs';

import { deniedWasi } from './wasi.js';

const PAGE = 65536;
/** How close to its memory cap a trapping instance counts as out of memory. */
const NEAR_CAP = 1 << 20;

/** A component whose memory at start is already past the cap. */
export class MemoryCapTooLow extends Error {}

function leb(bytes, at) {
  let value = 0;
  let shift = 0;
  let i = at;
  for (;;) {
    const b = bytes[i++];
    value += (b & 0x7f) * 2 ** shift;
    shift += 7;
    if (!(b & 0x80)) return [value, i - at];
  }
}

function uleb(value) {
  const out = [];
  let v = value;
  do {
    let b = v % 128;
    v = Math.floor(v / 128);
    if (v) b |= 0x80;
    out.push(b);
  } while (v);
  return out;
}

/**
 * The core module with a maximum on every memory it defines, so a
 * `memory.grow` past `maxBytes` fails inside the guest, as the Rust host's
 * ResourceLimiter makes it fail: JavaScript has no hook on growth, but a
 * memory's declared maximum is enforced by the engine itself.
 */
export function capMemories(bytes, maxBytes) {
  const maxPages = Math.floor(maxBytes / PAGE);
  const parts = [bytes.subarray(0, 8)];
  let i = 8;
  while (i < bytes.length) {
    const id = bytes[i];
    const [size, n] = leb(bytes, i + 1);
    const start = i + 1 + n;
    const end = start + size;
    if (id !== 5) {
      parts.push(bytes.subarray(i, end));
      i = end;
      continue;
    }
    const [count, cn] = leb(bytes, start);
    let j = start + cn;
    const body = [...uleb(count)];
    for (let m = 0; m < count; m++) {
      const flags = bytes[j++];
      if (flags > 1) throw new Error(`a memory with limit flags ${flags} (shared or 64-bit) cannot be capped`);
      const [min, mn] = leb(bytes, j);
      j += mn;
      let max = maxPages;
      if (flags === 1) {
        const [declared, xn] = leb(bytes, j);
        j += xn;
        max = Math.min(declared, maxPages);
      }
      if (min > maxPages) {
        throw new MemoryCapTooLow(`the component needs ${min * PAGE} bytes of memory at start; the cap is ${maxBytes}`);
      }
      body.push(1, ...uleb(min), ...uleb(max));
    }
    parts.push(Uint8Array.of(5, ...uleb(body.length), ...body));
    i = end;
  }
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

/**
 * One component (a directory `scripts/build.mjs` wrote: `leasehold.js` and
 * its core modules) under one memory cap, with its cache of instances.
 */
export class ComponentInstances {
  /**
   * `bindings` is the imported `leasehold.js` module, `dir` the URL of its
   * directory, `maxInstances` how many tenants keep an instance at once.
   */
  constructor(bindings, dir, memoryBytes, maxInstances) {
    this.bindings = bindings;
    this.dir = dir;
    this.memoryBytes = memoryBytes;
    this.maxInstances = maxInstances;
    this.modules = new Map();
    this.cache = new Map();
    this.made = 0;
    // Compiled up front: compiling is the host's work, and must not be
    // charged to the deadline of whichever call comes first. A cap too low
    // for the component is left for that call to report.
    for (const f of readdirSync(dir)) {
      if (!/\.core\d*\.wasm$/.test(f)) continue;
      try {
        this.#module(f);
      } catch (e) {
        if (!(e instanceof MemoryCapTooLow)) throw e;
      }
    }
  }

  #module(path) {
    let m = this.modules.get(path);
    if (!m) {
      const bytes = readFileSync(new URL(path, this.dir));
      this.modules.set(path, (m = new WebAssembly.Module(capMemories(bytes, this.memoryBytes))));
    }
    return m;
  }

  /**
   * A new instance, its storage import bound to whichever call's `kv` is
   * put in its slot.
   */
  #make() {
    const slot = { kv: null };
    const forward = {};
    for (const name of ['get', 'getMany', 'scan', 'scanMany', 'stage']) forward[name] = (...a) => slot.kv[name](...a);
    forward.concurrentWriters = () => slot.kv.concurrentWriters();
    forward.callTime = () => slot.kv.callTime();
    // This host's stores have one writer at a time: every call one slot.
    forward.writerSlot = () => 0;
    const memories = [];
    const root = this.bindings.instantiate(
      (path) => this.#module(path),
      // jco looks interfaces up by their unversioned names in sync mode.
      { ...deniedWasi(), 'leasehold:engine/kv': forward, 'leasehold:engine/types': {} },
      (module, imports) => {
        const i = new WebAssembly.Instance(module, imports);
        for (const v of Object.values(i.exports)) if (v instanceof WebAssembly.Memory) memories.push(v);
        return i;
      },
    );
    return { root, slot, memories };
  }

  /**
   * Makes one instance and throws it away, so the next is quick: a
   * thread's first instantiation is mostly V8 compiling jco's bindings
   * (one large function, compiled when first run), and that is the host's
   * work, not to be charged to the deadline of whichever call comes first.
   * A component that cannot be instantiated is left for that call to report.
   */
  warm() {
    try {
      this.#make();
    } catch {
      // The first call makes its instance again and reports why it failed.
    }
  }

  /**
   * The tenant's instance, made (evicting the least recently used one past
   * the cap) if it has none. With a cap of 0 every call gets a fresh
   * instance, kept for that call only, as the Rust host does.
   */
  #instance(tenant, kv) {
    let inst = this.cache.get(tenant);
    if (inst) {
      // Most recently used last: a Map keeps insertion order.
      this.cache.delete(tenant);
      this.cache.set(tenant, inst);
      return inst;
    }
    inst = this.#make();
    this.made += 1;
    this.cache.set(tenant, inst);
    while (this.cache.size > this.maxInstances) this.cache.delete(this.cache.keys().next().value);
    return inst;
  }

  discard(tenant) {
    this.cache.delete(tenant);
  }

  clear() {
    this.cache.clear();
  }

  get cached() {
    return this.cache.size;
  }

  /**
   * Calls `root[iface][fn](...args)` on the tenant's instance with `kv` as
   * its storage, and says how it went: `{ ok, answer }`, `{ error }` (the
   * export's error result), `{ memory }` (the instance reached its cap),
   * or `{ trap }`. Any outcome but ok discards the instance: an error
   * answer too, as the Rust host does, so an instance only ever goes on
   * from a call that finished as the rules meant. `instantiated` is
   * called when the call made its instance, just before the export runs:
   * the call's deadline counts again from there, as the Rust host's does.
   */
  run(tenant, iface, fn, args, kv, instantiated = () => {}) {
    let inst;
    const made = this.made;
    try {
      inst = this.#instance(tenant, kv);
    } catch (e) {
      if (e instanceof MemoryCapTooLow) return { memory: e.message };
      return { trap: `the component could not be instantiated: ${e.message}` };
    }
    if (this.made !== made) instantiated();
    inst.slot.kv = kv;
    try {
      return { ok: true, answer: inst.root[iface][fn](...args) };
    } catch (e) {
      if (e instanceof this.bindings.ErrorResult) {
        this.discard(tenant);
        return { error: e.payload };
      }
      // JavaScript cannot see the memory.grow that failed, only where memory
      // stands: a trap this close to the cap is taken to be the guest
      // failing to allocate, which is how a Rust guest reacts to a failed grow.
      const memory = inst.memories.reduce((n, m) => n + m.buffer.byteLength, 0);
      const atCap = this.memoryBytes - memory < Math.max(NEAR_CAP, this.memoryBytes / 16);
      this.discard(tenant);
      if (atCap) return { memory: `the guest asked for more than its memory cap of ${this.memoryBytes} bytes` };
      return { trap: e instanceof Error ? e.message : String(e) };
    } finally {
      inst.slot.kv = null;
    }
  }
}
