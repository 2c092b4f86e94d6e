//! Timers: first arming wins, leases, the claimable order, disarming, the
//! counters, and timers of sealed runs.

use super::*;
use crate::model::ArmOutcome;
use crate::schema;
use crate::timers;
use crate::validate::MAX_LEASE_MS;

const LEASE: u32 = 1_000;

/// `(run, effect)` of each timer, in order.
fn idents(ts: &[Timer]) -> Vec<(String, String)> {
    ts.iter()
        .map(|t| (t.run.clone(), t.effect.clone()))
        .collect()
}

fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter()
        .map(|(r, e)| ((*r).to_owned(), (*e).to_owned()))
        .collect()
}

fn claim_due(kv: &mut MemKv, now: i64, limit: u32) -> Vec<(String, String)> {
    idents(&timers::claim_due(kv, now, limit, LEASE).expect("claim-due"))
}

fn pending(kv: &mut MemKv) -> u64 {
    timers::pending_count(kv).expect("pending-count")
}

fn next_due(kv: &mut MemKv) -> Option<i64> {
    timers::next_due(kv).expect("next-due")
}

#[test]
fn arming_twice_keeps_one_timer_and_the_first_fire_time() {
    let mut kv = MemKv::new();
    arm(&mut kv, timer("r", "e", 100));
    let later = Timer {
        step: 7,
        phase: crate::model::Phase::Compensating,
        ..timer("r", "e", 500)
    };
    let outcome = writes_nothing(&mut kv, |kv| timers::arm(kv, &later));
    assert_eq!(outcome, ArmOutcome::AlreadyArmed);
    assert_eq!(pending(&mut kv), 1);
    assert_eq!(next_due(&mut kv), Some(100));
    let got = timers::claim_due(&mut kv, 100, 10, LEASE).expect("claim-due");
    assert_eq!(got, [timer("r", "e", 100)]);
    assert_healthy(&mut kv);
}

#[test]
fn rearming_a_claimed_timer_neither_moves_nor_unclaims_it() {
    let mut kv = MemKv::new();
    arm(&mut kv, timer("r", "e", 100));
    assert_eq!(claim_due(&mut kv, 100, 10), pairs(&[("r", "e")]));
    for fire_at in [0, 100, 5_000] {
        let outcome = writes_nothing(&mut kv, |kv| timers::arm(kv, &timer("r", "e", fire_at)));
        assert_eq!(outcome, ArmOutcome::AlreadyArmed);
    }
    // Still held: not handed out inside the lease, due again at its end.
    assert!(claim_due(&mut kv, 1_099, 10).is_empty());
    assert_eq!(next_due(&mut kv), Some(1_100));
    assert_eq!(claim_due(&mut kv, 1_100, 10), pairs(&[("r", "e")]));
    assert_healthy(&mut kv);
}

#[test]
fn a_claimed_timer_comes_back_exactly_when_its_lease_ends() {
    let mut kv = MemKv::new();
    arm(&mut kv, timer("r", "e", 100));
    let got = timers::claim_due(&mut kv, 250, 10, LEASE).expect("claim-due");
    assert_eq!(got, [timer("r", "e", 100)]);
    // The lease runs from `now`, not from `fire-at`.
    assert_eq!(next_due(&mut kv), Some(1_250));
    for now in [250, 251, 1_000, 1_249] {
        assert!(
            writes_nothing(&mut kv, |kv| timers::claim_due(kv, now, 10, LEASE)).is_empty(),
            "handed out again at {now}, inside the lease"
        );
    }
    // At exactly the lease end (`<= now`), the next sweep takes it over.
    assert_eq!(claim_due(&mut kv, 1_250, 10), pairs(&[("r", "e")]));
    assert_eq!(next_due(&mut kv), Some(2_250));
    assert!(claim_due(&mut kv, 2_249, 10).is_empty());
    assert_eq!(pending(&mut kv), 1, "a claim is a lease, not a disarm");
    assert_healthy(&mut kv);
}

#[test]
fn a_held_timer_does_not_hide_a_due_one() {
    let mut kv = MemKv::new();
    for i in 0..5 {
        arm(&mut kv, timer("r", &format!("e{i}"), 10 + i));
    }
    // A sweeper holds the two earliest.
    assert_eq!(
        claim_due(&mut kv, 20, 2),
        pairs(&[("r", "e0"), ("r", "e1")])
    );
    // Every one-at-a-time sweep still finds a due timer behind them.
    assert_eq!(claim_due(&mut kv, 20, 1), pairs(&[("r", "e2")]));
    assert_eq!(claim_due(&mut kv, 20, 1), pairs(&[("r", "e3")]));
    assert_eq!(claim_due(&mut kv, 20, 1), pairs(&[("r", "e4")]));
    assert!(claim_due(&mut kv, 20, 1).is_empty());
    assert_healthy(&mut kv);
}

#[test]
fn two_sweeps_at_one_instant_never_receive_one_timer() {
    let mut kv = MemKv::new();
    for i in 0..10 {
        arm(&mut kv, timer(&format!("r{}", i % 3), &format!("e{i}"), i));
    }
    let first = claim_due(&mut kv, 50, 4);
    let second = claim_due(&mut kv, 50, 100);
    assert_eq!(first.len(), 4);
    assert_eq!(second.len(), 6);
    assert!(first.iter().all(|t| !second.contains(t)));
}

/// At the last instant a caller can name, a lease still lasts as long as it
/// was asked to: clamped to that instant it would end at once, and the next
/// sweep at the same instant would take timers another sweeper holds.
#[test]
fn two_sweeps_at_the_last_instant_never_share_a_timer() {
    let end = crate::validate::MAX_TIMESTAMP;
    let mut kv = MemKv::new();
    for i in 0..6 {
        arm(
            &mut kv,
            timer(&format!("r{}", i % 2), &format!("e{i}"), end - i),
        );
    }
    let first = claim_due(&mut kv, end, 3);
    let second = claim_due(&mut kv, end, 100);
    assert_eq!(first.len(), 3);
    assert_eq!(second.len(), 3);
    assert!(
        first.iter().all(|t| !second.contains(t)),
        "{first:?} {second:?}"
    );
    assert!(
        claim_due(&mut kv, end, 100).is_empty(),
        "a held timer was handed out again"
    );
    // The lease ends past the last nameable instant, as computed.
    assert_eq!(next_due(&mut kv), Some(end + 1000));
    assert_healthy(&mut kv);
}

/// Retiring sealed runs' timers makes a sweep read on; it must never come
/// back to a timer it has just claimed.
#[test]
fn one_sweep_at_the_last_instant_never_returns_a_timer_twice() {
    let end = crate::validate::MAX_TIMESTAMP;
    let mut kv = MemKv::new();
    for i in 0..4 {
        arm(&mut kv, timer("sealed", &format!("s{i}"), end - 10 + i));
    }
    for i in 0..4 {
        arm(&mut kv, timer("live", &format!("l{i}"), end - 10 + i));
    }
    kv.map
        .insert(schema::sealed("sealed").into_bytes(), Vec::new());
    let got = claim_due(&mut kv, end, 3);
    let mut unique = got.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), got.len(), "{got:?}");
    let rest = claim_due(&mut kv, end, 100);
    assert_eq!(got.len() + rest.len(), 4);
    assert!(got.iter().all(|t| !rest.contains(t)));
    assert_healthy(&mut kv);
}

#[test]
fn a_timer_due_later_than_now_is_never_returned() {
    let mut kv = MemKv::new();
    arm(&mut kv, timer("r", "soon", 100));
    arm(&mut kv, timer("r", "later", 101));
    assert!(claim_due(&mut kv, 99, 1000).is_empty());
    assert_eq!(claim_due(&mut kv, 100, 1000), pairs(&[("r", "soon")]));
    assert!(claim_due(&mut kv, 100, 1000).is_empty());
    assert_eq!(claim_due(&mut kv, 101, 1000), pairs(&[("r", "later")]));
}

#[test]
fn claim_due_orders_by_claimable_instant_then_run_then_effect() {
    let mut kv = MemKv::new();
    arm(&mut kv, timer("r1", "b", 20));
    arm(&mut kv, timer("r1", "a", 20));
    arm(&mut kv, timer("r0", "z", 20));
    arm(&mut kv, timer("r9", "early", 12));
    arm(&mut kv, timer("r5", "lapsed", 5));
    arm(&mut kv, timer("r2", "last", 30));
    // r5/lapsed is claimed at 10 with a 5 ms lease: claimable again at 15,
    // which puts it after r9/early (12) though it fired first.
    let got = timers::claim_due(&mut kv, 10, 10, 5).expect("claim-due");
    assert_eq!(idents(&got), pairs(&[("r5", "lapsed")]));
    assert_eq!(
        claim_due(&mut kv, 40, 1000),
        pairs(&[
            ("r9", "early"),
            ("r5", "lapsed"),
            ("r0", "z"),
            ("r1", "a"),
            ("r1", "b"),
            ("r2", "last"),
        ])
    );
}

#[test]
fn claim_due_hands_out_at_most_limit_timers_in_order() {
    let mut kv = MemKv::new();
    for i in 0..7 {
        arm(&mut kv, timer("r", &format!("e{i}"), i));
    }
    assert_eq!(claim_due(&mut kv, 100, 3).len(), 3);
    assert_eq!(
        claim_due(&mut kv, 100, 3),
        pairs(&[("r", "e3"), ("r", "e4"), ("r", "e5")])
    );
    assert_eq!(claim_due(&mut kv, 100, 3), pairs(&[("r", "e6")]));
    assert!(claim_due(&mut kv, 100, 3).is_empty());
}

#[test]
fn claim_due_answers_the_timer_as_armed() {
    let mut kv = MemKv::new();
    let t = Timer {
        case: Some("case-9".into()),
        step: 42,
        phase: crate::model::Phase::Compensating,
        ..timer("r", "e", 7)
    };
    arm(&mut kv, t.clone());
    assert_eq!(timers::claim_due(&mut kv, 7, 1, LEASE), Ok(vec![t]));
}

#[test]
fn disarm_answers_whether_the_timer_existed_and_is_idempotent() {
    let mut kv = MemKv::new();
    arm(&mut kv, timer("r", "e", 10));
    arm(&mut kv, timer("r", "f", 10));
    assert_eq!(timers::disarm(&mut kv, "r", "e"), Ok(true));
    assert_eq!(pending(&mut kv), 1);
    assert!(!writes_nothing(&mut kv, |kv| timers::disarm(kv, "r", "e")));
    assert!(!writes_nothing(&mut kv, |kv| timers::disarm(
        kv, "nope", "e"
    )));
    assert_eq!(pending(&mut kv), 1);
    assert_eq!(claim_due(&mut kv, 10, 10), pairs(&[("r", "f")]));
    assert_healthy(&mut kv);
}

#[test]
fn disarming_a_held_timer_retires_it_and_its_lease() {
    let mut kv = MemKv::new();
    arm(&mut kv, timer("r", "e", 10));
    assert_eq!(claim_due(&mut kv, 10, 10).len(), 1);
    assert_eq!(timers::disarm(&mut kv, "r", "e"), Ok(true));
    assert_eq!(next_due(&mut kv), None);
    assert!(claim_due(&mut kv, 10_000, 10).is_empty());
    assert_eq!(pending(&mut kv), 0);
    assert_healthy(&mut kv);
    // Disarmed, it may be armed afresh.
    arm(&mut kv, timer("r", "e", 20));
    assert_eq!(claim_due(&mut kv, 20, 10), pairs(&[("r", "e")]));
}

#[test]
fn disarm_run_retires_exactly_that_runs_timers() {
    let mut kv = MemKv::new();
    for e in ["a", "b", "c"] {
        arm(&mut kv, timer("r", e, 10));
    }
    // Runs whose names share a prefix with "r", before and after it.
    arm(&mut kv, timer("r2", "a", 10));
    arm(&mut kv, timer("r ", "a", 10));
    arm(&mut kv, timer("q", "a", 10));
    assert_eq!(claim_due(&mut kv, 10, 1), pairs(&[("q", "a")]));
    assert_eq!(claim_due(&mut kv, 10, 2), pairs(&[("r", "a"), ("r", "b")]));
    assert_eq!(timers::disarm_run(&mut kv, "r"), Ok(3));
    assert_eq!(pending(&mut kv), 3);
    assert_eq!(
        claim_due(&mut kv, 10_000, 100),
        // q/a's lease ended at 1010, after the others' fire time.
        pairs(&[("r ", "a"), ("r2", "a"), ("q", "a")])
    );
    assert_eq!(timers::disarm_run(&mut kv, "r"), Ok(0));
    assert_eq!(timers::disarm_run(&mut kv, "nobody"), Ok(0));
    assert_healthy(&mut kv);
}

#[test]
fn disarm_run_retires_runs_larger_than_one_scan_chunk() {
    let mut kv = MemKv::new();
    let n = crate::store::SCAN_CHUNK as usize * 2 + 3;
    for i in 0..n {
        arm(&mut kv, timer("big", &format!("e{i:04}"), i as i64));
    }
    arm(&mut kv, timer("small", "e", 0));
    assert_eq!(timers::disarm_run(&mut kv, "big"), Ok(n as u32));
    assert_eq!(pending(&mut kv), 1);
    assert_healthy(&mut kv);
}

#[test]
fn pending_count_follows_arm_disarm_disarm_run_and_seal_exactly() {
    let mut kv = MemKv::new();
    assert_eq!(pending(&mut kv), 0);
    for e in ["a", "b", "c"] {
        arm(&mut kv, timer("r1", e, 10));
        arm(&mut kv, timer("r2", e, 10));
        arm(&mut kv, timer("r3", e, 10));
    }
    assert_eq!(pending(&mut kv), 9);
    timers::arm(&mut kv, &timer("r1", "a", 99)).expect("re-arm");
    assert_eq!(pending(&mut kv), 9, "re-arming adds nothing");
    claim_due(&mut kv, 10, 4);
    assert_eq!(pending(&mut kv), 9, "claiming removes nothing");
    timers::disarm(&mut kv, "r1", "a").expect("disarms");
    assert_eq!(pending(&mut kv), 8);
    timers::disarm(&mut kv, "r1", "a").expect("disarms again");
    assert_eq!(pending(&mut kv), 8);
    timers::disarm_run(&mut kv, "r2").expect("disarms a run");
    assert_eq!(pending(&mut kv), 5);
    crate::runs::seal(&mut kv, "r3", &[]).expect("seals");
    assert_eq!(pending(&mut kv), 2);
    timers::disarm_run(&mut kv, "r1").expect("disarms a run");
    assert_eq!(pending(&mut kv), 0);
    assert_healthy(&mut kv);
}

#[test]
fn next_due_is_the_earliest_fire_or_lease_expiry() {
    let mut kv = MemKv::new();
    assert_eq!(next_due(&mut kv), None);
    arm(&mut kv, timer("r", "a", 500));
    assert_eq!(next_due(&mut kv), Some(500));
    arm(&mut kv, timer("r", "b", 300));
    assert_eq!(next_due(&mut kv), Some(300));
    // b is held until 400 + LEASE = 1400; a at 500 is now the earliest.
    assert_eq!(claim_due(&mut kv, 400, 10), pairs(&[("r", "b")]));
    assert_eq!(next_due(&mut kv), Some(500));
    // a is held until 600 + LEASE = 1600; b's lease ends first.
    assert_eq!(claim_due(&mut kv, 600, 10), pairs(&[("r", "a")]));
    assert_eq!(next_due(&mut kv), Some(1_400));
    timers::disarm(&mut kv, "r", "b").expect("disarms");
    assert_eq!(next_due(&mut kv), Some(1_600));
    timers::disarm(&mut kv, "r", "a").expect("disarms");
    assert_eq!(next_due(&mut kv), None);
}

#[test]
fn lease_ms_must_be_between_one_millisecond_and_seven_days() {
    let mut kv = MemKv::new();
    arm(&mut kv, timer("r", "e", 0));
    for lease in [0, MAX_LEASE_MS + 1, u32::MAX] {
        let why = invalid_reason(fails_cleanly(&mut kv, |kv| {
            timers::claim_due(kv, 10, 10, lease)
        }));
        assert!(why.contains("lease-ms"), "{why}");
    }
    assert_eq!(
        timers::claim_due(&mut kv, 10, 10, 1).map(|v| v.len()),
        Ok(1)
    );
    assert_eq!(next_due(&mut kv), Some(11));
    let got = timers::claim_due(&mut kv, 11, 10, MAX_LEASE_MS).expect("a seven-day lease");
    assert_eq!(got.len(), 1);
    assert_eq!(next_due(&mut kv), Some(11 + i64::from(MAX_LEASE_MS)));
}

#[test]
fn a_sealed_run_gets_no_timer() {
    let mut kv = MemKv::new();
    crate::runs::seal(&mut kv, "r", &[]).expect("seals");
    let outcome = writes_nothing(&mut kv, |kv| timers::arm(kv, &timer("r", "e", 10)));
    assert_eq!(outcome, ArmOutcome::RunSealed);
    assert_eq!(pending(&mut kv), 0);
    assert_eq!(next_due(&mut kv), None);
    // Other runs are unaffected, including one whose name extends it.
    arm(&mut kv, timer("r2", "e", 10));
    assert_healthy(&mut kv);
}

#[test]
fn a_timer_of_a_run_sealed_behind_its_back_is_retired_not_returned() {
    let mut kv = MemKv::new();
    arm(&mut kv, timer("sealed", "a", 10));
    arm(&mut kv, timer("sealed", "b", 11));
    arm(&mut kv, timer("live", "a", 12));
    arm(&mut kv, timer("sealed", "later", 5_000));
    // A seal that raced the sweep: the mark is there, the timers are not yet
    // retired.
    kv.map
        .insert(schema::sealed("sealed").into_bytes(), Vec::new());
    assert_eq!(claim_due(&mut kv, 100, 10), pairs(&[("live", "a")]));
    // The due ones are gone; the one not yet due is left for later sweeps.
    assert_eq!(pending(&mut kv), 2);
    assert_eq!(next_due(&mut kv), Some(1_100));
    assert_healthy(&mut kv);
    assert_eq!(claim_due(&mut kv, 5_000, 10), pairs(&[("live", "a")]));
    assert_eq!(pending(&mut kv), 1);
    assert_healthy(&mut kv);
}

#[test]
fn retired_timers_of_sealed_runs_do_not_count_against_limit() {
    let mut kv = MemKv::new();
    for i in 0..5 {
        arm(&mut kv, timer("sealed", &format!("e{i}"), i));
    }
    arm(&mut kv, timer("live", "a", 10));
    arm(&mut kv, timer("live", "b", 11));
    kv.map
        .insert(schema::sealed("sealed").into_bytes(), Vec::new());
    // Five retired on the way, one claimed: limit 1 was not used up by them.
    assert_eq!(claim_due(&mut kv, 100, 1), pairs(&[("live", "a")]));
    assert_eq!(pending(&mut kv), 2);
    assert_eq!(claim_due(&mut kv, 100, 1), pairs(&[("live", "b")]));
    assert_healthy(&mut kv);
}
