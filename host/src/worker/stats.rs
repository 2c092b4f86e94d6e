//! What a worker counts: tasks claimed, handled, settled, failed, released,
//! renewed and reclaimed, and the calls it made. It owns the counters; it must never
//! decide anything by them.

use std::sync::atomic::{AtomicU64, Ordering};

/// A worker's counts since it started.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct WorkerStats {
    /// Tasks claimed (by `claim-batch` or `settle-and-claim`).
    pub claimed: u64,
    /// Tasks a handler was started on.
    pub started: u64,
    /// Tasks settled by the worker (answered `settled`).
    pub settled: u64,
    /// Tasks whose handler answered an error or panicked, or whose outcome
    /// the component refused.
    pub failed: u64,
    /// Tasks released back to the queue (failed ones under
    /// [`OnFailure::Release`](super::OnFailure::Release), and those still
    /// in the local buffer at shutdown).
    pub released: u64,
    /// Lease renewals.
    pub renewed: u64,
    /// Lapsed leases (any worker's) this worker returned to the queue.
    pub reclaimed: u64,
    /// Finished tasks the worker no longer held when it settled them
    /// (answered `already`, `not-held` or `not-found`: its lease lapsed and
    /// the task went elsewhere, or an operator settled it): their outcome
    /// is dropped.
    pub lost: u64,
    /// Handlers still running when the shutdown deadline passed: their
    /// tasks are left to their leases.
    pub abandoned: u64,
    /// Calls of the component made, of every verb.
    pub calls: u64,
    /// Fetches (`claim-batch` or `settle-and-claim` with a count) that
    /// claimed nothing.
    pub empty_fetches: u64,
    /// Calls that failed (storage, deadline); each is tried again later.
    pub call_errors: u64,
}

#[derive(Default)]
pub(super) struct Counts {
    pub(super) claimed: AtomicU64,
    pub(super) started: AtomicU64,
    pub(super) settled: AtomicU64,
    pub(super) failed: AtomicU64,
    pub(super) released: AtomicU64,
    pub(super) renewed: AtomicU64,
    pub(super) reclaimed: AtomicU64,
    pub(super) lost: AtomicU64,
    pub(super) abandoned: AtomicU64,
    pub(super) calls: AtomicU64,
    pub(super) empty_fetches: AtomicU64,
    pub(super) call_errors: AtomicU64,
}

/// Adds `n` to `counter`.
pub(super) fn add(counter: &AtomicU64, n: u64) {
    counter.fetch_add(n, Ordering::Relaxed);
}

impl Counts {
    pub(super) fn stats(&self) -> WorkerStats {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        WorkerStats {
            claimed: get(&self.claimed),
            started: get(&self.started),
            settled: get(&self.settled),
            failed: get(&self.failed),
            released: get(&self.released),
            renewed: get(&self.renewed),
            reclaimed: get(&self.reclaimed),
            lost: get(&self.lost),
            abandoned: get(&self.abandoned),
            calls: get(&self.calls),
            empty_fetches: get(&self.empty_fetches),
            call_errors: get(&self.call_errors),
        }
    }
}
