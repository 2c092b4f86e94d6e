//! Damage: a row that does not decode is `corrupt`, never a default; an
//! unknown layout is refused; and the consistency check finds each kind of
//! injected damage while staying quiet on a healthy store.

use super::*;
use crate::model::{ClaimError, Lease, QueueQuery, Settlement};
use crate::schema;
use crate::store::{self, TaskRow};
use crate::{runs, tasks, timers};

#[track_caller]
fn corrupt_detail(e: StoreError) -> String {
    match e {
        StoreError::Corrupt(d) => d,
        other => panic!("expected corrupt, got {other:?}"),
    }
}

#[track_caller]
fn claim_corrupt_detail(e: ClaimError) -> String {
    match e {
        ClaimError::Store(StoreError::Corrupt(d)) => d,
        other => panic!("expected corrupt, got {other:?}"),
    }
}

/// The findings as `(structure, subject)` pairs, sorted.
fn findings(kv: &mut MemKv) -> Vec<(String, String)> {
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

/// The subject of a finding about one counter shard.
fn shard(name: &str, shard: u8) -> String {
    format!("{name}/{shard}")
}

/// Moves the stored value of one counter shard by `delta`, as damage would.
fn skew_shard(kv: &mut MemKv, name: &str, shard: u8, delta: i64) {
    let key = schema::counter_shard(name, shard).into_bytes();
    let now = kv.map.get(&key).map_or(0, |v| {
        i64::from_be_bytes(v.as_slice().try_into().expect("8 bytes"))
    });
    let next = now.checked_add(delta).expect("in range");
    kv.map.insert(key, next.to_be_bytes().to_vec());
}

/// A keyspace laid out by an earlier component (layout 4, 64 shards spread
/// by row), where the check compares every shard with the rows counting in
/// it.
fn layout_4() -> MemKv {
    let mut kv = MemKv::new();
    kv.map
        .insert(schema::layout().into_bytes(), b"4/64".to_vec());
    kv
}

fn found(list: &[(&str, &str)]) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = list
        .iter()
        .map(|(a, b)| ((*a).to_owned(), (*b).to_owned()))
        .collect();
    out.sort();
    out
}

/// Every kind of row and index, in every state.
fn mixed_workload(kv: &mut MemKv) {
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
    tasks::claim(kv, "held", "bob", &approver, None).expect("claims");
    // Held by cy until 150.
    let lease = Lease {
        now: 100,
        lease_ms: 50,
    };
    tasks::claim(kv, "leased", "cy", &approver, Some(&lease)).expect("claims");
    tasks::escalate(kv, "escalated").expect("escalates");
    tasks::escalate(kv, "released").expect("escalates");
    tasks::claim(kv, "released", "bob", &approver, None).expect("claims");
    tasks::release(kv, "released", "bob").expect("releases");
    tasks::claim(kv, "done", "ann", &[], None).expect("claims");
    tasks::settle(kv, "done", Settlement::Completed, None).expect("settles");
    tasks::withdraw_run(kv, "r2", &names(&["withdrawn"])).expect("withdraws");
    arm(kv, timer("r1", "a", 10));
    arm(kv, timer("r1", "b", 20));
    arm(kv, timer("r2", "a", 30));
    arm(kv, timer("r3", "a", 40));
    timers::claim_due(kv, 25, 1, 1_000).expect("claims r1/a");
    timers::disarm(kv, "r1", "b").expect("disarms");
    runs::seal(kv, "r3", &[]).expect("seals");
}

// ---- corrupt rows are never read as defaults ----------------------------

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
            tasks::claim(kv, "t", "bob", &names(&["a"]), None)
        }));
        claim_corrupt_detail(fails_cleanly(&mut kv, |kv| {
            tasks::take_over(kv, "t", "bob", "ann", &names(&["a"]), None)
        }));
        claim_corrupt_detail(fails_cleanly(&mut kv, |kv| tasks::release(kv, "t", "bob")));
        claim_corrupt_detail(fails_cleanly(&mut kv, |kv| {
            tasks::settle(kv, "t", Settlement::Completed, None)
        }));
        corrupt_detail(fails_cleanly(&mut kv, |kv| tasks::escalate(kv, "t")));
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
        tasks::claim(kv, "t", "bob", &[], None)
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
        kv.call(|kv| tasks::settle(kv, "t", Settlement::Completed, None))
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

/// Runs every verb over `kv`, each of which must fail as corrupt and write
/// nothing, answering their details.
fn every_verb_refuses(kv: &mut MemKv) -> Vec<String> {
    every_verb_refuses_as(kv, corrupt_detail)
}

/// [`every_verb_refuses`], each failing as `want` accepts.
fn every_verb_refuses_as(kv: &mut MemKv, want: fn(StoreError) -> String) -> Vec<String> {
    let claim_want = |e: ClaimError| match e {
        ClaimError::Store(e) => want(e),
        other => panic!("expected a store error, got {other:?}"),
    };
    let mut out = Vec::new();
    let kv = &mut *kv;
    out.push(want(fails_cleanly(kv, |kv| tasks::get(kv, "open"))));
    out.push(want(fails_cleanly(kv, |kv| tasks::open(kv, &task("new")))));
    out.push(want(fails_cleanly(kv, |kv| tasks::open(kv, &task("open")))));
    out.push(claim_want(fails_cleanly(kv, |kv| {
        tasks::claim(kv, "open", "bob", &names(&["approver"]), None)
    })));
    out.push(claim_want(fails_cleanly(kv, |kv| {
        tasks::take_over(kv, "held", "bob", "ann", &names(&["approver"]), None)
    })));
    out.push(claim_want(fails_cleanly(kv, |kv| {
        tasks::release(kv, "held", "bob")
    })));
    out.push(claim_want(fails_cleanly(kv, |kv| {
        tasks::settle(kv, "open", Settlement::Completed, None)
    })));
    out.push(claim_want(fails_cleanly(kv, |kv| {
        tasks::renew(kv, "leased", "cy", 120, 50)
    })));
    out.push(want(fails_cleanly(kv, |kv| {
        tasks::reclaim_lapsed(kv, 1_000, 10)
    })));
    out.push(want(fails_cleanly(kv, |kv| {
        tasks::claim_next(
            kv,
            &QueueQuery {
                roles: names(&["approver"]),
                actor: Some("ann".into()),
                limit: 1,
                after: None,
            },
            None,
        )
    })));
    out.push(want(fails_cleanly(kv, tasks::leased_count)));
    out.push(want(fails_cleanly(kv, tasks::next_lease_end)));
    out.push(want(fails_cleanly(kv, |kv| tasks::escalate(kv, "open"))));
    out.push(want(fails_cleanly(kv, |kv| {
        tasks::withdraw_run(kv, "run-1", &names(&["open"]))
    })));
    out.push(want(fails_cleanly(kv, |kv| {
        tasks::queue(
            kv,
            &QueueQuery {
                roles: vec![],
                actor: None,
                limit: 10,
                after: None,
            },
        )
    })));
    out.push(want(fails_cleanly(kv, |kv| {
        tasks::for_case(kv, "c", 10, None)
    })));
    out.push(want(fails_cleanly(kv, tasks::open_count)));
    out.push(want(fails_cleanly(kv, |kv| tasks::overdue(kv, 100, 10))));
    out.push(want(fails_cleanly(kv, |kv| {
        timers::arm(kv, &timer("r9", "a", 1))
    })));
    out.push(want(fails_cleanly(kv, |kv| {
        timers::claim_due(kv, 10_000, 10, 10)
    })));
    out.push(want(fails_cleanly(kv, |kv| timers::disarm(kv, "r1", "a"))));
    out.push(want(fails_cleanly(kv, |kv| timers::disarm_run(kv, "r1"))));
    out.push(want(fails_cleanly(kv, timers::pending_count)));
    out.push(want(fails_cleanly(kv, timers::next_due)));
    out.push(want(fails_cleanly(kv, |kv| runs::seal(kv, "r1", &[]))));
    out.push(want(fails_cleanly(kv, |kv| runs::is_sealed(kv, "r3"))));
    out
}

#[test]
fn an_unknown_layout_version_is_corrupt_for_every_verb() {
    let mut kv = MemKv::new();
    mixed_workload(&mut kv);
    kv.map.insert(schema::layout().into_bytes(), b"v9".to_vec());
    for d in every_verb_refuses(&mut kv) {
        assert!(d.contains("layout \"v9\""), "{d}");
    }
    assert_eq!(findings(&mut kv), found(&[("layout", "meta/layout")]));
}

/// A mark of a later version than this component's was moved there by a
/// newer build: every verb, the check too, refuses it as `newer-layout`,
/// naming both layouts, and writes nothing.
#[test]
fn a_newer_layout_is_refused_by_every_verb_naming_both() {
    let newer = schema::LAYOUT_VERSION + 1;
    for mark in [
        format!("{newer}/64"),
        format!("{newer}/1/from-5"),
        format!("{}", newer + 90),
    ] {
        let mut kv = MemKv::new();
        mixed_workload(&mut kv);
        kv.map
            .insert(schema::layout().into_bytes(), mark.clone().into_bytes());
        let newer_detail = |e: StoreError| match e {
            StoreError::NewerLayout(d) => d,
            other => panic!("expected newer-layout, got {other:?}"),
        };
        for d in every_verb_refuses_as(&mut kv, newer_detail) {
            let found = mark.split('/').next().expect("a version");
            assert!(
                d.contains(&format!("layout {found}"))
                    && d.contains(&format!("writes layout {}", schema::LAYOUT_VERSION))
                    && d.contains("upgrade"),
                "{d}"
            );
        }
        let before = kv.map.clone();
        assert!(matches!(
            check::check(&mut kv),
            Err(StoreError::NewerLayout(_))
        ));
        assert!(kv.map == before);
    }
}

/// `queue` reads the layout mark only with its rows, so whatever it meets
/// before them that does not decode must still be blamed on a wrong layout
/// when the layout is wrong, and on the index when it is not.
#[test]
fn queue_reports_a_wrong_layout_before_an_index_entry_it_cannot_read() {
    let query = |roles: &[&str]| QueueQuery {
        roles: names(roles),
        actor: Some("ann".into()),
        limit: 10,
        after: None,
    };
    let mut kv = MemKv::new();
    mixed_workload(&mut kv);
    // A queue entry whose position is not (rank, created-at, id).
    kv.map.insert(
        schema::queue_role("approver").str("junk").into_bytes(),
        Vec::new(),
    );
    let d = corrupt_detail(fails_cleanly(&mut kv, |kv| {
        tasks::queue(kv, &query(&["approver"]))
    }));
    assert!(d.contains("queue index"), "{d}");
    let d = corrupt_detail(fails_cleanly(&mut kv, |kv| {
        tasks::claim_next(kv, &query(&["approver"]), None)
    }));
    assert!(d.contains("queue index"), "{d}");
    kv.map.insert(schema::layout().into_bytes(), b"2".to_vec());
    let d = corrupt_detail(fails_cleanly(&mut kv, |kv| {
        tasks::queue(kv, &query(&["approver"]))
    }));
    assert!(d.contains("layout 2"), "{d}");
    let d = corrupt_detail(fails_cleanly(&mut kv, |kv| {
        tasks::claim_next(kv, &query(&["approver"]), None)
    }));
    assert!(d.contains("layout 2"), "{d}");
    // An empty queue has no row to carry the mark, and is refused all the
    // same.
    let mut kv = MemKv::new();
    open(&mut kv, task("t").roles(&["approver"]));
    kv.map.insert(schema::layout().into_bytes(), b"2".to_vec());
    let d = corrupt_detail(fails_cleanly(&mut kv, |kv| {
        tasks::queue(kv, &query(&["nobody"]))
    }));
    assert!(d.contains("layout 2"), "{d}");
    let d = corrupt_detail(fails_cleanly(&mut kv, |kv| {
        tasks::claim_next(kv, &query(&["nobody"]), None)
    }));
    assert!(d.contains("layout 2"), "{d}");
}

/// A keyspace written by an earlier 0.2 build: the same rows, each counter
/// in one key. Read as layout 3 its counters would all be zero, and the
/// first settle would take a shard below zero; it is refused by name.
#[test]
fn a_keyspace_in_layout_2_is_refused_by_name_for_every_verb() {
    let mut kv = MemKv::new();
    mixed_workload(&mut kv);
    for name in schema::COUNTERS {
        let total = match name {
            schema::OPEN_TASKS => tasks::open_count(&mut kv),
            schema::LEASED_CLAIMS => tasks::leased_count(&mut kv),
            _ => timers::pending_count(&mut kv),
        }
        .expect("a count");
        for k in schema::Shards::SHARED.keys(name) {
            kv.map.remove(&k);
        }
        kv.map.insert(
            crate::keys::Key::new().str("count").str(name).into_bytes(),
            total.to_be_bytes().to_vec(),
        );
    }
    kv.map.insert(schema::layout().into_bytes(), b"2".to_vec());
    for d in every_verb_refuses(&mut kv) {
        assert!(
            d.contains("layout 2") && d.contains("single-key counters"),
            "{d}"
        );
    }
    let found = check::check(&mut kv).expect("the check runs");
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].structure, "layout");
    assert!(found[0].detail.contains("layout 2"), "{found:?}");
}

// ---- the consistency check ----------------------------------------------

#[test]
fn the_check_finds_nothing_on_a_healthy_store_after_a_mixed_workload() {
    let mut kv = MemKv::new();
    assert_healthy(&mut kv);
    mixed_workload(&mut kv);
    assert_healthy(&mut kv);
}

#[test]
fn the_check_finds_a_task_row_deleted_behind_its_indexes() {
    let mut kv = layout_4();
    mixed_workload(&mut kv);
    // "open": queue-role approver, overdue at 50, case c; and it was pending.
    kv.map.remove(schema::task("open").as_bytes());
    assert_eq!(
        findings(&mut kv),
        found(&[
            ("case-index", "open"),
            (
                "open-count",
                &shard(schema::OPEN_TASKS, schema::Shards::SHARED.task("open"))
            ),
            ("overdue-index", "open"),
            ("queue-index", "open"),
            ("task-log", "open"),
        ])
    );
}

#[test]
fn the_check_finds_an_index_entry_left_behind() {
    let mut kv = MemKv::new();
    mixed_workload(&mut kv);
    // "held" was in the approver and lead queues before bob claimed it.
    let pos = schema::queue_position(Priority::Normal.rank(), 1_000, "held");
    kv.map.insert(
        schema::queue_role("lead").raw(pos.as_bytes()).into_bytes(),
        Vec::new(),
    );
    assert_eq!(findings(&mut kv), found(&[("queue-index", "held")]));
    // And an overdue entry at a stale instant.
    let mut kv = MemKv::new();
    mixed_workload(&mut kv);
    kv.map
        .insert(schema::overdue_entry(49, "open").into_bytes(), Vec::new());
    assert_eq!(findings(&mut kv), found(&[("overdue-index", "open")]));
}

#[test]
fn the_check_finds_a_missing_index_entry() {
    let mut kv = MemKv::new();
    mixed_workload(&mut kv);
    kv.map.remove(schema::overdue_entry(50, "open").as_bytes());
    assert_eq!(findings(&mut kv), found(&[("overdue-index", "open")]));
    let mut kv = MemKv::new();
    mixed_workload(&mut kv);
    let pos = schema::queue_position(Priority::Urgent.rank(), 1_000, "anyone");
    kv.map
        .remove(schema::queue_any().raw(pos.as_bytes()).as_bytes());
    assert_eq!(findings(&mut kv), found(&[("queue-index", "anyone")]));
}

#[test]
fn the_check_finds_the_open_counter_off_by_one_either_way() {
    for delta in [1i64, -1] {
        let mut kv = layout_4();
        mixed_workload(&mut kv);
        let own = schema::Shards::SHARED.task("open");
        skew_shard(&mut kv, schema::OPEN_TASKS, own, delta);
        let found_now = check::check(&mut kv).expect("the check runs");
        assert_eq!(found_now.len(), 1, "{found_now:?}");
        let d = &found_now[0];
        assert_eq!(
            (d.structure.as_str(), d.subject.as_str()),
            ("open-count", shard(schema::OPEN_TASKS, own).as_str())
        );
        assert!(
            d.detail.contains("open-tasks") && d.detail.contains(&format!("shard {own}")),
            "{d:?}"
        );
    }
}

#[test]
fn the_check_finds_the_timer_counter_off_by_one_either_way() {
    for delta in [1i64, -1] {
        let mut kv = layout_4();
        mixed_workload(&mut kv);
        let own = schema::Shards::SHARED.timer("r1", "a");
        skew_shard(&mut kv, schema::ARMED_TIMERS, own, delta);
        assert_eq!(
            findings(&mut kv),
            found(&[("pending-count", &shard(schema::ARMED_TIMERS, own))])
        );
    }
}

/// A count moved to another shard leaves every sum right, so only a check by
/// shard sees it; left alone it would take a shard below zero once the task
/// settles.
#[test]
fn the_check_finds_a_count_in_the_wrong_shard_though_the_sum_is_right() {
    let mut kv = layout_4();
    mixed_workload(&mut kv);
    let total = tasks::open_count(&mut kv).expect("open-count");
    let own = schema::Shards::SHARED.task("open");
    let wrong = (own + 1) % schema::MAX_SHARDS;
    skew_shard(&mut kv, schema::OPEN_TASKS, own, -1);
    skew_shard(&mut kv, schema::OPEN_TASKS, wrong, 1);
    assert_eq!(tasks::open_count(&mut kv), Ok(total), "the sum hides it");
    assert_eq!(
        findings(&mut kv),
        found(&[
            ("open-count", &shard(schema::OPEN_TASKS, own)),
            ("open-count", &shard(schema::OPEN_TASKS, wrong)),
        ])
    );
}

#[test]
fn the_check_finds_stray_and_unreadable_counter_keys() {
    let mut kv = MemKv::new();
    mixed_workload(&mut kv);
    // A layout-2 counter key left in a layout-3 keyspace, a shard past the
    // last, a counter nobody keeps, and a shard of the wrong width.
    kv.map.insert(
        crate::keys::Key::new()
            .str("count")
            .str(schema::OPEN_TASKS)
            .into_bytes(),
        1u64.to_be_bytes().to_vec(),
    );
    kv.map.insert(
        schema::counters()
            .str(schema::LEASED_CLAIMS)
            .int(64)
            .into_bytes(),
        1u64.to_be_bytes().to_vec(),
    );
    kv.map.insert(
        schema::counter_shard("nothing", 0).into_bytes(),
        1u64.to_be_bytes().to_vec(),
    );
    let own = schema::Shards::SHARED.timer("r2", "a");
    kv.map.insert(
        schema::counter_shard(schema::ARMED_TIMERS, own).into_bytes(),
        vec![1, 2],
    );
    assert_eq!(
        findings(&mut kv),
        found(&[
            ("counter", "leased-claims/64"),
            ("counter", "nothing/0"),
            ("counter", "open-tasks"),
            ("pending-count", &shard(schema::ARMED_TIMERS, own)),
        ])
    );
}

#[test]
fn the_check_finds_a_row_that_does_not_decode() {
    let mut kv = MemKv::new();
    mixed_workload(&mut kv);
    kv.map
        .insert(schema::task("done").into_bytes(), b"{broken".to_vec());
    assert_eq!(findings(&mut kv), found(&[("task", "done")]));
    let mut kv = MemKv::new();
    mixed_workload(&mut kv);
    kv.map
        .insert(schema::timer("r2", "a").into_bytes(), b"[]".to_vec());
    assert_eq!(findings(&mut kv), found(&[("timer", "r2/a")]));
}

#[test]
fn the_check_finds_a_row_whose_fields_contradict_its_indexes() {
    // A row that decodes but says something its index entries do not.
    let mut kv = MemKv::new();
    mixed_workload(&mut kv);
    let bytes = kv
        .map
        .get(schema::task("open").as_bytes())
        .cloned()
        .expect("a row");
    let mut row: TaskRow = store::decode_task(&bytes).expect("decodes");
    row.task.due_at = Some(51);
    kv.map.insert(
        schema::task("open").into_bytes(),
        store::encode_row(&row).expect("encodes"),
    );
    // The entry at 51 is missing, the one at 50 is not implied.
    let got = findings(&mut kv);
    assert_eq!(
        got,
        found(&[("overdue-index", "open"), ("overdue-index", "open")])
    );
}

#[test]
fn the_check_finds_a_missing_lease_entry() {
    let mut kv = MemKv::new();
    mixed_workload(&mut kv);
    kv.map.remove(schema::lease_entry(150, "leased").as_bytes());
    assert_eq!(findings(&mut kv), found(&[("lease-index", "leased")]));
}

#[test]
fn the_check_finds_a_lease_entry_left_behind() {
    let mut kv = MemKv::new();
    mixed_workload(&mut kv);
    // The entry of an earlier lease of the same claim, and one for a task
    // held without a lease.
    kv.map
        .insert(schema::lease_entry(120, "leased").into_bytes(), Vec::new());
    kv.map
        .insert(schema::lease_entry(120, "held").into_bytes(), Vec::new());
    assert_eq!(
        findings(&mut kv),
        found(&[("lease-index", "held"), ("lease-index", "leased")])
    );
}

#[test]
fn the_check_finds_the_leased_counter_off_by_one_either_way() {
    for delta in [1i64, -1] {
        let mut kv = layout_4();
        mixed_workload(&mut kv);
        let n = tasks::leased_count(&mut kv).expect("leased-count");
        assert_eq!(n, 1);
        let own = schema::Shards::SHARED.task("leased");
        skew_shard(&mut kv, schema::LEASED_CLAIMS, own, delta);
        assert_eq!(
            findings(&mut kv),
            found(&[("leased-count", &shard(schema::LEASED_CLAIMS, own))])
        );
    }
}

#[test]
fn the_check_finds_a_lease_on_a_task_that_is_not_claimed() {
    let mut kv = MemKv::new();
    mixed_workload(&mut kv);
    let bytes = kv
        .map
        .get(schema::task("done").as_bytes())
        .cloned()
        .expect("a row");
    let mut row: TaskRow = store::decode_task(&bytes).expect("decodes");
    row.task.lease_until = Some(40);
    kv.map.insert(
        schema::task("done").into_bytes(),
        store::encode_row(&row).expect("encodes"),
    );
    // The row now disagrees with its last history entry, too.
    assert_eq!(
        findings(&mut kv),
        found(&[("history", "done"), ("task", "done")])
    );
}

#[test]
fn the_check_finds_a_missing_due_entry() {
    let mut kv = MemKv::new();
    mixed_workload(&mut kv);
    // r1/a is held until 25 + 1000.
    kv.map
        .remove(schema::due_entry(1_025, "r1", "a").as_bytes());
    assert_eq!(findings(&mut kv), found(&[("due-index", "r1/a")]));
}

#[test]
fn the_check_finds_a_due_entry_left_behind() {
    let mut kv = MemKv::new();
    mixed_workload(&mut kv);
    // r1/a's entry from before it was claimed, at its fire time.
    kv.map
        .insert(schema::due_entry(10, "r1", "a").into_bytes(), Vec::new());
    // And one for a timer that was disarmed.
    kv.map
        .insert(schema::due_entry(20, "r1", "b").into_bytes(), Vec::new());
    assert_eq!(
        findings(&mut kv),
        found(&[("due-index", "10/r1/a"), ("due-index", "20/r1/b")])
    );
}

#[test]
fn the_check_never_passes_over_a_key_that_does_not_decode() {
    // A key under a known structure whose tuple is cut short. The check may
    // list it or refuse to go on, but it must not call the store healthy.
    for prefix in [
        schema::tasks(),
        schema::counters(),
        schema::queue_any(),
        schema::overdue(),
        schema::timers(),
        schema::due(),
        schema::leases(),
    ] {
        let mut kv = MemKv::new();
        mixed_workload(&mut kv);
        kv.map
            .insert(prefix.raw(&[0x15, 1, 2]).into_bytes(), Vec::new());
        match check::check(&mut kv) {
            Ok(found) => assert!(!found.is_empty(), "a damaged key passed the check"),
            Err(e) => assert!(matches!(e, StoreError::Corrupt(_)), "{e:?}"),
        }
    }
}

/// Spread by writer (layout 5), a row's count may sit in any shard: the
/// check sums each counter and names the counter.
#[test]
fn spread_by_writer_the_check_finds_each_counter_off_by_one_either_way() {
    for (name, structure) in [
        (schema::OPEN_TASKS, "open-count"),
        (schema::LEASED_CLAIMS, "leased-count"),
        (schema::ARMED_TIMERS, "pending-count"),
    ] {
        for delta in [1i64, -1] {
            let mut kv = MemKv::new();
            mixed_workload(&mut kv);
            assert_healthy(&mut kv);
            // Any shard, even one no call of the workload moved.
            skew_shard(&mut kv, name, 33, delta);
            let found_now = check::check(&mut kv).expect("the check runs");
            assert_eq!(found_now.len(), 1, "{found_now:?}");
            let d = &found_now[0];
            assert_eq!(
                (d.structure.as_str(), d.subject.as_str()),
                (structure, name)
            );
            assert!(d.detail.contains("sum to"), "{d:?}");
        }
    }
}

#[test]
fn spread_by_writer_the_check_finds_a_task_row_deleted_behind_its_indexes() {
    let mut kv = MemKv::new();
    mixed_workload(&mut kv);
    kv.map.remove(schema::task("open").as_bytes());
    assert_eq!(
        findings(&mut kv),
        found(&[
            ("case-index", "open"),
            ("open-count", schema::OPEN_TASKS),
            ("overdue-index", "open"),
            ("queue-index", "open"),
            ("task-log", "open"),
        ])
    );
}
