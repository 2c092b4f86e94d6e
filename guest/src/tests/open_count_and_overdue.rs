//! The reads over pending tasks: `open-count` through every transition, and
//! `overdue`, the due tasks never escalated, earliest first, a limit at a
//! time.

use super::worklist_support::{claim, open_count};
use super::*;
use crate::model::Settlement;
use crate::tasks;

// ---- open-count ---------------------------------------------------------

#[test]
fn open_count_counts_pending_tasks_through_every_transition() {
    let mut kv = MemKv::new();
    assert_eq!(open_count(&mut kv), 0);
    for id in ["a", "b", "c", "d"] {
        open(&mut kv, task(id));
    }
    assert_eq!(open_count(&mut kv), 4);
    open(&mut kv, task("e"));
    tasks::open(&mut kv, &task("e")).expect("reopen is a no-op");
    assert_eq!(open_count(&mut kv), 5);
    claim(&mut kv, "a", "bob", &[]).expect("claims");
    assert_eq!(open_count(&mut kv), 5, "a held task is still pending");
    tasks::escalate(&mut kv, "a", None).expect("escalates");
    assert_eq!(open_count(&mut kv), 5);
    claim(&mut kv, "a", "bob", &[]).expect("claims");
    tasks::release(&mut kv, "a", "bob", None).expect("releases");
    assert_eq!(open_count(&mut kv), 5);
    tasks::settle(&mut kv, "a", Settlement::Completed, None, None, None).expect("settles");
    assert_eq!(open_count(&mut kv), 4);
    tasks::settle(&mut kv, "a", Settlement::Expired, None, None, None).expect("settle is a no-op");
    assert_eq!(open_count(&mut kv), 4);
    tasks::escalate(&mut kv, "a", None).expect("escalate is a no-op");
    assert_eq!(open_count(&mut kv), 4);
    tasks::withdraw_run(&mut kv, "run-1", &names(&["a", "b", "c"])).expect("withdraws");
    assert_eq!(open_count(&mut kv), 2);
    assert_healthy(&mut kv);
}

// ---- overdue ------------------------------------------------------------

#[test]
fn overdue_lists_tasks_due_at_or_before_now_earliest_first_then_id() {
    let mut kv = MemKv::new();
    open(&mut kv, task("late").due(300));
    open(&mut kv, task("b").due(100));
    open(&mut kv, task("a").due(100));
    open(&mut kv, task("c").due(200));
    open(&mut kv, task("never-due"));
    let found = tasks::overdue(&mut kv, 200, 10).expect("overdue");
    assert_eq!(ids(&found), ["a", "b", "c"]);
    assert_eq!(
        ids(&tasks::overdue(&mut kv, 199, 10).expect("overdue")),
        ["a", "b"]
    );
    assert!(tasks::overdue(&mut kv, 99, 10).expect("overdue").is_empty());
    assert_eq!(
        ids(&tasks::overdue(&mut kv, 200, 2).expect("overdue")),
        ["a", "b"]
    );
    assert_eq!(
        ids(&tasks::overdue(&mut kv, 200, 1).expect("overdue")),
        ["a"]
    );
    let all = tasks::overdue(&mut kv, crate::validate::MAX_TIMESTAMP, 1000).expect("overdue");
    assert_eq!(ids(&all), ["a", "b", "c", "late"]);
}

#[test]
fn overdue_includes_claimed_tasks_that_were_never_escalated() {
    let mut kv = MemKv::new();
    open(&mut kv, task("t").due(10));
    claim(&mut kv, "t", "bob", &[]).expect("claims");
    let found = tasks::overdue(&mut kv, 10, 10).expect("overdue");
    assert_eq!(ids(&found), ["t"]);
    assert_eq!(found[0].assignee.as_deref(), Some("bob"));
}

#[test]
fn an_escalated_task_never_returns_to_overdue() {
    let mut kv = MemKv::new();
    open(&mut kv, task("escalated").due(10));
    open(&mut kv, task("escalated-then-claimed").due(10));
    open(&mut kv, task("escalated-then-released").due(10));
    open(&mut kv, task("still-due").due(10));
    for id in [
        "escalated",
        "escalated-then-claimed",
        "escalated-then-released",
    ] {
        tasks::escalate(&mut kv, id, None).expect("escalates");
    }
    claim(&mut kv, "escalated-then-claimed", "bob", &[]).expect("claims");
    claim(&mut kv, "escalated-then-released", "bob", &[]).expect("claims");
    tasks::release(&mut kv, "escalated-then-released", "bob", None).expect("releases");
    let found = tasks::overdue(&mut kv, 1_000, 100).expect("overdue");
    assert_eq!(ids(&found), ["still-due"]);
    assert_healthy(&mut kv);
}

#[test]
fn settled_tasks_are_not_overdue() {
    let mut kv = MemKv::new();
    for (id, s) in [
        ("c", Settlement::Completed),
        ("e", Settlement::Expired),
        ("w", Settlement::Withdrawn),
    ] {
        open(&mut kv, task(id).due(5));
        tasks::settle(&mut kv, id, s, None, None, None).expect("settles");
    }
    assert!(
        tasks::overdue(&mut kv, 1_000, 100)
            .expect("overdue")
            .is_empty()
    );
}

#[test]
fn overdue_with_a_limit_stops_there_and_the_rest_follow_after_settling() {
    let mut kv = MemKv::new();
    for i in 0..7 {
        open(&mut kv, task(&format!("t{i}")).due(i64::from(i)));
    }
    let first = tasks::overdue(&mut kv, 100, 3).expect("overdue");
    assert_eq!(ids(&first), ["t0", "t1", "t2"]);
    for t in &first {
        tasks::settle(&mut kv, &t.id, Settlement::Expired, None, None, None).expect("settles");
    }
    let next = tasks::overdue(&mut kv, 100, 3).expect("overdue");
    assert_eq!(ids(&next), ["t3", "t4", "t5"]);
}
