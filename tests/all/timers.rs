//! Durable timers under leases: arm, claim-due, disarm, disarm-run,
//! pending-count, next-due, reschedule and the listings.

use std::sync::Arc;

use leasehold_host::{
    ArmOutcome, Change, Engine, Error, FeedRead, ManualClock, Rescheduled, StoreError, Tenant,
    Timer, TimerEvent,
};
use leasehold_tests::*;

const LONG_LEASE: u32 = 60_000;

fn arm_all(t: &Tenant, timers: &[Timer]) {
    for tm in timers {
        assert_eq!(t.arm(tm).expect("arm"), ArmOutcome::Armed, "{tm:?}");
    }
}

fn pair(run: &str, effect: &str) -> (String, String) {
    (run.to_owned(), effect.to_owned())
}

#[test]
fn arming_twice_yields_one_timer_and_the_first_arming_wins() {
    let (t, _db) = temp_tenant();
    assert_eq!(
        t.arm(&timer("r", "e", 100)).expect("arm"),
        ArmOutcome::Armed
    );
    let mut moved = timer("r", "e", 50);
    moved.step = 7;
    assert_eq!(t.arm(&moved).expect("re-arm"), ArmOutcome::AlreadyArmed);
    assert_eq!(t.pending_count().expect("count"), 1);
    assert_eq!(t.next_due().expect("next-due"), Some(100));
    assert!(
        t.claim_due(60, 10, LONG_LEASE).expect("claim").is_empty(),
        "the re-arm must not have moved the timer earlier"
    );
    let got = t.claim_due(100, 10, LONG_LEASE).expect("claim");
    assert_eq!(got, [timer("r", "e", 100)]);
    assert_consistent(&t);
}

#[test]
fn re_arming_a_claimed_timer_neither_moves_nor_unclaims_it() {
    let (t, _db) = temp_tenant();
    t.arm(&timer("r", "e", 100)).expect("arm");
    assert_eq!(t.claim_due(100, 10, 1_000).expect("claim").len(), 1);
    assert_eq!(
        t.arm(&timer("r", "e", 100)).expect("re-arm"),
        ArmOutcome::AlreadyArmed
    );
    assert_eq!(
        t.arm(&timer("r", "e", 10)).expect("re-arm earlier"),
        ArmOutcome::AlreadyArmed
    );
    assert!(
        t.claim_due(500, 10, 1_000).expect("claim").is_empty(),
        "still held by the first sweeper"
    );
    assert_eq!(t.next_due().expect("next-due"), Some(1_100));
    assert_eq!(t.pending_count().expect("count"), 1);
    assert_consistent(&t);
}

#[test]
fn a_claimed_timer_is_not_handed_out_again_inside_its_lease() {
    let (t, _db) = temp_tenant();
    t.arm(&timer("r", "e", 100)).expect("arm");
    let first = t.claim_due(150, 10, 1_000).expect("first sweep");
    assert_eq!(identities(&first), [pair("r", "e")]);
    for now in [150, 151, 600, 1_149] {
        assert!(
            t.claim_due(now, 10, 1_000).expect("sweep").is_empty(),
            "handed out again at {now}, inside the lease that ends at 1150"
        );
    }
    assert_consistent(&t);
}

#[test]
fn a_dead_sweepers_timer_is_handed_out_again_once_the_lease_lapses() {
    let (t, _db) = temp_tenant();
    t.arm(&timer("r", "e", 100)).expect("arm");
    t.claim_due(100, 10, 1_000)
        .expect("first sweep, which then dies");
    let again = t.claim_due(1_100, 10, 500).expect("next sweep");
    assert_eq!(
        again,
        [timer("r", "e", 100)],
        "a lease that ended at now is over"
    );
    assert!(t.claim_due(1_599, 10, 500).expect("sweep").is_empty());
    assert_eq!(t.claim_due(1_600, 10, 500).expect("sweep").len(), 1);
    assert_eq!(
        t.pending_count().expect("count"),
        1,
        "claiming never retires"
    );
    assert_consistent(&t);
}

#[test]
fn held_timers_never_hide_a_due_one_behind_them() {
    let (t, _db) = temp_tenant();
    for i in 0..10 {
        t.arm(&timer("r", &format!("e{i}"), 10 + i)).expect("arm");
    }
    // The five earliest are held under a long lease.
    let held = t.claim_due(100, 5, LONG_LEASE).expect("first sweep");
    assert_eq!(
        identities(&held),
        (0..5)
            .map(|i| pair("r", &format!("e{i}")))
            .collect::<Vec<_>>()
    );
    for i in 5..10 {
        let got = t.claim_due(100, 1, LONG_LEASE).expect("sweep of one");
        assert_eq!(
            identities(&got),
            [pair("r", &format!("e{i}"))],
            "a limit of one must still reach the due timer behind the held ones"
        );
    }
    assert!(t.claim_due(100, 1, LONG_LEASE).expect("sweep").is_empty());
    assert_eq!(t.pending_count().expect("count"), 10);
    assert_consistent(&t);
}

#[test]
fn a_timer_due_later_than_now_is_never_returned() {
    let (t, _db) = temp_tenant();
    t.arm(&timer("r", "soon", 1_000)).expect("arm");
    t.arm(&timer("r", "later", 5_000)).expect("arm");
    for now in [0, 500, 999] {
        assert!(t.claim_due(now, 10, 1).expect("sweep").is_empty(), "{now}");
    }
    assert_eq!(
        identities(&t.claim_due(1_000, 10, LONG_LEASE).expect("sweep")),
        [pair("r", "soon")],
        "fire-at == now is due, fire-at > now is not"
    );
    assert!(t.claim_due(4_999, 10, 1).expect("sweep").is_empty());
    assert_consistent(&t);
}

#[test]
fn claim_due_hands_out_timers_by_claimable_instant_then_run_then_effect() {
    let (t, _db) = temp_tenant();
    arm_all(
        &t,
        &[
            timer("r2", "a", 10),
            timer("r1", "b", 10),
            timer("r1", "a", 10),
            timer("r0", "z", 20),
            timer("r3", "x", 5),
        ],
    );
    // r3/x is claimed and its lease ends at 15, between 10 and 20.
    t.claim_due(5, 1, 10).expect("sweep");
    let got = t.claim_due(100, 10, LONG_LEASE).expect("sweep");
    assert_eq!(
        identities(&got),
        [
            pair("r1", "a"),
            pair("r1", "b"),
            pair("r2", "a"),
            pair("r3", "x"),
            pair("r0", "z"),
        ]
    );
    assert_consistent(&t);
}

#[test]
fn claim_due_respects_its_limit_and_leaves_the_rest_due() {
    let (t, _db) = temp_tenant();
    for i in 0..5 {
        t.arm(&timer("r", &format!("e{i}"), i)).expect("arm");
    }
    assert_eq!(t.claim_due(10, 3, LONG_LEASE).expect("sweep").len(), 3);
    assert_eq!(t.claim_due(10, 3, LONG_LEASE).expect("sweep").len(), 2);
    assert!(t.claim_due(10, 3, LONG_LEASE).expect("sweep").is_empty());
    assert_consistent(&t);
}

#[test]
fn claim_due_refuses_a_zero_lease_and_a_bad_limit() {
    let (t, _db) = temp_tenant();
    t.arm(&timer("r", "e", 0)).expect("arm");
    for (limit, lease) in [(10, 0), (0, 100), (1001, 100), (10, 604_800_001)] {
        assert!(
            matches!(
                t.claim_due(10, limit, lease),
                Err(Error::Store(StoreError::Invalid(_)))
            ),
            "limit {limit}, lease {lease} accepted"
        );
    }
    assert_eq!(
        t.claim_due(10, 10, 604_800_000)
            .expect("a 7-day lease")
            .len(),
        1,
        "the refused calls claimed nothing"
    );
    assert_consistent(&t);
}

#[test]
fn disarm_retires_one_timer_and_answers_whether_it_existed() {
    let (t, _db) = temp_tenant();
    arm_all(&t, &[timer("r", "a", 10), timer("r", "b", 10)]);
    assert!(t.disarm("r", "a").expect("disarm"));
    assert!(!t.disarm("r", "a").expect("disarm again"));
    assert!(!t.disarm("r", "ghost").expect("disarm unknown"));
    assert_eq!(t.pending_count().expect("count"), 1);
    assert_eq!(
        identities(&t.claim_due(10, 10, LONG_LEASE).expect("sweep")),
        [pair("r", "b")]
    );
    assert!(t.disarm("r", "b").expect("disarm a held timer"));
    assert_eq!(t.next_due().expect("next-due"), None);
    assert_eq!(
        t.arm(&timer("r", "a", 5)).expect("arm after disarm"),
        ArmOutcome::Armed,
        "a disarmed identity can be armed afresh"
    );
    assert_consistent(&t);
}

#[test]
fn disarm_run_retires_exactly_that_runs_timers() {
    let (t, _db) = temp_tenant();
    arm_all(
        &t,
        &[
            timer("run-1", "a", 10),
            timer("run-1", "b", 20),
            timer("run-1", "c", 30),
            // Runs whose names extend "run-1" must be untouched.
            timer("run-10", "a", 10),
            timer("run-1x", "a", 15),
            timer("run-2", "a", 5),
        ],
    );
    t.claim_due(10, 1, LONG_LEASE).expect("hold run-2/a");
    t.claim_due(10, 1, LONG_LEASE).expect("hold run-1/a");
    assert_eq!(t.disarm_run("run-1").expect("disarm-run"), 3);
    assert_eq!(t.disarm_run("run-1").expect("again"), 0);
    assert_eq!(t.disarm_run("never-armed").expect("unknown run"), 0);
    assert_eq!(t.pending_count().expect("count"), 3);
    let got = t.claim_due(1_000, 10, LONG_LEASE).expect("sweep");
    assert_eq!(
        identities(&got),
        [pair("run-10", "a"), pair("run-1x", "a")],
        "the other runs' timers stay claimable (run-2/a is held)"
    );
    assert_consistent(&t);
}

#[test]
fn a_sealed_runs_timer_is_never_returned() {
    let (t, _db) = temp_tenant();
    arm_all(&t, &[timer("r", "a", 10), timer("other", "a", 10)]);
    t.claim_due(10, 1, 100).expect("hold other/a");
    t.seal("r", &[]).expect("seal");
    assert_eq!(
        t.arm(&timer("r", "b", 10)).expect("arm after seal"),
        ArmOutcome::RunSealed
    );
    assert_eq!(
        identities(&t.claim_due(1_000, 10, LONG_LEASE).expect("sweep")),
        [pair("other", "a")]
    );
    assert_eq!(
        identities(&t.claim_due(100_000, 10, LONG_LEASE).expect("sweep")),
        [pair("other", "a")]
    );
    for now in [0, 10, 1_000_000_000] {
        let got = t.claim_due(now, 1000, 1).expect("sweep");
        assert!(
            got.iter().all(|tm| tm.run != "r"),
            "a sealed run's timer was handed out at {now}"
        );
    }
    assert_eq!(t.pending_count().expect("count"), 1);
    assert_consistent(&t);
}

#[test]
fn arming_for_a_sealed_run_answers_run_sealed_and_arms_nothing() {
    let (t, _db) = temp_tenant();
    t.seal("r", &[]).expect("seal");
    assert_eq!(
        t.arm(&timer("r", "e", 10)).expect("arm"),
        ArmOutcome::RunSealed
    );
    assert_eq!(t.pending_count().expect("count"), 0);
    assert_eq!(t.next_due().expect("next-due"), None);
    assert!(t.claim_due(10, 10, 1).expect("sweep").is_empty());
    assert_eq!(
        t.arm(&timer("r2", "e", 10)).expect("arm"),
        ArmOutcome::Armed,
        "another run is unaffected"
    );
    assert_consistent(&t);
}

#[test]
fn next_due_answers_the_earliest_claimable_instant() {
    let (t, _db) = temp_tenant();
    assert_eq!(t.next_due().expect("next-due"), None, "nothing armed");
    t.arm(&timer("r", "b", 300)).expect("arm");
    assert_eq!(t.next_due().expect("next-due"), Some(300));
    t.arm(&timer("r", "a", 100)).expect("arm");
    assert_eq!(t.next_due().expect("next-due"), Some(100));
    // Held: the earliest instant is now its lease expiry, if earlier than 300.
    t.claim_due(100, 1, 50).expect("hold r/a until 150");
    assert_eq!(t.next_due().expect("next-due"), Some(150));
    t.claim_due(150, 1, 1_000).expect("hold r/a until 1150");
    assert_eq!(t.next_due().expect("next-due"), Some(300));
    t.disarm("r", "b").expect("disarm");
    assert_eq!(t.next_due().expect("next-due"), Some(1_150));
    t.disarm("r", "a").expect("disarm");
    assert_eq!(t.next_due().expect("next-due"), None);
    assert_consistent(&t);
}

#[test]
fn pending_count_follows_arm_disarm_disarm_run_and_seal_exactly() {
    let (t, _db) = temp_tenant();
    let count = || t.pending_count().expect("pending-count");
    assert_eq!(count(), 0);
    for run in ["a", "b", "c"] {
        for effect in ["x", "y", "z"] {
            t.arm(&timer(run, effect, 10)).expect("arm");
        }
    }
    assert_eq!(count(), 9);
    t.arm(&timer("a", "x", 99)).expect("re-arm");
    assert_eq!(count(), 9, "a re-arm arms nothing");
    t.claim_due(10, 4, LONG_LEASE).expect("sweep");
    assert_eq!(count(), 9, "claimed timers are still armed");
    assert!(t.disarm("a", "x").expect("disarm"));
    assert_eq!(count(), 8);
    assert!(!t.disarm("a", "x").expect("disarm again"));
    assert_eq!(count(), 8);
    assert_eq!(t.disarm_run("b").expect("disarm-run"), 3);
    assert_eq!(count(), 5);
    let sealed = t.seal("c", &[]).expect("seal");
    assert_eq!(sealed.timers_disarmed, 3);
    assert_eq!(count(), 2);
    t.arm(&timer("c", "w", 10)).expect("arm a sealed run");
    assert_eq!(count(), 2);
    assert_eq!(t.seal("a", &[]).expect("seal").timers_disarmed, 2);
    assert_eq!(count(), 0);
    assert_consistent(&t);
}

/// A tenant whose calls happen at `clock`'s instant.
fn tenant_at(db: &TestDb, clock: &Arc<ManualClock>) -> Tenant {
    let builder = Engine::builder().clock(clock.clone());
    let engine = match db.backend() {
        Backend::Redb => db.open(builder.durability(leasehold_host::Durability::None)),
        Backend::Postgres => db.open(builder),
    };
    engine.tenant("acme").expect("valid tenant")
}

#[test]
fn a_reschedule_moves_a_timer_in_one_call_and_the_feed_says_so() {
    let db = TestDb::new();
    let clock = Arc::new(ManualClock::new(1_000));
    let t = tenant_at(&db, &clock);
    arm_all(&t, &[timer("r", "wake", 5_000), timer("r", "nudge", 6_000)]);
    let moved = match t.reschedule("r", "wake", 9_000, false).expect("reschedule") {
        Rescheduled::Moved(info) => info,
        other => panic!("not moved: {other:?}"),
    };
    assert_eq!((moved.timer.fire_at, moved.lease_until), (9_000, None));
    assert!(
        t.claim_due(8_999, 10, LONG_LEASE).expect("claim").len() == 1,
        "only nudge"
    );
    // Claimed: refused with the lease's end, then taken back.
    let got = t.claim_due(9_000, 10, LONG_LEASE).expect("claim");
    assert_eq!(got.len(), 1);
    assert_eq!(
        t.reschedule("r", "wake", 20_000, false).expect("held"),
        Rescheduled::Held(9_000 + i64::from(LONG_LEASE))
    );
    assert!(matches!(
        t.reschedule("r", "wake", 20_000, true).expect("take back"),
        Rescheduled::Moved(ref i) if i.timer.fire_at == 20_000 && i.lease_until.is_none()
    ));
    assert_eq!(
        t.reschedule("r", "gone", 1, false).expect("unknown"),
        Rescheduled::NotFound
    );
    let last = match t.feed(None, 1_000).expect("feed") {
        FeedRead::Page(p) => p
            .entries
            .into_iter()
            .filter_map(|e| match e.change {
                Change::Timer(c) if c.effect == "wake" => Some(c),
                _ => None,
            })
            .next_back()
            .expect("a timer entry"),
        FeedRead::Gone(_) => panic!("the feed is gone"),
    };
    assert_eq!(
        (last.verb.as_str(), last.what, last.fire_at, last.at),
        ("reschedule", TimerEvent::Rescheduled, 20_000, 1_000)
    );
    t.seal("r", &[]).expect("seal");
    assert_eq!(
        t.reschedule("r", "wake", 1, false).expect("sealed"),
        Rescheduled::RunSealed
    );
    assert_consistent(&t);
}

#[test]
fn timers_of_and_due_between_page_through_the_component() {
    let (t, _db) = temp_tenant();
    for run in ["a", "b"] {
        for i in 0..25 {
            t.arm(&timer(run, &format!("e{i:02}"), 100 + i))
                .expect("arm");
        }
    }
    let mut effects = Vec::new();
    let mut after: Option<String> = None;
    loop {
        let page = t.timers_of("b", 10, after.as_deref()).expect("timers-of");
        assert!(page.timers.len() <= 10);
        effects.extend(page.timers.into_iter().map(|i| i.timer.effect));
        match page.next {
            Some(n) => after = Some(n),
            None => break,
        }
    }
    assert_eq!(
        effects,
        (0..25).map(|i| format!("e{i:02}")).collect::<Vec<_>>()
    );
    let window = t.due_between(110, 112, 10, None).expect("due-between");
    let listed: Vec<(String, String, i64)> = window
        .timers
        .iter()
        .map(|i| (i.timer.run.clone(), i.timer.effect.clone(), i.timer.fire_at))
        .collect();
    assert_eq!(
        listed,
        [
            ("a".to_owned(), "e10".to_owned(), 110),
            ("b".to_owned(), "e10".to_owned(), 110),
            ("a".to_owned(), "e11".to_owned(), 111),
            ("b".to_owned(), "e11".to_owned(), 111),
        ]
    );
    assert!(matches!(
        t.due_between(5, 1, 10, None),
        Err(Error::Store(StoreError::Invalid(ref why))) if why.contains("before from")
    ));
}
