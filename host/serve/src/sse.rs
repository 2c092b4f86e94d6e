//! The SSE stream: `GET /v1/events` as server-sent events, read from the
//! tenant's feed. It owns one subscriber's life: where its stream starts
//! (`Last-Event-ID`, `?after`, or the feed's head), the wake-ups that make
//! it read again, the bound on what waits unsent, and the final event that
//! tells a client why its stream ended. Which changes its credential may
//! see, and the position each is shown at, are the feed pager's
//! ([`crate::feed_pager::Reading`]); each `task` or `timer` event's `data`
//! is the one wire shape of a change ([`crate::change::Event`]). A service
//! or operator is also sent a `job` event, the job as `GET /v1/jobs/{id}`
//! answers it, after each page of the feed whose changes a bulk job made:
//! read from the store once per job and page for all the tenant's streams
//! that deliver that page (`TenantFeed::named_read`), so it follows a job
//! run by any server on the database. It must
//! never send a change the credential may not see, skip a change it may,
//! or hold more than its buffer for a slow client: a stream's own, its
//! caller's share of its tenant's ([`CALLER_SHARE`]), and its tenant's.
//!
//! The feed is the news and a wake-up only a hint: after every wake-up
//! (this process's commits, other processes' through the backend, or the
//! credential check's timer) the producer reads the feed from its
//! position, so a lost wake-up costs time, never a change. Streams of one
//! tenant at one position share their reads ([`crate::shared_reads`]).

use std::convert::Infallible;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use std::collections::BTreeSet;

use axum::response::sse::{Event, KeepAlive, KeepAliveStream, Sse};
use futures_util::Stream;
use leasehold_host::{self as host, FeedRead, Verb};
use serde_json::json;
use tokio::sync::{mpsc, watch};

use crate::auth::{Principal, Scope};
use crate::caller_positions::Positions;
use crate::feed_pager::{Reading, Resume, head, read, resume};
use crate::holds::Hold;
use crate::problem::ApiError;
use crate::reviewer_view::{View, parse};
use crate::shared_reads::{PAGE, TenantFeed};
use crate::state::AppState;
use crate::waiters::caller_key;

/// A change as a server-sent event: named by what it is of, its position
/// (as its caller is shown it) as its `id`, the change itself as its
/// `data`; with what it weighs while queued (its data and id, and the
/// framing around them).
fn change_event(ev: &crate::change::Event) -> (Event, usize) {
    let data = ev.to_json();
    let bytes = data.len() + ev.position.len() + 32;
    let e = Event::default()
        .event(ev.change.kind())
        .id(&ev.position)
        .data(data);
    (e, bytes)
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

/// What a stream's queued events weigh: on the stream, on its caller
/// (whose streams share a part of their tenant's budget) and on its tenant
/// (whose streams share one budget).
struct Weight {
    stream: AtomicUsize,
    caller: Arc<AtomicUsize>,
    feed: Arc<TenantFeed>,
}

impl Weight {
    fn release(&self, bytes: usize) {
        self.stream.fetch_sub(bytes, Ordering::Relaxed);
        self.caller.fetch_sub(bytes, Ordering::Relaxed);
        self.feed.buffered().fetch_sub(bytes, Ordering::Relaxed);
    }
}

/// A caller's streams together hold at most this part of their tenant's
/// event budget: two callers that stop reading hold at most half of it, so
/// the tenant's other streams, reading, are never dropped for them.
pub const CALLER_SHARE: usize = 4;

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
    /// Only the changes of this run, when one is asked for.
    pub run: Option<String>,
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
    // A reviewer gives and is given its own positions (`crate::reviewer_view`);
    // where its stream starts is the feed's position its view stands for.
    let given = match &sub.after {
        Some((field, given)) => Some(resume(state, &sub.tenant, &positions, field, given).await?),
        None => None,
    };
    let seat = state.waiters.stream(&sub.principal)?;
    // Subscribed before the first read, so a commit made between the read
    // and the wait still wakes it.
    let name = sub.tenant.name();
    let feed = state
        .waiters
        .feeds
        .tenant(name, || Ok(state.engine.watch(name)?))?;
    let commits = feed.commits();
    let heard = *commits.borrow();
    let (start, first, view) = match given {
        // A position of the right shape may still be one this feed never
        // gave: the first read says so (`gone`) before the stream begins.
        Some(Resume {
            after: Some(at),
            view,
        }) => {
            let p = at.encode();
            let first = read(state, &sub.tenant, Some(p.clone()), PAGE).await?;
            (p, Some(first), view)
        }
        // A view whose changes are no longer kept: `gone`, from the head.
        Some(Resume { after: None, view }) => {
            let head = head(state, &sub.tenant).await?;
            (head.clone(), Some(FeedRead::Gone(head)), view)
        }
        None => {
            let head = head(state, &sub.tenant).await?;
            let view = if positions.viewer() {
                Some(View::starting(&parse(&head)?, true))
            } else {
                None
            };
            (head, None, view)
        }
    };
    let (tx, rx) = mpsc::channel(state.options.events.buffer.max(1));
    let last = Arc::new(Mutex::new(None));
    let weight = Arc::new(Weight {
        stream: AtomicUsize::new(0),
        caller: feed.caller_buffered(&caller_key(&sub.principal)),
        feed: feed.clone(),
    });
    let credential = state
        .credentials
        .hold(sub.authorization.clone(), sub.principal.clone());
    let run = sub.run.clone();
    let sub_scope = sub.principal.scope;
    let producer = Producer {
        state: state.clone(),
        sub,
        read_at: start.clone(),
        resume: start.clone(),
        reading: Reading::new(positions, view).of_run(run),
        jobs: (sub_scope != Scope::Reviewer).then(BTreeSet::new),
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
    /// What the caller is given of the feed, and where it is shown to
    /// stand: a reviewer's view stands for `resume` (`crate::reviewer_view`);
    /// a service or operator is shown `resume` itself.
    reading: Reading,
    /// The jobs the changes sent since the last `job` events named; `None`
    /// for a reviewer, who is sent no `job` event (it reaches no job).
    jobs: Option<BTreeSet<String>>,
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

    /// Where a client that reconnects resumes, as it is shown.
    fn shown_resume(&self) -> Result<String, ApiError> {
        self.reading.shown(&self.resume)
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
                    if let Some(offer) = self.reading.offer(&before, entry).map_err(failed)? {
                        let (e, bytes) = change_event(offer.event());
                        self.send(e, bytes)?;
                        self.reading.give(offer);
                        self.resume = entry.position.clone();
                        if let (Some(jobs), host::Change::Task(t)) = (&mut self.jobs, &entry.change)
                            && let Some(job) = &t.entry.job
                        {
                            jobs.insert(job.clone());
                        }
                    }
                    before = after;
                }
                // A service or operator sees every change, so the position
                // moves only past what it was sent; should it move past
                // anything else, an event with only an id says so. A
                // reviewer is never told of a change it may not see, not
                // even by a position: its view moves only with what it is
                // sent.
                if self.reading.view().is_none() && p.next != self.resume {
                    self.send(Event::default().id(&p.next), p.next.len() + 16)?;
                    self.resume = p.next.clone();
                }
                self.read_at = p.next.clone();
                Ok(full)
            }
            FeedRead::Gone(head) => {
                if self.reading.view().is_some() {
                    let start = parse(head).map_err(|_| Some(Ended::Failed))?;
                    self.reading.restart_at(&start);
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
                let full = match self.deliver(&page) {
                    Ok(full) => full,
                    Err(e) => return e,
                };
                if let Err(e) = self.announce_jobs().await {
                    return e;
                }
                if !full {
                    break;
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

    /// Sends a `job` event for each job the changes just sent named, as it
    /// stands now (further on than those changes, perhaps). A job that
    /// cannot be read is left for its next changes: the feed has carried
    /// each change it made already.
    async fn announce_jobs(&mut self) -> Result<(), Option<Ended>> {
        let Some(jobs) = self.jobs.as_mut() else {
            return Ok(());
        };
        // The streams that deliver this page (it ends at `read_at`) share
        // one read of each job.
        for id in std::mem::take(jobs) {
            let read = self.feed.named_read(&self.read_at, &id);
            let (state, tenant) = (self.state.clone(), self.sub.tenant.clone());
            let data = read
                .get_or_init(|| read_job(state, tenant, id))
                .await
                .clone();
            if let Some(data) = data {
                let bytes = data.len() + 32;
                self.send(Event::default().event("job").data(data), bytes)?;
            }
        }
        Ok(())
    }

    /// Queues an event weighing `bytes`; `Err(None)` when the client has
    /// gone, and `Err(Some(Slow))` when its buffer, its caller's share of
    /// its tenant's, or its tenant's is full.
    fn send(&self, e: Event, bytes: usize) -> Result<(), Option<Ended>> {
        let o = &self.state.options.events;
        let w = &self.weight;
        let stream = w.stream.fetch_add(bytes, Ordering::Relaxed) + bytes;
        let caller = w.caller.fetch_add(bytes, Ordering::Relaxed) + bytes;
        let tenant = w.feed.buffered().fetch_add(bytes, Ordering::Relaxed) + bytes;
        if stream > o.buffer_bytes
            || caller > o.tenant_buffer_bytes / CALLER_SHARE
            || tenant > o.tenant_buffer_bytes
        {
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

/// Job `id` as `GET /v1/jobs/{id}` answers it, as an event's data; none
/// when it is gone or cannot be read (logged).
async fn read_job(state: AppState, tenant: host::Tenant, id: String) -> Option<String> {
    let deadline = std::time::Instant::now() + state.options.request_timeout;
    let i = id.clone();
    let read = state
        .call(Verb::GetJob, tenant, deadline, move |t| t.get_job(&i))
        .await;
    match read {
        Ok(job) => job.and_then(|j| serde_json::to_string(&crate::api::jobs::Job::from(j)).ok()),
        Err(e) => {
            tracing::warn!(job = %id, error = %e, "an event stream could not read a job");
            None
        }
    }
}

/// How long a stream waits before it tries a failed read once more.
const RETRY_PAUSE: Duration = Duration::from_millis(250);
