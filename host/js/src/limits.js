// The caps on what the guest may ask of its host, mirroring the Rust host's
// defaults (host/src/engine.rs, `Limits`). Sizes are bytes.
export const DEFAULT_LIMITS = Object.freeze({
  /** Longest key the guest may use. */
  keyBytes: 4096,
  /** Largest value the guest may write. */
  valueBytes: 4 << 20,
  /** Most entries one scan may ask for, and most keys one get-many. */
  scanEntries: 4096,
  /** Most bytes (keys and values) one scan may hand the guest. */
  scanBytes: 16 << 20,
  /** Most bytes all of a call's reads together may hand the guest. */
  callReadBytes: 64 << 20,
  /** Most bytes (keys and values) one call may write. */
  callWriteBytes: 16 << 20,
  /**
   * Linear memory an instance may grow to: written into the component's
   * core modules as each memory's maximum, so a memory.grow past it fails.
   */
  memoryBytes: 64 << 20,
  /**
   * Wall-clock budget of one call, in ms. With the default isolation the
   * worker running the guest is terminated when it passes; with
   * `isolation: 'thread'` it is checked only after the call returns.
   */
  deadlineMs: 5000,
  /** Budget of the consistency check, which walks the whole tenant. */
  checkDeadlineMs: 600_000,
  /**
   * Most instances held at once, one per tenant, least recently used evicted
   * first: a process serving many tenants holds at most this many. 0 makes
   * a fresh instance for every call, so no guest memory outlives a call.
   */
  cachedInstances: 32,
});
