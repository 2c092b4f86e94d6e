//! What a call commits is stored: dropping the engine and opening another on
//! the same store (the redb file again, or new connections to the same
//! PostgreSQL schema) finds tasks, counters, indexes, leases and seals as
//! they were.

use leasehold_host::{ArmOutcome, Error, Lease, Refusal, Settlement, TaskState};
use leasehold_tests::*;

#[test]
fn tasks_counters_timers_and_seals_survive_dropping_and_reopening_the_engine() {
    let db = TestDb::new();
    let cursor;
    {
        let engine = db.engine();
        let t = engine.tenant("acme").expect("tenant");
        for i in 0..6 {
            t.open(&task(&format!("t{i}"), i).roles(&["reviewer"]).due(100))
                .expect("open");
        }
        t.claim("t0", "alice", &["reviewer"], None).expect("claim");
        t.settle("t1", Settlement::Completed, None).expect("settle");
        t.open(
            &task("esc", 50)
                .roles(&["reviewer"])
                .escalating_to(&["manager"]),
        )
        .expect("open");
        t.escalate("esc").expect("escalate");
        t.open(&task("leased", 60).roles(&["clerk"])).expect("open");
        let lease = Lease {
            now: 0,
            lease_ms: 2_000,
        };
        t.claim("leased", "carol", &["clerk"], Some(lease))
            .expect("claim");
        t.arm(&timer("r", "held", 10)).expect("arm");
        t.arm(&timer("r", "later", 500)).expect("arm");
        t.arm(&timer("z-sealed", "x", 10)).expect("arm");
        assert_eq!(t.claim_due(10, 1, 1_000).expect("sweep").len(), 1);
        t.seal("z-sealed", &[]).expect("seal");
        cursor = t
            .queue(&query(&["reviewer"], None, 2, None))
            .expect("queue")
            .next
            .expect("more follow");
    }

    let engine = db.engine();
    let t = engine.tenant("acme").expect("tenant");
    assert_eq!(t.open_count().expect("count"), 7);
    assert_eq!(state_of(&t, "t0"), TaskState::Claimed);
    assert_eq!(
        t.get("t0").expect("get").expect("t0").assignee.as_deref(),
        Some("alice")
    );
    assert_eq!(state_of(&t, "t1"), TaskState::Completed);
    assert!(matches!(
        t.claim("t0", "bob", &["reviewer"], None),
        Err(Error::Refused(Refusal::AlreadyClaimed(holder))) if holder == "alice"
    ));
    let page = t
        .queue(&query(&["reviewer"], None, 10, Some(cursor)))
        .expect("a cursor from before the reopen");
    assert_eq!(ids(&page.tasks), ["t4", "t5", "esc"]);
    let esc = t.get("esc").expect("get").expect("esc");
    assert_eq!(esc.candidate_roles, ["reviewer", "manager"]);
    assert_eq!(
        ids(&t.overdue(100, 10).expect("overdue")),
        ["t0", "t2", "t3", "t4", "t5"]
    );

    assert!(t.is_sealed("z-sealed").expect("is-sealed"));
    assert_eq!(
        t.arm(&timer("z-sealed", "y", 10)).expect("arm"),
        ArmOutcome::RunSealed
    );
    assert_eq!(t.pending_count().expect("count"), 2);
    assert_eq!(
        t.next_due().expect("next-due"),
        Some(500),
        "the lease on r/held (until 1010) survived"
    );
    assert_eq!(
        identities(&t.claim_due(600, 10, 1).expect("sweep")),
        [("r".to_owned(), "later".to_owned())],
        "r/held is still leased"
    );
    assert_eq!(
        t.arm(&timer("r", "held", 1)).expect("re-arm"),
        ArmOutcome::AlreadyArmed
    );
    assert_eq!(t.leased_count().expect("leased"), 1);
    assert_eq!(t.next_lease_end().expect("next"), Some(2_000));
    assert!(t.reclaim_lapsed(1_999, 10).expect("reclaim").is_empty());
    assert_eq!(
        ids(&t.reclaim_lapsed(2_000, 10).expect("reclaim")),
        ["leased"],
        "the claim's lease survived"
    );
    let after_lease = t.claim_due(1_010, 10, 1).expect("sweep");
    assert_eq!(
        identities(&after_lease),
        [
            ("r".to_owned(), "later".to_owned()),
            ("r".to_owned(), "held".to_owned())
        ],
        "r/later became claimable at 601, r/held at 1010"
    );
    assert_consistent(&t);
}

#[test]
fn a_refused_call_leaves_nothing_in_the_store() {
    let db = TestDb::new();
    {
        let engine = db.engine();
        let t = engine.tenant("acme").expect("tenant");
        let mut bad = task("t1", 1);
        bad.state = TaskState::Completed;
        assert!(t.open(&bad).is_err());
        t.open(&task("t2", 1).excluding(&["bob"])).expect("open");
        assert!(t.claim("t2", "bob", &[], None).is_err());
    }
    let engine = db.engine();
    let t = engine.tenant("acme").expect("tenant");
    assert_eq!(t.get("t1").expect("get"), None);
    assert_eq!(state_of(&t, "t2"), TaskState::Open);
    assert_eq!(t.open_count().expect("count"), 1);
    assert_consistent(&t);
}
