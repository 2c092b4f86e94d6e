//! The change record where writers really run side by side: commits held
//! at a barrier so that one that began first commits last, and commit
//! notices between engines (hosts) on one database.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use leasehold_host::storage::postgres::PgBackend;
use leasehold_host::storage::{Backend, Entry, HeardHook, Mode, Pending, StorageError, Txn, Write};
use leasehold_host::{Change, Engine, FeedEntry, FeedRead, ManualClock, Tenant};
use leasehold_tests::pg::Schema;
use leasehold_tests::*;

/// A point a test waits for, once.
#[derive(Default)]
struct Flag {
    set: Mutex<bool>,
    cond: Condvar,
}

impl Flag {
    fn raise(&self) {
        *self.set.lock().expect("flag") = true;
        self.cond.notify_all();
    }

    /// Waits for the flag, at most a minute (a bound on a hang, not a guess
    /// at how long anything takes).
    fn wait(&self) {
        let set = self.set.lock().expect("flag");
        let (set, _) = self
            .cond
            .wait_timeout_while(set, Duration::from_secs(60), |s| !*s)
            .expect("flag");
        assert!(*set, "waited a minute for the other side");
    }
}

/// The barrier: the first write transaction that commits says so and waits
/// to be let go; every later one (a retry, the next call) goes straight
/// through.
#[derive(Default)]
struct Gate {
    armed: AtomicBool,
    reached: Flag,
    released: Flag,
}

/// PostgreSQL, with the first commit held at the gate and, optionally,
/// every call given one writer slot.
struct Held {
    pg: PgBackend,
    gate: Arc<Gate>,
    slot: Option<u32>,
}

struct HeldTxn {
    inner: Box<dyn Txn>,
    gate: Arc<Gate>,
    slot: Option<u32>,
}

impl Backend for Held {
    fn begin(
        &self,
        tenant: &str,
        mode: Mode,
        lock_wait: Duration,
    ) -> Result<Box<dyn Txn>, StorageError> {
        Ok(Box::new(HeldTxn {
            inner: self.pg.begin(tenant, mode, lock_wait)?,
            gate: self.gate.clone(),
            slot: self.slot,
        }))
    }

    fn concurrent_writers(&self) -> bool {
        self.pg.concurrent_writers()
    }

    fn begin_with_deadline(
        &self,
        tenant: &str,
        mode: Mode,
        lock_wait: Duration,
        deadline: Duration,
    ) -> Result<Box<dyn Txn>, StorageError> {
        Ok(Box::new(HeldTxn {
            inner: self
                .pg
                .begin_with_deadline(tenant, mode, lock_wait, deadline)?,
            gate: self.gate.clone(),
            slot: self.slot,
        }))
    }

    fn announce(&self, tenant: &str) {
        self.pg.announce(tenant);
    }

    fn listen(&self, heard: HeardHook) -> bool {
        self.pg.listen(heard)
    }
}

impl Txn for HeldTxn {
    fn get(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>, StorageError> {
        self.inner.get(key)
    }

    fn get_many(&mut self, keys: &[Vec<u8>]) -> Result<Vec<Option<Vec<u8>>>, StorageError> {
        self.inner.get_many(keys)
    }

    fn scan(
        &mut self,
        start: &[u8],
        end: Option<&[u8]>,
        limit: u32,
        reverse: bool,
        max_bytes: usize,
    ) -> Result<(Vec<Entry>, bool), StorageError> {
        self.inner.scan(start, end, limit, reverse, max_bytes)
    }

    fn commit(self: Box<Self>, batch: Vec<Write>) -> Result<Pending, StorageError> {
        if !batch.is_empty() && self.gate.armed.swap(false, Ordering::AcqRel) {
            self.gate.reached.raise();
            self.gate.released.wait();
        }
        self.inner.commit(batch)
    }

    fn writer_slot(&self) -> u32 {
        self.slot.unwrap_or_else(|| self.inner.writer_slot())
    }

    fn finish_unwritten(self: Box<Self>) -> Pending {
        self.inner.finish_unwritten()
    }
}

/// An engine on `schema` whose first commit waits at `gate`, with its own
/// clock; one connection, so one writer slot (or `slot`, forced).
fn held_engine(
    schema: &Schema,
    gate: &Arc<Gate>,
    slot: Option<u32>,
    clock: &Arc<ManualClock>,
) -> Engine {
    let pg = PgBackend::connect(&schema.url, 1, false).expect("connects");
    Engine::builder()
        .clock(clock.clone())
        .backend(Held {
            pg,
            gate: gate.clone(),
            slot,
        })
        .expect("engine")
}

/// PostgreSQL whose reads run as ordinary serializable transactions rather
/// than read-only ones, which first wait (briefly) for a safe snapshot: a
/// reader that reads past a writer held at its commit at once, as a store
/// without deferrable snapshots would.
struct ReadsNow(PgBackend);

impl Backend for ReadsNow {
    fn begin(
        &self,
        tenant: &str,
        _mode: Mode,
        lock_wait: Duration,
    ) -> Result<Box<dyn Txn>, StorageError> {
        self.0.begin(tenant, Mode::Write, lock_wait)
    }

    fn concurrent_writers(&self) -> bool {
        self.0.concurrent_writers()
    }
}

fn reading_now(schema: &Schema) -> Tenant {
    let pg = PgBackend::connect(&schema.url, 1, false).expect("connects");
    Engine::builder()
        .backend(ReadsNow(pg))
        .expect("engine")
        .tenant("acme")
        .expect("tenant")
}

fn plain_engine(schema: &Schema, clock: &Arc<ManualClock>) -> Engine {
    Engine::builder()
        .clock(clock.clone())
        .pool_size(1)
        .postgres(&schema.url)
        .expect("engine")
}

/// Reads on from `after` until caught up.
fn poll(t: &Tenant, after: &mut Option<String>, limit: u32) -> Vec<FeedEntry> {
    let mut out = Vec::new();
    loop {
        match t.feed(after.as_deref(), limit).expect("feed") {
            FeedRead::Gone(head) => panic!("gone (head {head})"),
            FeedRead::Page(p) => {
                let done = p.entries.is_empty() || p.next == p.head;
                out.extend(p.entries);
                *after = Some(p.next);
                if done {
                    return out;
                }
            }
        }
    }
}

/// (task, seq) of each task change read.
fn changes(entries: &[FeedEntry]) -> Vec<(String, u64)> {
    entries
        .iter()
        .filter_map(|e| match &e.change {
            Change::Task(c) => Some((c.id.clone(), c.entry.seq)),
            Change::Timer(_) => None,
        })
        .collect()
}

/// The hazard of one sequence for everyone: a call that took its place
/// first and commits last, behind a reader that has already read past
/// later places. Here writer A takes its reads, then waits at its commit
/// while writer B commits twice and a reader reads B's changes; then A
/// commits. The reader, polling on from where it was, receives A's change,
/// once. With the writers in different slots A commits as it was; forced
/// into one slot, A's commit meets B's and A is run again, behind B.
#[test]
fn a_commit_held_behind_later_ones_still_reaches_a_reader_that_passed_them() {
    for same_slot in [false, true] {
        let Some(schema) = Schema::fresh() else {
            return;
        };
        let gate = Arc::new(Gate::default());
        let clock = Arc::new(ManualClock::new(1_000));
        let slot = same_slot.then_some(7);
        let a = held_engine(&schema, &gate, slot, &clock);
        let b = match slot {
            Some(_) => held_engine(&schema, &Arc::new(Gate::default()), slot, &clock),
            None => plain_engine(&schema, &clock),
        };
        // A read-only call would wait briefly for A, then read past it
        // checked at its COMMIT; this reader reads past it at once.
        let reader = reading_now(&schema);
        let (ta, tb) = (a.tenant("acme").expect("t"), b.tenant("acme").expect("t"));
        // Lays the keyspace out, so the held call is an ordinary change.
        tb.open(&task("seed", 0)).expect("open");
        let mut after = None;
        assert_eq!(
            changes(&poll(&reader, &mut after, 10)),
            [("seed".into(), 1)]
        );
        gate.armed.store(true, Ordering::Release);
        std::thread::scope(|s| {
            let held = s.spawn(|| ta.open(&task("a1", 1)).expect("A's open"));
            gate.reached.wait();
            tb.open(&task("b1", 2)).expect("B's open");
            tb.claim("b1", "bob", &[], None).expect("B's claim");
            let seen = poll(&reader, &mut after, 1);
            assert_eq!(changes(&seen), [("b1".into(), 1), ("b1".into(), 2)]);
            gate.released.raise();
            held.join().expect("A's thread");
        });
        let seen = poll(&reader, &mut after, 1);
        assert_eq!(changes(&seen), [("a1".into(), 1)], "same slot: {same_slot}");
        if same_slot {
            assert!(
                a.conflict_retries() > 0,
                "A shares B's slot: its commit must have met B's"
            );
        }
        // Nothing more, and everything once from the start.
        assert!(poll(&reader, &mut after, 10).is_empty());
        let mut all = changes(&poll(&reader, &mut None, 1000));
        all.sort();
        assert_eq!(
            all,
            [
                ("a1".into(), 1),
                ("b1".into(), 1),
                ("b1".into(), 2),
                ("seed".into(), 1)
            ]
        );
        assert_consistent(&reader);
    }
}

/// One task changed by two writers in two slots, the later change recorded
/// at an earlier time (the hosts' clocks disagree): a reader that reads one
/// entry at a time still gets the task's changes in the order they
/// committed.
#[test]
fn a_tasks_changes_in_two_slots_come_in_commit_order_whatever_their_times() {
    let Some(schema) = Schema::fresh() else {
        return;
    };
    let (late, early) = (
        Arc::new(ManualClock::new(50_000)),
        Arc::new(ManualClock::new(10)),
    );
    let a = plain_engine(&schema, &late);
    let b = plain_engine(&schema, &early);
    let (ta, tb) = (a.tenant("acme").expect("t"), b.tenant("acme").expect("t"));
    // Both connections are open at once, so their slots differ.
    ta.open(&task("x", 1)).expect("open");
    tb.open(&task("y", 1)).expect("open");
    for i in 0..5 {
        ta.open(&task(&format!("a{i}"), 1)).expect("open");
    }
    ta.claim("x", "ann", &[], None).expect("claim");
    tb.release("x", "ann").expect("release");
    ta.claim("x", "bob", &[], None).expect("claim");
    let reader = plain_engine(&schema, &late).tenant("acme").expect("t");
    let mut after = None;
    let got: Vec<_> = changes(&poll(&reader, &mut after, 1))
        .into_iter()
        .filter(|(id, _)| id == "x")
        .collect();
    assert_eq!(
        got,
        [
            ("x".into(), 1),
            ("x".into(), 2),
            ("x".into(), 3),
            ("x".into(), 4)
        ]
    );
}

/// A commit through one engine wakes a waiter on another engine (another
/// host) on the same database; a call that answered an error, and so
/// committed nothing, wakes nobody. Notices from one engine arrive in the
/// order it sent them, so once the second tenant's notice is in, one for
/// the refusal would have been too.
#[test]
fn a_commit_through_one_engine_wakes_a_waiter_on_another_and_a_refusal_wakes_none() {
    let Some(schema) = Schema::fresh() else {
        return;
    };
    let writer = Engine::builder().postgres(&schema.url).expect("engine");
    let waiter = Engine::builder().postgres(&schema.url).expect("engine");
    let mut first = waiter.watch("first").expect("watch");
    let mut second = waiter.watch("second").expect("watch");
    let t1 = writer.tenant("first").expect("tenant");
    t1.open(&task("t1", 1)).expect("open");
    let heard = first
        .wait(Duration::from_secs(60))
        .expect("woken by the other engine");
    assert!(heard.includes("first"));
    assert!(t1.release("t1", "nobody").is_err(), "a refusal");
    assert!(t1.claim("zz", "ann", &[], None).is_err(), "not found");
    writer
        .tenant("second")
        .expect("tenant")
        .open(&task("t2", 1))
        .expect("open");
    let heard = second.wait(Duration::from_secs(60)).expect("woken");
    assert!(heard.includes("second"));
    assert_eq!(first.try_take(), None, "the refusals woke a waiter");
}

/// The engine's listening connection, cut by the server, comes back: its
/// waiters are told anything may have changed, and later commits wake them
/// again.
#[test]
fn a_listener_whose_connection_is_cut_comes_back_and_says_anything_may_have_changed() {
    let Some(schema) = Schema::fresh() else {
        return;
    };
    let writer = Engine::builder().postgres(&schema.url).expect("engine");
    let waiter = Engine::builder().postgres(&schema.url).expect("engine");
    let mut woken = waiter.watch("acme").expect("watch");
    let cut = schema
        .client()
        .query(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
             WHERE application_name = 'leasehold-signals ' || current_schema()",
            &[],
        )
        .expect("terminate");
    assert!(!cut.is_empty(), "no listening connection to cut");
    let heard = woken
        .wait(Duration::from_secs(60))
        .expect("told after the cut");
    assert!(heard.any, "{heard:?}");
    writer
        .tenant("acme")
        .expect("tenant")
        .open(&task("t1", 1))
        .expect("open");
    loop {
        let heard = woken.wait(Duration::from_secs(60)).expect("woken again");
        if heard.tenants.iter().any(|t| &**t == "acme") {
            break;
        }
    }
}
