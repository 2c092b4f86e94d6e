//! Keyspaces of earlier layouts meet the record: the layout before the
//! record, layout 6's separate record and layout 8's keyed histories.

use super::record_support::*;
use super::*;
use crate::changes;
use crate::model::{Change, HistoryEntry, Lease};
use crate::{schema, tasks};

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
    tasks::claim(&mut kv, "old", "ann", &names(&["a"]), Some(&lease), None).expect("claim");
    kv.now = 960;
    tasks::release(&mut kv, "old", "ann", None).expect("release");
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
                tasks::claim(&mut kv, &id, "ann", &names(&["a"]), None, None).expect("claim");
                tasks::release(&mut kv, &id, "ann", None).expect("release");
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
        tasks::claim(&mut kv, &id, "ann", &names(&["a"]), None, None).expect("claim");
        tasks::release(&mut kv, &id, "ann", None).expect("release");
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
    tasks::claim(&mut kv, "t1", "bob", &names(&["a"]), None, None).expect("claim");
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
