//! The consistency check finds damage done behind the engine's back: each
//! test writes to the store directly (the redb file, or the PostgreSQL
//! table), the way a bad migration, a bug in another guest version or a hand
//! edit would, and expects `check` to name it.

use leasehold_guest::keys::Key;
use leasehold_guest::schema;
use leasehold_host::{Discrepancy, Error, Lease, StoreError, Tenant};
use leasehold_tests::*;

const TENANT: &str = "acme";

/// A tenant with tasks and timers in every structure. Its engine is gone
/// when this answers, so the store can be damaged.
fn seeded() -> TestDb {
    let db = TestDb::new();
    let engine = db.engine();
    let t = engine.tenant(TENANT).expect("tenant");
    t.open(&task("t1", 1).roles(&["r"]).in_case("c").due(10))
        .expect("open");
    t.open(&task("t2", 2).in_case("c")).expect("open");
    t.open(&task("t3", 3).due(5)).expect("open");
    t.open(&task("t4", 4)).expect("open");
    t.claim("t2", "bob", &[], None).expect("claim");
    // Held by ann until 150.
    let lease = Lease {
        now: 100,
        lease_ms: 50,
    };
    t.claim("t4", "ann", &[], Some(lease)).expect("claim");
    t.settle("t3", leasehold_host::Settlement::Completed, None)
        .expect("settle");
    t.arm(&timer("run-1", "a", 5)).expect("arm");
    t.arm(&timer("run-1", "b", 7)).expect("arm");
    t.claim_due(5, 1, 1000).expect("sweep");
    assert_eq!(t.check().expect("check"), Vec::<Discrepancy>::new());
    // The other tenant must not be blamed for this one's damage.
    let other = engine.tenant("other").expect("tenant");
    other.open(&task("t1", 1)).expect("open");
    db
}

/// A tenant of a fresh engine on `db`.
fn reopened(db: &TestDb, tenant: &str) -> Tenant {
    db.engine().tenant(tenant).expect("tenant")
}

fn check(db: &TestDb, tenant: &str) -> Vec<Discrepancy> {
    reopened(db, tenant).check().expect("the check runs")
}

fn put(db: &TestDb, key: Key, value: &[u8]) {
    db.raw_put(TENANT, key.as_bytes(), value);
}

fn delete(db: &TestDb, key: Key) {
    db.raw_delete(TENANT, key.as_bytes());
}

/// The shards the tenant's keyspace was laid out with: one on redb, many on
/// PostgreSQL.
fn shards(db: &TestDb) -> schema::Shards {
    let raw = db.raw_contents(TENANT);
    let mark = raw.get(schema::layout().as_bytes());
    leasehold_guest::store::known_layout(mark.map(Vec::as_slice))
        .expect("a layout this component reads")
        .expect("the keyspace is laid out")
}

/// The value of one shard of counter `name`: absent is zero.
fn counter(db: &TestDb, name: &str, shard: u8) -> i64 {
    let raw = db.raw_contents(TENANT);
    raw.get(schema::counter_shard(name, shard).as_bytes())
        .map_or(0, |v| {
            i64::from_be_bytes(v.as_slice().try_into().expect("8 bytes"))
        })
}

/// Moves shard 0 of counter `name` by `delta`, as damage would, and checks
/// that the check names the counter, what its shards sum to and how many
/// rows it counts, `rows` (a keyspace of this component spreads counts by
/// writer, so a count may sit in any shard and the check sums them).
fn skew_and_find(db: &TestDb, name: &str, structure: &str, delta: i64, rows: i64) {
    assert!(shards(db).by_writer());
    let n = counter(db, name, 0);
    put(
        db,
        schema::counter_shard(name, 0),
        (n + delta).to_be_bytes().as_slice(),
    );
    let found = check(db, TENANT);
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].structure, structure);
    assert_eq!(found[0].subject, name);
    assert!(
        found[0].detail.contains(&format!(
            "counter {name} sum to {}; there are {rows} ",
            rows + delta
        )),
        "{found:?}"
    );
}

fn assert_finds(found: &[Discrepancy], structure: &str, subject: &str) {
    assert!(
        found
            .iter()
            .any(|d| d.structure == structure && d.subject == subject),
        "expected a {structure} finding about {subject}, got {found:?}"
    );
}

#[test]
fn a_task_row_deleted_behind_its_indexes_back_is_found() {
    let db = seeded();
    delete(&db, schema::task("t1"));
    let found = check(&db, TENANT);
    // Its queue, overdue and case entries and its five search entries now
    // point at nothing, its log belongs to no task, and the open counter and
    // the open state's search count count a task that is gone: eleven
    // findings, no more.
    for index in [
        "queue-index",
        "overdue-index",
        "case-index",
        "by-state-index",
        "by-kind-index",
        "by-due-index",
        "by-run-index",
        "by-priority-index",
        "task-log",
    ] {
        assert_finds(&found, index, "t1");
    }
    assert_finds(&found, "search-count", "open");
    assert!(
        found.iter().any(|d| d.structure == "open-count"),
        "{found:?}"
    );
    assert_eq!(found.len(), 11, "{found:?}");
    assert!(check(&db, "other").is_empty());
}

#[test]
fn an_index_entry_left_behind_is_found() {
    let db = seeded();
    // t2 is claimed, so it must not be in the queue.
    let pos = schema::queue_position(2, 2, "t2");
    put(&db, schema::queue_any().raw(pos.as_bytes()), &[][..]);
    let found = check(&db, TENANT);
    assert_finds(&found, "queue-index", "t2");
    assert_eq!(found.len(), 1, "{found:?}");
}

#[test]
fn a_missing_index_entry_is_found() {
    let db = seeded();
    delete(&db, schema::overdue_entry(10, "t1"));
    let found = check(&db, TENANT);
    assert_finds(&found, "overdue-index", "t1");
    assert_eq!(found.len(), 1, "{found:?}");
}

#[test]
fn an_open_counter_off_by_one_is_found() {
    let db = seeded();
    // t1 open, t2 and t4 claimed: three pending rows.
    skew_and_find(&db, schema::OPEN_TASKS, "open-count", 1, 3);
}

#[test]
fn a_timer_counter_off_by_one_is_found() {
    let db = seeded();
    let armed = reopened(&db, TENANT).pending_count().expect("count") as i64;
    assert!(armed >= 1);
    skew_and_find(&db, schema::ARMED_TIMERS, "pending-count", -1, armed);
}

#[test]
fn a_missing_lease_entry_is_found() {
    let db = seeded();
    delete(&db, schema::lease_entry(150, "t4"));
    let found = check(&db, TENANT);
    assert_finds(&found, "lease-index", "t4");
    assert_eq!(found.len(), 1, "{found:?}");
}

#[test]
fn a_lease_entry_left_behind_is_found_and_never_reclaims_its_task() {
    let db = seeded();
    // t2 is held without a lease; t4's lease ends at 150, not at 120.
    for entry in [
        schema::lease_entry(120, "t2"),
        schema::lease_entry(120, "t4"),
    ] {
        put(&db, entry, &[]);
    }
    let found = check(&db, TENANT);
    assert_finds(&found, "lease-index", "t2");
    assert_finds(&found, "lease-index", "t4");
    assert_eq!(found.len(), 2, "{found:?}");
    // A sweep meets the stray entry first and refuses: it never hands a
    // holder's task to the queue on the word of an entry its row denies.
    let t = reopened(&db, TENANT);
    let r = t.reclaim_lapsed(130, 10);
    assert!(
        matches!(&r, Err(Error::Store(StoreError::Corrupt(d))) if d.contains("t2")),
        "{r:?}"
    );
    assert_eq!(state_of(&t, "t2"), leasehold_host::TaskState::Claimed);
}

#[test]
fn a_leased_counter_off_by_one_is_found() {
    let db = seeded();
    // t4 is the one leased claim.
    skew_and_find(&db, schema::LEASED_CLAIMS, "leased-count", 1, 1);
}

#[test]
fn a_missing_due_entry_is_found() {
    let db = seeded();
    // run-1/b was never claimed: its entry sits at its fire time.
    delete(&db, schema::due_entry(7, "run-1", "b"));
    let found = check(&db, TENANT);
    assert_finds(&found, "due-index", "run-1/b");
    assert_eq!(found.len(), 1, "{found:?}");
}

#[test]
fn a_row_that_does_not_decode_is_found_and_refused_not_defaulted() {
    let db = seeded();
    put(&db, schema::task("t2"), &b"{\"id\":\"t2\",\"state\":"[..]);
    let found = check(&db, TENANT);
    assert!(
        found
            .iter()
            .any(|d| d.structure == "task" && d.subject == "t2" && d.detail.contains("decode")),
        "{found:?}"
    );
    let t = reopened(&db, TENANT);
    let r = t.get("t2");
    assert!(
        matches!(r, Err(Error::Store(StoreError::Corrupt(ref d))) if d.contains("t2")),
        "{r:?}"
    );
    let r = t.claim("t2", "bob", &[], None);
    assert!(
        matches!(r, Err(Error::Store(StoreError::Corrupt(_)))),
        "{r:?}"
    );
}

#[test]
fn a_keyspace_in_an_unknown_layout_is_refused() {
    let db = seeded();
    put(&db, schema::layout(), &b"v99"[..]);
    let t = reopened(&db, TENANT);
    for r in [t.open_count().map(drop), t.open(&task("t9", 1)).map(drop)] {
        assert!(
            matches!(&r, Err(Error::Store(StoreError::Corrupt(d))) if d.contains("v99")),
            "{r:?}"
        );
    }
    let found = t.check().expect("check");
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].structure, "layout");
}

/// A keyspace a newer build moved to its layout is refused as
/// `newer-layout`, naming both layouts, by reads, writes and the check
/// alike, and nothing is written.
#[test]
fn a_keyspace_in_a_newer_layout_is_refused_as_newer_layout() {
    let db = seeded();
    let newer = format!("{}/64", schema::LAYOUT_VERSION + 1);
    put(&db, schema::layout(), newer.as_bytes());
    let before = db.raw_contents(TENANT);
    let t = reopened(&db, TENANT);
    let refusals = [
        t.open_count().map(drop),
        t.open(&task("t9", 1)).map(drop),
        t.claim("t1", "ann", &["r"], None).map(drop),
        t.history("t1", None, 10).map(drop),
        t.check().map(drop),
    ];
    drop(t);
    for r in refusals {
        let Err(Error::Store(StoreError::NewerLayout(d))) = &r else {
            panic!("expected newer-layout, got {r:?}");
        };
        assert!(
            d.contains(&format!("layout {}", schema::LAYOUT_VERSION + 1))
                && d.contains(&format!("writes layout {}", schema::LAYOUT_VERSION)),
            "{d}"
        );
    }
    assert!(db.raw_contents(TENANT) == before, "a refusal wrote");
}

/// A keyspace of the layout before the record (5), as an earlier build left
/// it: its tasks answer a history that opens with a `before-history` entry
/// (seq 0), through the library on the real component and store; reads
/// leave the mark, and the first change moves it and keeps what the task
/// held as its history began.
#[test]
fn a_task_from_before_history_says_so_and_its_first_change_moves_the_mark() {
    let db = TestDb::new();
    // The engine makes the database (PostgreSQL's table) before it is edited.
    drop(reopened(&db, TENANT));
    put(&db, schema::layout(), b"5/64");
    {
        let t = reopened(&db, TENANT);
        t.open(&task("old", 7).roles(&["r"])).expect("open");
    }
    // What an earlier build leaves: no record, and its own mark.
    let record = [
        schema::task_logs(),
        schema::histories(),
        schema::feed(),
        schema::feed_heads(),
    ];
    for k in db.raw_contents(TENANT).keys() {
        if record.iter().any(|p| k.starts_with(p.as_bytes())) {
            db.raw_delete(TENANT, k);
        }
    }
    put(&db, schema::layout(), b"5/64");
    let mark = |db: &TestDb| {
        db.raw_contents(TENANT)
            .get(schema::layout().as_bytes())
            .cloned()
    };
    {
        let t = reopened(&db, TENANT);
        assert_eq!(t.check().expect("check"), Vec::<Discrepancy>::new());
        let h = t.history("old", None, 10).expect("history");
        assert_eq!(h.len(), 1, "{h:?}");
        assert_eq!(
            (h[0].seq, h[0].verb.as_str(), h[0].before, h[0].at),
            (0, "before-history", None, 7)
        );
        assert_eq!(h[0].after, leasehold_host::TaskState::Open);
        assert_eq!(h[0].candidate_roles, ["r"]);
    }
    assert_eq!(
        mark(&db).as_deref(),
        Some(&b"5/64"[..]),
        "a read moved the mark"
    );
    let t = reopened(&db, TENANT);
    t.claim("old", "ann", &["r"], None).expect("claim");
    let h = t.history("old", None, 10).expect("history");
    let seqs: Vec<(u64, &str)> = h.iter().map(|e| (e.seq, e.verb.as_str())).collect();
    assert_eq!(seqs, [(0, "before-history"), (1, "claim")]);
    assert_eq!(h[0].at, h[1].at, "history began with the claim");
    assert_eq!(
        (h[0].after, h[0].assignee.as_deref()),
        (leasehold_host::TaskState::Open, None)
    );
    assert_eq!(t.check().expect("check"), Vec::<Discrepancy>::new());
    // Paging on after entry 0 starts at entry 1.
    let rest = t.history("old", Some(0), 10).expect("history");
    assert_eq!(rest.first().map(|e| e.seq), Some(1));
    drop(t);
    assert_eq!(
        mark(&db),
        Some(format!("{}/64/from-5", schema::LAYOUT_VERSION).into_bytes())
    );
}

/// A keyspace is laid out by what its backend says of its writers: one
/// shard per counter on redb, whose file this process holds locked, and 64 on
/// PostgreSQL, which many hosts write at once. Either way the counts and the
/// check agree with the rows.
#[test]
fn a_keyspace_is_laid_out_for_its_backends_writers() {
    let db = seeded();
    let raw = db.raw_contents(TENANT);
    let (count, want) = match db.backend() {
        Backend::Redb => (1, schema::Shards::SOLE),
        Backend::Postgres => (64, schema::Shards::SHARED),
    };
    let mark = format!("{}/{count}", schema::LAYOUT_VERSION);
    assert_eq!(
        raw.get(schema::layout().as_bytes()).map(Vec::as_slice),
        Some(mark.as_bytes())
    );
    assert_eq!(shards(&db), want);
    let counters = schema::counters();
    let stored: Vec<&Vec<u8>> = raw
        .keys()
        .filter(|k| k.starts_with(counters.as_bytes()))
        .collect();
    for k in &stored {
        let in_range = (0..want.count()).any(|s| {
            schema::COUNTERS
                .iter()
                .any(|n| schema::counter_shard(n, s).as_bytes() == k.as_slice())
        });
        assert!(in_range, "a counter key outside the layout: {k:?}");
    }
    let t = reopened(&db, TENANT);
    // t1 open, t2 and t4 claimed: pending; t3 settled.
    assert_eq!(t.open_count().expect("count"), 3);
    assert_eq!(t.leased_count().expect("count"), 1);
    assert_eq!(t.pending_count().expect("count"), 2);
    assert_eq!(t.check().expect("check"), Vec::<Discrepancy>::new());
}
