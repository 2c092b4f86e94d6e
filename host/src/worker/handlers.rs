//! The handler threads: each takes the next task of the local buffer, runs
//! the embedder's handler on it, and hands the loop its outcome (to settle)
//! or its failure (to release, or to leave to its lease). It owns running
//! handlers; it must never make a call, so a handler that hangs holds up
//! nothing but its own thread.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

use leasehold_guest::model::{Finished, Task};

use super::options::{OnFailure, Outcome};
use super::shared::Shared;
use super::stats::add;

/// The embedder's handler, its error spelt out.
pub(super) type Handler = Arc<dyn Fn(&Task) -> Result<Outcome, String> + Send + Sync>;

/// One handler thread's life: until the worker stops (a task in hand is
/// finished first) or is gone.
pub(super) fn serve(shared: &Shared, handler: &Handler, on_failure: OnFailure) {
    loop {
        let task = {
            let mut s = shared.lock();
            loop {
                if s.stopping || s.gone {
                    return;
                }
                if let Some(t) = s.buffer.pop_front() {
                    s.running += 1;
                    break t;
                }
                s = shared.work.wait(s).unwrap_or_else(|p| p.into_inner());
            }
        };
        add(&shared.counts.started, 1);
        // A panic is a failure like an error: the task is never lost with
        // the thread, and the thread lives on for the next task.
        let answer = match catch_unwind(AssertUnwindSafe(|| handler(&task))) {
            Ok(a) => a,
            Err(panic) => Err(panic_message(&*panic)),
        };
        let mut s = shared.lock();
        s.running -= 1;
        if s.gone {
            // The loop gave up on this task at its deadline: its lease
            // decides what becomes of it.
            return;
        }
        match answer {
            Ok(outcome) => {
                s.done.push(Finished {
                    id: task.id,
                    settlement: outcome.settlement,
                    decision: outcome.decision,
                });
                s.done_since.get_or_insert_with(std::time::Instant::now);
            }
            Err(error) => {
                add(&shared.counts.failed, 1);
                tracing::warn!(task = %task.id, %error, "a worker's handler failed");
                match on_failure {
                    OnFailure::Release => s.failed.push(task.id),
                    OnFailure::KeepLease => {
                        s.held.remove(&task.id);
                    }
                }
            }
        }
        s.rung = true;
        drop(s);
        shared.bell.notify_all();
    }
}

fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = panic.downcast_ref::<&str>() {
        format!("panicked: {s}")
    } else if let Some(s) = panic.downcast_ref::<String>() {
        format!("panicked: {s}")
    } else {
        "panicked".to_owned()
    }
}
