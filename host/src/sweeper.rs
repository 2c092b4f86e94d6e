//! The sweeper: keeping time for an engine's tenants, so that lapsed leases
//! come back to the queue and overdue tasks act on their `on-expiry`
//! without anyone calling. For each tenant it knows, it keeps the next
//! instant that matters (the earliest lease end, the earliest due time of a
//! task still owed its expiry), sleeps until the earliest over all tenants,
//! and at that instant calls `reclaim-lapsed` and `expire-overdue` on that
//! tenant alone. A commit (in this process, or in another on a shared
//! PostgreSQL database) may move a tenant's instants, so the tenants it
//! names are read again; nothing else is read while nothing is due.
//!
//! Both verbs are exactly-once in the rules (a task leaves the index it was
//! swept from as it is moved), so sweepers in several processes share the
//! work without doing anything twice; the verbs' turns keep them from
//! racing. The tenants it knows are those it is given, those its backend
//! lists when it starts (so a tenant nobody has called since a restart is
//! still swept), and those it hears commit. It owns its thread, its
//! schedule and its counts; it must never decide a rule itself, read a
//! tenant it does not know, or sleep past an instant it knows of by more
//! than its clock's wake-up.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use leasehold_guest::model::Timestamp;
use leasehold_guest::validate::MAX_TIMESTAMP;

use crate::clock::Clock;
use crate::engine::Engine;
use crate::error::Error;

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
    /// Why the sweep stopped short, if it did; it is tried again later.
    pub error: Option<String>,
}

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

/// Called after every sweep, from the sweeper's thread: for metrics.
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
    /// Most tasks one call moves; a sweep calls again until less came back.
    pub batch: u32,
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
    /// How often a tenant that committed is trimmed, at most.
    pub trim_every: Duration,
}

impl Default for SweeperOptions {
    fn default() -> Self {
        SweeperOptions {
            batch: 100,
            max_sleep: Duration::from_secs(60),
            retry: Duration::from_secs(1),
            min_reread: Duration::from_millis(100),
            on_sweep: None,
            retention: None,
            trim_every: Duration::from_secs(60),
        }
    }
}

impl std::fmt::Debug for SweeperOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SweeperOptions")
            .field("batch", &self.batch)
            .field("max_sleep", &self.max_sleep)
            .field("retry", &self.retry)
            .field("min_reread", &self.min_reread)
            .field("retention", &self.retention)
            .field("trim_every", &self.trim_every)
            .finish_non_exhaustive()
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
    /// Sweeps run (one tenant each).
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
}

/// What wakes the sweeper's thread.
#[derive(Default)]
struct Bell {
    rung: bool,
    stop: bool,
    /// Tenants to read again.
    tenants: Vec<Arc<str>>,
    /// Every known tenant may have changed.
    all: bool,
}

#[derive(Default)]
struct Counts {
    tenants: AtomicU64,
    wakes: AtomicU64,
    sweeps: AtomicU64,
    reads: AtomicU64,
    reclaimed: AtomicU64,
    escalated: AtomicU64,
    expired: AtomicU64,
    trimmed: AtomicU64,
    errors: AtomicU64,
}

struct Shared {
    /// Every tenant it was told of, so that telling it again costs nothing.
    known: Mutex<HashSet<Arc<str>>>,
    bell: Mutex<Bell>,
    cond: Condvar,
    counts: Counts,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Bell> {
        self.bell.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn ring(&self, f: impl FnOnce(&mut Bell)) {
        let mut b = self.lock();
        f(&mut b);
        b.rung = true;
        drop(b);
        self.cond.notify_all();
    }
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
    /// added by itself), by the engine's clock.
    pub fn start(
        engine: &Engine,
        tenants: impl IntoIterator<Item = String>,
        options: SweeperOptions,
    ) -> Result<Sweeper, SweeperError> {
        let shared = Arc::new(Shared {
            known: Mutex::default(),
            bell: Mutex::new(Bell::default()),
            cond: Condvar::new(),
            counts: Counts::default(),
        });
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
        shared
            .known
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .extend(initial.iter().cloned());
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
                            shared
                                .known
                                .lock()
                                .unwrap_or_else(PoisonError::into_inner)
                                .extend(changed.tenants.iter().cloned());
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
                    Schedule {
                        engine,
                        clock,
                        options,
                        shared,
                        next: HashMap::new(),
                        read_at: HashMap::new(),
                        untrimmed: HashSet::new(),
                        next_trim: Instant::now(),
                        due: BinaryHeap::new(),
                    }
                    .run(initial);
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
        let c = &self.shared.counts;
        let get = |a: &AtomicU64| a.load(Ordering::SeqCst);
        SweeperStats {
            tenants: get(&c.tenants),
            wakes: get(&c.wakes),
            sweeps: get(&c.sweeps),
            reads: get(&c.reads),
            reclaimed: get(&c.reclaimed),
            escalated: get(&c.escalated),
            expired: get(&c.expired),
            trimmed: get(&c.trimmed),
            errors: get(&c.errors),
        }
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

/// The sweeper's thread: each tenant's next instant, and a heap of them.
struct Schedule {
    engine: Engine,
    clock: Arc<dyn Clock>,
    options: SweeperOptions,
    shared: Arc<Shared>,
    /// Each known tenant's next instant, if any.
    next: HashMap<Arc<str>, Option<Timestamp>>,
    /// (instant, tenant), earliest first; an entry whose instant is no
    /// longer the tenant's is passed over.
    due: BinaryHeap<Reverse<(Timestamp, Arc<str>)>>,
    /// When each tenant's instants were last read, by the monotonic clock.
    read_at: HashMap<Arc<str>, Instant>,
    /// Tenants that committed since they were last trimmed.
    untrimmed: HashSet<Arc<str>>,
    /// When the next trim of them is due.
    next_trim: Instant,
}

impl Schedule {
    fn run(mut self, initial: Vec<Arc<str>>) {
        let mut stale: HashSet<Arc<str>> = initial.into_iter().collect();
        if self.options.retention.is_some() {
            self.untrimmed.extend(stale.iter().cloned());
        }
        loop {
            if self.options.retention.is_some()
                && !self.untrimmed.is_empty()
                && Instant::now() >= self.next_trim
            {
                let due: Vec<Arc<str>> = self.untrimmed.drain().collect();
                for t in &due {
                    self.trim(t);
                }
                self.next_trim = Instant::now() + self.options.trim_every;
            }
            // Tenants read a moment ago wait for their next turn.
            let gap = self.options.min_reread;
            let mut soonest: Option<Instant> = None;
            let ready: Vec<Arc<str>> = stale
                .iter()
                .filter(|t| match self.read_at.get(*t) {
                    Some(at) if at.elapsed() < gap => {
                        let turn = *at + gap;
                        soonest = Some(soonest.map_or(turn, |s| s.min(turn)));
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
            self.shared
                .counts
                .tenants
                .store(self.next.len() as u64, Ordering::Relaxed);
            let now = self.clock.now();
            self.shared.counts.wakes.fetch_add(1, Ordering::Relaxed);
            while let Some(Reverse((at, tenant))) = self.due.peek().cloned() {
                if at > now {
                    break;
                }
                self.due.pop();
                if self.next.get(&tenant) != Some(&Some(at)) {
                    continue;
                }
                self.sweep(&tenant, at, now);
            }
            // Sleep until the next instant, a commit, a clock moved by hand
            // or a stop.
            let wait = match self.due.peek() {
                Some(Reverse((at, _))) => {
                    let ms = at.saturating_sub(self.clock.now()).max(0);
                    Duration::from_millis(ms as u64).min(self.options.max_sleep)
                }
                None => self.options.max_sleep,
            };
            let mut until = Instant::now() + wait;
            if let Some(turn) = soonest {
                until = until.min(turn);
            }
            if self.options.retention.is_some() && !self.untrimmed.is_empty() {
                until = until.min(self.next_trim);
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
            if std::mem::take(&mut bell.all) {
                stale.extend(self.next.keys().cloned());
            }
            if self.options.retention.is_some() {
                self.untrimmed.extend(bell.tenants.iter().cloned());
            }
            stale.extend(bell.tenants.drain(..));
        }
    }

    /// Trims `tenant`'s record to the retention, a batch at a time.
    fn trim(&mut self, tenant: &Arc<str>) {
        let Some(r) = self.options.retention else {
            return;
        };
        let before = r.max_age.map(|age| {
            let ms = i64::try_from(age.as_millis()).unwrap_or(i64::MAX);
            self.clock.now().saturating_sub(ms).max(0)
        });
        let outcome = (|| -> Result<u64, Error> {
            let t = self.engine.tenant(tenant)?;
            let mut removed = 0;
            loop {
                let out = t.trim(before, r.keep, 1000)?;
                removed += u64::from(out.feed_removed);
                if !out.more {
                    return Ok(removed);
                }
            }
        })();
        match outcome {
            Ok(n) => {
                self.shared.counts.trimmed.fetch_add(n, Ordering::Relaxed);
                if n > 0 {
                    tracing::info!(tenant = %tenant, removed = n, "trimmed the change record");
                }
            }
            Err(e) => {
                self.shared.counts.errors.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(tenant = %tenant, error = %e, "trimming the change record failed; trying again later");
                self.untrimmed.insert(tenant.clone());
            }
        }
    }

    /// Reads `tenant`'s next instant and schedules it.
    fn reread(&mut self, tenant: &Arc<str>) {
        self.shared.counts.reads.fetch_add(1, Ordering::Relaxed);
        self.read_at.insert(tenant.clone(), Instant::now());
        let next = match self.instants(tenant) {
            Ok(next) => next,
            Err(e) => {
                self.shared.counts.errors.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(tenant = %tenant, error = %e, "the sweeper could not read a tenant's next instant; trying again later");
                Some(self.clock.now().saturating_add(retry_ms(&self.options)))
            }
        };
        self.schedule(tenant, next);
    }

    fn schedule(&mut self, tenant: &Arc<str>, next: Option<Timestamp>) {
        self.next.insert(tenant.clone(), next);
        if let Some(at) = next {
            self.due.push(Reverse((at, tenant.clone())));
        }
    }

    /// The earliest of the tenant's lease ends and of the due times of its
    /// tasks still owed their expiry.
    fn instants(&self, tenant: &str) -> Result<Option<Timestamp>, Error> {
        let t = self.engine.tenant(tenant)?;
        let lease = t.next_lease_end()?;
        let due = t.overdue(MAX_TIMESTAMP, 1)?.first().and_then(|x| x.due_at);
        Ok(match (lease, due) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        })
    }

    fn sweep(&mut self, tenant: &Arc<str>, at: Timestamp, now: Timestamp) {
        let mut report = SweepReport {
            tenant: tenant.to_string(),
            now,
            late_ms: now - at,
            ..SweepReport::default()
        };
        let batch = self.options.batch;
        let outcome = (|| -> Result<(), Error> {
            let t = self.engine.tenant(tenant)?;
            loop {
                let moved = t.reclaim_lapsed(now, batch)?;
                report.reclaimed += moved.len() as u64;
                if moved.len() < batch as usize {
                    break;
                }
            }
            loop {
                let acted = t.expire_overdue(now, batch)?;
                for task in &acted {
                    if task.state == leasehold_guest::model::TaskState::Escalated {
                        report.escalated += 1;
                    } else {
                        report.expired += 1;
                    }
                }
                if acted.len() < batch as usize {
                    break;
                }
            }
            Ok(())
        })();
        let c = &self.shared.counts;
        c.sweeps.fetch_add(1, Ordering::SeqCst);
        c.reclaimed.fetch_add(report.reclaimed, Ordering::SeqCst);
        c.escalated.fetch_add(report.escalated, Ordering::SeqCst);
        c.expired.fetch_add(report.expired, Ordering::SeqCst);
        match outcome {
            Ok(()) => {
                tracing::info!(
                    tenant = %tenant,
                    late_ms = report.late_ms,
                    reclaimed = report.reclaimed,
                    escalated = report.escalated,
                    expired = report.expired,
                    "swept"
                );
                self.reread(tenant);
            }
            Err(e) => {
                c.errors.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(tenant = %tenant, error = %e, "a sweep failed; trying again later");
                report.error = Some(e.to_string());
                let retry = now.saturating_add(retry_ms(&self.options));
                self.schedule(tenant, Some(retry));
            }
        }
        if let Some(f) = &self.options.on_sweep {
            f(&report);
        }
    }
}

fn retry_ms(o: &SweeperOptions) -> i64 {
    i64::try_from(o.retry.as_millis()).unwrap_or(i64::MAX)
}
