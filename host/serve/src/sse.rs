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

use std::convert::Infallible;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::response::sse::{Event, KeepAlive, KeepAliveStream, Sse};
use futures_util::Stream;
use leasehold_host::{self as host, Change, FeedRead};

use serde_json::json;
use tokio::sync::{mpsc, watch};

use crate::auth::{Principal, Scope};
use crate::feeds::{PAGE, TenantFeed};
use crate::holds::Hold;
use crate::positions::Positions;
use crate::problem::ApiError;
use crate::state::AppState;
use crate::view::{View, parse, slot_between};

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

/// One feed entry as a server-sent event: its position (as `pos`, the
/// spelling its caller is shown) is its `id`.
fn event(entry: &host::FeedEntry, pos: &str) -> Event {
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
    /// A read of the feed failed, and failed again when tried once more.
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

/// One event waiting to be sent, with the bytes it counts for.
struct Queued {
    event: Event,
    bytes: usize,
}

/// What a stream's queued events weigh: on the stream, and on its tenant
/// (whose streams share one budget).
struct Weight {
    stream: AtomicUsize,
    feed: Arc<TenantFeed>,
}

impl Weight {
    fn release(&self, bytes: usize) {
        self.stream.fetch_sub(bytes, Ordering::Relaxed);
        self.feed.buffered().fetch_sub(bytes, Ordering::Relaxed);
    }
}

/// The body of an event stream: what the producer queued, then the final
/// event if the producer ended it. Dropped with its connection, it gives
/// back what it still holds.
pub struct Body {
    rx: mpsc::Receiver<Queued>,
    last: Arc<Mutex<Option<Event>>>,
    weight: Arc<Weight>,
    done: bool,
    _seat: Hold,
}

impl Drop for Body {
    fn drop(&mut self) {
        self.rx.close();
        while let Ok(q) = self.rx.try_recv() {
            self.weight.release(q.bytes);
        }
        metrics::gauge!("leasehold_event_subscribers").decrement(1.0);
    }
}

impl Stream for Body {
    type Item = Result<Event, Infallible>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        if self.done {
            return Poll::Ready(None);
        }
        match self.rx.poll_recv(cx) {
            Poll::Ready(Some(q)) => {
                self.weight.release(q.bytes);
                Poll::Ready(Some(Ok(q.event)))
            }
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
    /// Where to resume, as the caller was shown it: after this position;
    /// the feed's head when `None`. `field` names where it came from.
    pub after: Option<(&'static str, String)>,
}

/// Where a stream given a position starts.
enum Start {
    /// After this position of the feed.
    At(String),
    /// Nowhere: the changes after the reviewer's view are no longer kept.
    Gone,
}

/// The feed's position a reviewer's view stands for.
async fn resolve(state: &AppState, tenant: &host::Tenant, view: &View) -> Result<Start, ApiError> {
    Ok(match crate::view::resolve(state, tenant, view).await? {
        Some(at) => Start::At(at.encode()),
        None => Start::Gone,
    })
}

/// Opens an event stream for `sub`: refused at once when a bound on
/// streams is reached or its position is not one this caller was given
/// (400); else the stream, which begins with a `ready` event naming where
/// it starts (or `refresh`, when that position is gone).
pub async fn subscribe(
    state: &AppState,
    sub: Subscription,
) -> Result<Sse<KeepAliveStream<Body>>, ApiError> {
    let positions = Positions::new(&state.cursors, &sub.principal);
    // A reviewer gives and is given its own positions (`crate::view`);
    // where its stream starts is the feed's position its view stands for.
    let (after, view) = match &sub.after {
        Some((field, given)) if positions.viewer() => {
            let view = positions.take_view(field, given)?;
            let at = resolve(state, &sub.tenant, &view).await?;
            (Some(at), Some(view))
        }
        Some((field, given)) => (Some(Start::At(positions.take(field, given)?)), None),
        None => (None, None),
    };
    let seat = state.subscribers.stream(&sub.principal)?;
    // Subscribed before the first read, so a commit made between the read
    // and the wait still wakes it.
    let name = sub.tenant.name();
    let feed = state
        .subscribers
        .feeds
        .tenant(name, || Ok(state.engine.watch(name)?))?;
    let commits = feed.commits();
    let heard = *commits.borrow();
    let (start, first) = match after {
        // A position of the right shape may still be one this feed never
        // gave: the first read says so (`gone`) before the stream begins.
        Some(Start::At(p)) => {
            let first = read(state, &sub.tenant, Some(p.clone()), PAGE).await?;
            (p, Some(first))
        }
        // A view whose changes are no longer kept: `gone`, from the head.
        Some(Start::Gone) => {
            let head = head(state, &sub.tenant).await?;
            (head.clone(), Some(FeedRead::Gone(head)))
        }
        None => (head(state, &sub.tenant).await?, None),
    };
    let view = match (positions.viewer(), view) {
        (false, _) => None,
        (true, Some(v)) => Some(v),
        (true, None) => Some(View::starting(&parse(&start)?, true)),
    };
    let (tx, rx) = mpsc::channel(state.options.events.buffer.max(1));
    let last = Arc::new(Mutex::new(None));
    let weight = Arc::new(Weight {
        stream: AtomicUsize::new(0),
        feed: feed.clone(),
    });
    let credential = state
        .credentials
        .hold(sub.authorization.clone(), sub.principal.clone());
    let producer = Producer {
        state: state.clone(),
        sub,
        read_at: start.clone(),
        resume: start.clone(),
        view,
        feed,
        commits,
        heard,
        tx,
        last: last.clone(),
        weight: weight.clone(),
        credential,
    };
    // Every stream begins with `ready`, naming where it starts; a start
    // that is gone is followed at once by `refresh`.
    let shown = producer.shown_resume()?;
    let data = json!({ "position": shown }).to_string();
    let ready = Event::default().event("ready").id(&shown).data(data);
    producer
        .send(ready, 64 + 2 * shown.len())
        .map_err(|_| ApiError::Internal("a new stream's buffer is full".into()))?;
    tokio::spawn(producer.run(first));
    metrics::gauge!("leasehold_event_subscribers").increment(1.0);
    let keep = KeepAlive::new()
        .interval(state.options.events.heartbeat)
        .text("heartbeat");
    Ok(Sse::new(Body {
        rx,
        last,
        weight,
        done: false,
        _seat: seat,
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

pub use crate::view::read;

/// One subscriber's reader: reads the feed after its position, queues what
/// its credential may see, and waits for a wake-up.
struct Producer {
    state: AppState,
    sub: Subscription,
    /// Where the next read of the feed starts: past every entry read,
    /// seen or not.
    read_at: String,
    /// Where a client that reconnects resumes: after the last event it was
    /// sent (entries it may not see after that are read again then, and
    /// passed over again).
    resume: String,
    /// A reviewer's view, which stands for `resume` (`crate::view`); none
    /// for a service or operator, who is shown `resume` itself.
    view: Option<View>,
    feed: Arc<TenantFeed>,
    /// The tenant's commits as heard, and the count at the last wake-up:
    /// a read shared with other streams must have begun at it or later.
    commits: watch::Receiver<u64>,
    heard: u64,
    tx: mpsc::Sender<Queued>,
    last: Arc<Mutex<Option<Event>>>,
    weight: Arc<Weight>,
    credential: crate::auth::HeldCredential,
}

impl Producer {
    async fn run(mut self, first: Option<FeedRead>) {
        let ended = self.follow(first).await;
        if let Some(ended) = ended {
            tracing::info!(reason = ended.reason(), tenant = %self.sub.tenant.name(), "event stream ended");
            metrics::counter!("leasehold_event_streams_ended_total", "reason" => ended.reason())
                .increment(1);
            let resume = self.shown_resume().unwrap_or_default();
            *self.last.lock().unwrap_or_else(PoisonError::into_inner) = Some(
                Event::default()
                    .event("dropped")
                    .data(json!({ "reason": ended.reason(), "resume": resume }).to_string()),
            );
        }
        // Dropping the sender ends the body after what it holds.
    }

    /// `pos` as this stream's caller is shown positions.
    fn show(&self, pos: &str) -> Result<String, ApiError> {
        Positions::new(&self.state.cursors, &self.sub.principal).show(pos)
    }

    /// Where a client that reconnects resumes, as it is shown.
    fn shown_resume(&self) -> Result<String, ApiError> {
        match &self.view {
            Some(v) => Positions::new(&self.state.cursors, &self.sub.principal).show_view(v),
            None => self.show(&self.resume),
        }
    }

    /// One page of the feed from the read position: shared with the
    /// tenant's other readers, and tried once more before a failure ends
    /// the stream (a failure is not kept, so the second try reads afresh).
    async fn page(&mut self) -> Result<Arc<FeedRead>, Ended> {
        for attempt in 0..2 {
            let answer = self
                .feed
                .read(&self.read_at, self.heard, || {
                    read(
                        &self.state,
                        &self.sub.tenant,
                        Some(self.read_at.clone()),
                        PAGE,
                    )
                })
                .await;
            match answer {
                Ok(page) => return Ok(page),
                Err(e) if attempt == 0 => {
                    tracing::warn!(error = %e, "an event stream's read failed; trying once more");
                    tokio::time::sleep(RETRY_PAUSE).await;
                }
                Err(e) => {
                    tracing::warn!(error = %e, "an event stream's read failed again");
                }
            }
        }
        Err(Ended::Failed)
    }

    /// Queues what one page gives this caller. `Ok(true)` when it was a
    /// full page (read on at once).
    fn deliver(&mut self, read: &FeedRead) -> Result<bool, Option<Ended>> {
        match read {
            FeedRead::Page(p) => {
                let full = p.entries.len() >= PAGE as usize;
                let failed = |_| Some(Ended::Failed);
                let mut before = parse(&self.read_at).map_err(failed)?;
                for entry in &p.entries {
                    let after = parse(&entry.position).map_err(failed)?;
                    if may_see_change(&self.sub.principal, &entry.change) {
                        match (&self.view, &entry.change) {
                            (Some(view), Change::Task(t)) => {
                                let slot =
                                    slot_between(&before, &after).ok_or(Some(Ended::Failed))?;
                                let mut view = view.clone();
                                view.seen(slot, &t.id, t.entry.seq, after);
                                let shown =
                                    Positions::new(&self.state.cursors, &self.sub.principal)
                                        .show_view(&view)
                                        .map_err(failed)?;
                                let (e, bytes) = weighed(entry, &shown);
                                self.send(e, bytes)?;
                                self.view = Some(view);
                            }
                            (Some(_), Change::Timer(_)) => return Err(Some(Ended::Failed)),
                            (None, _) => {
                                let shown = self.show(&entry.position).map_err(failed)?;
                                let (e, bytes) = weighed(entry, &shown);
                                self.send(e, bytes)?;
                            }
                        }
                        self.resume = entry.position.clone();
                    }
                    before = after;
                }
                // A service or operator sees every change, so the position
                // moves only past what it was sent; should it move past
                // anything else, an event with only an id says so. A
                // reviewer is never told of a change it may not see, not
                // even by a position: its view moves only with what it is
                // sent.
                if self.view.is_none() && p.next != self.resume {
                    self.send(Event::default().id(&p.next), p.next.len() + 16)?;
                    self.resume = p.next.clone();
                }
                self.read_at = p.next.clone();
                Ok(full)
            }
            FeedRead::Gone(head) => {
                if self.view.is_some() {
                    let start = parse(head).map_err(|_| Some(Ended::Failed))?;
                    self.view = Some(View::starting(&start, true));
                }
                self.read_at = head.clone();
                self.resume = head.clone();
                let shown = self.shown_resume().map_err(|_| Some(Ended::Failed))?;
                let data = json!({ "head": shown }).to_string();
                let bytes = data.len() + shown.len() + 32;
                let refresh = Event::default().event("refresh").id(&shown).data(data);
                self.send(refresh, bytes)?;
                Ok(false)
            }
        }
    }

    /// Follows the feed until the client goes (`None`) or the stream must
    /// end.
    async fn follow(&mut self, mut first: Option<FeedRead>) -> Option<Ended> {
        let mut stopping = self.state.stopping();
        loop {
            if *stopping.borrow() {
                return Some(Ended::Shutdown);
            }
            if !self.credential.holds() {
                return Some(Ended::Credential);
            }
            // Read until caught up.
            loop {
                let page = match first.take() {
                    Some(read) => Arc::new(read),
                    None => match self.page().await {
                        Ok(p) => p,
                        Err(e) => return Some(e),
                    },
                };
                match self.deliver(&page) {
                    Ok(true) => {}
                    Ok(false) => break,
                    Err(e) => return e,
                }
            }
            // Wait for a commit, the end of the credential, or shutdown.
            tokio::select! {
                heard = self.commits.changed() => {
                    // The tenant's pump goes only with the last of its
                    // streams, so this one outlives it only in a bug.
                    if heard.is_err() {
                        return Some(Ended::Failed);
                    }
                    self.heard = *self.commits.borrow_and_update();
                }
                () = self.tx.closed() => return None,
                _ = stopping.changed() => {}
                () = self.credential.lapsed() => return Some(Ended::Credential),
            }
        }
    }

    /// Queues an event weighing `bytes`; `Err(None)` when the client has
    /// gone, and `Err(Some(Slow))` when its buffer, or its tenant's, is
    /// full.
    fn send(&self, e: Event, bytes: usize) -> Result<(), Option<Ended>> {
        let o = &self.state.options.events;
        let w = &self.weight;
        let stream = w.stream.fetch_add(bytes, Ordering::Relaxed) + bytes;
        let tenant = w.feed.buffered().fetch_add(bytes, Ordering::Relaxed) + bytes;
        if stream > o.buffer_bytes || tenant > o.tenant_buffer_bytes {
            w.release(bytes);
            return Err(Some(Ended::Slow));
        }
        match self.tx.try_send(Queued { event: e, bytes }) {
            Ok(()) => Ok(()),
            Err(mpsc::error::TrySendError::Closed(_)) => {
                w.release(bytes);
                Err(None)
            }
            Err(mpsc::error::TrySendError::Full(_)) => {
                w.release(bytes);
                Err(Some(Ended::Slow))
            }
        }
    }
}

/// How long a stream waits before it tries a failed read once more.
const RETRY_PAUSE: Duration = Duration::from_millis(250);

/// An entry's event and what it weighs while queued: its data and id, and
/// the framing around them.
fn weighed(entry: &host::FeedEntry, shown: &str) -> (Event, usize) {
    let e = event(entry, shown);
    // The data is what varies; an entry's strings bound it.
    let bytes = match &entry.change {
        Change::Task(t) => {
            let x = &t.entry;
            256 + t.id.len()
                + x.verb.len()
                + x.actor.as_ref().map_or(0, String::len)
                + x.assignee.as_ref().map_or(0, String::len)
        }
        Change::Timer(t) => 256 + t.run.len() + t.effect.len() + t.verb.len(),
    } + 2 * shown.len();
    (e, bytes)
}
