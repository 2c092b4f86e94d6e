//! The claim ladder: who may claim a task, and which refusal answers when
//! several apply (not found, then excluded, wrong role, not pending, already
//! claimed), with a claim by the holder idempotent, roles and actors
//! compared verbatim, an escalated task open to its widened audience, and
//! inputs checked before existence.

use super::worklist_support::{claim, held_by_bob, open_count, settled_while_bob_held_it};
use super::*;
use crate::model::{ClaimError, Settlement};
use crate::tasks;

#[test]
fn claiming_an_unknown_task_is_not_found() {
    let mut kv = MemKv::new();
    let e = fails_cleanly(&mut kv, |kv| claim(kv, "nope", "bob", &[]));
    assert_eq!(e, ClaimError::NotFound("nope".into()));
    open(&mut kv, task("t").excluding(&["bob"]));
    let e = fails_cleanly(&mut kv, |kv| claim(kv, "nope", "bob", &[]));
    assert_eq!(e, ClaimError::NotFound("nope".into()));
}

#[test]
fn excluded_outranks_wrong_role_not_pending_and_already_claimed() {
    let mut kv = MemKv::new();
    settled_while_bob_held_it(&mut kv, Settlement::Completed);
    // Every later rung would fail too; the earliest one answers.
    let e = fails_cleanly(&mut kv, |kv| claim(kv, "t", "mallory", &["clerk"]));
    assert_eq!(e, ClaimError::Excluded("mallory".into()));
    let e = fails_cleanly(&mut kv, |kv| claim(kv, "t", "mallory", &["approver"]));
    assert_eq!(e, ClaimError::Excluded("mallory".into()));

    let mut kv = MemKv::new();
    held_by_bob(&mut kv);
    let e = fails_cleanly(&mut kv, |kv| claim(kv, "t", "mallory", &["clerk"]));
    assert_eq!(e, ClaimError::Excluded("mallory".into()));
    let e = fails_cleanly(&mut kv, |kv| claim(kv, "t", "mallory", &["approver"]));
    assert_eq!(e, ClaimError::Excluded("mallory".into()));
}

#[test]
fn an_excluded_actor_is_refused_even_on_a_task_open_to_anyone() {
    let mut kv = MemKv::new();
    open(&mut kv, task("t").excluding(&["mallory"]));
    let e = fails_cleanly(&mut kv, |kv| claim(kv, "t", "mallory", &[]));
    assert_eq!(e, ClaimError::Excluded("mallory".into()));
}

#[test]
fn wrong_role_outranks_not_pending_and_already_claimed() {
    let mut kv = MemKv::new();
    settled_while_bob_held_it(&mut kv, Settlement::Expired);
    let e = fails_cleanly(&mut kv, |kv| claim(kv, "t", "carol", &["clerk"]));
    assert_eq!(e, ClaimError::WrongRole("carol".into()));
    let e = fails_cleanly(&mut kv, |kv| claim(kv, "t", "carol", &[]));
    assert_eq!(e, ClaimError::WrongRole("carol".into()));

    let mut kv = MemKv::new();
    held_by_bob(&mut kv);
    let e = fails_cleanly(&mut kv, |kv| claim(kv, "t", "carol", &["clerk", "auditor"]));
    assert_eq!(e, ClaimError::WrongRole("carol".into()));
}

#[test]
fn not_pending_outranks_already_claimed_for_every_settlement() {
    for (settlement, state) in [
        (Settlement::Completed, TaskState::Completed),
        (Settlement::Expired, TaskState::Expired),
        (Settlement::Withdrawn, TaskState::Withdrawn),
    ] {
        let mut kv = MemKv::new();
        settled_while_bob_held_it(&mut kv, settlement);
        let e = fails_cleanly(&mut kv, |kv| claim(kv, "t", "dave", &["approver"]));
        assert_eq!(e, ClaimError::NotPending(state));
        // The former holder is not idempotently "still holding" it.
        let e = fails_cleanly(&mut kv, |kv| claim(kv, "t", "bob", &["approver"]));
        assert_eq!(e, ClaimError::NotPending(state));
    }
}

#[test]
fn an_eligible_actor_on_a_held_task_is_told_who_holds_it() {
    let mut kv = MemKv::new();
    held_by_bob(&mut kv);
    let e = fails_cleanly(&mut kv, |kv| claim(kv, "t", "dave", &["clerk", "approver"]));
    assert_eq!(e, ClaimError::AlreadyClaimed("bob".into()));
}

#[test]
fn a_claim_by_the_holder_is_idempotent_success_and_writes_nothing() {
    let mut kv = MemKv::new();
    held_by_bob(&mut kv);
    let before = stored(&mut kv, "t");
    let again = writes_nothing(&mut kv, |kv| claim(kv, "t", "bob", &["approver"]));
    assert_eq!(again, before);
    assert_eq!(again.assignee.as_deref(), Some("bob"));
    assert_eq!(open_count(&mut kv), 1);
}

#[test]
fn a_claim_reserves_the_task_and_takes_it_out_of_the_queue() {
    let mut kv = MemKv::new();
    open(&mut kv, task("t").roles(&["approver", "lead"]));
    let t = claim(&mut kv, "t", "bob", &["intern", "lead"]).expect("bob claims");
    assert_eq!(t.state, TaskState::Claimed);
    assert_eq!(t.assignee.as_deref(), Some("bob"));
    assert_eq!(stored(&mut kv, "t"), t);
    let page = tasks::queue(
        &mut kv,
        &crate::model::QueueQuery {
            roles: names(&["approver", "lead"]),
            actor: None,
            limit: 10,
            after: None,
        },
    )
    .expect("queue");
    assert!(page.tasks.is_empty());
    assert_healthy(&mut kv);
}

#[test]
fn a_task_open_to_anyone_admits_an_actor_with_no_roles() {
    let mut kv = MemKv::new();
    open(&mut kv, task("t"));
    let t = claim(&mut kv, "t", "bob", &[]).expect("anyone may claim");
    assert_eq!(t.assignee.as_deref(), Some("bob"));
}

#[test]
fn roles_and_actors_are_compared_verbatim() {
    let mut kv = MemKv::new();
    open(
        &mut kv,
        task("t").roles(&["approver"]).excluding(&["mallory"]),
    );
    for role in ["Approver", " approver", "approver ", "approvers"] {
        let e = fails_cleanly(&mut kv, |kv| claim(kv, "t", "carol", &[role]));
        assert_eq!(e, ClaimError::WrongRole("carol".into()), "role {role:?}");
    }
    // "Mallory" is not "mallory": no case folding, no trimming.
    let t = claim(&mut kv, "t", "Mallory ", &["approver"]).expect("not excluded");
    assert_eq!(t.assignee.as_deref(), Some("Mallory "));
}

#[test]
fn an_escalated_task_is_claimable_by_its_widened_audience() {
    let mut kv = MemKv::new();
    open(
        &mut kv,
        task("t").roles(&["clerk"]).escalating_to(&["lead"]),
    );
    let e = fails_cleanly(&mut kv, |kv| claim(kv, "t", "lea", &["lead"]));
    assert_eq!(e, ClaimError::WrongRole("lea".into()));
    tasks::escalate(&mut kv, "t", None).expect("escalates");
    let t = claim(&mut kv, "t", "lea", &["lead"]).expect("lead may claim now");
    assert_eq!(t.state, TaskState::Claimed);
    assert_eq!(t.candidate_roles, names(&["clerk", "lead"]));
    assert_healthy(&mut kv);
}

#[test]
fn claim_checks_its_inputs_before_existence() {
    let mut kv = MemKv::new();
    open(&mut kv, task("t"));
    let long = "x".repeat(257);
    for (id, actor, roles) in [
        ("", "bob", vec![]),
        ("nope", "", vec![]),
        ("nope", "bob", vec!["a\u{0}"]),
        ("nope", long.as_str(), vec![]),
        ("t", "bob", vec!["ok", ""]),
    ] {
        let e = fails_cleanly(&mut kv, |kv| claim(kv, id, actor, &roles));
        assert!(
            matches!(e, ClaimError::Store(StoreError::Invalid(_))),
            "claim({id:?}, {actor:?}, {roles:?}) answered {e:?}"
        );
    }
}
