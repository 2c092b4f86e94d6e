//! The worker's loop: the one thread that makes its calls. It fetches a
//! batch when the local buffer runs low (`claim-batch`, or
//! `settle-and-claim` with the finished tasks it holds), settles finished
//! tasks on a short timer when no fetch is coming, renews leases at half
//! their length, releases failed tasks, waits with backoff (or for a
//! commit) while the queue is empty, and winds down at a stop. It owns the
//! order of the calls; it must never decide a rule (what a claim, renewal
//! or settlement may do is the component's), nor run a handler.

use std::sync::Arc;
use std::time::{Duration, Instant};

use leasehold_guest::model::{Finished, Lease, QueueQuery, SettleAnswer, Task};

use crate::clock::Clock;
use crate::error::Error;
use crate::tenant::Tenant;

use super::options::{OnFailure, WorkerOptions};
use super::shared::{Shared, State};
use super::stats::add;

/// The most finished tasks one call settles (the verb's bound).
const MOST_DONE: usize = 100;

pub(super) struct Loop {
    pub(super) tenant: Tenant,
    pub(super) clock: Arc<dyn Clock>,
    pub(super) options: WorkerOptions,
    pub(super) shared: Arc<Shared>,
    /// The wait after the next empty fetch.
    idle: Duration,
    /// No fetch before this (backoff while the queue is empty).
    next_fetch: Instant,
    /// No call before this (backoff after a failed call).
    pause: Option<Instant>,
    /// No reclaim before this instant of the engine's clock.
    next_reclaim: i64,
}

/// What the loop does next, decided under the lock and done without it.
enum Step {
    Release(Vec<String>),
    Renew(Vec<String>),
    Fetch(Vec<Finished>),
    Flush(Vec<Finished>),
    /// The last step of a stop: settle and release what is left, then end.
    Finish(Vec<Finished>, Vec<String>),
    Wait(Option<Instant>),
}

impl Loop {
    pub(super) fn new(
        tenant: Tenant,
        clock: Arc<dyn Clock>,
        options: WorkerOptions,
        shared: Arc<Shared>,
    ) -> Loop {
        let idle = options.idle_min;
        Loop {
            tenant,
            clock,
            options,
            shared,
            idle,
            next_fetch: Instant::now(),
            pause: None,
            next_reclaim: i64::MIN,
        }
    }

    fn query(&self) -> QueueQuery {
        QueueQuery {
            roles: self.options.roles.clone(),
            actor: Some(self.options.actor.clone()),
            limit: self.options.batch,
            after: None,
        }
    }

    pub(super) fn run(mut self, deadline: impl Fn() -> Option<Instant>) {
        loop {
            let shared = self.shared.clone();
            let step = {
                let mut s = shared.lock();
                s.rung = false;
                if s.gone {
                    return;
                }
                self.next(&mut s, deadline())
            };
            match step {
                Step::Release(ids) => self.release(ids, true),
                Step::Renew(ids) => self.renew(ids),
                Step::Fetch(done) => self.fetch(done),
                Step::Flush(done) => self.flush(done),
                Step::Finish(done, unheld) => {
                    self.flush(done);
                    self.release(unheld, false);
                    // A refused outcome met at the last flush is released
                    // too; nothing else is left to call for.
                    let failed = std::mem::take(&mut self.shared.lock().failed);
                    self.release(failed, false);
                    self.shared.ring(|s| s.gone = true);
                    return;
                }
                Step::Wait(until) => {
                    let mut s = self.shared.lock();
                    if s.rung || s.gone {
                        continue;
                    }
                    match until {
                        None => drop(self.shared.bell.wait(s)),
                        Some(at) => {
                            let left = at.saturating_duration_since(Instant::now());
                            if !left.is_zero() {
                                s = self
                                    .shared
                                    .bell
                                    .wait_timeout(s, left)
                                    .unwrap_or_else(|p| p.into_inner())
                                    .0;
                            }
                            drop(s);
                        }
                    }
                }
            }
        }
    }

    /// What to do next, from the state.
    fn next(&mut self, s: &mut State, deadline: Option<Instant>) -> Step {
        let now = Instant::now();
        if s.heard {
            s.heard = false;
            self.next_fetch = self.next_fetch.min(now);
        }
        if s.stopping {
            // Unstarted tasks go back to the queue first, so other workers
            // may take them while running handlers finish.
            if !s.buffer.is_empty() {
                let ids: Vec<String> = s.buffer.drain(..).map(|t| t.id).collect();
                for id in &ids {
                    s.held.remove(id);
                }
                return Step::Release(ids);
            }
            let past = deadline.is_some_and(|d| now >= d);
            if s.running == 0 || past {
                if s.running > 0 {
                    // Their tasks stay held under leases no longer renewed.
                    add(&self.shared.counts.abandoned, s.running as u64);
                    s.gone = true;
                }
                return Step::Finish(std::mem::take(&mut s.done), std::mem::take(&mut s.failed));
            }
        }
        if let Some(p) = self.pause {
            if now < p {
                let stop_at = deadline.filter(|_| s.stopping);
                return Step::Wait(Some(stop_at.map_or(p, |d| d.min(p))));
            }
            self.pause = None;
        }
        if !s.failed.is_empty() {
            return Step::Release(std::mem::take(&mut s.failed));
        }
        let now_ms = self.clock.now();
        let half = i64::from(self.options.lease_ms / 2);
        let due: Vec<String> = s
            .held
            .iter()
            .filter(|(_, end)| end.saturating_sub(half) <= now_ms)
            .map(|(id, _)| id.clone())
            .collect();
        if !due.is_empty() {
            return Step::Renew(due);
        }
        let low = !s.stopping && s.buffer.len() < self.options.concurrency;
        if low && now >= self.next_fetch {
            let n = s.done.len().min(MOST_DONE);
            let done: Vec<Finished> = s.done.drain(..n).collect();
            if s.done.is_empty() {
                s.done_since = None;
            }
            return Step::Fetch(done);
        }
        let flush_at = s
            .done_since
            .and_then(|t| t.checked_add(self.options.flush_after));
        if flush_at.is_some_and(|t| now >= t) || s.done.len() >= MOST_DONE {
            let n = s.done.len().min(MOST_DONE);
            let done: Vec<Finished> = s.done.drain(..n).collect();
            s.done_since = (!s.done.is_empty()).then_some(now);
            return Step::Flush(done);
        }
        // Asleep until the first of: the next fetch, the flush, the next
        // renewal (by the engine's clock: a clock moved by hand rings the
        // bell), the stop's deadline.
        let renew_at = s
            .held
            .values()
            .map(|end| end.saturating_sub(half))
            .min()
            .and_then(|at| {
                let ms = u64::try_from(at.saturating_sub(now_ms)).unwrap_or(0);
                now.checked_add(Duration::from_millis(ms))
            });
        let wake = [
            low.then_some(self.next_fetch),
            flush_at,
            renew_at,
            deadline.filter(|_| s.stopping),
        ]
        .into_iter()
        .flatten()
        .min();
        Step::Wait(wake)
    }

    /// A call failed: counted, and no call for a while.
    fn failed_call(&mut self, what: &str, e: &Error) {
        add(&self.shared.counts.call_errors, 1);
        tracing::warn!(tenant = %self.tenant.name(), error = %e, "a worker's {what} call failed; trying again later");
        self.pause = Some(later(Instant::now(), self.options.idle_min));
    }

    /// Returns the tenant's lapsed leases to the queue (a crashed worker's
    /// tasks, a failed one left to its lease) before a fetch, at most once
    /// per `reclaim_ms` and at once again while a call finds a full batch,
    /// so the fetch after it may take them. False when the call failed.
    fn reclaim_due(&mut self) -> bool {
        const MOST: u32 = 100;
        let now = self.clock.now();
        if self.options.reclaim_ms == 0 || now < self.next_reclaim {
            return true;
        }
        add(&self.shared.counts.calls, 1);
        match self.tenant.reclaim_lapsed(now, MOST) {
            Ok(back) => {
                add(&self.shared.counts.reclaimed, back.len() as u64);
                self.next_reclaim = if back.len() == MOST as usize {
                    now
                } else {
                    now.saturating_add(i64::from(self.options.reclaim_ms))
                };
                true
            }
            Err(e) => {
                self.failed_call("reclaim", &e);
                false
            }
        }
    }

    fn fetch(&mut self, done: Vec<Finished>) {
        if !self.reclaim_due() {
            self.shared.ring(|s| put_back(s, done));
            return;
        }
        let query = self.query();
        let lease = Lease {
            now: self.clock.now(),
            lease_ms: self.options.lease_ms,
        };
        let batch = self.options.batch;
        let answer = if done.is_empty() {
            self.tenant
                .claim_batch(&query, Some(lease), batch)
                .map(|c| (Vec::new(), c))
        } else {
            self.tenant
                .settle_and_claim(&done, &query, Some(lease), batch)
                .map(|a| (a.settled, a.claimed))
        };
        add(&self.shared.counts.calls, 1);
        match answer {
            Ok((answers, claimed)) => {
                let n = claimed.len();
                self.settled(&done, answers);
                self.took(claimed, lease);
                let now = Instant::now();
                if n == 0 {
                    add(&self.shared.counts.empty_fetches, 1);
                    self.next_fetch = later(now, self.idle);
                    self.idle = self.idle.saturating_mul(2).min(self.options.idle_max);
                } else {
                    self.idle = self.options.idle_min;
                    // A short batch means the queue ran dry: look again
                    // soon, not at once.
                    self.next_fetch = if n < batch as usize {
                        later(now, self.idle)
                    } else {
                        now
                    };
                }
            }
            Err(e) => {
                self.failed_call("fetch", &e);
                self.shared.ring(|s| put_back(s, done));
            }
        }
    }

    fn flush(&mut self, done: Vec<Finished>) {
        if done.is_empty() {
            return;
        }
        let query = self.query();
        let answer = self.tenant.settle_and_claim(&done, &query, None, 0);
        add(&self.shared.counts.calls, 1);
        match answer {
            Ok(a) => self.settled(&done, a.settled),
            Err(e) => {
                self.failed_call("settle", &e);
                self.shared.ring(|s| put_back(s, done));
            }
        }
    }

    /// Counts what became of each finished task.
    fn settled(&self, done: &[Finished], answers: Vec<SettleAnswer>) {
        let c = &self.shared.counts;
        let mut s = self.shared.lock();
        for (f, a) in done.iter().zip(answers) {
            match a {
                SettleAnswer::Settled => {
                    add(&c.settled, 1);
                    s.held.remove(&f.id);
                }
                SettleAnswer::Refused(why) => {
                    add(&c.failed, 1);
                    tracing::warn!(task = %f.id, %why, "the component refused a worker's outcome");
                    match self.options.on_failure {
                        OnFailure::Release => s.failed.push(f.id.clone()),
                        OnFailure::KeepLease => {
                            s.held.remove(&f.id);
                        }
                    }
                }
                SettleAnswer::Already(_) | SettleAnswer::NotHeld(_) | SettleAnswer::NotFound => {
                    add(&c.lost, 1);
                    s.held.remove(&f.id);
                }
            }
        }
    }

    /// Buffers what a fetch claimed, and wakes the handlers.
    fn took(&self, claimed: Vec<Task>, lease: Lease) {
        if claimed.is_empty() {
            return;
        }
        add(&self.shared.counts.claimed, claimed.len() as u64);
        self.shared.ring(|s| {
            for t in claimed {
                s.held
                    .insert(t.id.clone(), t.lease_until.unwrap_or(lease.end()));
                s.buffer.push_back(t);
            }
        });
    }

    fn renew(&mut self, ids: Vec<String>) {
        let now = self.clock.now();
        for id in ids {
            let answer = self
                .tenant
                .renew(&id, &self.options.actor, now, self.options.lease_ms);
            add(&self.shared.counts.calls, 1);
            match answer {
                Ok(task) => {
                    add(&self.shared.counts.renewed, 1);
                    let end = task
                        .lease_until
                        .unwrap_or(now + i64::from(self.options.lease_ms));
                    if let Some(e) = self.shared.lock().held.get_mut(&id) {
                        *e = end;
                    }
                }
                Err(Error::Refused(why)) => {
                    // No longer ours (the lease lapsed and the task was
                    // reclaimed): not renewed again, and not started if it
                    // was still waiting; a running handler's outcome will
                    // be answered `not-held`.
                    tracing::warn!(task = %id, %why, "a worker's lease could not be renewed");
                    let mut s = self.shared.lock();
                    s.held.remove(&id);
                    let before = s.buffer.len();
                    s.buffer.retain(|t| t.id != id);
                    if s.buffer.len() < before {
                        add(&self.shared.counts.lost, 1);
                    }
                }
                Err(e) => {
                    self.failed_call("renew", &e);
                    return;
                }
            }
        }
    }

    /// Releases `ids`; with `retry`, one whose call failed is tried again
    /// later, else it is left to its lease.
    fn release(&mut self, ids: Vec<String>, retry: bool) {
        for (i, id) in ids.iter().enumerate() {
            let answer = self.tenant.release(id, &self.options.actor);
            add(&self.shared.counts.calls, 1);
            match answer {
                Ok(()) => add(&self.shared.counts.released, 1),
                Err(Error::Refused(_)) => add(&self.shared.counts.lost, 1),
                Err(e) => {
                    self.failed_call("release", &e);
                    if retry {
                        let rest = ids[i..].to_vec();
                        self.shared.ring(|s| s.failed.extend(rest));
                        return;
                    }
                }
            }
            self.shared.lock().held.remove(id);
        }
    }
}

/// `d` after `at`, or as far off as can be said.
fn later(at: Instant, d: Duration) -> Instant {
    at.checked_add(d)
        .unwrap_or_else(|| at + Duration::from_secs(86_400 * 365))
}

/// Finished tasks whose settling call failed wait for the next one.
fn put_back(s: &mut State, mut done: Vec<Finished>) {
    done.append(&mut s.done);
    s.done = done;
    s.done_since.get_or_insert_with(Instant::now);
}
