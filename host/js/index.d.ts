// Types of @leasehold/host, the Leasehold component hosted in Node.js.
// Kept by hand beside src/; README.md describes the behaviour.

/** Milliseconds since the epoch; a number where exact, a BigInt in 64 signed bits otherwise. */
export type Timestamp = number | bigint;
/** An integer in 0..2^32-1, as a number or a BigInt. */
export type U32 = number | bigint;
/** A 64-bit integer: a number where exact, a BigInt otherwise. */
export type Int = number | bigint;

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
  /** 1 when opened, one more with every recorded change; 0 for a task no 0.3.0 build has changed. */
  revision: Int;
  /** The decision `decide` recorded, if the settle carried one. */
  decision: DecisionRecord | null;
  /** The outcomes the task allows; empty: its kind's, or any. */
  outcomes: OutcomeRule[];
  /** Reminders before the due time, each ms before `dueAt`: largest first (earliest reminder first). */
  remindBefore: Int[];
  /** The escalation chain after the due time, in firing order. */
  escalation: EscalationStep[];
  /** How many of the task's steps have fired: its reminders, earliest first, then its chain. */
  stepsDone: number;
}

/**
 * What a step of an escalation chain does: escalate the task (unheld,
 * `escalated`), its candidate roles widened by these (1 to 64 names), or
 * settle it `expired` (only as the last step). One key, as a schedule's
 * `CatchUp`.
 */
export type StepAction = { escalate: string[] } | { expire: true };

/** One step of an escalation chain: it fires at `dueAt` plus `afterDueMs` (0: at the due time). */
export interface EscalationStep {
  afterDueMs: Int;
  action: StepAction;
}

/** A chain step to declare: `afterDueMs` as a number or a BigInt. */
export interface NewEscalationStep {
  afterDueMs: Int;
  action: StepAction;
}

/** The step a history entry fired: a reminder this many ms before the due time, or a chain step as the task held it. */
export type TaskStep = { reminder: Int } | { escalation: EscalationStep };

/** One outcome a decision may have. */
export interface OutcomeRule {
  /** 1-64 characters, unique in its list. */
  name: string;
  /** A decision with this outcome must carry a non-empty reason. */
  needsReason: boolean;
  /** A JSON Schema (text) the decision's output must satisfy. */
  outputSchema: string | null;
}

/** An outcome rule to declare; a schema may be an object (stringified). */
export interface NewOutcomeRule {
  name: string;
  needsReason?: boolean;
  outputSchema?: string | object | null;
}

/** What `decide` is given. `output` is JSON text, or a value to be JSON.stringify'd; null is none. */
export interface Decision {
  outcome: string;
  reason?: string | null;
  output?: string | object | number | boolean | null;
}

/** A decision as the task keeps it. */
export interface DecisionRecord {
  outcome: string;
  reason: string | null;
  output: string | null;
  /** Who settled the task (`holder`); null for the service. */
  by: string | null;
  /** When the settling call ran (the engine's clock). */
  at: Int;
}

/** What `Tenant.guarded` takes. */
export interface Guard {
  /** The revision the caller was shown: another one refuses the call `stale`. */
  revision?: Int | null;
  /** The bulk job making the change, recorded in its history entry. */
  job?: string | null;
}

/** What `update` changes: a field left out stays as it is; `dueAt: null` clears the due time. */
export interface TaskChanges {
  dueAt?: Timestamp | null;
  priority?: Priority;
  candidateRoles?: string[];
  escalateTo?: string[];
  excludedActors?: string[];
  onExpiry?: OnExpiry;
  outcomes?: NewOutcomeRule[];
  /** A change of the reminders, the chain or the due time re-arms the steps: what has not fired fires as its instant comes. */
  remindBefore?: Int[];
  escalation?: NewEscalationStep[];
}

/** One field a change changed, before and after as JSON text. */
export interface FieldChange {
  field: string;
  before: string;
  after: string;
}

/** A kind's definition, as answered. */
export interface KindDefinition {
  kind: string;
  outcomes: OutcomeRule[];
  /** 1 when first defined, one more with each definition after. */
  revision: Int;
}

/** A kind's definition to define (a revision given is ignored). */
export interface NewKindDefinition {
  kind: string;
  outcomes?: NewOutcomeRule[];
  revision?: Int;
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
  /** The outcomes a decision on the task may have; empty: its kind's, or any. */
  outcomes?: NewOutcomeRule[];
  /**
   * Reminders before the due time, ms before `dueAt` (each 1 or more, its
   * reminder at or after `createdAt`; at most 8; duplicates dropped). Needs
   * a due time.
   */
  remindBefore?: Int[];
  /**
   * The escalation chain after the due time, strictly increasing
   * `afterDueMs`, `expire` only last, at most 8. Needs a due time; a task
   * with a chain is acted on by it instead of `onExpiry` (`overdue` does
   * not list it).
   */
  escalation?: NewEscalationStep[];
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

/** An armed timer as a listing shows it. */
export interface TimerInfo {
  timer: Timer;
  /** The sweeper's lease end while the timer is claimed; null while it waits for its `fireAt`. */
  leaseUntil: number | bigint | null;
}

/** One page of timers; `next` (null at the end) is the `after` of the next. */
export interface TimerPage {
  timers: TimerInfo[];
  next: string | null;
}

/**
 * What `reschedule` did: moved the timer (as it now waits, unclaimed), or why
 * it moved nothing: no such timer, a sweeper holds it under a lease ending at
 * `held` (test with `'held' in r`: the instant may be 0), or its run is sealed.
 */
export type Rescheduled =
  | { moved: TimerInfo }
  | { notFound: true }
  | { held: number | bigint }
  | { runSealed: true };

/** A task a worker finished, for `settleAndClaim`: how it settles, and the decision it carries. */
export interface Finished {
  id: string;
  settlement: Settlement;
  decision?: Decision | null;
}

/**
 * What became of one finished task, one key: settled by this call; already
 * settled (its state); pending but held by someone else (named) or by
 * nobody (`null`: a lease that lapsed and was reclaimed); no such task; or
 * the entry refused (a malformed id, a decision its task refuses), why.
 */
export type SettleAnswer =
  | { settled: true }
  | { already: TaskState }
  | { notHeld: string | null }
  | { notFound: true }
  | { refused: string };

/** What `settleAndClaim` did: one answer per finished task, in order, then the tasks it claimed. */
export interface SettledAndClaimed {
  settled: SettleAnswer[];
  claimed: Task[];
}

/** A wall time the zone skips (clocks go forward): fire at the first instant after the gap, or not that day. */
export type GapPolicy = 'shift-forward' | 'skip';
/** A wall time the zone repeats (clocks go back): fire at its first occurrence, or at both. */
export type RepeatPolicy = 'first' | 'both';
/** What an occurrence due while the previous one is claimed and not done does: skipped, one kept waiting, or all kept waiting. */
export type OverlapPolicy = 'skip' | 'buffer-one' | 'buffer-all';

/** Every `everyMs` milliseconds from `anchor` (the first occurrence), in real time. */
export interface Interval {
  everyMs: Int;
  anchor: Int;
}

/**
 * When a schedule fires: a cron expression (five fields, or six with
 * seconds first; `L`, `#` and the `@daily` family) read in the schedule's
 * zone, or an interval. One key, as `feed` answers `{ page }` or `{ gone }`.
 */
export type Recurrence = { cron: string } | { every: Interval };

/**
 * Which missed occurrences fire after downtime: each within the window (ms
 * before now) once, oldest first; only the latest within it; or none.
 */
export type CatchUp = { allWithin: Int } | { latestWithin: Int } | { none: true };

/** What a schedule is, as answered: options are null, integers numbers where exact. */
export interface ScheduleSpec {
  /** 1–256 characters, no control characters. */
  id: string;
  run: string;
  case: string | null;
  step: number;
  phase: Phase;
  recurrence: Recurrence;
  /** An IANA zone name, answered under its canonical name (`America/New_York`). */
  zone: string;
  /** No occurrence before `start` nor after `end` (both inclusive). */
  start: number | bigint | null;
  end: number | bigint | null;
  gap: GapPolicy;
  repeat: RepeatPolicy;
  overlap: OverlapPolicy;
  catchUp: CatchUp;
  /** Each occurrence fires up to this many ms after its instant, by an amount every host agrees on. */
  jitterMs: number;
}

/**
 * A schedule to add. `id`, `run`, `recurrence` and `zone` are required; the
 * rest default: no case, step 0, phase forward, no start or end, gap
 * `shift-forward`, repeat `first`, overlap `skip`, catch-up
 * `{ allWithin: 31_536_000_000 }` (a year), jitter 0.
 */
export interface NewScheduleSpec {
  id: string;
  run: string;
  recurrence: { cron: string } | { every: { everyMs: Int; anchor: Timestamp } };
  zone: string;
  case?: string | null;
  step?: U32;
  phase?: Phase;
  start?: Timestamp | null;
  end?: Timestamp | null;
  gap?: GapPolicy;
  repeat?: RepeatPolicy;
  overlap?: OverlapPolicy;
  catchUp?: CatchUp | null;
  jitterMs?: U32;
}

export interface Schedule {
  spec: ScheduleSpec;
  /** The note it was paused with; null while it runs. */
  paused: string | null;
  /** The instant of the occurrence armed next (before jitter); null while paused or once ended. */
  nextAt: number | bigint | null;
  /** The instant of the last occurrence that fired. */
  lastAt: number | bigint | null;
  /** Occurrences kept waiting by `overlap`, oldest first. */
  waiting: (number | bigint)[];
  /** 1 when added, one more with each change. */
  revision: Int;
}

/** One page of schedules by id; `next` (null at the end) is the `after` of the next. */
export interface SchedulePage {
  schedules: Schedule[];
  next: string | null;
}

/** A webhook subscription's state; see `Subscription.note` for why it is in it. */
export type SubState = 'active' | 'paused' | 'failing' | 'gone';

/** What a subscription is sent, as answered. Empty lists place no condition. */
export interface SubFilter {
  /** Changes of tasks. */
  tasks: boolean;
  /** Changes of timers. */
  timers: boolean;
  /** Only changes made by these verbs (`claim`, `settle`, `arm`, …). */
  verbs: string[];
  /** Only tasks of these kinds (timers have none: not restricted). */
  kinds: string[];
  /** Only tasks and timers of these runs. */
  runs: string[];
  /** Of tasks, only the change that settled each. */
  settlingOnly: boolean;
}

/** A filter to give: each field optional (false, or an empty list); at least one of `tasks` and `timers` true. */
export type NewSubFilter = Partial<SubFilter>;

/** A signing key; after a rotation the old key signs beside the new one until `until`. */
export interface SigningKey {
  /** 24 to 64 bytes. */
  key: Uint8Array;
  /** Null while it is current. */
  until: number | bigint | null;
}

/** One delivery attempt, as kept for an operator (the last 20). */
export interface Attempt {
  /** The `webhook-id` sent. */
  messageId: string;
  at: number | bigint;
  /** 1 for an entry's first attempt. */
  attempt: number;
  /** What happened, as the sender spells it (`200`, `timeout`, …). */
  outcome: string;
  latencyMs: number | bigint;
}

/** An attempt to record: integers as numbers or BigInts. */
export interface NewAttempt {
  messageId: string;
  at: Timestamp;
  attempt: U32;
  outcome: string;
  latencyMs: Int;
}

/** A webhook subscription as the component keeps it; sending is the Rust crate leasehold-webhooks', or a loop of your own over `feed`. */
export interface Subscription {
  /** 1–256 characters, no control characters. */
  id: string;
  /** An absolute `http` or `https` URL of at most 2,048 bytes. */
  url: string;
  filter: SubFilter;
  state: SubState;
  /** Why it is in its state, when not active. */
  note: string | null;
  /** Every feed entry up to this position was delivered or matched nothing; null for the feed's start. */
  position: string | null;
  /** Oldest first; 1 to 4; the last is current. */
  keys: SigningKey[];
  createdAt: number | bigint;
  /** 1 when added; one more at each change by anyone but its deliveries (which move only the position). */
  revision: Int;
  /** The last attempts recorded, oldest first. */
  attempts: Attempt[];
  /** Who delivers it, and until when. */
  leaseHolder: string | null;
  leaseUntil: number | bigint | null;
}

/** One page of subscriptions by id; `next` (null at the end) is the `after` of the next. */
export interface SubscriptionPage {
  subscriptions: Subscription[];
  next: string | null;
}

/** Who holds a task, in a filter: nobody (holds or last held it), or this actor. */
export type AssigneeFilter = { nobody: true } | { actor: string };

/**
 * What a task must be to match, as answered: every condition given must
 * hold (and, in a list, one of its entries); null or an empty list places
 * none.
 */
export interface TaskFilter {
  /** At most 6, each once. */
  states: TaskState[];
  /** At most 32. */
  kinds: string[];
  /** Offered to this role (one of its candidate roles). */
  role: string | null;
  assignee: AssigneeFilter | null;
  case: string | null;
  run: string | null;
  /** Priority at or above this one. */
  priorityAtLeast: Priority | null;
  /** Due strictly before (a task with no due time does not match). */
  dueBefore: Int | null;
  /** Due at or after. */
  dueAfter: Int | null;
  /** Created strictly before. */
  createdBefore: Int | null;
  /** Created at or after. */
  createdAfter: Int | null;
  /** Pending and due at or before. */
  overdueAt: Int | null;
}

/** A filter to give: each field optional; timestamps as numbers or BigInts. */
export interface NewTaskFilter {
  states?: TaskState[];
  kinds?: string[];
  role?: string | null;
  assignee?: AssigneeFilter | null;
  case?: string | null;
  run?: string | null;
  priorityAtLeast?: Priority | null;
  dueBefore?: Timestamp | null;
  dueAfter?: Timestamp | null;
  createdBefore?: Timestamp | null;
  createdAfter?: Timestamp | null;
  overdueAt?: Timestamp | null;
}

/**
 * The orders a search pages in: `queue-order` (higher priority first, then
 * older), `due-at` (earliest first; none after every due one), `created-at`
 * (oldest first), `priority` (the queue's order reversed). Ties go by
 * creation time, then id.
 */
export type SortKey = 'queue-order' | 'due-at' | 'created-at' | 'priority';

/** A sort key and its direction; `descending` reverses the whole order, ties included. */
export interface TaskSort {
  key: SortKey;
  descending: boolean;
}

/** A reviewer asking: it sees only the tasks it holds and those it may take. */
export interface Viewer {
  actor: string;
  roles: string[];
}

export interface SearchQuery {
  /** No filter: every task. */
  filter?: NewTaskFilter;
  /** No sort: the queue's order; `descending` defaults to false. */
  sort?: { key: SortKey; descending?: boolean };
  /** 1–1000. */
  limit: U32;
  /** The `next` of the previous page of this same search. */
  after?: string | null;
  /** No viewer: the whole tenant. */
  viewer?: Viewer | null;
}

export interface SearchPage {
  tasks: Task[];
  /** Where the next page starts; null when the search is done. */
  next: string | null;
  /** The page stopped at the scan budget before it was full. */
  budgetSpent: boolean;
  /** The index that drove the page (`by-state`, `by-due`, …; `tasks` while the index is being built). */
  index: string;
}

export interface CountAnswer {
  /** The tasks that match (from `after` on, when given). */
  count: Int;
  /** `count` is the whole answer; otherwise add the counts of the calls that follow `next`. */
  exact: boolean;
  next: string | null;
  /** `counters` when kept counts answered, otherwise the index scanned. */
  index: string;
}

export interface IndexProgress {
  /** Every task has its search entries and counts. */
  built: boolean;
  /** Tasks given their entries by this call. */
  indexed: number;
}

/** A tenant's named, shared search. */
export interface SavedView {
  /** 1–128 characters, no control characters. */
  name: string;
  filter: TaskFilter;
  sort: TaskSort;
  /** 1 when made, one more with each change. */
  revision: Int;
  /** Who last changed it. */
  by: string | null;
  /** When it was last changed (the engine's clock). */
  at: Int;
}

/** A view to put: its revision and time are the engine's to set. */
export interface NewSavedView {
  name: string;
  filter?: NewTaskFilter;
  sort?: { key: SortKey; descending?: boolean };
  by?: string | null;
}

/**
 * What a bulk job does to each task, through the task verb of that name:
 * `release` (`unassign`), `assign` (without a lease), `update`, `escalate`,
 * `withdraw` (`settle` as withdrawn).
 */
export type JobAction =
  | 'release'
  | 'escalate'
  | 'withdraw'
  | { assign: { to: string; roles?: string[]; overrideRoles?: boolean } }
  | { update: TaskChanges };

/** `counting` its set, `running` its action, `cancelled`, or `done`. */
export type JobState = 'counting' | 'running' | 'cancelled' | 'done';

/** A task a job did not change, and why. */
export interface JobMiss {
  id: string;
  reason: string;
}

/** A bulk job: an action over the tasks a filter matched when it started. */
export interface Job {
  id: string;
  filter: TaskFilter;
  /** As given; an update shows only the fields it changes. */
  action: JobAction;
  /** Who started it, recorded as `by` of each change where the verb takes one. */
  by: string | null;
  state: JobState;
  /** The tasks of its set found so far (all of them once it runs). */
  total: Int;
  /** Tasks the action was applied to. */
  done: Int;
  /** Tasks that no longer matched when their turn came. */
  skipped: Int;
  /** Tasks whose verb refused. */
  failed: Int;
  /** The last 16 failures, oldest first. */
  lastFailures: JobMiss[];
  /** The last 16 skips, oldest first. */
  lastSkipped: JobMiss[];
  /** The `now` it started at: tasks created after it are not its. */
  createdAt: Int;
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

/** One change of a task, as its history keeps it. */
export interface HistoryEntry {
  /** 1 for the open; 0 for the `before-history` entry of a task written before history was kept. */
  seq: Int;
  /** When the host ran the call (the engine's clock); for `before-history`, when history began, or the task's creation. */
  at: Int;
  verb: string;
  /** Who made it; null for the service. */
  actor: string | null;
  /** Null for the change that opened the task. */
  before: TaskState | null;
  after: TaskState;
  assignee: string | null;
  leaseUntil: Int | null;
  candidateRoles: string[];
  excludedActors: string[];
  /** The task's revision after the change; 0 for a change recorded before layout 10. */
  revision: Int;
  /** Each field the change changed, with its value before and after. */
  changes: FieldChange[];
  /** The decision a settle recorded. */
  decision: DecisionRecord | null;
  /** A note's text. */
  note: string | null;
  /** The guard's job, when the change was made by one. */
  job: string | null;
  /** The reminder or chain step the change fired (`expireOverdue`). */
  step: TaskStep | null;
}

/** What a change did to a timer; `rescheduled`: `reschedule` moved it to a new `fireAt`, unclaimed. */
export type TimerEvent = 'armed' | 'claimed' | 'retired' | 'rescheduled';

export interface TimerChange {
  run: string;
  effect: string;
  at: Int;
  verb: string;
  what: TimerEvent;
  fireAt: Int;
  leaseUntil: Int | null;
}

/** What one feed entry records. */
export type Change =
  | { task: { id: string; entry: HistoryEntry; run: string | null; kind: string | null } }
  | { timer: TimerChange };

export interface FeedEntry {
  /** Where to read on after this entry. */
  position: string;
  change: Change;
}

/**
 * A read of the feed: a page (`next` is where to read on, `head` the feed's
 * end as the read saw it), or `gone` (the feed's end to follow on from after
 * refreshing) when what follows the position asked for was trimmed.
 */
export type FeedRead = { page: { entries: FeedEntry[]; next: string; head: string } } | { gone: string };

export interface TrimOutcome {
  feedRemoved: number;
  historyRemoved: number;
  more: boolean;
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
  /** Milliseconds since 1970, read once per call for the time its changes are recorded at (default `Date.now`). */
  clock?: () => number;
}

/** The version of the WIT package `leasehold:engine` this host speaks; a component speaking another is refused at `open`. */
export const PACKAGE_VERSION: string;

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
  /** This tenant, for guarded calls: every verb that changes one task goes ahead only at `guard.revision` (else ClaimRefusal `stale`). */
  guarded(guard: Guard): Tenant;
  open(task: NewTask): Task;
  get(id: string): Task | null;
  claim(id: string, actor: string, roles?: string[], lease?: Lease | null): Task;
  renew(id: string, actor: string, now: Timestamp, leaseMs: U32): Task;
  reclaimLapsed(now: Timestamp, limit: U32): Task[];
  /** Acts on tasks overdue at `now` by their `onExpiry`, then fires due reminders and chain steps, one per task per call. */
  expireOverdue(now: Timestamp, limit: U32): Task[];
  claimNext(query: { roles: string[]; actor: string; limit?: U32; after?: string | null }, lease?: Lease | null): Task | null;
  /** Up to `count` (1–100) heads of the caller's queue claimed for `query.actor` in one call, in queue order. */
  claimBatch(query: { roles: string[]; actor: string; limit?: U32; after?: string | null }, lease: Lease | null | undefined, count: U32): Task[];
  /** Settles each finished task the actor holds (each answered on its own), then claims up to `count` (0–100) more. */
  settleAndClaim(
    done: Finished[],
    query: { roles: string[]; actor: string; limit?: U32; after?: string | null },
    lease: Lease | null | undefined,
    count: U32,
  ): SettledAndClaimed;
  leasedCount(): number | bigint;
  nextLeaseEnd(): number | bigint | null;
  /** The earliest instant `expireOverdue` has something to do (a due time, a reminder or a chain step), or null. */
  nextWake(): number | bigint | null;
  release(id: string, actor: string): void;
  takeOver(id: string, from: string, actor: string, roles?: string[], lease?: Lease | null): Task;
  settle(id: string, settlement: Settlement, holder?: string | null): boolean;
  /** `settle` with a decision, checked against the task's (or its kind's) outcomes. */
  decide(id: string, settlement: Settlement, holder?: string | null, decision?: Decision | null): boolean;
  withdrawRun(run: string, awaited: string[]): number;
  escalate(id: string): Task;
  /** The tasks `actor` holds, soonest lease end first, unleased last. */
  held(actor: string, limit: U32, after?: string | null): Page;
  update(id: string, by: string | null, changes: TaskChanges): Task;
  assign(id: string, to: string, roles?: string[], lease?: Lease | null, overrideRoles?: boolean, by?: string | null): Task;
  unassign(id: string, by?: string | null): Task;
  delegate(id: string, from: string, to: string, roles?: string[], lease?: Lease | null): Task;
  note(id: string, actor: string, text: string): Task;
  defineKind(definition: NewKindDefinition, expected?: Int | null): KindDefinition;
  getKind(kind: string): KindDefinition | null;
  listKinds(limit: U32, after?: string | null): KindDefinition[];
  removeKind(kind: string): boolean;
  queue(query: QueueQuery): Page;
  forCase(caseId: string, limit: U32, after?: string | null): Page;
  openCount(): number | bigint;
  overdue(now: Timestamp, limit: U32): Task[];
  arm(timer: NewTimer): ArmOutcome;
  claimDue(now: Timestamp, limit: U32, leaseMs: U32): Timer[];
  disarm(run: string, effect: string): boolean;
  /** Retires every timer of `run`; answers how many. A schedule whose occurrence this retires ends (`nextAt` null, nothing waiting). */
  disarmRun(run: string): number;
  pendingCount(): number | bigint;
  nextDue(): number | bigint | null;
  /** Moves the armed timer `(run, effect)` to `fireAt`; one a sweeper holds only with `takeBack`. */
  reschedule(run: string, effect: string, fireAt: Timestamp, options?: { takeBack?: boolean }): Rescheduled;
  /** The timers armed for `run`, by effect, a page of at most `limit` (1–1000) after `after`. */
  timersOf(run: string, limit: U32, after?: string | null): TimerPage;
  /** The timers that become claimable in `[from, to)`, in `claimDue`'s order, a page of at most `limit` after `after`. */
  dueBetween(from: Timestamp, to: Timestamp, limit: U32, after?: string | null): TimerPage;
  /** Adds a schedule and arms its first occurrence at or after `now`; a bad spec, an id in use or a sealed run is `invalid`. */
  addSchedule(spec: NewScheduleSpec, now: Timestamp): Schedule;
  /** Removes a schedule with its armed and waiting occurrences; true if there was one. */
  removeSchedule(id: string): boolean;
  /** Pauses a schedule with a note (1–1024 characters): nothing fires until it is resumed. */
  pauseSchedule(id: string, note: string): Schedule;
  /** Resumes a paused schedule from `now`: what fell in the pause does not fire. */
  resumeSchedule(id: string, now: Timestamp): Schedule;
  /** Arms an extra occurrence at `now` (timer effect `schedule/<id>/<now>`) and answers its timer. */
  triggerSchedule(id: string, now: Timestamp): Timer;
  /** The schedule's next `n` (1–1000) occurrences after `after`, before jitter, in order. */
  nextOccurrences(id: string, after: Timestamp, n: U32): (number | bigint)[];
  getSchedule(id: string): Schedule | null;
  /** Schedules by id, a page of at most `limit` (1–1000) after the cursor `after`. */
  listSchedules(limit: U32, after?: string | null): SchedulePage;
  /** The IANA time-zone database the component carries, e.g. `2025b`. */
  tzVersion(): string;
  /** Adds a webhook subscription, active at revision 1, at position `from` (null: the feed's head now; `'f'`: its start); bad input is `invalid`. */
  addSubscription(id: string, url: string, filter: NewSubFilter, key: Uint8Array, from: string | null, now: Timestamp): Subscription;
  getSubscription(id: string): Subscription | null;
  /** Subscriptions by id, a page of at most `limit` (1–1000) after the cursor `after`. */
  listSubscriptions(limit: U32, after?: string | null): SubscriptionPage;
  /** Changes the URL, the filter or both (null: as it is), if at revision `expected` (else StoreError `stale`). */
  changeSubscription(id: string, url?: string | null, filter?: NewSubFilter | null, expected?: Int | null): Subscription;
  /** Sets the state and its note (null clears it), if at revision `expected`; `active` keeps the position. */
  setSubscriptionState(id: string, state: SubState, note?: string | null, expected?: Int | null): Subscription;
  /** Makes `key` current; earlier keys sign until `oldUntil` (at most 7 days after `now`). */
  rotateSubscriptionKey(id: string, key: Uint8Array, oldUntil: Timestamp, now: Timestamp): Subscription;
  /** Removes a subscription; true if there was one. */
  removeSubscription(id: string): boolean;
  /** A delivery moves the position on (never back, never past the head), if at `revision` (else `stale`); the revision stays. */
  advanceSubscription(id: string, revision: Int, position: string): Subscription;
  /** Replays from `position` (null or `'f'`: the feed's start): active again, note cleared, revision one more. */
  rewindSubscription(id: string, position?: string | null): Subscription;
  /** Takes or renews the delivery lease for `holder` until `now + leaseMs`; false when another holds it or there is none. */
  leaseSubscription(id: string, holder: string, now: Timestamp, leaseMs: U32): boolean;
  /** Gives the delivery lease up, if `holder` holds it. */
  releaseSubscription(id: string, holder: string): void;
  /** Keeps `attempts` (at most 20) among the last 20 recorded. */
  recordSubscriptionAttempts(id: string, attempts: NewAttempt[]): void;
  /** One page of the tasks that match, in the sort's order; a cursor of another search is a StoreError `invalid` naming `after`. */
  search(query: SearchQuery): SearchPage;
  /** How many tasks match; states and kinds alone, with no viewer, from counters. */
  count(filter?: NewTaskFilter | null, viewer?: Viewer | null, after?: string | null): CountAnswer;
  /** Gives up to `limit` (1–10000) tasks of a keyspace laid out before search their entries. */
  buildSearchIndex(limit: U32): IndexProgress;
  /** Makes a view (`expected` null) or changes one at revision `expected`. */
  putView(view: NewSavedView, expected?: Int | null): SavedView;
  getView(name: string): SavedView | null;
  /** Views in name order (bytewise), after `after`, at most `limit` (1–1000). */
  listViews(limit: U32, after?: string | null): SavedView[];
  /** True if there was one; at another revision than `expected` (when given), a StoreError `stale`. */
  deleteView(name: string, expected?: Int | null): boolean;
  /** Starts a job (`counting`) over the tasks matching `filter` created at or before `now` (default: the clock). */
  startJob(id: string, filter: NewTaskFilter | null, action: JobAction, by?: string | null, now?: Timestamp): Job;
  /** One step of a job, its own transaction: a stretch of its count, one task, or chunks a cancelled one drops. */
  stepJob(id: string): Job;
  /** Stops a job at once; a finished job answers as it stands. */
  cancelJob(id: string): Job;
  getJob(id: string): Job | null;
  /** Jobs in id order (bytewise), after `after`, at most `limit` (1–1000). */
  listJobs(limit?: U32, after?: string | null): Job[];
  /** Ids of jobs with work left, in id order, at most `limit` (1–1000). */
  runnableJobs(limit?: U32): string[];
  /** Steps a job until it is done or cancelled, calling `onProgress` after each step; answers the job as it ended. */
  runJob(id: string, options?: { onProgress?: ((job: Job) => void) | null }): Job;
  /** Seals `run`: retires its timers (its schedules end with them) and withdraws its pending tasks among `awaited`, in one transaction. */
  seal(run: string, awaited?: string[]): SealOutcome;
  isSealed(run: string): boolean;
  check(): Discrepancy[];
  /** Task `id`'s history after entry `after` (a seq), oldest first; a task from before history opens with entry 0, `before-history`. */
  history(id: string, after?: Int | null, limit?: number): HistoryEntry[];
  /** The feed after `after` (from the oldest entry kept without it). */
  feed(after?: string | null, limit?: number): FeedRead;
  /** Removes the oldest feed entries recorded before `before`, or beyond the newest `keep`, with their history. */
  trim(rule: { before?: Int | null; keep?: Int | null; limit?: number }): TrimOutcome;
}

export class LeaseholdError extends Error {
  readonly retryable: boolean;
  readonly invalidInput: boolean;
}

export type RefusalCase = 'not-found' | 'excluded' | 'wrong-role' | 'not-pending' | 'already-claimed' | 'not-held' | 'stale';

export class ClaimRefusal extends LeaseholdError {
  constructor(kase: RefusalCase, detail: string | Int);
  readonly case: RefusalCase;
  /** An actor, holder, id or task state; for `stale`, the task's current revision. */
  readonly detail: string | Int;
  /** For `stale`, the task's current revision; else null. */
  readonly current: Int | null;
  /** `case`, as earlier versions spelled it. */
  readonly tag: RefusalCase;
  readonly variant: { tag: RefusalCase; val: string | Int };
}

export type StoreErrorCase = 'not-found' | 'invalid' | 'corrupt' | 'storage' | 'newer-layout' | 'stale';

export class StoreError extends LeaseholdError {
  constructor(kase: StoreErrorCase, detail: string | Int);
  readonly case: StoreErrorCase;
  /** The text; for `stale` (`defineKind`'s expected revision), the current revision. */
  readonly detail: string | Int;
  /** For `stale`, the current revision; else null. */
  readonly current: Int | null;
  readonly tag: StoreErrorCase;
  readonly variant: { tag: StoreErrorCase; val: string | Int };
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

/** What a worker's handler answers: nothing (settle `completed`) or how to settle, with a decision. */
export type HandlerResult = void | undefined | { settlement?: Settlement; decision?: Decision | null };

export interface TaskWorkerOptions {
  /** The actor the worker claims as (required). */
  actor: string;
  /** The roles whose queue it takes from. Default `[]`. */
  roles?: string[];
  /** Runs one task; its signal aborts when the task's lease is lost or shutdown gives up on it. */
  handler: (task: Task, context: { signal: AbortSignal }) => HandlerResult | Promise<HandlerResult>;
  /** Handlers at once. Default 4. */
  concurrency?: number;
  /** Tasks claimed per fetch, 1–100. Default `concurrency`. */
  batch?: number;
  /** Lease of every claim, renewed when half is left. Default 60 000. */
  leaseMs?: number;
  /** A handler that throws: its task released at once (default), or left held until its lease lapses. */
  onError?: 'release' | 'lease';
  /**
   * How often, at most, the worker returns the tenant's lapsed leases to the queue before it
   * fetches (`reclaimLapsed`), so a killed worker's tasks come back without a sweeper. Default
   * `leaseMs`; 0 never (a tenant a sweeper serves).
   */
  reclaimMs?: number;
  /** The wait after an empty fetch, doubling up to `maxIdleMs`. Defaults 100 and 5 000. */
  idleMs?: number;
  maxIdleMs?: number;
  /** The clock leases are reckoned by, ms since 1970. Default `Date.now`. */
  now?: () => number;
  /** The loop's only timer. Default: a `setTimeout` the signal cancels. */
  sleep?: (ms: number, signal: AbortSignal) => Promise<void>;
  /** Every event: claimed, started, handled, failed, settled, refused, lost, renewed, released, reclaimed, idle, error, stopped. */
  onEvent?: (name: string, detail: Record<string, unknown>) => void;
}

export interface TaskWorkerStats {
  calls: number;
  claimed: number;
  started: number;
  handled: number;
  failed: number;
  settled: number;
  refused: number;
  lost: number;
  renewed: number;
  released: number;
  /** Lapsed leases this worker returned to the queue. */
  reclaimed: number;
  abandoned: number;
  errors: number;
}

/** A worker loop over one tenant's queue: claims in batches, runs handlers, renews leases, settles in batches. */
export class TaskWorker {
  constructor(tenant: Tenant, options: TaskWorkerOptions);
  readonly stats: TaskWorkerStats;
  /** Tasks held and not yet settled or released. */
  readonly holding: number;
  /** Runs until `stop()`; resolves to the stats once shutdown is done. */
  run(): Promise<TaskWorkerStats>;
  /** Stops: releases what had not started, waits for running handlers up to the deadline, settles what finished. */
  stop(options?: { deadlineMs?: number }): Promise<TaskWorkerStats>;
}
