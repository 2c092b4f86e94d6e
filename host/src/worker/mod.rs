//! The worker: a loop that works one tenant's queue for one actor, as a
//! job queue's worker does (graphile-worker's local queue, River's fetch
//! limit), with every rule left to the component: what may be claimed, by
//! whom, for how long, and how a task settles are the verbs' to decide; the
//! worker only chooses when to call them.
//!
//! It keeps a small local buffer of claimed tasks, fetched `batch` at a
//! time with `claim-batch` and, once tasks have finished, with
//! `settle-and-claim`, which settles the finished ones and claims the next
//! heads in one call and one transaction: a steady worker makes one call per
//! batch. Handlers run on `concurrency` threads of their own. Finished
//! tasks wait for the next fetch, or at most `flush_after` when no fetch is
//! coming (the queue is empty, or handlers are slow), and are then settled
//! in a call of their own. Every task held (buffered, running or finished
//! and not yet settled) has its lease renewed once half of it has passed,
//! by the engine's clock. An empty fetch waits `idle_min`, doubling to
//! `idle_max`, before the next; a commit of the tenant (a task opened, a
//! lease reclaimed) ends the wait at once.
//!
//! What a failure, a stop and a crash leave:
//!
//! - A handler that answers an error or panics fails its task, counted in
//!   `failed`: under [`OnFailure::Release`] (the default) it is released
//!   back to the queue at once and may be taken again (by this worker too:
//!   a task that always fails is retried for as long as workers take it);
//!   under [`OnFailure::KeepLease`] it stays held under a lease no longer
//!   renewed, and `reclaim-lapsed` returns it once the lease lapses. An
//!   outcome the component refuses (a decision the task's outcomes refuse)
//!   is a failure too. No failure loses a task.
//! - A task whose lease could not be kept (renewal refused: it lapsed and
//!   was reclaimed) is not started, or its outcome is answered `not-held`
//!   and dropped, counted in `lost`: another worker has it now.
//! - [`Worker::stop`] (and dropping the worker, with `shutdown_grace`)
//!   starts no new task, releases the tasks of its local buffer at once,
//!   waits for running handlers until the grace has passed, settles what
//!   finished and answers the counts. A handler still running then is left
//!   to finish on its own thread; its task stays held until its lease
//!   lapses, and its outcome is dropped.
//! - A crash (the process killed) leaves every task the worker held
//!   (buffered, running, or finished and not yet settled) claimed until its
//!   lease lapses; then `reclaim-lapsed` returns it to the queue (every
//!   worker makes that call before it fetches, at most once per
//!   [`WorkerOptions::reclaim_ms`], and so does the sweeper) and another
//!   worker takes it. A task finished but not yet settled
//!   is done again: handlers should be idempotent.
//!
//! The files below: the handle (`handle`), its options and a handler's
//! outcome (`options`), its counts (`stats`), what its threads share
//! (`shared`), the handler threads (`handlers`) and the loop that makes
//! every call (`run`). This file only names them and what is public.

mod handle;
mod handlers;
mod options;
mod run;
mod shared;
mod stats;

pub use handle::Worker;
pub use options::{OnFailure, Outcome, WorkerError, WorkerOptions};
pub use stats::WorkerStats;
#[cfg(test)]
mod tests;
