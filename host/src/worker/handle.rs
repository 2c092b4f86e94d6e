//! The [`Worker`] handle: starting one (its loop, its handler threads and
//! the thread that hears the tenant's commits), reading its counts,
//! stopping it. It owns the threads; it must never make a call or run a
//! handler itself.

use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use leasehold_guest::model::Task;

use crate::engine::Engine;

use super::handlers::{Handler, serve};
use super::options::{Outcome, WorkerError, WorkerOptions};
use super::run::Loop;
use super::shared::Shared;
use super::stats::WorkerStats;

/// Claims tasks of one tenant's queue in batches and runs a handler on
/// each, on threads of its own, until stopped or dropped. See the
/// [module documentation](crate::worker) for what it does, and what a
/// failure, a stop and a crash leave.
pub struct Worker {
    shared: Arc<Shared>,
    deadline: Arc<Mutex<Option<Instant>>>,
    looper: Option<JoinHandle<()>>,
    listener: Option<JoinHandle<()>>,
    handlers: Vec<JoinHandle<()>>,
    grace: Duration,
}

impl std::fmt::Debug for Worker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Worker")
            .field("stats", &self.stats())
            .finish_non_exhaustive()
    }
}

impl Worker {
    /// Starts working `tenant`'s queue as `options.actor`, running
    /// `handler` on each task claimed, `options.concurrency` at once, with
    /// leases timed by the engine's clock.
    pub fn start<F, E>(
        engine: &Engine,
        tenant: &str,
        options: WorkerOptions,
        handler: F,
    ) -> Result<Worker, WorkerError>
    where
        F: Fn(&Task) -> Result<Outcome, E> + Send + Sync + 'static,
        E: std::fmt::Display,
    {
        options.check()?;
        let t = engine
            .tenant(tenant)
            .map_err(|e| WorkerError::Tenant(Box::new(e)))?;
        // Subscribed before the first fetch, so a task opened meanwhile
        // still wakes it.
        let mut changes = engine
            .watch(tenant)
            .map_err(|e| WorkerError::Tenant(Box::new(e)))?;
        let shared = Arc::new(Shared::default());
        let clock = engine.clock();
        {
            let weak = Arc::downgrade(&shared);
            clock.on_jump(Arc::new(move || {
                if let Some(s) = weak.upgrade() {
                    s.ring(|_| {});
                }
            }));
        }
        let handler: Handler =
            Arc::new(move |task: &Task| handler(task).map_err(|e| e.to_string()));
        let mut worker = Worker {
            shared: shared.clone(),
            deadline: Arc::default(),
            looper: None,
            listener: None,
            handlers: Vec::new(),
            grace: options.shutdown_grace,
        };
        let spawn = |name: &str, f: Box<dyn FnOnce() + Send>| {
            std::thread::Builder::new()
                .name(name.to_owned())
                .spawn(f)
                .map_err(WorkerError::Thread)
        };
        // On a failed start, dropping `worker` stops what did start.
        for _ in 0..options.concurrency {
            let (shared, handler) = (shared.clone(), handler.clone());
            let on_failure = options.on_failure;
            worker.handlers.push(spawn(
                "leasehold-worker-run",
                Box::new(move || serve(&shared, &handler, on_failure)),
            )?);
        }
        worker.listener = Some({
            let shared = shared.clone();
            spawn(
                "leasehold-worker-listen",
                Box::new(move || {
                    loop {
                        {
                            let s = shared.lock();
                            if s.gone {
                                return;
                            }
                        }
                        // Looks at the flag now and then; a commit wakes
                        // it at once.
                        if changes.wait(Duration::from_millis(50)).is_some() {
                            shared.ring(|s| s.heard = true);
                        }
                    }
                }),
            )?
        });
        worker.looper = Some({
            let looper = Loop::new(t, clock, options, shared);
            let deadline = worker.deadline.clone();
            spawn(
                "leasehold-worker",
                Box::new(move || {
                    looper.run(|| *deadline.lock().unwrap_or_else(PoisonError::into_inner));
                }),
            )?
        });
        Ok(worker)
    }

    /// Counts since it started.
    pub fn stats(&self) -> WorkerStats {
        self.shared.counts.stats()
    }

    /// Stops it and answers its final counts: no new task is started; the
    /// tasks in its local buffer are released back to the queue at once;
    /// running handlers are waited for until `grace` has passed, and what
    /// finished is settled. A handler still running then is left running,
    /// its outcome dropped and its task held under its lease, which is no
    /// longer renewed: when the lease lapses, `reclaim-lapsed` returns it.
    pub fn stop(mut self, grace: Duration) -> WorkerStats {
        self.shut(grace);
        self.stats()
    }

    fn shut(&mut self, grace: Duration) {
        let Some(looper) = self.looper.take() else {
            return self.join_rest();
        };
        let now = Instant::now();
        let until = now
            .checked_add(grace)
            .unwrap_or(now + Duration::from_secs(86_400 * 365));
        *self.deadline.lock().unwrap_or_else(PoisonError::into_inner) = Some(until);
        self.shared.ring(|s| s.stopping = true);
        let _ = looper.join();
        self.join_rest();
    }

    /// Joins the threads that end by themselves: the listener, and the
    /// handlers unless one was abandoned at the deadline (that thread ends
    /// when its handler returns; nothing waits for it).
    fn join_rest(&mut self) {
        self.shared.ring(|s| s.gone = true);
        if let Some(l) = self.listener.take() {
            let _ = l.join();
        }
        let abandoned = self.shared.counts.stats().abandoned > 0;
        for h in self.handlers.drain(..) {
            if !abandoned {
                let _ = h.join();
            }
        }
    }

    /// Ends every thread without one more call, as a killed process would:
    /// what it holds stays held until the leases lapse. A call in flight is
    /// finished first. For tests of what a crash leaves.
    #[cfg(feature = "testkit")]
    pub fn crash(mut self) {
        self.shared.ring(|s| s.gone = true);
        if let Some(l) = self.looper.take() {
            let _ = l.join();
        }
        if let Some(l) = self.listener.take() {
            let _ = l.join();
        }
        // Handlers may be blocked in the embedder's code: not waited for.
        self.handlers.clear();
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        self.shut(self.grace);
    }
}
