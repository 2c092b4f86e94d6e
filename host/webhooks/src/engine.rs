//! [`Deliveries`]: the delivery engine a server (or an embedder's loop)
//! runs. Per tenant it serves, one supervisor lists the tenant's
//! subscriptions, takes the lease of each active one it may (so one server
//! at a time delivers a subscription, and another takes over when a lease
//! lapses), and runs a worker per subscription it holds. Tenants share
//! nothing but the process: each has its own bound on requests in flight
//! and on bytes queued (split evenly between its running subscriptions),
//! and each subscription its own worker and queues, so one tenant's slow
//! or failing endpoint delays no other tenant and no other endpoint. It
//! owns the workers' lives; it must never hold a subscription's state but
//! what the store says (a restart of the process loses nothing but
//! counters).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use tokio::sync::{Notify, Semaphore, watch};
use tokio::task::JoinHandle;

use crate::config::{Options, Parts};
use crate::delivery::{Live, Target, lock, ms};
use crate::shared::{Exit, Shared, TenantRuntime, Worker};
use crate::source::{START, SourceError};
use crate::stats::{Running, SubscriptionMetrics, SubscriptionStatus};
use crate::store::{StoreError, SubState, Subscription, Update};
use crate::worker::{self, WorkerCtx};

/// How long a worker that broke waits before it may be started again.
const BROKEN_PAUSE: Duration = Duration::from_secs(30);

/// Why a replay was refused.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReplayError {
    /// No such subscription.
    #[error("no such subscription")]
    NotFound,
    /// The position is not one of the tenant's feed, or what follows it was
    /// trimmed.
    #[error("the feed no longer holds what follows that position (its head is {head})")]
    Gone {
        /// The feed's end, to replay from instead.
        head: String,
    },
    /// The text is not a position.
    #[error("not a position of the feed: {0}")]
    Position(String),
    /// The feed could not be read.
    #[error(transparent)]
    Source(#[from] SourceError),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// The delivery engine. Cheap to clone; must be made inside a tokio
/// runtime, whose tasks it runs on. See the module doc.
#[derive(Clone)]
pub struct Deliveries {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for Deliveries {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Deliveries")
            .field("holder", &self.shared.options.holder)
            .finish_non_exhaustive()
    }
}

/// Runs a blocking call off the async threads.
async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, StoreError> + Send + 'static,
) -> Result<T, StoreError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(StoreError::new)?
}

impl Deliveries {
    /// An engine over `parts`; it delivers nothing until told which tenants
    /// to [`serve`](Self::serve).
    pub fn new(parts: Parts, options: Options) -> Deliveries {
        Deliveries {
            shared: Arc::new(Shared {
                store: parts.store,
                source: parts.source,
                sender: parts.sender,
                render: parts.render,
                options,
                tenants: Mutex::new(HashMap::new()),
                metrics: Mutex::new(BTreeMap::new()),
            }),
        }
    }

    /// The options it runs with.
    pub fn options(&self) -> &Options {
        &self.shared.options
    }

    /// Delivers `tenant`'s subscriptions from now on (those whose lease
    /// this server gets). Idempotent.
    pub fn serve(&self, tenant: &str) {
        let mut tenants = lock(&self.shared.tenants);
        if tenants.contains_key(tenant) {
            return;
        }
        let limits = self.shared.options.tenant;
        let t = Arc::new(TenantRuntime {
            name: Arc::from(tenant),
            limits,
            permits: Arc::new(Semaphore::new(limits.in_flight.max(1))),
            queued_bytes: AtomicUsize::new(0),
            running: AtomicUsize::new(0),
            commits: watch::channel(0).0,
            reload: Notify::new(),
            passes_begun: AtomicU64::new(0),
            pass_done: watch::channel(0).0,
            workers: Mutex::new(HashMap::new()),
            over_bound: Mutex::new(HashSet::new()),
            listed: Mutex::new(Vec::new()),
            supervisor: Mutex::new(None),
        });
        let task = tokio::spawn(supervise(self.shared.clone(), t.clone()));
        *lock(&t.supervisor) = Some(task);
        tenants.insert(tenant.to_owned(), t);
    }

    /// Stops delivering `tenant`'s subscriptions here: each worker saves
    /// its position and gives its lease up.
    pub async fn unserve(&self, tenant: &str) {
        let t = lock(&self.shared.tenants).remove(tenant);
        if let Some(t) = t {
            stop_tenant(&self.shared, &t).await;
        }
    }

    /// Stops every tenant's deliveries here, as [`unserve`](Self::unserve).
    pub async fn shutdown(&self) {
        let all: Vec<Arc<TenantRuntime>> =
            lock(&self.shared.tenants).drain().map(|(_, t)| t).collect();
        for t in all {
            stop_tenant(&self.shared, &t).await;
        }
    }

    /// `tenant` committed: its caught-up workers read the feed again now
    /// rather than at their next poll.
    pub fn wake(&self, tenant: &str) {
        if let Some(t) = lock(&self.shared.tenants).get(tenant) {
            t.commits.send_modify(|n| *n = n.wrapping_add(1));
        }
    }

    /// Wakes workers on the commits `changes` hears (from
    /// `leasehold_host::Engine::changes`, which on PostgreSQL also hears
    /// other servers'), for as long as the engine lives.
    pub fn follow(&self, mut changes: leasehold_host::Changes) -> JoinHandle<()> {
        let weak = Arc::downgrade(&self.shared);
        tokio::spawn(async move {
            loop {
                let heard = changes.changed().await;
                let Some(shared) = weak.upgrade() else {
                    return;
                };
                let tenants = lock(&shared.tenants);
                for (name, t) in tenants.iter() {
                    if heard.includes(name) {
                        t.commits.send_modify(|n| *n = n.wrapping_add(1));
                    }
                }
            }
        })
    }

    /// A subscription of `tenant` was changed or deleted through the
    /// store's API: its worker here stops or starts again now (one on
    /// another server notices at its next checkpoint or poll).
    pub fn changed(&self, tenant: &str) {
        if let Some(t) = lock(&self.shared.tenants).get(tenant) {
            t.reload.notify_one();
        }
    }

    /// Subscription `id` of `tenant` was changed or deleted through the
    /// store's API (paused, removed, its keys rotated, its URL or filter
    /// changed, replayed): its worker here is stopped and waited for, and
    /// this answers once the tenant's supervisor has reconciled with the
    /// store as it is now, starting a worker again if the subscription is
    /// still to be delivered here. So once it returns nothing is sent here
    /// under what the subscription was before, where [`changed`](Self::changed)
    /// stops the worker only at the supervisor's next turn. Its lease is
    /// given up meanwhile, so a pause or a deletion frees it at once.
    /// Waits at most `within`; a tenant not served here answers at once.
    pub async fn reload(&self, tenant: &str, id: &str, within: Duration) {
        let Some(t) = lock(&self.shared.tenants).get(tenant).cloned() else {
            return;
        };
        let _ = tokio::time::timeout(within, async {
            let worker = lock(&t.workers).remove(id);
            if let Some(w) = worker {
                let _ = w.stop.send(true);
                let _ = w.task.await;
                let store = self.shared.store.clone();
                let (tenant, i, holder) = (
                    t.name.clone(),
                    id.to_owned(),
                    self.shared.options.holder.clone(),
                );
                let _ = blocking(move || store.release(&tenant, &i, &holder)).await;
            }
            // A pass numbered after this point lists the store after the
            // change.
            let want = t.passes_begun.load(Ordering::Acquire) + 1;
            let mut done = t.pass_done.subscribe();
            t.reload.notify_one();
            let _ = done.wait_for(|n| *n >= want).await;
        })
        .await;
    }

    /// Replays a subscription from `from` (`None`: the feed's start): sets
    /// its position there and makes it active, so every entry after it
    /// that matches the filter is sent again, with the `webhook-id` it had.
    /// Refused, changing nothing, when the feed no longer holds what
    /// follows `from`.
    pub async fn replay(
        &self,
        tenant: &str,
        id: &str,
        from: Option<&str>,
    ) -> Result<Subscription, ReplayError> {
        let at = from.unwrap_or(START).to_owned();
        leasehold_guest::changes::Cursor::parse(&at)
            .map_err(|_| ReplayError::Position(at.chars().take(64).collect()))?;
        let source = self.shared.source.clone();
        let (t, probe) = (tenant.to_owned(), at.clone());
        let read = tokio::task::spawn_blocking(move || source.read(&t, &probe, 1))
            .await
            .map_err(|e| ReplayError::Store(StoreError::new(e)))??;
        if let leasehold_host::FeedRead::Gone(head) = read {
            return Err(ReplayError::Gone { head });
        }
        let store = self.shared.store.clone();
        let (t, i, p) = (tenant.to_owned(), id.to_owned(), from.map(str::to_owned));
        match blocking(move || store.rewind(&t, &i, p.as_deref())).await? {
            Update::Done(sub) | Update::Stale(sub) => {
                self.changed(tenant);
                Ok(sub)
            }
            Update::Missing => Err(ReplayError::NotFound),
        }
    }

    /// Every subscription of `tenant` as an operator sees it: what the
    /// store holds, and what this server is doing for those it delivers.
    pub async fn status(&self, tenant: &str) -> Result<Vec<SubscriptionStatus>, StoreError> {
        let store = self.shared.store.clone();
        let name = tenant.to_owned();
        let subs = blocking(move || store.list(&name)).await?;
        let t = lock(&self.shared.tenants).get(tenant).cloned();
        let now = SystemTime::now();
        Ok(subs
            .into_iter()
            .map(|s| {
                let running = t.as_ref().and_then(|t| {
                    let workers = lock(&t.workers);
                    let w = workers.get(&s.id).filter(|w| !w.task.is_finished())?;
                    let live = lock(&w.live);
                    Some(Running {
                        delivered_to: live.delivered_to.clone(),
                        in_flight: live.in_flight,
                        queued: live.queued,
                        queued_bytes: live.queued_bytes,
                        next_retry: live.retry_at.values().min().copied().map(|r| r.max(now)),
                        lag_entries: live.lag_entries,
                        lag_seconds: live.lag_seconds,
                        last_attempts: live.attempts.iter().cloned().collect(),
                    })
                });
                let over_bound = t
                    .as_ref()
                    .is_some_and(|t| lock(&t.over_bound).contains(&s.id));
                SubscriptionStatus {
                    id: s.id,
                    state: s.state,
                    note: s.note,
                    revision: s.revision,
                    position: s.position,
                    recorded_attempts: s.attempts,
                    running,
                    over_bound,
                }
            })
            .collect())
    }

    /// The state of every subscription of the tenants served here, as
    /// each tenant's supervisor last listed them (within its poll):
    /// `(tenant, subscription, state)`, for a gauge to alert on a
    /// `failing` or `gone` one without reading the store.
    pub fn states(&self) -> Vec<(String, String, SubState)> {
        let tenants: Vec<Arc<TenantRuntime>> =
            lock(&self.shared.tenants).values().cloned().collect();
        let mut out = Vec::new();
        for t in tenants {
            for (id, state) in lock(&t.listed).iter() {
                out.push((t.name.to_string(), id.clone(), *state));
            }
        }
        out.sort_by(|a, b| (&a.0, &a.1).cmp(&(&b.0, &b.1)));
        out
    }

    /// Every subscription's counters this process has (those it delivers
    /// or delivered and still exist).
    pub fn metrics(&self) -> Vec<SubscriptionMetrics> {
        lock(&self.shared.metrics)
            .values()
            .map(|m| lock(m).clone())
            .collect()
    }
}

async fn stop_tenant(shared: &Arc<Shared>, t: &Arc<TenantRuntime>) {
    if let Some(s) = lock(&t.supervisor).take() {
        s.abort();
    }
    let workers: Vec<(String, Worker)> = lock(&t.workers).drain().collect();
    for (id, w) in workers {
        let _ = w.stop.send(true);
        let _ = w.task.await;
        let store = shared.store.clone();
        let (tenant, holder) = (t.name.clone(), shared.options.holder.clone());
        let _ = blocking(move || store.release(&tenant, &id, &holder)).await;
    }
}

/// One tenant's supervisor: keeps a worker running here for every active
/// subscription within the bound whose lease this server holds.
async fn supervise(shared: Arc<Shared>, t: Arc<TenantRuntime>) {
    loop {
        let pass = t.passes_begun.fetch_add(1, Ordering::AcqRel) + 1;
        let store = shared.store.clone();
        let name = t.name.clone();
        match blocking(move || store.list(&name)).await {
            Ok(subs) => reconcile(&shared, &t, subs).await,
            Err(e) => tracing::warn!(tenant = %t.name, error = %e, "listing subscriptions failed"),
        }
        t.pass_done.send_replace(pass);
        tokio::select! {
            _ = t.reload.notified() => {}
            _ = tokio::time::sleep(shared.options.poll) => {}
        }
    }
}

async fn reconcile(shared: &Arc<Shared>, t: &Arc<TenantRuntime>, subs: Vec<Subscription>) {
    *lock(&t.listed) = subs.iter().map(|s| (s.id.clone(), s.state)).collect();
    let limit = t.limits.subscriptions;
    let active: Vec<&Subscription> = subs
        .iter()
        .filter(|s| s.state == SubState::Active)
        .collect();
    let runnable: HashMap<&str, &Subscription> = active
        .iter()
        .take(limit)
        .map(|s| (s.id.as_str(), *s))
        .collect();
    *lock(&t.over_bound) = active.iter().skip(limit).map(|s| s.id.clone()).collect();
    {
        let existing: HashSet<&str> = subs.iter().map(|s| s.id.as_str()).collect();
        lock(&shared.metrics).retain(|(tenant, id), _| {
            tenant.as_str() != &*t.name || existing.contains(id.as_str())
        });
    }
    // Stop what should not run here any more, and forget ended workers.
    let mut release = Vec::new();
    lock(&t.workers).retain(|id, w| {
        let wanted = runnable
            .get(id.as_str())
            .is_some_and(|s| s.revision == w.revision);
        if w.task.is_finished() || !wanted {
            w.task.abort();
            if !runnable.contains_key(id.as_str()) && subs.iter().any(|s| &s.id == id) {
                release.push(id.clone());
            }
            return false;
        }
        true
    });
    for id in release {
        let store = shared.store.clone();
        let (tenant, holder) = (t.name.clone(), shared.options.holder.clone());
        let _ = blocking(move || store.release(&tenant, &id, &holder)).await;
    }
    let lease_ms = u32::try_from(shared.options.lease.as_millis()).unwrap_or(u32::MAX);
    let mut ids: Vec<&&Subscription> = runnable.values().collect();
    ids.sort_by(|a, b| a.id.cmp(&b.id));
    for sub in ids {
        if lock(&t.workers).contains_key(&sub.id) {
            continue;
        }
        let store = shared.store.clone();
        let (tenant, id, holder) = (
            t.name.clone(),
            sub.id.clone(),
            shared.options.holder.clone(),
        );
        let took =
            blocking(move || store.lease(&tenant, &id, &holder, ms(SystemTime::now()), lease_ms))
                .await;
        match took {
            Ok(true) => start_worker(shared, t, (*sub).clone()),
            Ok(false) => {}
            Err(e) => {
                tracing::warn!(tenant = %t.name, subscription = %sub.id, error = %e, "taking a lease failed")
            }
        }
    }
}

fn start_worker(shared: &Arc<Shared>, t: &Arc<TenantRuntime>, sub: Subscription) {
    let metrics = lock(&shared.metrics)
        .entry((t.name.to_string(), sub.id.clone()))
        .or_insert_with(|| Arc::new(Mutex::new(SubscriptionMetrics::new(&t.name, &sub.id))))
        .clone();
    let live = Arc::new(Mutex::new(Live::default()));
    let target = Arc::new(Target {
        sub: sub.clone(),
        sender: shared.sender.clone(),
        retry: shared.options.retry,
        permits: t.permits.clone(),
        live: live.clone(),
        metrics,
        attempts_shown: shared.options.attempts_shown,
    });
    let (stop, stop_rx) = watch::channel(false);
    let revision = sub.revision;
    let id = sub.id.clone();
    let ctx = WorkerCtx {
        shared: shared.clone(),
        tenant: t.clone(),
        sub,
        live: live.clone(),
        target,
        stop: stop_rx,
    };
    let (tenant, sub_id) = (t.name.clone(), id.clone());
    let task = tokio::spawn(async move {
        let exit = worker::run(ctx).await;
        if let Exit::Broken(why) = &exit {
            // Started again at once it would only break again: wait, so a
            // damaged feed costs a read a while, not a busy loop.
            tracing::error!(tenant = %tenant, subscription = %sub_id, %why, "delivery worker broke");
            tokio::time::sleep(BROKEN_PAUSE).await;
        } else {
            tracing::debug!(tenant = %tenant, subscription = %sub_id, ?exit, "delivery worker stopped");
        }
        exit
    });
    lock(&t.workers).insert(
        id,
        Worker {
            revision,
            stop,
            task,
            live,
        },
    );
}
