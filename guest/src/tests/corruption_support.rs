//! Fixtures the damage tests share: a store holding every kind of row and
//! index in every state, a layout-4 keyspace, and readers of a `corrupt`
//! error's detail and of the check's findings. Fixtures only, no test.

use super::*;
use crate::model::{Lease, Settlement};
use crate::schema;
use crate::{runs, tasks, timers};

#[track_caller]
pub(super) fn corrupt_detail(e: StoreError) -> String {
    match e {
        StoreError::Corrupt(d) => d,
        other => panic!("expected corrupt, got {other:?}"),
    }
}

/// The findings as `(structure, subject)` pairs, sorted.
pub(super) fn findings(kv: &mut MemKv) -> Vec<(String, String)> {
    let direct = check::check(kv).expect("the check runs");
    // Over a call's buffer the check reads each chunk's point reads ahead;
    // what it finds must not change with that.
    let ahead = kv
        .call(|kv| check::check(kv))
        .expect("the check runs over the buffer");
    assert_eq!(ahead, direct, "the same findings, read ahead or not");
    let mut out: Vec<(String, String)> = direct
        .into_iter()
        .map(|d| (d.structure, d.subject))
        .collect();
    out.sort();
    out
}

/// A keyspace laid out by an earlier component (layout 4, 64 shards spread
/// by row), where the check compares every shard with the rows counting in
/// it.
pub(super) fn layout_4() -> MemKv {
    let mut kv = MemKv::new();
    kv.map
        .insert(schema::layout().into_bytes(), b"4/64".to_vec());
    kv
}

pub(super) fn found(list: &[(&str, &str)]) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = list
        .iter()
        .map(|(a, b)| ((*a).to_owned(), (*b).to_owned()))
        .collect();
    out.sort();
    out
}

/// Every kind of row and index, in every state.
pub(super) fn mixed_workload(kv: &mut MemKv) {
    let approver = names(&["approver"]);
    open(kv, task("open").roles(&["approver"]).in_case("c").due(50));
    open(
        kv,
        task("anyone")
            .in_case("c")
            .due(60)
            .priority(Priority::Urgent),
    );
    open(kv, task("held").roles(&["approver", "lead"]).due(70));
    open(
        kv,
        task("escalated")
            .roles(&["approver"])
            .escalating_to(&["lead"])
            .due(80),
    );
    open(
        kv,
        task("released")
            .roles(&["approver"])
            .escalating_to(&["lead"])
            .due(90),
    );
    open(kv, task("done").in_case("c").of_run("r2"));
    open(kv, task("withdrawn").of_run("r2"));
    open(kv, task("leased").roles(&["approver"]));
    tasks::claim(kv, "held", "bob", &approver, None, None).expect("claims");
    // Held by cy until 150.
    let lease = Lease {
        now: 100,
        lease_ms: 50,
    };
    tasks::claim(kv, "leased", "cy", &approver, Some(&lease), None).expect("claims");
    tasks::escalate(kv, "escalated", None).expect("escalates");
    tasks::escalate(kv, "released", None).expect("escalates");
    tasks::claim(kv, "released", "bob", &approver, None, None).expect("claims");
    tasks::release(kv, "released", "bob", None).expect("releases");
    tasks::claim(kv, "done", "ann", &[], None, None).expect("claims");
    tasks::settle(kv, "done", Settlement::Completed, None, None, None).expect("settles");
    tasks::withdraw_run(kv, "r2", &names(&["withdrawn"])).expect("withdraws");
    arm(kv, timer("r1", "a", 10));
    arm(kv, timer("r1", "b", 20));
    arm(kv, timer("r2", "a", 30));
    arm(kv, timer("r3", "a", 40));
    timers::claim_due(kv, 25, 1, 1_000).expect("claims r1/a");
    timers::disarm(kv, "r1", "b").expect("disarms");
    runs::seal(kv, "r3", &[]).expect("seals");
}
