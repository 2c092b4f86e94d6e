//! The check and the history starts (`("history-start", id)`, see "Where
//! history starts" in docs/architecture.md): a start belongs to a task with
//! a row and a history, in a keyspace whose tasks may predate their
//! history, decodes as a `before-history` entry, and says what the task's
//! entry 1 says it left, at entry 1's time, whether entry 1 is in the feed
//! or kept under its own key.

use super::*;
use crate::model::{HistoryEntry, Lease};
use crate::store;
use crate::{changes, schema, tasks};

/// A keyspace of layout 5 holding `ids`, written before the record: their
/// rows and indexes, no record, as an earlier component left them.
fn written_before_the_record(ids: &[&str]) -> MemKv {
    let mut kv = MemKv::new();
    kv.map
        .insert(schema::layout().into_bytes(), b"5/64".to_vec());
    for id in ids {
        open(&mut kv, task(id).roles(&["a"]).created(700));
    }
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
    kv
}

/// [`written_before_the_record`] with task `old` and others, whose first
/// change this component then records at 900: the change that keeps the
/// history start of `old`.
fn begun_history_beside(others: &[&str]) -> MemKv {
    let mut ids = vec!["old"];
    ids.extend(others);
    let mut kv = written_before_the_record(&ids);
    kv.now = 900;
    let lease = Lease {
        now: 900,
        lease_ms: 50,
    };
    tasks::claim(&mut kv, "old", "ann", &names(&["a"]), Some(&lease), None).expect("claim");
    assert!(
        kv.map.contains_key(schema::history_start("old").as_bytes()),
        "the first recorded change keeps the start"
    );
    assert_healthy(&mut kv);
    kv
}

fn begun_history() -> MemKv {
    begun_history_beside(&[])
}

/// The check's findings about history starts, as (subject, detail); the
/// same read ahead over a call's buffer as directly.
fn start_findings(kv: &mut MemKv) -> Vec<(String, String)> {
    let direct = check::check(kv).expect("check");
    let ahead = kv.call(|kv| check::check(kv)).expect("check");
    assert_eq!(ahead, direct);
    direct
        .into_iter()
        .filter(|d| d.structure == "history-start")
        .map(|d| (d.subject, d.detail))
        .collect()
}

fn start_of(kv: &MemKv, id: &str) -> HistoryEntry {
    store::decode_history_start(&kv.map[schema::history_start(id).as_bytes()]).expect("decodes")
}

fn put_start(kv: &mut MemKv, id: &str, start: &HistoryEntry) {
    kv.map.insert(
        schema::history_start(id).into_bytes(),
        store::encode_row(start).expect("encodes"),
    );
}

/// Asserts the check names `id`'s history start, with `words` in its detail.
#[track_caller]
fn names_start(kv: &mut MemKv, id: &str, words: &str) {
    let found = start_findings(kv);
    assert!(
        found.iter().any(|(s, d)| s == id && d.contains(words)),
        "expected a finding on the history start of {id} saying {words:?}: {found:?}"
    );
}

#[test]
fn a_history_start_for_a_task_that_does_not_exist_is_found() {
    let mut kv = begun_history();
    let start = start_of(&kv, "old");
    put_start(&mut kv, "ghost", &start);
    names_start(&mut kv, "ghost", "a task with no row");
    // Its task gone since, the start of `old` is found the same way.
    let mut kv = begun_history();
    kv.map.remove(schema::task("old").as_bytes());
    names_start(&mut kv, "old", "a task with no row");
}

#[test]
fn a_history_start_for_a_task_whose_history_has_not_begun_is_found() {
    // A task the earlier component wrote, not changed since: no log.
    let mut kv = begun_history_beside(&["untouched"]);
    let start = store::before_history(&stored(&mut kv, "untouched"), 700);
    put_start(&mut kv, "untouched", &start);
    names_start(&mut kv, "untouched", "history has not begun");
}

#[test]
fn a_history_start_in_a_keyspace_that_recorded_every_change_is_found() {
    for mark in [None, Some(&b"6/64"[..])] {
        let mut kv = MemKv::new();
        if let Some(mark) = mark {
            kv.map.insert(schema::layout().into_bytes(), mark.to_vec());
        }
        open(&mut kv, task("t"));
        assert_healthy(&mut kv);
        let start = store::before_history(&stored(&mut kv, "t"), 1_000);
        put_start(&mut kv, "t", &start);
        names_start(&mut kv, "t", "recorded every change from the start");
    }
}

#[test]
fn a_history_start_that_does_not_decode_or_is_no_opening_entry_is_found() {
    let mut kv = begun_history();
    kv.map
        .insert(schema::history_start("old").into_bytes(), b"\xff".to_vec());
    names_start(&mut kv, "old", "does not decode");
    let mut kv = begun_history();
    let mut start = start_of(&kv, "old");
    start.seq = 1;
    start.verb = "claim".into();
    put_start(&mut kv, "old", &start);
    names_start(&mut kv, "old", "not a before-history entry numbered 0");
    // A key of another shape among the starts.
    let mut kv = begun_history();
    kv.map
        .insert(schema::history_start("old").int(1).into_bytes(), Vec::new());
    names_start(&mut kv, "old/1", "wrong shape");
}

/// Words the check must name a damaged start by, and the damage.
type Damage = (&'static str, fn(&mut HistoryEntry));

#[test]
fn a_history_start_that_disagrees_with_entry_one_is_found_in_the_feed_or_under_its_key() {
    let damage: [Damage; 2] = [
        ("says the task was claimed", |s| {
            s.after = TaskState::Claimed;
        }),
        ("kept at 899", |s| s.at = 899),
    ];
    for (words, damage) in damage {
        // Entry 1 in the feed, reached by following the task's changes back.
        let mut kv = begun_history();
        let mut start = start_of(&kv, "old");
        damage(&mut start);
        put_start(&mut kv, "old", &start);
        names_start(&mut kv, "old", words);
        // Entry 1 trimmed from the feed while it is the task's last: kept
        // under its own key, where the check reads it.
        let mut kv = begun_history();
        changes::trim(&mut kv, None, Some(0), 1000).expect("trim");
        let shards = schema::Shards::record_apart(64).expect("64 shards");
        assert!(
            kv.map
                .contains_key(schema::history_entry(shards, "old", 1).as_bytes())
        );
        assert_healthy(&mut kv);
        let mut start = start_of(&kv, "old");
        damage(&mut start);
        put_start(&mut kv, "old", &start);
        names_start(&mut kv, "old", words);
    }
}

/// Once entry 1 is trimmed with the entries after it, the start has nothing
/// left to agree with, and stays unjudged; a start removed (as a task whose
/// first change an earlier build recorded has none) is no damage either.
#[test]
fn a_history_start_past_its_kept_history_or_missing_is_no_damage() {
    let mut kv = begun_history();
    tasks::release(&mut kv, "old", "ann", None).expect("release");
    changes::trim(&mut kv, None, Some(0), 1000).expect("trim");
    let shards = schema::Shards::record_apart(64).expect("64 shards");
    let log = store::load_task_log(&mut kv, shards, "old")
        .expect("log")
        .expect("a log");
    assert_eq!((log.first, log.last), (2, 2));
    let mut start = start_of(&kv, "old");
    start.after = TaskState::Claimed;
    put_start(&mut kv, "old", &start);
    assert_healthy(&mut kv);
    let mut kv = begun_history();
    kv.map.remove(schema::history_start("old").as_bytes());
    assert_healthy(&mut kv);
}
