//! What a [`Worker`](super::Worker) is started with: who it works as, how
//! many tasks it fetches and runs at once, how long its leases are, what
//! becomes of a task whose handler failed, and what a handler answers. It
//! owns the settings and their checks; it must never make a call.

use std::time::Duration;

use leasehold_guest::model::{Decision, Settlement};

/// How a finished task settles: what a handler answers for a task it did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outcome {
    /// The settlement (most handlers answer [`Settlement::Completed`]).
    pub settlement: Settlement,
    /// The decision it carries, checked by the component against the task's
    /// outcomes as `settle` checks it.
    pub decision: Option<Decision>,
}

impl Outcome {
    /// Completed, with no decision.
    pub fn completed() -> Outcome {
        Outcome {
            settlement: Settlement::Completed,
            decision: None,
        }
    }

    /// Completed with `decision`.
    pub fn decided(decision: Decision) -> Outcome {
        Outcome {
            settlement: Settlement::Completed,
            decision: Some(decision),
        }
    }
}

/// What becomes of a task whose handler answered an error or panicked (or
/// whose outcome the component refused).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum OnFailure {
    /// Released back to the queue at once (one `release` call): any worker,
    /// this one included, may take it again straight away.
    #[default]
    Release,
    /// Kept under its lease, no longer renewed: it goes back to the queue
    /// when the lease lapses and `reclaim-lapsed` (a worker's, or the
    /// sweeper's) moves it, so the lease doubles as a retry delay.
    KeepLease,
}

/// How a [`Worker`](super::Worker) works. Build with [`WorkerOptions::new`]
/// and the setters, or set the fields.
#[derive(Clone, Debug)]
pub struct WorkerOptions {
    /// The actor the worker claims as (the queue query's `actor`).
    pub actor: String,
    /// The roles it claims for (the queue query's `roles`).
    pub roles: Vec<String>,
    /// How many tasks one fetch claims (1–100): the size of the local
    /// buffer, and so of the batch its finished tasks are settled in.
    pub batch: u32,
    /// How many handlers run at once, each on a thread of its own.
    pub concurrency: usize,
    /// The lease every claim is made under, in milliseconds of the
    /// engine's clock; a task held for half of it is renewed.
    pub lease_ms: u32,
    /// How long finished tasks wait for a fetch to be settled with before
    /// they are settled in a call of their own.
    pub flush_after: Duration,
    /// The first wait after a fetch that found nothing; each empty fetch
    /// doubles it up to `idle_max`. A commit of the tenant ends the wait.
    pub idle_min: Duration,
    /// The longest wait between fetches while the queue stays empty.
    pub idle_max: Duration,
    /// What becomes of a task whose handler failed.
    pub on_failure: OnFailure,
    /// How often, at most, in milliseconds of the engine's clock, the
    /// worker returns the tenant's lapsed leases to the queue
    /// (`reclaim-lapsed`) before it fetches: a crashed worker's tasks come
    /// back without a sweeper. 0 never (a tenant a sweeper serves).
    pub reclaim_ms: u32,
    /// How long dropping the worker waits for running handlers (see
    /// [`Worker::stop`](super::Worker::stop)).
    pub shutdown_grace: Duration,
}

impl WorkerOptions {
    /// A worker claiming as `actor` for `roles`, one task at a time, ten
    /// fetched at once, under 30-second leases, returning lapsed leases to
    /// the queue every 30 seconds at most.
    pub fn new(actor: impl Into<String>, roles: &[&str]) -> WorkerOptions {
        WorkerOptions {
            actor: actor.into(),
            roles: roles.iter().map(|r| (*r).to_owned()).collect(),
            batch: 10,
            concurrency: 1,
            lease_ms: 30_000,
            flush_after: Duration::from_millis(100),
            idle_min: Duration::from_millis(10),
            idle_max: Duration::from_secs(1),
            on_failure: OnFailure::Release,
            reclaim_ms: 30_000,
            shutdown_grace: Duration::from_secs(10),
        }
    }

    /// Sets [`batch`](Self::batch).
    pub fn batch(mut self, batch: u32) -> Self {
        self.batch = batch;
        self
    }

    /// Sets [`concurrency`](Self::concurrency).
    pub fn concurrency(mut self, n: usize) -> Self {
        self.concurrency = n;
        self
    }

    /// Sets [`lease_ms`](Self::lease_ms), and [`reclaim_ms`](Self::reclaim_ms)
    /// to the same (set it after this to differ).
    pub fn lease_ms(mut self, ms: u32) -> Self {
        self.lease_ms = ms;
        self.reclaim_ms = ms;
        self
    }

    /// Sets [`flush_after`](Self::flush_after).
    pub fn flush_after(mut self, d: Duration) -> Self {
        self.flush_after = d;
        self
    }

    /// Sets [`idle_min`](Self::idle_min) and [`idle_max`](Self::idle_max).
    pub fn idle(mut self, min: Duration, max: Duration) -> Self {
        self.idle_min = min;
        self.idle_max = max;
        self
    }

    /// Sets [`on_failure`](Self::on_failure).
    pub fn on_failure(mut self, f: OnFailure) -> Self {
        self.on_failure = f;
        self
    }

    /// Sets [`reclaim_ms`](Self::reclaim_ms).
    pub fn reclaim_ms(mut self, ms: u32) -> Self {
        self.reclaim_ms = ms;
        self
    }

    /// Sets [`shutdown_grace`](Self::shutdown_grace).
    pub fn shutdown_grace(mut self, d: Duration) -> Self {
        self.shutdown_grace = d;
        self
    }

    /// What is wrong with these options, if anything. The component checks
    /// the same bounds; checking them here refuses a worker at its start
    /// rather than at every fetch.
    pub(super) fn check(&self) -> Result<(), WorkerError> {
        let bad = |why: &str| Err(WorkerError::Options(why.to_owned()));
        if self.actor.is_empty() {
            return bad("actor is empty");
        }
        if !(1..=100).contains(&self.batch) {
            return bad("batch must be 1–100");
        }
        if self.concurrency == 0 {
            return bad("concurrency must be at least 1");
        }
        if !(2..=604_800_000).contains(&self.lease_ms) {
            return bad("lease_ms must be 2–604800000");
        }
        if self.idle_min.is_zero() || self.idle_max < self.idle_min {
            return bad("idle_min must be above zero and at most idle_max");
        }
        Ok(())
    }
}

/// Why a worker did not start.
#[derive(Debug)]
#[non_exhaustive]
pub enum WorkerError {
    /// The options are out of bounds; says which.
    Options(String),
    /// The tenant's name is refused.
    Tenant(Box<crate::error::Error>),
    /// A thread could not be started.
    Thread(std::io::Error),
}

impl std::fmt::Display for WorkerError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WorkerError::Options(why) => write!(f, "worker options: {why}"),
            WorkerError::Tenant(e) => write!(f, "worker tenant: {e}"),
            WorkerError::Thread(e) => write!(f, "worker thread: {e}"),
        }
    }
}

impl std::error::Error for WorkerError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            WorkerError::Options(_) => None,
            WorkerError::Tenant(e) => Some(&**e),
            WorkerError::Thread(e) => Some(e),
        }
    }
}
