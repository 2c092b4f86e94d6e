// The typed verbs, one method per WIT export, scoped to one tenant, and the
// conversions between the package's plain objects and jco's values: options
// are null (never undefined) on the way out, integers are numbers where they
// fit and BigInt only where they do not.
import { InvalidArgument, SandboxError } from './errors.js';

const MIN = BigInt(Number.MIN_SAFE_INTEGER);
const MAX = BigInt(Number.MAX_SAFE_INTEGER);
const S64_MIN = -(2n ** 63n);
const S64_MAX = 2n ** 63n - 1n;
const U64_MAX = 2n ** 64n - 1n;
const U32_MAX = 0xffffffff;

/** A 64-bit answer as a number when it is exact, else as the BigInt. */
const int = (b) => (typeof b === 'bigint' && b >= MIN && b <= MAX ? Number(b) : b);
const opt = (v, f = (x) => x) => (v === undefined || v === null ? null : f(v));
const absent = (v) => v === undefined || v === null;

const shown = (v) => (typeof v === 'bigint' ? `${v}n` : typeof v === 'string' ? JSON.stringify(v) : String(v));

// Every argument is checked here, before the guest runs: jco would wrap an
// out-of-range BigInt (BigInt.asIntN), stringify a non-string and replace a
// lone surrogate, so a bad value would reach the rules as a different one.

/** A WIT s64: a safe-integer number or a BigInt in range; never wrapped. */
function s64(v, field) {
  if (typeof v === 'bigint') {
    if (v < S64_MIN || v > S64_MAX) throw new InvalidArgument(`${field} must fit in 64 signed bits, got ${shown(v)}`);
    return v;
  }
  if (Number.isSafeInteger(v)) return BigInt(v);
  throw new InvalidArgument(`${field} must be an integer (milliseconds since the epoch), got ${shown(v)}`);
}

/** A WIT u64: a non-negative safe-integer number or a BigInt in range; never wrapped. */
function u64(v, field) {
  if (typeof v === 'bigint') {
    if (v < 0n || v > U64_MAX) throw new InvalidArgument(`${field} must fit in 64 unsigned bits, got ${shown(v)}`);
    return v;
  }
  if (Number.isSafeInteger(v) && v >= 0) return BigInt(v);
  throw new InvalidArgument(`${field} must be a non-negative integer, got ${shown(v)}`);
}

const optU64 = (v, field) => (absent(v) ? undefined : u64(v, field));

/** A WIT u32, as a number or a BigInt in 0..2^32-1. */
function u32(v, field) {
  const n = typeof v === 'bigint' && v >= 0n && v <= BigInt(U32_MAX) ? Number(v) : v;
  if (!Number.isInteger(n) || n < 0 || n > U32_MAX) throw new InvalidArgument(`${field} must be an integer in 0..2^32-1, got ${shown(v)}`);
  return n;
}

function str(v, field) {
  if (typeof v !== 'string') throw new InvalidArgument(`${field} must be a string, got ${shown(v)}`);
  if (!v.isWellFormed()) throw new InvalidArgument(`${field} must be well-formed Unicode (it has a lone surrogate)`);
  return v;
}

/** An optional string: null or undefined is absent. */
const optStr = (v, field) => (absent(v) ? undefined : str(v, field));
const optS64 = (v, field) => (absent(v) ? undefined : s64(v, field));

function list(v, field) {
  if (!Array.isArray(v)) throw new InvalidArgument(`${field} must be an array of strings, got ${shown(v)}`);
  v.forEach((x, i) => str(x, `${field}[${i}]`));
  return v;
}

function oneOf(cases) {
  return (v, field) => {
    if (!cases.includes(v)) throw new InvalidArgument(`${field} must be one of ${cases.join(', ')}; got ${shown(v)}`);
    return v;
  };
}

const priority = oneOf(['low', 'normal', 'high', 'urgent']);
const taskState = oneOf(['open', 'claimed', 'escalated', 'completed', 'expired', 'withdrawn']);
const onExpiry = oneOf(['deny', 'escalate', 'proceed']);
const settlement = oneOf(['completed', 'expired', 'withdrawn']);
const phase = oneOf(['forward', 'compensating']);

function record(v, field) {
  if (v === null || typeof v !== 'object' || Array.isArray(v)) throw new InvalidArgument(`${field} must be an object, got ${shown(v)}`);
  return v;
}

/**
 * A task to open. `id`, `run` and `kind` are required; the rest default:
 * no case, justification `{}` (an object is stringified), no roles (anyone),
 * priority normal, state open, onExpiry deny, createdAt now, no reminders,
 * no escalation chain.
 */
function witTask(t) {
  record(t, 'task');
  const justification = t.justification ?? '{}';
  // A task's revision, decision and steps done are the engine's to keep: open ignores them.
  return {
    id: str(t.id, 'id'),
    run: str(t.run, 'run'),
    case: optStr(t.case, 'case'),
    kind: str(t.kind, 'kind'),
    justification: str(typeof justification === 'object' ? JSON.stringify(justification) : justification, 'justification'),
    candidateRoles: list(t.candidateRoles ?? [], 'candidateRoles'),
    assignee: optStr(t.assignee, 'assignee'),
    leaseUntil: optS64(t.leaseUntil, 'leaseUntil'),
    priority: priority(t.priority ?? 'normal', 'priority'),
    state: taskState(t.state ?? 'open', 'state'),
    onExpiry: onExpiry(t.onExpiry ?? 'deny', 'onExpiry'),
    escalateTo: list(t.escalateTo ?? [], 'escalateTo'),
    excludedActors: list(t.excludedActors ?? [], 'excludedActors'),
    createdAt: s64(t.createdAt ?? Date.now(), 'createdAt'),
    dueAt: optS64(t.dueAt, 'dueAt'),
    revision: 0n,
    decision: undefined,
    outcomes: witOutcomes(t.outcomes ?? [], 'outcomes'),
    remindBefore: witOffsets(t.remindBefore ?? [], 'remindBefore'),
    escalation: witEscalation(t.escalation ?? [], 'escalation'),
    stepsDone: 0,
  };
}

/** Reminder offsets (ms before the due time): an array of u64, lowered as jco lowers a list<u64>. */
function witOffsets(v, field) {
  if (!Array.isArray(v)) throw new InvalidArgument(`${field} must be an array of non-negative integers, got ${shown(v)}`);
  return BigUint64Array.from(v.map((x, i) => u64(x, `${field}[${i}]`)));
}

/** `{ escalate: [roles] }` or `{ expire: true }`, as a schedule's catch-up spells `{ none: true }`. */
function witStepAction(v, field) {
  const [kase, val] = oneKey(v, ['escalate', 'expire'], field);
  if (kase === 'escalate') return { tag: 'escalate', val: list(val, `${field}.escalate`) };
  if (val !== true) throw new InvalidArgument(`${field}.expire must be true, got ${shown(val)}`);
  return { tag: 'expire' };
}

/** An escalation chain: `[{ afterDueMs, action }]`, in firing order. */
function witEscalation(v, field) {
  if (!Array.isArray(v)) throw new InvalidArgument(`${field} must be an array of escalation steps, got ${shown(v)}`);
  return v.map((s, i) => {
    const f = `${field}[${i}]`;
    record(s, f);
    known(s, ['afterDueMs', 'action'], f);
    return { afterDueMs: u64(s.afterDueMs, `${f}.afterDueMs`), action: witStepAction(s.action, `${f}.action`) };
  });
}

/** JSON text as given, or an object/array/number/boolean/null to be JSON.stringify'd. */
const jsonText = (v, field) => str(typeof v === 'string' ? v : JSON.stringify(v), field);

/**
 * A task's or kind's allowed outcomes: `[{ name, needsReason?, outputSchema? }]`;
 * a schema may be given as an object (stringified).
 */
function witOutcomes(v, field) {
  if (!Array.isArray(v)) throw new InvalidArgument(`${field} must be an array of outcome rules, got ${shown(v)}`);
  return v.map((r, i) => {
    const f = `${field}[${i}]`;
    record(r, f);
    known(r, ['name', 'needsReason', 'outputSchema'], f);
    const needsReason = r.needsReason ?? false;
    if (typeof needsReason !== 'boolean') throw new InvalidArgument(`${f}.needsReason must be a boolean, got ${shown(needsReason)}`);
    return {
      name: str(r.name, `${f}.name`),
      needsReason,
      outputSchema: absent(r.outputSchema) ? undefined : jsonText(r.outputSchema, `${f}.outputSchema`),
    };
  });
}

/** Refuses a key the record does not have, so a misspelt field is never silently dropped. */
function known(v, fields, field) {
  for (const k of Object.keys(v)) {
    if (!fields.includes(k)) throw new InvalidArgument(`${field}.${k} is not a field; the fields are ${fields.join(', ')}`);
  }
}

const outcomeRule = (r) => ({ name: r.name, needsReason: r.needsReason, outputSchema: opt(r.outputSchema) });

const decisionRecord = (d) => ({
  outcome: d.outcome,
  reason: opt(d.reason),
  output: opt(d.output),
  by: opt(d.by),
  at: int(d.at),
});

/** A decision for `decide`: `{ outcome, reason?, output? }`; an output object is stringified. */
function witDecision(d) {
  if (absent(d)) return undefined;
  record(d, 'decision');
  known(d, ['outcome', 'reason', 'output'], 'decision');
  return {
    outcome: str(d.outcome, 'decision.outcome'),
    reason: optStr(d.reason, 'decision.reason'),
    output: absent(d.output) ? undefined : jsonText(d.output, 'decision.output'),
  };
}

const CHANGE_FIELDS = [
  'dueAt', 'priority', 'candidateRoles', 'escalateTo', 'excludedActors', 'onExpiry', 'outcomes', 'remindBefore', 'escalation',
];

/**
 * What `update` changes: a field left out stays as it is; `dueAt: null`
 * clears the due time. A field this host does not know is refused by name.
 */
function witChanges(c) {
  record(c, 'changes');
  known(c, CHANGE_FIELDS, 'changes');
  const has = (k) => c[k] !== undefined;
  const some = (k, f) => (has(k) ? f(c[k], `changes.${k}`) : undefined);
  return {
    // jco spells an option inside an option as a tagged outer one.
    dueAt: has('dueAt') ? { tag: 'some', val: optS64(c.dueAt, 'changes.dueAt') } : { tag: 'none' },
    priority: some('priority', priority),
    candidateRoles: some('candidateRoles', list),
    escalateTo: some('escalateTo', list),
    excludedActors: some('excludedActors', list),
    onExpiry: some('onExpiry', onExpiry),
    outcomes: some('outcomes', witOutcomes),
    remindBefore: some('remindBefore', witOffsets),
    escalation: some('escalation', witEscalation),
  };
}

/** A guard: `{ revision?, job? }`, as `Tenant.guarded` takes it. */
function witGuard(g) {
  record(g, 'guard');
  known(g, ['revision', 'job'], 'guard');
  return { revision: optU64(g.revision, 'guard.revision'), job: optStr(g.job, 'guard.job') };
}

/** A kind's definition to define: `{ kind, outcomes }` (a revision given is ignored). */
function witKind(k) {
  record(k, 'definition');
  known(k, ['kind', 'outcomes', 'revision'], 'definition');
  return { kind: str(k.kind, 'definition.kind'), outcomes: witOutcomes(k.outcomes ?? [], 'definition.outcomes'), revision: 0n };
}

const kindDefinition = (k) => ({ kind: k.kind, outcomes: k.outcomes.map(outcomeRule), revision: int(k.revision) });

/** A chain step's action as answered: `{ escalate: [roles] }` or `{ expire: true }`. */
function stepAction(a) {
  if (a.tag === 'escalate') return { escalate: a.val };
  if (a.tag === 'expire') return { expire: true };
  throw malformed(`a chain step's action is ${a.tag}, which step-action does not have`);
}

const escalationStep = (s) => ({ afterDueMs: int(s.afterDueMs), action: stepAction(s.action) });

/** The step a history entry fired: `{ reminder: ms }` or `{ escalation: { afterDueMs, action } }`. */
function taskStep(s) {
  if (s.tag === 'reminder') return { reminder: int(s.val) };
  if (s.tag === 'escalation') return { escalation: escalationStep(s.val) };
  throw malformed(`a history entry's step is ${s.tag}, which task-step does not have`);
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
  revision: int(t.revision),
  decision: opt(t.decision, decisionRecord),
  outcomes: t.outcomes.map(outcomeRule),
  remindBefore: Array.from(t.remindBefore, int),
  escalation: t.escalation.map(escalationStep),
  stepsDone: t.stepsDone,
});

/** A timer to arm: `run`, `effect`, `fireAt` required; no case, step 0, phase forward by default. */
const witTimer = (t) => ({
  run: str(record(t, 'timer').run, 'run'),
  case: optStr(t.case, 'case'),
  effect: str(t.effect, 'effect'),
  step: u32(t.step ?? 0, 'step'),
  phase: phase(t.phase ?? 'forward', 'phase'),
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

/** An armed timer as a listing shows it: the timer and the sweeper's lease end while it is claimed. */
const timerInfo = (i) => ({ timer: timer(i.timer), leaseUntil: opt(i.leaseUntil, int) });

const timerPage = (p, limit, verb) => ({ timers: atMost(p.timers, limit, verb).map(timerInfo), next: opt(p.next) });

/**
 * A refusal of `reschedule` as its answer: `{ notFound: true }`,
 * `{ held: leaseEnd }` or `{ runSealed: true }` (a moved timer is
 * `{ moved: info }`), one key each, as `feed` answers `{ page }` or `{ gone }`.
 */
function timerRefusal(v) {
  switch (v.tag) {
    case 'not-found':
      return { notFound: true };
    case 'held':
      return { held: int(v.val) };
    case 'run-sealed':
      return { runSealed: true };
    default:
      throw malformed(`reschedule refused with ${v.tag}, which timer-error does not have`);
  }
}

const gapPolicy = oneOf(['shift-forward', 'skip']);
const repeatPolicy = oneOf(['first', 'both']);
const overlapPolicy = oneOf(['skip', 'buffer-one', 'buffer-all']);

/** One year, the catch-up window a spec that names none gets (as the component's own default). */
const YEAR_MS = 365 * 86_400_000;

/** A variant given as an object with one key, `{ CASE: payload }`: its case, among `cases`, and payload. */
function oneKey(v, cases, field) {
  record(v, field);
  const keys = Object.keys(v);
  if (keys.length !== 1 || !cases.includes(keys[0])) {
    throw new InvalidArgument(`${field} must be an object with one key, one of ${cases.join(', ')}; got keys ${keys.join(', ') || 'none'}`);
  }
  return [keys[0], v[keys[0]]];
}

/** `{ cron: 'expr' }` or `{ every: { everyMs, anchor } }`. */
function witRecurrence(v) {
  const [kase, val] = oneKey(v, ['cron', 'every'], 'spec.recurrence');
  if (kase === 'cron') return { tag: 'cron', val: str(val, 'spec.recurrence.cron') };
  record(val, 'spec.recurrence.every');
  known(val, ['everyMs', 'anchor'], 'spec.recurrence.every');
  return {
    tag: 'every',
    val: { everyMs: u64(val.everyMs, 'spec.recurrence.every.everyMs'), anchor: s64(val.anchor, 'spec.recurrence.every.anchor') },
  };
}

/** `{ allWithin: ms }`, `{ latestWithin: ms }` or `{ none: true }`. */
function witCatchUp(v) {
  const [kase, val] = oneKey(v, ['allWithin', 'latestWithin', 'none'], 'spec.catchUp');
  if (kase === 'none') {
    if (val !== true) throw new InvalidArgument(`spec.catchUp.none must be true, got ${shown(val)}`);
    return { tag: 'none' };
  }
  const tag = kase === 'allWithin' ? 'all-within' : 'latest-within';
  return { tag, val: u64(val, `spec.catchUp.${kase}`) };
}

const SPEC_FIELDS = [
  'id', 'run', 'case', 'step', 'phase', 'recurrence', 'zone', 'start', 'end', 'gap', 'repeat', 'overlap', 'catchUp', 'jitterMs',
];

/**
 * A schedule to add. `id`, `run`, `recurrence` and `zone` are required; the
 * rest default: no case, step 0, phase forward, no start or end, gap
 * shift-forward, repeat first, overlap skip, catch-up all within a year,
 * no jitter.
 */
function witScheduleSpec(v) {
  record(v, 'spec');
  known(v, SPEC_FIELDS, 'spec');
  return {
    id: str(v.id, 'spec.id'),
    run: str(v.run, 'spec.run'),
    case: optStr(v.case, 'spec.case'),
    step: u32(v.step ?? 0, 'spec.step'),
    phase: phase(v.phase ?? 'forward', 'spec.phase'),
    recurrence: witRecurrence(v.recurrence),
    zone: str(v.zone, 'spec.zone'),
    start: optS64(v.start, 'spec.start'),
    end: optS64(v.end, 'spec.end'),
    gap: gapPolicy(v.gap ?? 'shift-forward', 'spec.gap'),
    repeat: repeatPolicy(v.repeat ?? 'first', 'spec.repeat'),
    overlap: overlapPolicy(v.overlap ?? 'skip', 'spec.overlap'),
    catchUp: absent(v.catchUp) ? { tag: 'all-within', val: BigInt(YEAR_MS) } : witCatchUp(v.catchUp),
    jitterMs: u32(v.jitterMs ?? 0, 'spec.jitterMs'),
  };
}

function recurrence(r) {
  if (r.tag === 'cron') return { cron: r.val };
  return { every: { everyMs: int(r.val.everyMs), anchor: int(r.val.anchor) } };
}

function catchUp(c) {
  if (c.tag === 'all-within') return { allWithin: int(c.val) };
  if (c.tag === 'latest-within') return { latestWithin: int(c.val) };
  return { none: true };
}

const scheduleSpec = (s) => ({
  id: s.id,
  run: s.run,
  case: opt(s.case),
  step: s.step,
  phase: s.phase,
  recurrence: recurrence(s.recurrence),
  zone: s.zone,
  start: opt(s.start, int),
  end: opt(s.end, int),
  gap: s.gap,
  repeat: s.repeat,
  overlap: s.overlap,
  catchUp: catchUp(s.catchUp),
  jitterMs: s.jitterMs,
});

const schedule = (s) => ({
  spec: scheduleSpec(s.spec),
  paused: opt(s.paused),
  nextAt: opt(s.nextAt, int),
  lastAt: opt(s.lastAt, int),
  waiting: Array.from(s.waiting, int),
  revision: int(s.revision),
});

const subState = oneOf(['active', 'paused', 'failing', 'gone']);

/** A signing key: a Uint8Array (a Buffer is one); its length is the rules' to judge. */
function bytes(v, field) {
  if (!(v instanceof Uint8Array)) throw new InvalidArgument(`${field} must be a Uint8Array, got ${shown(v)}`);
  return v;
}

function bool(v, field) {
  if (typeof v !== 'boolean') throw new InvalidArgument(`${field} must be a boolean, got ${shown(v)}`);
  return v;
}

const FILTER_FIELDS = ['tasks', 'timers', 'verbs', 'kinds', 'runs', 'settlingOnly'];

/**
 * What a subscription is sent: `{ tasks, timers, verbs, kinds, runs,
 * settlingOnly }`, each optional (false, or an empty list: no condition).
 * At least one of `tasks` and `timers` is the rules' to insist on.
 */
function witFilter(v, field) {
  record(v, field);
  known(v, FILTER_FIELDS, field);
  return {
    tasks: bool(v.tasks ?? false, `${field}.tasks`),
    timers: bool(v.timers ?? false, `${field}.timers`),
    verbs: list(v.verbs ?? [], `${field}.verbs`),
    kinds: list(v.kinds ?? [], `${field}.kinds`),
    runs: list(v.runs ?? [], `${field}.runs`),
    settlingOnly: bool(v.settlingOnly ?? false, `${field}.settlingOnly`),
  };
}

/** Delivery attempts to record: `[{ messageId, at, attempt, outcome, latencyMs }]`, every field required. */
function witAttempts(v, field) {
  if (!Array.isArray(v)) throw new InvalidArgument(`${field} must be an array of attempts, got ${shown(v)}`);
  return v.map((a, i) => {
    const f = `${field}[${i}]`;
    record(a, f);
    known(a, ['messageId', 'at', 'attempt', 'outcome', 'latencyMs'], f);
    return {
      messageId: str(a.messageId, `${f}.messageId`),
      at: s64(a.at, `${f}.at`),
      attempt: u32(a.attempt, `${f}.attempt`),
      outcome: str(a.outcome, `${f}.outcome`),
      latencyMs: u64(a.latencyMs, `${f}.latencyMs`),
    };
  });
}

const subFilter = (f) => ({
  tasks: f.tasks,
  timers: f.timers,
  verbs: f.verbs,
  kinds: f.kinds,
  runs: f.runs,
  settlingOnly: f.settlingOnly,
});

const subscription = (s) => ({
  id: s.id,
  url: s.url,
  filter: subFilter(s.filter),
  state: s.state,
  note: opt(s.note),
  position: opt(s.position),
  keys: s.keys.map((k) => ({ key: k.key, until: opt(k.until, int) })),
  createdAt: int(s.createdAt),
  revision: int(s.revision),
  attempts: s.attempts.map((a) => ({
    messageId: a.messageId,
    at: int(a.at),
    attempt: a.attempt,
    outcome: a.outcome,
    latencyMs: int(a.latencyMs),
  })),
  leaseHolder: opt(s.leaseHolder),
  leaseUntil: opt(s.leaseUntil, int),
});

/** A single-subscription answer must be the subscription that was asked about. */
function sameSubscription(s, id, verb) {
  if (s.id !== id) throw malformed(`${verb} asked for subscription ${id}, answered subscription ${s.id}`);
  return subscription(s);
}

// ---- search, counts and saved views ----------------------------------------------------

const sortKey = oneOf(['queue-order', 'due-at', 'created-at', 'priority']);

const FILTER_SEARCH_FIELDS = [
  'states', 'kinds', 'role', 'assignee', 'case', 'run', 'priorityAtLeast', 'dueBefore', 'dueAfter', 'createdBefore',
  'createdAfter', 'overdueAt',
];

/** `{ nobody: true }` or `{ actor: name }`, as a catch-up spells `{ none: true }`. */
function witAssignee(v, field) {
  if (absent(v)) return undefined;
  const [kase, val] = oneKey(v, ['nobody', 'actor'], field);
  if (kase === 'actor') return { tag: 'actor', val: str(val, `${field}.actor`) };
  if (val !== true) throw new InvalidArgument(`${field}.nobody must be true, got ${shown(val)}`);
  return { tag: 'nobody' };
}

/**
 * What a task must be to match: every field optional (an empty list or
 * null places no condition). How many states and kinds, and whether a
 * range holds an instant, are the rules' to judge.
 */
function witTaskFilter(v, field) {
  const f = absent(v) ? {} : record(v, field);
  known(f, FILTER_SEARCH_FIELDS, field);
  const states = f.states ?? [];
  if (!Array.isArray(states)) throw new InvalidArgument(`${field}.states must be an array of task states, got ${shown(states)}`);
  return {
    states: states.map((s, i) => taskState(s, `${field}.states[${i}]`)),
    kinds: list(f.kinds ?? [], `${field}.kinds`),
    role: optStr(f.role, `${field}.role`),
    assignee: witAssignee(f.assignee, `${field}.assignee`),
    case: optStr(f.case, `${field}.case`),
    run: optStr(f.run, `${field}.run`),
    priorityAtLeast: absent(f.priorityAtLeast) ? undefined : priority(f.priorityAtLeast, `${field}.priorityAtLeast`),
    dueBefore: optS64(f.dueBefore, `${field}.dueBefore`),
    dueAfter: optS64(f.dueAfter, `${field}.dueAfter`),
    createdBefore: optS64(f.createdBefore, `${field}.createdBefore`),
    createdAfter: optS64(f.createdAfter, `${field}.createdAfter`),
    overdueAt: optS64(f.overdueAt, `${field}.overdueAt`),
  };
}

/** `{ key, descending? }`; no sort is the queue's order. */
function witSort(v, field) {
  if (absent(v)) return { key: 'queue-order', descending: false };
  record(v, field);
  known(v, ['key', 'descending'], field);
  return { key: sortKey(v.key, `${field}.key`), descending: bool(v.descending ?? false, `${field}.descending`) };
}

/** A reviewer asking, `{ actor, roles }`, or null for the whole tenant. */
function witViewer(v, field) {
  if (absent(v)) return undefined;
  record(v, field);
  known(v, ['actor', 'roles'], field);
  return { actor: str(v.actor, `${field}.actor`), roles: list(v.roles ?? [], `${field}.roles`) };
}

/** A view to put: `{ name, filter?, sort?, by? }` (a revision or time given is the engine's to set, and ignored). */
function witView(v) {
  record(v, 'view');
  known(v, ['name', 'filter', 'sort', 'by', 'revision', 'at'], 'view');
  return {
    name: str(v.name, 'view.name'),
    filter: witTaskFilter(v.filter, 'view.filter'),
    sort: witSort(v.sort, 'view.sort'),
    revision: 0n,
    by: optStr(v.by, 'view.by'),
    at: 0n,
  };
}

function assigneeFilter(a) {
  if (absent(a)) return null;
  if (a.tag === 'nobody') return { nobody: true };
  if (a.tag === 'actor') return { actor: a.val };
  throw malformed(`a filter's assignee is ${a.tag}, which assignee-filter does not have`);
}

/** A filter as answered: every field, null or an empty list where it places no condition. */
const taskFilter = (f) => ({
  states: f.states,
  kinds: f.kinds,
  role: opt(f.role),
  assignee: assigneeFilter(f.assignee),
  case: opt(f.case),
  run: opt(f.run),
  priorityAtLeast: opt(f.priorityAtLeast),
  dueBefore: opt(f.dueBefore, int),
  dueAfter: opt(f.dueAfter, int),
  createdBefore: opt(f.createdBefore, int),
  createdAfter: opt(f.createdAfter, int),
  overdueAt: opt(f.overdueAt, int),
});

const savedView = (v) => ({
  name: v.name,
  filter: taskFilter(v.filter),
  sort: { key: v.sort.key, descending: v.sort.descending },
  revision: int(v.revision),
  by: opt(v.by),
  at: int(v.at),
});

/** A single-view answer must be the view that was asked about. */
function sameView(v, name, verb) {
  if (v.name !== name) throw malformed(`${verb} asked for view ${name}, answered view ${v.name}`);
  return savedView(v);
}

// ---- bulk jobs ------------------------------------------------------------------------

const jobStates = ['counting', 'running', 'cancelled', 'done'];
/** How many failures, and how many skips, a job keeps with their reasons. */
const KEPT_MISSES = 16;

/**
 * What a job does to each task: `'release'`, `'escalate'`, `'withdraw'`,
 * `{ assign: { to, roles?, overrideRoles? } }` or `{ update: changes }`
 * (the changes as `update` takes them).
 */
function witJobAction(v) {
  if (typeof v === 'string') {
    if (['release', 'escalate', 'withdraw'].includes(v)) return { tag: v };
    throw new InvalidArgument(`action must be release, escalate, withdraw, { assign } or { update }; got ${shown(v)}`);
  }
  const [kase, val] = oneKey(v, ['assign', 'update'], 'action');
  if (kase === 'update') return { tag: 'update', val: witChanges(val) };
  record(val, 'action.assign');
  known(val, ['to', 'roles', 'overrideRoles'], 'action.assign');
  return {
    tag: 'assign',
    val: {
      to: str(val.to, 'action.assign.to'),
      roles: list(val.roles ?? [], 'action.assign.roles'),
      overrideRoles: bool(val.overrideRoles ?? false, 'action.assign.overrideRoles'),
    },
  };
}

/** A job's update as answered: only the fields it changes (`dueAt: null` clears the due time). */
function taskChanges(c) {
  const out = {};
  if (c.dueAt && c.dueAt.tag === 'some') out.dueAt = opt(c.dueAt.val, int);
  const fields = [
    ['priority', (x) => x], ['candidateRoles', (x) => x], ['escalateTo', (x) => x], ['excludedActors', (x) => x],
    ['onExpiry', (x) => x], ['outcomes', (x) => x.map(outcomeRule)], ['remindBefore', (x) => Array.from(x, int)],
    ['escalation', (x) => x.map(escalationStep)],
  ];
  for (const [k, f] of fields) if (!absent(c[k])) out[k] = f(c[k]);
  return out;
}

function jobAction(a) {
  if (['release', 'escalate', 'withdraw'].includes(a.tag)) return a.tag;
  if (a.tag === 'assign') return { assign: { to: a.val.to, roles: a.val.roles, overrideRoles: a.val.overrideRoles } };
  if (a.tag === 'update') return { update: taskChanges(a.val) };
  throw malformed(`a job's action is ${a.tag}, which job-action does not have`);
}

const misses = (list) => list.map((f) => ({ id: f.id, reason: f.reason }));

/**
 * A job answered about `id` whose counts add up: no more taken than found,
 * no more reasons kept than the contract keeps, all taken once done.
 */
function sameJob(j, id, verb) {
  if (j.id !== id) throw malformed(`${verb} asked for job ${id}, answered job ${j.id}`);
  if (!jobStates.includes(j.state)) throw malformed(`${verb} answered job ${id} in state ${j.state}`);
  const taken = j.done + j.skipped + j.failed;
  if (taken > j.total || j.lastFailures.length > KEPT_MISSES || j.lastSkipped.length > KEPT_MISSES
    || BigInt(j.lastFailures.length) > j.failed || BigInt(j.lastSkipped.length) > j.skipped
    || (j.state === 'done' && taken !== j.total)) {
    throw malformed(`${verb} answered job ${id} with counts that do not add up: ${j.total} found, ${j.done} done, `
      + `${j.skipped} skipped, ${j.failed} failed, ${j.state}`);
  }
  return {
    id: j.id,
    filter: taskFilter(j.filter),
    action: jobAction(j.action),
    by: opt(j.by),
    state: j.state,
    total: int(j.total),
    done: int(j.done),
    skipped: int(j.skipped),
    failed: int(j.failed),
    lastFailures: misses(j.lastFailures),
    lastSkipped: misses(j.lastSkipped),
    createdAt: int(j.createdAt),
  };
}

/** Ids strictly ascending (bytewise), and after `after`. */
function inIdOrder(ids, after, verb) {
  let prev = after ?? null;
  for (const id of ids) {
    if (prev !== null && !utf8Before(prev, id)) throw malformed(`${verb} answered out of id order`);
    prev = id;
  }
}

/** Whether two byte strings are the same bytes. */
const sameBytes = (a, b) => a.length === b.length && a.every((x, i) => x === b[i]);

/** The effect key of a schedule's occurrence at `at`, as the component writes it. */
const occurrenceEffect = (id, at) => `schedule/${id}/${at}`;

/** Whether `a` sorts before `b` byte for byte in UTF-8, the order the component keeps ids in. */
const utf8Before = (a, b) => Buffer.compare(Buffer.from(a, 'utf8'), Buffer.from(b, 'utf8')) < 0;

const malformed = (what) => new SandboxError('malformed', `the guest answered something the contract rules out: ${what}`);

/** A single-schedule answer must be the schedule that was asked about. */
function sameSchedule(s, id) {
  if (s.spec.id !== id) throw malformed(`asked for schedule ${id}, answered schedule ${s.spec.id}`);
  return schedule(s);
}

/** A single-task answer must be the task that was asked about. */
function sameTask(t, id) {
  if (t.id !== id) throw malformed(`asked for task ${id}, answered task ${t.id}`);
  return task(t);
}

/** A claim's answer must be the task, now held by the claimant. */
function held(t, actor) {
  if (t.state !== 'claimed' || t.assignee !== actor) {
    throw malformed(`answered task ${t.id} as ${t.state} by ${t.assignee ?? 'nobody'}, not claimed by ${actor}`);
  }
  return t;
}

const heldTask = (t, id, actor) => held(sameTask(t, id), actor);

/** The states a task waits in: a reminder may fire on any of them. */
const PENDING = new Set(['open', 'claimed', 'escalated']);

function atMost(items, limit, verb) {
  if (items.length > limit) throw malformed(`${verb} answered ${items.length} entries for a limit of ${limit}`);
  return items;
}

/** Tasks a verb moved must be distinct: one task moved twice is no answer the rules can give. */
function distinct(tasks, verb) {
  const seen = new Set();
  for (const t of tasks) {
    if (seen.has(t.id)) throw malformed(`${verb} answered task ${t.id} twice`);
    seen.add(t.id);
  }
  return tasks;
}

/** A batch of claims: at most `count`, distinct, each held by `actor`. */
function claimedBatch(ts, count, actor, verb) {
  if (ts.length > count) throw malformed(`${verb} claimed ${ts.length} tasks, more than the ${count} asked for`);
  return distinct(ts.map((t) => held(t, actor)), verb).map(task);
}

/** A task a worker finished: `{ id, settlement, decision? }` (the decision as `decide` takes it). */
function witFinished(f, field) {
  record(f, field);
  known(f, ['id', 'settlement', 'decision'], field);
  let decision;
  try {
    decision = witDecision(f.decision);
  } catch (e) {
    if (e instanceof InvalidArgument) throw new InvalidArgument(`${field}.${e.message}`);
    throw e;
  }
  return { id: str(f.id, `${field}.id`), settlement: settlement(f.settlement, `${field}.settlement`), decision };
}

/** One `settle-answer`, one key: `{ settled: true }`, `{ already }`, `{ notHeld }`, `{ notFound: true }`, `{ refused }`. */
function settleAnswer(v) {
  switch (v.tag) {
    case 'settled':
      return { settled: true };
    case 'already':
      return { already: v.val };
    case 'not-held':
      return { notHeld: opt(v.val) };
    case 'not-found':
      return { notFound: true };
    case 'refused':
      return { refused: v.val };
    default:
      throw malformed(`settle-and-claim answered ${v.tag}, which settle-answer does not have`);
  }
}

/** `{ now, leaseMs }` or null/undefined for a claim held until release. */
const witLease = (l) =>
  absent(l) ? undefined : { now: s64(record(l, 'lease').now, 'lease.now'), leaseMs: u32(l.leaseMs, 'lease.leaseMs') };

/** A queue query; `limit` may default only where the verb says so. */
function witQuery(q, field, defaultLimit) {
  record(q, field);
  return {
    roles: list(q.roles, `${field}.roles`),
    actor: optStr(q.actor, `${field}.actor`),
    limit: u32(q.limit ?? defaultLimit, `${field}.limit`),
    after: optStr(q.after, `${field}.after`),
  };
}

const page = (p, limit, verb) => ({ tasks: atMost(p.tasks, limit, verb).map(task), next: opt(p.next) });

/** One change of a task, as its history keeps it. */
const historyEntry = (e) => ({
  seq: int(e.seq),
  at: int(e.at),
  verb: e.verb,
  actor: opt(e.actor),
  before: opt(e.before),
  after: e.after,
  assignee: opt(e.assignee),
  leaseUntil: opt(e.leaseUntil, int),
  candidateRoles: e.candidateRoles,
  excludedActors: e.excludedActors,
  revision: int(e.revision),
  changes: e.changes.map((c) => ({ field: c.field, before: c.before, after: c.after })),
  decision: opt(e.decision, decisionRecord),
  note: opt(e.note),
  job: opt(e.job),
  step: opt(e.step, taskStep),
});

/** What a feed entry records: `{ task: { id, entry } }` or `{ timer: { … } }`. */
function change(c) {
  if (c.tag === 'task') {
    const t = c.val;
    return { task: { id: t.id, entry: historyEntry(t.entry), run: opt(t.run), kind: opt(t.kind) } };
  }
  const t = c.val;
  return {
    timer: {
      run: t.run,
      effect: t.effect,
      at: int(t.at),
      verb: t.verb,
      what: t.what,
      fireAt: int(t.fireAt),
      leaseUntil: opt(t.leaseUntil, int),
    },
  };
}

const W = 'write';
const R = 'read';

/**
 * One tenant of an engine. Every method is one call in one transaction; its
 * arguments are checked before the guest runs and its answer before the
 * call commits.
 */
export class Tenant {
  #engine;
  #guard;

  constructor(engine, name, guard = undefined) {
    this.#engine = engine;
    this.name = name;
    this.#guard = guard;
  }

  /**
   * This tenant, for calls guarded by `{ revision?, job? }`: every verb that
   * changes one task (claim, release, takeOver, renew, settle and decide,
   * escalate, update, assign, unassign, delegate, note) goes ahead only on
   * the task at `revision`, if given (else a ClaimRefusal `stale` whose
   * `current` is the task's revision, nothing written), and records `job`
   * in the change's history entry. Meant for one call: the revision moves
   * with every change. Other verbs ignore it.
   */
  guarded(guard) {
    return new Tenant(this.#engine, this.name, witGuard(guard));
  }

  #call(verb, mode, [iface, fn, args], check, claimVerb = false) {
    return this.#engine.call(this.name, verb, mode, claimVerb, iface, fn, args, check);
  }

  /** Creates a task; first open wins, and the stored task is answered. */
  open(t) {
    const w = witTask(t);
    return this.#call('open', W, ['tasks', 'open', [w]], (a) => sameTask(a, w.id));
  }

  /** The task, or null. */
  get(id) {
    str(id, 'id');
    return this.#call('get', R, ['tasks', 'get', [id]], (a) => opt(a, (t) => sameTask(t, id)));
  }

  /** Reserves the task for `actor`; with `lease` (`{ now, leaseMs }`) it is held until `now + leaseMs`. */
  claim(id, actor, roles = [], lease = null) {
    const args = [str(id, 'id'), str(actor, 'actor'), list(roles, 'roles'), witLease(lease), this.#guard];
    return this.#call('claim', W, ['tasks', 'claim', args], (a) => heldTask(a, id, actor), true);
  }

  /** The holder of a leased claim extends it to `now + leaseMs`. */
  renew(id, actor, now, leaseMs) {
    const args = [str(id, 'id'), str(actor, 'actor'), s64(now, 'now'), u32(leaseMs, 'leaseMs'), this.#guard];
    return this.#call('renew', W, ['tasks', 'renew', args], (a) => heldTask(a, id, actor), true);
  }

  /** Returns to the queue every task whose lease ended at or before `now`, up to `limit`. */
  reclaimLapsed(now, limit) {
    const n = u32(limit, 'limit');
    return this.#call('reclaim-lapsed', W, ['tasks', 'reclaimLapsed', [s64(now, 'now'), n]], (ts) => {
      for (const t of distinct(atMost(ts, n, 'reclaim-lapsed'), 'reclaim-lapsed')) {
        if ((t.state !== 'open' && t.state !== 'escalated') || !absent(t.assignee)) {
          throw malformed(`reclaim-lapsed answered task ${t.id} as ${t.state} by ${t.assignee}, not back in the queue`);
        }
      }
      return ts.map(task);
    });
  }

  /**
   * Acts on up to `limit` tasks overdue at `now`, each by its `onExpiry`
   * (escalated, or settled `expired`), then, within the same limit, fires
   * the due reminder or chain step of pending tasks, one per task per call,
   * each recorded in the history with its `step`. Answers the tasks as they
   * now stand: escalated (unheld), expired, or reminded (pending, its
   * `stepsDone` counting a reminder).
   */
  expireOverdue(now, limit) {
    const n = u32(limit, 'limit');
    return this.#call('expire-overdue', W, ['tasks', 'expireOverdue', [s64(now, 'now'), n]], (ts) => {
      for (const t of distinct(atMost(ts, n, 'expire-overdue'), 'expire-overdue')) {
        // As the Rust host checks it: a reminder leaves a task as it was but
        // for its step count; anything else is escalated (unheld) or expired.
        const reminded = PENDING.has(t.state) && t.stepsDone >= 1 && t.stepsDone <= t.remindBefore.length;
        const swept = t.state === 'expired' || (t.state === 'escalated' && absent(t.assignee));
        if (!(swept || reminded)) {
          throw malformed(
            `expire-overdue answered task ${t.id} as ${t.state} by ${t.assignee}, neither escalated, expired nor reminded`,
          );
        }
      }
      return ts.map(task);
    });
  }

  /** Claims the head of the caller's queue (`actor` required); null when it is empty. */
  claimNext(query, lease = null) {
    const q = witQuery(query, 'query', 1);
    const l = witLease(lease);
    // Only an actor can hold a task; without one the guest must answer invalid.
    return this.#call('claim-next', W, ['tasks', 'claimNext', [q, l]], (a) => opt(a, (t) => task(held(t, q.actor ?? ''))));
  }

  /**
   * Claims up to `count` (1–100) heads of the caller's queue (`actor`
   * required) in one call, in queue order, each under `lease` if given;
   * fewer, or none, when the queue runs short.
   */
  claimBatch(query, lease, count) {
    const q = witQuery(query, 'query', 1);
    const l = witLease(lease);
    const n = u32(count, 'count');
    return this.#call('claim-batch', W, ['tasks', 'claimBatch', [q, l, n]], (ts) => claimedBatch(ts, n, q.actor ?? '', 'claim-batch'));
  }

  /**
   * Settles each of `done` (`[{ id, settlement, decision? }]`, at most 100)
   * that `query.actor` holds, each answered on its own in the order given
   * (`{ settled: true }`, `{ already: state }`, `{ notHeld: holder | null }`,
   * `{ notFound: true }` or `{ refused: why }`), then claims up to `count`
   * (0–100) more as `claimBatch` does: a steady worker's one call per batch.
   * Answers `{ settled, claimed }`.
   */
  settleAndClaim(done, query, lease, count) {
    if (!Array.isArray(done)) throw new InvalidArgument(`done must be an array of finished tasks, got ${shown(done)}`);
    const d = done.map((f, i) => witFinished(f, `done[${i}]`));
    const q = witQuery(query, 'query', 1);
    const l = witLease(lease);
    const n = u32(count, 'count');
    return this.#call('settle-and-claim', W, ['tasks', 'settleAndClaim', [d, q, l, n]], (a) => {
      if (a.settled.length !== d.length) {
        throw malformed(`settle-and-claim answered ${a.settled.length} of ${d.length} finished tasks`);
      }
      const settled = a.settled.map(settleAnswer);
      const claimed = claimedBatch(a.claimed, n, q.actor ?? '', 'settle-and-claim');
      for (const t of claimed) {
        if (d.some((f, i) => f.id === t.id && settled[i].settled === true)) {
          throw malformed(`settle-and-claim settled task ${t.id} and claimed it again`);
        }
      }
      return { settled, claimed };
    });
  }

  /** Tasks claimed under a lease. One counter read. */
  leasedCount() {
    return this.#call('leased-count', R, ['tasks', 'leasedCount', []], int);
  }

  /** The earliest lease end among leased claims, or null. */
  nextLeaseEnd() {
    return this.#call('next-lease-end', R, ['tasks', 'nextLeaseEnd', []], (a) => opt(a, int));
  }

  /**
   * The earliest instant at which `expireOverdue` has something to do: a
   * due time owed its expiry, or a reminder or chain step to fire; null
   * when nothing waits. What a sweeper sleeps until.
   */
  nextWake() {
    return this.#call('next-wake', R, ['tasks', 'nextWake', []], (a) => opt(a, int));
  }

  release(id, actor) {
    const args = [str(id, 'id'), str(actor, 'actor'), this.#guard];
    return this.#call('release', W, ['tasks', 'release', args], () => undefined, true);
  }

  takeOver(id, from, actor, roles = [], lease = null) {
    const args = [str(id, 'id'), str(from, 'from'), str(actor, 'actor'), list(roles, 'roles'), witLease(lease), this.#guard];
    return this.#call('take-over', W, ['tasks', 'takeOver', args], (a) => heldTask(a, id, actor), true);
  }

  /**
   * Compare-and-set from pending: true when this call settled the task. With
   * `holder`, the task must be claimed by exactly that actor (else not-held).
   */
  settle(id, how, holder = null) {
    return this.decide(id, how, holder, null);
  }

  /**
   * `settle` with a decision `{ outcome, reason?, output? }` (an output
   * object is stringified), kept with the task with who decided (`holder`).
   * It is checked against the outcomes the task, or else its kind,
   * declares: an outcome not allowed, a missing reason where needed, or an
   * output the outcome's schema refuses is a StoreError `invalid` naming
   * the field (the output's first violation by its path), nothing written.
   * A settled task answers false, its decision unchecked.
   */
  decide(id, how, holder = null, decision = null) {
    const args = [str(id, 'id'), settlement(how, 'settlement'), optStr(holder, 'holder'), witDecision(decision), this.#guard];
    return this.#call('settle', W, ['tasks', 'settle', args], (a) => a, true);
  }

  withdrawRun(run, awaited) {
    const args = [str(run, 'run'), list(awaited, 'awaited')];
    return this.#call('withdraw-run', W, ['tasks', 'withdrawRun', args], (n) => {
      if (n > awaited.length) throw malformed(`withdraw-run moved ${n} of ${awaited.length} awaited tasks`);
      return n;
    });
  }

  escalate(id) {
    return this.#call('escalate', W, ['tasks', 'escalate', [str(id, 'id'), this.#guard]], (a) => sameTask(a, id), true);
  }

  /** `{ roles, actor?, limit, after? }` → `{ tasks, next }`. */
  queue(query) {
    const q = witQuery(query, 'query');
    return this.#call('queue', R, ['tasks', 'queue', [q]], (p) => page(p, q.limit, 'queue'));
  }

  forCase(caseId, limit, after = null) {
    const n = u32(limit, 'limit');
    return this.#call('for-case', R, ['tasks', 'forCase', [str(caseId, 'case'), n, optStr(after, 'after')]], (p) =>
      page(p, n, 'for-case'),
    );
  }

  /** Pending tasks (claimed ones count). One counter read. */
  openCount() {
    return this.#call('open-count', R, ['tasks', 'openCount', []], int);
  }

  overdue(now, limit) {
    const n = u32(limit, 'limit');
    return this.#call('overdue', R, ['tasks', 'overdue', [s64(now, 'now'), n]], (ts) => atMost(ts, n, 'overdue').map(task));
  }

  /**
   * One page of the tasks `actor` holds, soonest lease end first, claims
   * without a lease last, then by id: `{ tasks, next }`; pass `next` back
   * as `after`.
   */
  held(actor, limit, after = null) {
    const n = u32(limit, 'limit');
    str(actor, 'actor');
    return this.#call('held', R, ['tasks', 'held', [actor, n, optStr(after, 'after')]], (p) => {
      for (const t of p.tasks) held(t, actor);
      return page(p, n, 'held');
    });
  }

  /**
   * Changes fields of a pending task, each by `open`'s rules: `changes` has
   * any of `dueAt` (null clears it), `priority`, `candidateRoles`,
   * `escalateTo`, `excludedActors`, `onExpiry`, `outcomes`, `remindBefore`,
   * `escalation`; `by` is recorded as who changed it (null: the service). A
   * change that excludes the holder ends the claim; one of the due time,
   * the reminders or the chain re-arms the steps. Answers the task as it
   * now stands.
   */
  update(id, by, changes) {
    const args = [str(id, 'id'), optStr(by, 'by'), witChanges(changes), this.#guard];
    return this.#call('update', W, ['tasks', 'update', args], (a) => sameTask(a, id), true);
  }

  /**
   * A manager claims the task for `to`, from whoever holds it, by the claim
   * ladder for `to` (its roles rung skipped only with `overrideRoles`, which
   * the history then records). Answers the task, held by `to`.
   */
  assign(id, to, roles = [], lease = null, overrideRoles = false, by = null) {
    if (typeof overrideRoles !== 'boolean') throw new InvalidArgument(`overrideRoles must be a boolean, got ${shown(overrideRoles)}`);
    const args = [str(id, 'id'), str(to, 'to'), list(roles, 'roles'), witLease(lease), overrideRoles, optStr(by, 'by'), this.#guard];
    return this.#call('assign', W, ['tasks', 'assign', args], (a) => heldTask(a, id, to), true);
  }

  /** Back to the queue from whoever holds it; a pending task nobody holds is answered as it stands. */
  unassign(id, by = null) {
    const args = [str(id, 'id'), optStr(by, 'by'), this.#guard];
    return this.#call('unassign', W, ['tasks', 'unassign', args], (a) => {
      const t = sameTask(a, id);
      if (t.state === 'claimed') throw malformed(`unassign answered task ${id} still claimed by ${t.assignee}`);
      return t;
    }, true);
  }

  /** The holder `from` hands the task to `to`, by the claim ladder for `to`; anyone else is refused `not-held`. */
  delegate(id, from, to, roles = [], lease = null) {
    const args = [str(id, 'id'), str(from, 'from'), str(to, 'to'), list(roles, 'roles'), witLease(lease), this.#guard];
    return this.#call('delegate', W, ['tasks', 'delegate', args], (a) => heldTask(a, id, to), true);
  }

  /** An append-only remark by `actor` (1 byte to 4 KiB), kept in the task's history. Answers the task. */
  note(id, actor, text) {
    const args = [str(id, 'id'), str(actor, 'actor'), str(text, 'text'), this.#guard];
    return this.#call('note', W, ['tasks', 'note', args], (a) => sameTask(a, id), true);
  }

  /**
   * Creates or replaces a kind's definition `{ kind, outcomes }`; with
   * `expected`, only if the kind's revision is that (0: not defined), else
   * a StoreError `stale` whose `current` is the revision. Answers the
   * definition with its new revision.
   */
  defineKind(definition, expected = null) {
    const d = witKind(definition);
    const args = [d, optU64(expected, 'expected')];
    return this.#call('define-kind', W, ['kinds', 'defineKind', args], (k) => {
      if (k.kind !== d.kind) throw malformed(`asked to define kind ${d.kind}, answered kind ${k.kind}`);
      return kindDefinition(k);
    });
  }

  /** A kind's definition, or null. */
  getKind(kind) {
    str(kind, 'kind');
    return this.#call('get-kind', R, ['kinds', 'getKind', [kind]], (k) => opt(k, kindDefinition));
  }

  /** Defined kinds in name order, after `after`, at most `limit`. */
  listKinds(limit, after = null) {
    const n = u32(limit, 'limit');
    return this.#call('list-kinds', R, ['kinds', 'listKinds', [n, optStr(after, 'after')]], (ks) =>
      atMost(ks, n, 'list-kinds').map(kindDefinition),
    );
  }

  /** Removes a kind's definition; true if there was one. */
  removeKind(kind) {
    return this.#call('remove-kind', W, ['kinds', 'removeKind', [str(kind, 'kind')]], (a) => a);
  }

  /** 'armed' | 'already-armed' | 'run-sealed'. */
  arm(t) {
    return this.#call('arm', W, ['timers', 'arm', [witTimer(t)]], (a) => a);
  }

  /** Leases up to `limit` due timers until `now + leaseMs`. */
  claimDue(now, limit, leaseMs) {
    const n = u32(limit, 'limit');
    const args = [s64(now, 'now'), n, u32(leaseMs, 'leaseMs')];
    return this.#call('claim-due', W, ['timers', 'claimDue', args], (ts) => {
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
    return this.#call('disarm', W, ['timers', 'disarm', [str(run, 'run'), str(effect, 'effect')]], (a) => a);
  }

  disarmRun(run) {
    return this.#call('disarm-run', W, ['timers', 'disarmRun', [str(run, 'run')]], (a) => a);
  }

  /** Armed timers. One counter read. */
  pendingCount() {
    return this.#call('pending-count', R, ['timers', 'pendingCount', []], int);
  }

  /** When the next timer becomes claimable, or null. */
  nextDue() {
    return this.#call('next-due', R, ['timers', 'nextDue', []], (a) => opt(a, int));
  }

  /**
   * Moves the armed timer `(run, effect)` to `fireAt`, keeping its identity
   * (step, phase, case); it then waits unclaimed. Answers `{ moved: { timer,
   * leaseUntil } }`, or why nothing moved: `{ notFound: true }`,
   * `{ held: leaseEnd }` (a sweeper holds it; `{ takeBack: true }` moves it
   * anyway and ends that lease) or `{ runSealed: true }`. Bad input is a
   * StoreError, as ever.
   */
  reschedule(run, effect, fireAt, options = {}) {
    known(record(options, 'options'), ['takeBack'], 'options');
    const takeBack = options.takeBack ?? false;
    if (typeof takeBack !== 'boolean') throw new InvalidArgument(`options.takeBack must be a boolean, got ${shown(takeBack)}`);
    const args = [str(run, 'run'), str(effect, 'effect'), s64(fireAt, 'fireAt'), takeBack];
    return this.#call('reschedule', W, ['timers', 'reschedule', args], (a, refused) => {
      if (refused) return timerRefusal(refused);
      if (a.timer.run !== run || a.timer.effect !== effect) {
        throw malformed(`asked to move timer ${run}/${effect}, answered ${a.timer.run}/${a.timer.effect}`);
      }
      return { moved: timerInfo(a) };
    }, 'timer');
  }

  /** One page of the timers armed for `run`, by effect: `{ timers, next }`; pass `next` back as `after`. */
  timersOf(run, limit, after = null) {
    const n = u32(limit, 'limit');
    str(run, 'run');
    return this.#call('timers-of', R, ['timers', 'timersOf', [run, n, optStr(after, 'after')]], (p) => {
      const other = p.timers.find((i) => i.timer.run !== run);
      if (other) throw malformed(`timers-of ${run} answered a timer of run ${other.timer.run}`);
      return timerPage(p, n, 'timers-of');
    });
  }

  /**
   * One page of the timers that become claimable in `[from, to)`, in the
   * order `claimDue` takes them (a held one at its lease end): `{ timers, next }`.
   */
  dueBetween(from, to, limit, after = null) {
    const n = u32(limit, 'limit');
    const args = [s64(from, 'from'), s64(to, 'to'), n, optStr(after, 'after')];
    return this.#call('due-between', R, ['timers', 'dueBetween', args], (p) => timerPage(p, n, 'due-between'));
  }

  /**
   * Adds a schedule (`{ id, run, recurrence, zone, … }`, see index.d.ts for
   * the defaults) and arms its first occurrence at or after `now`. Answers
   * the schedule as stored (its zone under its canonical name). A bad spec,
   * an id in use or a sealed run is a StoreError `invalid` naming the field;
   * nothing is written then.
   */
  addSchedule(spec, now) {
    const w = witScheduleSpec(spec);
    const args = [w, s64(now, 'now')];
    return this.#call('add-schedule', W, ['schedules', 'addSchedule', args], (a) => sameSchedule(a, w.id));
  }

  /** Removes a schedule with its armed and waiting occurrences (one a sweeper holds stays with it); true if there was one. */
  removeSchedule(id) {
    return this.#call('remove-schedule', W, ['schedules', 'removeSchedule', [str(id, 'id')]], (a) => a);
  }

  /** Pauses a schedule with a note (1–1024 characters): nothing fires until it is resumed. Answers the schedule. */
  pauseSchedule(id, note) {
    const args = [str(id, 'id'), str(note, 'note')];
    return this.#call('pause-schedule', W, ['schedules', 'pauseSchedule', args], (a) => {
      const s = sameSchedule(a, id);
      if (s.paused !== note || s.nextAt !== null) throw malformed(`pause-schedule answered schedule ${id} not paused with its note`);
      return s;
    });
  }

  /** Resumes a paused schedule from `now`: what fell in the pause does not fire. Answers the schedule. */
  resumeSchedule(id, now) {
    const args = [str(id, 'id'), s64(now, 'now')];
    return this.#call('resume-schedule', W, ['schedules', 'resumeSchedule', args], (a) => {
      const s = sameSchedule(a, id);
      if (s.paused !== null) throw malformed(`resume-schedule answered schedule ${id} still paused`);
      return s;
    });
  }

  /** Arms an extra occurrence at `now` beside the schedule's own (paused or not), and answers its timer. */
  triggerSchedule(id, now) {
    const at = s64(now, 'now');
    return this.#call('trigger-schedule', W, ['schedules', 'triggerSchedule', [str(id, 'id'), at]], (t) => {
      if (t.effect !== occurrenceEffect(id, at)) {
        throw malformed(`trigger-schedule of ${id} at ${at} answered timer ${t.run}/${t.effect}`);
      }
      return timer(t);
    });
  }

  /** The schedule's next `n` (1–1000) occurrences after `after`, before jitter, in order. */
  nextOccurrences(id, after, n) {
    const from = s64(after, 'after');
    const count = u32(n, 'n');
    const args = [str(id, 'id'), from, count];
    return this.#call('next-occurrences', R, ['schedules', 'nextOccurrences', args], (a) => {
      const list = Array.from(atMost(a, count, 'next-occurrences'));
      if (list.some((t, i) => t <= (i === 0 ? from : list[i - 1]))) {
        throw malformed(`next-occurrences of ${id} answered instants out of order`);
      }
      return list.map(int);
    });
  }

  /** One schedule, or null. */
  getSchedule(id) {
    str(id, 'id');
    return this.#call('get-schedule', R, ['schedules', 'getSchedule', [id]], (a) => opt(a, (s) => sameSchedule(s, id)));
  }

  /** One page of schedules by id, at most `limit` (1–1000) after the cursor `after`: `{ schedules, next }`. */
  listSchedules(limit, after = null) {
    const n = u32(limit, 'limit');
    const cursor = optStr(after, 'after');
    return this.#call('list-schedules', R, ['schedules', 'listSchedules', [n, cursor]], (p) => {
      const ids = atMost(p.schedules, n, 'list-schedules').map((s) => s.spec.id);
      if (ids.some((id, i) => (i === 0 ? cursor !== undefined && !utf8Before(cursor, id) : !utf8Before(ids[i - 1], id)))) {
        throw malformed('list-schedules answered out of order');
      }
      return { schedules: p.schedules.map(schedule), next: opt(p.next) };
    });
  }

  /** The release of the IANA time-zone database the component carries (`2025b`, say). */
  tzVersion() {
    return this.#call('tz-version', R, ['schedules', 'tzVersion', []], (v) => {
      // As the Rust host checks it: five bytes, this century's.
      if (Buffer.byteLength(v, 'utf8') !== 5 || !v.startsWith('20')) throw malformed(`tz-version answered ${JSON.stringify(v)}`);
      return v;
    });
  }

  /**
   * Adds a webhook subscription: active, signing with `key` (a Uint8Array
   * of 24–64 bytes), its position `from` (null: the feed's head now, so it
   * is sent the changes from then on; `'f'`: the feed's start). `filter` is
   * `{ tasks, timers, verbs, kinds, runs, settlingOnly }` (see witFilter).
   * An id in use, a bad URL or filter, a key of the wrong length, a
   * position past the head or trimmed, and more than 100 subscriptions are
   * a StoreError `invalid` naming the field. The component keeps it and
   * sends nothing, nor does this package: sending is the Rust crate
   * leasehold-webhooks', or a loop of the embedder's own over `feed`.
   */
  addSubscription(id, url, filter, key, from, now) {
    const args = [str(id, 'id'), str(url, 'url'), witFilter(filter, 'filter'), bytes(key, 'key'), optStr(from, 'from'), s64(now, 'now')];
    return this.#call('add-subscription', W, ['subscriptions', 'addSubscription', args], (s) =>
      sameSubscription(s, id, 'add-subscription'),
    );
  }

  /** One subscription, or null. */
  getSubscription(id) {
    str(id, 'id');
    return this.#call('get-subscription', R, ['subscriptions', 'getSubscription', [id]], (a) =>
      opt(a, (s) => sameSubscription(s, id, 'get-subscription')),
    );
  }

  /** One page of subscriptions by id, at most `limit` (1–1000) after the cursor `after`: `{ subscriptions, next }`. */
  listSubscriptions(limit, after = null) {
    const n = u32(limit, 'limit');
    const cursor = optStr(after, 'after');
    return this.#call('list-subscriptions', R, ['subscriptions', 'listSubscriptions', [n, cursor]], (p) => {
      const ids = atMost(p.subscriptions, n, 'list-subscriptions').map((s) => s.id);
      if (ids.some((id, i) => (i === 0 ? cursor !== undefined && !utf8Before(cursor, id) : !utf8Before(ids[i - 1], id)))) {
        throw malformed('list-subscriptions answered out of order');
      }
      return { subscriptions: p.subscriptions.map(subscription), next: opt(p.next) };
    });
  }

  /**
   * Changes the URL, the filter or both (null: as it is), if the
   * subscription is at revision `expected` (when given; else a StoreError
   * `stale` whose `current` is its revision). The revision goes up; a
   * change to what it is writes nothing.
   */
  changeSubscription(id, url = null, filter = null, expected = null) {
    const args = [
      str(id, 'id'), optStr(url, 'url'), absent(filter) ? undefined : witFilter(filter, 'filter'), optU64(expected, 'expected'),
    ];
    return this.#call('change-subscription', W, ['subscriptions', 'changeSubscription', args], (s) =>
      sameSubscription(s, id, 'change-subscription'),
    );
  }

  /**
   * Sets the state (`'active'`, `'paused'`, `'failing'` or `'gone'`) and its
   * note (null clears it), if at revision `expected` (when given). Setting
   * `'active'` keeps the position: deliveries go on from where they stopped.
   */
  setSubscriptionState(id, state, note = null, expected = null) {
    const args = [str(id, 'id'), subState(state, 'state'), optStr(note, 'note'), optU64(expected, 'expected')];
    return this.#call('set-subscription-state', W, ['subscriptions', 'setSubscriptionState', args], (a) => {
      const s = sameSubscription(a, id, 'set-subscription-state');
      if (s.state !== state) throw malformed(`set-subscription-state answered ${id} ${s.state}, not ${state}`);
      return s;
    });
  }

  /**
   * Makes `key` (a Uint8Array) the current signing key; every earlier key
   * still signing signs until `oldUntil` (at most 7 days after `now`), and
   * keys whose time ran out by `now` are dropped. The revision goes up.
   */
  rotateSubscriptionKey(id, key, oldUntil, now) {
    const args = [str(id, 'id'), bytes(key, 'key'), s64(oldUntil, 'oldUntil'), s64(now, 'now')];
    return this.#call('rotate-subscription-key', W, ['subscriptions', 'rotateSubscriptionKey', args], (a) => {
      const s = sameSubscription(a, id, 'rotate-subscription-key');
      const current = s.keys.at(-1);
      if (!current || !sameBytes(current.key, key)) {
        throw malformed(`rotate-subscription-key answered ${id} without the new key current`);
      }
      return s;
    });
  }

  /** Removes a subscription; true if there was one. A worker's next `advanceSubscription` of it is `not-found`. */
  removeSubscription(id) {
    return this.#call('remove-subscription', W, ['subscriptions', 'removeSubscription', [str(id, 'id')]], (a) => a);
  }

  /**
   * A delivery worker moves the position on to `position` (per slot the
   * later of the two, never past the feed's head), if the subscription is
   * at `revision` (else a StoreError `stale` with the current one: stop).
   * The revision does not change.
   */
  advanceSubscription(id, revision, position) {
    const rev = u64(revision, 'revision');
    const args = [str(id, 'id'), rev, str(position, 'position')];
    return this.#call('advance-subscription', W, ['subscriptions', 'advanceSubscription', args], (a) => {
      const s = sameSubscription(a, id, 'advance-subscription');
      if (a.revision !== rev) {
        throw malformed(`advance-subscription of ${id} at revision ${rev} answered revision ${a.revision}`);
      }
      return s;
    });
  }

  /**
   * Replays from `position` (back or forward; null or `'f'`: the feed's
   * start): active again, its note cleared, its revision one more. A
   * position whose entries were trimmed is a StoreError `invalid`.
   */
  rewindSubscription(id, position = null) {
    const at = optStr(position, 'position');
    return this.#call('rewind-subscription', W, ['subscriptions', 'rewindSubscription', [str(id, 'id'), at]], (a) => {
      const s = sameSubscription(a, id, 'rewind-subscription');
      // The feed's start is spelt `f` or not at all.
      const asked = at === undefined || at === 'f' ? null : at;
      if (s.state !== 'active' || s.position !== asked) {
        throw malformed(`rewind-subscription answered ${id} not active at the position asked`);
      }
      return s;
    });
  }

  /**
   * Takes or renews the delivery lease for `holder` until `now + leaseMs`
   * (1 ms to an hour): true when `holder` holds it now, false when another
   * does or there is no such subscription.
   */
  leaseSubscription(id, holder, now, leaseMs) {
    const args = [str(id, 'id'), str(holder, 'holder'), s64(now, 'now'), u32(leaseMs, 'leaseMs')];
    return this.#call('lease-subscription', W, ['subscriptions', 'leaseSubscription', args], (a) => a);
  }

  /** Gives the delivery lease up, if `holder` holds it. */
  releaseSubscription(id, holder) {
    const args = [str(id, 'id'), str(holder, 'holder')];
    return this.#call('release-subscription', W, ['subscriptions', 'releaseSubscription', args], () => undefined);
  }

  /** Keeps `attempts` (at most 20 a call; `[{ messageId, at, attempt, outcome, latencyMs }]`) among the last 20 recorded. */
  recordSubscriptionAttempts(id, attempts) {
    const args = [str(id, 'id'), witAttempts(attempts, 'attempts')];
    return this.#call('record-subscription-attempts', W, ['subscriptions', 'recordSubscriptionAttempts', args], () => undefined);
  }

  /**
   * One page of the tasks that match `query` (`{ filter, sort, limit, after,
   * viewer }`; see index.d.ts), in the sort's order: `{ tasks, next,
   * budgetSpent, index }`; pass `next` back as `after`, with the same
   * filter, sort and viewer (a cursor of another search is a StoreError
   * `invalid` naming `after`). A viewer `{ actor, roles }` sees only what it
   * holds or may take.
   */
  search(query) {
    record(query, 'query');
    known(query, ['filter', 'sort', 'limit', 'after', 'viewer'], 'query');
    const q = {
      filter: witTaskFilter(query.filter, 'query.filter'),
      sort: witSort(query.sort, 'query.sort'),
      limit: u32(query.limit, 'query.limit'),
      after: optStr(query.after, 'query.after'),
      viewer: witViewer(query.viewer, 'query.viewer'),
    };
    return this.#call('search', R, ['search', 'search', [q]], (p) => ({
      tasks: distinct(atMost(p.tasks, q.limit, 'search'), 'search').map(task),
      next: opt(p.next),
      budgetSpent: p.budgetSpent,
      index: p.index,
    }));
  }

  /**
   * How many tasks match `filter` (as `viewer` sees them, when given):
   * `{ count, exact, next, index }`. Not `exact` when the scan budget ran
   * out first: add the counts of the calls that go on from `next` (as
   * `after`). A filter of states and kinds alone, with no viewer, is
   * answered from counters.
   */
  count(filter, viewer = null, after = null) {
    const args = [witTaskFilter(filter, 'filter'), witViewer(viewer, 'viewer'), optStr(after, 'after')];
    return this.#call('count', R, ['search', 'count', args], (a) => {
      // The count is whole exactly when there is nowhere to go on from.
      if (a.exact !== absent(a.next)) throw malformed(`count answered exact ${a.exact} with next ${shown(a.next ?? null)}`);
      return { count: int(a.count), exact: a.exact, next: opt(a.next), index: a.index };
    });
  }

  /**
   * Gives the next `limit` (1–10000) tasks of a keyspace laid out before
   * search their search entries: `{ built, indexed }`; call it again until
   * `built`. Until then every search and count scans the tasks themselves.
   */
  buildSearchIndex(limit) {
    const n = u32(limit, 'limit');
    return this.#call('build-search-index', W, ['search', 'buildSearchIndex', [n]], (a) => {
      if (a.indexed > n) throw malformed(`build-search-index indexed ${a.indexed} tasks for a limit of ${n}`);
      return { built: a.built, indexed: a.indexed };
    });
  }

  /**
   * Makes a saved view `{ name, filter, sort, by }` (`expected` null: a
   * StoreError `invalid` naming `name` when one of that name exists) or
   * changes it at revision `expected` (`not-found` when there is none,
   * `stale` with the current revision at another). Answers the view as
   * kept, its revision one more.
   */
  putView(view, expected = null) {
    const v = witView(view);
    const exp = optU64(expected, 'expected');
    return this.#call('put-view', W, ['search', 'putView', [v, exp]], (a) => {
      const kept = sameView(a, v.name, 'put-view');
      // 1 when made, one more with each change: anything else is no answer the rules give.
      const want = (exp ?? 0n) + 1n;
      if (a.revision !== want) throw malformed(`put-view of ${v.name} at ${shown(exp ?? null)} answered revision ${a.revision}`);
      return kept;
    });
  }

  /** A saved view, or null. */
  getView(name) {
    str(name, 'name');
    return this.#call('get-view', R, ['search', 'getView', [name]], (a) => opt(a, (v) => sameView(v, name, 'get-view')));
  }

  /** Saved views in name order (bytewise), after `after`, at most `limit` (1–1000). */
  listViews(limit, after = null) {
    const n = u32(limit, 'limit');
    const cursor = optStr(after, 'after');
    return this.#call('list-views', R, ['search', 'listViews', [n, cursor]], (vs) => {
      const names = atMost(vs, n, 'list-views').map((v) => v.name);
      if (names.some((x, i) => (i === 0 ? cursor !== undefined && !utf8Before(cursor, x) : !utf8Before(names[i - 1], x)))) {
        throw malformed('list-views answered out of order');
      }
      return vs.map(savedView);
    });
  }

  /** Removes a saved view (at revision `expected`, when given: else a StoreError `stale`); true if there was one. */
  deleteView(name, expected = null) {
    const args = [str(name, 'name'), optU64(expected, 'expected')];
    return this.#call('delete-view', W, ['search', 'deleteView', args], (a) => a);
  }

  /**
   * Starts job `id`: `action` (`'release'`, `'escalate'`, `'withdraw'`,
   * `{ assign: { to, roles, overrideRoles } }`, `{ update: changes }`) over
   * the tasks matching `filter` (as `search` takes it) created at or before
   * `now`. It is `counting`; `stepJob` counts and runs it a step at a time
   * (`runJob` to its end). A bad id, an id in use, a bad filter or action:
   * a StoreError `invalid` naming the field. A filter that matches nothing
   * makes a job of total 0, done after its first step.
   */
  startJob(id, filter, action, by = null, now = Date.now()) {
    const args = [str(id, 'id'), witTaskFilter(filter, 'filter'), witJobAction(action), optStr(by, 'by'), s64(now, 'now')];
    return this.#call('start-job', W, ['jobs', 'startJob', args], (a) => {
      const job = sameJob(a, id, 'start-job');
      const fresh = job.total === 0 && (job.state === 'counting' || job.state === 'done') && a.createdAt === args[4];
      if (!fresh) throw malformed(`start-job answered job ${id} ${job.state} with ${job.total} found`);
      return job;
    });
  }

  /**
   * One step of job `id`, its own transaction: the next stretch of its
   * count, or its action on its next task (skipped with the reason if it
   * no longer matches; failed with the reason if its verb refuses), or the
   * next chunks a cancelled one drops. A job with no work left answers as
   * it stands; an unknown id is a StoreError `not-found`.
   */
  stepJob(id) {
    return this.#call('step-job', W, ['jobs', 'stepJob', [str(id, 'id')]], (a) => sameJob(a, id, 'step-job'));
  }

  /** Stops job `id` at once (no task is changed by it after); a finished job answers as it stands. */
  cancelJob(id) {
    return this.#call('cancel-job', W, ['jobs', 'cancelJob', [str(id, 'id')]], (a) => {
      const job = sameJob(a, id, 'cancel-job');
      if (job.state === 'counting' || job.state === 'running') throw malformed(`cancel-job answered job ${id} still ${job.state}`);
      return job;
    });
  }

  /** A job, or null. */
  getJob(id) {
    return this.#call('get-job', R, ['jobs', 'getJob', [str(id, 'id')]], (a) => opt(a, (j) => sameJob(j, id, 'get-job')));
  }

  /** Jobs in id order (bytewise), after `after`, at most `limit` (1–1000). */
  listJobs(limit = 100, after = null) {
    const n = u32(limit, 'limit');
    const cursor = optStr(after, 'after');
    return this.#call('list-jobs', R, ['jobs', 'listJobs', [n, cursor]], (js) => {
      inIdOrder(atMost(js, n, 'list-jobs').map((j) => j.id), cursor, 'list-jobs');
      return js.map((j) => sameJob(j, j.id, 'list-jobs'));
    });
  }

  /** The ids of jobs with work left, in id order, at most `limit` (1–1000): what a host steps. */
  runnableJobs(limit = 100) {
    const n = u32(limit, 'limit');
    return this.#call('runnable-jobs', R, ['jobs', 'runnableJobs', [n]], (ids) => {
      inIdOrder(atMost(ids, n, 'runnable-jobs'), null, 'runnable-jobs');
      return ids;
    });
  }

  /**
   * Steps job `id` until it ends (`done`, or `cancelled` by another
   * caller), a `stepJob` per step, each its own transaction, calling
   * `onProgress(job)` after each; answers the job as it ended. A process
   * that dies half-way leaves the job durable: `runJob` again finishes it
   * without changing any task twice.
   */
  runJob(id, { onProgress = null } = {}) {
    if (onProgress !== null && typeof onProgress !== 'function') {
      throw new InvalidArgument(`onProgress must be a function, got ${shown(onProgress)}`);
    }
    for (;;) {
      const job = this.stepJob(id);
      if (onProgress) onProgress(job);
      if (job.state === 'done' || job.state === 'cancelled') return job;
    }
  }

  /** `{ timersDisarmed, tasksWithdrawn }` moved by this call. */
  seal(run, awaited = []) {
    return this.#call('seal', W, ['runs', 'seal', [str(run, 'run'), list(awaited, 'awaited')]], (o) => ({
      timersDisarmed: o.timersDisarmed,
      tasksWithdrawn: o.tasksWithdrawn,
    }));
  }

  isSealed(run) {
    return this.#call('is-sealed', R, ['runs', 'isSealed', [str(run, 'run')]], (a) => a);
  }

  /** Every discrepancy between the tenant's rows and its indexes and counters. */
  check() {
    return this.#call('check', R, ['admin', 'check', []], (ds) => ds.map((d) => ({ ...d })));
  }

  /**
   * Task `id`'s history after entry `after` (a seq; from the first kept one without it), oldest
   * first. A task written before history was kept answers first, without `after`, an entry with
   * seq 0 and verb `before-history`.
   */
  history(id, after = null, limit = 100) {
    const n = u32(limit, 'limit');
    const from = optU64(after, 'after');
    const args = [str(id, 'id'), from, n];
    return this.#call('history', R, ['changes', 'history', args], (es) => {
      let last = from;
      for (const [i, e] of atMost(es, n, 'history').entries()) {
        // Entry 0 says the task predates its history: only first, from the start.
        const opening = i === 0 && from === undefined && e.verb === 'before-history';
        if ((e.seq === 0n && !opening) || (last !== undefined && e.seq <= last)) {
          throw malformed(`history answered entry ${e.seq} of task ${id} after ${last}`);
        }
        last = e.seq;
      }
      return es.map(historyEntry);
    });
  }

  /**
   * The feed after position `after` (from the oldest entry kept without it):
   * `{ page: { entries, next, head } }`, or `{ gone: head }` when what follows
   * `after` was trimmed (refresh, then follow on from `head`).
   */
  feed(after = null, limit = 100) {
    const n = u32(limit, 'limit');
    return this.#call('feed', R, ['changes', 'feed', [optStr(after, 'after'), n]], (r) => {
      if (r.tag === 'gone') return { gone: r.val };
      const p = r.val;
      return {
        page: {
          entries: atMost(p.entries, n, 'feed').map((e) => ({ position: e.position, change: change(e.change) })),
          next: p.next,
          head: p.head,
        },
      };
    });
  }

  /**
   * Where entry `seq` of task `id`'s history sits in the feed: `{ slot, seq }`,
   * or null when that entry is not kept. For a host that gives its own
   * positions to readers who see part of the feed.
   */
  entryPlace(id, seq) {
    const args = [str(id, 'id'), u64(seq, 'seq')];
    return this.#call('entry-place', R, ['changes', 'entryPlace', args], (a) =>
      opt(a, (o) => ({ slot: o.slot, seq: o.seq })),
    );
  }

  /**
   * Removes the oldest feed entries recorded before `before`, or beyond the
   * newest `keep` (at least one given), at most `limit`, with the history they
   * cover (never a task's last entry): `{ feedRemoved, historyRemoved, more }`.
   */
  trim({ before = null, keep = null, limit = 1000 } = {}) {
    const n = u32(limit, 'limit');
    const args = [optS64(before, 'before'), optU64(keep, 'keep'), n];
    return this.#call('trim', W, ['changes', 'trim', args], (o) => {
      if (o.feedRemoved > n) throw malformed(`trim removed ${o.feedRemoved} entries for a limit of ${n}`);
      return { feedRemoved: o.feedRemoved, historyRemoved: o.historyRemoved, more: o.more };
    });
  }
}
