// The typed verbs, one method per WIT export, scoped to one tenant, and the
// conversions between the package's plain objects and jco's values: options
// are null (never undefined) on the way out, integers are numbers where they
// fit and BigInt only where they do not.
import { SandboxError } from './errors.js';

const MIN = BigInt(Number.MIN_SAFE_INTEGER);
const MAX = BigInt(Number.MAX_SAFE_INTEGER);

/** A 64-bit answer as a number when it is exact, else as the BigInt. */
const int = (b) => (typeof b === 'bigint' && b >= MIN && b <= MAX ? Number(b) : b);
const opt = (v, f = (x) => x) => (v === undefined || v === null ? null : f(v));

function s64(v, field) {
  if (typeof v === 'bigint') return v;
  if (Number.isSafeInteger(v)) return BigInt(v);
  throw new TypeError(`${field} must be an integer (milliseconds since the epoch), got ${v}`);
}

function u32(v, field) {
  const n = typeof v === 'bigint' ? Number(v) : v;
  if (!Number.isInteger(n) || n < 0 || n > 0xffffffff) throw new TypeError(`${field} must be an integer in 0..2^32-1, got ${v}`);
  return n;
}

const list = (v, field) => {
  if (!Array.isArray(v)) throw new TypeError(`${field} must be an array of strings`);
  return v;
};

/**
 * A task to open. `id`, `run` and `kind` are required; the rest default:
 * no case, justification `{}` (an object is stringified), no roles (anyone),
 * priority normal, state open, onExpiry deny, createdAt now.
 */
function witTask(t) {
  const justification = t.justification ?? '{}';
  return {
    id: t.id,
    run: t.run,
    case: opt(t.case) ?? undefined,
    kind: t.kind,
    justification: typeof justification === 'string' ? justification : JSON.stringify(justification),
    candidateRoles: list(t.candidateRoles ?? [], 'candidateRoles'),
    assignee: opt(t.assignee) ?? undefined,
    leaseUntil: t.leaseUntil === undefined || t.leaseUntil === null ? undefined : s64(t.leaseUntil, 'leaseUntil'),
    priority: t.priority ?? 'normal',
    state: t.state ?? 'open',
    onExpiry: t.onExpiry ?? 'deny',
    escalateTo: list(t.escalateTo ?? [], 'escalateTo'),
    excludedActors: list(t.excludedActors ?? [], 'excludedActors'),
    createdAt: s64(t.createdAt ?? Date.now(), 'createdAt'),
    dueAt: t.dueAt === undefined || t.dueAt === null ? undefined : s64(t.dueAt, 'dueAt'),
  };
}

const task = (t) => ({
  id: t.id,
  run: t.run,
  case: opt(t.case),
  kind: t.kind,
  justification: t.justification,
  candidateRoles: t.candidateRoles,
  assignee: opt(t.assignee),
  leaseUntil: opt(t.leaseUntil, int),
  priority: t.priority,
  state: t.state,
  onExpiry: t.onExpiry,
  escalateTo: t.escalateTo,
  excludedActors: t.excludedActors,
  createdAt: int(t.createdAt),
  dueAt: opt(t.dueAt, int),
});

/** A timer to arm: `run`, `effect`, `fireAt` required; no case, step 0, phase forward by default. */
const witTimer = (t) => ({
  run: t.run,
  case: opt(t.case) ?? undefined,
  effect: t.effect,
  step: u32(t.step ?? 0, 'step'),
  phase: t.phase ?? 'forward',
  fireAt: s64(t.fireAt, 'fireAt'),
});

const timer = (t) => ({
  run: t.run,
  case: opt(t.case),
  effect: t.effect,
  step: t.step,
  phase: t.phase,
  fireAt: int(t.fireAt),
});

const malformed = (what) => new SandboxError('malformed', `the guest answered something the contract rules out: ${what}`);

function sameTask(t, id) {
  if (t.id !== id) throw malformed(`asked for task ${id}, answered task ${t.id}`);
  return task(t);
}

function atMost(items, limit, verb) {
  if (items.length > limit) throw malformed(`${verb} answered ${items.length} entries for a limit of ${limit}`);
  return items;
}

/** `{ now, leaseMs }` or null/undefined for a claim held until release. */
const witLease = (l) =>
  l === undefined || l === null ? undefined : { now: s64(l.now, 'lease.now'), leaseMs: u32(l.leaseMs, 'lease.leaseMs') };

const page = (p, limit, verb) => ({ tasks: atMost(p.tasks, limit, verb).map(task), next: opt(p.next) });

const W = 'write';
const R = 'read';

/** One tenant of an engine. Every method is one call in one transaction. */
export class Tenant {
  #engine;
  #instance;

  constructor(engine, name, instance) {
    this.#engine = engine;
    this.#instance = instance;
    this.name = name;
  }

  /** How many instances this tenant has made: one, plus one after each trap. */
  get instancesMade() {
    return this.#instance.made;
  }

  #call(verb, mode, f, check, claimVerb = false) {
    return this.#engine.call(this.name, this.#instance, verb, mode, claimVerb, f, check);
  }

  /** Creates a task; first open wins, and the stored task is answered. */
  open(t) {
    const w = witTask(t);
    return this.#call('open', W, (r) => r.tasks.open(w), (a) => sameTask(a, w.id));
  }

  /** The task, or null. */
  get(id) {
    return this.#call('get', R, (r) => r.tasks.get(id), (a) => opt(a, (t) => sameTask(t, id)));
  }

  /** Reserves the task for `actor`; with `lease` (`{ now, leaseMs }`) it is held until `now + leaseMs`. */
  claim(id, actor, roles = [], lease = null) {
    list(roles, 'roles');
    const l = witLease(lease);
    return this.#call('claim', W, (r) => r.tasks.claim(id, actor, roles, l), (a) => sameTask(a, id), true);
  }

  /** The holder of a leased claim extends it to `now + leaseMs`. */
  renew(id, actor, now, leaseMs) {
    const at = s64(now, 'now');
    const ms = u32(leaseMs, 'leaseMs');
    return this.#call('renew', W, (r) => r.tasks.renew(id, actor, at, ms), (a) => sameTask(a, id), true);
  }

  /** Returns to the queue every task whose lease ended at or before `now`, up to `limit`. */
  reclaimLapsed(now, limit) {
    const at = s64(now, 'now');
    const n = u32(limit, 'limit');
    return this.#call('reclaim-lapsed', W, (r) => r.tasks.reclaimLapsed(at, n), (ts) => atMost(ts, n, 'reclaim-lapsed').map(task));
  }

  /** Claims the head of the caller's queue (`actor` required); null when it is empty. */
  claimNext({ roles, actor = null, limit = 1, after = null }, lease = null) {
    const q = { roles: list(roles, 'roles'), actor: opt(actor) ?? undefined, limit: u32(limit, 'limit'), after: opt(after) ?? undefined };
    const l = witLease(lease);
    return this.#call('claim-next', W, (r) => r.tasks.claimNext(q, l), (a) => opt(a, task));
  }

  /** Tasks claimed under a lease. One counter read. */
  leasedCount() {
    return this.#call('leased-count', R, (r) => r.tasks.leasedCount(), int);
  }

  /** The earliest lease end among leased claims, or null. */
  nextLeaseEnd() {
    return this.#call('next-lease-end', R, (r) => r.tasks.nextLeaseEnd(), (a) => opt(a, int));
  }

  release(id, actor) {
    return this.#call('release', W, (r) => r.tasks.release(id, actor), () => undefined, true);
  }

  takeOver(id, from, actor, roles = [], lease = null) {
    list(roles, 'roles');
    const l = witLease(lease);
    return this.#call('take-over', W, (r) => r.tasks.takeOver(id, from, actor, roles, l), (a) => sameTask(a, id), true);
  }

  /**
   * Compare-and-set from pending: true when this call settled the task. With
   * `holder`, the task must be claimed by exactly that actor (else not-held).
   */
  settle(id, settlement, holder = null) {
    const h = opt(holder) ?? undefined;
    return this.#call('settle', W, (r) => r.tasks.settle(id, settlement, h), (a) => a, true);
  }

  withdrawRun(run, awaited) {
    list(awaited, 'awaited');
    return this.#call('withdraw-run', W, (r) => r.tasks.withdrawRun(run, awaited), (n) => {
      if (n > awaited.length) throw malformed(`withdraw-run moved ${n} of ${awaited.length} awaited tasks`);
      return n;
    });
  }

  escalate(id) {
    return this.#call('escalate', W, (r) => r.tasks.escalate(id), (a) => sameTask(a, id));
  }

  /** `{ roles, actor?, limit, after? }` → `{ tasks, next }`. */
  queue({ roles, actor = null, limit, after = null }) {
    const q = { roles: list(roles, 'roles'), actor: opt(actor) ?? undefined, limit: u32(limit, 'limit'), after: opt(after) ?? undefined };
    return this.#call('queue', R, (r) => r.tasks.queue(q), (p) => page(p, q.limit, 'queue'));
  }

  forCase(caseId, limit, after = null) {
    const n = u32(limit, 'limit');
    return this.#call('for-case', R, (r) => r.tasks.forCase(caseId, n, opt(after) ?? undefined), (p) => page(p, n, 'for-case'));
  }

  /** Pending tasks (claimed ones count). One counter read. */
  openCount() {
    return this.#call('open-count', R, (r) => r.tasks.openCount(), int);
  }

  overdue(now, limit) {
    const n = u32(limit, 'limit');
    const at = s64(now, 'now');
    return this.#call('overdue', R, (r) => r.tasks.overdue(at, n), (ts) => atMost(ts, n, 'overdue').map(task));
  }

  /** 'armed' | 'already-armed' | 'run-sealed'. */
  arm(t) {
    const w = witTimer(t);
    return this.#call('arm', W, (r) => r.timers.arm(w), (a) => a);
  }

  /** Leases up to `limit` due timers until `now + leaseMs`. */
  claimDue(now, limit, leaseMs) {
    const n = u32(limit, 'limit');
    const at = s64(now, 'now');
    const lease = u32(leaseMs, 'leaseMs');
    return this.#call('claim-due', W, (r) => r.timers.claimDue(at, n, lease), (ts) => {
      const seen = new Set();
      for (const t of atMost(ts, n, 'claim-due')) {
        const identity = JSON.stringify([t.run, t.effect]);
        if (seen.has(identity)) throw malformed(`claim-due answered timer ${t.run}/${t.effect} twice`);
        seen.add(identity);
      }
      return ts.map(timer);
    });
  }

  disarm(run, effect) {
    return this.#call('disarm', W, (r) => r.timers.disarm(run, effect), (a) => a);
  }

  disarmRun(run) {
    return this.#call('disarm-run', W, (r) => r.timers.disarmRun(run), (a) => a);
  }

  /** Armed timers. One counter read. */
  pendingCount() {
    return this.#call('pending-count', R, (r) => r.timers.pendingCount(), int);
  }

  /** When the next timer becomes claimable, or null. */
  nextDue() {
    return this.#call('next-due', R, (r) => r.timers.nextDue(), (a) => opt(a, int));
  }

  /** `{ timersDisarmed, tasksWithdrawn }` moved by this call. */
  seal(run, awaited = []) {
    list(awaited, 'awaited');
    return this.#call('seal', W, (r) => r.runs.seal(run, awaited), (o) => ({
      timersDisarmed: o.timersDisarmed,
      tasksWithdrawn: o.tasksWithdrawn,
    }));
  }

  isSealed(run) {
    return this.#call('is-sealed', R, (r) => r.runs.isSealed(run), (a) => a);
  }

  /** Every discrepancy between the tenant's rows and its indexes and counters. */
  check() {
    return this.#call('check', R, (r) => r.admin.check(), (ds) => ds.map((d) => ({ ...d })));
  }
}
