//! The event stream: `GET /v1/events` as server-sent events, read from the
//! tenant's feed. It owns one subscriber's life: where its stream starts
//! (`Last-Event-ID`, `?after`, or the feed's head), which changes its
//! credential may see, the wake-ups that make it read again, the bound on
//! what waits unsent, and the final event that tells a client why its
//! stream ended. It must never send a change the credential may not see,
//! skip a change it may, or hold more than its buffer for a slow client.
//!
//! The feed is the news and a wake-up only a hint: after every wake-up
//! (this process's commits, other processes' through the backend, or the
//! credential check's timer) the producer reads the feed from its
//! position, so a lost wake-up costs time, never a change. Streams of one
//! tenant at one position share their reads ([`crate::feeds`]).

use std::collections::HashMap;
use std::convert::Infallible;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::response::sse::{Event, KeepAlive, KeepAliveStream, Sse};
use futures_util::Stream;
use leasehold_host::{self as host, Change, FeedRead};

use serde_json::json;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc, watch};

use crate::auth::{Principal, Scope};
use crate::feeds::{Feeds, PAGE, TenantFeed};
use crate::problem::ApiError;
use crate::state::AppState;

/// Whether a change of a task, as its entry left it, is one a credential
/// may see: services and operators see every change; a reviewer sees a
/// task it holds, or one offered to its roles that it is not excluded
/// from. A task leaving a reviewer's queue (claimed by someone else) is a
/// change of a task offered to it, so it sees the task go.
pub fn may_see(p: &Principal, entry: &host::HistoryEntry) -> bool {
    if p.scope != Scope::Reviewer {
        return true;
    }
    let me = &p.actor;
    entry.assignee.as_ref() == Some(me)
        || (!entry.excluded_actors.contains(me)
            && (entry.candidate_roles.is_empty()
                || entry.candidate_roles.iter().any(|r| p.roles.contains(r))))
}

/// Whether a feed entry is one `p` may see; timers are the services'.
pub fn may_see_change(p: &Principal, change: &Change) -> bool {
    match change {
        Change::Task(t) => may_see(p, &t.entry),
        Change::Timer(_) => p.scope != Scope::Reviewer,
    }
}

/// One feed entry as a server-sent event: its position is its `id`.
fn event(entry: &host::FeedEntry) -> Event {
    let pos = &entry.position;
    match &entry.change {
        Change::Task(t) => {
            let e = &t.entry;
            Event::default().event("task").id(pos).data(
                json!({
                    "position": pos,
                    "task": t.id,
                    "seq": e.seq,
                    "verb": e.verb,
                    "actor": e.actor,
                    "before": e.before.map(crate::model::TaskState::from),
                    "state": crate::model::TaskState::from(e.after),
                    "assignee": e.assignee,
                    "lease_until": e.lease_until,
                    "at": e.at,
                })
                .to_string(),
            )
        }
        Change::Timer(t) => Event::default().event("timer").id(pos).data(
            json!({
                "position": pos,
                "run": t.run,
                "effect": t.effect,
                "verb": t.verb,
                "what": crate::model::TimerEvent::from(t.what),
                "fire_at": t.fire_at,
                "lease_until": t.lease_until,
                "at": t.at,
            })
            .to_string(),
        ),
    }
}

/// Why a stream ended, as its final event says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ended {
    /// The client read too slowly: its buffer filled.
    Slow,
    /// The server is shutting down.
    Shutdown,
    /// The credential expired, or was revoked by a reload.
    Credential,
    /// A read of the feed failed.
    Failed,
}

impl Ended {
    fn reason(self) -> &'static str {
        match self {
            Ended::Slow => "slow",
            Ended::Shutdown => "shutdown",
            Ended::Credential => "credential",
            Ended::Failed => "failed",
        }
    }
}

/// The bounds on subscribers: in all, and per tenant.
pub struct Subscribers {
    all: Arc<Semaphore>,
    all_bound: usize,
    per_tenant: usize,
    tenants: Mutex<HashMap<Arc<str>, Arc<Semaphore>>>,
    /// The tenants' shared reads of the feed (the long-polls' too).
    pub feeds: Feeds,
}

/// A subscriber's places, held for as long as its stream runs.
struct Seat {
    _all: OwnedSemaphorePermit,
    tenant: Option<OwnedSemaphorePermit>,
    slots: Arc<Semaphore>,
    name: Arc<str>,
    of: Arc<Subscribers>,
}

impl Drop for Seat {
    fn drop(&mut self) {
        drop(self.tenant.take());
        let mut tenants = self
            .of
            .tenants
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if Arc::strong_count(&self.slots) == 2 {
            tenants.remove(&self.name);
        }
        metrics::gauge!("leasehold_event_subscribers").decrement(1.0);
    }
}

impl Subscribers {
    pub fn new(all: usize, per_tenant: usize) -> Arc<Self> {
        Arc::new(Subscribers {
            all: Arc::new(Semaphore::new(all)),
            all_bound: all,
            per_tenant: per_tenant.clamp(1, all.max(1)),
            tenants: Mutex::new(HashMap::new()),
            feeds: Feeds::default(),
        })
    }

    /// A place for one more subscriber of `tenant`, or `overloaded`.
    fn seat(self: &Arc<Self>, tenant: &str) -> Result<Seat, ApiError> {
        let full = |detail: String| ApiError::Unavailable {
            kind: "overloaded",
            detail,
        };
        let all = self.all.clone().try_acquire_owned().map_err(|_| {
            full(format!(
                "the service is at its bound of {} event subscribers",
                self.all_bound
            ))
        })?;
        let (name, slots) = {
            let mut tenants = self.tenants.lock().unwrap_or_else(PoisonError::into_inner);
            match tenants.get_key_value(tenant) {
                Some((n, s)) => (n.clone(), s.clone()),
                None => {
                    let n: Arc<str> = Arc::from(tenant);
                    let s = Arc::new(Semaphore::new(self.per_tenant));
                    tenants.insert(n.clone(), s.clone());
                    (n, s)
                }
            }
        };
        let mut seat = Seat {
            _all: all,
            tenant: None,
            slots: slots.clone(),
            name,
            of: self.clone(),
        };
        metrics::gauge!("leasehold_event_subscribers").increment(1.0);
        seat.tenant = Some(slots.try_acquire_owned().map_err(|_| {
            full(format!(
                "this tenant is at its bound of {} event subscribers",
                self.per_tenant
            ))
        })?);
        Ok(seat)
    }
}

/// The body of an event stream: what the producer queued, then the final
/// event if the producer ended it.
pub struct Body {
    rx: mpsc::Receiver<Event>,
    last: Arc<Mutex<Option<Event>>>,
    done: bool,
}

impl Stream for Body {
    type Item = Result<Event, Infallible>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        if self.done {
            return Poll::Ready(None);
        }
        match self.rx.poll_recv(cx) {
            Poll::Ready(Some(e)) => Poll::Ready(Some(Ok(e))),
            Poll::Ready(None) => {
                self.done = true;
                let last = self
                    .last
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .take();
                Poll::Ready(last.map(Ok))
            }
            Poll::Pending => Poll::Pending,
        }
    }
}

/// What a subscription needs from its request.
pub struct Subscription {
    pub principal: Principal,
    pub tenant: host::Tenant,
    /// The `Authorization` header as sent, checked again while the stream
    /// runs.
    pub authorization: Option<String>,
    /// Where to resume: after this position; the feed's head when `None`.
    pub after: Option<String>,
}

/// Opens an event stream for `sub`: refused at once when the subscriber
/// bounds are reached or its position is not one of this feed's; else the
/// stream, which begins with a `ready` event naming where it starts.
pub async fn subscribe(
    state: &AppState,
    sub: Subscription,
) -> Result<Sse<KeepAliveStream<Body>>, ApiError> {
    let seat = state.subscribers.seat(sub.tenant.name())?;
    // Subscribed before the first read, so a commit made between the read
    // and the wait still wakes it.
    let name = sub.tenant.name();
    let feed = state
        .subscribers
        .feeds
        .tenant(name, || Ok(state.engine.watch(name)?))?;
    let commits = feed.commits();
    let heard = *commits.borrow();
    let start = match sub.after.clone() {
        Some(p) => p,
        None => head(state, &sub.tenant).await?,
    };
    let (tx, rx) = mpsc::channel(state.options.events.buffer.max(1));
    let last = Arc::new(Mutex::new(None));
    tx.try_send(
        Event::default()
            .event("ready")
            .id(&start)
            .data(json!({ "position": start }).to_string()),
    )
    .map_err(|e| ApiError::Internal(Box::new(e)))?;
    let producer = Producer {
        state: state.clone(),
        sub,
        position: start,
        feed,
        commits,
        heard,
        tx,
        last: last.clone(),
        _seat: seat,
    };
    tokio::spawn(producer.run());
    let keep = KeepAlive::new()
        .interval(state.options.events.heartbeat)
        .text("heartbeat");
    Ok(Sse::new(Body {
        rx,
        last,
        done: false,
    })
    .keep_alive(keep))
}

/// The feed's head: where a stream without a position starts.
pub async fn head(state: &AppState, tenant: &host::Tenant) -> Result<String, ApiError> {
    let read = read(state, tenant, None, 1).await?;
    Ok(match read {
        FeedRead::Page(p) => p.head,
        FeedRead::Gone(head) => head,
    })
}

pub async fn read(
    state: &AppState,
    tenant: &host::Tenant,
    after: Option<String>,
    limit: u32,
) -> Result<FeedRead, ApiError> {
    let deadline = Instant::now() + state.options.request_timeout;
    state
        .call("feed", tenant.clone(), deadline, move |x| {
            x.feed(after.as_deref(), limit)
        })
        .await
}

/// One subscriber's reader: reads the feed after its position, queues what
/// its credential may see, and waits for a wake-up.
struct Producer {
    state: AppState,
    sub: Subscription,
    position: String,
    feed: Arc<TenantFeed>,
    /// The tenant's commits as heard, and the count at the last wake-up:
    /// a read shared with other streams must have begun at it or later.
    commits: watch::Receiver<u64>,
    heard: u64,
    tx: mpsc::Sender<Event>,
    last: Arc<Mutex<Option<Event>>>,
    _seat: Seat,
}

impl Producer {
    async fn run(mut self) {
        let ended = self.follow().await;
        if let Some(ended) = ended {
            tracing::info!(reason = ended.reason(), tenant = %self.sub.tenant.name(), "event stream ended");
            metrics::counter!("leasehold_event_streams_ended_total", "reason" => ended.reason())
                .increment(1);
            *self.last.lock().unwrap_or_else(PoisonError::into_inner) =
                Some(Event::default().event("dropped").data(
                    json!({ "reason": ended.reason(), "resume": self.position }).to_string(),
                ));
        }
        // Dropping the sender ends the body after what it holds.
    }

    /// Follows the feed until the client goes (`None`) or the stream must
    /// end.
    async fn follow(&mut self) -> Option<Ended> {
        let mut stopping = self.state.stopping();
        let recheck = self.state.options.events.heartbeat;
        loop {
            if *stopping.borrow() {
                return Some(Ended::Shutdown);
            }
            if !self.credential_holds() {
                return Some(Ended::Credential);
            }
            // Read until caught up.
            loop {
                let answer = self
                    .feed
                    .read(&self.position, self.heard, || {
                        read(
                            &self.state,
                            &self.sub.tenant,
                            Some(self.position.clone()),
                            PAGE,
                        )
                    })
                    .await;
                match answer.as_deref() {
                    Ok(FeedRead::Page(p)) => {
                        let full = p.entries.len() >= PAGE as usize;
                        let mut sent = None;
                        for entry in &p.entries {
                            if may_see_change(&self.sub.principal, &entry.change) {
                                if let Err(e) = self.send(event(entry)) {
                                    return e;
                                }
                                sent = Some(entry.position.clone());
                            }
                        }
                        // The position moved past changes this credential
                        // may not see: an event with only an id keeps the
                        // client's resume point up to date.
                        if p.next != self.position
                            && sent.as_ref() != Some(&p.next)
                            && let Err(e) = self.send(Event::default().id(&p.next))
                        {
                            return e;
                        }
                        self.position = p.next.clone();
                        if !full {
                            break;
                        }
                    }
                    Ok(FeedRead::Gone(head)) => {
                        let refresh = Event::default()
                            .event("refresh")
                            .id(head)
                            .data(json!({ "head": head }).to_string());
                        if let Err(e) = self.send(refresh) {
                            return e;
                        }
                        self.position = head.clone();
                        break;
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "an event stream's read failed");
                        return Some(Ended::Failed);
                    }
                }
            }
            // Wait for a commit; meanwhile the heartbeat's timer checks the
            // credential again without reading the feed.
            loop {
                tokio::select! {
                    heard = self.commits.changed() => {
                        // The tenant's pump goes only with the last of its
                        // streams, so this one outlives it only in a bug.
                        if heard.is_err() {
                            return Some(Ended::Failed);
                        }
                        self.heard = *self.commits.borrow_and_update();
                        break;
                    }
                    () = self.tx.closed() => return None,
                    _ = stopping.changed() => break,
                    () = tokio::time::sleep(recheck) => {
                        if !self.credential_holds() {
                            return Some(Ended::Credential);
                        }
                    }
                }
            }
        }
    }

    /// Queues an event; `Err(None)` when the client has gone, and
    /// `Err(Some(Slow))` when its buffer is full.
    fn send(&self, e: Event) -> Result<(), Option<Ended>> {
        match self.tx.try_send(e) {
            Ok(()) => Ok(()),
            Err(mpsc::error::TrySendError::Closed(_)) => Err(None),
            Err(mpsc::error::TrySendError::Full(_)) => Err(Some(Ended::Slow)),
        }
    }

    /// Whether the credential the stream was opened with still names the
    /// same caller: it may have expired, or been revoked by a reload.
    fn credential_holds(&self) -> bool {
        match self
            .state
            .credentials
            .current()
            .authenticate(self.sub.authorization.as_deref())
        {
            Ok(p) => p == self.sub.principal,
            Err(_) => false,
        }
    }
}

/// The bounds and pace of event streams.
#[derive(Clone, Copy, Debug)]
pub struct EventOptions {
    /// Most subscribers in all.
    pub max_subscribers: usize,
    /// Most subscribers of one tenant.
    pub max_subscribers_per_tenant: usize,
    /// Events queued for one subscriber before it is dropped as too slow.
    pub buffer: usize,
    /// How often an idle stream sends a heartbeat comment (and its
    /// credential is checked again).
    pub heartbeat: Duration,
}

impl Default for EventOptions {
    fn default() -> Self {
        EventOptions {
            max_subscribers: 1024,
            max_subscribers_per_tenant: 256,
            buffer: 1024,
            heartbeat: Duration::from_secs(15),
        }
    }
}
