//! The [`Sweeper`] handle: starting one (with the standard duties, or with
//! a list of duties given), telling it of a tenant, reading its counts,
//! stopping it. It owns the sweeper's two threads (one hears commits, one
//! runs the loop in `schedule`) and must never do a duty's work itself.

use std::sync::{Arc, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::engine::Engine;

use super::bell::Shared;
use super::duty::Duty;
use super::options::{SweeperError, SweeperOptions};
use super::report::SweeperStats;
use super::retention::TrimRecord;
use super::schedule::Schedule;
use super::search::BuildSearchIndex;
use super::tasks::task_duties;

/// The duties [`Sweeper::start`] runs, in their order: lapsed leases back to
/// the queue (`reclaim-lapsed`), overdue tasks by their `on-expiry`
/// (`expire-overdue`), both `options.batch` tasks a call, and, where
/// `options.retention` is set, trimming the change record at most every
/// `options.trim_every`, and last, for a keyspace laid out before search,
/// building its search index (`build-search-index`) until it is built,
/// which takes calls only while there is one to build. Add duties of your own after them and start the
/// sweeper with [`Sweeper::start_with`].
pub fn standard_duties(options: &SweeperOptions) -> Vec<Box<dyn Duty>> {
    let mut duties: Vec<Box<dyn Duty>> = task_duties(options.batch).into_iter().collect();
    if let Some(retention) = options.retention {
        duties.push(Box::new(TrimRecord::new(retention, options.trim_every)));
    }
    duties.push(Box::new(BuildSearchIndex::default()));
    duties
}

/// Keeps time for the tenants of one engine, on a thread of its own, until
/// stopped or dropped.
pub struct Sweeper {
    shared: Arc<Shared>,
    threads: Vec<JoinHandle<()>>,
}

impl std::fmt::Debug for Sweeper {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sweeper")
            .field("stats", &self.stats())
            .finish_non_exhaustive()
    }
}

impl Sweeper {
    /// Starts keeping time for `tenants` and for every tenant the engine's
    /// storage lists ([`Engine::stored_tenants`]; more may be added with
    /// [`track`](Self::track), and every tenant the engine hears commit is
    /// added by itself), by the engine's clock, with the
    /// [`standard_duties`].
    pub fn start(
        engine: &Engine,
        tenants: impl IntoIterator<Item = String>,
        options: SweeperOptions,
    ) -> Result<Sweeper, SweeperError> {
        let duties = standard_duties(&options);
        Sweeper::start_with(engine, tenants, options, duties)
    }

    /// [`start`](Self::start) with `duties` in place of the standard ones:
    /// each turn of a tenant runs them in this order, within one budget of
    /// `options.calls_per_turn` calls. To keep the standard duties and add
    /// one, start from [`standard_duties`].
    pub fn start_with(
        engine: &Engine,
        tenants: impl IntoIterator<Item = String>,
        options: SweeperOptions,
        duties: Vec<Box<dyn Duty>>,
    ) -> Result<Sweeper, SweeperError> {
        let shared = Arc::new(Shared::default());
        let stored = engine
            .stored_tenants()
            .map_err(|source| SweeperError::List(Box::new(source)))?;
        let mut initial: Vec<Arc<str>> = tenants
            .into_iter()
            .chain(stored.into_iter().flatten())
            .map(Arc::from)
            .collect();
        initial.sort();
        initial.dedup();
        shared.know(initial.iter().cloned());
        for t in &initial {
            engine.tenant(t).map_err(|source| SweeperError::Tenant {
                name: t.to_string(),
                source: Box::new(source),
            })?;
        }
        // Subscribed before the first read, so a commit made meanwhile
        // still wakes it.
        let mut changes = engine.changes();
        let clock = engine.clock();
        {
            let weak = Arc::downgrade(&shared);
            clock.on_jump(Arc::new(move || {
                if let Some(s) = weak.upgrade() {
                    s.ring(|_| {});
                }
            }));
        }
        let listener = {
            let shared = shared.clone();
            std::thread::Builder::new()
                .name("leasehold-sweep-listen".to_owned())
                .spawn(move || {
                    loop {
                        if shared.lock().stop {
                            return;
                        }
                        // Looks at the stop flag now and then; a commit wakes
                        // it at once.
                        if let Some(changed) = changes.wait(Duration::from_millis(500)) {
                            shared.know(changed.tenants.iter().cloned());
                            shared.ring(|b| {
                                b.all |= changed.any;
                                b.tenants.extend(changed.tenants);
                            });
                        }
                    }
                })
                .map_err(SweeperError::Thread)?
        };
        let worker = {
            let shared = shared.clone();
            let engine = engine.clone();
            std::thread::Builder::new()
                .name("leasehold-sweep".to_owned())
                .spawn(move || {
                    Schedule::new(engine, clock, options, shared, duties).run(initial);
                })
                .map_err(SweeperError::Thread)?
        };
        Ok(Sweeper {
            shared,
            threads: vec![listener, worker],
        })
    }

    /// Keeps time for `tenant` too (a tenant seen by a request, say). A
    /// tenant it knows already costs a set lookup; its commits keep it up
    /// to date.
    pub fn track(&self, tenant: &str) {
        {
            let mut known = self
                .shared
                .known
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            if known.contains(tenant) {
                return;
            }
            known.insert(Arc::from(tenant));
        }
        let t: Arc<str> = Arc::from(tenant);
        self.shared.ring(|b| b.tenants.push(t));
    }

    /// Counts since it started.
    pub fn stats(&self) -> SweeperStats {
        self.shared.counts.stats()
    }

    /// How many of `what` its duties counted since it started (see
    /// [`Turn::count`](crate::Turn::count)): the standard duties count
    /// `reclaimed`, `escalated`, `expired` and `trimmed`, which
    /// [`stats`](Self::stats) also gives.
    pub fn counted(&self, what: &str) -> u64 {
        self.shared.counts.counted(what)
    }

    /// Asks it to stop after the sweep in hand, if any, without waiting;
    /// dropping it waits.
    pub fn stop(&self) {
        self.shared.ring(|b| b.stop = true);
    }
}

impl Drop for Sweeper {
    fn drop(&mut self) {
        self.stop();
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}
