//! Trimming the change record: what it keeps (the newest, each task's last
//! history entry), its inputs, and its budget over large entries; a page
//! of large entries that stops short.

use super::record_support::*;
use super::*;
use crate::changes;
use crate::model::Change;
use crate::tasks;

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
            tasks::claim(&mut kv, &id, "ann", &[], None, None).expect("claim");
            tasks::release(&mut kv, &id, "ann", None).expect("release");
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
