//! `escalate`: it clears the assignee and widens the audience in order (an
//! audience open to anyone stays so), is a no-op on a settled task, and
//! queues the task for its new roles, never again overdue.

use super::worklist_support::{claim, open_count};
use super::*;
use crate::model::Settlement;
use crate::tasks;

#[test]
fn escalation_clears_the_assignee_and_widens_the_audience_in_order() {
    let mut kv = MemKv::new();
    open(
        &mut kv,
        task("t")
            .roles(&["a", "b"])
            .escalating_to(&["c", "a", "d"])
            .excluding(&["mallory"]),
    );
    claim(&mut kv, "t", "bob", &["b"]).expect("claims");
    let t = tasks::escalate(&mut kv, "t", None).expect("escalates");
    assert_eq!(t.state, TaskState::Escalated);
    assert_eq!(t.assignee, None);
    assert_eq!(t.candidate_roles, names(&["a", "b", "c", "d"]));
    assert_eq!(t.escalate_to, names(&["c", "a", "d"]));
    assert_eq!(t.excluded_actors, names(&["mallory"]));
    assert_eq!(stored(&mut kv, "t"), t);
    assert_eq!(open_count(&mut kv), 1);
    // Escalating again changes nothing further.
    let again = tasks::escalate(&mut kv, "t", None).expect("escalates again");
    assert_eq!(again, t);
    assert_healthy(&mut kv);
}

#[test]
fn an_empty_audience_stays_empty_when_escalated() {
    let mut kv = MemKv::new();
    open(&mut kv, task("t").escalating_to(&["lead"]));
    let t = tasks::escalate(&mut kv, "t", None).expect("escalates");
    assert!(t.candidate_roles.is_empty());
    // Still offered to anyone, not only to leads.
    claim(&mut kv, "t", "bob", &["intern"]).expect("anyone may claim");
}

#[test]
fn escalating_a_settled_task_is_a_no_op() {
    let mut kv = MemKv::new();
    open(&mut kv, task("t").roles(&["a"]).escalating_to(&["b"]));
    claim(&mut kv, "t", "bob", &["a"]).expect("claims");
    tasks::settle(&mut kv, "t", Settlement::Completed, None, None, None).expect("settles");
    let before = stored(&mut kv, "t");
    let t = writes_nothing(&mut kv, |kv| tasks::escalate(kv, "t", None));
    assert_eq!(t, before);
    assert_eq!(t.assignee.as_deref(), Some("bob"));
}

#[test]
fn escalating_an_unknown_task_is_not_found() {
    let mut kv = MemKv::new();
    let e = fails_cleanly(&mut kv, |kv| tasks::escalate(kv, "t", None));
    assert_eq!(e, crate::model::ClaimError::NotFound("t".into()));
}

#[test]
fn an_escalated_task_is_queued_for_its_new_roles_and_never_overdue() {
    let mut kv = MemKv::new();
    open(
        &mut kv,
        task("t").roles(&["clerk"]).escalating_to(&["lead"]).due(10),
    );
    tasks::escalate(&mut kv, "t", None).expect("escalates");
    let page = tasks::queue(
        &mut kv,
        &crate::model::QueueQuery {
            roles: names(&["lead"]),
            actor: None,
            limit: 5,
            after: None,
        },
    )
    .expect("queue");
    assert_eq!(ids(&page.tasks), ["t"]);
    assert!(
        tasks::overdue(&mut kv, 1_000, 10)
            .expect("overdue")
            .is_empty()
    );
}
