//! Leased claims through the real component: a claim held until a lease
//! ends, renewal, lapsed claims returned to the queue, holder-checked
//! settlement and claim-next. Races between callers are in `concurrency`.

use leasehold_host::{Error, Lease, Priority, Refusal, Settlement, Task, TaskState, Tenant};
use leasehold_tests::*;

fn lease(now: i64, lease_ms: u32) -> Option<Lease> {
    Some(Lease { now, lease_ms })
}

/// A task offered to reviewers, created at `at`.
fn review(id: &str, at: i64) -> Task {
    task(id, at).roles(&["reviewer"])
}

fn refusal<T: std::fmt::Debug>(r: Result<T, Error>) -> Refusal {
    match r {
        Err(Error::Refused(refusal)) => refusal,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

fn holder(t: &Tenant, id: &str) -> (TaskState, Option<String>, Option<i64>) {
    let task = t.get(id).expect("get").expect("exists");
    (task.state, task.assignee, task.lease_until)
}

fn reviewers_queue(t: &Tenant, actor: &str) -> Vec<String> {
    ids(&t
        .queue(&query(&["reviewer"], Some(actor), 100, None))
        .expect("queue")
        .tasks)
}

// ---- leased claims ------------------------------------------------------

#[test]
fn a_leased_claim_holds_the_task_until_now_plus_lease_ms() {
    let (t, _db) = temp_tenant();
    t.open(&review("t1", 1)).expect("open");
    let got = t
        .claim("t1", "alice", &["reviewer"], lease(1_000, 30_000))
        .expect("claims");
    assert_eq!(got.state, TaskState::Claimed);
    assert_eq!(got.lease_until, Some(31_000));
    assert_eq!(
        holder(&t, "t1"),
        (TaskState::Claimed, Some("alice".into()), Some(31_000))
    );
    assert_eq!(t.leased_count().expect("count"), 1);
    assert_eq!(t.next_lease_end().expect("next"), Some(31_000));
    // Held: nobody else gets it, and it is not offered.
    assert_eq!(
        refusal(t.claim("t1", "bob", &["reviewer"], lease(1_001, 10))),
        Refusal::AlreadyClaimed("alice".into())
    );
    assert!(reviewers_queue(&t, "bob").is_empty());
    assert_consistent(&t);
}

#[test]
fn a_claim_without_a_lease_holds_until_released_and_is_never_reclaimed() {
    let (t, _db) = temp_tenant();
    t.open(&review("t1", 1)).expect("open");
    let got = t.claim("t1", "alice", &["reviewer"], None).expect("claims");
    assert_eq!(got.lease_until, None);
    assert_eq!(t.leased_count().expect("count"), 0);
    assert_eq!(t.next_lease_end().expect("next"), None);
    let far = 253_402_300_799_999;
    assert!(t.reclaim_lapsed(far, 1000).expect("reclaim").is_empty());
    assert_eq!(
        holder(&t, "t1"),
        (TaskState::Claimed, Some("alice".into()), None)
    );
    t.release("t1", "alice").expect("releases");
    assert_eq!(state_of(&t, "t1"), TaskState::Open);
}

#[test]
fn a_lease_may_end_past_year_9999_and_is_stored_as_computed() {
    let (t, _db) = temp_tenant();
    t.open(&review("t1", 1)).expect("open");
    let (max, week) = (253_402_300_799_999, 604_800_000);
    let got = t
        .claim("t1", "alice", &["reviewer"], lease(max, week))
        .expect("claims");
    assert_eq!(got.lease_until, Some(max + i64::from(week)));
    assert_eq!(
        t.next_lease_end().expect("next"),
        Some(max + i64::from(week))
    );
    assert!(t.reclaim_lapsed(max, 10).expect("reclaim").is_empty());
    assert_consistent(&t);
}

#[test]
fn re_claiming_by_the_holder_with_a_lease_sets_the_new_lease() {
    let (t, _db) = temp_tenant();
    t.open(&review("t1", 1)).expect("open");
    t.open(&review("t2", 2)).expect("open");
    t.claim("t1", "alice", &["reviewer"], lease(0, 100))
        .expect("claims");
    let longer = t
        .claim("t1", "alice", &["reviewer"], lease(50, 1_000))
        .expect("re-claims");
    assert_eq!(longer.lease_until, Some(1_050));
    // Set, not extended: a shorter lease ends sooner.
    let shorter = t
        .claim("t1", "alice", &["reviewer"], lease(60, 10))
        .expect("re-claims");
    assert_eq!(shorter.lease_until, Some(70));
    // Without a lease the repeat changes nothing, either way round.
    let again = t.claim("t1", "alice", &["reviewer"], None).expect("again");
    assert_eq!(again.lease_until, Some(70));
    t.claim("t2", "alice", &["reviewer"], None).expect("claims");
    let leased = t
        .claim("t2", "alice", &["reviewer"], lease(5, 5))
        .expect("re-claims");
    assert_eq!(leased.lease_until, Some(10));
    assert_eq!(t.leased_count().expect("count"), 2);
    assert_eq!(t.next_lease_end().expect("next"), Some(10));
    assert_consistent(&t);
}

#[test]
fn take_over_with_a_lease_gives_the_new_holder_its_own_lease() {
    let (t, _db) = temp_tenant();
    t.open(&review("t1", 1)).expect("open");
    t.claim("t1", "alice", &["reviewer"], lease(0, 100))
        .expect("claims");
    let got = t
        .take_over("t1", "alice", "bob", &["reviewer"], lease(40, 500))
        .expect("takes over");
    assert_eq!(got.assignee.as_deref(), Some("bob"));
    assert_eq!(got.lease_until, Some(540));
    // Alice's lease went with her claim: at 100 nothing lapses.
    assert!(t.reclaim_lapsed(100, 10).expect("reclaim").is_empty());
    // Without a lease the new holder holds until released.
    let got = t
        .take_over("t1", "bob", "carol", &["reviewer"], None)
        .expect("takes over");
    assert_eq!(got.lease_until, None);
    assert_eq!(t.leased_count().expect("count"), 0);
    assert!(t.reclaim_lapsed(10_000, 10).expect("reclaim").is_empty());
    // The holder taking over from themselves: a lease sets the new end.
    let got = t
        .take_over("t1", "carol", "carol", &["reviewer"], lease(7, 3))
        .expect("idempotent");
    assert_eq!(got.lease_until, Some(10));
    assert_consistent(&t);
}

// ---- renew ------------------------------------------------------------------

#[test]
fn renew_sets_the_holders_lease_to_end_at_now_plus_lease_ms() {
    let (t, _db) = temp_tenant();
    t.open(&review("t1", 1)).expect("open");
    t.claim("t1", "alice", &["reviewer"], lease(0, 100))
        .expect("claims");
    let got = t.renew("t1", "alice", 90, 1_000).expect("renews");
    assert_eq!(got.lease_until, Some(1_090));
    assert_eq!(got.assignee.as_deref(), Some("alice"));
    assert_eq!(t.next_lease_end().expect("next"), Some(1_090));
    // The old end means nothing any more.
    assert!(t.reclaim_lapsed(1_089, 10).expect("reclaim").is_empty());
    assert_eq!(ids(&t.reclaim_lapsed(1_090, 10).expect("reclaim")), ["t1"]);
    assert_consistent(&t);
}

#[test]
fn renew_by_anyone_but_the_holder_of_a_leased_claim_is_not_held() {
    let (t, _db) = temp_tenant();
    for id in ["leased", "unleased", "open", "settled"] {
        t.open(&review(id, 1)).expect("open");
    }
    t.claim("leased", "alice", &["reviewer"], lease(0, 100))
        .expect("claims");
    t.claim("unleased", "alice", &["reviewer"], None)
        .expect("claims");
    t.claim("settled", "alice", &["reviewer"], lease(0, 100))
        .expect("claims");
    t.settle("settled", Settlement::Completed, None)
        .expect("settles");
    for (id, actor) in [
        ("leased", "bob"),
        ("unleased", "alice"),
        ("open", "alice"),
        ("settled", "alice"),
    ] {
        assert_eq!(
            refusal(t.renew(id, actor, 50, 100)),
            Refusal::NotHeld(actor.into()),
            "{id} renewed by {actor}"
        );
    }
    assert_eq!(
        refusal(t.renew("nope", "alice", 50, 100)),
        Refusal::NotFound("nope".into())
    );
    assert_eq!(
        holder(&t, "leased"),
        (TaskState::Claimed, Some("alice".into()), Some(100))
    );
    assert_eq!(holder(&t, "unleased").2, None);
    assert_consistent(&t);
}

#[test]
fn renewing_after_the_lease_lapsed_but_before_the_reclaim_keeps_the_task() {
    let (t, _db) = temp_tenant();
    t.open(&review("t1", 1)).expect("open");
    t.claim("t1", "alice", &["reviewer"], lease(0, 100))
        .expect("claims");
    // Time alone ends nothing: at 150 the lease has lapsed, nobody swept.
    let got = t.renew("t1", "alice", 150, 100).expect("renews");
    assert_eq!(got.lease_until, Some(250));
    assert!(
        t.reclaim_lapsed(200, 10).expect("reclaim").is_empty(),
        "the renewed task was moved by its stale lease"
    );
    assert_eq!(
        holder(&t, "t1"),
        (TaskState::Claimed, Some("alice".into()), Some(250))
    );
    assert_consistent(&t);
}

// ---- reclaim-lapsed ---------------------------------------------------------

#[test]
fn a_lease_that_ends_exactly_at_now_is_reclaimed() {
    let (t, _db) = temp_tenant();
    t.open(&review("t1", 1)).expect("open");
    t.claim("t1", "alice", &["reviewer"], lease(1_000, 500))
        .expect("claims");
    assert!(
        t.reclaim_lapsed(1_499, 10).expect("reclaim").is_empty(),
        "reclaimed a millisecond early"
    );
    let moved = t.reclaim_lapsed(1_500, 10).expect("reclaim");
    assert_eq!(ids(&moved), ["t1"]);
    assert_eq!(moved[0].state, TaskState::Open);
    assert_eq!(moved[0].assignee, None);
    assert_eq!(moved[0].lease_until, None);
    assert_eq!(holder(&t, "t1"), (TaskState::Open, None, None));
    assert_eq!(t.leased_count().expect("count"), 0);
    assert_eq!(t.next_lease_end().expect("next"), None);
    assert_consistent(&t);
}

#[test]
fn reclaim_lapsed_moves_tasks_in_lease_end_order_ties_by_id_up_to_limit() {
    let (t, _db) = temp_tenant();
    // (id, lease end)
    let leases = [("d", 30), ("b", 20), ("c", 20), ("a", 40), ("live", 101)];
    for (i, (id, end)) in leases.iter().enumerate() {
        t.open(&review(id, i as i64)).expect("open");
        t.claim(id, "alice", &["reviewer"], lease(0, *end))
            .expect("claims");
    }
    let first = t.reclaim_lapsed(100, 3).expect("reclaim");
    assert_eq!(ids(&first), ["b", "c", "d"]);
    let rest = t.reclaim_lapsed(100, 3).expect("reclaim");
    assert_eq!(ids(&rest), ["a"]);
    assert!(t.reclaim_lapsed(100, 3).expect("reclaim").is_empty());
    assert_eq!(holder(&t, "live").1.as_deref(), Some("alice"));
    assert_eq!(t.leased_count().expect("count"), 1);
    assert_consistent(&t);
}

#[test]
fn reclaiming_an_escalated_task_returns_it_escalated_with_its_widened_audience() {
    let (t, _db) = temp_tenant();
    t.open(&review("t1", 1).escalating_to(&["lead"]).due(10))
        .expect("open");
    t.escalate("t1").expect("escalates");
    let got = t
        .claim("t1", "lena", &["lead"], lease(20, 10))
        .expect("a lead claims");
    assert_eq!(got.lease_until, Some(30));
    let moved = t.reclaim_lapsed(30, 10).expect("reclaim");
    assert_eq!(ids(&moved), ["t1"]);
    let back = &moved[0];
    assert_eq!(back.state, TaskState::Escalated);
    assert_eq!(back.assignee, None);
    assert_eq!(back.candidate_roles, ["reviewer", "lead"]);
    // Offered to leads again, and still never overdue.
    let leads = t
        .queue(&query(&["lead"], Some("lena"), 10, None))
        .expect("queue");
    assert_eq!(ids(&leads.tasks), ["t1"]);
    assert!(t.overdue(1_000, 10).expect("overdue").is_empty());
    assert_consistent(&t);
}

#[test]
fn a_task_settled_released_or_renewed_is_never_moved_by_its_old_lease() {
    let (t, _db) = temp_tenant();
    for id in ["settled", "released", "renewed", "reclaimed-then-claimed"] {
        t.open(&review(id, 1)).expect("open");
        t.claim(id, "alice", &["reviewer"], lease(0, 100))
            .expect("claims");
    }
    t.settle("settled", Settlement::Completed, Some("alice"))
        .expect("settles");
    t.release("released", "alice").expect("releases");
    t.renew("renewed", "alice", 50, 1_000).expect("renews");
    // Swept once, then claimed again without a lease by someone else.
    assert_eq!(
        ids(&t.reclaim_lapsed(100, 1).expect("reclaim")),
        ["reclaimed-then-claimed"]
    );
    t.claim("reclaimed-then-claimed", "bob", &["reviewer"], None)
        .expect("bob claims");
    assert!(t.reclaim_lapsed(500, 100).expect("reclaim").is_empty());
    assert_eq!(state_of(&t, "settled"), TaskState::Completed);
    assert_eq!(
        holder(&t, "settled"),
        (TaskState::Completed, Some("alice".into()), None)
    );
    assert_eq!(holder(&t, "released"), (TaskState::Open, None, None));
    assert_eq!(
        holder(&t, "renewed"),
        (TaskState::Claimed, Some("alice".into()), Some(1_050))
    );
    assert_eq!(
        holder(&t, "reclaimed-then-claimed"),
        (TaskState::Claimed, Some("bob".into()), None)
    );
    assert_consistent(&t);
}

#[test]
fn a_reclaimed_task_is_offered_again_and_another_may_claim_it() {
    let (t, _db) = temp_tenant();
    t.open(&review("t1", 1)).expect("open");
    t.claim("t1", "alice", &["reviewer"], lease(0, 100))
        .expect("claims");
    assert!(reviewers_queue(&t, "bob").is_empty());
    t.reclaim_lapsed(100, 10).expect("reclaim");
    assert_eq!(reviewers_queue(&t, "bob"), ["t1"]);
    let got = t.claim("t1", "bob", &["reviewer"], None).expect("claims");
    assert_eq!(got.assignee.as_deref(), Some("bob"));
    // Alice's claim is gone: she may not release, renew or settle it.
    assert_eq!(
        refusal(t.release("t1", "alice")),
        Refusal::NotHeld("alice".into())
    );
    assert_eq!(
        refusal(t.renew("t1", "alice", 101, 100)),
        Refusal::NotHeld("alice".into())
    );
}

#[test]
fn reclaim_lapsed_with_nothing_lapsed_writes_nothing() {
    let db = TestDb::new();
    {
        let engine = db.engine();
        let t = engine.tenant("acme").expect("tenant");
        t.open(&review("t1", 1)).expect("open");
        t.claim("t1", "alice", &["reviewer"], lease(0, 100))
            .expect("claims");
    }
    let before = db.raw_all();
    {
        let engine = db.engine();
        let t = engine.tenant("acme").expect("tenant");
        assert!(t.reclaim_lapsed(99, 10).expect("reclaim").is_empty());
    }
    assert_eq!(db.raw_all(), before);
}

// ---- settle with a holder -------------------------------------------------

#[test]
fn settle_with_the_holder_settles_and_keeps_the_assignee() {
    let (t, _db) = temp_tenant();
    t.open(&review("t1", 1)).expect("open");
    t.claim("t1", "alice", &["reviewer"], lease(0, 100))
        .expect("claims");
    assert!(
        t.settle("t1", Settlement::Completed, Some("alice"))
            .expect("settles")
    );
    assert_eq!(
        holder(&t, "t1"),
        (TaskState::Completed, Some("alice".into()), None)
    );
    assert_eq!(t.leased_count().expect("count"), 0);
    assert_consistent(&t);
}

#[test]
fn a_settle_with_a_stale_holder_is_not_held_and_changes_nothing() {
    let (t, _db) = temp_tenant();
    t.open(&review("t1", 1)).expect("open");
    t.claim("t1", "alice", &["reviewer"], lease(0, 100))
        .expect("alice claims");
    // Alice's lease lapses and is swept; bob now holds the task.
    t.reclaim_lapsed(100, 10).expect("reclaim");
    t.claim("t1", "bob", &["reviewer"], lease(101, 100))
        .expect("bob claims");
    // Alice's late decision must not settle bob's task.
    assert_eq!(
        refusal(t.settle("t1", Settlement::Completed, Some("alice"))),
        Refusal::NotHeld("alice".into())
    );
    assert_eq!(
        holder(&t, "t1"),
        (TaskState::Claimed, Some("bob".into()), Some(201))
    );
    assert!(
        t.settle("t1", Settlement::Completed, Some("bob"))
            .expect("bob settles")
    );
    // Once settled it is held by nobody: a holder-checked settle refuses.
    assert_eq!(
        refusal(t.settle("t1", Settlement::Expired, Some("bob"))),
        Refusal::NotHeld("bob".into())
    );
    assert_eq!(state_of(&t, "t1"), TaskState::Completed);
    assert_consistent(&t);
}

#[test]
fn settle_with_a_holder_refuses_an_unheld_task_and_an_unknown_id() {
    let (t, _db) = temp_tenant();
    t.open(&review("t1", 1)).expect("open");
    assert_eq!(
        refusal(t.settle("t1", Settlement::Withdrawn, Some("alice"))),
        Refusal::NotHeld("alice".into())
    );
    assert_eq!(state_of(&t, "t1"), TaskState::Open);
    assert_eq!(
        refusal(t.settle("nope", Settlement::Withdrawn, Some("alice"))),
        Refusal::NotFound("nope".into())
    );
    assert_eq!(
        refusal(t.settle("nope", Settlement::Withdrawn, None)),
        Refusal::NotFound("nope".into())
    );
}

#[test]
fn settle_without_a_holder_is_a_compare_and_set_from_pending_and_ends_the_lease() {
    let (t, _db) = temp_tenant();
    t.open(&review("t1", 1)).expect("open");
    t.claim("t1", "alice", &["reviewer"], lease(0, 100))
        .expect("claims");
    assert!(t.settle("t1", Settlement::Expired, None).expect("settles"));
    assert!(
        !t.settle("t1", Settlement::Completed, None)
            .expect("answers")
    );
    assert_eq!(
        holder(&t, "t1"),
        (TaskState::Expired, Some("alice".into()), None)
    );
    assert!(t.reclaim_lapsed(1_000, 10).expect("reclaim").is_empty());
    assert_consistent(&t);
}

// ---- claim-next ---------------------------------------------------------------

#[test]
fn claim_next_claims_the_first_task_of_the_queue_in_queue_order() {
    let (t, _db) = temp_tenant();
    t.open(&review("normal-old", 1)).expect("open");
    t.open(&review("normal-new", 2)).expect("open");
    t.open(&review("urgent", 3).priority(Priority::Urgent))
        .expect("open");
    t.open(&review("high-b", 4).priority(Priority::High))
        .expect("open");
    t.open(&review("high-a", 4).priority(Priority::High))
        .expect("open");
    t.open(&task("anyone", 5).priority(Priority::Low))
        .expect("open");
    // Not for ann: she is excluded, or lacks the role, or it is settled.
    t.open(
        &review("barred", 0)
            .priority(Priority::Urgent)
            .excluding(&["ann"]),
    )
    .expect("open");
    t.open(&task("leads", 0).roles(&["lead"]).priority(Priority::Urgent))
        .expect("open");
    t.open(&review("done", 0).priority(Priority::Urgent))
        .expect("open");
    t.settle("done", Settlement::Withdrawn, None)
        .expect("settles");

    let q = query(&["reviewer"], Some("ann"), 1, None);
    let mut claimed = Vec::new();
    loop {
        let head = t
            .queue(&q)
            .expect("queue")
            .tasks
            .first()
            .map(|t| t.id.clone());
        let got = t.claim_next(&q, None).expect("claim-next");
        assert_eq!(got.as_ref().map(|t| t.id.clone()), head, "the queue's head");
        let Some(got) = got else { break };
        assert_eq!(got.state, TaskState::Claimed);
        assert_eq!(got.assignee.as_deref(), Some("ann"));
        claimed.push(got.id);
    }
    assert_eq!(
        claimed,
        [
            "urgent",
            "high-a",
            "high-b",
            "normal-old",
            "normal-new",
            "anyone"
        ]
    );
    assert_eq!(state_of(&t, "barred"), TaskState::Open);
    assert_eq!(state_of(&t, "leads"), TaskState::Open);
    assert_consistent(&t);
}

#[test]
fn claim_next_with_a_lease_holds_the_task_under_it() {
    let (t, _db) = temp_tenant();
    t.open(&review("t1", 1)).expect("open");
    let q = query(&["reviewer"], Some("ann"), 1, None);
    let got = t
        .claim_next(&q, lease(500, 250))
        .expect("claim-next")
        .expect("a task");
    assert_eq!(got.lease_until, Some(750));
    assert_eq!(t.next_lease_end().expect("next"), Some(750));
    assert_eq!(ids(&t.reclaim_lapsed(750, 10).expect("reclaim")), ["t1"]);
    assert_consistent(&t);
}

#[test]
fn claim_next_on_an_empty_queue_answers_none_and_writes_nothing() {
    let db = TestDb::new();
    {
        let engine = db.engine();
        let t = engine.tenant("acme").expect("tenant");
        t.open(&review("held", 1)).expect("open");
        t.claim("held", "bob", &["reviewer"], None).expect("claims");
    }
    let before = db.raw_all();
    {
        let engine = db.engine();
        let t = engine.tenant("acme").expect("tenant");
        let q = query(&["reviewer"], Some("ann"), 1, None);
        assert_eq!(t.claim_next(&q, lease(0, 10)).expect("claim-next"), None);
    }
    assert_eq!(db.raw_all(), before);
}

#[test]
fn claim_next_starts_after_the_cursor_like_queue_does() {
    let (t, _db) = temp_tenant();
    for (i, id) in ["a", "b", "c"].iter().enumerate() {
        t.open(&review(id, i as i64)).expect("open");
    }
    let first = t
        .queue(&query(&["reviewer"], Some("ann"), 1, None))
        .expect("queue");
    let q = query(&["reviewer"], Some("ann"), 1, first.next);
    let got = t.claim_next(&q, None).expect("claim-next").expect("a task");
    assert_eq!(got.id, "b");
    assert_eq!(state_of(&t, "a"), TaskState::Open);
}

#[test]
fn claim_next_without_an_actor_is_invalid_and_changes_nothing() {
    let (t, _db) = temp_tenant();
    t.open(&review("t1", 1)).expect("open");
    let r = t.claim_next(&query(&["reviewer"], None, 1, None), None);
    assert!(
        matches!(&r, Err(e) if e.is_invalid_input() && e.to_string().contains("actor")),
        "{r:?}"
    );
    assert_eq!(state_of(&t, "t1"), TaskState::Open);
}
