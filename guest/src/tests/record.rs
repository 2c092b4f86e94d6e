//! The change record, natively: what each change appends to the history
//! and the feed, positions and their spelling, reads that keep one task's
//! changes in commit order across writer slots, commits that land in
//! another order than their calls began (simulated over snapshots, as a
//! serializable store runs calls on different keys), and a timer's changes.

use super::record_support::*;
use super::*;
use crate::changes::{self, Cursor};
use crate::model::{Change, FeedRead, Settlement};
use crate::{schema, tasks, timers};

#[test]
fn positions_are_spelled_one_way_and_read_back() {
    let mut c = Cursor::START;
    assert_eq!(c.encode(), "f");
    assert_eq!(Cursor::parse("f"), Ok(Cursor::START));
    c = Cursor::parse("f0.12_5.3_63.18446744073709551615").expect("parses");
    assert_eq!(c.get(0), 12);
    assert_eq!(c.get(5), 3);
    assert_eq!(c.get(63), u64::MAX);
    assert_eq!(c.encode(), "f0.12_5.3_63.18446744073709551615");
    for bad in [
        "",
        "g",
        "f_",
        "f1",
        "f1.",
        "f.1",
        "f1.0",
        "f01.2",
        "f1.02",
        "f1.2_1.3",
        "f2.1_1.1",
        "f64.1",
        "f1.2_",
        "f-1.2",
        "f+1.2",
        "f1.2 ",
        "f1.18446744073709551616",
    ] {
        let e = Cursor::parse(bad).expect_err(bad);
        assert!(invalid_reason(e).contains("after"), "{bad}");
    }
}

#[test]
fn each_change_appends_one_entry_to_the_history_and_the_feed_and_a_refusal_none() {
    let mut kv = MemKv::new();
    kv.now = 100;
    open(&mut kv, task("t1").roles(&["a"]).excluding(&["eve"]));
    kv.now = 200;
    tasks::claim(&mut kv, "t1", "ann", &names(&["a"]), None, None).expect("claim");
    let before = kv.map.clone();
    fails_cleanly(&mut kv, |kv| {
        tasks::claim(kv, "t1", "eve", &names(&["a"]), None, None)
    });
    // A repeated claim by the holder, a repeated open and a settle of a
    // settled task change nothing and record nothing.
    tasks::claim(&mut kv, "t1", "ann", &names(&["a"]), None, None).expect("again");
    tasks::open(&mut kv, &task("t1")).expect("first open wins");
    assert!(
        kv.map == before,
        "a change that changed nothing was recorded"
    );
    kv.now = 300;
    tasks::settle(&mut kv, "t1", Settlement::Completed, None, None, None).expect("settle");
    assert_eq!(
        tasks::settle(&mut kv, "t1", Settlement::Expired, None, None, None),
        Ok(false)
    );
    let h = history(&mut kv, "t1");
    let got: Vec<_> = h
        .iter()
        .map(|e| {
            (
                e.seq,
                e.at,
                e.verb.as_str(),
                e.actor.as_deref(),
                e.before,
                e.after,
            )
        })
        .collect();
    use crate::model::TaskState::*;
    assert_eq!(
        got,
        [
            (1, 100, "open", None, None, Open),
            (2, 200, "claim", Some("ann"), Some(Open), Claimed),
            (3, 300, "settle", None, Some(Claimed), Completed),
        ]
    );
    assert_eq!(h[2].assignee.as_deref(), Some("ann"));
    let feed = read_all(&mut kv, &mut None, 10);
    assert_eq!(
        task_changes(&feed),
        [("t1".into(), 1), ("t1".into(), 2), ("t1".into(), 3)]
    );
    for (e, f) in h.iter().zip(&feed) {
        assert!(matches!(&f.change, Change::Task(c) if c.entry == *e));
    }
    assert_healthy(&mut kv);
}

#[test]
fn a_read_resumes_exactly_at_any_position_it_gave() {
    let mut kv = MemKv::new();
    for i in 0..12 {
        kv.now = i;
        open(&mut kv, task(&format!("t{i:02}")));
    }
    let all = read_all(&mut kv, &mut None, 1000);
    assert_eq!(all.len(), 12);
    for (i, e) in all.iter().enumerate() {
        let rest = read_all(&mut kv, &mut Some(e.position.clone()), 5);
        assert_eq!(rest, all[i + 1..], "after entry {i}");
    }
    let p = page(changes::feed(&mut kv, None, 1000).expect("feed"));
    assert_eq!(p.next, p.head, "caught up");
    let p = page(changes::feed(&mut kv, Some(&p.head), 10).expect("feed"));
    assert!(p.entries.is_empty());
    assert_eq!(p.next, p.head);
}

/// The hazard a single sequence would have: calls that took their places in
/// one order and commit in another. Call A (slot 1) reads first; call B
/// (slot 2) reads and commits; a reader passes B's entries; then A commits.
/// The reader, reading on from where it was, receives A's change once.
#[test]
fn a_call_that_read_first_and_commits_last_still_reaches_a_reader_that_passed_later_commits() {
    let mut kv = MemKv::new();
    open(&mut kv, task("seed"));
    let mut after = None;
    assert_eq!(read_all(&mut kv, &mut after, 10).len(), 1);
    let a = begun(&kv, 1, 10, |kv| tasks::open(kv, &task("a")));
    let b = begun(&kv, 2, 20, |kv| tasks::open(kv, &task("b")));
    kv.apply(b);
    assert_eq!(
        task_changes(&read_all(&mut kv, &mut after, 1)),
        [("b".into(), 1)]
    );
    kv.apply(a);
    assert_eq!(
        task_changes(&read_all(&mut kv, &mut after, 1)),
        [("a".into(), 1)]
    );
    assert!(read_all(&mut kv, &mut after, 10).is_empty());
    assert_healthy(&mut kv);
}

/// One task's changes, recorded in two slots with times that run backwards
/// (hosts whose clocks disagree), come in the order they committed, even
/// one entry at a time: an entry waits for its predecessor.
#[test]
fn one_tasks_changes_come_in_commit_order_across_slots_whatever_their_times() {
    let mut kv = MemKv::new();
    let at = |kv: &mut MemKv, slot: u32, now: i64| {
        kv.slot = slot;
        kv.now = now;
    };
    at(&mut kv, 1, 5_000);
    open(&mut kv, task("x"));
    at(&mut kv, 2, 10);
    open(&mut kv, task("y"));
    at(&mut kv, 1, 5_000);
    for i in 0..4 {
        open(&mut kv, task(&format!("filler{i}")));
    }
    tasks::claim(&mut kv, "x", "ann", &[], None, None).expect("claim");
    at(&mut kv, 2, 20);
    tasks::release(&mut kv, "x", "ann", None).expect("release");
    at(&mut kv, 1, 5_000);
    tasks::claim(&mut kv, "x", "bob", &[], None, None).expect("claim");
    at(&mut kv, 3, 1);
    tasks::escalate(&mut kv, "x", None).expect("escalate");
    for limit in [1, 2, 3, 1000] {
        let got: Vec<_> = task_changes(&read_all(&mut kv, &mut None, limit))
            .into_iter()
            .filter(|(id, _)| id == "x")
            .collect();
        assert_eq!(
            got,
            (1..=5).map(|s| ("x".to_owned(), s)).collect::<Vec<_>>(),
            "limit {limit}"
        );
    }
    // What does not wait on anything comes by its time: y (at 10) first.
    let first = page(changes::feed(&mut kv, None, 1).expect("feed"));
    assert_eq!(task_changes(&first.entries), [("y".into(), 1)]);
    assert_healthy(&mut kv);
}

#[test]
fn a_position_trimmed_past_or_not_of_this_feed_is_gone_with_the_feeds_end() {
    let mut kv = MemKv {
        sole_writer: true,
        ..MemKv::new()
    };
    for i in 0..6 {
        kv.now = i;
        open(&mut kv, task(&format!("t{i}")));
    }
    let p = page(changes::feed(&mut kv, None, 2).expect("feed"));
    let early = p.next.clone();
    let head = p.head.clone();
    for bad in ["f0.7", "f1.1", "f63.1"] {
        assert_eq!(
            changes::feed(&mut kv, Some(bad), 10),
            Ok(FeedRead::Gone(head.clone())),
            "{bad}"
        );
    }
    let out = changes::trim(&mut kv, Some(4), None, 1000).expect("trim");
    assert_eq!((out.feed_removed, out.more), (4, false));
    assert_eq!(
        changes::feed(&mut kv, Some(&early), 10),
        Ok(FeedRead::Gone(head.clone()))
    );
    // Without a position, a read starts at the oldest entry kept.
    let p = page(changes::feed(&mut kv, None, 10).expect("feed"));
    assert_eq!(
        task_changes(&p.entries),
        [("t4".into(), 1), ("t5".into(), 1)]
    );
    // A fresh tenant's feed is empty, and only its start is a position.
    let mut fresh = MemKv::new();
    let p = page(changes::feed(&mut fresh, None, 10).expect("feed"));
    assert_eq!(
        (p.entries.len(), p.next.as_str(), p.head.as_str()),
        (0, "f", "f")
    );
    assert_eq!(
        changes::feed(&mut fresh, Some("f0.1"), 10),
        Ok(FeedRead::Gone("f".into()))
    );
    assert_healthy(&mut kv);
}

#[test]
fn a_timers_changes_follow_one_another_and_its_log_outlives_it_until_trimmed() {
    let mut kv = MemKv::new();
    arm(&mut kv, timer("r", "e", 5));
    kv.slot = 3;
    timers::claim_due(&mut kv, 10, 10, 100).expect("sweep");
    kv.slot = 5;
    assert_eq!(timers::disarm(&mut kv, "r", "e"), Ok(true));
    kv.slot = 1;
    arm(&mut kv, timer("r", "e", 50));
    let feed = read_all(&mut kv, &mut None, 1);
    let whats: Vec<_> = feed
        .iter()
        .map(|e| match &e.change {
            Change::Timer(t) => t.what,
            Change::Task(_) => panic!("a task"),
        })
        .collect();
    use crate::model::TimerEvent::*;
    assert_eq!(whats, [Armed, Claimed, Retired, Armed]);
    assert_healthy(&mut kv);
    changes::trim(&mut kv, None, Some(0), 1000).expect("trim");
    // The re-armed timer keeps its log; nothing else of the record is left.
    assert!(kv.map.contains_key(schema::timer_log("r", "e").as_bytes()));
    timers::disarm(&mut kv, "r", "e").expect("disarm");
    changes::trim(&mut kv, None, Some(0), 1000).expect("trim");
    assert!(!kv.map.contains_key(schema::timer_log("r", "e").as_bytes()));
    assert_healthy(&mut kv);
}
