//! Leased claims, renewal, reclaiming lapsed leases, holder-checked settle
//! and claim-next, natively: each rule, what it leaves in the lease index
//! and counter, and that a refusal writes nothing.

use super::*;
use crate::model::{ClaimError, Lease, QueueQuery, Settlement};
use crate::schema;
use crate::tasks;

fn lease(now: i64, lease_ms: u32) -> Option<Lease> {
    Some(Lease { now, lease_ms })
}

fn claim(kv: &mut MemKv, id: &str, actor: &str, l: Option<Lease>) -> Result<Task, ClaimError> {
    tasks::claim(kv, id, actor, &names(&["a"]), l.as_ref(), None)
}

fn query(actor: &str) -> QueueQuery {
    QueueQuery {
        roles: names(&["a"]),
        actor: Some(actor.to_owned()),
        limit: 1,
        after: None,
    }
}

fn lease_entries(kv: &MemKv) -> Vec<Vec<u8>> {
    let prefix = schema::leases();
    kv.map
        .keys()
        .filter(|k| k.starts_with(prefix.as_bytes()))
        .cloned()
        .collect()
}

#[test]
fn a_leased_claim_holds_until_now_plus_lease_ms_and_is_indexed_there() {
    let mut kv = MemKv::new();
    open(&mut kv, task("t").roles(&["a"]));
    let t = claim(&mut kv, "t", "bob", lease(1_000, 500)).expect("claims");
    assert_eq!(t.lease_until, Some(1_500));
    assert_eq!(
        lease_entries(&kv),
        [schema::lease_entry(1_500, "t").into_bytes()]
    );
    assert_eq!(tasks::leased_count(&mut kv), Ok(1));
    assert_eq!(tasks::next_lease_end(&mut kv), Ok(Some(1_500)));
    assert_healthy(&mut kv);
}

#[test]
fn a_claim_without_a_lease_has_none_and_no_index_entry() {
    let mut kv = MemKv::new();
    open(&mut kv, task("t").roles(&["a"]));
    let t = claim(&mut kv, "t", "bob", None).expect("claims");
    assert_eq!(t.lease_until, None);
    assert!(lease_entries(&kv).is_empty());
    assert_eq!(tasks::leased_count(&mut kv), Ok(0));
    assert_eq!(tasks::next_lease_end(&mut kv), Ok(None));
}

#[test]
fn a_lease_ending_past_year_9999_is_stored_as_computed() {
    let mut kv = MemKv::new();
    open(&mut kv, task("t").roles(&["a"]));
    let max = crate::validate::MAX_TIMESTAMP;
    let ms = crate::validate::MAX_LEASE_MS;
    let t = claim(&mut kv, "t", "bob", lease(max, ms)).expect("claims");
    assert_eq!(t.lease_until, Some(max + i64::from(ms)));
    assert_healthy(&mut kv);
}

#[test]
fn a_holder_reclaiming_with_a_lease_sets_it_and_without_one_changes_nothing() {
    let mut kv = MemKv::new();
    open(&mut kv, task("t").roles(&["a"]));
    claim(&mut kv, "t", "bob", lease(1_000, 500)).expect("claims");
    let t = claim(&mut kv, "t", "bob", lease(1_100, 100)).expect("re-claims");
    assert_eq!(t.lease_until, Some(1_200), "the new lease, even if shorter");
    let t = writes_nothing(&mut kv, |kv| claim(kv, "t", "bob", None));
    assert_eq!(t.lease_until, Some(1_200));
    assert_eq!(
        lease_entries(&kv),
        [schema::lease_entry(1_200, "t").into_bytes()]
    );
    assert_healthy(&mut kv);
}

#[test]
fn renew_moves_the_lease_and_refuses_anyone_but_a_leased_holder() {
    let mut kv = MemKv::new();
    open(&mut kv, task("t").roles(&["a"]));
    open(&mut kv, task("plain").roles(&["a"]));
    open(&mut kv, task("free").roles(&["a"]));
    claim(&mut kv, "t", "bob", lease(1_000, 500)).expect("claims");
    claim(&mut kv, "plain", "bob", None).expect("claims");
    let t = tasks::renew(&mut kv, "t", "bob", 1_400, 1_000, None).expect("renews");
    assert_eq!(t.lease_until, Some(2_400));
    assert_eq!(
        lease_entries(&kv),
        [schema::lease_entry(2_400, "t").into_bytes()]
    );
    for (id, actor) in [("t", "ann"), ("plain", "bob"), ("free", "bob")] {
        let e = fails_cleanly(&mut kv, |kv| tasks::renew(kv, id, actor, 1_500, 10, None));
        assert_eq!(e, ClaimError::NotHeld(actor.into()), "{id} by {actor}");
    }
    let e = fails_cleanly(&mut kv, |kv| {
        tasks::renew(kv, "nope", "bob", 1_500, 10, None)
    });
    assert_eq!(e, ClaimError::NotFound("nope".into()));
    assert_healthy(&mut kv);
}

#[test]
fn reclaim_lapsed_returns_lapsed_tasks_in_lease_end_order_as_release_would() {
    let mut kv = MemKv::new();
    for id in ["b", "a", "c", "live"] {
        open(&mut kv, task(id).roles(&["a"]).escalating_to(&["lead"]));
    }
    tasks::escalate(&mut kv, "c", None).expect("escalates");
    claim(&mut kv, "b", "bob", lease(0, 100)).expect("claims");
    claim(&mut kv, "a", "ann", lease(0, 100)).expect("claims");
    claim(&mut kv, "c", "cy", lease(0, 50)).expect("claims");
    claim(&mut kv, "live", "dee", lease(0, 101)).expect("claims");
    let moved = tasks::reclaim_lapsed(&mut kv, 100, 10).expect("reclaims");
    // c lapsed first; a and b at the same instant, by id; live has 1 ms left.
    assert_eq!(ids(&moved), ["c", "a", "b"]);
    assert_eq!(moved[0].state, TaskState::Escalated);
    assert_eq!(moved[1].state, TaskState::Open);
    assert!(
        moved
            .iter()
            .all(|t| t.assignee.is_none() && t.lease_until.is_none())
    );
    assert_eq!(stored(&mut kv, "live").assignee.as_deref(), Some("dee"));
    assert_eq!(tasks::leased_count(&mut kv), Ok(1));
    assert!(
        writes_nothing(&mut kv, |kv| tasks::reclaim_lapsed(kv, 100, 10)).is_empty(),
        "a second sweep finds nothing"
    );
    assert_healthy(&mut kv);
}

#[test]
fn reclaim_lapsed_takes_at_most_limit_tasks_and_the_next_sweep_the_rest() {
    let mut kv = MemKv::new();
    for i in 0..5 {
        let id = format!("t{i}");
        open(&mut kv, task(&id).roles(&["a"]));
        claim(&mut kv, &id, "bob", lease(i, 1)).expect("claims");
    }
    let first = tasks::reclaim_lapsed(&mut kv, 100, 2).expect("reclaims");
    assert_eq!(ids(&first), ["t0", "t1"]);
    let rest = tasks::reclaim_lapsed(&mut kv, 100, 10).expect("reclaims");
    assert_eq!(ids(&rest), ["t2", "t3", "t4"]);
    assert_healthy(&mut kv);
}

#[test]
fn settled_released_escalated_and_unleased_claims_leave_the_lease_index() {
    let mut kv = MemKv::new();
    for id in ["settled", "released", "escalated", "taken", "reclaimed"] {
        open(&mut kv, task(id).roles(&["a"]));
        claim(&mut kv, id, "bob", lease(0, 10)).expect("claims");
    }
    tasks::settle(&mut kv, "settled", Settlement::Completed, None, None, None).expect("settles");
    tasks::release(&mut kv, "released", "bob", None).expect("releases");
    tasks::escalate(&mut kv, "escalated", None).expect("escalates");
    tasks::take_over(&mut kv, "taken", "bob", "ann", &names(&["a"]), None, None).expect("takes");
    tasks::reclaim_lapsed(&mut kv, 10, 1).expect("reclaims");
    assert!(lease_entries(&kv).is_empty(), "{:?}", lease_entries(&kv));
    assert_eq!(tasks::leased_count(&mut kv), Ok(0));
    for id in ["settled", "released", "escalated", "taken", "reclaimed"] {
        assert_eq!(stored(&mut kv, id).lease_until, None, "{id}");
    }
    assert_eq!(stored(&mut kv, "settled").assignee.as_deref(), Some("bob"));
    assert!(
        tasks::reclaim_lapsed(&mut kv, 1_000, 10)
            .expect("reclaims")
            .is_empty()
    );
    assert_healthy(&mut kv);
}

#[test]
fn take_over_with_a_lease_gives_the_new_holder_that_lease() {
    let mut kv = MemKv::new();
    open(&mut kv, task("t").roles(&["a"]));
    claim(&mut kv, "t", "bob", lease(0, 10)).expect("claims");
    let t = tasks::take_over(
        &mut kv,
        "t",
        "bob",
        "ann",
        &names(&["a"]),
        lease(5, 100).as_ref(),
        None,
    )
    .expect("takes over");
    assert_eq!(t.assignee.as_deref(), Some("ann"));
    assert_eq!(t.lease_until, Some(105));
    // The same holder: a lease sets the new end, none changes nothing.
    let t = tasks::take_over(
        &mut kv,
        "t",
        "ann",
        "ann",
        &names(&["a"]),
        lease(6, 1).as_ref(),
        None,
    )
    .expect("idempotent");
    assert_eq!(t.lease_until, Some(7));
    let t = writes_nothing(&mut kv, |kv| {
        tasks::take_over(kv, "t", "ann", "ann", &names(&["a"]), None, None)
    });
    assert_eq!(t.lease_until, Some(7));
    assert_healthy(&mut kv);
}

#[test]
fn settle_with_a_holder_needs_exactly_that_holder() {
    let mut kv = MemKv::new();
    open(&mut kv, task("t").roles(&["a"]));
    open(&mut kv, task("free").roles(&["a"]));
    claim(&mut kv, "t", "bob", lease(0, 10)).expect("claims");
    let e = fails_cleanly(&mut kv, |kv| {
        tasks::settle(kv, "t", Settlement::Completed, Some("ann"), None, None)
    });
    assert_eq!(e, ClaimError::NotHeld("ann".into()));
    let e = fails_cleanly(&mut kv, |kv| {
        tasks::settle(kv, "free", Settlement::Completed, Some("ann"), None, None)
    });
    assert_eq!(e, ClaimError::NotHeld("ann".into()));
    assert_eq!(
        tasks::settle(&mut kv, "t", Settlement::Completed, Some("bob"), None, None),
        Ok(true)
    );
    // Settled: not held by anyone, so a holder check refuses; without one
    // the compare-and-set answers false.
    let e = fails_cleanly(&mut kv, |kv| {
        tasks::settle(kv, "t", Settlement::Expired, Some("bob"), None, None)
    });
    assert_eq!(e, ClaimError::NotHeld("bob".into()));
    let moved = writes_nothing(&mut kv, |kv| {
        tasks::settle(kv, "t", Settlement::Expired, None, None, None)
    });
    assert!(!moved, "a settled task stays as it stands");
    assert_healthy(&mut kv);
}

#[test]
fn claim_next_claims_the_head_of_the_queue_for_the_actor() {
    let mut kv = MemKv::new();
    open(&mut kv, task("old").roles(&["a"]).created(1));
    open(
        &mut kv,
        task("urgent")
            .roles(&["a"])
            .priority(Priority::Urgent)
            .created(5),
    );
    open(
        &mut kv,
        task("barred")
            .roles(&["a"])
            .priority(Priority::Urgent)
            .created(0)
            .excluding(&["ann"]),
    );
    open(
        &mut kv,
        task("other").roles(&["b"]).priority(Priority::Urgent),
    );
    let q = query("ann");
    let t = tasks::claim_next(&mut kv, &q, lease(10, 20).as_ref())
        .expect("claims")
        .expect("a task");
    assert_eq!(t.id, "urgent");
    assert_eq!(t.assignee.as_deref(), Some("ann"));
    assert_eq!(t.lease_until, Some(30));
    let t = tasks::claim_next(&mut kv, &q, None)
        .expect("claims")
        .expect("a task");
    assert_eq!((t.id.as_str(), t.lease_until), ("old", None));
    assert_eq!(
        writes_nothing(&mut kv, |kv| tasks::claim_next(kv, &q, None)),
        None,
        "only the barred task and another role's are left"
    );
    assert_healthy(&mut kv);
}

#[test]
fn claim_next_needs_an_actor_and_checks_inputs_before_anything_else() {
    let mut kv = MemKv::new();
    open(&mut kv, task("t").roles(&["a"]));
    let no_actor = QueueQuery {
        actor: None,
        ..query("ann")
    };
    let why = invalid_reason(fails_cleanly(&mut kv, |kv| {
        tasks::claim_next(kv, &no_actor, None)
    }));
    assert!(why.contains("actor"), "{why}");
    let why = invalid_reason(fails_cleanly(&mut kv, |kv| {
        tasks::claim_next(kv, &query("ann"), lease(0, 0).as_ref())
    }));
    assert!(why.contains("lease-ms"), "{why}");
    let why = invalid_reason(fails_cleanly(&mut kv, |kv| {
        tasks::claim_next(kv, &query("ann"), lease(-1, 5).as_ref())
    }));
    assert!(why.contains("now"), "{why}");
}

#[test]
fn bad_leases_are_invalid_before_the_task_is_looked_up() {
    let mut kv = MemKv::new();
    let bad = [lease(-1, 10), lease(0, 0), lease(0, 604_800_001)];
    for l in bad {
        let e = fails_cleanly(&mut kv, |kv| claim(kv, "nope", "bob", l));
        assert!(
            matches!(e, ClaimError::Store(StoreError::Invalid(_))),
            "{e:?}"
        );
        let e = fails_cleanly(&mut kv, |kv| {
            tasks::take_over(kv, "nope", "bob", "ann", &[], l.as_ref(), None)
        });
        assert!(
            matches!(e, ClaimError::Store(StoreError::Invalid(_))),
            "{e:?}"
        );
        let l = l.expect("a lease");
        let e = fails_cleanly(&mut kv, |kv| {
            tasks::renew(kv, "nope", "bob", l.now, l.lease_ms, None)
        });
        assert!(
            matches!(e, ClaimError::Store(StoreError::Invalid(_))),
            "{e:?}"
        );
    }
    let e = fails_cleanly(&mut kv, |kv| {
        tasks::settle(kv, "nope", Settlement::Completed, Some(""), None, None)
    });
    assert!(
        matches!(e, ClaimError::Store(StoreError::Invalid(_))),
        "{e:?}"
    );
    for (now, limit) in [(-1, 1), (0, 0), (0, 1001)] {
        let e = fails_cleanly(&mut kv, |kv| tasks::reclaim_lapsed(kv, now, limit));
        assert!(matches!(e, StoreError::Invalid(_)), "{e:?}");
    }
}

#[test]
fn a_new_task_may_not_carry_a_lease() {
    let mut kv = MemKv::new();
    let t = Task {
        lease_until: Some(5),
        ..task("t")
    };
    let why = invalid_reason(fails_cleanly(&mut kv, |kv| tasks::open(kv, &t)));
    assert!(why.contains("lease-until"), "{why}");
}
