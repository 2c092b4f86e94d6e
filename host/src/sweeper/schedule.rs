//! The sweeper's loop, on its own thread: it reads each tenant's next
//! instant (the earliest any duty names), keeps it in the timetable, sleeps
//! until the earliest over all tenants, a commit, a clock moved by hand or a
//! stop, and gives the tenant at the front of the line of due ones its turn:
//! each duty in order, within one budget of `calls_per_turn` calls. A
//! tenant that committed is read again (at most once per `min_reread`);
//! nothing is read while nothing is due.
//!
//! It owns the timetable, the pace of rereads and the turns' fairness; it
//! knows no particular duty, must never decide a rule itself, read a tenant
//! it does not know, sleep past an instant it knows of by more than its
//! clock's wake-up, or let one tenant's turn run past its cap while another
//! tenant is due.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::Ordering;
use std::sync::{Arc, PoisonError};
use std::time::{Duration, Instant};

use leasehold_guest::model::Timestamp;

use crate::clock::Clock;
use crate::engine::Engine;
use crate::error::Error;

use super::bell::Shared;
use super::duty::{Duty, Turn};
use super::options::{SweeperOptions, millis};
use super::report::SweepReport;
use super::timetable::Timetable;

/// The sweeper's thread: its duties, its timetable, and when each tenant
/// was read.
pub(super) struct Schedule {
    engine: Engine,
    clock: Arc<dyn Clock>,
    options: SweeperOptions,
    shared: Arc<Shared>,
    duties: Vec<Box<dyn Duty>>,
    table: Timetable,
    /// When each tenant's instants were last read, by the monotonic clock.
    read_at: HashMap<Arc<str>, Instant>,
}

impl Schedule {
    pub(super) fn new(
        engine: Engine,
        clock: Arc<dyn Clock>,
        options: SweeperOptions,
        shared: Arc<Shared>,
        duties: Vec<Box<dyn Duty>>,
    ) -> Schedule {
        Schedule {
            engine,
            clock,
            options,
            shared,
            duties,
            table: Timetable::default(),
            read_at: HashMap::new(),
        }
    }

    /// Logs what the first sweep of each tenant would do, as each duty
    /// foresees it, then waits `first_sweep_after` (or for a stop); answers
    /// whether to go on.
    fn first(&mut self, initial: &[Arc<str>]) -> bool {
        let now = self.clock.now();
        let after = self.options.first_sweep_after;
        let (mut acting, mut failed) = (0u64, 0u64);
        for tenant in initial {
            let foreseen = self.engine.tenant(tenant).and_then(|t| {
                let mut acts = false;
                for duty in &mut self.duties {
                    acts |= duty.foresee(&t, now)?.unwrap_or(false);
                }
                Ok(acts)
            });
            match foreseen {
                Ok(acts) => acting += u64::from(acts),
                Err(e) => {
                    failed += 1;
                    tracing::warn!(tenant = %tenant, error = %e, "first sweep plan: cannot read the tenant");
                }
            }
        }
        tracing::info!(
            tenants = initial.len(),
            acting,
            unread = failed,
            first_sweep_in_ms = after.as_millis() as u64,
            "first sweep plan: {acting} of {} tenants have work the first sweep acts on; it runs in {after:?}",
            initial.len()
        );
        let until = Instant::now() + after;
        let mut bell = self.shared.lock();
        while !bell.stop {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            bell = self
                .shared
                .cond
                .wait_timeout(bell, left)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
        !bell.stop
    }

    /// Tells every duty that `tenant` may have changed.
    fn heard(&mut self, tenant: &Arc<str>) {
        for duty in &mut self.duties {
            duty.heard(tenant);
        }
    }

    pub(super) fn run(mut self, initial: Vec<Arc<str>>) {
        if !self.first(&initial) {
            return;
        }
        for t in &initial {
            self.heard(t);
        }
        let mut stale: HashSet<Arc<str>> = initial.into_iter().collect();
        loop {
            // A tenant in the line is read again at the end of its turn.
            stale.retain(|t| !self.table.in_line(t));
            // Tenants read a moment ago are read again once `min_reread`
            // has passed.
            let gap = self.options.min_reread;
            let mut soonest: Option<Instant> = None;
            let ready: Vec<Arc<str>> = stale
                .iter()
                .filter(|t| match self.read_at.get(*t) {
                    Some(at) if at.elapsed() < gap => {
                        let again = *at + gap;
                        soonest = Some(soonest.map_or(again, |s| s.min(again)));
                        false
                    }
                    _ => true,
                })
                .cloned()
                .collect();
            for t in &ready {
                stale.remove(t);
                self.reread(t);
            }
            let now = self.clock.now();
            self.shared.counts.wakes.fetch_add(1, Ordering::Relaxed);
            self.table.come_due(now);
            // One turn, then the bell is looked at again (for a stop, and
            // for commits that moved other tenants' instants).
            if let Some((at, tenant)) = self.table.next_turn() {
                self.turn(&tenant, at, now);
            }
            self.publish();
            // Sleep until the next instant, a commit, a clock moved by hand
            // or a stop; not at all while a tenant is due.
            let wait = if self.table.any_due() {
                Duration::ZERO
            } else {
                match self.table.earliest() {
                    Some(at) => {
                        let ms = at.saturating_sub(self.clock.now()).max(0);
                        Duration::from_millis(ms as u64).min(self.options.max_sleep)
                    }
                    None => self.options.max_sleep,
                }
            };
            let mut until = Instant::now() + wait;
            if let Some(again) = soonest {
                until = until.min(again);
            }
            let mut bell = self.shared.lock();
            while !bell.rung && !bell.stop {
                let left = until.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    break;
                }
                bell = self
                    .shared
                    .cond
                    .wait_timeout(bell, left)
                    .unwrap_or_else(PoisonError::into_inner)
                    .0;
            }
            if bell.stop {
                return;
            }
            bell.rung = false;
            let mut heard: Vec<Arc<str>> = bell.tenants.drain(..).collect();
            if std::mem::take(&mut bell.all) {
                heard.extend(self.table.tenants_known());
            }
            drop(bell);
            for t in &heard {
                self.heard(t);
            }
            stale.extend(heard);
        }
    }

    /// Reads `tenant`'s next instant and schedules it; counted once it is
    /// in the schedule.
    fn reread(&mut self, tenant: &Arc<str>) {
        self.read_at.insert(tenant.clone(), Instant::now());
        let next = match self.instants(tenant) {
            Ok(next) => next,
            Err(e) => {
                self.shared.counts.errors.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(tenant = %tenant, error = %e, "the sweeper could not read a tenant's next instant; trying again later");
                Some(self.clock.now().saturating_add(millis(self.options.retry)))
            }
        };
        self.table.set(tenant, next);
        self.publish();
        self.shared.counts.reads.fetch_add(1, Ordering::SeqCst);
    }

    /// The schedule's sizes, for [`Sweeper::stats`](crate::Sweeper::stats).
    fn publish(&self) {
        let c = &self.shared.counts;
        c.tenants
            .store(self.table.tenants() as u64, Ordering::Relaxed);
        c.scheduled
            .store(self.table.entries() as u64, Ordering::SeqCst);
    }

    /// The earliest instant any duty names for `tenant`.
    fn instants(&mut self, tenant: &str) -> Result<Option<Timestamp>, Error> {
        let t = self.engine.tenant(tenant)?;
        let now = self.clock.now();
        let mut earliest: Option<Timestamp> = None;
        for duty in &mut self.duties {
            if let Some(at) = duty.next(&t, now)? {
                earliest = Some(earliest.map_or(at, |e| e.min(at)));
            }
        }
        Ok(earliest)
    }

    /// Each duty's share of `tenant`'s turn, in order, within the turn's
    /// budget; answers whether the turn ended at its cap.
    fn act(&mut self, tenant: &str, turn: &mut Turn<'_>) -> Result<bool, Error> {
        let t = self.engine.tenant(tenant)?;
        for duty in &mut self.duties {
            duty.act(&t, turn).inspect_err(|e| {
                tracing::debug!(tenant, duty = duty.name(), error = %e, "a duty failed");
            })?;
        }
        Ok(turn.capped())
    }

    /// One turn of `tenant`, due since `at`. A tenant left with more to do
    /// goes to the back of the line, behind those that came due meanwhile;
    /// one done is read again.
    fn turn(&mut self, tenant: &Arc<str>, at: Timestamp, now: Timestamp) {
        let mut report = SweepReport {
            tenant: tenant.to_string(),
            now,
            late_ms: now - at,
            ..SweepReport::default()
        };
        // A duty with nothing to do may still spend a call finding that
        // out: the calls each duty keeps at least (one, for most), so a turn
        // always reaches the last.
        let duties = self
            .duties
            .iter()
            .fold(0u32, |n, d| n.saturating_add(d.least_calls(tenant)));
        let budget = self.options.calls_per_turn.max(1).max(duties);
        let outcome = self.act(tenant, &mut Turn::new(now, budget, &mut report));
        let c = &self.shared.counts;
        c.swept(&report);
        match &outcome {
            Ok(more) => {
                report.more = *more;
                tracing::info!(
                    tenant = %tenant,
                    late_ms = report.late_ms,
                    reclaimed = report.reclaimed,
                    escalated = report.escalated,
                    expired = report.expired,
                    counts = ?report.counts,
                    more = report.more,
                    "swept"
                );
            }
            Err(e) => {
                c.errors.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(tenant = %tenant, error = %e, "a sweep failed; trying again later");
                report.error = Some(e.to_string());
            }
        }
        if let Some(f) = &self.options.on_sweep {
            f(&report);
        }
        match outcome {
            Ok(true) => {
                // Whoever came due during this turn goes first.
                self.table.come_due(self.clock.now());
                self.table.back_of_line(tenant, at);
            }
            Ok(false) => self.reread(tenant),
            Err(_) => {
                let retry = now.saturating_add(millis(self.options.retry));
                self.table.set(tenant, Some(retry));
            }
        }
    }
}
