// A worker loop over one tenant's queue, as graphile-worker's local queue
// runs one: a small buffer of claimed tasks (`claimBatch`, then
// `settleAndClaim`, so a steady worker makes one call per batch: the tasks
// it finished acknowledged with the next fetch), a handler per task with a
// bound on how many run at once, the leases of held tasks renewed at half
// their length, and a shutdown that settles what finished, releases what
// had not started and waits for running handlers up to a deadline.
//
// Every store call is the tenant's own (synchronous, one transaction); the
// loop only decides when to make them. What a crash leaves: every task the
// worker held (buffered, running, or finished but not yet settled) stays
// claimed by its actor until its lease ends; then any worker of the tenant
// (each returns lapsed leases to the queue before it fetches, at most once
// per `reclaimMs`), or a sweeper's `reclaimLapsed(now, limit)`, returns it to
// the queue for another worker. A handler's work on such a task may run
// again: handlers must be idempotent.
import { setTimeout as delay } from 'node:timers/promises';

import { ClaimRefusal, InvalidArgument } from './errors.js';

const SETTLEMENTS = new Set(['completed', 'expired', 'withdrawn']);
/** The most one batch call takes or settles (the component's bound). */
const MAX_BATCH = 100;

const realSleep = (ms, signal) => delay(ms, undefined, { signal }).catch(() => {});

function positive(v, field, max = Infinity) {
  if (!Number.isSafeInteger(v) || v < 1 || v > max) throw new InvalidArgument(`${field} must be an integer in 1..${max}, got ${v}`);
  return v;
}

/**
 * Runs `handler` on the tasks of `roles`' queue claimed for `actor`.
 *
 * Options: `actor` (required), `roles` (default `[]`), `handler` (required:
 * `async (task, { signal }) => result`, where a result of undefined settles
 * the task `completed`, and `{ settlement, decision }` settles it so; the
 * signal aborts when the task's lease is lost or shutdown gives up on it),
 * `concurrency` (handlers at once, default 4), `batch` (tasks claimed per
 * fetch, at most 100; default `concurrency`), `leaseMs` (default 60 000;
 * renewed when half of it is left), `onError` (`'release'`, the default:
 * a handler that throws has its task released back to the queue at once;
 * `'lease'`: the task is left held until its lease lapses, and is returned
 * to the queue a lease later), `reclaimMs` (how often, at most, the worker
 * returns the tenant's lapsed leases to the queue before it fetches, with
 * `reclaimLapsed`: a killed worker's tasks come back without a sweeper;
 * default `leaseMs`, 0 never, for a tenant a sweeper serves), `idleMs` and `maxIdleMs`
 * (the wait after an empty fetch, doubling from one to the other; 100 and
 * 5 000), `now` (the clock leases are reckoned by, ms; default `Date.now`),
 * `sleep` (`(ms, signal) => Promise`, the loop's only timer; a test passes a
 * virtual one), `onEvent` (`(name, detail) => void`: `claimed`, `started`,
 * `handled`, `failed`, `settled`, `refused`, `lost`, `renewed`, `released`,
 * `reclaimed`, `idle`, `error`, `stopped`).
 */
export class TaskWorker {
  #tenant;
  #o;
  #query;
  /** Claimed, not started: `{ task, leaseUntil }`. */
  #buffer = [];
  /** id -> `{ task, leaseUntil, controller, lost }`. */
  #running = new Map();
  /** Handled, to settle with the next call: `{ finished, leaseUntil }`. */
  #finished = [];
  #stopping = false;
  #deadline = null;
  #loop = null;
  #wake = null;
  #idle = 0;
  #nextFetch = 0;
  #nextReclaim = 0;

  /** Counts of what the worker did, for a caller's metrics. */
  stats = {
    calls: 0, claimed: 0, started: 0, handled: 0, failed: 0, settled: 0, refused: 0, lost: 0, renewed: 0, released: 0,
    reclaimed: 0, abandoned: 0, errors: 0,
  };

  constructor(tenant, options) {
    const o = { roles: [], concurrency: 4, leaseMs: 60_000, onError: 'release', idleMs: 100, maxIdleMs: 5_000, ...options };
    if (typeof o.actor !== 'string' || o.actor === '') throw new InvalidArgument('actor must be a non-empty string');
    if (typeof o.handler !== 'function') throw new InvalidArgument('handler must be a function');
    o.concurrency = positive(o.concurrency, 'concurrency');
    o.batch = positive(o.batch ?? Math.min(o.concurrency, MAX_BATCH), 'batch', MAX_BATCH);
    o.leaseMs = positive(o.leaseMs, 'leaseMs', 0xffffffff);
    o.reclaimMs ??= o.leaseMs;
    if (!Number.isSafeInteger(o.reclaimMs) || o.reclaimMs < 0) {
      throw new InvalidArgument(`reclaimMs must be a non-negative integer, got ${o.reclaimMs}`);
    }
    o.idleMs = positive(o.idleMs, 'idleMs');
    o.maxIdleMs = Math.max(positive(o.maxIdleMs, 'maxIdleMs'), o.idleMs);
    if (o.onError !== 'release' && o.onError !== 'lease') throw new InvalidArgument("onError must be 'release' or 'lease'");
    o.now ??= Date.now;
    o.sleep ??= realSleep;
    o.onEvent ??= () => {};
    this.#tenant = tenant;
    this.#o = o;
    this.#query = { roles: o.roles, actor: o.actor };
  }

  /** Tasks held and not yet settled or released: buffered, running and finished. */
  get holding() {
    return this.#buffer.length + this.#running.size + this.#finished.length;
  }

  /** Runs until `stop()`; resolves to `stats` once shutdown is done. */
  run() {
    if (this.#loop) throw new Error('this worker is already running');
    this.#loop = this.#main();
    return this.#loop;
  }

  /**
   * Stops: no more claims; the tasks not started are released; running
   * handlers get until `deadlineMs` (by the worker's clock; default
   * 30 000) with their leases still renewed; what finished is settled.
   * Handlers still running at the deadline are aborted (their signal) and
   * their tasks left held until their leases lapse (`stats.abandoned`).
   */
  stop({ deadlineMs = 30_000 } = {}) {
    if (!this.#stopping) {
      this.#stopping = true;
      this.#deadline = this.#o.now() + deadlineMs;
      this.#poke();
    }
    return this.#loop ?? Promise.resolve(this.stats);
  }

  #emit(name, detail = {}) {
    try {
      this.#o.onEvent(name, detail);
    } catch {
      // A listener's fault is not the worker's.
    }
  }

  #poke() {
    const w = this.#wake;
    this.#wake = null;
    w?.();
  }

  /** Waits `ms` by the worker's sleep, or less when a handler ends or stop is called. */
  async #wait(ms) {
    const ac = new AbortController();
    const woken = new Promise((resolve) => {
      this.#wake = resolve;
    });
    await Promise.race([woken, this.#o.sleep(Math.max(0, ms), ac.signal)]);
    this.#wake = null;
    ac.abort();
  }

  get #renewMargin() {
    return this.#o.leaseMs / 2;
  }

  async #main() {
    while (!this.#stopping) {
      try {
        this.#renewDue();
        this.#startBuffered();
        const now = this.#o.now();
        const want = this.#buffer.length === 0 && this.#running.size < this.#o.concurrency ? this.#o.batch : 0;
        const flush = this.#finished.length >= this.#o.batch || this.#finished.some((f) => f.leaseUntil - now <= this.#renewMargin);
        if ((want > 0 && now >= this.#nextFetch) || (flush && this.#finished.length > 0)) {
          if (want > 0 && now >= this.#nextFetch) this.#reclaimDue(now);
          const got = this.#fetch(want > 0 && now >= this.#nextFetch ? want : 0);
          if (want > 0 && now >= this.#nextFetch) this.#backoff(got, now);
          continue;
        }
        await this.#wait(this.#nextEvent(now, want > 0));
      } catch (e) {
        // A store call failed (a lock timeout, a failed commit): nothing it
        // did committed; what it was to settle is settled by a later call.
        this.stats.errors += 1;
        this.#emit('error', { error: e });
        const now = this.#o.now();
        this.#backoff(0, now);
        await this.#wait(this.#nextFetch - now);
      }
    }
    await this.#shutdown();
    this.#emit('stopped', { stats: this.stats });
    return this.stats;
  }

  #backoff(got, now) {
    if (got > 0) {
      this.#idle = 0;
      this.#nextFetch = 0;
      return;
    }
    this.#idle = this.#idle ? Math.min(this.#idle * 2, this.#o.maxIdleMs) : this.#o.idleMs;
    this.#nextFetch = now + this.#idle;
    this.#emit('idle', { waitMs: this.#idle });
  }

  /** How long until the loop has something timed to do: a fetch after backoff, or a renewal. */
  #nextEvent(now, fetching) {
    let at = fetching ? this.#nextFetch : now + this.#o.maxIdleMs;
    for (const e of [...this.#buffer, ...this.#running.values(), ...this.#finished]) {
      if (!e.lost) at = Math.min(at, e.leaseUntil - this.#renewMargin);
    }
    return Math.max(1, at - now);
  }

  /** One call: settles what finished (at most 100) and claims up to `want` more. Answers how many it claimed. */
  #fetch(want) {
    const lease = { now: this.#o.now(), leaseMs: this.#o.leaseMs };
    let claimed;
    if (this.#finished.length > 0) {
      const done = this.#finished.splice(0, MAX_BATCH);
      let answer;
      try {
        this.stats.calls += 1;
        answer = this.#tenant.settleAndClaim(done.map((f) => f.finished), this.#query, lease, want);
      } catch (e) {
        this.#finished.unshift(...done);
        throw e;
      }
      answer.settled.forEach((a, i) => this.#account(done[i].finished, a));
      claimed = answer.claimed;
    } else if (want > 0) {
      this.stats.calls += 1;
      claimed = this.#tenant.claimBatch(this.#query, lease, want);
    } else {
      return 0;
    }
    for (const task of claimed) {
      this.#buffer.push({ task, leaseUntil: task.leaseUntil });
      this.stats.claimed += 1;
      this.#emit('claimed', { task });
    }
    return claimed.length;
  }

  /**
   * Returns the tenant's lapsed leases to the queue (a killed worker's
   * tasks, a failed one left to its lease), at most once per `reclaimMs`
   * and at once again while a call finds a full batch, so the fetch after
   * it may take them.
   */
  #reclaimDue(now) {
    if (this.#o.reclaimMs === 0 || now < this.#nextReclaim) return;
    this.stats.calls += 1;
    const back = this.#tenant.reclaimLapsed(now, MAX_BATCH);
    this.#nextReclaim = back.length === MAX_BATCH ? now : now + this.#o.reclaimMs;
    if (back.length > 0) {
      this.stats.reclaimed += back.length;
      this.#emit('reclaimed', { ids: back.map((t) => t.id) });
    }
  }

  /** What one settle answer means for the worker's counts. */
  #account(f, a) {
    if (a.settled) {
      this.stats.settled += 1;
      this.#emit('settled', { id: f.id, settlement: f.settlement });
    } else if (a.refused !== undefined) {
      // The task is still ours, its decision refused: it goes the way of a
      // failed handler.
      this.stats.refused += 1;
      this.#emit('refused', { id: f.id, reason: a.refused });
      this.#failed(f.id);
    } else {
      // Settled by someone else, held by someone else, or gone: the lease
      // lapsed before the settle reached the store.
      this.stats.lost += 1;
      this.#emit('lost', { id: f.id, answer: a });
    }
  }

  #renewDue() {
    const now = this.#o.now();
    const due = (e) => !e.lost && e.leaseUntil - now <= this.#renewMargin;
    for (const e of [...this.#buffer.filter(due), ...[...this.#running.values()].filter(due)]) {
      try {
        this.stats.calls += 1;
        const t = this.#tenant.renew(e.task.id, this.#o.actor, now, this.#o.leaseMs);
        e.leaseUntil = t.leaseUntil;
        this.stats.renewed += 1;
        this.#emit('renewed', { id: e.task.id, leaseUntil: e.leaseUntil });
      } catch (err) {
        if (!(err instanceof ClaimRefusal)) throw err;
        // Not ours any more (the lease lapsed and was reclaimed, an
        // operator took it): stop working on it.
        this.#lose(e, err);
      }
    }
  }

  #lose(e, why) {
    e.lost = true;
    this.stats.lost += 1;
    const i = this.#buffer.indexOf(e);
    if (i >= 0) this.#buffer.splice(i, 1);
    e.controller?.abort(why);
    this.#emit('lost', { id: e.task.id, error: why });
  }

  #startBuffered() {
    while (!this.#stopping && this.#running.size < this.#o.concurrency && this.#buffer.length > 0) {
      const e = this.#buffer.shift();
      e.controller = new AbortController();
      this.#running.set(e.task.id, e);
      this.stats.started += 1;
      this.#emit('started', { task: e.task });
      Promise.resolve()
        .then(() => this.#o.handler(e.task, { signal: e.controller.signal }))
        .then(
          (result) => this.#succeeded(e, result),
          (error) => {
            if (e.lost || e.abandoned) return;
            this.#emit('failed', { id: e.task.id, error });
            this.#failed(e.task.id);
          },
        )
        .catch((error) => {
          // The release after a failure could not be made: the task is
          // left to its lease.
          this.stats.errors += 1;
          this.#emit('error', { error });
        })
        .finally(() => {
          this.#running.delete(e.task.id);
          this.#poke();
        });
    }
  }

  #succeeded(e, result) {
    if (e.lost || e.abandoned) return;
    const r = result ?? {};
    const settlement = r.settlement ?? 'completed';
    const d = r.decision;
    if (!SETTLEMENTS.has(settlement) || (d != null && (typeof d !== 'object' || typeof d.outcome !== 'string'))) {
      this.#emit('failed', { id: e.task.id, error: new InvalidArgument(`the handler answered ${JSON.stringify(result)}`) });
      this.#failed(e.task.id);
      return;
    }
    this.stats.handled += 1;
    this.#finished.push({ finished: { id: e.task.id, settlement, decision: d ?? null }, leaseUntil: e.leaseUntil });
    this.#emit('handled', { id: e.task.id });
  }

  /** A handler threw (or its decision was refused): release the task, or leave it to its lease. */
  #failed(id) {
    this.stats.failed += 1;
    if (this.#o.onError === 'lease') return;
    this.#release(id);
  }

  #release(id) {
    try {
      this.stats.calls += 1;
      this.#tenant.release(id, this.#o.actor);
      this.stats.released += 1;
      this.#emit('released', { id });
    } catch (e) {
      if (!(e instanceof ClaimRefusal)) throw e;
      this.stats.lost += 1;
      this.#emit('lost', { id, error: e });
    }
  }

  async #shutdown() {
    const swallow = (f) => {
      try {
        f();
      } catch (e) {
        this.stats.errors += 1;
        this.#emit('error', { error: e });
      }
    };
    // Not started: back to the queue, where they were.
    for (const e of this.#buffer.splice(0)) swallow(() => this.#release(e.task.id));
    // Running: their leases renewed, what finishes settled, until the deadline.
    while (this.#running.size > 0 && this.#o.now() < this.#deadline) {
      swallow(() => this.#renewDue());
      const now = this.#o.now();
      if (this.#finished.some((f) => f.leaseUntil - now <= this.#renewMargin)) swallow(() => this.#fetch(0));
      await this.#wait(Math.min(this.#deadline - now, this.#nextEvent(now, false)));
    }
    for (const e of this.#running.values()) {
      e.abandoned = true;
      this.stats.abandoned += 1;
      e.controller.abort(new Error('the worker stopped before the handler finished'));
    }
    while (this.#finished.length > 0) {
      const before = this.#finished.length;
      swallow(() => this.#fetch(0));
      if (this.#finished.length >= before) break;
    }
  }
}
