// The errors a call can end in, one class per boundary: the engine refusing
// a claim, the engine (or this host, before the guest runs) refusing input,
// the sandbox failing (a limit, a trap, an answer the contract rules out),
// and the store under the engine failing. The Python package has the same
// classes with the same names and fields; the Rust host's `Error` is the
// model. This module only describes errors; it never decides one.

/** Every error this package throws on purpose. */
export class LeaseholdError extends Error {
  constructor(message, options) {
    super(message, options);
    this.name = this.constructor.name;
  }

  /** Nothing was done and the same call may succeed if made again. */
  get retryable() {
    return false;
  }

  /** The caller's input was refused: an argument or a tenant name. */
  get invalidInput() {
    return false;
  }
}

const REFUSALS = {
  'not-found': (v) => `no task ${v}`,
  excluded: (v) => `${v} is excluded from this task`,
  'wrong-role': (v) => `${v} has none of the task's candidate roles`,
  'not-pending': (v) => `the task is already ${v}`,
  'already-claimed': (v) => `the task is held by ${v}`,
  'not-held': (v) => `${v} does not hold the task`,
  stale: (v) => `the task changed since it was read: its revision is now ${v}`,
};

/**
 * A verb that changes one task (a claim, take-over, release, renewal,
 * holder-checked settlement, escalation, update, assignment, delegation or
 * note) that did not happen: a rung of the claim ladder, `not-held`, or
 * `stale` (a guarded call on a task whose revision moved: `current` is the
 * revision now). `case` is the WIT `claim-error` case (`'excluded'`),
 * `detail` its payload (an actor, holder, id, task state or revision).
 * `tag` and `variant` are the same, as earlier versions spelled them.
 */
export class ClaimRefusal extends LeaseholdError {
  constructor(kase, detail) {
    super(`refused: ${(REFUSALS[kase] ?? ((v) => `${kase}: ${v}`))(detail)}`);
    this.case = kase;
    this.detail = detail;
  }

  get tag() {
    return this.case;
  }

  get variant() {
    return { tag: this.case, val: this.detail };
  }

  /** For `stale`, the task's revision now (read again, decide again); else null. */
  get current() {
    return this.case === 'stale' ? this.detail : null;
  }

  /** Only `already-claimed` may go differently if tried again. */
  get retryable() {
    return this.case === 'already-claimed';
  }
}

const STORE_ERRORS = {
  'not-found': 'not found',
  invalid: 'invalid input',
  corrupt: 'corrupt storage',
  storage: 'storage failed',
  'newer-layout': 'newer layout',
  stale: 'stale revision, now',
};

/**
 * The engine answered a WIT `store-error`: `case` is `not-found`, `invalid`
 * (the detail names the field), `corrupt`, `storage`, `newer-layout` (a
 * newer build moved the tenant's layout; the detail names both layouts) or
 * `stale` (`defineKind`'s expected revision is not the kind's, which
 * `current` is). A claim verb's `claim-error.store` arrives as this too.
 */
export class StoreError extends LeaseholdError {
  constructor(kase, detail) {
    super(`${STORE_ERRORS[kase] ?? kase}: ${detail}`);
    this.case = kase;
    this.detail = detail;
  }

  get tag() {
    return this.case;
  }

  get variant() {
    return { tag: this.case, val: this.detail };
  }

  /** For `stale`, the revision now; else null. */
  get current() {
    return this.case === 'stale' ? this.detail : null;
  }

  get invalidInput() {
    return this.case === 'invalid';
  }
}

/**
 * An argument this host refuses before the guest runs: a value of the wrong
 * type, an integer outside its WIT type's range (never wrapped), an unknown
 * enum case. A `StoreError` with case `invalid`, as the engine answers bad
 * input it sees itself; `detail` names the field.
 */
export class InvalidArgument extends StoreError {
  constructor(detail) {
    super('invalid', detail);
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
 * The store under the engine failed (SQLite could not read or commit, or the
 * engine was closed). The call committed nothing.
 */
export class StorageFailure extends LeaseholdError {}

/**
 * The call waited for its turn to write past the store's lock timeout
 * (another connection holds SQLite's write lock). Nothing was done; try
 * again.
 */
export class LockTimeout extends StorageFailure {
  get retryable() {
    return true;
  }
}

/** A tenant name this package will not scope keys by. */
export class TenantError extends LeaseholdError {
  get invalidInput() {
    return true;
  }
}
