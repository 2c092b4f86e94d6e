// An in-memory ordered store: one sorted key list per tenant, so no key the
// guest can spell reaches another tenant. Keys are held as latin1 strings,
// one character per byte, whose order is exactly the bytes' order.
//
// Calls run one at a time on this thread and a call's writes arrive only
// when it commits, so every read of a call sees the store as the call began.

const toKey = (bytes) => Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('latin1');
const toBytes = (key) => Buffer.from(key, 'latin1');

/** The first index whose key is >= `key`. */
function lowerBound(keys, key) {
  let lo = 0;
  let hi = keys.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (keys[mid] < key) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

class Keyspace {
  keys = [];
  values = new Map();

  put(key, value) {
    if (!this.values.has(key)) this.keys.splice(lowerBound(this.keys, key), 0, key);
    this.values.set(key, value);
  }

  delete(key) {
    if (!this.values.delete(key)) return;
    this.keys.splice(lowerBound(this.keys, key), 1);
  }
}

class MemoryTxn {
  constructor(space, mode) {
    this.space = space;
    this.mode = mode;
  }

  get(key) {
    const v = this.space.values.get(toKey(key));
    return v === undefined ? undefined : v;
  }

  scan(start, end, limit, reverse, maxBytes) {
    const { keys, values } = this.space;
    const from = lowerBound(keys, toKey(start));
    const to = end === undefined ? keys.length : lowerBound(keys, toKey(end));
    const entries = [];
    let bytes = 0;
    for (let n = 0; n < to - from && entries.length < limit; n++) {
      const k = keys[reverse ? to - 1 - n : from + n];
      const v = values.get(k);
      bytes += k.length + v.length;
      if (bytes > maxBytes) return { entries, over: true };
      entries.push([toBytes(k), v]);
    }
    return { entries, over: false };
  }

  commit(batch) {
    if (this.mode === 'read' && batch.length > 0) throw new Error('a read transaction cannot write');
    for (const { key, value } of batch) {
      if (value === null) this.space.delete(toKey(key));
      else this.space.put(toKey(key), Uint8Array.from(value));
    }
  }

  abort() {}
}

/** Keeps every tenant's keys in memory; gone with the process. */
export class MemoryStore {
  #tenants = new Map();

  #space(tenant) {
    let s = this.#tenants.get(tenant);
    if (!s) this.#tenants.set(tenant, (s = new Keyspace()));
    return s;
  }

  /** One call's transaction on `tenant`'s keys; `mode` is 'read' or 'write'. */
  begin(tenant, mode) {
    return new MemoryTxn(this.#space(tenant), mode);
  }

  /** No other process can write this process's memory (the kv import's `concurrent-writers`). */
  get concurrentWriters() {
    return false;
  }

  /** Writes one key outside the component: for tests and repairs. */
  putRaw(tenant, key, value) {
    this.#space(tenant).put(toKey(key), Uint8Array.from(value));
  }

  /** Every key and value of `tenant`, in key order. */
  dump(tenant) {
    const s = this.#space(tenant);
    return s.keys.map((k) => [toBytes(k), s.values.get(k)]);
  }

  close() {}
}
