//! Shared feed reads: reads of the feed shared between one tenant's event
//! streams and long-polls. Every stream that is caught up sits at the same
//! position and wakes for the same commit; without sharing, each would read
//! the same page of the feed, one engine call per subscriber per commit. Here one tenant's streams hear its
//! commits through one subscription (the *pump*, which counts them), and a
//! stream that needs the feed after a position takes a read already made,
//! or under way, from that position, when that read began after the last
//! commit the stream heard of; otherwise it starts one that others may take.
//!
//! Long-polls follow the feed the same way ([`Follower`]), so that a
//! waiting `claim-next` or `claim-due` tries again only after a change that
//! could give it something, not after every commit of its tenant.
//!
//! It owns the count of a tenant's commits as its streams hear them, the
//! reads (*flights*) kept for sharing, and the reads of what a page's
//! changes name (a bulk job's state, [`TenantFeed::named_read`]), one per
//! name and page for all the streams that deliver that page. It must never give a stream a
//! read that began before a commit the stream was woken for (that stream
//! would wait for the next commit with a change unsent), nor one tenant's
//! read to another tenant's stream. What a credential may see is decided
//! by each stream after the read, never here.

use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, Mutex, PoisonError, Weak};

use leasehold_host::{Change, Changes, FeedRead};
use tokio::sync::{OnceCell, watch};

use crate::problem::ApiError;

/// Entries asked for per read of the feed. Every read of a tenant asks for
/// the same number, so that any read from a position answers for all.
pub const PAGE: u32 = 100;

/// Reads kept per tenant for streams still to take them: enough for the
/// caught-up streams and a few catching up, small enough that a tenant's
/// pages in memory stay few.
const KEPT: usize = 16;

/// Pages whose named reads are kept: the ends of the last few pages
/// delivered, enough for streams a little behind the others.
const NAMED_PAGES: usize = 8;

/// One read of something a page's changes name, made once: its answer as
/// the event's data, or none.
pub type NamedRead = Arc<OnceCell<Option<String>>>;

/// What a shared read answered: the page, or why it failed (told to every
/// stream that took it).
pub type Answer = Result<Arc<FeedRead>, Arc<ApiError>>;

/// One read of the feed after `after`, begun when the tenant's commit
/// count stood at `began`.
struct Flight {
    after: String,
    began: u64,
    answer: Arc<OnceCell<Answer>>,
}

/// The shared reads of every tenant with a stream open.
#[derive(Default)]
pub struct Feeds {
    tenants: Mutex<HashMap<Arc<str>, Weak<TenantFeed>>>,
}

impl Feeds {
    /// The tenant's shared reads, made (with its pump listening to
    /// `watch()`'s commits) for its first stream or long-poll, and let go
    /// with its last. `watch` is called only when it is made.
    pub fn tenant(
        &self,
        name: &str,
        watch: impl FnOnce() -> Result<Changes, ApiError>,
    ) -> Result<Arc<TenantFeed>, ApiError> {
        let mut tenants = self.tenants.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(feed) = tenants.get(name).and_then(Weak::upgrade) {
            return Ok(feed);
        }
        // Tenants whose streams all ended leave dead entries: swept here,
        // so the map holds no more than the tenants with streams, plus one.
        tenants.retain(|_, w| w.strong_count() > 0);
        let changes = watch()?;
        let (tx, rx) = watch::channel(0u64);
        let pump = tokio::spawn(pump(changes, tx));
        let feed = Arc::new(TenantFeed {
            commits: rx,
            flights: Mutex::new(VecDeque::new()),
            pump,
            buffered: AtomicUsize::new(0),
            callers: Mutex::new(HashMap::new()),
            named: Mutex::new(VecDeque::new()),
        });
        tenants.insert(Arc::from(name), Arc::downgrade(&feed));
        Ok(feed)
    }
}

/// Counts the tenant's commits as they are heard, for as long as any of
/// its readers holds its [`TenantFeed`] (which stops it when dropped).
async fn pump(mut changes: Changes, commits: watch::Sender<u64>) {
    loop {
        changes.changed().await;
        commits.send_modify(|n| *n += 1);
    }
}

/// One tenant's commit count and shared reads.
pub struct TenantFeed {
    commits: watch::Receiver<u64>,
    flights: Mutex<VecDeque<Flight>>,
    pump: tokio::task::JoinHandle<()>,
    /// Bytes of events queued, unsent, for all of the tenant's streams.
    buffered: AtomicUsize,
    /// The same, for each caller's streams (by `crate::waiters::caller_key`):
    /// held by those streams, let go with the last of them.
    callers: Mutex<HashMap<String, Weak<AtomicUsize>>>,
    /// By the end of a page, the reads of what its changes name.
    named: Mutex<VecDeque<(String, HashMap<String, NamedRead>)>>,
}

impl Drop for TenantFeed {
    fn drop(&mut self) {
        self.pump.abort();
    }
}

impl TenantFeed {
    /// Bytes of events queued, unsent, for all of the tenant's streams.
    pub fn buffered(&self) -> &AtomicUsize {
        &self.buffered
    }

    /// Bytes of events queued, unsent, for the streams of the caller named
    /// `key`: one count for all of them, held while any of them is.
    pub fn caller_buffered(&self, key: &str) -> Arc<AtomicUsize> {
        let mut callers = self.callers.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(n) = callers.get(key).and_then(Weak::upgrade) {
            return n;
        }
        // Callers whose streams all ended leave dead entries: swept here,
        // so the map holds no more than the callers with streams, plus one.
        callers.retain(|_, w| w.strong_count() > 0);
        let n = Arc::new(AtomicUsize::new(0));
        callers.insert(key.to_owned(), Arc::downgrade(&n));
        n
    }

    /// The one read of `name` for the page that ends at `next`, shared by
    /// every stream that delivers that page. The first to ask makes it,
    /// once it has read the page, so its answer is never older than the
    /// page's changes; a stream at another page end asks for its own.
    pub fn named_read(&self, next: &str, name: &str) -> NamedRead {
        let mut named = self.named.lock().unwrap_or_else(PoisonError::into_inner);
        let at = match named.iter().position(|(n, _)| n == next) {
            Some(i) => i,
            None => {
                if named.len() >= NAMED_PAGES {
                    named.pop_front();
                }
                named.push_back((next.to_owned(), HashMap::new()));
                named.len() - 1
            }
        };
        named[at].1.entry(name.to_owned()).or_default().clone()
    }

    /// A stream's view of the tenant's commit count, with the count as it
    /// stands taken as heard: a stream reads once when it begins.
    pub fn commits(&self) -> watch::Receiver<u64> {
        let mut rx = self.commits.clone();
        rx.borrow_and_update();
        rx
    }

    /// The feed after `after`, as a read that began once the count stood
    /// at `heard` or later: one under way or kept, or else `read`, made
    /// here and kept for others.
    pub async fn read<F, Fut>(&self, after: &str, heard: u64, read: F) -> Answer
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<FeedRead, ApiError>>,
    {
        let answer = {
            let mut flights = self.flights.lock().unwrap_or_else(PoisonError::into_inner);
            let kept = flights
                .iter()
                .rev()
                .find(|f| f.after == after && f.began >= heard);
            match kept {
                Some(f) => {
                    metrics::counter!("leasehold_event_reads_total", "read" => "shared")
                        .increment(1);
                    f.answer.clone()
                }
                None => {
                    // The count is taken before the read begins, so the
                    // read sees at least every commit counted so far.
                    let began = *self.commits.borrow();
                    let answer = Arc::new(OnceCell::new());
                    // An older read from here serves no one this one does
                    // not; its takers keep their own hold on it.
                    flights.retain(|f| f.after != after);
                    flights.push_back(Flight {
                        after: after.to_owned(),
                        began,
                        answer: answer.clone(),
                    });
                    while flights.len() > KEPT {
                        flights.pop_front();
                    }
                    metrics::counter!("leasehold_event_reads_total", "read" => "own").increment(1);
                    answer
                }
            }
        };
        // A stream that goes while its read is under way leaves the read to
        // the next stream that waits on it.
        let got = answer
            .get_or_init(|| async { read().await.map(Arc::new).map_err(Arc::new) })
            .await
            .clone();
        if got.is_err() {
            // Told to the streams that waited on it, never kept: a stream
            // that comes later reads again rather than hear an old failure.
            self.flights
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .retain(|f| !Arc::ptr_eq(&f.answer, &answer));
        }
        got
    }
}

/// A long-poll's watch on its tenant's feed: after each commit heard, it
/// reads the feed on from where it stands (sharing the read with the
/// tenant's other readers) and says whether a change there could give its
/// caller something.
pub struct Follower {
    feed: Arc<TenantFeed>,
    commits: watch::Receiver<u64>,
    position: Option<String>,
}

impl Follower {
    /// Hears every commit from now on; it follows nothing until
    /// [`begin_at`](Self::begin_at).
    pub fn new(feed: Arc<TenantFeed>) -> Follower {
        let commits = feed.commits();
        Follower {
            feed,
            commits,
            position: None,
        }
    }

    /// Whether it has a position to follow from.
    pub fn following(&self) -> bool {
        self.position.is_some()
    }

    /// Follows from `position`: a head of the feed read after this follower
    /// was made, and before the caller's next try, so that every change the
    /// try may not have seen lies after it.
    pub fn begin_at(&mut self, position: String) {
        self.position = Some(position);
    }

    /// Returns once a change after the position is one that `wakes`, or
    /// when the feed cannot be followed (a read failed, the position was
    /// trimmed): the caller then tries again, as it would after any commit.
    /// Pages read past without a match move the position on.
    pub async fn wait<F, Fut>(&mut self, read: F, wakes: impl Fn(&Change) -> bool)
    where
        F: Fn(String) -> Fut,
        Fut: Future<Output = Result<FeedRead, ApiError>>,
    {
        loop {
            if self.commits.changed().await.is_err() {
                return;
            }
            let heard = *self.commits.borrow_and_update();
            let Some(mut position) = self.position.clone() else {
                return;
            };
            loop {
                let answer = self
                    .feed
                    .read(&position, heard, || read(position.clone()))
                    .await;
                match answer.as_deref() {
                    Ok(FeedRead::Page(p)) => {
                        let matched = p.entries.iter().any(|e| wakes(&e.change));
                        let full = p.entries.len() >= PAGE as usize;
                        position = p.next.clone();
                        self.position = Some(position.clone());
                        if matched {
                            return;
                        }
                        if !full {
                            break;
                        }
                    }
                    Ok(FeedRead::Gone(head)) => {
                        self.position = Some(head.clone());
                        return;
                    }
                    Err(_) => return,
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use leasehold_host::FeedPage;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use tokio::sync::oneshot;

    fn page(next: &str) -> FeedRead {
        FeedRead::Page(FeedPage {
            entries: Vec::new(),
            next: next.to_owned(),
            head: next.to_owned(),
        })
    }

    fn feed(commits: watch::Receiver<u64>) -> TenantFeed {
        TenantFeed {
            commits,
            flights: Mutex::new(VecDeque::new()),
            pump: tokio::spawn(async {}),
            buffered: AtomicUsize::new(0),
            callers: Mutex::new(HashMap::new()),
            named: Mutex::new(VecDeque::new()),
        }
    }

    #[tokio::test]
    async fn a_named_read_is_made_once_per_page_end_and_name() {
        let (_tx, rx) = watch::channel(0);
        let f = feed(rx);
        let made = AtomicUsize::new(0);
        let read = |next: &str, name: &str| {
            let cell = f.named_read(next, name);
            let (next, name) = (next.to_owned(), name.to_owned());
            let made = &made;
            async move {
                cell.get_or_init(|| async {
                    made.fetch_add(1, Ordering::SeqCst);
                    Some(format!("{name}@{next}"))
                })
                .await
                .clone()
            }
        };
        assert_eq!(read("p1", "j").await.as_deref(), Some("j@p1"));
        assert_eq!(read("p1", "j").await.as_deref(), Some("j@p1"));
        assert_eq!(
            made.load(Ordering::SeqCst),
            1,
            "one read for one page and name"
        );
        assert_eq!(read("p2", "j").await.as_deref(), Some("j@p2"));
        assert_eq!(read("p1", "k").await.as_deref(), Some("k@p1"));
        assert_eq!(made.load(Ordering::SeqCst), 3);
        // Only the last few page ends are kept.
        for i in 0..NAMED_PAGES {
            read(&format!("q{i}"), "j").await;
        }
        assert_eq!(read("p1", "j").await.as_deref(), Some("j@p1"));
        assert_eq!(made.load(Ordering::SeqCst), 3 + NAMED_PAGES + 1);
    }

    fn next_of(a: &Answer) -> String {
        match a.as_ref().expect("a page").as_ref() {
            FeedRead::Page(p) => p.next.clone(),
            FeedRead::Gone(h) => h.clone(),
        }
    }

    #[tokio::test]
    async fn streams_at_one_position_share_a_read_under_way() {
        let (_tx, rx) = watch::channel(3u64);
        let feed = Arc::new(feed(rx));
        let reads = Arc::new(AtomicUsize::new(0));
        let (open, gate) = oneshot::channel::<()>();
        let first = {
            let (feed, reads) = (feed.clone(), reads.clone());
            tokio::spawn(async move {
                feed.read("f0.1", 3, || async move {
                    reads.fetch_add(1, Ordering::SeqCst);
                    gate.await.expect("opened");
                    Ok(page("f0.2"))
                })
                .await
            })
        };
        // The first read is under way (its flight is kept) before the
        // second stream asks.
        while feed.flights.lock().expect("unpoisoned").is_empty() {
            tokio::task::yield_now().await;
        }
        let second = {
            let (feed, reads) = (feed.clone(), reads.clone());
            tokio::spawn(async move {
                feed.read("f0.1", 2, || async move {
                    reads.fetch_add(1, Ordering::SeqCst);
                    Ok(page("wrong"))
                })
                .await
            })
        };
        open.send(()).expect("the first read waits");
        let (a, b) = (
            first.await.expect("the task ran"),
            second.await.expect("the task ran"),
        );
        assert_eq!(reads.load(Ordering::SeqCst), 1);
        assert!(Arc::ptr_eq(
            a.as_ref().expect("a page"),
            b.as_ref().expect("a page")
        ));
        assert_eq!(next_of(&b), "f0.2");
    }

    #[tokio::test]
    async fn a_read_begun_before_a_heard_commit_is_not_shared() {
        let (tx, rx) = watch::channel(1u64);
        let feed = feed(rx);
        let a = feed.read("f", 1, || async { Ok(page("f0.1")) }).await;
        assert_eq!(next_of(&a), "f0.1");
        // A stream woken by the second commit must not take the read made
        // before it, though it is from the same position.
        tx.send(2).expect("a receiver");
        let b = feed.read("f", 2, || async { Ok(page("f0.2")) }).await;
        assert_eq!(next_of(&b), "f0.2");
        // A stream that heard only the first commit may take either; it
        // takes the newest.
        let c = feed
            .read("f", 1, || async { panic!("not read again") })
            .await;
        assert_eq!(next_of(&c), "f0.2");
        // Another position is another read.
        let d = feed.read("f0.2", 2, || async { Ok(page("f0.3")) }).await;
        assert_eq!(next_of(&d), "f0.3");
    }

    #[tokio::test]
    async fn a_failed_read_is_told_to_its_waiters_and_not_kept() {
        let (_tx, rx) = watch::channel(0u64);
        let feed = Arc::new(feed(rx));
        let (open, gate) = oneshot::channel::<()>();
        let first = {
            let feed = feed.clone();
            tokio::spawn(async move {
                feed.read("f", 0, || async move {
                    gate.await.expect("opened");
                    Err(ApiError::Unavailable {
                        kind: "overloaded",
                        detail: "test".into(),
                    })
                })
                .await
            })
        };
        while feed.flights.lock().expect("unpoisoned").is_empty() {
            tokio::task::yield_now().await;
        }
        let second = {
            let feed = feed.clone();
            tokio::spawn(async move { feed.read("f", 0, || async { Ok(page("x")) }).await })
        };
        // The second waits on the first's read before it fails.
        while Arc::strong_count(&feed.flights.lock().expect("unpoisoned")[0].answer) < 3 {
            tokio::task::yield_now().await;
        }
        open.send(()).expect("the first read waits");
        assert!(first.await.expect("the task ran").is_err());
        assert!(
            second.await.expect("the task ran").is_err(),
            "its waiter hears the failure"
        );
        // A stream that comes later, with no commit since, reads again.
        let c = feed.read("f", 0, || async { Ok(page("f0.1")) }).await;
        assert_eq!(next_of(&c), "f0.1");
    }

    #[tokio::test]
    async fn a_read_whose_stream_went_is_finished_by_the_next_taker() {
        let (_tx, rx) = watch::channel(0u64);
        let feed = Arc::new(feed(rx));
        let started = Arc::new(tokio::sync::Notify::new());
        let first = {
            let (feed, started) = (feed.clone(), started.clone());
            tokio::spawn(async move {
                feed.read("f", 0, || async move {
                    started.notify_one();
                    std::future::pending::<()>().await;
                    Ok(page("never"))
                })
                .await
            })
        };
        started.notified().await;
        first.abort();
        assert!(first.await.expect_err("aborted").is_cancelled());
        let b = feed.read("f", 0, || async { Ok(page("f0.1")) }).await;
        assert_eq!(next_of(&b), "f0.1");
    }

    #[test]
    fn a_tenant_without_streams_is_let_go() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("a runtime");
        rt.block_on(async {
            let feeds = Feeds::default();
            let engine = leasehold_host::Engine::in_memory().expect("a memory engine");
            let a = feeds
                .tenant("a", || Ok(engine.watch("a").expect("watch")))
                .expect("the tenant\'s feed");
            let again = feeds
                .tenant("a", || panic!("made once while a stream holds it"))
                .expect("the tenant\'s feed");
            assert!(Arc::ptr_eq(&a, &again));
            let b = feeds
                .tenant("b", || Ok(engine.watch("b").expect("watch")))
                .expect("the tenant\'s feed");
            assert!(!Arc::ptr_eq(&a, &b));
            drop((a, again));
            let a2 = feeds
                .tenant("a", || Ok(engine.watch("a").expect("watch")))
                .expect("the tenant\'s feed");
            assert!(!Arc::ptr_eq(&a2, &b));
            assert_eq!(feeds.tenants.lock().expect("unpoisoned").len(), 2);
        });
    }
}
