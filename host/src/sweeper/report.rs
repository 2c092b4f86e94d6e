//! What the sweeper tells: the report of one turn of one tenant
//! ([`SweepReport`], handed to `on_sweep` and logged), and its counts since
//! it started ([`SweeperStats`]). A duty counts what it did by name
//! ([`Turn::count`](crate::Turn::count)); the names of the standard
//! duties' counts also fill the report's and the stats' own fields, which
//! predate duties. It only keeps counts, and never decides anything.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};

use leasehold_guest::model::Timestamp;

/// Lapsed leases returned to the queue (by `reclaim-lapsed`).
pub(crate) const RECLAIMED: &str = "reclaimed";
/// Overdue tasks escalated (by `expire-overdue`).
pub(crate) const ESCALATED: &str = "escalated";
/// Overdue tasks settled `expired` (by `expire-overdue`).
pub(crate) const EXPIRED: &str = "expired";
/// Tasks a reminder left open or claimed (by `expire-overdue`); a chain
/// step's escalation or expiry counts as `escalated` or `expired`.
pub(crate) const REMINDED: &str = "reminded";
/// Feed entries trimmed by the retention.
pub(crate) const TRIMMED: &str = "trimmed";
/// Tasks given their search entries (by `build-search-index`).
pub(crate) const INDEXED: &str = "indexed";
/// Steps of bulk jobs (by `step-job`, in the jobs duty).
pub(crate) const JOB_STEPS: &str = "job-steps";

/// What one sweep of one tenant did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct SweepReport {
    /// The tenant swept.
    pub tenant: String,
    /// The instant the sweep ran at, by the sweeper's clock.
    pub now: Timestamp,
    /// How long after the instant it woke for it ran, in milliseconds.
    pub late_ms: i64,
    /// Leases that had lapsed, returned to the queue.
    pub reclaimed: u64,
    /// Overdue tasks escalated.
    pub escalated: u64,
    /// Overdue tasks settled `expired`.
    pub expired: u64,
    /// What each duty counted, by name (`reclaimed`, `escalated`,
    /// `expired`, `reminded`, `trimmed`, `indexed`, and the names of any duty added): only what
    /// is more than zero.
    pub counts: BTreeMap<&'static str, u64>,
    /// Why the sweep stopped short, if it did; it is tried again later.
    pub error: Option<String>,
    /// Whether the turn ended at its cap (`calls_per_turn`) with more
    /// perhaps left to do: the tenant went to the back of the line of due
    /// tenants, and its next turn carries on.
    pub more: bool,
}

impl SweepReport {
    /// Counts `n` of `what`.
    pub(super) fn count(&mut self, what: &'static str, n: u64) {
        if n == 0 {
            return;
        }
        *self.counts.entry(what).or_default() += n;
        match what {
            RECLAIMED => self.reclaimed += n,
            ESCALATED => self.escalated += n,
            EXPIRED => self.expired += n,
            _ => {}
        }
    }

    /// How many of `what` the sweep counted.
    pub fn counted(&self, what: &str) -> u64 {
        self.counts.get(what).copied().unwrap_or(0)
    }
}

/// Counts since the sweeper started.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct SweeperStats {
    /// Tenants it keeps time for.
    pub tenants: u64,
    /// Times it woke and looked at the clock.
    pub wakes: u64,
    /// Sweeps run (one turn of one tenant each).
    pub sweeps: u64,
    /// Times a tenant's instants were read.
    pub reads: u64,
    /// Lapsed leases returned to the queue.
    pub reclaimed: u64,
    /// Overdue tasks escalated.
    pub escalated: u64,
    /// Overdue tasks settled `expired`.
    pub expired: u64,
    /// Feed entries trimmed by the retention.
    pub trimmed: u64,
    /// Sweeps that stopped short on an error.
    pub errors: u64,
    /// Entries in its schedule now: tenants waiting for an instant, and
    /// tenants in the line of due ones; at most one for each tenant.
    pub scheduled: u64,
}

/// The sweeper's counts, shared between its thread and its handle.
#[derive(Default)]
pub(super) struct Counts {
    pub(super) tenants: AtomicU64,
    pub(super) wakes: AtomicU64,
    pub(super) sweeps: AtomicU64,
    pub(super) reads: AtomicU64,
    pub(super) errors: AtomicU64,
    pub(super) scheduled: AtomicU64,
    /// What the duties counted, by name.
    done: Mutex<BTreeMap<&'static str, u64>>,
}

impl Counts {
    /// Adds one sweep and what its duties counted.
    pub(super) fn swept(&self, report: &SweepReport) {
        {
            let mut done = self.done.lock().unwrap_or_else(PoisonError::into_inner);
            for (what, n) in &report.counts {
                *done.entry(what).or_default() += n;
            }
        }
        self.sweeps.fetch_add(1, Ordering::SeqCst);
    }

    /// How many of `what` the duties counted in all.
    pub(super) fn counted(&self, what: &str) -> u64 {
        let done = self.done.lock().unwrap_or_else(PoisonError::into_inner);
        done.get(what).copied().unwrap_or(0)
    }

    pub(super) fn stats(&self) -> SweeperStats {
        let get = |a: &AtomicU64| a.load(Ordering::SeqCst);
        SweeperStats {
            tenants: get(&self.tenants),
            wakes: get(&self.wakes),
            sweeps: get(&self.sweeps),
            reads: get(&self.reads),
            reclaimed: self.counted(RECLAIMED),
            escalated: self.counted(ESCALATED),
            expired: self.counted(EXPIRED),
            trimmed: self.counted(TRIMMED),
            errors: get(&self.errors),
            scheduled: get(&self.scheduled),
        }
    }
}
