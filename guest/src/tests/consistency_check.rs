//! The consistency check: quiet on a healthy store, and finding each kind
//! of injected damage (a row or index entry missing or left behind, a
//! counter shard off by one, a row that does not decode or contradicts its
//! indexes, a key it cannot read), with counters spread by writer or by row.

use super::corruption_support::{findings, found, layout_4, mixed_workload};
use super::*;
use crate::schema;
use crate::store::{self, TaskRow};
use crate::tasks;

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
            ("by-due-index", "open"),
            ("by-kind-index", "open"),
            ("by-priority-index", "open"),
            ("by-run-index", "open"),
            ("by-state-index", "open"),
            ("case-index", "open"),
            (
                "open-count",
                &shard(schema::OPEN_TASKS, schema::Shards::SHARED.task("open"))
            ),
            ("overdue-index", "open"),
            ("queue-index", "open"),
            ("search-count", "open"),
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
    // The entries at 51 are missing (overdue and search), the ones at 50 are
    // not implied.
    let got = findings(&mut kv);
    assert_eq!(
        got,
        found(&[
            ("by-due-index", "open"),
            ("overdue-index", "open"),
            ("overdue-index", "open"),
            ("search-index", "open")
        ])
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
            ("by-due-index", "open"),
            ("by-kind-index", "open"),
            ("by-priority-index", "open"),
            ("by-run-index", "open"),
            ("by-state-index", "open"),
            ("case-index", "open"),
            ("open-count", schema::OPEN_TASKS),
            ("overdue-index", "open"),
            ("queue-index", "open"),
            ("search-count", "open"),
            ("task-log", "open"),
        ])
    );
}
