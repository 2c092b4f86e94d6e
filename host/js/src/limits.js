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
   * Linear memory an instance may hold after a call. Checked when the call
   * returns: JavaScript cannot stop a memory.grow midway.
   */
  memoryBytes: 64 << 20,
  /**
   * Wall-clock budget of one call, in ms. Checked when the call returns: a
   * synchronous call cannot be interrupted, so a guest that never returns is
   * not stopped (run the host in a worker to bound that).
   */
  deadlineMs: 5000,
  /** Budget of the consistency check, which walks the whole tenant. */
  checkDeadlineMs: 600_000,
});
