//! The worklist verbs one at a time: open, get, the claim ladder, take-over,
//! release, settle, withdraw-run, escalate, open-count and overdue.

use super::*;
use crate::model::{ClaimError, Settlement};
use crate::tasks;

fn claim(kv: &mut MemKv, id: &str, actor: &str, roles: &[&str]) -> Result<Task, ClaimError> {
    tasks::claim(kv, id, actor, &names(roles), None)
}

fn take_over(
    kv: &mut MemKv,
    id: &str,
    from: &str,
    actor: &str,
    roles: &[&str],
) -> Result<Task, ClaimError> {
    tasks::take_over(kv, id, from, actor, &names(roles), None)
}

fn open_count(kv: &mut MemKv) -> u64 {
    tasks::open_count(kv).expect("open-count")
}

// ---- open and get -------------------------------------------------------

#[test]
fn first_open_wins_and_answers_the_stored_task_unchanged() {
    let mut kv = MemKv::new();
    let first = open(
        &mut kv,
        task("t")
            .roles(&["approver"])
            .priority(Priority::High)
            .due(5_000),
    );
    let different = Task {
        kind: "other-kind".into(),
        justification: r#"{"x": 1}"#.into(),
        ..task("t")
            .roles(&["clerk"])
            .of_run("run-2")
            .in_case("c")
            .excluding(&["bob"])
            .created(9)
    };
    let answered = writes_nothing(&mut kv, |kv| tasks::open(kv, &different));
    assert_eq!(answered, first);
    assert_eq!(stored(&mut kv, "t"), first);
    assert_eq!(open_count(&mut kv), 1);
    assert_healthy(&mut kv);
}

#[test]
fn a_second_open_of_a_claimed_task_answers_it_as_claimed() {
    let mut kv = MemKv::new();
    open(&mut kv, task("t"));
    let held = claim(&mut kv, "t", "bob", &[]).expect("bob claims");
    let answered = writes_nothing(&mut kv, |kv| tasks::open(kv, &task("t")));
    assert_eq!(answered, held);
    assert_eq!(answered.state, TaskState::Claimed);
    assert_eq!(answered.assignee.as_deref(), Some("bob"));
}

#[test]
fn a_new_task_must_be_open_with_no_assignee() {
    let mut kv = MemKv::new();
    for state in [
        TaskState::Claimed,
        TaskState::Escalated,
        TaskState::Completed,
        TaskState::Expired,
        TaskState::Withdrawn,
    ] {
        let t = Task { state, ..task("t") };
        let why = invalid_reason(fails_cleanly(&mut kv, |kv| tasks::open(kv, &t)));
        assert!(why.contains("state"), "{why}");
    }
    let t = Task {
        assignee: Some("bob".into()),
        ..task("t")
    };
    let why = invalid_reason(fails_cleanly(&mut kv, |kv| tasks::open(kv, &t)));
    assert!(why.contains("assignee"), "{why}");
    assert!(kv.map.is_empty());
}

#[test]
fn inputs_are_checked_before_existence_so_a_bad_reopen_is_invalid() {
    let mut kv = MemKv::new();
    open(&mut kv, task("t"));
    let t = Task {
        justification: "not json".into(),
        ..task("t")
    };
    invalid_reason(fails_cleanly(&mut kv, |kv| tasks::open(kv, &t)));
}

/// The contract's order is inputs, then existence, then the verb's own
/// rules: that a *new* task must be open and unheld is one of `open`'s own
/// rules, so a repeat of an existing id answers the stored task whatever
/// state or assignee the repeat's copy carries.
#[test]
fn reopening_an_existing_id_with_a_claimed_copy_answers_the_stored_task() {
    let mut kv = MemKv::new();
    let stored = open(&mut kv, task("t"));
    let before = kv.map.clone();
    let copy = Task {
        state: TaskState::Claimed,
        assignee: Some("bob".into()),
        ..task("t")
    };
    assert_eq!(
        tasks::open(&mut kv, &copy).expect("first open wins"),
        stored
    );
    let copy = Task {
        state: TaskState::Completed,
        ..task("t")
    };
    assert_eq!(
        tasks::open(&mut kv, &copy).expect("first open wins"),
        stored
    );
    assert_eq!(kv.map, before, "a repeated open wrote");
}

#[test]
fn open_deduplicates_lists_keeping_the_first_occurrence_in_order() {
    let mut kv = MemKv::new();
    let t = task("t")
        .roles(&["b", "a", "b", "c", "a"])
        .escalating_to(&["z", "y", "z"])
        .excluding(&["bob", "ann", "bob", "bob"]);
    let answered = tasks::open(&mut kv, &t).expect("opens");
    assert_eq!(answered.candidate_roles, names(&["b", "a", "c"]));
    assert_eq!(answered.escalate_to, names(&["z", "y"]));
    assert_eq!(answered.excluded_actors, names(&["bob", "ann"]));
    assert_eq!(stored(&mut kv, "t"), answered);
    assert_healthy(&mut kv);
}

#[test]
fn a_list_of_256_duplicates_is_accepted_and_257_is_not() {
    // The limit applies to the list as given, before deduplication.
    let mut kv = MemKv::new();
    let t = Task {
        candidate_roles: vec!["r".to_owned(); 256],
        ..task("t")
    };
    assert_eq!(
        tasks::open(&mut kv, &t).expect("opens").candidate_roles,
        names(&["r"])
    );
    let t = Task {
        candidate_roles: vec!["r".to_owned(); 257],
        ..task("u")
    };
    invalid_reason(fails_cleanly(&mut kv, |kv| tasks::open(kv, &t)));
}

#[test]
fn the_justification_is_returned_byte_for_byte() {
    let mut kv = MemKv::new();
    let text = "{ \"b\" : 1 ,\n\t\"a\": [1, 2.50, \"\\u00e9\"] }  ";
    let t = Task {
        justification: text.into(),
        ..task("t")
    };
    assert_eq!(tasks::open(&mut kv, &t).expect("opens").justification, text);
    assert_eq!(stored(&mut kv, "t").justification, text);
}

#[test]
fn get_answers_the_stored_task_or_none() {
    let mut kv = MemKv::new();
    assert_eq!(tasks::get(&mut kv, "t"), Ok(None));
    let t = open(&mut kv, task("t").in_case("c").due(7));
    assert_eq!(tasks::get(&mut kv, "t"), Ok(Some(t)));
    assert_eq!(tasks::get(&mut kv, "t2"), Ok(None));
    // Ids are compared verbatim.
    assert_eq!(tasks::get(&mut kv, "T"), Ok(None));
    assert_eq!(tasks::get(&mut kv, "t "), Ok(None));
}

// ---- the claim ladder ---------------------------------------------------

/// A task every rung of the ladder would refuse to `mallory`: she is
/// excluded, has none of its roles, and bob held it until it was settled.
fn settled_while_bob_held_it(kv: &mut MemKv, settlement: Settlement) {
    open(kv, task("t").roles(&["approver"]).excluding(&["mallory"]));
    claim(kv, "t", "bob", &["approver"]).expect("bob claims");
    assert_eq!(tasks::settle(kv, "t", settlement, None), Ok(true));
}

/// The same task, still held by bob.
fn held_by_bob(kv: &mut MemKv) {
    open(kv, task("t").roles(&["approver"]).excluding(&["mallory"]));
    claim(kv, "t", "bob", &["approver"]).expect("bob claims");
}

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
    tasks::escalate(&mut kv, "t").expect("escalates");
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
    let e = fails_cleanly(&mut kv, |kv| tasks::release(kv, "t", "bob"));
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
    tasks::escalate(&mut kv, "t").expect("escalates");
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
    tasks::escalate(&mut kv, "t").expect("escalates");
    claim(&mut kv, "t", "lea", &["lead"]).expect("claims");
    take_over(&mut kv, "t", "lea", "leo", &["lead"]).expect("takes over");
    // Still never overdue, and a release goes back to escalated.
    assert!(
        tasks::overdue(&mut kv, 100, 10)
            .expect("overdue")
            .is_empty()
    );
    tasks::release(&mut kv, "t", "leo").expect("releases");
    assert_eq!(stored(&mut kv, "t").state, TaskState::Escalated);
    assert_healthy(&mut kv);
}

// ---- release ------------------------------------------------------------

#[test]
fn only_the_holder_of_a_claimed_task_may_release_it() {
    let mut kv = MemKv::new();
    let e = fails_cleanly(&mut kv, |kv| tasks::release(kv, "t", "bob"));
    assert_eq!(e, ClaimError::NotFound("t".into()));
    open(&mut kv, task("t"));
    // Open: nobody holds it.
    let e = fails_cleanly(&mut kv, |kv| tasks::release(kv, "t", "bob"));
    assert_eq!(e, ClaimError::NotHeld("bob".into()));
    claim(&mut kv, "t", "bob", &[]).expect("claims");
    let e = fails_cleanly(&mut kv, |kv| tasks::release(kv, "t", "carol"));
    assert_eq!(e, ClaimError::NotHeld("carol".into()));
    // A settled task keeps its assignee, but nobody holds it any more.
    tasks::settle(&mut kv, "t", Settlement::Completed, None).expect("settles");
    let e = fails_cleanly(&mut kv, |kv| tasks::release(kv, "t", "bob"));
    assert_eq!(e, ClaimError::NotHeld("bob".into()));
}

#[test]
fn release_returns_a_never_escalated_task_to_open() {
    let mut kv = MemKv::new();
    let opened = open(&mut kv, task("t").roles(&["clerk"]).due(50));
    claim(&mut kv, "t", "bob", &["clerk"]).expect("claims");
    tasks::release(&mut kv, "t", "bob").expect("releases");
    assert_eq!(stored(&mut kv, "t"), opened);
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
    tasks::escalate(&mut kv, "t").expect("escalates");
    claim(&mut kv, "t", "lea", &["lead"]).expect("claims");
    tasks::release(&mut kv, "t", "lea").expect("releases");
    let t = stored(&mut kv, "t");
    assert_eq!(t.state, TaskState::Escalated);
    assert_eq!(t.assignee, None);
    assert_eq!(t.candidate_roles, names(&["clerk", "lead"]));
    assert!(tasks::overdue(&mut kv, 50, 10).expect("overdue").is_empty());
    assert_healthy(&mut kv);
}

// ---- settle -------------------------------------------------------------

#[test]
fn settle_is_compare_and_set_from_pending() {
    let mut kv = MemKv::new();
    open(&mut kv, task("t"));
    assert_eq!(
        tasks::settle(&mut kv, "t", Settlement::Completed, None),
        Ok(true)
    );
    assert_eq!(stored(&mut kv, "t").state, TaskState::Completed);
    // The loser of the race never overwrites the winner.
    for s in [
        Settlement::Expired,
        Settlement::Withdrawn,
        Settlement::Completed,
    ] {
        assert!(!writes_nothing(&mut kv, |kv| tasks::settle(
            kv, "t", s, None
        )));
        assert_eq!(stored(&mut kv, "t").state, TaskState::Completed);
    }
    assert_eq!(open_count(&mut kv), 0);
    assert_healthy(&mut kv);
}

#[test]
fn settle_moves_every_pending_state() {
    let mut kv = MemKv::new();
    open(&mut kv, task("open"));
    open(&mut kv, task("claimed"));
    open(&mut kv, task("escalated"));
    claim(&mut kv, "claimed", "bob", &[]).expect("claims");
    tasks::escalate(&mut kv, "escalated").expect("escalates");
    assert_eq!(open_count(&mut kv), 3);
    assert_eq!(
        tasks::settle(&mut kv, "open", Settlement::Expired, None),
        Ok(true)
    );
    assert_eq!(
        tasks::settle(&mut kv, "claimed", Settlement::Completed, None),
        Ok(true)
    );
    assert_eq!(
        tasks::settle(&mut kv, "escalated", Settlement::Withdrawn, None),
        Ok(true)
    );
    assert_eq!(stored(&mut kv, "open").state, TaskState::Expired);
    assert_eq!(stored(&mut kv, "claimed").state, TaskState::Completed);
    assert_eq!(stored(&mut kv, "escalated").state, TaskState::Withdrawn);
    assert_eq!(open_count(&mut kv), 0);
    assert_healthy(&mut kv);
}

#[test]
fn settle_keeps_the_assignee() {
    let mut kv = MemKv::new();
    open(&mut kv, task("t"));
    claim(&mut kv, "t", "bob", &[]).expect("claims");
    assert_eq!(
        tasks::settle(&mut kv, "t", Settlement::Completed, None),
        Ok(true)
    );
    let t = stored(&mut kv, "t");
    assert_eq!(t.state, TaskState::Completed);
    assert_eq!(t.assignee.as_deref(), Some("bob"));
}

#[test]
fn settling_an_unknown_task_is_not_found() {
    let mut kv = MemKv::new();
    let e = fails_cleanly(&mut kv, |kv| {
        tasks::settle(kv, "t", Settlement::Completed, None)
    });
    assert_eq!(e, ClaimError::NotFound("t".into()));
    open(&mut kv, task("u"));
    let e = fails_cleanly(&mut kv, |kv| {
        tasks::settle(kv, "t", Settlement::Expired, None)
    });
    assert_eq!(e, ClaimError::NotFound("t".into()));
}

// ---- withdraw-run -------------------------------------------------------

#[test]
fn withdraw_run_moves_only_that_runs_pending_awaited_tasks() {
    let mut kv = MemKv::new();
    for id in ["open", "claimed", "escalated", "completed", "not-awaited"] {
        open(&mut kv, task(id).of_run("r"));
    }
    open(&mut kv, task("other-run").of_run("r2"));
    claim(&mut kv, "claimed", "bob", &[]).expect("claims");
    tasks::escalate(&mut kv, "escalated").expect("escalates");
    tasks::settle(&mut kv, "completed", Settlement::Completed, None).expect("settles");
    let awaited = names(&[
        "open",
        "claimed",
        "escalated",
        "completed",
        "other-run",
        "unknown",
        "open",
    ]);
    assert_eq!(tasks::withdraw_run(&mut kv, "r", &awaited), Ok(3));
    for id in ["open", "claimed", "escalated"] {
        assert_eq!(stored(&mut kv, id).state, TaskState::Withdrawn, "{id}");
    }
    assert_eq!(stored(&mut kv, "claimed").assignee.as_deref(), Some("bob"));
    assert_eq!(stored(&mut kv, "completed").state, TaskState::Completed);
    assert_eq!(stored(&mut kv, "not-awaited").state, TaskState::Open);
    assert_eq!(stored(&mut kv, "other-run").state, TaskState::Open);
    assert_eq!(tasks::get(&mut kv, "unknown"), Ok(None));
    assert_eq!(open_count(&mut kv), 2);
    // Again: nothing left to move.
    assert_eq!(
        writes_nothing(&mut kv, |kv| tasks::withdraw_run(kv, "r", &awaited)),
        0
    );
    assert_healthy(&mut kv);
}

#[test]
fn withdraw_run_with_nothing_awaited_moves_nothing() {
    let mut kv = MemKv::new();
    open(&mut kv, task("t").of_run("r"));
    assert_eq!(tasks::withdraw_run(&mut kv, "r", &[]), Ok(0));
    assert_eq!(stored(&mut kv, "t").state, TaskState::Open);
}

// ---- escalate -----------------------------------------------------------

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
    let t = tasks::escalate(&mut kv, "t").expect("escalates");
    assert_eq!(t.state, TaskState::Escalated);
    assert_eq!(t.assignee, None);
    assert_eq!(t.candidate_roles, names(&["a", "b", "c", "d"]));
    assert_eq!(t.escalate_to, names(&["c", "a", "d"]));
    assert_eq!(t.excluded_actors, names(&["mallory"]));
    assert_eq!(stored(&mut kv, "t"), t);
    assert_eq!(open_count(&mut kv), 1);
    // Escalating again changes nothing further.
    let again = tasks::escalate(&mut kv, "t").expect("escalates again");
    assert_eq!(again, t);
    assert_healthy(&mut kv);
}

#[test]
fn an_empty_audience_stays_empty_when_escalated() {
    let mut kv = MemKv::new();
    open(&mut kv, task("t").escalating_to(&["lead"]));
    let t = tasks::escalate(&mut kv, "t").expect("escalates");
    assert!(t.candidate_roles.is_empty());
    // Still offered to anyone, not only to leads.
    claim(&mut kv, "t", "bob", &["intern"]).expect("anyone may claim");
}

#[test]
fn escalating_a_settled_task_is_a_no_op() {
    let mut kv = MemKv::new();
    open(&mut kv, task("t").roles(&["a"]).escalating_to(&["b"]));
    claim(&mut kv, "t", "bob", &["a"]).expect("claims");
    tasks::settle(&mut kv, "t", Settlement::Completed, None).expect("settles");
    let before = stored(&mut kv, "t");
    let t = writes_nothing(&mut kv, |kv| tasks::escalate(kv, "t"));
    assert_eq!(t, before);
    assert_eq!(t.assignee.as_deref(), Some("bob"));
}

#[test]
fn escalating_an_unknown_task_is_not_found() {
    let mut kv = MemKv::new();
    let e = fails_cleanly(&mut kv, |kv| tasks::escalate(kv, "t"));
    assert_eq!(e, StoreError::NotFound("t".into()));
}

#[test]
fn an_escalated_task_is_queued_for_its_new_roles_and_never_overdue() {
    let mut kv = MemKv::new();
    open(
        &mut kv,
        task("t").roles(&["clerk"]).escalating_to(&["lead"]).due(10),
    );
    tasks::escalate(&mut kv, "t").expect("escalates");
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
    tasks::escalate(&mut kv, "a").expect("escalates");
    assert_eq!(open_count(&mut kv), 5);
    claim(&mut kv, "a", "bob", &[]).expect("claims");
    tasks::release(&mut kv, "a", "bob").expect("releases");
    assert_eq!(open_count(&mut kv), 5);
    tasks::settle(&mut kv, "a", Settlement::Completed, None).expect("settles");
    assert_eq!(open_count(&mut kv), 4);
    tasks::settle(&mut kv, "a", Settlement::Expired, None).expect("settle is a no-op");
    assert_eq!(open_count(&mut kv), 4);
    tasks::escalate(&mut kv, "a").expect("escalate is a no-op");
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
        tasks::escalate(&mut kv, id).expect("escalates");
    }
    claim(&mut kv, "escalated-then-claimed", "bob", &[]).expect("claims");
    claim(&mut kv, "escalated-then-released", "bob", &[]).expect("claims");
    tasks::release(&mut kv, "escalated-then-released", "bob").expect("releases");
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
        tasks::settle(&mut kv, id, s, None).expect("settles");
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
        tasks::settle(&mut kv, &t.id, Settlement::Expired, None).expect("settles");
    }
    let next = tasks::overdue(&mut kv, 100, 3).expect("overdue");
    assert_eq!(ids(&next), ["t3", "t4", "t5"]);
}
