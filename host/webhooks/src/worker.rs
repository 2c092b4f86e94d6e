//! One subscription's delivery worker, run by the server holding its
//! lease. It reads the tenant's feed ahead of the durable position into a
//! window, matches each entry against the filter, and delivers what
//! matches: one entry at a time per task (or timer), in feed order, and
//! up to the endpoint's bound of tasks at once. The position it saves is
//! the low-water mark of the window: the position after the longest run of
//! entries, from the start, that were acknowledged or matched nothing. So
//! it never passes an entry still owed, and a crash re-sends what lay
//! beyond, never skips it. It owns the window and the position's
//! progress; it must never change the subscription but through the store
//! calls named here (advance, set state, record attempts, lease).

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use leasehold_host::{Change, FeedRead};
use tokio::sync::watch;
use tokio::task::{JoinHandle, JoinSet};
use tokio::time::{MissedTickBehavior, sleep_until};

use crate::delivery::{End, Live, Message, Target, deliver, lock, ms};
use crate::filter::{Facts, Key};
use crate::shared::{Exit, Shared, TenantRuntime};
use crate::signing::message_id;
use crate::source::{START, SourceError, change_at, entries_between, place_between};
use crate::store::{SubState, Subscription, Update};

/// Facts looked up for filters on kinds and runs, shared with the reads.
type FactsCache = Arc<Mutex<HashMap<String, Option<Facts>>>>;
/// Most tasks whose facts a worker remembers.
const FACTS_KEPT: usize = 10_000;

struct Slot {
    position: String,
    done: bool,
    at: i64,
    bytes: usize,
}

/// The entries read and not yet passed by the position.
struct Window {
    first: u64,
    slots: VecDeque<Slot>,
    /// Where the next read begins.
    read_at: String,
    /// The feed's end, as the last read saw it.
    head: Option<String>,
    caught_up: bool,
    /// The low-water mark: every entry up to it is done.
    low: String,
    /// What the store holds.
    saved: String,
    queues: HashMap<Key, VecDeque<Message>>,
    busy: HashSet<Key>,
    ready: VecDeque<Key>,
    bytes: usize,
    /// Entries that matched and are not yet acknowledged.
    owed: usize,
}

impl Window {
    fn new(position: &str) -> Window {
        Window {
            first: 0,
            slots: VecDeque::new(),
            read_at: position.to_owned(),
            head: None,
            caught_up: false,
            low: position.to_owned(),
            saved: position.to_owned(),
            queues: HashMap::new(),
            busy: HashSet::new(),
            ready: VecDeque::new(),
            bytes: 0,
            owed: 0,
        }
    }

    fn next_idx(&self) -> u64 {
        self.first + self.slots.len() as u64
    }

    /// Marks entry `idx` done and moves the low-water mark over every done
    /// entry at the window's start; the bytes freed.
    fn done(&mut self, idx: u64) -> usize {
        if let Some(slot) = idx
            .checked_sub(self.first)
            .and_then(|i| self.slots.get_mut(usize::try_from(i).ok()?))
        {
            slot.done = true;
        }
        let mut freed = 0;
        while self.slots.front().is_some_and(|s| s.done) {
            if let Some(s) = self.slots.pop_front() {
                self.low = s.position;
                freed += s.bytes;
                self.first += 1;
            }
        }
        self.bytes -= freed;
        freed
    }

    fn enqueue(&mut self, msg: Message) {
        self.owed += 1;
        let key = msg.key.clone();
        let queue = self.queues.entry(key.clone()).or_default();
        queue.push_back(msg);
        if queue.len() == 1 && !self.busy.contains(&key) {
            self.ready.push_back(key);
        }
    }

    /// The key's delivery ended: its next entry (if any) waits its turn.
    fn finished(&mut self, key: &Key) {
        self.busy.remove(key);
        if self.queues.get(key).is_some_and(|q| !q.is_empty()) {
            self.ready.push_back(key.clone());
        } else {
            self.queues.remove(key);
        }
    }
}

pub(crate) struct WorkerCtx {
    pub shared: Arc<Shared>,
    pub tenant: Arc<TenantRuntime>,
    pub sub: Subscription,
    pub live: Arc<Mutex<Live>>,
    pub target: Arc<Target>,
    pub stop: watch::Receiver<bool>,
}

/// Gives the tenant back what a worker held, however it ends.
struct Held {
    tenant: Arc<TenantRuntime>,
    bytes: usize,
}

impl Drop for Held {
    fn drop(&mut self) {
        self.tenant
            .queued_bytes
            .fetch_sub(self.bytes, Ordering::AcqRel);
        self.tenant.running.fetch_sub(1, Ordering::AcqRel);
        self.tenant.reload.notify_one();
    }
}

/// Waits on an optional task; never, without one.
async fn join_opt<T>(h: &mut Option<JoinHandle<T>>) -> Result<T, tokio::task::JoinError> {
    match h {
        Some(h) => h.await,
        None => std::future::pending().await,
    }
}

/// Runs a blocking store or feed call off the async threads.
async fn blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> Option<T> {
    tokio::task::spawn_blocking(f).await.ok()
}

pub(crate) async fn run(mut ctx: WorkerCtx) -> Exit {
    ctx.tenant.running.fetch_add(1, Ordering::AcqRel);
    let mut held = Held {
        tenant: ctx.tenant.clone(),
        bytes: 0,
    };
    let options = &ctx.shared.options;
    let start = ctx.sub.position.clone().unwrap_or_else(|| START.to_owned());
    let mut w = Window::new(&start);
    let facts: FactsCache = Arc::default();
    let mut deliveries: JoinSet<(u64, Key, End)> = JoinSet::new();
    let mut reading: Option<JoinHandle<Result<FeedRead, SourceError>>> = None;
    let mut commits = ctx.tenant.commits.subscribe();
    let mut checkpoint = tokio::time::interval(options.checkpoint);
    checkpoint.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let mut renew = tokio::time::interval(options.lease / 3);
    renew.set_missed_tick_behavior(MissedTickBehavior::Delay);
    renew.tick().await;
    let mut last_renewed = Instant::now();
    let mut poll_at = tokio::time::Instant::now();
    let mut read_failures = 0u32;
    let mut retry_read_at: Option<tokio::time::Instant> = None;

    let exit = loop {
        while w.busy.len() < options.endpoint_parallelism {
            let Some(key) = w.ready.pop_front() else {
                break;
            };
            let Some(msg) = w.queues.get_mut(&key).and_then(VecDeque::pop_front) else {
                continue;
            };
            w.busy.insert(key);
            deliveries.spawn(deliver(ctx.target.clone(), msg));
        }
        let share =
            ctx.tenant.limits.queued_bytes / ctx.tenant.running.load(Ordering::Acquire).max(1);
        let room = w.slots.len() < options.window_entries && w.bytes < share;
        let may_read = reading.is_none() && !w.caught_up && room && retry_read_at.is_none();
        if may_read {
            reading = Some(start_read(&ctx, &w.read_at, &facts));
        }
        show(&ctx, &w, deliveries.len());

        tokio::select! {
            biased;
            _ = ctx.stop.changed() => {
                save(&ctx, &mut w).await;
                break Exit::Stopped;
            }
            Some(joined) = deliveries.join_next(), if !deliveries.is_empty() => {
                let Ok((idx, key, end)) = joined else { continue };
                match end {
                    End::Acknowledged => {
                        w.owed -= 1;
                        w.finished(&key);
                        let freed = w.done(idx);
                        held.bytes -= freed;
                        ctx.tenant.queued_bytes.fetch_sub(freed, Ordering::AcqRel);
                    }
                    End::Gone(last) => {
                        let note = format!(
                            "the endpoint answered 410 Gone to {} at {}: paused; resuming sends \
                             again from the position",
                            last.message_id, last.at
                        );
                        break stop_as(&ctx, &mut w, SubState::Paused, note).await;
                    }
                    End::GaveUp(last) => {
                        let note = format!(
                            "{} was not acknowledged within the retry schedule (last attempt \
                             {:?} at {}): nothing after it is delivered until the subscription \
                             is resumed",
                            last.message_id, last.outcome, last.at
                        );
                        break stop_as(&ctx, &mut w, SubState::Failing, note).await;
                    }
                }
            }
            joined = join_opt(&mut reading), if reading.is_some() => {
                reading = None;
                match joined {
                    Ok(Ok(FeedRead::Page(page))) => {
                        read_failures = 0;
                        retry_read_at = None;
                        let mut before = w.read_at.clone();
                        for entry in page.entries {
                            let Some(place) = place_between(&before, &entry.position) else {
                                break;
                            };
                            let idx = w.next_idx();
                            let change_facts = match &entry.change {
                                Change::Task(t) if ctx.sub.filter.needs_facts(&entry.change) => {
                                    lock(&facts).get(&t.id).cloned().flatten()
                                }
                                _ => None,
                            };
                            let matched = ctx.sub.filter.matches(&entry.change, change_facts.as_ref());
                            let at = change_at(&entry.change);
                            let mut bytes = entry.position.len();
                            if matched {
                                let body = bytes::Bytes::from((ctx.shared.render)(&ctx.sub.id, &entry));
                                bytes += body.len();
                                w.enqueue(Message {
                                    idx,
                                    key: Key::of(&entry.change),
                                    id: message_id(&ctx.sub.id, place),
                                    body,
                                    at,
                                });
                            }
                            before = entry.position.clone();
                            w.slots.push_back(Slot { position: entry.position, done: !matched, at, bytes });
                            w.bytes += bytes;
                            held.bytes += bytes;
                            ctx.tenant.queued_bytes.fetch_add(bytes, Ordering::AcqRel);
                        }
                        if before != page.next {
                            break Exit::Broken(format!(
                                "a page of the feed after {} did not end where its entries did",
                                w.read_at
                            ));
                        }
                        w.caught_up = page.next == page.head;
                        w.read_at = page.next;
                        w.head = Some(page.head);
                        let freed = w.done(u64::MAX);
                        held.bytes -= freed;
                        ctx.tenant.queued_bytes.fetch_sub(freed, Ordering::AcqRel);
                        if lock(&facts).len() > FACTS_KEPT {
                            lock(&facts).clear();
                        }
                        if w.caught_up {
                            poll_at = tokio::time::Instant::now() + options.poll;
                        }
                    }
                    Ok(Ok(FeedRead::Gone(head))) => {
                        let note = format!(
                            "the feed no longer holds the entries after {} (trimmed; its head was \
                             {head}): this subscription lost them there",
                            w.read_at
                        );
                        break stop_as(&ctx, &mut w, SubState::Gone, note).await;
                    }
                    Ok(Err(e)) => {
                        read_failures = read_failures.saturating_add(1);
                        let wait = Duration::from_millis(200 << read_failures.min(8));
                        tracing::warn!(tenant = %ctx.tenant.name, subscription = %ctx.sub.id, error = %e, "reading the feed failed; trying again");
                        retry_read_at = Some(tokio::time::Instant::now() + wait);
                    }
                    Err(_) => retry_read_at = Some(tokio::time::Instant::now() + options.poll),
                }
            }
            _ = commits.changed(), if w.caught_up => {
                commits.borrow_and_update();
                w.caught_up = false;
            }
            _ = sleep_until(poll_at), if w.caught_up => w.caught_up = false,
            _ = sleep_until(retry_read_at.unwrap_or_else(tokio::time::Instant::now)), if retry_read_at.is_some() => retry_read_at = None,
            _ = checkpoint.tick() => {
                if let Some(exit) = save(&ctx, &mut w).await {
                    break exit;
                }
            }
            _ = renew.tick() => {
                let s = ctx.shared.clone();
                let (tenant, id) = (ctx.tenant.name.clone(), ctx.sub.id.clone());
                let lease_ms = u32::try_from(options.lease.as_millis()).unwrap_or(u32::MAX);
                let holder = options.holder.clone();
                match blocking(move || s.store.lease(&tenant, &id, &holder, ms(SystemTime::now()), lease_ms)).await {
                    Some(Ok(true)) => last_renewed = Instant::now(),
                    Some(Ok(false)) => break Exit::LeaseLost,
                    _ if last_renewed.elapsed() > options.lease * 2 / 3 => break Exit::LeaseLost,
                    _ => {}
                }
            }
        }
    };
    deliveries.abort_all();
    exit
}

/// Starts reading the next page, looking up the facts its task entries
/// need for the filter.
fn start_read(
    ctx: &WorkerCtx,
    after: &str,
    facts: &FactsCache,
) -> JoinHandle<Result<FeedRead, SourceError>> {
    let source = ctx.shared.source.clone();
    let tenant = ctx.tenant.name.clone();
    let after = after.to_owned();
    let limit = ctx.shared.options.page;
    let filter = ctx.sub.filter.clone();
    let facts = facts.clone();
    tokio::task::spawn_blocking(move || {
        let read = source.read(&tenant, &after, limit)?;
        if let FeedRead::Page(page) = &read {
            for e in &page.entries {
                if let Change::Task(t) = &e.change
                    && filter.needs_facts(&e.change)
                    && !lock(&facts).contains_key(&t.id)
                {
                    let found = source.task_facts(&tenant, &t.id)?;
                    lock(&facts).insert(t.id.clone(), found);
                }
            }
        }
        Ok(read)
    })
}

/// Writes the low-water mark and the failed attempts to the store, when
/// they moved; an exit when the subscription changed under the worker.
async fn save(ctx: &WorkerCtx, w: &mut Window) -> Option<Exit> {
    let attempts = std::mem::take(&mut lock(&ctx.live).unrecorded);
    let store = ctx.shared.store.clone();
    let (tenant, id, revision) = (
        ctx.tenant.name.clone(),
        ctx.sub.id.clone(),
        ctx.sub.revision,
    );
    if !attempts.is_empty() {
        let (s, t, i) = (store.clone(), tenant.clone(), id.clone());
        if let Some(Err(e)) = blocking(move || s.record_attempts(&t, &i, &attempts)).await {
            tracing::warn!(tenant = %tenant, subscription = %id, error = %e, "recording attempts failed");
        }
    }
    if w.low == w.saved {
        return None;
    }
    let low = w.low.clone();
    let (t, i) = (tenant.clone(), id.clone());
    match blocking(move || store.advance(&t, &i, revision, &low)).await {
        Some(Ok(Update::Done(_))) => {
            w.saved = w.low.clone();
            None
        }
        Some(Ok(Update::Stale(_))) => Some(Exit::Reload),
        Some(Ok(Update::Missing)) => Some(Exit::Missing),
        Some(Err(e)) => {
            tracing::warn!(tenant = %tenant, subscription = %id, error = %e, "saving the position failed");
            None
        }
        None => None,
    }
}

/// Saves what was delivered and leaves the active state with `note`,
/// trying until the store answers or the worker is told to stop.
async fn stop_as(ctx: &WorkerCtx, w: &mut Window, state: SubState, note: String) -> Exit {
    let mut wait = Duration::from_millis(100);
    let mut stop = ctx.stop.clone();
    loop {
        if let Some(exit) = save(ctx, w).await {
            return exit;
        }
        if w.low == w.saved {
            let store = ctx.shared.store.clone();
            let (t, i, r, n) = (
                ctx.tenant.name.clone(),
                ctx.sub.id.clone(),
                ctx.sub.revision,
                note.clone(),
            );
            match blocking(move || store.set_state(&t, &i, r, state, Some(n))).await {
                Some(Ok(Update::Done(_))) => return Exit::Inactive(state),
                Some(Ok(Update::Stale(_))) => return Exit::Reload,
                Some(Ok(Update::Missing)) => return Exit::Missing,
                _ => {}
            }
        }
        tokio::select! {
            _ = tokio::time::sleep(wait) => {}
            _ = stop.changed() => return Exit::Stopped,
        }
        wait = (wait * 2).min(Duration::from_secs(10));
    }
}

/// Updates what the worker shows.
fn show(ctx: &WorkerCtx, w: &Window, in_flight: usize) {
    let now = ms(SystemTime::now());
    // Done entries leave the window's front at once: the front is owed.
    let oldest = w.slots.front().filter(|s| !s.done).map(|s| s.at);
    let lag_seconds = oldest.map_or(0.0, |at| now.saturating_sub(at).max(0) as f64 / 1000.0);
    let lag_entries = w
        .head
        .as_deref()
        .and_then(|h| entries_between(&w.low, h))
        .unwrap_or(0);
    {
        let mut live = lock(&ctx.live);
        live.delivered_to.clone_from(&w.low);
        live.in_flight = in_flight;
        live.queued = w.owed.saturating_sub(in_flight);
        live.queued_bytes = w.bytes;
        live.lag_entries = lag_entries;
        live.lag_seconds = lag_seconds;
    }
    let mut m = lock(&ctx.target.metrics);
    m.lag_entries = lag_entries;
    m.lag_seconds = lag_seconds;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slot(w: &mut Window, position: &str, owed: bool) -> u64 {
        let idx = w.next_idx();
        w.slots.push_back(Slot {
            position: position.into(),
            done: !owed,
            at: 0,
            bytes: 10,
        });
        w.bytes += 10;
        idx
    }

    fn msg(idx: u64, task: &str) -> Message {
        Message {
            idx,
            key: Key::Task(task.into()),
            id: format!("m{idx}"),
            body: bytes::Bytes::new(),
            at: 0,
        }
    }

    /// The position never passes an entry still owed, whatever order the
    /// acknowledgements come in.
    #[test]
    fn the_low_water_mark_stops_at_the_first_entry_still_owed() {
        let mut w = Window::new("f");
        let a = slot(&mut w, "f0.1", true);
        let _skipped = slot(&mut w, "f0.2", false);
        let b = slot(&mut w, "f0.3", true);
        let c = slot(&mut w, "f0.4", true);
        assert_eq!(w.done(u64::MAX), 0, "nothing done at the front yet");
        assert_eq!(w.done(b), 0);
        assert_eq!(w.low, "f", "b is done but a is still owed");
        assert_eq!(w.done(a), 30, "a, the skipped entry and b leave together");
        assert_eq!(w.low, "f0.3");
        assert_eq!(w.done(c), 10);
        assert_eq!((w.low.as_str(), w.slots.len(), w.bytes), ("f0.4", 0, 0));
    }

    /// One task's entries wait for each other; another task's do not.
    #[test]
    fn a_tasks_next_entry_waits_until_its_previous_one_ends() {
        let mut w = Window::new("f");
        w.enqueue(msg(0, "t1"));
        w.enqueue(msg(1, "t1"));
        w.enqueue(msg(2, "t2"));
        assert_eq!(w.owed, 3);
        let ready: Vec<Key> = w.ready.drain(..).collect();
        assert_eq!(ready, [Key::Task("t1".into()), Key::Task("t2".into())]);
        for k in &ready {
            let m = w
                .queues
                .get_mut(k)
                .and_then(VecDeque::pop_front)
                .expect("head");
            assert!(m.idx == 0 || m.idx == 2);
            w.busy.insert(k.clone());
        }
        assert!(w.ready.is_empty(), "t1's second entry waits");
        w.finished(&Key::Task("t2".into()));
        assert!(w.ready.is_empty() && !w.queues.contains_key(&Key::Task("t2".into())));
        w.finished(&Key::Task("t1".into()));
        assert_eq!(w.ready, [Key::Task("t1".into())]);
        assert_eq!(w.queues[&Key::Task("t1".into())][0].idx, 1);
    }
}
