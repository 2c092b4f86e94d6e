//! The change record, natively: what each change appends to the history
//! and the feed, positions and their spelling, reads that keep one task's
//! changes in commit order across writer slots, commits that land in
//! another order than their calls began (simulated over snapshots, as a
//! serializable store runs calls on different keys), trimming and `gone`,
//! keyspaces of the layout before the record, and the check's findings.

use super::*;
use crate::changes::{self, Cursor};
use crate::kv::{self, Write};
use crate::model::{Change, FeedEntry, FeedPage, FeedRead, HistoryEntry, Lease, Settlement};
use crate::{schema, tasks, timers};

fn page(read: FeedRead) -> FeedPage {
    match read {
        FeedRead::Page(p) => p,
        FeedRead::Gone(head) => panic!("gone, head {head}"),
    }
}

/// Reads the whole feed after `after`, `limit` entries at a time.
fn read_all(kv: &mut MemKv, after: &mut Option<String>, limit: u32) -> Vec<FeedEntry> {
    let mut out = Vec::new();
    loop {
        let p = page(changes::feed(kv, after.as_deref(), limit).expect("feed"));
        assert!(p.entries.len() <= limit as usize);
        let done = p.entries.is_empty();
        out.extend(p.entries);
        *after = Some(p.next);
        if done {
            return out;
        }
    }
}

/// (task, seq) of each task change.
fn task_changes(entries: &[FeedEntry]) -> Vec<(String, u64)> {
    entries
        .iter()
        .filter_map(|e| match &e.change {
            Change::Task(c) => Some((c.id.clone(), c.entry.seq)),
            Change::Timer(_) => None,
        })
        .collect()
}

fn history(kv: &mut MemKv, id: &str) -> Vec<HistoryEntry> {
    changes::history(kv, id, None, 1000).expect("history")
}

/// A call run over a snapshot taken now, at writer slot `slot` and call
/// time `at`, whose batch the caller applies later: two such calls on
/// different keys are what a serializable store commits in either order.
fn begun<T: fmt::Debug, E: fmt::Debug>(
    kv: &MemKv,
    slot: u32,
    at: i64,
    f: impl FnOnce(&mut kv::Buffered<&mut MemKv>) -> Result<T, E>,
) -> Vec<Write> {
    let mut snapshot = kv.clone();
    snapshot.slot = slot;
    snapshot.now = at;
    let (answer, batch) = kv::buffered(&mut snapshot, f);
    answer.expect("the call succeeds");
    batch
}

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
    tasks::claim(&mut kv, "t1", "ann", &names(&["a"]), None).expect("claim");
    let before = kv.map.clone();
    fails_cleanly(&mut kv, |kv| {
        tasks::claim(kv, "t1", "eve", &names(&["a"]), None)
    });
    // A repeated claim by the holder, a repeated open and a settle of a
    // settled task change nothing and record nothing.
    tasks::claim(&mut kv, "t1", "ann", &names(&["a"]), None).expect("again");
    tasks::open(&mut kv, &task("t1")).expect("first open wins");
    assert!(
        kv.map == before,
        "a change that changed nothing was recorded"
    );
    kv.now = 300;
    tasks::settle(&mut kv, "t1", Settlement::Completed, None).expect("settle");
    assert_eq!(
        tasks::settle(&mut kv, "t1", Settlement::Expired, None),
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
    tasks::claim(&mut kv, "x", "ann", &[], None).expect("claim");
    at(&mut kv, 2, 20);
    tasks::release(&mut kv, "x", "ann").expect("release");
    at(&mut kv, 1, 5_000);
    tasks::claim(&mut kv, "x", "bob", &[], None).expect("claim");
    at(&mut kv, 3, 1);
    tasks::escalate(&mut kv, "x").expect("escalate");
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
fn trimming_keeps_the_newest_and_each_tasks_last_history_entry() {
    let mut kv = MemKv::new();
    for (i, slot) in [0u32, 1, 2].iter().enumerate() {
        kv.slot = *slot;
        kv.now = i as i64 * 10;
        open(&mut kv, task(&format!("t{i}")));
    }
    for round in 0..3 {
        for i in 0..3 {
            kv.slot = (i + round) % 3;
            kv.now = 100 + round as i64 * 10 + i as i64;
            let id = format!("t{i}");
            tasks::claim(&mut kv, &id, "ann", &[], None).expect("claim");
            tasks::release(&mut kv, &id, "ann").expect("release");
        }
    }
    // 3 opens and 18 changes; keep the newest 5, 4 per call.
    let mut removed = 0;
    loop {
        let out = changes::trim(&mut kv, None, Some(5), 4).expect("trim");
        assert!(out.feed_removed <= 4);
        removed += out.feed_removed;
        assert_healthy(&mut kv);
        if !out.more {
            break;
        }
    }
    assert_eq!(removed, 16);
    let kept = read_all(&mut kv, &mut None, 100);
    assert_eq!(kept.len(), 5);
    for i in 0..3 {
        let id = format!("t{i}");
        let h = history(&mut kv, &id);
        let last = h.last().expect("the last entry stays");
        assert_eq!(last.seq, 7, "{id}");
        // Everything up to the newest trimmed change of the task went.
        assert!(h.iter().all(|e| kept.iter().any(|k| matches!(
            &k.change, Change::Task(c) if c.id == id && c.entry.seq == e.seq
        )) || e.seq == 7));
    }
    // Trimming by time: what was recorded before 125.
    let out = changes::trim(&mut kv, Some(125), None, 1000).expect("trim");
    assert!(out.feed_removed > 0);
    let kept = read_all(&mut kv, &mut None, 100);
    assert!(kept.iter().all(|e| match &e.change {
        Change::Task(c) => c.entry.at >= 125,
        Change::Timer(_) => true,
    }));
    assert_healthy(&mut kv);
}

#[test]
fn trim_needs_a_rule_and_checks_its_inputs_writing_nothing() {
    let mut kv = MemKv::new();
    open(&mut kv, task("t"));
    let e = fails_cleanly(&mut kv, |kv| changes::trim(kv, None, None, 10));
    assert!(invalid_reason(e).contains("before and keep"));
    let e = fails_cleanly(&mut kv, |kv| changes::trim(kv, Some(-1), None, 10));
    assert!(invalid_reason(e).contains("before"));
    let e = fails_cleanly(&mut kv, |kv| changes::trim(kv, None, Some(0), 0));
    assert!(invalid_reason(e).contains("limit"));
    let e = fails_cleanly(&mut kv, |kv| changes::history(kv, "", None, 10));
    assert!(invalid_reason(e).contains("id"));
    assert_eq!(
        changes::history(&mut kv, "nope", None, 10),
        Err(StoreError::NotFound("nope".into()))
    );
    // A fresh keyspace is not laid out by a trim.
    let mut fresh = MemKv::new();
    writes_nothing(&mut fresh, |kv| changes::trim(kv, None, Some(0), 10));
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

/// A keyspace laid out before the record (layout 5): its tasks have no
/// history, the check does not ask for one, and each answers a history that
/// says so, with an entry numbered 0 (`before-history`): what it holds now,
/// at its creation, until its next change starts the history at seq 1; then
/// what it held at that moment. That change moves the mark to this
/// component's version, keeping the shape; the reads before it do not.
#[test]
fn a_keyspace_of_the_layout_before_the_record_starts_each_history_at_its_next_change() {
    let mut kv = MemKv::new();
    kv.map
        .insert(schema::layout().into_bytes(), b"5/64".to_vec());
    open(&mut kv, task("old").roles(&["a"]).created(700));
    // What an earlier component left: the row and its indexes, no record,
    // and its own mark.
    let record: Vec<Vec<u8>> = kv
        .map
        .keys()
        .filter(|k| {
            [
                schema::task_logs(),
                schema::histories(),
                schema::feed(),
                schema::feed_heads(),
            ]
            .iter()
            .any(|p| k.starts_with(p.as_bytes()))
        })
        .cloned()
        .collect();
    for k in record {
        kv.map.remove(&k);
    }
    kv.map
        .insert(schema::layout().into_bytes(), b"5/64".to_vec());
    assert_healthy(&mut kv);
    let h = history(&mut kv, "old");
    assert_eq!(h.len(), 1, "{h:?}");
    assert_eq!(
        (
            h[0].seq,
            h[0].at,
            h[0].verb.as_str(),
            h[0].before,
            h[0].after
        ),
        (
            0,
            700,
            "before-history",
            None,
            crate::model::TaskState::Open
        )
    );
    assert_eq!(h[0].candidate_roles, names(&["a"]));
    // Paging on from entry 0 gives what follows it: nothing yet.
    assert!(
        changes::history(&mut kv, "old", Some(0), 10)
            .expect("history")
            .is_empty()
    );
    assert_eq!(
        kv.map.get(schema::layout().as_bytes()).map(Vec::as_slice),
        Some(&b"5/64"[..]),
        "a read moved the mark"
    );
    kv.now = 900;
    let lease = Lease {
        now: 900,
        lease_ms: 50,
    };
    tasks::claim(&mut kv, "old", "ann", &names(&["a"]), Some(&lease)).expect("claim");
    kv.now = 960;
    tasks::release(&mut kv, "old", "ann").expect("release");
    let h = history(&mut kv, "old");
    assert_eq!(h.len(), 3, "{h:?}");
    assert_eq!(
        (
            h[0].seq,
            h[0].at,
            h[0].verb.as_str(),
            h[0].before,
            h[0].after
        ),
        (
            0,
            900,
            "before-history",
            None,
            crate::model::TaskState::Open
        )
    );
    assert_eq!((h[0].assignee.as_deref(), h[0].lease_until), (None, None));
    assert_eq!(
        (h[1].seq, h[1].before, h[1].after),
        (
            1,
            Some(crate::model::TaskState::Open),
            crate::model::TaskState::Claimed
        )
    );
    assert_eq!(
        (h[1].assignee.as_deref(), h[1].lease_until),
        (Some("ann"), Some(950))
    );
    assert_eq!(h[2].seq, 2);
    assert_eq!(
        kv.map.get(schema::layout().as_bytes()).map(Vec::as_slice),
        Some(
            schema::layout_mark_from(
                schema::Shards::record_apart(64).expect("64 shards"),
                Some(5)
            )
            .as_bytes()
        )
    );
    assert_healthy(&mut kv);
    // A task whose first change an earlier build recorded, which kept no
    // more than the state before it: entry 1 says that state.
    kv.map.remove(schema::history_start("old").as_bytes());
    let h = history(&mut kv, "old");
    assert_eq!(
        (h[0].seq, h[0].at, h[0].before, h[0].after),
        (0, 900, None, crate::model::TaskState::Open)
    );
    // A task opened with its history has no entry 0.
    open(&mut kv, task("new"));
    let h = history(&mut kv, "new");
    assert_eq!((h.len(), h[0].seq, h[0].verb.as_str()), (1, 1, "open"));
    assert_healthy(&mut kv);
    // In layouts 6 and 7 the same task without a history is damage.
    for (mark, sh) in [
        (
            &b"6/64"[..],
            schema::Shards::record_apart(64).expect("64 shards"),
        ),
        (&b"7/64"[..], schema::Shards::SHARED),
        (
            &b"8/64/from-6"[..],
            schema::Shards::record_apart(64).expect("64 shards"),
        ),
    ] {
        let mut kv = MemKv::new();
        kv.map.insert(schema::layout().into_bytes(), mark.to_vec());
        open(&mut kv, task("new"));
        assert_healthy(&mut kv);
        kv.map.remove(schema::task_log(sh, "new").as_bytes());
        let found = check::check(&mut kv).expect("check");
        assert!(
            found
                .iter()
                .any(|d| d.structure == "history" && d.subject == "new"),
            "{found:?}"
        );
    }
}

/// Each kind of damage to the record is found and named.
#[test]
fn the_check_finds_damage_to_the_record() {
    let base = || {
        let mut kv = MemKv::new();
        open(&mut kv, task("t").roles(&["a"]));
        tasks::claim(
            &mut kv,
            "t",
            "ann",
            &names(&["a"]),
            Some(&Lease {
                now: 1,
                lease_ms: 9,
            }),
        )
        .expect("claim");
        arm(&mut kv, timer("r", "e", 5));
        assert_healthy(&mut kv);
        kv
    };
    let structures = |kv: &mut MemKv| -> Vec<String> {
        let direct = check::check(kv).expect("check");
        // Read ahead over a call's buffer, the check finds the same.
        let ahead = kv.call(|kv| check::check(kv)).expect("check");
        assert_eq!(ahead, direct);
        let mut s: Vec<String> = direct.into_iter().map(|d| d.structure).collect();
        s.sort();
        s.dedup();
        s
    };
    let sh = schema::Shards::SHARED;
    let slot = sh.writer(0);
    // A feed entry gone from the middle of its slot.
    let mut kv = base();
    kv.map.remove(schema::feed_entry(slot, 2).as_bytes());
    assert!(structures(&mut kv).contains(&"feed".to_owned()));
    // History is kept in the feed: no key of its own per change.
    let mut kv = base();
    assert!(
        !kv.map
            .keys()
            .any(|k| k.starts_with(schema::history(sh, "t").as_bytes()))
    );
    // A task's change in the feed overwritten by another's: following the
    // task back from its log meets it.
    let timer_change = kv.map[schema::feed_entry(slot, 3).as_bytes()].clone();
    kv.map
        .insert(schema::feed_entry(slot, 1).into_bytes(), timer_change);
    let found = structures(&mut kv);
    assert!(found.contains(&"history".to_owned()), "{found:?}");
    // The last entry, in the feed, and the row disagree.
    let mut kv = base();
    let key = schema::feed_entry(slot, 2).into_bytes();
    let mut row = crate::store::decode_feed_row(&kv.map[&key]).expect("decodes");
    if let Change::Task(t) = &mut row.change {
        t.entry.assignee = Some("mallory".into());
    }
    kv.map
        .insert(key, crate::store::encode_row(&row).expect("encodes"));
    assert_eq!(structures(&mut kv), ["history"]);
    // A change of the task recorded twice: the copy is on no history.
    let mut kv = base();
    let copy = kv.map[schema::feed_entry(slot, 1).as_bytes()].clone();
    kv.map
        .insert(schema::feed_entry(slot, 4).into_bytes(), copy);
    kv.map.insert(
        schema::feed_head(sh, slot).into_bytes(),
        4u64.to_be_bytes().to_vec(),
    );
    let found = check::check(&mut kv).expect("check");
    assert!(
        found
            .iter()
            .any(|d| d.structure == "feed" && d.subject == "tasks"),
        "{found:?}"
    );
    // A last entry kept under its own key once trimmed from the feed, then
    // lost.
    let mut kv = base();
    changes::trim(&mut kv, None, Some(0), 1000).expect("trim");
    assert_healthy(&mut kv);
    assert!(
        kv.map
            .contains_key(schema::history_entry(sh, "t", 2).as_bytes())
    );
    kv.map.remove(schema::history_entry(sh, "t", 2).as_bytes());
    assert_eq!(structures(&mut kv), ["history"]);
    // A log that does not decode, a head behind its entries, a timer log
    // that points at another timer's entry.
    let mut kv = base();
    kv.map
        .insert(schema::task_log(sh, "t").into_bytes(), b"\xff".to_vec());
    assert!(structures(&mut kv).contains(&"task-log".to_owned()));
    let mut kv = base();
    kv.map.insert(
        schema::feed_head(sh, slot).into_bytes(),
        1u64.to_be_bytes().to_vec(),
    );
    assert!(structures(&mut kv).contains(&"feed".to_owned()));
    // A head of a slot the keyspace does not have, beside the feed's
    // entries (each kept slot's head is read with the heads; this one only
    // the walk of the entries meets).
    let mut kv = base();
    kv.map.insert(
        schema::feed_head(sh, sh.count()).into_bytes(),
        1u64.to_be_bytes().to_vec(),
    );
    assert_eq!(structures(&mut kv), ["feed"]);
    // A key of no known shape beside a task's row, log and history.
    let mut kv = base();
    kv.map
        .insert(schema::task("t").str("stray").into_bytes(), Vec::new());
    assert_eq!(structures(&mut kv), ["task"]);
    let mut kv = base();
    kv.map.insert(
        schema::task("t").str("history").int(0).into_bytes(),
        Vec::new(),
    );
    assert_eq!(structures(&mut kv), ["task"]);
    let mut kv = base();
    let elsewhere =
        crate::store::encode_row(&crate::store::Position { slot, seq: 1 }).expect("encodes");
    kv.map
        .insert(schema::timer_log("r", "e").into_bytes(), elsewhere);
    assert!(structures(&mut kv).contains(&"timer-log".to_owned()));
}

/// A page of entries too large to read whole stops early, after at least
/// one entry, and reading on gives the rest.
#[test]
fn a_page_of_large_entries_stops_short_and_reads_on() {
    let mut kv = MemKv::new();
    let roles: Vec<String> = (0..256).map(|i| format!("{i:0>250}")).collect();
    for i in 0..200 {
        let mut t = task(&format!("t{i:03}"));
        t.candidate_roles = roles.clone();
        open(&mut kv, t);
    }
    let p = page(changes::feed(&mut kv, None, 1000).expect("feed"));
    assert!(
        !p.entries.is_empty() && p.entries.len() < 200,
        "{}",
        p.entries.len()
    );
    let mut after = Some(p.next);
    let rest = read_all(&mut kv, &mut after, 1000);
    assert_eq!(p.entries.len() + rest.len(), 200);
    let h = changes::history(&mut kv, "t000", None, 1000).expect("history");
    assert_eq!(h.len(), 1);
}

/// A trim of entries too large to read in one call stops at its read
/// budget, says there is more, and the next calls finish the work.
#[test]
fn a_trim_of_large_entries_stops_at_its_budget_and_says_there_is_more() {
    let mut kv = MemKv::new();
    let roles: Vec<String> = (0..256).map(|i| format!("{i:0>250}")).collect();
    for i in 0..200 {
        let mut t = task(&format!("t{i:03}"));
        t.candidate_roles = roles.clone();
        open(&mut kv, t);
    }
    let first = changes::trim(&mut kv, None, Some(0), 1000).expect("trim");
    assert!(
        first.more && first.feed_removed > 0 && first.feed_removed < 200,
        "{first:?}"
    );
    let mut removed = first.feed_removed;
    loop {
        let out = changes::trim(&mut kv, None, Some(0), 1000).expect("trim");
        removed += out.feed_removed;
        if !out.more {
            break;
        }
    }
    assert_eq!(removed, 200);
    assert!(read_all(&mut kv, &mut None, 10).is_empty());
    assert_healthy(&mut kv);
}

/// A layout-6 keyspace keeps its record apart, in the keys the component
/// that laid it out spells, so hosts of both components can share it; a
/// fresh one (layout 7) keeps it beside its rows. The same calls read back
/// the same history and feed in both, trim the same, and check clean.
#[test]
fn a_layout_6_keyspace_keeps_its_record_apart_and_answers_as_a_fresh_one() {
    let apart = schema::Shards::record_apart(64).expect("64 shards");
    let beside = schema::Shards::SHARED;
    let run = |mark: Option<&[u8]>| {
        let mut kv = MemKv::new();
        if let Some(m) = mark {
            kv.map.insert(schema::layout().into_bytes(), m.to_vec());
        }
        for i in 0..3u32 {
            kv.slot = i;
            kv.now = i64::from(i);
            open(&mut kv, task(&format!("t{i}")).roles(&["a"]));
        }
        for round in 0..3u32 {
            for i in 0..3u32 {
                kv.slot = (i + round) % 3;
                kv.now = 100 + i64::from(round * 10 + i);
                let id = format!("t{i}");
                tasks::claim(&mut kv, &id, "ann", &names(&["a"]), None).expect("claim");
                tasks::release(&mut kv, &id, "ann").expect("release");
            }
        }
        arm(&mut kv, timer("r", "e", 5));
        assert_healthy(&mut kv);
        let feed = read_all(&mut kv, &mut None, 4);
        let histories: Vec<Vec<HistoryEntry>> =
            (0..3).map(|i| history(&mut kv, &format!("t{i}"))).collect();
        let trimmed = changes::trim(&mut kv, None, Some(5), 1000).expect("trim");
        assert_healthy(&mut kv);
        let after_trim = read_all(&mut kv, &mut None, 100);
        let last: Vec<Vec<HistoryEntry>> =
            (0..3).map(|i| history(&mut kv, &format!("t{i}"))).collect();
        (kv, (feed, histories, trimmed, after_trim, last))
    };
    let (old, old_answers) = run(Some(b"6/64"));
    let (fresh, fresh_answers) = run(None);
    assert_eq!(old_answers, fresh_answers);
    assert_eq!(old_answers.0.len(), 22);
    assert_eq!(
        old.map.get(schema::layout().as_bytes()).map(Vec::as_slice),
        Some(schema::layout_mark_from(apart, Some(6)).as_bytes()),
        "the first change moves the mark, keeping the spelling"
    );
    assert_eq!(
        fresh
            .map
            .get(schema::layout().as_bytes())
            .map(Vec::as_slice),
        Some(schema::layout_mark(beside).as_bytes())
    );
    let after_trim_holds = |kv: &MemKv, id: &str, seq: u64| {
        let mut kv = kv.clone();
        read_all(&mut kv, &mut None, 100)
            .iter()
            .any(|e| matches!(&e.change, Change::Task(c) if c.id == id && c.entry.seq == seq))
    };
    for (kv, mine, other) in [(&old, apart, beside), (&fresh, beside, apart)] {
        for (sh, held) in [(mine, true), (other, false)] {
            assert_eq!(
                kv.map.contains_key(schema::task_log(sh, "t0").as_bytes()),
                held
            );
            // t0's last change left the feed, so its entry is kept under
            // its own key, spelt as the keyspace spells them.
            assert_eq!(
                kv.map
                    .contains_key(schema::history_entry(sh, "t0", 7).as_bytes()),
                held && !after_trim_holds(kv, "t0", 7)
            );
            assert_eq!(
                kv.map
                    .contains_key(schema::feed_head(sh, sh.writer(0)).as_bytes()),
                held
            );
        }
    }
    // Beside, a task's record sits between its row and the next task's.
    let keys: Vec<&Vec<u8>> = fresh
        .map
        .keys()
        .filter(|k| k.starts_with(schema::tasks().as_bytes()))
        .collect();
    let row = |id: &str| {
        keys.iter()
            .position(|k| **k == schema::task(id).into_bytes())
            .expect("the row")
    };
    let (t0, t1) = (row("t0"), row("t1"));
    assert!(keys[t0..t1].iter().skip(1).all(|k| {
        k.starts_with(schema::history(beside, "t0").as_bytes())
            || **k == schema::task_log(beside, "t0").into_bytes()
    }));
    assert_eq!(t1 - t0, 3, "the row, its last history entry and its log");
}

/// History is kept in the feed: a change writes no key beside its task's
/// row, and the task's history, paged from anywhere, is its changes in the
/// feed, followed back from its log; `entry-place` names where each sits.
#[test]
fn a_tasks_history_is_its_changes_in_the_feed_paged_from_anywhere() {
    let mut kv = MemKv::new();
    open(&mut kv, task("t").roles(&["a"]));
    open(&mut kv, task("u").roles(&["a"]));
    for i in 0..60u32 {
        kv.slot = i % 5;
        kv.now = 10 + i64::from(i);
        let id = if i % 3 == 0 { "u" } else { "t" };
        tasks::claim(&mut kv, id, "ann", &names(&["a"]), None).expect("claim");
        tasks::release(&mut kv, id, "ann").expect("release");
    }
    // No history key of its own per change: only every 64th entry is kept
    // under one too, as a place to start reading from.
    let sh = schema::Shards::SHARED;
    let keyed = |kv: &MemKv, id: &str| -> Vec<Vec<u8>> {
        kv.map
            .keys()
            .filter(|k| k.starts_with(schema::history(sh, id).as_bytes()))
            .cloned()
            .collect()
    };
    assert_eq!(
        keyed(&kv, "t"),
        [schema::history_entry(sh, "t", 64).into_bytes()]
    );
    assert!(keyed(&kv, "u").is_empty(), "u has 41 entries");
    let whole = history(&mut kv, "t");
    assert_eq!(whole.len(), 81);
    assert!(whole.iter().enumerate().all(|(i, e)| e.seq == i as u64 + 1));
    // The feed holds each of those changes, and entry-place finds it there.
    let feed = read_all(&mut kv, &mut None, 1000);
    for e in &whole {
        let at = feed
            .iter()
            .find(|f| matches!(&f.change, Change::Task(c) if c.id == "t" && c.entry == *e))
            .expect("in the feed");
        let place = changes::entry_place(&mut kv, "t", e.seq)
            .expect("entry-place")
            .expect("kept");
        let c = Cursor::parse(&at.position).expect("a position");
        assert_eq!(c.get(place.slot as u8), place.seq);
    }
    assert_eq!(changes::entry_place(&mut kv, "t", 82), Ok(None));
    assert_eq!(changes::entry_place(&mut kv, "t", 0), Ok(None));
    // Pages of every size, from every place, give the same entries.
    for limit in [1u32, 7, 80, 81, 1000] {
        for after in [
            None,
            Some(0),
            Some(1),
            Some(40),
            Some(80),
            Some(81),
            Some(u64::MAX),
        ] {
            let got = changes::history(&mut kv, "t", after, limit).expect("history");
            let from = after.map_or(0, |a| a.min(81) as usize);
            let want: Vec<_> = whole
                .iter()
                .skip(from)
                .take(limit as usize)
                .cloned()
                .collect();
            assert_eq!(got, want, "after {after:?}, limit {limit}");
        }
    }
    // Reading writes nothing.
    writes_nothing(&mut kv, |kv| changes::history(kv, "t", Some(3), 5));
    assert_healthy(&mut kv);
}

/// A page of a long history costs its length and a few steps more,
/// wherever it lies: the walk back starts at the nearest entry kept under
/// its own key past the page, not at the task's last change. Trimming takes
/// those keys with the entries they hold.
#[test]
fn a_page_of_a_long_history_costs_its_length_wherever_it_lies() {
    let mut kv = MemKv::new();
    open(&mut kv, task("t").roles(&["a"]));
    for i in 0..250u32 {
        kv.slot = i % 3;
        kv.now = 10 + i64::from(i);
        tasks::claim(&mut kv, "t", "ann", &names(&["a"]), None).expect("claim");
        tasks::release(&mut kv, "t", "ann").expect("release");
    }
    let whole = history(&mut kv, "t");
    assert_eq!(whole.len(), 501);
    for after in [None, Some(0), Some(63), Some(64), Some(250), Some(495)] {
        kv.calls = Default::default();
        let page = changes::history(&mut kv, "t", after, 10).expect("history");
        let from = after.map_or(0, |a| a as usize);
        assert_eq!(
            page[..],
            whole[from..(from + 10).min(501)],
            "after {after:?}"
        );
        let gets = kv.calls.gets;
        assert!(gets <= 10 + 64 + 8, "after {after:?}: {gets} reads");
        let seq = from as u64 + 1;
        kv.calls = Default::default();
        let place = changes::entry_place(&mut kv, "t", seq).expect("entry-place");
        assert!(place.is_some());
        assert!(kv.calls.gets <= 64 + 8, "entry-place {seq}: {:?}", kv.calls);
    }
    assert_healthy(&mut kv);
    while changes::trim(&mut kv, None, Some(150), 1000)
        .expect("trim")
        .more
    {}
    assert_healthy(&mut kv);
    let kept = history(&mut kv, "t");
    assert_eq!(kept[..], whole[501 - kept.len()..]);
    assert!(kept.len() >= 150 && kept.len() < 501, "{} kept", kept.len());
    for (k, _) in kv
        .map
        .range(schema::history(schema::Shards::SHARED, "t").into_bytes()..)
    {
        if !k.starts_with(schema::history(schema::Shards::SHARED, "t").as_bytes()) {
            break;
        }
        let row = crate::store::decode_history(&kv.map[k]).expect("decodes");
        assert!(
            row.entry.seq >= kept[0].seq,
            "{} kept past the trim",
            row.entry.seq
        );
    }
}

/// When trimming takes a task's last change out of the feed, its entry is
/// kept under its own key, so the history still ends where the row stands;
/// the task's next changes follow it, and the next trim takes it.
#[test]
fn a_last_change_trimmed_from_the_feed_is_kept_under_its_own_key() {
    let mut kv = MemKv::new();
    let sh = schema::Shards::SHARED;
    open(&mut kv, task("t").roles(&["a"]));
    tasks::claim(&mut kv, "t", "ann", &names(&["a"]), None).expect("claim");
    changes::trim(&mut kv, None, Some(0), 1000).expect("trim");
    assert!(read_all(&mut kv, &mut None, 10).is_empty());
    let h = history(&mut kv, "t");
    assert_eq!(
        h.iter()
            .map(|e| (e.seq, e.verb.as_str()))
            .collect::<Vec<_>>(),
        [(2, "claim")]
    );
    assert!(
        kv.map
            .contains_key(schema::history_entry(sh, "t", 2).as_bytes())
    );
    assert_eq!(changes::entry_place(&mut kv, "t", 1), Ok(None));
    assert!(
        changes::entry_place(&mut kv, "t", 2)
            .expect("entry-place")
            .is_some()
    );
    assert_healthy(&mut kv);
    kv.slot = 7;
    tasks::release(&mut kv, "t", "ann").expect("release");
    tasks::claim(&mut kv, "t", "bob", &names(&["a"]), None).expect("claim");
    let h = history(&mut kv, "t");
    assert_eq!(h.iter().map(|e| e.seq).collect::<Vec<_>>(), [2, 3, 4]);
    assert_eq!(
        changes::history(&mut kv, "t", Some(2), 1).expect("history")[0].seq,
        3
    );
    assert_healthy(&mut kv);
    changes::trim(&mut kv, None, Some(1), 1000).expect("trim");
    let h = history(&mut kv, "t");
    assert_eq!(h.iter().map(|e| e.seq).collect::<Vec<_>>(), [4]);
    assert!(
        !kv.map
            .contains_key(schema::history_entry(sh, "t", 2).as_bytes())
    );
    assert_healthy(&mut kv);
    changes::trim(&mut kv, None, Some(0), 1000).expect("trim");
    assert_eq!(
        history(&mut kv, "t")
            .iter()
            .map(|e| e.seq)
            .collect::<Vec<_>>(),
        [4]
    );
    assert!(
        kv.map
            .contains_key(schema::history_entry(sh, "t", 4).as_bytes())
    );
    assert_healthy(&mut kv);
}

/// A task whose last change was trimmed keeps that entry under its own
/// key, below every later change. A page that starts there must not take
/// that key, whose change the feed no longer holds, for the place to walk
/// back from: it would walk every later change (one round trip each on
/// PostgreSQL). Every page, and `entry-place`, costs its length and at most
/// a checkpoint interval of steps more, however many changes follow.
#[test]
fn a_history_page_after_a_trimmed_last_change_costs_its_length_not_the_later_changes() {
    let mut kv = MemKv::new();
    open(&mut kv, task("t").roles(&["a"]));
    tasks::claim(&mut kv, "t", "ann", &names(&["a"]), None).expect("claim");
    changes::trim(&mut kv, None, Some(0), 1000).expect("trim");
    // 50,000 changes after the trimmed one.
    for i in 0..25_000u32 {
        kv.now = 10 + i64::from(i);
        tasks::release(&mut kv, "t", "ann").expect("release");
        tasks::claim(&mut kv, "t", "ann", &names(&["a"]), None).expect("claim");
    }
    let last = 2 + 50_000u64;
    let bound = |room: u64| room + crate::store::HISTORY_CHECKPOINT + 8;
    for (after, limit) in [
        (None, 1),
        (Some(1), 1),
        (None, 2),
        (Some(2), 1),
        (None, 20),
        (Some(30_000), 5),
        (Some(last - 1), 1),
    ] {
        kv.calls = Default::default();
        let page = changes::history(&mut kv, "t", after, limit).expect("history");
        let reads = kv.calls.gets + kv.calls.scans;
        let from = after.map_or(2, |a| (a + 1).max(2));
        let want: Vec<u64> = (from..from + u64::from(limit))
            .take_while(|&s| s <= last)
            .collect();
        assert_eq!(
            page.iter().map(|e| e.seq).collect::<Vec<_>>(),
            want,
            "after {after:?}, limit {limit}"
        );
        assert!(
            reads <= bound(u64::from(limit)),
            "after {after:?}, limit {limit}: {reads} reads ({:?})",
            kv.calls
        );
    }
    // Entry 1 went with the trim; entry 2, the last change then, is kept
    // under its key (as `a_last_change_trimmed_from_the_feed_is_kept_under_its_own_key`
    // shows), so it still has a place.
    for seq in [1, 2, 3, 64, 65, 30_000, last] {
        kv.calls = Default::default();
        let place = changes::entry_place(&mut kv, "t", seq).expect("entry-place");
        assert_eq!(place.is_some(), seq >= 2, "entry {seq}");
        let reads = kv.calls.gets + kv.calls.scans;
        assert!(reads <= bound(1), "entry-place {seq}: {:?}", kv.calls);
    }
    assert_healthy(&mut kv);
}

/// A keyspace of layout 8 keeps a history key for every change. Its first
/// change by this component moves it to layout 9, after which its tasks'
/// histories are their keyed entries followed by their changes in the
/// feed: the same answers, read, paged and trimmed, as before the move.
#[test]
fn a_layout_8_keyspace_keeps_its_keyed_history_and_goes_on_in_the_feed() {
    let sh = schema::Shards::SHARED;
    let mut kv = MemKv::new();
    for i in 0..3 {
        open(&mut kv, task(&format!("t{i}")).roles(&["a"]));
    }
    for i in 0..3 {
        let id = format!("t{i}");
        tasks::claim(&mut kv, &id, "ann", &names(&["a"]), None).expect("claim");
        tasks::release(&mut kv, &id, "ann").expect("release");
    }
    // What a layout-8 build left: a history key for every change, naming
    // its place in the feed, and its mark.
    let feed = read_all(&mut kv, &mut None, 1000);
    for e in &feed {
        if let Change::Task(c) = &e.change {
            let place = changes::entry_place(&mut kv, &c.id, c.entry.seq)
                .expect("entry-place")
                .expect("kept");
            let row = crate::store::HistoryRow {
                entry: c.entry.clone(),
                position: crate::store::Position {
                    slot: place.slot as u8,
                    seq: place.seq,
                },
            };
            kv.map.insert(
                schema::history_entry(sh, &c.id, c.entry.seq).into_bytes(),
                crate::store::encode_row(&row).expect("encodes"),
            );
        }
    }
    kv.map
        .insert(schema::layout().into_bytes(), b"8/64".to_vec());
    assert_healthy(&mut kv);
    let before: Vec<_> = (0..3).map(|i| history(&mut kv, &format!("t{i}"))).collect();
    kv.slot = 9;
    tasks::claim(&mut kv, "t1", "bob", &names(&["a"]), None).expect("claim");
    assert_eq!(
        kv.map.get(schema::layout().as_bytes()).map(Vec::as_slice),
        Some(schema::layout_mark(sh).as_bytes())
    );
    assert!(
        !kv.map
            .contains_key(schema::history_entry(sh, "t1", 4).as_bytes())
    );
    assert_healthy(&mut kv);
    for i in [0, 2] {
        assert_eq!(history(&mut kv, &format!("t{i}")), before[i]);
    }
    let t1 = history(&mut kv, "t1");
    assert_eq!(t1[..3], before[1][..]);
    assert_eq!((t1[3].seq, t1[3].verb.as_str()), (4, "claim"));
    for after in 0..5 {
        let got = changes::history(&mut kv, "t1", Some(after), 2).expect("history");
        let want: Vec<_> = t1.iter().skip(after as usize).take(2).cloned().collect();
        assert_eq!(got, want, "after {after}");
    }
    // Trimming takes the keyed entries with their feed entries.
    changes::trim(&mut kv, None, Some(2), 1000).expect("trim");
    assert_healthy(&mut kv);
    assert_eq!(
        history(&mut kv, "t1")
            .iter()
            .map(|e| e.seq)
            .collect::<Vec<_>>(),
        [4]
    );
    changes::trim(&mut kv, None, Some(0), 1000).expect("trim");
    assert_healthy(&mut kv);
    for i in 0..3 {
        assert_eq!(history(&mut kv, &format!("t{i}")).len(), 1);
    }
}
