//! The task verbs one row of the contract's Tasks table at a time: open, get,
//! the claim ladder, take-over, release, settle, withdraw-run and escalate.

use leasehold_host::{Error, Priority, Refusal, Settlement, StoreError, Task, TaskState, Tenant};
use leasehold_tests::*;

fn refusal(r: Result<impl std::fmt::Debug, Error>) -> Refusal {
    match r {
        Err(Error::Refused(why)) => why,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

fn stored(t: &Tenant, id: &str) -> Task {
    t.get(id).expect("get").expect("the task exists")
}

/// A task offered to reviewers that excludes bob, held by alice.
fn held_by_alice(t: &Tenant, id: &str) -> Task {
    t.open(&task(id, 10).roles(&["reviewer"]).excluding(&["bob"]))
        .expect("open");
    t.claim(id, "alice", &["reviewer"], None)
        .expect("alice claims")
}

// ---- open / get ----

#[test]
fn first_open_wins_and_a_second_open_returns_the_stored_task_unchanged() {
    let (t, _db) = temp_tenant();
    let first = t
        .open(&task("t1", 10).roles(&["reviewer"]))
        .expect("first open");
    let mut other = task("t1", 99).roles(&["clerk"]).priority(Priority::Urgent);
    other.kind = "reject".into();
    let second = t.open(&other).expect("second open answers");
    assert_eq!(second, first, "the second open must answer the stored task");
    assert_eq!(
        stored(&t, "t1"),
        first,
        "the second open must write nothing"
    );
    assert_eq!(t.open_count().expect("count"), 1);
    assert_consistent(&t);
}

#[test]
fn first_open_wins_even_after_the_task_has_moved_on() {
    let (t, _db) = temp_tenant();
    t.open(&task("t1", 10)).expect("open");
    t.claim("t1", "alice", &[], None).expect("claim");
    t.settle("t1", Settlement::Completed, None).expect("settle");
    let again = t.open(&task("t1", 10)).expect("reopen answers");
    assert_eq!(again.state, TaskState::Completed, "a reopen never revives");
    assert_eq!(again.assignee.as_deref(), Some("alice"));
    assert_eq!(t.open_count().expect("count"), 0);
    assert_consistent(&t);
}

#[test]
fn a_new_task_that_is_not_open_is_invalid_and_writes_nothing() {
    let (t, _db) = temp_tenant();
    for state in [
        TaskState::Claimed,
        TaskState::Escalated,
        TaskState::Completed,
        TaskState::Expired,
        TaskState::Withdrawn,
    ] {
        let mut bad = task("t1", 10);
        bad.state = state;
        if state == TaskState::Claimed {
            bad.assignee = Some("alice".into());
        }
        assert!(
            matches!(t.open(&bad), Err(Error::Store(StoreError::Invalid(_)))),
            "a new {state} task must be invalid"
        );
    }
    assert_eq!(t.get("t1").expect("get"), None);
    assert_eq!(t.open_count().expect("count"), 0);
    assert_consistent(&t);
}

#[test]
fn a_new_task_with_an_assignee_is_invalid_and_writes_nothing() {
    let (t, _db) = temp_tenant();
    let mut bad = task("t1", 10);
    bad.assignee = Some("alice".into());
    assert!(matches!(
        t.open(&bad),
        Err(Error::Store(StoreError::Invalid(_)))
    ));
    assert_eq!(t.get("t1").expect("get"), None);
    assert_eq!(t.open_count().expect("count"), 0);
}

#[test]
fn get_answers_none_for_an_unknown_id_and_the_stored_task_for_a_known_one() {
    let (t, _db) = temp_tenant();
    assert_eq!(t.get("nobody").expect("get"), None);
    let opened = t
        .open(
            &task("t1", 10)
                .roles(&["reviewer"])
                .in_case("case-9")
                .due(500),
        )
        .expect("open");
    let got = stored(&t, "t1");
    assert_eq!(got, opened);
    assert_eq!(got.case.as_deref(), Some("case-9"));
    assert_eq!(got.due_at, Some(500));
    assert_eq!(got.justification, r#"{"why":"test"}"#);
    assert_consistent(&t);
}

// ---- the claim ladder ----

#[test]
fn claiming_an_unknown_task_is_not_found() {
    let (t, _db) = temp_tenant();
    assert_eq!(
        refusal(t.claim("ghost", "alice", &["reviewer"], None)),
        Refusal::NotFound("ghost".into())
    );
}

#[test]
fn excluded_outranks_wrong_role_not_pending_and_already_claimed() {
    let (t, _db) = temp_tenant();
    held_by_alice(&t, "held");
    // bob is excluded, lacks the role, and the task is held by alice.
    assert_eq!(
        refusal(t.claim("held", "bob", &["clerk"], None)),
        Refusal::Excluded("bob".into())
    );
    assert_eq!(
        refusal(t.claim("held", "bob", &["reviewer"], None)),
        Refusal::Excluded("bob".into())
    );
    // ... and once it is settled, excluded still comes first.
    t.settle("held", Settlement::Completed, None)
        .expect("settle");
    assert_eq!(
        refusal(t.claim("held", "bob", &["clerk"], None)),
        Refusal::Excluded("bob".into())
    );
}

#[test]
fn wrong_role_outranks_not_pending_and_already_claimed() {
    let (t, _db) = temp_tenant();
    held_by_alice(&t, "held");
    assert_eq!(
        refusal(t.claim("held", "carol", &["clerk"], None)),
        Refusal::WrongRole("carol".into())
    );
    assert_eq!(
        refusal(t.claim("held", "carol", &[], None)),
        Refusal::WrongRole("carol".into()),
        "no roles at all admits only tasks open to anyone"
    );
    t.settle("held", Settlement::Expired, None).expect("settle");
    assert_eq!(
        refusal(t.claim("held", "carol", &["clerk"], None)),
        Refusal::WrongRole("carol".into())
    );
}

#[test]
fn not_pending_outranks_already_claimed_and_names_the_state() {
    let (t, _db) = temp_tenant();
    for (id, settlement) in [
        ("c", Settlement::Completed),
        ("e", Settlement::Expired),
        ("w", Settlement::Withdrawn),
    ] {
        held_by_alice(&t, id);
        assert!(t.settle(id, settlement, None).expect("settle"));
        // The settled task keeps alice as assignee, but it is no longer held.
        assert_eq!(
            refusal(t.claim(id, "dave", &["reviewer"], None)),
            Refusal::NotPending(settlement.state())
        );
        assert_eq!(
            refusal(t.claim(id, "alice", &["reviewer"], None)),
            Refusal::NotPending(settlement.state()),
            "the former holder's re-claim of a settled task is not idempotent success"
        );
    }
}

#[test]
fn a_task_held_by_another_is_already_claimed_naming_the_holder() {
    let (t, _db) = temp_tenant();
    held_by_alice(&t, "t1");
    assert_eq!(
        refusal(t.claim("t1", "dave", &["reviewer", "clerk"], None)),
        Refusal::AlreadyClaimed("alice".into())
    );
    assert_eq!(stored(&t, "t1").assignee.as_deref(), Some("alice"));
    assert_consistent(&t);
}

#[test]
fn a_reclaim_by_the_holder_is_idempotent_success() {
    let (t, _db) = temp_tenant();
    let first = held_by_alice(&t, "t1");
    let again = t
        .claim("t1", "alice", &["reviewer"], None)
        .expect("re-claim");
    assert_eq!(again, first);
    assert_eq!(again.state, TaskState::Claimed);
    assert_eq!(stored(&t, "t1"), first);
    assert_eq!(t.open_count().expect("count"), 1);
    assert_consistent(&t);
}

#[test]
fn a_claim_takes_an_open_task_out_of_the_queue_and_names_the_assignee() {
    let (t, _db) = temp_tenant();
    t.open(&task("t1", 10).roles(&["reviewer"])).expect("open");
    let claimed = t
        .claim("t1", "alice", &["clerk", "reviewer"], None)
        .expect("claim");
    assert_eq!(claimed.state, TaskState::Claimed);
    assert_eq!(claimed.assignee.as_deref(), Some("alice"));
    assert_eq!(stored(&t, "t1"), claimed);
    let page = t
        .queue(&query(&["reviewer"], None, 10, None))
        .expect("queue");
    assert!(page.tasks.is_empty(), "a claimed task is not queued");
    assert_consistent(&t);
}

#[test]
fn a_task_with_no_candidate_roles_is_claimable_by_anyone() {
    let (t, _db) = temp_tenant();
    t.open(&task("t1", 10)).expect("open");
    let claimed = t
        .claim("t1", "zed", &[], None)
        .expect("claim with no roles");
    assert_eq!(claimed.assignee.as_deref(), Some("zed"));
}

#[test]
fn a_refused_claim_writes_nothing() {
    let (t, _db) = temp_tenant();
    t.open(&task("t1", 10).roles(&["reviewer"]).excluding(&["bob"]))
        .expect("open");
    let before = stored(&t, "t1");
    let _ = refusal(t.claim("t1", "bob", &["reviewer"], None));
    let _ = refusal(t.claim("t1", "carol", &["clerk"], None));
    assert_eq!(stored(&t, "t1"), before);
    assert_eq!(t.open_count().expect("count"), 1);
    assert_consistent(&t);
}

// ---- take-over ----

#[test]
fn take_over_moves_the_claim_from_the_holder_to_the_actor() {
    let (t, _db) = temp_tenant();
    held_by_alice(&t, "t1");
    let moved = t
        .take_over("t1", "alice", "dave", &["reviewer"], None)
        .expect("take over");
    assert_eq!(moved.state, TaskState::Claimed);
    assert_eq!(moved.assignee.as_deref(), Some("dave"));
    assert_eq!(stored(&t, "t1"), moved);
    assert_eq!(
        refusal(t.claim("t1", "alice", &["reviewer"], None)),
        Refusal::AlreadyClaimed("dave".into())
    );
    assert_eq!(t.open_count().expect("count"), 1);
    assert_consistent(&t);
}

#[test]
fn take_over_runs_the_claim_ladder_for_the_actor_before_the_compare_and_swap() {
    let (t, _db) = temp_tenant();
    assert_eq!(
        refusal(t.take_over("ghost", "alice", "dave", &["reviewer"], None)),
        Refusal::NotFound("ghost".into())
    );
    held_by_alice(&t, "t1");
    // Each of these would also fail the swap (from is not the holder), and
    // the ladder rung must win.
    assert_eq!(
        refusal(t.take_over("t1", "mallory", "bob", &["clerk"], None)),
        Refusal::Excluded("bob".into())
    );
    assert_eq!(
        refusal(t.take_over("t1", "mallory", "carol", &["clerk"], None)),
        Refusal::WrongRole("carol".into())
    );
    // A barred actor is refused even when `from` really is the holder.
    assert_eq!(
        refusal(t.take_over("t1", "alice", "bob", &["reviewer"], None)),
        Refusal::Excluded("bob".into())
    );
    assert_eq!(
        refusal(t.take_over("t1", "alice", "carol", &["clerk"], None)),
        Refusal::WrongRole("carol".into())
    );
    t.settle("t1", Settlement::Completed, None).expect("settle");
    assert_eq!(
        refusal(t.take_over("t1", "alice", "dave", &["reviewer"], None)),
        Refusal::NotPending(TaskState::Completed),
        "a settled task is not pending, even though it still names alice"
    );
    assert_eq!(stored(&t, "t1").assignee.as_deref(), Some("alice"));
    assert_consistent(&t);
}

#[test]
fn take_over_from_someone_who_does_not_hold_the_task_is_not_held() {
    let (t, _db) = temp_tenant();
    held_by_alice(&t, "t1");
    assert_eq!(
        refusal(t.take_over("t1", "erin", "dave", &["reviewer"], None)),
        Refusal::NotHeld("erin".into())
    );
    assert_eq!(
        stored(&t, "t1").assignee.as_deref(),
        Some("alice"),
        "a stale take-over must not displace the holder"
    );
    assert_consistent(&t);
}

#[test]
fn take_over_of_an_unheld_task_is_not_held() {
    let (t, _db) = temp_tenant();
    t.open(
        &task("open", 10)
            .roles(&["reviewer"])
            .escalating_to(&["manager"]),
    )
    .expect("open");
    assert_eq!(
        refusal(t.take_over("open", "alice", "dave", &["reviewer"], None)),
        Refusal::NotHeld("alice".into())
    );
    assert_eq!(
        refusal(t.take_over("open", "dave", "dave", &["reviewer"], None)),
        Refusal::NotHeld("dave".into()),
        "from == actor on a task nobody holds is not success: use claim"
    );
    t.escalate("open").expect("escalate");
    assert_eq!(
        refusal(t.take_over("open", "alice", "dave", &["manager"], None)),
        Refusal::NotHeld("alice".into())
    );
    let now = stored(&t, "open");
    assert_eq!(now.state, TaskState::Escalated);
    assert_eq!(now.assignee, None);
    assert_consistent(&t);
}

#[test]
fn take_over_from_oneself_is_idempotent_success() {
    let (t, _db) = temp_tenant();
    let held = held_by_alice(&t, "t1");
    let same = t
        .take_over("t1", "alice", "alice", &["reviewer"], None)
        .expect("self take-over");
    assert_eq!(same, held);
    assert_eq!(stored(&t, "t1"), held);
    assert_consistent(&t);
}

// ---- release ----

#[test]
fn only_the_holder_may_release_and_the_task_goes_back_to_open() {
    let (t, _db) = temp_tenant();
    assert_eq!(
        refusal(t.release("ghost", "alice")),
        Refusal::NotFound("ghost".into())
    );
    held_by_alice(&t, "t1");
    assert_eq!(
        refusal(t.release("t1", "dave")),
        Refusal::NotHeld("dave".into())
    );
    assert_eq!(stored(&t, "t1").assignee.as_deref(), Some("alice"));
    t.release("t1", "alice").expect("the holder releases");
    let now = stored(&t, "t1");
    assert_eq!(now.state, TaskState::Open);
    assert_eq!(now.assignee, None);
    assert_eq!(
        refusal(t.release("t1", "alice")),
        Refusal::NotHeld("alice".into()),
        "an open task is held by nobody"
    );
    let page = t
        .queue(&query(&["reviewer"], None, 10, None))
        .expect("queue");
    assert_eq!(ids(&page.tasks), ["t1"], "a released task is queued again");
    assert_eq!(t.open_count().expect("count"), 1);
    assert_consistent(&t);
}

#[test]
fn a_settled_task_cannot_be_released_even_by_its_last_holder() {
    let (t, _db) = temp_tenant();
    held_by_alice(&t, "t1");
    t.settle("t1", Settlement::Completed, None).expect("settle");
    assert_eq!(
        refusal(t.release("t1", "alice")),
        Refusal::NotHeld("alice".into())
    );
    assert_eq!(state_of(&t, "t1"), TaskState::Completed);
    assert_consistent(&t);
}

#[test]
fn a_released_task_returns_to_escalated_if_it_was_ever_escalated() {
    let (t, _db) = temp_tenant();
    t.open(
        &task("t1", 10)
            .roles(&["reviewer"])
            .escalating_to(&["manager"])
            .due(100),
    )
    .expect("open");
    t.claim("t1", "alice", &["reviewer"], None).expect("claim");
    t.escalate("t1").expect("escalate");
    t.claim("t1", "mona", &["manager"], None)
        .expect("manager claims");
    t.release("t1", "mona").expect("release");
    let now = stored(&t, "t1");
    assert_eq!(now.state, TaskState::Escalated);
    assert_eq!(now.assignee, None);
    assert_eq!(now.candidate_roles, ["reviewer", "manager"]);
    let page = t
        .queue(&query(&["manager"], None, 10, None))
        .expect("queue");
    assert_eq!(ids(&page.tasks), ["t1"], "the audience stays widened");
    assert!(
        t.overdue(1_000, 10).expect("overdue").is_empty(),
        "an escalated task never returns to the overdue scan"
    );
    assert_consistent(&t);
}

// ---- settle ----

#[test]
fn settle_moves_a_pending_task_once_then_answers_false_and_keeps_the_assignee() {
    let (t, _db) = temp_tenant();
    held_by_alice(&t, "t1");
    assert!(t.settle("t1", Settlement::Completed, None).expect("settle"));
    assert!(
        !t.settle("t1", Settlement::Expired, None)
            .expect("second settle"),
        "the loser of a settle race must be told"
    );
    assert!(
        !t.settle("t1", Settlement::Completed, None)
            .expect("third settle")
    );
    let now = stored(&t, "t1");
    assert_eq!(now.state, TaskState::Completed, "the winner stands");
    assert_eq!(now.assignee.as_deref(), Some("alice"));
    assert_eq!(t.open_count().expect("count"), 0);
    assert_consistent(&t);
}

#[test]
fn settle_accepts_every_pending_state() {
    let (t, _db) = temp_tenant();
    t.open(&task("open", 10)).expect("open");
    held_by_alice(&t, "claimed");
    t.open(&task("esc", 10).roles(&["reviewer"])).expect("open");
    t.escalate("esc").expect("escalate");
    assert_eq!(t.open_count().expect("count"), 3);
    for (id, s) in [
        ("open", Settlement::Withdrawn),
        ("claimed", Settlement::Expired),
        ("esc", Settlement::Completed),
    ] {
        assert!(t.settle(id, s, None).expect("settle"), "{id} is pending");
        assert_eq!(state_of(&t, id), s.state());
    }
    assert_eq!(t.open_count().expect("count"), 0);
    assert_consistent(&t);
}

#[test]
fn settling_an_unknown_task_is_not_found() {
    let (t, _db) = temp_tenant();
    // A claim-error since settle may check the holder: the same not-found
    // rung as claim's.
    let r = t.settle("ghost", Settlement::Completed, None);
    assert!(
        matches!(&r, Err(e @ Error::Refused(Refusal::NotFound(id))) if id == "ghost" && e.is_refusal()),
        "{r:?}"
    );
}

// ---- withdraw-run ----

#[test]
fn withdraw_run_settles_only_the_runs_still_pending_awaited_tasks() {
    let (t, _db) = temp_tenant();
    t.open(&task("a-open", 10).in_run("r")).expect("open");
    t.open(&task("a-claimed", 11).in_run("r")).expect("open");
    t.claim("a-claimed", "alice", &[], None).expect("claim");
    t.open(&task("a-esc", 12).in_run("r")).expect("open");
    t.escalate("a-esc").expect("escalate");
    t.open(&task("a-done", 13).in_run("r")).expect("open");
    t.settle("a-done", Settlement::Completed, None)
        .expect("settle");
    t.open(&task("a-unawaited", 14).in_run("r")).expect("open");
    t.open(&task("b-other", 15).in_run("r2")).expect("open");

    let moved = t
        .withdraw_run(
            "r",
            &[
                "a-open",
                "a-claimed",
                "a-esc",
                "a-done",
                "b-other",
                "ghost",
                "a-open",
            ],
        )
        .expect("withdraw");
    assert_eq!(moved, 3);
    for id in ["a-open", "a-claimed", "a-esc"] {
        assert_eq!(state_of(&t, id), TaskState::Withdrawn, "{id}");
    }
    assert_eq!(stored(&t, "a-claimed").assignee.as_deref(), Some("alice"));
    assert_eq!(state_of(&t, "a-done"), TaskState::Completed);
    assert_eq!(state_of(&t, "a-unawaited"), TaskState::Open);
    assert_eq!(state_of(&t, "b-other"), TaskState::Open);
    assert_eq!(t.get("ghost").expect("get"), None);
    assert_eq!(t.open_count().expect("count"), 2);
    assert_eq!(
        t.withdraw_run("r", &["a-open", "a-claimed", "a-esc"])
            .expect("withdraw again"),
        0,
        "a repeat moves nothing"
    );
    assert_consistent(&t);
}

// ---- escalate ----

#[test]
fn escalation_sets_escalated_clears_the_assignee_and_widens_the_audience_in_order() {
    let (t, _db) = temp_tenant();
    t.open(
        &task("t1", 10)
            .roles(&["reviewer", "legal"])
            .escalating_to(&["manager", "legal", "director"])
            .excluding(&["bob"]),
    )
    .expect("open");
    t.claim("t1", "alice", &["reviewer"], None).expect("claim");
    let esc = t.escalate("t1").expect("escalate");
    assert_eq!(esc.state, TaskState::Escalated);
    assert_eq!(esc.assignee, None);
    assert_eq!(
        esc.candidate_roles,
        ["reviewer", "legal", "manager", "director"]
    );
    assert_eq!(esc.excluded_actors, ["bob"], "exclusions are unchanged");
    assert_eq!(stored(&t, "t1"), esc);
    assert_eq!(
        refusal(t.claim("t1", "bob", &["director"], None)),
        Refusal::Excluded("bob".into()),
        "a widened audience does not readmit an excluded actor"
    );
    let again = t.escalate("t1").expect("escalate twice");
    assert_eq!(
        again.candidate_roles,
        ["reviewer", "legal", "manager", "director"],
        "a second escalation adds no duplicates"
    );
    assert_eq!(t.open_count().expect("count"), 1);
    let page = t
        .queue(&query(&["director"], None, 10, None))
        .expect("queue");
    assert_eq!(ids(&page.tasks), ["t1"]);
    assert_consistent(&t);
}

#[test]
fn escalating_a_task_open_to_anyone_keeps_its_audience_empty() {
    let (t, _db) = temp_tenant();
    t.open(&task("t1", 10).escalating_to(&["manager"]))
        .expect("open");
    let esc = t.escalate("t1").expect("escalate");
    assert_eq!(esc.state, TaskState::Escalated);
    assert!(
        esc.candidate_roles.is_empty(),
        "an empty audience already means anyone; adding roles would narrow it"
    );
    let page = t.queue(&query(&["clerk"], None, 10, None)).expect("queue");
    assert_eq!(ids(&page.tasks), ["t1"], "still offered to anyone");
    assert_consistent(&t);
}

#[test]
fn escalating_a_settled_task_changes_nothing() {
    let (t, _db) = temp_tenant();
    t.open(
        &task("t1", 10)
            .roles(&["reviewer"])
            .escalating_to(&["manager"]),
    )
    .expect("open");
    t.claim("t1", "alice", &["reviewer"], None).expect("claim");
    t.settle("t1", Settlement::Completed, None).expect("settle");
    let before = stored(&t, "t1");
    let answer = t.escalate("t1").expect("escalate a settled task");
    assert_eq!(answer, before, "the task as it stands");
    assert_eq!(stored(&t, "t1"), before);
    assert_eq!(t.open_count().expect("count"), 0);
    assert_consistent(&t);
}

#[test]
fn escalating_an_unknown_task_is_not_found() {
    let (t, _db) = temp_tenant();
    // A verb that changes one task answers a claim error (0.3.0 on).
    assert!(matches!(
        t.escalate("ghost"),
        Err(Error::Refused(Refusal::NotFound(id))) if id == "ghost"
    ));
}

#[test]
fn open_stores_each_list_without_duplicates_keeping_the_first_occurrence() {
    let (t, _db) = temp_tenant();
    let opened = t
        .open(
            &task("t1", 10)
                .roles(&["legal", "reviewer", "legal"])
                .escalating_to(&["manager", "manager", "legal"])
                .excluding(&["bob", "carol", "bob"]),
        )
        .expect("open");
    assert_eq!(opened.candidate_roles, ["legal", "reviewer"]);
    assert_eq!(opened.escalate_to, ["manager", "legal"]);
    assert_eq!(opened.excluded_actors, ["bob", "carol"]);
    assert_eq!(stored(&t, "t1"), opened);
    let esc = t.escalate("t1").expect("escalate");
    assert_eq!(esc.candidate_roles, ["legal", "reviewer", "manager"]);
    assert_consistent(&t);
}
