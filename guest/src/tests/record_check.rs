//! The consistency check's findings on a damaged change record.

use super::*;
use crate::changes;
use crate::model::{Change, Lease};
use crate::{schema, tasks};

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
            None,
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
