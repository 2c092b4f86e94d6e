//! How a sweeper runs, and why it did not start: the options of its loop
//! (the turn's call budget, sleeps, retries, rereads, the first-sweep
//! delay, the report callback) and of its standard duties (the batch, the
//! retention and its pace). It must never know how a duty or the loop
//! uses them.

use std::sync::Arc;
use std::time::Duration;

use crate::error::Error;

use super::report::SweepReport;

/// Why a sweeper did not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SweeperError {
    /// A tenant it was given cannot be swept: its name is invalid, say.
    #[error("the sweeper cannot keep time for tenant {name:?}")]
    Tenant {
        /// The tenant's name.
        name: String,
        /// Why.
        #[source]
        source: Box<Error>,
    },
    /// Its thread could not be started.
    #[error("could not start the sweeper's thread")]
    Thread(#[source] std::io::Error),
    /// The tenants in storage could not be listed.
    #[error("the sweeper could not list the tenants in storage")]
    List(#[source] Box<Error>),
}

/// Called after every sweep (one turn of one tenant), from the sweeper's
/// thread: for metrics.
pub type OnSweep = Arc<dyn Fn(&SweepReport) + Send + Sync>;

/// How long the change record is kept: history and feed entries older
/// than `max_age` (by the engine's clock), and beyond the newest `keep`,
/// are trimmed (see `Tenant::trim`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Retention {
    /// Entries older than this are trimmed.
    pub max_age: Option<Duration>,
    /// Entries beyond the newest this many are trimmed.
    pub keep: Option<u64>,
}

/// How a sweeper runs.
#[derive(Clone)]
pub struct SweeperOptions {
    /// Most tasks one call moves; a sweep calls again until less came back,
    /// or until its turn ends. At least 1.
    pub batch: u32,
    /// Most calls one tenant's turn makes, over all its duties in order
    /// (`reclaim-lapsed`, then `expire-overdue`, then trimming, then
    /// building the search index, then any duty added); a tenant with more to do then goes to the back of the
    /// line of due tenants. One tenant's backlog so holds up another
    /// tenant's sweep by at most one turn: `batch × calls_per_turn` tasks,
    /// or as many calls of trimming. At least 1, and at least one per duty
    /// that may spend a call finding it has nothing to do (the task duties
    /// and trimming, and the search index while it is being built; see
    /// [`Duty::least_calls`](crate::Duty::least_calls)), so a turn always
    /// reaches its last duty.
    pub calls_per_turn: u32,
    /// The longest it sleeps without looking at the clock again, in case
    /// the wall clock jumped.
    pub max_sleep: Duration,
    /// How long after a failed sweep it tries that tenant again.
    pub retry: Duration,
    /// The least time between two reads of one tenant's instants: a tenant
    /// committing thousands of times a second is read again a few times a
    /// second, not once per commit. An instant a commit moved earlier is
    /// learnt at most this late.
    pub min_reread: Duration,
    /// Called after each sweep.
    pub on_sweep: Option<OnSweep>,
    /// How long the change record is kept; `None` keeps it all.
    pub retention: Option<Retention>,
    /// How often a tenant that committed is trimmed, at most, by the
    /// engine's clock.
    pub trim_every: Duration,
    /// How long after it starts the sweeper first acts. Before anything
    /// else it logs, per tenant it knows, what its first sweep would do (see
    /// [`FirstSweepPlan`](crate::FirstSweepPlan)), reading only; then
    /// it waits this long, so that an operator may stop a server that was
    /// about to act on tenants nobody has kept time for in a while. Zero
    /// acts at once.
    pub first_sweep_after: Duration,
}

impl Default for SweeperOptions {
    fn default() -> Self {
        SweeperOptions {
            batch: 100,
            calls_per_turn: 10,
            max_sleep: Duration::from_secs(60),
            retry: Duration::from_secs(1),
            min_reread: Duration::from_millis(100),
            on_sweep: None,
            retention: None,
            trim_every: Duration::from_secs(60),
            first_sweep_after: Duration::ZERO,
        }
    }
}

impl std::fmt::Debug for SweeperOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SweeperOptions")
            .field("batch", &self.batch)
            .field("calls_per_turn", &self.calls_per_turn)
            .field("max_sleep", &self.max_sleep)
            .field("retry", &self.retry)
            .field("min_reread", &self.min_reread)
            .field("retention", &self.retention)
            .field("trim_every", &self.trim_every)
            .field("first_sweep_after", &self.first_sweep_after)
            .finish_non_exhaustive()
    }
}

/// A duration in milliseconds, as the engine's clock counts.
pub(super) fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}
