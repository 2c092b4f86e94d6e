//! Handing a claim on or back: `take-over` runs the claim ladder for the new
//! actor before it checks who holds the task, and `release` lets only the
//! holder give it back, to open or, once escalated, to escalated with its
//! audience still widened.

use super::worklist_support::{claim, held_by_bob, open_count, settled_while_bob_held_it};
use super::*;
use crate::model::{ClaimError, Settlement};
use crate::tasks;

fn take_over(
    kv: &mut MemKv,
    id: &str,
    from: &str,
    actor: &str,
    roles: &[&str],
) -> Result<Task, ClaimError> {
    tasks::take_over(kv, id, from, actor, &names(roles), None, None)
}

// ---- take-over ----------------------------------------------------------

#[test]
fn take_over_moves_the_claim_from_the_holder_to_the_actor() {
    let mut kv = MemKv::new();
    held_by_bob(&mut kv);
    let t = take_over(&mut kv, "t", "bob", "dave", &["approver"]).expect("dave takes over");
    assert_eq!(t.state, TaskState::Claimed);
    assert_eq!(t.assignee.as_deref(), Some("dave"));
    assert_eq!(stored(&mut kv, "t"), t);
    // bob no longer holds it.
    let e = fails_cleanly(&mut kv, |kv| tasks::release(kv, "t", "bob", None));
    assert_eq!(e, ClaimError::NotHeld("bob".into()));
    assert_eq!(open_count(&mut kv), 1);
    assert_healthy(&mut kv);
}

#[test]
fn take_over_runs_the_ladder_for_the_new_actor_first() {
    let mut kv = MemKv::new();
    let e = fails_cleanly(&mut kv, |kv| take_over(kv, "t", "bob", "dave", &[]));
    assert_eq!(e, ClaimError::NotFound("t".into()));

    held_by_bob(&mut kv);
    // Excluded outranks wrong-role, and both outrank the swap.
    let e = fails_cleanly(&mut kv, |kv| {
        take_over(kv, "t", "bob", "mallory", &["clerk"])
    });
    assert_eq!(e, ClaimError::Excluded("mallory".into()));
    let e = fails_cleanly(&mut kv, |kv| take_over(kv, "t", "carol", "mallory", &[]));
    assert_eq!(e, ClaimError::Excluded("mallory".into()));
    let e = fails_cleanly(&mut kv, |kv| take_over(kv, "t", "bob", "carol", &["clerk"]));
    assert_eq!(e, ClaimError::WrongRole("carol".into()));
    let e = fails_cleanly(&mut kv, |kv| take_over(kv, "t", "zed", "carol", &["clerk"]));
    assert_eq!(e, ClaimError::WrongRole("carol".into()));

    // Not-pending outranks not-held, even naming the last holder.
    let mut kv = MemKv::new();
    settled_while_bob_held_it(&mut kv, Settlement::Withdrawn);
    let e = fails_cleanly(&mut kv, |kv| {
        take_over(kv, "t", "bob", "dave", &["approver"])
    });
    assert_eq!(e, ClaimError::NotPending(TaskState::Withdrawn));
    let e = fails_cleanly(&mut kv, |kv| {
        take_over(kv, "t", "zed", "dave", &["approver"])
    });
    assert_eq!(e, ClaimError::NotPending(TaskState::Withdrawn));
}

#[test]
fn take_over_from_someone_who_does_not_hold_the_task_is_not_held() {
    let mut kv = MemKv::new();
    held_by_bob(&mut kv);
    let e = fails_cleanly(&mut kv, |kv| {
        take_over(kv, "t", "carol", "dave", &["approver"])
    });
    assert_eq!(e, ClaimError::NotHeld("carol".into()));
    // The actor already holding it does not make a stale `from` right.
    let e = fails_cleanly(&mut kv, |kv| {
        take_over(kv, "t", "carol", "bob", &["approver"])
    });
    assert_eq!(e, ClaimError::NotHeld("carol".into()));
}

#[test]
fn take_over_of_an_unheld_task_is_not_held_use_claim() {
    let mut kv = MemKv::new();
    open(
        &mut kv,
        task("t").roles(&["approver"]).escalating_to(&["lead"]),
    );
    let e = fails_cleanly(&mut kv, |kv| {
        take_over(kv, "t", "bob", "dave", &["approver"])
    });
    assert_eq!(e, ClaimError::NotHeld("bob".into()));
    let e = fails_cleanly(&mut kv, |kv| {
        take_over(kv, "t", "dave", "dave", &["approver"])
    });
    assert_eq!(e, ClaimError::NotHeld("dave".into()));
    // Escalated is queued, not held.
    claim(&mut kv, "t", "bob", &["approver"]).expect("claims");
    tasks::escalate(&mut kv, "t", None).expect("escalates");
    let e = fails_cleanly(&mut kv, |kv| {
        take_over(kv, "t", "bob", "dave", &["approver"])
    });
    assert_eq!(e, ClaimError::NotHeld("bob".into()));
}

#[test]
fn take_over_from_oneself_is_idempotent_success_and_writes_nothing() {
    let mut kv = MemKv::new();
    held_by_bob(&mut kv);
    let before = stored(&mut kv, "t");
    let t = writes_nothing(&mut kv, |kv| {
        take_over(kv, "t", "bob", "bob", &["approver"])
    });
    assert_eq!(t, before);
}

#[test]
fn take_over_keeps_an_escalated_tasks_history() {
    let mut kv = MemKv::new();
    open(
        &mut kv,
        task("t").roles(&["clerk"]).escalating_to(&["lead"]).due(10),
    );
    tasks::escalate(&mut kv, "t", None).expect("escalates");
    claim(&mut kv, "t", "lea", &["lead"]).expect("claims");
    take_over(&mut kv, "t", "lea", "leo", &["lead"]).expect("takes over");
    // Still never overdue, and a release goes back to escalated.
    assert!(
        tasks::overdue(&mut kv, 100, 10)
            .expect("overdue")
            .is_empty()
    );
    tasks::release(&mut kv, "t", "leo", None).expect("releases");
    assert_eq!(stored(&mut kv, "t").state, TaskState::Escalated);
    assert_healthy(&mut kv);
}

// ---- release ------------------------------------------------------------

#[test]
fn only_the_holder_of_a_claimed_task_may_release_it() {
    let mut kv = MemKv::new();
    let e = fails_cleanly(&mut kv, |kv| tasks::release(kv, "t", "bob", None));
    assert_eq!(e, ClaimError::NotFound("t".into()));
    open(&mut kv, task("t"));
    // Open: nobody holds it.
    let e = fails_cleanly(&mut kv, |kv| tasks::release(kv, "t", "bob", None));
    assert_eq!(e, ClaimError::NotHeld("bob".into()));
    claim(&mut kv, "t", "bob", &[]).expect("claims");
    let e = fails_cleanly(&mut kv, |kv| tasks::release(kv, "t", "carol", None));
    assert_eq!(e, ClaimError::NotHeld("carol".into()));
    // A settled task keeps its assignee, but nobody holds it any more.
    tasks::settle(&mut kv, "t", Settlement::Completed, None, None, None).expect("settles");
    let e = fails_cleanly(&mut kv, |kv| tasks::release(kv, "t", "bob", None));
    assert_eq!(e, ClaimError::NotHeld("bob".into()));
}

#[test]
fn release_returns_a_never_escalated_task_to_open() {
    let mut kv = MemKv::new();
    let opened = open(&mut kv, task("t").roles(&["clerk"]).due(50));
    claim(&mut kv, "t", "bob", &["clerk"]).expect("claims");
    tasks::release(&mut kv, "t", "bob", None).expect("releases");
    // As it was opened, two changes on.
    assert_eq!(
        stored(&mut kv, "t"),
        Task {
            revision: 3,
            ..opened
        }
    );
    assert_eq!(
        ids(&tasks::overdue(&mut kv, 50, 10).expect("overdue")),
        ["t"]
    );
    assert_eq!(open_count(&mut kv), 1);
    assert_healthy(&mut kv);
}

#[test]
fn release_returns_an_escalated_task_to_escalated_with_its_audience_widened() {
    let mut kv = MemKv::new();
    open(
        &mut kv,
        task("t").roles(&["clerk"]).escalating_to(&["lead"]).due(50),
    );
    tasks::escalate(&mut kv, "t", None).expect("escalates");
    claim(&mut kv, "t", "lea", &["lead"]).expect("claims");
    tasks::release(&mut kv, "t", "lea", None).expect("releases");
    let t = stored(&mut kv, "t");
    assert_eq!(t.state, TaskState::Escalated);
    assert_eq!(t.assignee, None);
    assert_eq!(t.candidate_roles, names(&["clerk", "lead"]));
    assert!(tasks::overdue(&mut kv, 50, 10).expect("overdue").is_empty());
    assert_healthy(&mut kv);
}
