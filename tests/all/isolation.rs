//! Tenants of one engine share a store and nothing else: the same ids in two
//! tenants are two tasks and two timers, with independent counters, indexes
//! and seals.

use leasehold_host::{ArmOutcome, Engine, Refusal, Settlement, TaskState, Tenant};
use leasehold_tests::*;

fn two_tenants(engine: &Engine) -> (Tenant, Tenant) {
    // A name that extends the other would be the first to alias if tenant
    // prefixes did.
    (
        engine.tenant("acme").expect("tenant"),
        engine.tenant("acme2").expect("tenant"),
    )
}

#[test]
fn two_tenants_with_the_same_task_ids_never_see_each_others_tasks() {
    let (engine, _db) = temp_engine();
    let (a, b) = two_tenants(&engine);
    let mut a1 = task("t1", 10).roles(&["reviewer"]).in_case("case").due(100);
    a1.kind = "acme-kind".into();
    a.open(&a1).expect("open in a");
    a.open(
        &task("only-a", 11)
            .roles(&["reviewer"])
            .in_case("case")
            .due(100),
    )
    .expect("open in a");
    assert_eq!(b.get("t1").expect("get"), None);
    assert_eq!(b.open_count().expect("count"), 0);

    let mut b1 = task("t1", 20).roles(&["reviewer"]).in_case("case").due(50);
    b1.kind = "acme2-kind".into();
    let opened_b = b.open(&b1).expect("open in b");
    assert_eq!(
        opened_b.kind, "acme2-kind",
        "b's open is not a repeat of a's"
    );
    assert_eq!(a.get("t1").expect("get").expect("a's t1").kind, "acme-kind");

    a.claim("t1", "alice", &["reviewer"], None)
        .expect("claim in a");
    assert_eq!(
        b.get("t1").expect("get").expect("b's t1").state,
        TaskState::Open
    );
    b.claim("t1", "bob", &["reviewer"], None)
        .expect("b's t1 is free although a's is held");
    assert!(matches!(
        b.claim("only-a", "bob", &["reviewer"], None),
        Err(leasehold_host::Error::Refused(Refusal::NotFound(_)))
    ));
    b.settle("t1", Settlement::Completed, None)
        .expect("settle in b");
    assert_eq!(state_of(&a, "t1"), TaskState::Claimed);
    assert_eq!(a.open_count().expect("count"), 2);
    assert_eq!(b.open_count().expect("count"), 0);

    b.open(&task("only-b", 1).roles(&["reviewer"]).due(10))
        .expect("open in b");
    let qa = a
        .queue(&query(&["reviewer"], None, 100, None))
        .expect("queue");
    let qb = b
        .queue(&query(&["reviewer"], None, 100, None))
        .expect("queue");
    assert_eq!(ids(&qa.tasks), ["only-a"]);
    assert_eq!(ids(&qb.tasks), ["only-b"]);
    assert_eq!(
        ids(&a.for_case("case", 100, None).expect("for-case").tasks),
        ["t1", "only-a"]
    );
    let case_b = b.for_case("case", 100, None).expect("for-case").tasks;
    assert_eq!(ids(&case_b), ["t1"]);
    assert_eq!(case_b[0].kind, "acme2-kind");
    assert_eq!(
        ids(&a.overdue(1_000, 100).expect("overdue")),
        ["only-a", "t1"]
    );
    assert_eq!(ids(&b.overdue(1_000, 100).expect("overdue")), ["only-b"]);
    assert_consistent(&a);
    assert_consistent(&b);
}

#[test]
fn two_tenants_with_the_same_timers_claim_count_and_seal_independently() {
    let (engine, _db) = temp_engine();
    let (a, b) = two_tenants(&engine);
    assert_eq!(a.arm(&timer("r", "e", 10)).expect("arm"), ArmOutcome::Armed);
    assert_eq!(
        b.arm(&timer("r", "e", 20)).expect("arm"),
        ArmOutcome::Armed,
        "the same identity in another tenant is another timer"
    );
    a.arm(&timer("r", "f", 30)).expect("arm");
    assert_eq!(a.pending_count().expect("count"), 2);
    assert_eq!(b.pending_count().expect("count"), 1);
    assert_eq!(a.next_due().expect("next-due"), Some(10));
    assert_eq!(b.next_due().expect("next-due"), Some(20));

    let got_a = a.claim_due(100, 10, 60_000).expect("sweep a");
    assert_eq!(got_a.len(), 2);
    assert!(got_a.iter().all(|tm| tm.fire_at != 20), "b's timer leaked");
    let got_b = b.claim_due(100, 10, 60_000).expect("sweep b");
    assert_eq!(
        got_b,
        [timer("r", "e", 20)],
        "a's claim must not hold b's timer"
    );

    let sealed = a.seal("r", &[]).expect("seal in a");
    assert_eq!(sealed.timers_disarmed, 2);
    assert!(a.is_sealed("r").expect("is-sealed"));
    assert!(!b.is_sealed("r").expect("is-sealed"));
    assert_eq!(b.pending_count().expect("count"), 1);
    assert_eq!(b.next_due().expect("next-due"), Some(60_100));
    assert_eq!(
        b.arm(&timer("r", "g", 5)).expect("arm"),
        ArmOutcome::Armed,
        "a's seal does not seal b's run"
    );
    assert_eq!(b.disarm_run("r").expect("disarm-run in b"), 2);
    assert_eq!(a.pending_count().expect("count"), 0);
    assert_eq!(b.pending_count().expect("count"), 0);
    assert_consistent(&a);
    assert_consistent(&b);
}

#[test]
fn tenants_whose_names_extend_each_other_stay_apart() {
    let (engine, _db) = temp_engine();
    let names = ["a", "ab", "a.b", "b"];
    let tenants: Vec<Tenant> = names
        .iter()
        .map(|n| engine.tenant(n).expect("tenant"))
        .collect();
    for (i, t) in tenants.iter().enumerate() {
        for j in 0..=i {
            t.open(&task(&format!("t{j}"), j as i64)).expect("open");
            t.arm(&timer("r", &format!("e{j}"), 1)).expect("arm");
        }
    }
    for (i, t) in tenants.iter().enumerate() {
        let n = i as u64 + 1;
        assert_eq!(t.open_count().expect("count"), n, "{}", names[i]);
        assert_eq!(t.pending_count().expect("count"), n, "{}", names[i]);
        let q = t.queue(&query(&[], None, 100, None)).expect("queue");
        assert_eq!(q.tasks.len(), i + 1, "{}", names[i]);
        assert_eq!(t.claim_due(10, 100, 1).expect("sweep").len(), i + 1);
        assert_consistent(t);
    }
}

#[test]
fn a_sweep_or_claim_next_in_one_tenant_never_moves_another_tenants_tasks() {
    let (engine, _db) = temp_engine();
    let (a, b) = two_tenants(&engine);
    let lease = leasehold_host::Lease {
        now: 0,
        lease_ms: 10,
    };
    for t in [&a, &b] {
        t.open(&task("t1", 1)).expect("open");
        t.claim("t1", "alice", &[], Some(lease)).expect("claim");
        t.open(&task("t2", 2)).expect("open");
    }
    assert_eq!(ids(&a.reclaim_lapsed(100, 10).expect("reclaim")), ["t1"]);
    assert_eq!(b.leased_count().expect("count"), 1);
    assert_eq!(b.next_lease_end().expect("next"), Some(10));
    assert_eq!(state_of(&b, "t1"), TaskState::Claimed);
    let q = query(&[], Some("bob"), 1, None);
    assert_eq!(
        b.claim_next(&q, None).expect("claim-next").map(|t| t.id),
        Some("t2".to_owned())
    );
    assert_eq!(state_of(&a, "t2"), TaskState::Open);
    assert_consistent(&a);
    assert_consistent(&b);
}
