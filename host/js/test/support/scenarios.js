// Runs one scenario of tests/scenarios/*.json against an engine: the format
// is in tests/scenarios/README.md. The Rust and Python runners implement the
// same rules, so the three hosts are held to the same answers. The package's
// error classes come in as an argument, so the same runner serves the
// repository's tests and a smoke test of the installed package.
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

export const SCENARIO_DIR = new URL('../../../../tests/scenarios/', import.meta.url);

export function scenarioFiles() {
  return readdirSync(SCENARIO_DIR)
    .filter((f) => f.endsWith('.json'))
    .sort()
    .map((f) => ({ file: f, scenario: JSON.parse(readFileSync(join(SCENARIO_DIR.pathname, f), 'utf8')) }));
}

const DEFAULT_TENANT = 'acme';
const TASK_DEFAULTS = {
  case: null, justification: '{}', 'candidate-roles': [], assignee: null, 'lease-until': null, priority: 'normal', state: 'open',
  'on-expiry': 'deny', 'escalate-to': [], 'excluded-actors': [], 'created-at': 0, 'due-at': null, 'remind-before': [],
  escalation: [],
};
const TIMER_DEFAULTS = { case: null, step: 0, phase: 'forward' };
const SCHEDULE_DEFAULTS = {
  case: null, step: 0, phase: 'forward', start: null, end: null, gap: 'shift-forward', repeat: 'first', overlap: 'skip',
  'catch-up': { 'all-within': 31_536_000_000 }, 'jitter-ms': 0,
};

const camel = (k) => k.replace(/-([a-z])/g, (_, c) => c.toUpperCase());
const kebab = (k) => k.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`);

function renameKeys(v, f) {
  // A list<u8> (a signing key) is a list of numbers in the suite's spelling.
  if (v instanceof Uint8Array) return Array.from(v);
  if (Array.isArray(v)) return v.map((x) => renameKeys(x, f));
  if (v && typeof v === 'object') return Object.fromEntries(Object.entries(v).map(([k, x]) => [f(k), renameKeys(x, f)]));
  return typeof v === 'bigint' ? Number(v) : v;
}

/**
 * A chain step's `expire` action, between the suite's spelling
 * (`{"expire": null}`) and the host's (`{ expire: true }`, as its catch-up's
 * `{ none: true }`): every `action` in `v` turned by `f`.
 */
function actions(v, f) {
  if (Array.isArray(v)) return v.map((x) => actions(x, f));
  if (v && typeof v === 'object') {
    return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, k === 'action' ? f(x) : actions(x, f)]));
  }
  return v;
}
const expireIn = (a) => (a && typeof a === 'object' && 'expire' in a ? { expire: true } : a);
const expireOut = (a) => (a && typeof a === 'object' && 'expire' in a ? { expire: null } : a);

const canonical = (v) => (v === undefined ? null : actions(renameKeys(v, kebab), expireOut));

// Verbs whose error result nests store errors under `store`: the claim verbs and reschedule (timer-error).
const CLAIM_VERBS = new Set([
  'claim', 'release', 'take-over', 'renew', 'settle', 'escalate', 'update', 'assign', 'unassign', 'delegate', 'note',
  'reschedule',
]);
const lease = (l) => (l ? { now: l.now, leaseMs: l['lease-ms'] } : null);
const camelKeys = (v) => (v === undefined || v === null ? v : renameKeys(v, camel));

/** `update`'s changes: a key left out is unchanged; `"due-at": null` clears the due time. */
const changes = (c) => actions(camelKeys(c), expireIn);

/** A refusal `reschedule` answered as a value, in the WIT's spelling (`{"held": T}`), for `errorVariant`. */
class TimerRefused {
  constructor(variant) {
    this.variant = variant;
  }
}

/** `reschedule`'s answer as the suite writes it: the timer info, or its refusal as an error. */
function rescheduled(r) {
  if ('moved' in r) return r.moved;
  if ('held' in r) throw new TimerRefused({ held: r.held });
  if (r.notFound) throw new TimerRefused({ 'not-found': null });
  if (r.runSealed) throw new TimerRefused({ 'run-sealed': null });
  throw new Error(`reschedule answered ${JSON.stringify(r)}`);
}

/** A `schedule-spec` argument as the host takes it: the README's defaults, camelCase, `{"none": null}` as `{ none: true }`. */
function scheduleSpec(a) {
  const spec = renameKeys({ ...SCHEDULE_DEFAULTS, ...a }, camel);
  if (spec.catchUp && 'none' in spec.catchUp) spec.catchUp = { none: true };
  return spec;
}

/** A schedule answer in the WIT's spelling: the host's `{ none: true }` catch-up is `{"none": null}`. */
function scheduleValue(s) {
  if (s === null) return s;
  const v = canonical(s);
  if ('none' in v.spec['catch-up']) v.spec['catch-up'] = { none: null };
  return v;
}

/** A `sub-filter` argument: the README's defaults are the host's own (false, empty lists). */
const subFilter = (f) => camelKeys(f);
const key = (k) => Uint8Array.from(k);

/** A `task-filter` argument: it names only what it sets; `{"nobody": null}` is the host's `{ nobody: true }`. */
function taskFilter(f) {
  if (f === undefined || f === null) return f;
  const v = camelKeys(f);
  if (v.assignee && typeof v.assignee === 'object' && 'nobody' in v.assignee) v.assignee = { nobody: true };
  return v;
}

/** A `search-query` argument: `after` and `viewer` may be left out. */
const searchQuery = (q) => ({ ...camelKeys(q), filter: taskFilter(q.filter) });

/** A saved view argument: it names only what it sets (`revision` and `at` are the engine's). */
const viewArg = (v) => ({ ...camelKeys(v), filter: taskFilter(v.filter) });

/** A saved view answer in the WIT's spelling: the host's `{ nobody: true }` assignee is `{"nobody": null}`. */
function viewValue(v) {
  if (v === null) return v;
  const assignee = v.filter.assignee && 'nobody' in v.filter.assignee ? { nobody: null } : v.filter.assignee;
  return { ...v, filter: { ...v.filter, assignee } };
}

/** A `job-action` argument: `"release"`, `"escalate"`, `"withdraw"`, `{"assign": {...}}` or `{"update": CHANGES}`. */
function jobAction(a) {
  if (typeof a === 'string') return a;
  if (a && 'update' in a) return { update: changes(a.update) };
  return camelKeys(a);
}

/** A job answer in the WIT's spelling: its filter's `{ nobody: true }` assignee is `{"nobody": null}`. */
function jobValue(j) {
  if (j === null) return j;
  const assignee = j.filter.assignee && 'nobody' in j.filter.assignee ? { nobody: null } : j.filter.assignee;
  return { ...j, filter: { ...j.filter, assignee } };
}

/** A `finished` argument: `decision` may be left out. */
const finished = (f) => ({ id: f.id, settlement: f.settlement, decision: camelKeys(f.decision) ?? null });

/** A settle answer in the WIT's spelling: `{ settled: true }` is `{"settled": null}`, `{ notFound: true }` `{"not-found": null}`. */
function settleAnswerValue(a) {
  if (a.settled === true) return { settled: null };
  if (a.notFound === true) return { 'not-found': null };
  return a;
}

const settledAndClaimed = (r) => ({ settled: r.settled.map(settleAnswerValue), claimed: r.claimed });

function errorVariant(e, verb, { ClaimRefusal, StoreError }) {
  if (e instanceof TimerRefused) return e.variant;
  if (e instanceof ClaimRefusal) return { [e.case]: e.detail };
  if (e instanceof StoreError) {
    const v = { [e.case]: e.detail };
    return CLAIM_VERBS.has(verb) ? { store: v } : v;
  }
  return { host: String(e && e.stack ? e.stack : e) };
}

const VERBS = {
  open: (t, a) => t.open(actions(renameKeys({ ...TASK_DEFAULTS, ...a.task }, camel), expireIn)),
  get: (t, a) => t.get(a.id),
  claim: (t, a) => t.claim(a.id, a.actor, a.roles, lease(a.lease)),
  renew: (t, a) => t.renew(a.id, a.actor, a.now, a['lease-ms']),
  'reclaim-lapsed': (t, a) => t.reclaimLapsed(a.now, a.limit),
  'expire-overdue': (t, a) => t.expireOverdue(a.now, a.limit),
  'claim-next': (t, a) => t.claimNext(a.query, lease(a.lease)),
  'claim-batch': (t, a) => t.claimBatch(a.query, lease(a.lease), a.count),
  'settle-and-claim': (t, a) => settledAndClaimed(t.settleAndClaim(a.done.map(finished), a.query, lease(a.lease), a.count)),
  'leased-count': (t) => t.leasedCount(),
  'next-lease-end': (t) => t.nextLeaseEnd(),
  'next-wake': (t) => t.nextWake(),
  release: (t, a) => t.release(a.id, a.actor),
  'take-over': (t, a) => t.takeOver(a.id, a.from, a.actor, a.roles, lease(a.lease)),
  settle: (t, a) => t.decide(a.id, a.settlement, a.holder ?? null, camelKeys(a.decision) ?? null),
  'withdraw-run': (t, a) => t.withdrawRun(a.run, a.awaited),
  escalate: (t, a) => t.escalate(a.id),
  queue: (t, a) => t.queue(a.query),
  held: (t, a) => t.held(a.actor, a.limit, a.after ?? null),
  update: (t, a) => t.update(a.id, a.by ?? null, changes(a.changes)),
  assign: (t, a) => t.assign(a.id, a.to, a.roles, lease(a.lease), a['override-roles'] ?? false, a.by ?? null),
  unassign: (t, a) => t.unassign(a.id, a.by ?? null),
  delegate: (t, a) => t.delegate(a.id, a.from, a.to, a.roles, lease(a.lease)),
  note: (t, a) => t.note(a.id, a.actor, a.text),
  'define-kind': (t, a) => t.defineKind(camelKeys(a.definition), a.expected ?? null),
  'get-kind': (t, a) => t.getKind(a.kind),
  'list-kinds': (t, a) => t.listKinds(a.limit, a.after ?? null),
  'remove-kind': (t, a) => t.removeKind(a.kind),
  'for-case': (t, a) => t.forCase(a.case, a.limit, a.after ?? null),
  'open-count': (t) => t.openCount(),
  overdue: (t, a) => t.overdue(a.now, a.limit),
  arm: (t, a) => t.arm(renameKeys({ ...TIMER_DEFAULTS, ...a.timer }, camel)),
  'claim-due': (t, a) => t.claimDue(a.now, a.limit, a['lease-ms']),
  disarm: (t, a) => t.disarm(a.run, a.effect),
  'disarm-run': (t, a) => t.disarmRun(a.run),
  'pending-count': (t) => t.pendingCount(),
  'next-due': (t) => t.nextDue(),
  reschedule: (t, a) => rescheduled(t.reschedule(a.run, a.effect, a['fire-at'], { takeBack: a['take-back'] ?? false })),
  'timers-of': (t, a) => t.timersOf(a.run, a.limit, a.after ?? null),
  'due-between': (t, a) => t.dueBetween(a.from, a.to, a.limit, a.after ?? null),
  'add-schedule': (t, a) => scheduleValue(t.addSchedule(scheduleSpec(a.spec), a.now)),
  'remove-schedule': (t, a) => t.removeSchedule(a.id),
  'pause-schedule': (t, a) => scheduleValue(t.pauseSchedule(a.id, a.note)),
  'resume-schedule': (t, a) => scheduleValue(t.resumeSchedule(a.id, a.now)),
  'trigger-schedule': (t, a) => t.triggerSchedule(a.id, a.now),
  'next-occurrences': (t, a) => t.nextOccurrences(a.id, a.after, a.n),
  'get-schedule': (t, a) => scheduleValue(t.getSchedule(a.id)),
  'list-schedules': (t, a) => {
    const p = t.listSchedules(a.limit, a.after ?? null);
    return { schedules: p.schedules.map(scheduleValue), next: p.next };
  },
  'tz-version': (t) => t.tzVersion(),
  'add-subscription': (t, a) => t.addSubscription(a.id, a.url, subFilter(a.filter), key(a.key), a.from ?? null, a.now),
  'get-subscription': (t, a) => t.getSubscription(a.id),
  'list-subscriptions': (t, a) => t.listSubscriptions(a.limit, a.after ?? null),
  'change-subscription': (t, a) => t.changeSubscription(a.id, a.url ?? null, subFilter(a.filter) ?? null, a.expected ?? null),
  'set-subscription-state': (t, a) => t.setSubscriptionState(a.id, a.state, a.note ?? null, a.expected ?? null),
  'rotate-subscription-key': (t, a) => t.rotateSubscriptionKey(a.id, key(a.key), a['old-until'], a.now),
  'remove-subscription': (t, a) => t.removeSubscription(a.id),
  'advance-subscription': (t, a) => t.advanceSubscription(a.id, a.revision, a.position),
  'rewind-subscription': (t, a) => t.rewindSubscription(a.id, a.position ?? null),
  'lease-subscription': (t, a) => t.leaseSubscription(a.id, a.holder, a.now, a['lease-ms']),
  'release-subscription': (t, a) => t.releaseSubscription(a.id, a.holder),
  'record-subscription-attempts': (t, a) => t.recordSubscriptionAttempts(a.id, camelKeys(a.attempts)),
  search: (t, a) => t.search(searchQuery(a.query)),
  count: (t, a) => t.count(taskFilter(a.filter), camelKeys(a.viewer) ?? null, a.after ?? null),
  'build-search-index': (t, a) => t.buildSearchIndex(a.limit),
  'put-view': (t, a) => viewValue(t.putView(viewArg(a.view), a.expected ?? null)),
  'get-view': (t, a) => viewValue(t.getView(a.name)),
  'list-views': (t, a) => t.listViews(a.limit, a.after ?? null).map(viewValue),
  'delete-view': (t, a) => t.deleteView(a.name, a.expected ?? null),
  'start-job': (t, a) => jobValue(t.startJob(a.id, taskFilter(a.filter) ?? null, jobAction(a.action), a.by ?? null, a.now)),
  'step-job': (t, a) => jobValue(t.stepJob(a.id)),
  'cancel-job': (t, a) => jobValue(t.cancelJob(a.id)),
  'get-job': (t, a) => jobValue(t.getJob(a.id)),
  'list-jobs': (t, a) => t.listJobs(a.limit, a.after ?? null).map(jobValue),
  'runnable-jobs': (t, a) => t.runnableJobs(a.limit),
  seal: (t, a) => t.seal(a.run, a.awaited),
  'is-sealed': (t, a) => t.isSealed(a.run),
  check: (t) => t.check(),
  history: (t, a) => t.history(a.id, a.after ?? null, a.limit),
  feed: (t, a) => t.feed(a.after ?? null, a.limit),
  'entry-place': (t, a) => t.entryPlace(a.id, a.seq),
  trim: (t, a) => t.trim({ before: a.before ?? null, keep: a.keep ?? null, limit: a.limit }),
};

/** The README's rule: objects match on the keys the expectation names, lists element by element. */
export function matches(expected, actual) {
  if (Array.isArray(expected)) {
    return Array.isArray(actual) && expected.length === actual.length && expected.every((e, i) => matches(e, actual[i]));
  }
  if (expected && typeof expected === 'object') {
    return !!actual && typeof actual === 'object' && !Array.isArray(actual)
      && Object.entries(expected).every(([k, v]) => k in actual && matches(v, actual[k]));
  }
  return expected === actual;
}

function errorMatches(expected, actual) {
  const [e] = Object.entries(expected ?? {});
  const [a] = Object.entries(actual ?? {});
  if (!e || !a || e[0] !== a[0]) return false;
  if (e[1] === null) return true;
  if (e[1] && typeof e[1] === 'object' && a[1] && typeof a[1] === 'object') return errorMatches(e[1], a[1]);
  return matches(e[1], a[1]);
}

function resolve(v, vars) {
  if (Array.isArray(v)) return v.map((x) => resolve(x, vars));
  if (v && typeof v === 'object') {
    const keys = Object.keys(v);
    if (keys.length === 1 && keys[0] === '$var') {
      if (!(v.$var in vars)) throw new Error(`no saved value ${v.$var}`);
      return vars[v.$var];
    }
    return Object.fromEntries(keys.map((k) => [k, resolve(v[k], vars)]));
  }
  return v;
}

const atPath = (v, path) => path.split('.').reduce((x, p) => (x == null ? x : x[p]), v);
const hex = (b) => Buffer.from(b).toString('hex');

/**
 * Runs `scenario` on `store` through `engine` and answers the failing steps;
 * `errors` holds the package's `ClaimRefusal` and `StoreError`, and `clock`
 * is the engine's clock, whose `at` a clock step sets.
 */
export function runScenario(scenario, engine, store, errors, clock) {
  const failures = [];
  const vars = {};
  const saved = new Map();
  const keyspace = (tenant) => JSON.stringify(store.dump(tenant).map(([k, v]) => [hex(k), hex(v)]));
  scenario.steps.forEach((step, i) => {
    const tenantName = step.tenant ?? DEFAULT_TENANT;
    const at = `step ${i + 1}`;
    if (step.call) {
      const verb = VERBS[step.call];
      if (!verb) throw new Error(`${at}: no verb ${step.call}`);
      const args = resolve(step.args ?? {}, vars);
      let got;
      try {
        // A `guard` argument (`{revision, job}`) guards the call, as the host's guarded handle does.
        const tenant = args.guard ? engine.tenant(tenantName).guarded(args.guard) : engine.tenant(tenantName);
        got = { ok: canonical(verb(tenant, args)) };
      } catch (e) {
        got = { error: errorVariant(e, step.call, errors) };
      }
      let ok = true;
      const expected = 'ok' in step ? { ok: resolve(step.ok, vars) } : 'error' in step ? { error: resolve(step.error, vars) } : {};
      if ('ok' in step) ok = 'ok' in got && matches(expected.ok, got.ok);
      else if ('error' in step) ok = 'error' in got && errorMatches(expected.error, got.error);
      if (!ok) {
        failures.push(`${at} (${step.call}): expected ${JSON.stringify(expected)}, got ${JSON.stringify(got)}`);
      }
      if ('ok' in got && step.save) {
        for (const [name, path] of Object.entries(step.save)) vars[name] = atPath(got.ok, path);
      }
    } else if ('clock' in step) {
      clock.at = step.clock;
    } else if (step['raw-put']) {
      const { key, value } = step['raw-put'];
      store.putRaw(tenantName, Buffer.from(key, 'hex'), Buffer.from(value, 'hex'));
    } else if (step.keyspace === 'save') {
      saved.set(tenantName, keyspace(tenantName));
    } else if (step.keyspace === 'unchanged') {
      if (saved.get(tenantName) !== keyspace(tenantName)) failures.push(`${at}: tenant ${tenantName}'s keyspace changed`);
    } else {
      throw new Error(`${at}: no call, clock, raw-put or keyspace`);
    }
  });
  return failures;
}
