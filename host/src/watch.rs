//! Change notifications: waking whoever waits for a tenant's commits. A
//! call that committed a non-empty batch wakes the waiters of its tenant in
//! this process once its commit is durable, and announces the commit to the
//! backend, which may tell other processes sharing the store (PostgreSQL
//! does); what a backend hears of other processes' commits wakes waiters
//! the same way.
//!
//! A wake-up is a hint, never the news itself: a waiter reads the feed (or
//! whatever it follows) once woken, so a wake-up that is lost costs only
//! time, and one that is spurious only a read. It owns who waits and how
//! they are woken; it must never hold a waiter's data, block a committing
//! call on a waiter, or wake anyone for a call that committed nothing.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant};

use crate::storage::backend::{Backend, Heard};

/// What woke a subscription: the tenants that committed since it last
/// looked, each once, in the order first heard of.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Changed {
    /// The tenants that committed.
    pub tenants: Vec<Arc<str>>,
    /// Commits may have gone unheard (the backend lost its way of hearing
    /// other processes, and found it again): any tenant may have changed.
    pub any: bool,
}

impl Changed {
    /// Whether `tenant` may have changed.
    pub fn includes(&self, tenant: &str) -> bool {
        self.any || self.tenants.iter().any(|t| &**t == tenant)
    }
}

/// What a subscription has heard and not yet been asked for.
#[derive(Default)]
struct Pending {
    changed: Changed,
    seen: HashSet<Arc<str>>,
}

struct Subscriber {
    pending: Mutex<Pending>,
    /// Wakes a blocking wait.
    cond: Condvar,
    /// Wakes an async wait.
    notify: tokio::sync::Notify,
}

impl Subscriber {
    fn lock(&self) -> MutexGuard<'_, Pending> {
        self.pending.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn hear(&self, tenant: Option<&Arc<str>>) {
        {
            let mut p = self.lock();
            match tenant {
                None => p.changed.any = true,
                Some(t) => {
                    if p.seen.insert(t.clone()) {
                        p.changed.tenants.push(t.clone());
                    }
                }
            }
        }
        self.cond.notify_all();
        self.notify.notify_one();
    }

    /// What was heard, if anything, leaving nothing pending.
    fn take(&self) -> Option<Changed> {
        let mut p = self.lock();
        if p.changed.tenants.is_empty() && !p.changed.any {
            return None;
        }
        p.seen.clear();
        Some(std::mem::take(&mut p.changed))
    }
}

#[derive(Default)]
struct Subscribers {
    /// Subscriptions to every tenant, by id.
    all: HashMap<u64, Weak<Subscriber>>,
    /// Subscriptions to one tenant, by tenant, then id.
    one: HashMap<Arc<str>, HashMap<u64, Weak<Subscriber>>>,
    next_id: u64,
}

/// The waiters of one engine (and of the engines sharing its backend
/// through `Engine::with_component`).
pub(crate) struct Hub {
    subscribers: Mutex<Subscribers>,
    /// How many subscriptions are open: a commit with none to wake costs
    /// one atomic read.
    open: AtomicUsize,
    /// Whether the backend was asked to listen to other processes.
    listening: Mutex<bool>,
}

impl Hub {
    pub(crate) fn new() -> Arc<Hub> {
        Arc::new(Hub {
            subscribers: Mutex::new(Subscribers::default()),
            open: AtomicUsize::new(0),
            listening: Mutex::new(false),
        })
    }

    fn lock(&self) -> MutexGuard<'_, Subscribers> {
        self.subscribers.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// `tenant` committed: wake its waiters here, and tell the backend so
    /// that it may tell other processes.
    pub(crate) fn committed(&self, backend: &dyn Backend, tenant: &Arc<str>) {
        self.wake(Some(tenant));
        backend.announce(tenant);
    }

    /// Wakes the waiters of `tenant` (of every tenant, for `None`).
    fn wake(&self, tenant: Option<&Arc<str>>) {
        if self.open.load(Ordering::Acquire) == 0 {
            return;
        }
        let woken: Vec<Arc<Subscriber>> = {
            let s = self.lock();
            let mut out: Vec<Arc<Subscriber>> = s.all.values().filter_map(Weak::upgrade).collect();
            match tenant {
                Some(t) => {
                    if let Some(one) = s.one.get(t) {
                        out.extend(one.values().filter_map(Weak::upgrade));
                    }
                }
                None => {
                    for one in s.one.values() {
                        out.extend(one.values().filter_map(Weak::upgrade));
                    }
                }
            }
            out
        };
        for sub in woken {
            sub.hear(tenant);
        }
    }

    /// What a backend heard of another process's commit.
    fn heard(&self, heard: Heard<'_>) {
        match heard {
            Heard::Tenant(name) => self.wake(Some(&Arc::from(name))),
            Heard::Any => self.wake(None),
        }
    }

    /// A subscription to `tenant`'s commits, or to every tenant's; the
    /// first one asks the backend to listen to other processes.
    pub(crate) fn subscribe(
        self: &Arc<Self>,
        backend: &dyn Backend,
        tenant: Option<Arc<str>>,
    ) -> Changes {
        let sub = Arc::new(Subscriber {
            pending: Mutex::new(Pending::default()),
            cond: Condvar::new(),
            notify: tokio::sync::Notify::new(),
        });
        let id = {
            let mut s = self.lock();
            let id = s.next_id;
            s.next_id += 1;
            match &tenant {
                Some(t) => {
                    s.one
                        .entry(t.clone())
                        .or_default()
                        .insert(id, Arc::downgrade(&sub));
                }
                None => {
                    s.all.insert(id, Arc::downgrade(&sub));
                }
            }
            id
        };
        self.open.fetch_add(1, Ordering::AcqRel);
        {
            let mut listening = self.listening.lock().unwrap_or_else(|p| p.into_inner());
            if !*listening {
                *listening = true;
                let hub = Arc::downgrade(self);
                backend.listen(Arc::new(move |heard: Heard<'_>| {
                    if let Some(hub) = hub.upgrade() {
                        hub.heard(heard);
                    }
                }));
            }
        }
        Changes {
            sub,
            hub: self.clone(),
            id,
            tenant,
        }
    }

    fn unsubscribe(&self, id: u64, tenant: Option<&Arc<str>>) {
        let mut s = self.lock();
        match tenant {
            Some(t) => {
                if let Some(one) = s.one.get_mut(t) {
                    one.remove(&id);
                    if one.is_empty() {
                        s.one.remove(t);
                    }
                }
            }
            None => {
                s.all.remove(&id);
            }
        }
        self.open.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A subscription to commits: of one tenant (`Engine::watch`) or of every
/// tenant (`Engine::changes`). It hears of every commit made after it was
/// made: by this process always, by other processes where the backend can
/// hear them (PostgreSQL). What it heard waits for it, merged, until taken,
/// so a waiter that was busy reading misses nothing; memory stays bounded
/// by the number of tenants. Dropping it unsubscribes.
pub struct Changes {
    sub: Arc<Subscriber>,
    hub: Arc<Hub>,
    id: u64,
    tenant: Option<Arc<str>>,
}

impl std::fmt::Debug for Changes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Changes")
            .field("tenant", &self.tenant)
            .finish_non_exhaustive()
    }
}

impl Changes {
    /// What was heard since the last look, without waiting.
    pub fn try_take(&mut self) -> Option<Changed> {
        self.sub.take()
    }

    /// Waits, blocking the thread, until something was heard or `timeout`
    /// passed: `None` on the timeout.
    pub fn wait(&mut self, timeout: Duration) -> Option<Changed> {
        let until = Instant::now() + timeout;
        let mut p = self.sub.lock();
        loop {
            if !p.changed.tenants.is_empty() || p.changed.any {
                p.seen.clear();
                return Some(std::mem::take(&mut p.changed));
            }
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return None;
            }
            p = self
                .sub
                .cond
                .wait_timeout(p, left)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }

    /// Waits, without blocking the thread, until something was heard.
    pub async fn changed(&mut self) -> Changed {
        loop {
            let notified = self.sub.notify.notified();
            if let Some(changed) = self.sub.take() {
                return changed;
            }
            notified.await;
        }
    }
}

impl Drop for Changes {
    fn drop(&mut self) {
        self.hub.unsubscribe(self.id, self.tenant.as_ref());
    }
}
