//! `open` and `get`: the first open of an id wins and a repeat answers the
//! stored task whatever its copy carries; a new task must be open and
//! unheld; inputs are checked before existence; lists are deduplicated in
//! order and the justification kept byte for byte; `get` answers the stored
//! task or none.

use super::worklist_support::{claim, open_count};
use super::*;
use crate::tasks;

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
