// Types of @leasehold/host, the Leasehold component hosted in Node.js.
// Kept by hand beside src/; README.md describes the behaviour.

/** Milliseconds since the epoch; a number where exact, a BigInt in 64 signed bits otherwise. */
export type Timestamp = number | bigint;
/** An integer in 0..2^32-1, as a number or a BigInt. */
export type U32 = number | bigint;

export type Priority = 'low' | 'normal' | 'high' | 'urgent';
export type TaskState = 'open' | 'claimed' | 'escalated' | 'completed' | 'expired' | 'withdrawn';
export type OnExpiry = 'deny' | 'escalate' | 'proceed';
export type Settlement = 'completed' | 'expired' | 'withdrawn';
export type Phase = 'forward' | 'compensating';
export type ArmOutcome = 'armed' | 'already-armed' | 'run-sealed';

/** A task as answered: options are null, integers numbers where exact. */
export interface Task {
  id: string;
  run: string;
  case: string | null;
  kind: string;
  justification: string;
  candidateRoles: string[];
  assignee: string | null;
  leaseUntil: number | bigint | null;
  priority: Priority;
  state: TaskState;
  onExpiry: OnExpiry;
  escalateTo: string[];
  excludedActors: string[];
  createdAt: number | bigint;
  dueAt: number | bigint | null;
}

/** A task to open: `id`, `run` and `kind` are required; the rest default. */
export interface NewTask {
  id: string;
  run: string;
  kind: string;
  case?: string | null;
  /** A string, or an object to be JSON.stringify'd. */
  justification?: string | object;
  candidateRoles?: string[];
  assignee?: string | null;
  leaseUntil?: Timestamp | null;
  priority?: Priority;
  state?: TaskState;
  onExpiry?: OnExpiry;
  escalateTo?: string[];
  excludedActors?: string[];
  createdAt?: Timestamp;
  dueAt?: Timestamp | null;
}

export interface Timer {
  run: string;
  case: string | null;
  effect: string;
  step: number;
  phase: Phase;
  fireAt: number | bigint;
}

export interface NewTimer {
  run: string;
  effect: string;
  fireAt: Timestamp;
  case?: string | null;
  step?: U32;
  phase?: Phase;
}

export interface Lease {
  now: Timestamp;
  leaseMs: U32;
}

export interface QueueQuery {
  roles: string[];
  actor?: string | null;
  limit: U32;
  after?: string | null;
}

export interface Page {
  tasks: Task[];
  next: string | null;
}

export interface SealOutcome {
  timersDisarmed: number;
  tasksWithdrawn: number;
}

export interface Discrepancy {
  structure: string;
  subject: string;
  detail: string;
}

export interface Limits {
  keyBytes: number;
  valueBytes: number;
  scanEntries: number;
  scanBytes: number;
  callReadBytes: number;
  callWriteBytes: number;
  memoryBytes: number;
  deadlineMs: number;
  checkDeadlineMs: number;
  cachedInstances: number;
}

export const DEFAULT_LIMITS: Readonly<Limits>;
export const COMPONENT_SHA256: string;

/** One call's transaction, as a store hands it to the engine. */
export interface Txn {
  get(key: Uint8Array): Uint8Array | undefined;
  scan(
    start: Uint8Array,
    end: Uint8Array | undefined,
    limit: number,
    reverse: boolean,
    maxBytes: number,
  ): { entries: [Uint8Array, Uint8Array][]; over: boolean };
  commit(batch: { key: Uint8Array; value: Uint8Array | null }[]): void;
  abort(): void;
}

export interface Store {
  readonly concurrentWriters: boolean;
  begin(tenant: string, mode: 'read' | 'write'): Txn;
  putRaw(tenant: string, key: Uint8Array, value: Uint8Array): void;
  dump(tenant: string): [Uint8Array, Uint8Array][];
  close(): void;
}

export class MemoryStore implements Store {
  constructor();
  readonly concurrentWriters: boolean;
  begin(tenant: string, mode: 'read' | 'write'): Txn;
  putRaw(tenant: string, key: Uint8Array, value: Uint8Array): void;
  dump(tenant: string): [Uint8Array, Uint8Array][];
  close(): void;
}

export class SqliteStore implements Store {
  constructor(path: string, options?: { durability?: 'immediate' | 'none'; lockTimeoutMs?: number });
  readonly concurrentWriters: boolean;
  readonly lockTimeoutMs: number;
  begin(tenant: string, mode: 'read' | 'write'): Txn;
  putRaw(tenant: string, key: Uint8Array, value: Uint8Array): void;
  dump(tenant: string): [Uint8Array, Uint8Array][];
  close(): void;
}

export interface OpenOptions {
  store: Store;
  limits?: Partial<Limits>;
  /** A directory `scripts/build.mjs` wrote bindings into, to run another build of the world. */
  component?: string;
  /** `'worker'` (default): the deadline stops the guest; `'thread'`: checked after the call. */
  isolation?: 'worker' | 'thread';
}

export class Engine {
  constructor(options: OpenOptions);
  readonly store: Store;
  readonly limits: Readonly<Limits>;
  readonly isolation: 'worker' | 'thread';
  readonly instancesMade: number;
  readonly instancesCached: number;
  tenant(name: string): Tenant;
  close(): void;
}

export function open(options: OpenOptions): Engine;

export class Tenant {
  readonly name: string;
  open(task: NewTask): Task;
  get(id: string): Task | null;
  claim(id: string, actor: string, roles?: string[], lease?: Lease | null): Task;
  renew(id: string, actor: string, now: Timestamp, leaseMs: U32): Task;
  reclaimLapsed(now: Timestamp, limit: U32): Task[];
  claimNext(query: { roles: string[]; actor: string; limit?: U32; after?: string | null }, lease?: Lease | null): Task | null;
  leasedCount(): number | bigint;
  nextLeaseEnd(): number | bigint | null;
  release(id: string, actor: string): void;
  takeOver(id: string, from: string, actor: string, roles?: string[], lease?: Lease | null): Task;
  settle(id: string, settlement: Settlement, holder?: string | null): boolean;
  withdrawRun(run: string, awaited: string[]): number;
  escalate(id: string): Task;
  queue(query: QueueQuery): Page;
  forCase(caseId: string, limit: U32, after?: string | null): Page;
  openCount(): number | bigint;
  overdue(now: Timestamp, limit: U32): Task[];
  arm(timer: NewTimer): ArmOutcome;
  claimDue(now: Timestamp, limit: U32, leaseMs: U32): Timer[];
  disarm(run: string, effect: string): boolean;
  disarmRun(run: string): number;
  pendingCount(): number | bigint;
  nextDue(): number | bigint | null;
  seal(run: string, awaited?: string[]): SealOutcome;
  isSealed(run: string): boolean;
  check(): Discrepancy[];
}

export class LeaseholdError extends Error {
  readonly retryable: boolean;
  readonly invalidInput: boolean;
}

export type RefusalCase = 'not-found' | 'excluded' | 'wrong-role' | 'not-pending' | 'already-claimed' | 'not-held';

export class ClaimRefusal extends LeaseholdError {
  constructor(kase: RefusalCase, detail: string);
  readonly case: RefusalCase;
  readonly detail: string;
  /** `case`, as earlier versions spelled it. */
  readonly tag: RefusalCase;
  readonly variant: { tag: RefusalCase; val: string };
}

export type StoreErrorCase = 'not-found' | 'invalid' | 'corrupt' | 'storage';

export class StoreError extends LeaseholdError {
  constructor(kase: StoreErrorCase, detail: string);
  readonly case: StoreErrorCase;
  readonly detail: string;
  readonly tag: StoreErrorCase;
  readonly variant: { tag: StoreErrorCase; val: string };
}

export class InvalidArgument extends StoreError {
  constructor(detail: string);
  readonly case: 'invalid';
}

export type LimitKind =
  | 'deadline' | 'memory' | 'key-size' | 'value-size' | 'scan-length' | 'get-many-length'
  | 'scan-bytes' | 'read-bytes' | 'write-bytes';

export const LIMIT_KINDS: ReadonlySet<LimitKind>;

export class SandboxError extends LeaseholdError {
  constructor(kind: string, message: string, options?: ErrorOptions);
  readonly kind: LimitKind | 'trap' | 'second-batch' | 'write-in-read-call' | 'malformed';
  readonly limit: LimitKind | null;
}

export class StorageFailure extends LeaseholdError {}
export class LockTimeout extends StorageFailure {}
export class TenantError extends LeaseholdError {}
