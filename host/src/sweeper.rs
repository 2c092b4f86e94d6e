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
//! Before its first turn it logs, per tenant it knows, what that turn would
//! do ([`FirstSweepPlan`], read only), and waits `first_sweep_after`: on a
//! database nobody swept for a while, the first sweep may move many tasks
//! at once, and an operator should see that before it happens.
//!
//! Tenants take turns. A tenant whose instant has come joins the back of a
//! line of due tenants; its turn makes at most `calls_per_turn` calls, each
//! moving at most `batch` tasks; a tenant with more to do then goes to the
//! back of the line again, behind every tenant that came due during its
//! turn. So one tenant's backlog, however large, holds up another tenant's
//! sweep by at most one turn. The schedule keeps one entry per tenant (the
//! instant it waits for, or its place in the line), so it grows with the
//! tenants it knows and never with their commits.
//!
//! Both verbs are exactly-once in the rules (a task leaves the index it was
//! swept from as it is moved), so sweepers in several processes share the
//! work without doing anything twice; the verbs' turns keep them from
//! racing. The tenants it knows are those it is given, those its backend
//! lists when it starts (so a tenant nobody has called since a restart is
//! still swept), and those it hears commit. It owns its thread, its
//! schedule and its counts; it must never decide a rule itself, read a
//! tenant it does not know, sleep past an instant it knows of by more than
//! its clock's wake-up, or let one tenant's turn run past its cap while
//! another tenant is due.

use std::collections::{BTreeSet, HashMap, HashSet, VecDeque};
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
    /// Whether the turn ended at its cap (`calls_per_turn`) with more
    /// perhaps left to move: the tenant went to the back of the line of due
    /// tenants, and its next turn carries on.
    pub more: bool,
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
    /// Most calls one tenant's turn makes (of `reclaim-lapsed`, then of
    /// `expire-overdue`); a tenant with more to do then goes to the back of
    /// the line of due tenants. One tenant's backlog so holds up another
    /// tenant's sweep by at most `batch × calls_per_turn` tasks. At least 1.
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
    /// How often a tenant that committed is trimmed, at most.
    pub trim_every: Duration,
    /// How long after it starts the sweeper first acts. Before anything
    /// else it logs, per tenant it knows, what its first sweep would do (see
    /// [`FirstSweepPlan`]), reading only; then it waits this long, so that
    /// an operator may stop a server that was about to act on tenants
    /// nobody has kept time for in a while. Zero acts at once.
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

/// What a tenant's first sweep would do, read before it runs (at most
/// [`PLAN_LIMIT`] tasks of each kind are counted). The rules name no read
/// that counts lapsed leases, so they are given as the leases held and
/// whether the earliest of them has lapsed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct FirstSweepPlan {
    /// The tenant.
    pub tenant: String,
    /// The instant the plan was read at.
    pub now: Timestamp,
    /// Tasks claimed under a lease.
    pub leased: u64,
    /// The earliest lease end, if one is held.
    pub earliest_lease_end: Option<Timestamp>,
    /// Whether at least one lease has lapsed (it is reclaimed first).
    pub lapsed: bool,
    /// Overdue tasks whose `on-expiry` is `escalate`.
    pub to_escalate: u64,
    /// Overdue tasks whose `on-expiry` settles them (`deny`, `proceed`).
    pub to_expire: u64,
    /// Armed timers (the sweep does not fire timers: workers claim them
    /// with `claim-due`).
    pub timers_armed: u64,
    /// Whether the earliest armed timer is due.
    pub timer_due: bool,
}

/// The most overdue tasks a [`FirstSweepPlan`] counts.
pub const PLAN_LIMIT: u32 = 1000;

impl FirstSweepPlan {
    /// Whether the first sweep would change anything.
    pub fn acts(&self) -> bool {
        self.lapsed || self.to_escalate > 0 || self.to_expire > 0
    }

    /// Reads what `tenant`'s first sweep at `now` would do; reads only.
    pub fn read(engine: &Engine, tenant: &str, now: Timestamp) -> Result<FirstSweepPlan, Error> {
        let t = engine.tenant(tenant)?;
        let earliest_lease_end = t.next_lease_end()?;
        let mut plan = FirstSweepPlan {
            tenant: tenant.to_owned(),
            now,
            leased: t.leased_count()?,
            earliest_lease_end,
            lapsed: earliest_lease_end.is_some_and(|end| end <= now),
            timers_armed: t.pending_count()?,
            timer_due: t.next_due()?.is_some_and(|at| at <= now),
            ..FirstSweepPlan::default()
        };
        for task in t.overdue(now, PLAN_LIMIT)? {
            if task.on_expiry == leasehold_guest::model::OnExpiry::Escalate {
                plan.to_escalate += 1;
            } else {
                plan.to_expire += 1;
            }
        }
        Ok(plan)
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
    scheduled: AtomicU64,
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
                        table: Timetable::default(),
                        read_at: HashMap::new(),
                        untrimmed: HashSet::new(),
                        next_trim: Instant::now(),
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
            scheduled: get(&c.scheduled),
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

/// Where a tenant stands in the [`Timetable`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Place {
    /// Nothing to wait for.
    Idle,
    /// Waiting for this instant.
    Waiting(Timestamp),
    /// In the line of due tenants.
    InLine,
    /// Taking its turn, out of the line until it ends.
    Turn,
}

/// Each known tenant's next instant, and the line of tenants whose instant
/// has come, in the order they take their turns: one entry per tenant, in
/// one or the other, so that reading a tenant again replaces its entry.
#[derive(Default)]
struct Timetable {
    place: HashMap<Arc<str>, Place>,
    /// (instant, tenant) of each waiting tenant, earliest first.
    waiting: BTreeSet<(Timestamp, Arc<str>)>,
    /// (the instant it came due at, tenant), front first.
    line: VecDeque<(Timestamp, Arc<str>)>,
}

impl Timetable {
    /// Tenants it knows.
    fn tenants(&self) -> usize {
        self.place.len()
    }

    /// Entries waiting or in line.
    fn entries(&self) -> usize {
        self.waiting.len() + self.line.len()
    }

    fn in_line(&self, tenant: &str) -> bool {
        self.place.get(tenant) == Some(&Place::InLine)
    }

    /// Whether a tenant waits in line, due now.
    fn any_due(&self) -> bool {
        !self.line.is_empty()
    }

    /// The earliest instant a tenant waits for.
    fn earliest(&self) -> Option<Timestamp> {
        self.waiting.first().map(|(at, _)| *at)
    }

    /// Records `tenant`'s next instant as read, in place of the one it had.
    /// A tenant in the line keeps its place: its turn reads it again.
    fn set(&mut self, tenant: &Arc<str>, next: Option<Timestamp>) {
        let place = next.map_or(Place::Idle, Place::Waiting);
        match self.place.insert(tenant.clone(), place) {
            Some(Place::InLine) => {
                self.place.insert(tenant.clone(), Place::InLine);
                return;
            }
            Some(Place::Waiting(old)) => {
                self.waiting.remove(&(old, tenant.clone()));
            }
            Some(Place::Idle | Place::Turn) | None => {}
        }
        if let Some(at) = next {
            self.waiting.insert((at, tenant.clone()));
        }
    }

    /// Puts every tenant whose instant is at or before `now` at the back of
    /// the line, earliest instant first.
    fn come_due(&mut self, now: Timestamp) {
        while self.earliest().is_some_and(|at| at <= now) {
            if let Some((at, tenant)) = self.waiting.pop_first() {
                self.place.insert(tenant.clone(), Place::InLine);
                self.line.push_back((at, tenant));
            }
        }
    }

    /// The tenant at the front of the line, out of it for its turn, and
    /// the instant it came due at.
    fn next_turn(&mut self) -> Option<(Timestamp, Arc<str>)> {
        let (at, tenant) = self.line.pop_front()?;
        self.place.insert(tenant.clone(), Place::Turn);
        Some((at, tenant))
    }

    /// Puts a tenant whose turn ended with more to do at the back of the
    /// line; it keeps the instant it came due at.
    fn back_of_line(&mut self, tenant: &Arc<str>, at: Timestamp) {
        self.place.insert(tenant.clone(), Place::InLine);
        self.line.push_back((at, tenant.clone()));
    }
}

/// The sweeper's thread: its timetable, and when each tenant was read.
struct Schedule {
    engine: Engine,
    clock: Arc<dyn Clock>,
    options: SweeperOptions,
    shared: Arc<Shared>,
    table: Timetable,
    /// When each tenant's instants were last read, by the monotonic clock.
    read_at: HashMap<Arc<str>, Instant>,
    /// Tenants that committed since they were last trimmed.
    untrimmed: HashSet<Arc<str>>,
    /// When the next trim of them is due.
    next_trim: Instant,
}

impl Schedule {
    /// Logs what the first sweep of each tenant would do, then waits
    /// `first_sweep_after` (or for a stop); answers whether to go on.
    fn first(&self, initial: &[Arc<str>]) -> bool {
        let now = self.clock.now();
        let after = self.options.first_sweep_after;
        let (mut acting, mut failed) = (0u64, 0u64);
        for tenant in initial {
            match FirstSweepPlan::read(&self.engine, tenant, now) {
                Ok(p) if p.acts() || p.timer_due => {
                    acting += u64::from(p.acts());
                    tracing::info!(
                        tenant = %tenant,
                        leased = p.leased,
                        lapsed = p.lapsed,
                        earliest_lease_end = p.earliest_lease_end,
                        to_escalate = p.to_escalate,
                        to_expire = p.to_expire,
                        timers_armed = p.timers_armed,
                        timer_due = p.timer_due,
                        first_sweep_in_ms = after.as_millis() as u64,
                        "first sweep plan: {}{} overdue to escalate, {} to expire (at most {PLAN_LIMIT} counted){}",
                        if p.lapsed { "lapsed leases to reclaim; " } else { "" },
                        p.to_escalate,
                        p.to_expire,
                        if p.timer_due { "; timers due for workers" } else { "" },
                    );
                }
                Ok(_) => {}
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
            "first sweep plan: {acting} of {} tenants have leases or tasks the first sweep acts on; it runs in {after:?}",
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

    fn run(mut self, initial: Vec<Arc<str>>) {
        if !self.first(&initial) {
            return;
        }
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
                self.sweep(&tenant, at, now);
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
                stale.extend(self.table.place.keys().cloned());
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

    /// Reads `tenant`'s next instant and schedules it; counted once it is
    /// in the schedule.
    fn reread(&mut self, tenant: &Arc<str>) {
        self.read_at.insert(tenant.clone(), Instant::now());
        let next = match self.instants(tenant) {
            Ok(next) => next,
            Err(e) => {
                self.shared.counts.errors.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(tenant = %tenant, error = %e, "the sweeper could not read a tenant's next instant; trying again later");
                Some(self.clock.now().saturating_add(retry_ms(&self.options)))
            }
        };
        self.table.set(tenant, next);
        self.publish();
        self.shared.counts.reads.fetch_add(1, Ordering::SeqCst);
    }

    /// The schedule's sizes, for [`Sweeper::stats`].
    fn publish(&self) {
        let c = &self.shared.counts;
        c.tenants
            .store(self.table.tenants() as u64, Ordering::Relaxed);
        c.scheduled
            .store(self.table.entries() as u64, Ordering::SeqCst);
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

    /// One turn of `tenant`, due since `at`: lapsed leases first, then
    /// overdue tasks, in at most `calls_per_turn` calls. A tenant left with
    /// more to do goes to the back of the line, behind those that came due
    /// meanwhile; one done is read again.
    fn sweep(&mut self, tenant: &Arc<str>, at: Timestamp, now: Timestamp) {
        let mut report = SweepReport {
            tenant: tenant.to_string(),
            now,
            late_ms: now - at,
            ..SweepReport::default()
        };
        let batch = self.options.batch.max(1);
        let mut calls = self.options.calls_per_turn.max(1);
        // Answers whether the turn ended at its cap. Each turn starts with
        // `reclaim-lapsed`, so that a lease that lapsed meanwhile is
        // returned before its task can expire.
        let outcome = (|| -> Result<bool, Error> {
            let t = self.engine.tenant(tenant)?;
            loop {
                let moved = t.reclaim_lapsed(now, batch)?;
                calls -= 1;
                report.reclaimed += moved.len() as u64;
                if moved.len() < batch as usize {
                    break;
                }
                if calls == 0 {
                    return Ok(true);
                }
            }
            loop {
                if calls == 0 {
                    return Ok(true);
                }
                let acted = t.expire_overdue(now, batch)?;
                calls -= 1;
                for task in &acted {
                    if task.state == leasehold_guest::model::TaskState::Escalated {
                        report.escalated += 1;
                    } else {
                        report.expired += 1;
                    }
                }
                if acted.len() < batch as usize {
                    return Ok(false);
                }
            }
        })();
        let c = &self.shared.counts;
        c.sweeps.fetch_add(1, Ordering::SeqCst);
        c.reclaimed.fetch_add(report.reclaimed, Ordering::SeqCst);
        c.escalated.fetch_add(report.escalated, Ordering::SeqCst);
        c.expired.fetch_add(report.expired, Ordering::SeqCst);
        match &outcome {
            Ok(more) => {
                report.more = *more;
                tracing::info!(
                    tenant = %tenant,
                    late_ms = report.late_ms,
                    reclaimed = report.reclaimed,
                    escalated = report.escalated,
                    expired = report.expired,
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
                let retry = now.saturating_add(retry_ms(&self.options));
                self.table.set(tenant, Some(retry));
            }
        }
    }
}

fn retry_ms(o: &SweeperOptions) -> i64 {
    i64::try_from(o.retry.as_millis()).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(s: &str) -> Arc<str> {
        Arc::from(s)
    }

    /// The order the line hands out turns in.
    fn turns(table: &mut Timetable) -> Vec<(Timestamp, String)> {
        std::iter::from_fn(|| table.next_turn())
            .map(|(at, t)| (at, t.to_string()))
            .collect()
    }

    #[test]
    fn a_tenant_read_again_and_again_keeps_one_entry() {
        let mut table = Timetable::default();
        let (acme, globex) = (name("acme"), name("globex"));
        table.set(&globex, Some(50));
        for i in 0..1_000 {
            // The same instant, or one that moves.
            table.set(&acme, Some(1_000_000 - (i / 2)));
            assert_eq!(table.entries(), 2, "after {i} reads");
        }
        assert_eq!(table.earliest(), Some(50));
        table.set(&globex, None);
        assert_eq!((table.entries(), table.tenants()), (1, 2));
        assert_eq!(table.earliest(), Some(1_000_000 - 499));
        table.come_due(1_000_000);
        assert_eq!(turns(&mut table), [(1_000_000 - 499, "acme".to_owned())]);
        assert_eq!(table.entries(), 0);
    }

    #[test]
    fn due_tenants_take_turns_earliest_first_and_a_tenant_with_more_goes_to_the_back() {
        let mut table = Timetable::default();
        for (t, at) in [("c", 10), ("b", 10), ("a", 20), ("later", 100)] {
            table.set(&name(t), Some(at));
        }
        table.come_due(20);
        assert!(table.any_due());
        let (at, first) = table.next_turn().expect("a turn");
        assert_eq!((at, &*first), (10, "b"));
        // b's turn ends with more to do as `later` comes due: `later` goes
        // ahead of b, and b keeps the instant it came due at.
        table.come_due(100);
        table.back_of_line(&first, at);
        assert_eq!(table.entries(), 4);
        assert_eq!(
            turns(&mut table),
            [
                (10, "c".to_owned()),
                (20, "a".to_owned()),
                (100, "later".to_owned()),
                (10, "b".to_owned()),
            ]
        );
        assert!(!table.any_due());
        assert_eq!(table.entries(), 0);
    }

    #[test]
    fn a_tenant_in_the_line_keeps_its_place_when_read_again() {
        let mut table = Timetable::default();
        let (acme, globex) = (name("acme"), name("globex"));
        table.set(&acme, Some(10));
        table.set(&globex, Some(10));
        table.come_due(10);
        table.set(&acme, Some(5_000));
        table.set(&acme, None);
        assert!(table.in_line(&acme));
        assert_eq!(table.entries(), 2);
        assert_eq!(table.earliest(), None);
        let (_, t) = table.next_turn().expect("a turn");
        assert_eq!(&*t, "acme");
        // Once its turn is over, a read places it again.
        table.set(&t, Some(5_000));
        assert_eq!(table.earliest(), Some(5_000));
        assert_eq!(table.entries(), 2);
    }
}
