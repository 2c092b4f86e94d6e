//! The sweeper keeps time by an injected clock: a lapsed lease comes back
//! to the queue, and an overdue task acts on its `on-expiry`, once the
//! clock passes the instant, with no call from anyone; nothing is acted on
//! twice; two sweepers on one PostgreSQL database share the work. The
//! tests wait for conditions (with a bound that only a hang reaches),
//! never for a time.

use std::sync::Arc;
use std::time::{Duration, Instant};

use leasehold_host::{
    Change, Engine, FeedRead, Lease, ManualClock, OnExpiry, Retention, Sweeper, SweeperOptions,
    TaskState, Tenant,
};
use leasehold_tests::*;

fn engine_at(db: &TestDb, clock: &Arc<ManualClock>) -> Engine {
    let builder = Engine::builder().clock(clock.clone());
    match db.backend() {
        Backend::Redb => db.open(builder.durability(leasehold_host::Durability::None)),
        Backend::Postgres => db.open(builder),
    }
}

/// Waits until `done` holds, failing after a minute: the bound of a hang.
fn eventually(what: &str, mut done: impl FnMut() -> bool) {
    let until = Instant::now() + Duration::from_secs(60);
    while !done() {
        assert!(Instant::now() < until, "waited a minute for {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Waits until the sweeper has read its tenants' instants `n` times.
fn read_at_least(s: &Sweeper, n: u64) {
    eventually("the sweeper's reads", || s.stats().reads >= n);
}

fn verbs(t: &Tenant, id: &str) -> Vec<String> {
    t.history(id, None, 100)
        .expect("history")
        .into_iter()
        .map(|e| e.verb)
        .collect()
}

/// `actor` claims `id` with `roles`, leased from `now` for `lease_ms`.
fn claim_leased(t: &Tenant, id: &str, actor: &str, roles: &[&str], now: i64, lease_ms: u32) {
    t.claim(id, actor, roles, Some(Lease { now, lease_ms }))
        .expect("claim");
}

#[test]
fn a_lapsed_lease_comes_back_to_the_queue_once_the_clock_passes_its_end() {
    let db = TestDb::new();
    let clock = Arc::new(ManualClock::new(1_000_000));
    let e = engine_at(&db, &clock);
    let t = e.tenant("acme").expect("tenant");
    t.open(&task("pay-1", 1).roles(&["approver"]))
        .expect("open");
    claim_leased(&t, "pay-1", "alice", &["approver"], 1_000_000, 2_000);
    let s = Sweeper::start(&e, ["acme".to_owned()], SweeperOptions::default()).expect("sweeper");
    read_at_least(&s, 1);
    // A millisecond before the lease ends, nothing moves.
    let wakes = s.stats().wakes;
    clock.set(1_001_999);
    eventually("the sweeper to look at the clock", || {
        s.stats().wakes > wakes
    });
    assert_eq!(s.stats().sweeps, 0);
    assert_eq!(state_of(&t, "pay-1"), TaskState::Claimed);
    clock.set(1_002_000);
    eventually("the lease to be reclaimed", || {
        state_of(&t, "pay-1") == TaskState::Open
    });
    assert_eq!(verbs(&t, "pay-1"), ["open", "claim", "reclaim-lapsed"]);
    // The sweeper counts a sweep once its call has returned, which may be
    // after the commit a reader sees.
    eventually("the sweep to be counted", || s.stats().reclaimed == 1);
    // A claim made while it runs is heard, and swept at its own end.
    let reads = s.stats().reads;
    claim_leased(&t, "pay-1", "bob", &["approver"], 1_002_000, 500);
    read_at_least(&s, reads + 1);
    clock.set(1_002_500);
    eventually("the second lease to be reclaimed", || {
        state_of(&t, "pay-1") == TaskState::Open
    });
    eventually("the second sweep to be counted", || {
        s.stats().reclaimed == 2
    });
    assert_consistent(&t);
}

/// A restart forgets who called: the sweeper starts from the tenants its
/// storage lists, so a lapsed lease of a tenant nobody has called since is
/// reclaimed all the same, and the listing reads nothing it should not.
#[test]
fn a_tenant_nobody_has_called_since_a_restart_is_swept_all_the_same() {
    let db = TestDb::new();
    let clock = Arc::new(ManualClock::new(1_000_000));
    let names = ["acme", "acme-2", "globex"];
    {
        // Durable commits on redb too: the engine is closed and opened
        // again, as a restarted process would.
        let e = db.open(Engine::builder().clock(clock.clone()));
        for name in names {
            let t = e.tenant(name).expect("tenant");
            t.open(&task("pay-1", 1).roles(&["approver"]))
                .expect("open");
            claim_leased(&t, "pay-1", "alice", &["approver"], 1_000_000, 2_000);
        }
        // A tenant that never committed anything has nothing to list.
        e.tenant("initech")
            .expect("tenant")
            .open_count()
            .expect("read");
    }
    let e = db.open(Engine::builder().clock(clock.clone()));
    assert_eq!(
        e.stored_tenants().expect("listed"),
        Some(names.iter().map(|n| n.to_string()).collect::<Vec<_>>())
    );
    // Told of no tenant, and none has committed since the restart.
    let s = Sweeper::start(&e, Vec::<String>::new(), SweeperOptions::default()).expect("sweeper");
    read_at_least(&s, 1);
    clock.set(1_002_000);
    eventually("every tenant's lease to be reclaimed", || {
        s.stats().reclaimed == 3
    });
    for name in names {
        let t = e.tenant(name).expect("tenant");
        assert_eq!(state_of(&t, "pay-1"), TaskState::Open, "{name}");
        assert_eq!(verbs(&t, "pay-1"), ["open", "claim", "reclaim-lapsed"]);
        assert_consistent(&t);
    }
}

#[test]
fn overdue_tasks_act_on_their_policy_at_their_due_time_and_never_twice() {
    let db = TestDb::new();
    let clock = Arc::new(ManualClock::new(0));
    let e = engine_at(&db, &clock);
    let t = e.tenant("acme").expect("tenant");
    let policy = |id: &str, p: OnExpiry| {
        let mut x = task(id, 1)
            .roles(&["a"])
            .escalating_to(&["boss"])
            .due(10_000);
        x.on_expiry = p;
        x
    };
    t.open(&policy("esc", OnExpiry::Escalate)).expect("open");
    t.open(&policy("deny", OnExpiry::Deny)).expect("open");
    t.open(&policy("proceed", OnExpiry::Proceed)).expect("open");
    t.open(&task("later", 1).due(20_000)).expect("open");
    t.claim("esc", "bob", &["a"], None).expect("claim");
    let s = Sweeper::start(&e, ["acme".to_owned()], SweeperOptions::default()).expect("sweeper");
    read_at_least(&s, 1);
    clock.set(10_000);
    eventually("the overdue tasks to act", || {
        state_of(&t, "esc") == TaskState::Escalated
            && state_of(&t, "deny") == TaskState::Expired
            && state_of(&t, "proceed") == TaskState::Expired
    });
    let esc = t.get("esc").expect("get").expect("esc");
    assert_eq!(esc.assignee, None);
    assert!(esc.candidate_roles.contains(&"boss".to_owned()));
    assert_eq!(state_of(&t, "later"), TaskState::Open);
    // The escalated task is claimed again; later sweeps leave it be.
    t.claim("esc", "carol", &["boss"], None).expect("claim");
    clock.set(20_000);
    eventually("the later task to act, and its sweep to be counted", || {
        state_of(&t, "later") == TaskState::Expired && s.stats().expired == 3
    });
    clock.set(30_000);
    let (sweeps, reads) = (s.stats().sweeps, s.stats().reads);
    t.open(&task("nudge", 1)).expect("open");
    read_at_least(&s, reads + 1);
    assert_eq!(s.stats().sweeps, sweeps, "nothing was due");
    assert_eq!(
        verbs(&t, "esc"),
        ["open", "claim", "expire-overdue", "claim"]
    );
    assert_eq!(
        t.get("esc").expect("get").expect("esc").assignee.as_deref(),
        Some("carol")
    );
    let stats = s.stats();
    assert_eq!((stats.escalated, stats.expired), (1, 3));
    assert_consistent(&t);
}

#[test]
fn two_sweepers_on_one_database_reclaim_a_lapsed_lease_once() {
    let db = TestDb::new();
    if db.backend() != Backend::Postgres {
        eprintln!("skipped: two hosts share a store only on PostgreSQL");
        return;
    }
    let clock = Arc::new(ManualClock::new(5_000));
    let one = engine_at(&db, &clock);
    let two = engine_at(&db, &clock);
    let t = one.tenant("acme").expect("tenant");
    for i in 0..20 {
        let id = format!("t{i}");
        t.open(&task(&id, 1).roles(&["a"]).due(9_000))
            .expect("open");
        claim_leased(&t, &id, "alice", &["a"], 5_000, 1_000 + i);
    }
    let a = Sweeper::start(&one, ["acme".to_owned()], SweeperOptions::default()).expect("a");
    let b = Sweeper::start(&two, ["acme".to_owned()], SweeperOptions::default()).expect("b");
    read_at_least(&a, 1);
    read_at_least(&b, 1);
    clock.set(9_000);
    eventually("every task to be reclaimed and expire", || {
        (0..20).all(|i| state_of(&t, &format!("t{i}")) == TaskState::Expired)
    });
    for i in 0..20 {
        assert_eq!(
            verbs(&t, &format!("t{i}")),
            ["open", "claim", "reclaim-lapsed", "expire-overdue"]
        );
    }
    let (sa, sb) = (a.stats(), b.stats());
    assert_eq!(sa.reclaimed + sb.reclaimed, 20);
    assert_eq!(sa.expired + sb.expired, 20);
    assert_consistent(&t);
}

#[test]
fn the_change_record_is_trimmed_to_its_retention_as_tenants_commit() {
    let db = TestDb::new();
    let clock = Arc::new(ManualClock::new(1_000));
    let e = engine_at(&db, &clock);
    let t = e.tenant("acme").expect("tenant");
    for id in ["t1", "t2", "t3"] {
        t.open(&task(id, 1)).expect("open");
    }
    clock.set(100_000);
    let s = Sweeper::start(
        &e,
        ["acme".to_owned()],
        SweeperOptions {
            retention: Some(Retention {
                max_age: Some(Duration::from_secs(10)),
                keep: None,
            }),
            trim_every: Duration::ZERO,
            ..SweeperOptions::default()
        },
    )
    .expect("sweeper");
    eventually("the old entries to be trimmed", || s.stats().trimmed == 3);
    t.open(&task("fresh", 1)).expect("open");
    let ids = |t: &Tenant| -> Vec<String> {
        match t.feed(None, 100).expect("feed") {
            FeedRead::Page(p) => p
                .entries
                .into_iter()
                .filter_map(|e| match e.change {
                    Change::Task(c) => Some(c.id),
                    Change::Timer(_) => None,
                })
                .collect(),
            FeedRead::Gone(_) => Vec::new(),
        }
    };
    eventually("the fresh change to be in the feed", || {
        ids(&t) == ["fresh"]
    });
    // A trimmed task keeps its last entry while it lives.
    assert_eq!(verbs(&t, "t1"), ["open"]);
    assert_eq!(s.stats().trimmed, 3, "what is within the retention stays");
    assert_consistent(&t);
}
