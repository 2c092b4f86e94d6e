//! `reschedule`, `timers-of` and `due-between`: a move keeps the timer's
//! identity and is in the feed, refusals write nothing, and the listings
//! page in their orders reading only what a page needs.

use super::*;
use crate::changes;
use crate::model::{Change, FeedRead, TimerError, TimerEvent, TimerInfo};
use crate::timers;

const LEASE: u32 = 1_000;

fn listed(infos: &[TimerInfo]) -> Vec<(String, String, i64, Option<i64>)> {
    infos
        .iter()
        .map(|i| {
            (
                i.timer.run.clone(),
                i.timer.effect.clone(),
                i.timer.fire_at,
                i.lease_until,
            )
        })
        .collect()
}

fn row(
    run: &str,
    effect: &str,
    fire_at: i64,
    lease: Option<i64>,
) -> (String, String, i64, Option<i64>) {
    (run.to_owned(), effect.to_owned(), fire_at, lease)
}

/// The feed's timer changes, in order.
fn timer_changes(kv: &mut MemKv) -> Vec<crate::model::TimerChange> {
    match changes::feed(kv, None, 1000).expect("feed") {
        FeedRead::Page(p) => p
            .entries
            .into_iter()
            .filter_map(|e| match e.change {
                Change::Timer(t) => Some(t),
                Change::Task(_) => None,
            })
            .collect(),
        FeedRead::Gone(_) => panic!("the feed is gone"),
    }
}

#[test]
fn a_reschedule_moves_the_timer_keeps_its_identity_and_is_in_the_feed() {
    let mut kv = MemKv::new();
    let t = Timer {
        case: Some("c1".into()),
        step: 4,
        phase: crate::model::Phase::Compensating,
        ..timer("r", "e", 100)
    };
    arm(&mut kv, t.clone());
    kv.now = 50;
    let moved = timers::reschedule(&mut kv, "r", "e", 300, false).expect("reschedule");
    assert_eq!(
        moved.timer,
        Timer {
            fire_at: 300,
            ..t.clone()
        }
    );
    assert_eq!(moved.lease_until, None);
    // Not claimable at its old instant; claimable at its new one.
    assert!(
        timers::claim_due(&mut kv, 299, 10, LEASE)
            .expect("claim-due")
            .is_empty()
    );
    assert_eq!(timers::next_due(&mut kv), Ok(Some(300)));
    assert_eq!(timers::pending_count(&mut kv), Ok(1));
    let last = timer_changes(&mut kv).pop().expect("an entry");
    assert_eq!(
        (
            last.verb.as_str(),
            last.what,
            last.fire_at,
            last.at,
            last.lease_until
        ),
        ("reschedule", TimerEvent::Rescheduled, 300, 50, None)
    );
    assert_eq!(
        timers::claim_due(&mut kv, 300, 10, LEASE).expect("claim-due"),
        [Timer { fire_at: 300, ..t }]
    );
    assert_healthy(&mut kv);
}

#[test]
fn a_held_timer_is_refused_with_its_lease_end_unless_taken_back() {
    let mut kv = MemKv::new();
    arm(&mut kv, timer("r", "e", 100));
    timers::claim_due(&mut kv, 100, 10, LEASE).expect("claim-due");
    kv.now = 500;
    let refused = fails_cleanly(&mut kv, |kv| timers::reschedule(kv, "r", "e", 2_000, false));
    assert_eq!(refused, TimerError::Held(1_100));
    let moved = timers::reschedule(&mut kv, "r", "e", 2_000, true).expect("taken back");
    assert_eq!((moved.timer.fire_at, moved.lease_until), (2_000, None));
    assert_eq!(timers::next_due(&mut kv), Ok(Some(2_000)));
    // A lease that has ended holds nothing: no take-back needed.
    timers::claim_due(&mut kv, 2_000, 10, LEASE).expect("claim-due");
    kv.now = 3_000;
    let moved = timers::reschedule(&mut kv, "r", "e", 3_500, false).expect("lapsed lease");
    assert_eq!((moved.timer.fire_at, moved.lease_until), (3_500, None));
    assert_healthy(&mut kv);
}

#[test]
fn unknown_and_sealed_timers_are_refused_and_a_move_to_the_same_instant_writes_nothing() {
    let mut kv = MemKv::new();
    arm(&mut kv, timer("r", "e", 100));
    arm(&mut kv, timer("s", "e", 100));
    let missing = fails_cleanly(&mut kv, |kv| timers::reschedule(kv, "r", "other", 5, false));
    assert_eq!(missing, TimerError::NotFound);
    let same = writes_nothing(&mut kv, |kv| timers::reschedule(kv, "r", "e", 100, false));
    assert_eq!(same.timer.fire_at, 100);
    // Sealed behind the timer's back: the row is still there, but a sealed
    // run takes no wake-up, moved or new.
    kv.map
        .insert(crate::schema::sealed("s").into_bytes(), Vec::new());
    let sealed = fails_cleanly(&mut kv, |kv| timers::reschedule(kv, "s", "e", 500, false));
    assert_eq!(sealed, TimerError::RunSealed);
    let bad = fails_cleanly(&mut kv, |kv| timers::reschedule(kv, "r", "e", -1, false));
    assert!(
        matches!(bad, TimerError::Store(StoreError::Invalid(ref why)) if why.contains("fire-at")),
        "{bad:?}"
    );
}

#[test]
fn timers_of_pages_a_run_by_effect_reading_only_its_own_range() {
    let mut kv = MemKv::new();
    for run in ["a", "b", "c"] {
        for i in 0..300 {
            arm(&mut kv, timer(run, &format!("e{i:03}"), i));
        }
    }
    timers::claim_due(&mut kv, 0, 3, LEASE).expect("claim-due");
    let before = kv.calls;
    let page = timers::timers_of(&mut kv, "b", 2, None).expect("timers-of");
    let read = kv.calls.reads() - before.reads();
    assert_eq!(
        listed(&page.timers),
        [
            row("b", "e000", 0, Some(LEASE.into())),
            row("b", "e001", 1, None)
        ]
    );
    // The page, the one entry that says more follow, and the layout mark.
    assert!(read <= 4, "read {read} entries for a page of 2");
    let mut all = listed(&page.timers);
    let mut after = page.next;
    while let Some(cursor) = after {
        let page = timers::timers_of(&mut kv, "b", 97, Some(&cursor)).expect("next page");
        all.extend(listed(&page.timers));
        after = page.next;
    }
    assert_eq!(all.len(), 300);
    assert!(all.iter().all(|(run, ..)| run == "b"));
    assert!(all.windows(2).all(|w| w[0].1 < w[1].1));
    let empty = timers::timers_of(&mut kv, "none", 10, None).expect("timers-of");
    assert_eq!((empty.timers.len(), empty.next), (0, None));
}

#[test]
fn due_between_lists_a_window_in_claim_order_held_timers_at_their_lease_end() {
    let mut kv = MemKv::new();
    arm(&mut kv, timer("r1", "a", 10));
    arm(&mut kv, timer("r2", "a", 20));
    arm(&mut kv, timer("r1", "b", 20));
    arm(&mut kv, timer("r1", "c", 30));
    arm(&mut kv, timer("r3", "a", 5));
    // r3/a claimed at 5: it comes back at 5 + LEASE.
    timers::claim_due(&mut kv, 5, 1, LEASE).expect("claim-due");
    let page = timers::due_between(&mut kv, 10, 30, 10, None).expect("due-between");
    assert_eq!(
        listed(&page.timers),
        [
            row("r1", "a", 10, None),
            row("r1", "b", 20, None),
            row("r2", "a", 20, None)
        ],
        "from is in the window, to is not; ties by run then effect"
    );
    assert_eq!(page.next, None);
    let late = timers::due_between(&mut kv, 31, 2_000, 10, None).expect("due-between");
    assert_eq!(listed(&late.timers), [row("r3", "a", 5, Some(1_005))]);
    // Paged one at a time, the same list.
    let mut all = Vec::new();
    let mut after = None;
    loop {
        let page = timers::due_between(&mut kv, 0, 2_000, 1, after.as_deref()).expect("page");
        all.extend(listed(&page.timers));
        match page.next {
            Some(n) => after = Some(n),
            None => break,
        }
    }
    assert_eq!(all.len(), 5);
    assert_eq!(all.last(), Some(&row("r3", "a", 5, Some(1_005))));
    // A cursor from before a later window starts at the window.
    let first = timers::due_between(&mut kv, 0, 2_000, 1, None).expect("first");
    let cursor = first.next.expect("more follow");
    let from_25 = timers::due_between(&mut kv, 25, 2_000, 10, Some(&cursor)).expect("window");
    assert_eq!(listed(&from_25.timers)[0], row("r1", "c", 30, None));
}

#[test]
fn a_window_ending_before_it_starts_and_foreign_cursors_are_refused() {
    let mut kv = MemKv::new();
    arm(&mut kv, timer("r", "e", 10));
    let backwards = timers::due_between(&mut kv, 20, 10, 5, None).expect_err("backwards");
    assert!(
        matches!(&backwards, StoreError::Invalid(why) if why.contains("before from")),
        "{backwards:?}"
    );
    let of = timers::timers_of(&mut kv, "r", 1, None).expect("timers-of");
    assert_eq!(of.next, None);
    let page = timers::due_between(&mut kv, 0, 100, 1, None).expect("due-between");
    assert_eq!(page.next, None);
    arm(&mut kv, timer("r", "f", 11));
    let d = timers::due_between(&mut kv, 0, 100, 1, None)
        .expect("due-between")
        .next
        .expect("more");
    let e = timers::timers_of(&mut kv, "r", 1, None)
        .expect("timers-of")
        .next
        .expect("more");
    assert!(matches!(
        timers::timers_of(&mut kv, "r", 1, Some(&d)),
        Err(StoreError::Invalid(_))
    ));
    assert!(matches!(
        timers::due_between(&mut kv, 0, 100, 1, Some(&e)),
        Err(StoreError::Invalid(_))
    ));
    assert!(matches!(
        timers::timers_of(&mut kv, "r", 0, None),
        Err(StoreError::Invalid(_))
    ));
}
