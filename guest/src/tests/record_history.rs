//! A task's history read from the feed: paged from anywhere, each page
//! costing its length, and a last change trimmed from the feed kept under
//! its own key.

use super::record_support::*;
use super::*;
use crate::changes::{self, Cursor};
use crate::model::Change;
use crate::{schema, tasks};

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
        tasks::claim(&mut kv, id, "ann", &names(&["a"]), None, None).expect("claim");
        tasks::release(&mut kv, id, "ann", None).expect("release");
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
        tasks::claim(&mut kv, "t", "ann", &names(&["a"]), None, None).expect("claim");
        tasks::release(&mut kv, "t", "ann", None).expect("release");
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
    tasks::claim(&mut kv, "t", "ann", &names(&["a"]), None, None).expect("claim");
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
    tasks::release(&mut kv, "t", "ann", None).expect("release");
    tasks::claim(&mut kv, "t", "bob", &names(&["a"]), None, None).expect("claim");
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
    tasks::claim(&mut kv, "t", "ann", &names(&["a"]), None, None).expect("claim");
    changes::trim(&mut kv, None, Some(0), 1000).expect("trim");
    // 50,000 changes after the trimmed one.
    for i in 0..25_000u32 {
        kv.now = 10 + i64::from(i);
        tasks::release(&mut kv, "t", "ann", None).expect("release");
        tasks::claim(&mut kv, "t", "ann", &names(&["a"]), None, None).expect("claim");
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
