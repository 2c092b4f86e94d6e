//! The sweeper keeps time by an injected clock: a lapsed lease comes back
//! to the queue, and an overdue task acts on its `on-expiry`, once the
//! clock passes the instant, with no call from anyone; nothing is acted on
//! twice; reminders and an escalation chain fire at their instants, each
//! once, the sweeper asleep in between; two sweepers on one PostgreSQL database share the work; tenants
//! take turns, so one tenant's backlog (of tasks, or of a record to trim)
//! holds up another's sweep by at most one turn; the schedule keeps one
//! entry per tenant. The tests wait for
//! conditions (with a bound that only a hang reaches), never for a time.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use leasehold_host::{
    Change, Engine, EscalationStep, FeedRead, Lease, ManualClock, OnExpiry, Retention, StepAction,
    SweepReport, Sweeper, SweeperOptions, TaskState, TaskStep, Tenant,
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
fn reminders_and_a_chain_fire_at_their_instants_once_each_with_no_call_from_anyone() {
    let db = TestDb::new();
    let clock = Arc::new(ManualClock::new(0));
    let e = engine_at(&db, &clock);
    let t = e.tenant("acme").expect("tenant");
    let step = |after_due_ms: u64, action: StepAction| EscalationStep {
        after_due_ms,
        action,
    };
    let mut chained = task("t", 1).roles(&["clerk"]).due(10_000);
    chained.created_at = 0;
    chained.remind_before = vec![2_000];
    chained.escalation = vec![
        step(0, StepAction::Escalate(vec!["leads".into()])),
        step(4_000, StepAction::Escalate(vec!["directors".into()])),
        step(9_000, StepAction::Expire),
    ];
    t.open(&chained).expect("open");
    t.claim("t", "alice", &["clerk"], None).expect("claim");
    assert_eq!(t.next_wake().expect("next-wake"), Some(8_000));
    let s = Sweeper::start(&e, ["acme".to_owned()], SweeperOptions::default()).expect("sweeper");
    read_at_least(&s, 1);
    let steps_done = |t: &Tenant| t.get("t").expect("get").expect("t").steps_done;
    // Each instant in turn: the step owed fires, and only it.
    for (at, done) in [(8_000, 1), (10_000, 2), (14_000, 3), (19_000, 4)] {
        clock.set(at - 1);
        let reads = s.stats().reads;
        t.open(&task(&format!("nudge-{at}"), 1)).expect("open");
        read_at_least(&s, reads + 1);
        assert_eq!(steps_done(&t), done - 1, "nothing fires before {at}");
        clock.set(at);
        eventually(&format!("step {done} to fire at {at}"), || {
            steps_done(&t) == done
        });
    }
    let history = t.history("t", None, 100).expect("history");
    let fired: Vec<_> = history.iter().filter_map(|e| e.step.clone()).collect();
    assert_eq!(
        fired,
        [
            TaskStep::Reminder(2_000),
            TaskStep::Escalation(step(0, StepAction::Escalate(vec!["leads".into()]))),
            TaskStep::Escalation(step(4_000, StepAction::Escalate(vec!["directors".into()]))),
            TaskStep::Escalation(step(9_000, StepAction::Expire)),
        ]
    );
    let done = t.get("t").expect("get").expect("t");
    assert_eq!(done.state, TaskState::Expired);
    assert_eq!(done.candidate_roles, ["clerk", "leads", "directors"]);
    assert_eq!(t.next_wake().expect("next-wake"), None);
    // Later sweeps find nothing more to do for it.
    clock.set(100_000);
    let reads = s.stats().reads;
    t.open(&task("last-nudge", 1)).expect("open");
    read_at_least(&s, reads + 1);
    assert_eq!(
        t.history("t", None, 100).expect("history").len(),
        history.len()
    );
    let stats = s.stats();
    assert_eq!((stats.escalated, stats.expired), (2, 1));
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

/// One tenant's backlog holds up another tenant's sweep by at most one
/// turn: acme has 20,000 tasks due at one instant, and globex's lease
/// lapses while acme's backlog is being swept. Told by the order of the
/// sweeps' reports (globex's comes after at most one capped turn of
/// acme's), never by how long anything took.
#[test]
fn a_backlog_of_one_tenant_delays_another_tenants_lapsed_lease_by_at_most_one_turn() {
    const BACKLOG: u64 = 20_000;
    const DUE: i64 = 2_000_000;
    let db = TestDb::new();
    let clock = Arc::new(ManualClock::new(1_000_000));
    let e = engine_at(&db, &clock);
    let acme = e.tenant("acme").expect("tenant");
    for i in 0..BACKLOG {
        acme.open(&task(&format!("t{i}"), 1).due(DUE))
            .expect("open");
    }
    // globex's lease ends a millisecond after acme's tasks are due.
    let globex = e.tenant("globex").expect("tenant");
    globex
        .open(&task("pay-1", 1).roles(&["approver"]))
        .expect("open");
    claim_leased(
        &globex,
        "pay-1",
        "alice",
        &["approver"],
        1_000_000,
        1_000_001,
    );
    let options = SweeperOptions::default();
    let turn = u64::from(options.batch) * u64::from(options.calls_per_turn);
    assert!(4 * turn <= BACKLOG, "the backlog takes several turns");
    let reports: Arc<Mutex<Vec<SweepReport>>> = Arc::default();
    let on_sweep = {
        let (reports, clock) = (reports.clone(), clock.clone());
        Arc::new(move |r: &SweepReport| {
            let mut reports = reports.lock().unwrap_or_else(PoisonError::into_inner);
            reports.push(r.clone());
            // The clock passes globex's lease end during acme's first
            // sweep: on the sweeper's thread, before it picks whom to
            // sweep next.
            if reports.len() == 1 {
                clock.set(DUE + 1);
            }
        })
    };
    let s = Sweeper::start(
        &e,
        ["acme".to_owned(), "globex".to_owned()],
        SweeperOptions {
            on_sweep: Some(on_sweep),
            ..options
        },
    )
    .expect("sweeper");
    read_at_least(&s, 2);
    // Only acme is due.
    clock.set(DUE);
    let moved_by = |r: &SweepReport| r.reclaimed + r.escalated + r.expired;
    let moved = |reports: &[SweepReport], tenant: &str| -> u64 {
        reports
            .iter()
            .filter(|r| r.tenant == tenant)
            .map(moved_by)
            .sum()
    };
    eventually("acme's backlog and globex's lease to be swept", || {
        let reports = reports.lock().unwrap_or_else(PoisonError::into_inner);
        moved(&reports, "acme") == BACKLOG && moved(&reports, "globex") == 1
    });
    let reports = reports
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone();
    let globex_at = reports
        .iter()
        .position(|r| r.tenant == "globex")
        .expect("globex was swept");
    assert_eq!(reports[0].tenant, "acme", "acme was due first");
    assert_eq!(
        globex_at, 1,
        "globex is swept right after the acme sweep during which it came due"
    );
    let before = moved(&reports[..globex_at], "acme");
    assert!(
        before <= turn,
        "acme moved {before} tasks before globex's lapsed lease was reclaimed; a turn moves at most {turn}"
    );
    assert_eq!(reports[globex_at].reclaimed, 1);
    assert_eq!(reports[globex_at].now, DUE + 1);
    // acme's backlog is swept a turn at a time, each but the last ending at
    // its cap with more to do.
    let acme_turns: Vec<&SweepReport> = reports.iter().filter(|r| r.tenant == "acme").collect();
    let (last, capped) = acme_turns.split_last().expect("acme was swept");
    assert!(
        capped.iter().all(|r| r.more && r.error.is_none()),
        "{capped:?}"
    );
    assert!(!last.more && last.error.is_none(), "{last:?}");
    assert!(acme_turns.iter().all(|r| moved_by(r) <= turn));
    assert_eq!(state_of(&globex, "pay-1"), TaskState::Open);
    assert_eq!(acme.open_count().expect("count"), 0);
    assert_consistent(&acme);
    assert_consistent(&globex);
}

/// Trimming is a duty of the turn like the others: a tenant with a long
/// record to trim trims it a turn at a time, each turn within its calls,
/// and another tenant's lease that lapses during the first of those turns
/// is reclaimed right after it. Told by the order of the sweeps' reports,
/// never by how long anything took.
#[test]
fn a_long_trim_of_one_tenant_delays_another_tenants_lapsed_lease_by_at_most_one_turn() {
    const CHANGES: u64 = 2_500;
    const START: i64 = 2_000_000;
    const LAPSE: i64 = START + 1;
    let db = TestDb::new();
    let clock = Arc::new(ManualClock::new(1_000_000));
    let e = engine_at(&db, &clock);
    let acme = e.tenant("acme").expect("tenant");
    for i in 0..CHANGES {
        acme.open(&task(&format!("t{i}"), 1)).expect("open");
    }
    let globex = e.tenant("globex").expect("tenant");
    globex
        .open(&task("pay-1", 1).roles(&["approver"]))
        .expect("open");
    claim_leased(
        &globex,
        "pay-1",
        "alice",
        &["approver"],
        1_000_000,
        (LAPSE - 1_000_000) as u32,
    );
    clock.set(START);
    // One call of each duty a turn: reclaim-lapsed, expire-overdue, trim.
    let options = SweeperOptions {
        calls_per_turn: 3,
        retention: Some(Retention {
            max_age: Some(Duration::from_secs(10)),
            keep: None,
        }),
        trim_every: Duration::ZERO,
        ..SweeperOptions::default()
    };
    let reports: Arc<Mutex<Vec<SweepReport>>> = Arc::default();
    let on_sweep = {
        let (reports, clock) = (reports.clone(), clock.clone());
        Arc::new(move |r: &SweepReport| {
            let mut reports = reports.lock().unwrap_or_else(PoisonError::into_inner);
            reports.push(r.clone());
            // globex's lease lapses during acme's first turn.
            if reports.len() == 1 {
                clock.set(LAPSE);
            }
        })
    };
    let s = Sweeper::start(
        &e,
        ["acme".to_owned(), "globex".to_owned()],
        SweeperOptions {
            on_sweep: Some(on_sweep),
            ..options
        },
    )
    .expect("sweeper");
    let trimmed = |reports: &[SweepReport], tenant: &str| -> u64 {
        reports
            .iter()
            .filter(|r| r.tenant == tenant)
            .map(|r| r.counted("trimmed"))
            .sum()
    };
    eventually(
        "acme's record to be trimmed and globex's lease reclaimed",
        || {
            let reports = reports.lock().unwrap_or_else(PoisonError::into_inner);
            trimmed(&reports, "acme") == CHANGES && reports.iter().any(|r| r.reclaimed == 1)
        },
    );
    let reports = reports
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone();
    assert_eq!(reports[0].tenant, "acme", "{reports:?}");
    assert!(reports[0].more, "acme's first turn ends at its cap");
    let reclaimed_at = reports
        .iter()
        .position(|r| r.reclaimed == 1)
        .expect("globex's lease was reclaimed");
    assert_eq!(
        (reclaimed_at, reports[reclaimed_at].tenant.as_str()),
        (1, "globex"),
        "globex is swept right after the acme turn during which its lease lapsed: {reports:?}"
    );
    // acme's record is trimmed a turn at a time, one call of it a turn,
    // each turn but the last ending at its cap.
    let acme_turns: Vec<&SweepReport> = reports
        .iter()
        .filter(|r| r.tenant == "acme" && r.counted("trimmed") > 0)
        .collect();
    assert!(acme_turns.len() >= 3, "{acme_turns:?}");
    assert!(acme_turns.iter().all(|r| r.counted("trimmed") <= 1_000));
    let (last, capped) = acme_turns.split_last().expect("acme was trimmed");
    assert!(
        capped.iter().all(|r| r.more && r.error.is_none()),
        "{capped:?}"
    );
    assert!(!last.more && last.error.is_none(), "{last:?}");
    assert_eq!(s.stats().trimmed, s.counted("trimmed"));
    assert!(s.stats().trimmed >= CHANGES);
    assert_eq!(state_of(&globex, "pay-1"), TaskState::Open);
    assert_consistent(&acme);
    assert_consistent(&globex);
}

/// A tenant that commits again and again while its next instant is far
/// away keeps one entry in the sweeper's schedule, however often it is
/// read and however its instant moves, and is swept at the instant it was
/// last read as.
#[test]
fn the_schedule_keeps_one_entry_per_tenant_however_often_it_commits() {
    const COMMITS: i64 = 100;
    let db = TestDb::new();
    let clock = Arc::new(ManualClock::new(1_000_000));
    let e = engine_at(&db, &clock);
    let t = e.tenant("acme").expect("tenant");
    let far = 1_000_000 + 365 * 86_400_000;
    t.open(&task("first", 1).due(far)).expect("open");
    let s = Sweeper::start(
        &e,
        ["acme".to_owned()],
        SweeperOptions {
            // Every commit is read.
            min_reread: Duration::ZERO,
            ..SweeperOptions::default()
        },
    )
    .expect("sweeper");
    read_at_least(&s, 1);
    assert_eq!(s.stats().scheduled, 1);
    for i in 1..=COMMITS {
        let reads = s.stats().reads;
        // Due a moment before the last, so every other read finds a new
        // instant, and the rest find the same one again.
        let due = if i % 2 == 0 { far - i } else { far - i + 1 };
        t.open(&task(&format!("t{i}"), 1).due(due)).expect("open");
        read_at_least(&s, reads + 1);
        let scheduled = s.stats().scheduled;
        assert_eq!(scheduled, 1, "{scheduled} entries after {i} commits");
    }
    assert_eq!(s.stats().sweeps, 0, "nothing was due");
    clock.set(far - COMMITS);
    eventually("the earliest task to expire", || s.stats().expired == 1);
    assert_eq!(state_of(&t, &format!("t{COMMITS}")), TaskState::Expired);
    assert_eq!(state_of(&t, &format!("t{}", COMMITS - 1)), TaskState::Open);
    read_at_least(&s, COMMITS as u64 + 2);
    assert_eq!(s.stats().scheduled, 1);
    assert_consistent(&t);
}
