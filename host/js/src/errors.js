// The errors a call can end in, one class per boundary: the engine refusing
// a claim, the engine answering a store error, and the sandbox failing (a
// limit, a trap, an answer the contract rules out). Refusals and store
// errors carry the WIT variant exactly as the component answered it.

/** Every error this package throws on purpose. */
export class LeaseholdError extends Error {
  constructor(message, options) {
    super(message, options);
    this.name = this.constructor.name;
  }
}

const REFUSALS = {
  'not-found': (v) => `no task ${v}`,
  excluded: (v) => `${v} is excluded from this task`,
  'wrong-role': (v) => `${v} has none of the task's candidate roles`,
  'not-pending': (v) => `the task is already ${v}`,
  'already-claimed': (v) => `the task is held by ${v}`,
  'not-held': (v) => `${v} does not hold the task`,
};

/**
 * A claim, take-over or release that did not happen: a rung of the claim
 * ladder, or `not-held`. `variant` is the WIT `claim-error`, e.g.
 * `{ tag: 'excluded', val: 'alice' }`.
 */
export class ClaimRefusal extends LeaseholdError {
  constructor(variant) {
    super(`refused: ${(REFUSALS[variant.tag] ?? String)(variant.val)}`);
    this.variant = variant;
    this.tag = variant.tag;
    this.detail = variant.val;
  }

  /** Only `already-claimed` may go differently if tried again. */
  get retryable() {
    return this.tag === 'already-claimed';
  }
}

const STORE_ERRORS = {
  'not-found': 'not found',
  invalid: 'invalid input',
  corrupt: 'corrupt storage',
  storage: 'storage failed',
};

/**
 * The engine answered a WIT `store-error`: `not-found`, `invalid` (the text
 * names the field), `corrupt` or `storage`. A claim verb's
 * `claim-error.store` arrives as this too.
 */
export class StoreError extends LeaseholdError {
  constructor(variant) {
    super(`${STORE_ERRORS[variant.tag] ?? variant.tag}: ${variant.val}`);
    this.variant = variant;
    this.tag = variant.tag;
    this.detail = variant.val;
  }
}

/** The kinds of SandboxError that name a limit. */
export const LIMIT_KINDS = new Set([
  'deadline', 'memory', 'key-size', 'value-size', 'scan-length', 'get-many-length',
  'scan-bytes', 'read-bytes', 'write-bytes',
]);

/**
 * The guest broke the sandbox: it went over a limit (`limit` names it), it
 * trapped (`kind` is `trap`), it staged writes it may not (`second-batch`,
 * `write-in-read-call`), or it answered something the contract rules out
 * (`malformed`). The call committed nothing; its instance was discarded when
 * it might hold broken state.
 */
export class SandboxError extends LeaseholdError {
  constructor(kind, message, options) {
    super(`sandbox: ${message}`, options);
    this.kind = kind;
    this.limit = LIMIT_KINDS.has(kind) ? kind : null;
  }
}

/**
 * The store under the engine failed (SQLite could not read or commit). The
 * call committed nothing.
 */
export class StorageFailure extends LeaseholdError {}

/** A tenant name this package will not scope keys by. */
export class TenantError extends LeaseholdError {}
