//! Damaged rows: a task or timer row, a counter shard or an index entry
//! that does not decode, or does not match what points at it, is `corrupt`
//! for every verb that meets it, never read as a default, and the refusal
//! writes nothing.

use super::corruption_support::{corrupt_detail, layout_4, mixed_workload};
use super::*;
use crate::model::{ClaimError, QueueQuery, Settlement};
use crate::schema;
use crate::{tasks, timers};

#[track_caller]
fn claim_corrupt_detail(e: ClaimError) -> String {
    match e {
        ClaimError::Store(StoreError::Corrupt(d)) => d,
        other => panic!("expected corrupt, got {other:?}"),
    }
}

#[test]
fn a_task_row_that_does_not_decode_is_corrupt_never_a_default() {
    let mut kv = MemKv::new();
    open(&mut kv, task("t").roles(&["a"]));
    for garbage in [&b"not json"[..], b"{}", b"", br#"{"id":"t"}"#] {
        kv.map
            .insert(schema::task("t").into_bytes(), garbage.to_vec());
        let d = corrupt_detail(fails_cleanly(&mut kv, |kv| tasks::get(kv, "t")));
        assert!(d.contains('t'), "{d}");
        claim_corrupt_detail(fails_cleanly(&mut kv, |kv| {
            tasks::claim(kv, "t", "bob", &names(&["a"]), None, None)
        }));
        claim_corrupt_detail(fails_cleanly(&mut kv, |kv| {
            tasks::take_over(kv, "t", "bob", "ann", &names(&["a"]), None, None)
        }));
        claim_corrupt_detail(fails_cleanly(&mut kv, |kv| {
            tasks::release(kv, "t", "bob", None)
        }));
        claim_corrupt_detail(fails_cleanly(&mut kv, |kv| {
            tasks::settle(kv, "t", Settlement::Completed, None, None, None)
        }));
        claim_corrupt_detail(fails_cleanly(&mut kv, |kv| tasks::escalate(kv, "t", None)));
        corrupt_detail(fails_cleanly(&mut kv, |kv| tasks::open(kv, &task("t"))));
        corrupt_detail(fails_cleanly(&mut kv, |kv| {
            tasks::withdraw_run(kv, "run-1", &names(&["t"]))
        }));
        // The queue index still lists it: reading the queue meets the row.
        corrupt_detail(fails_cleanly(&mut kv, |kv| {
            tasks::queue(
                kv,
                &QueueQuery {
                    roles: names(&["a"]),
                    actor: None,
                    limit: 10,
                    after: None,
                },
            )
        }));
    }
}

#[test]
fn a_task_row_stored_under_another_id_is_corrupt() {
    let mut kv = MemKv::new();
    open(&mut kv, task("t"));
    open(&mut kv, task("u"));
    let u = kv
        .map
        .get(schema::task("u").as_bytes())
        .cloned()
        .expect("u has a row");
    kv.map.insert(schema::task("t").into_bytes(), u);
    let d = corrupt_detail(fails_cleanly(&mut kv, |kv| tasks::get(kv, "t")));
    assert!(d.contains("another id"), "{d}");
    claim_corrupt_detail(fails_cleanly(&mut kv, |kv| {
        tasks::claim(kv, "t", "bob", &[], None, None)
    }));
}

#[test]
fn a_timer_row_that_does_not_decode_is_corrupt() {
    let mut kv = MemKv::new();
    arm(&mut kv, timer("r", "e", 10));
    kv.map
        .insert(schema::timer("r", "e").into_bytes(), b"{oops".to_vec());
    corrupt_detail(fails_cleanly(&mut kv, |kv| {
        timers::claim_due(kv, 10, 10, 100)
    }));
    corrupt_detail(fails_cleanly(&mut kv, |kv| timers::disarm(kv, "r", "e")));
    corrupt_detail(fails_cleanly(&mut kv, |kv| {
        timers::arm(kv, &timer("r", "e", 5))
    }));
    corrupt_detail(fails_cleanly(&mut kv, |kv| timers::disarm_run(kv, "r")));
}

#[test]
fn a_counter_shard_of_the_wrong_width_is_corrupt() {
    let mut kv = layout_4();
    open(&mut kv, task("t"));
    let own = schema::Shards::SHARED.task("t");
    kv.map.insert(
        schema::counter_shard(schema::OPEN_TASKS, own).into_bytes(),
        vec![1, 2, 3],
    );
    let d = corrupt_detail(fails_cleanly(&mut kv, tasks::open_count));
    assert!(d.contains(&format!("shard {own}")), "{d}");
    // The task's own writers read the shard, and refuse it too (over the
    // call's buffer, as the component runs them, so nothing is committed).
    claim_corrupt_detail(fails_cleanly(&mut kv, |kv| {
        kv.call(|kv| tasks::settle(kv, "t", Settlement::Completed, None, None, None))
    }));
    // A reader sums every shard, so damage in a shard no task counts in is
    // found as well.
    let mut kv = layout_4();
    arm(&mut kv, timer("r", "e", 10));
    let other = (schema::Shards::SHARED.timer("r", "e") + 1) % schema::MAX_SHARDS;
    kv.map.insert(
        schema::counter_shard(schema::ARMED_TIMERS, other).into_bytes(),
        vec![0; 9],
    );
    let d = corrupt_detail(fails_cleanly(&mut kv, timers::pending_count));
    assert!(d.contains(&format!("shard {other}")), "{d}");
}

#[test]
fn an_index_entry_without_a_row_is_corrupt_for_the_reads() {
    let mut kv = MemKv::new();
    open(&mut kv, task("t").in_case("c").due(5));
    open(&mut kv, task("u"));
    kv.map.remove(schema::task("t").as_bytes());
    let query = QueueQuery {
        roles: vec![],
        actor: None,
        limit: 10,
        after: None,
    };
    let d = corrupt_detail(fails_cleanly(&mut kv, |kv| tasks::queue(kv, &query)));
    assert!(d.contains("no row"), "{d}");
    corrupt_detail(fails_cleanly(&mut kv, |kv| {
        tasks::for_case(kv, "c", 10, None)
    }));
    corrupt_detail(fails_cleanly(&mut kv, |kv| tasks::overdue(kv, 10, 10)));
}

#[test]
fn a_due_entry_without_a_timer_row_is_corrupt_for_claim_due() {
    let mut kv = MemKv::new();
    arm(&mut kv, timer("r", "e", 10));
    kv.map.remove(schema::timer("r", "e").as_bytes());
    let d = corrupt_detail(fails_cleanly(&mut kv, |kv| {
        timers::claim_due(kv, 10, 10, 100)
    }));
    assert!(d.contains("no row"), "{d}");
}

#[test]
fn a_due_entry_at_the_wrong_instant_is_corrupt_for_claim_due() {
    let mut kv = MemKv::new();
    arm(&mut kv, timer("r", "e", 10));
    kv.map.remove(schema::due_entry(10, "r", "e").as_bytes());
    kv.map
        .insert(schema::due_entry(5, "r", "e").into_bytes(), Vec::new());
    corrupt_detail(fails_cleanly(&mut kv, |kv| {
        timers::claim_due(kv, 10, 10, 100)
    }));
}

#[test]
fn a_lease_entry_without_a_row_is_corrupt_for_reclaim_lapsed() {
    let mut kv = MemKv::new();
    mixed_workload(&mut kv);
    kv.map
        .insert(schema::lease_entry(120, "ghost").into_bytes(), Vec::new());
    let d = corrupt_detail(fails_cleanly(&mut kv, |kv| {
        tasks::reclaim_lapsed(kv, 1_000, 10)
    }));
    assert!(d.contains("ghost") && d.contains("no row"), "{d}");
}

#[test]
fn a_lease_entry_the_row_does_not_hold_is_corrupt_for_reclaim_lapsed() {
    // The row says the lease ends at 150; an entry at 120 is not its lease,
    // and nor is an entry for a task that is not claimed.
    let mut kv = MemKv::new();
    mixed_workload(&mut kv);
    kv.map
        .insert(schema::lease_entry(120, "leased").into_bytes(), Vec::new());
    let d = corrupt_detail(fails_cleanly(&mut kv, |kv| {
        tasks::reclaim_lapsed(kv, 130, 10)
    }));
    assert!(d.contains("leased") && d.contains("120"), "{d}");
    let mut kv = MemKv::new();
    mixed_workload(&mut kv);
    kv.map
        .insert(schema::lease_entry(5, "open").into_bytes(), Vec::new());
    corrupt_detail(fails_cleanly(&mut kv, |kv| {
        tasks::reclaim_lapsed(kv, 10, 10)
    }));
}
