//! What the sweeps and the reads that time them cost, in kv calls, however
//! many timers or leases each test holds: `claim-due` and `reclaim-lapsed`
//! read O(limit) entries and none of the held ones, `next-due` and
//! `next-lease-end` one entry, `leased-count` one batch of every shard.

use super::cost_support::{assert_one_batch_of_every_shard, counted};
use super::*;
use crate::{tasks, timers};

/// The "done when" of the held-timers issue: 10,000 timers held under
/// unexpired leases, one due timer, and `claim_due(now, 1, lease)` answers
/// exactly that timer after reading a handful of entries.
#[test]
fn claim_due_finds_the_one_due_timer_behind_ten_thousand_held_ones_in_a_handful_of_reads() {
    const LEASE: u32 = 600_000;
    let mut kv = MemKv::new();
    for i in 0..10_000 {
        arm(
            &mut kv,
            timer(&format!("held-{}", i % 50), &format!("e{i:05}"), 100),
        );
    }
    // Ten sweeps at 100 hold every one of them until 600,100.
    for _ in 0..10 {
        let got = timers::claim_due(&mut kv, 100, 1000, LEASE).expect("claim-due");
        assert_eq!(got.len(), 1000);
    }
    assert!(
        timers::claim_due(&mut kv, 100, 1000, LEASE)
            .expect("claim-due")
            .is_empty()
    );
    // Fires after every held timer's fire time, and sorts after them by run:
    // a sweep that walked timers by fire time would pass all 10,000 first.
    arm(&mut kv, timer("zz-due", "wake", 150));

    let (got, calls) = counted(&mut kv, |kv| timers::claim_due(kv, 200, 1, LEASE));
    assert_eq!(got.expect("claim-due"), [timer("zz-due", "wake", 150)]);
    // Held timers sit in the due index at their lease expiry (600,100), past
    // `now`, so the scan of entries at or before 200 meets only the due one.
    // What is read: the layout mark (1 get), the one due-index entry (1
    // scanned), its timer row (1 get), its run's sealed mark (1 get) = 4.
    // The bound of 9 leaves room for a changed layout check and the mark
    // read again as the change is recorded (a buffered host answers that
    // from the call's buffer), never for a walk: one held timer read would
    // already be a bug, hence `scanned`.
    assert_eq!(calls.scanned, 1, "{calls:?}");
    assert!(calls.reads() <= 9, "{calls:?}");

    // With nothing due, a sweep reads nothing of the due index at all.
    let (got, calls) = counted(&mut kv, |kv| timers::claim_due(kv, 200, 1000, LEASE));
    assert!(got.expect("claim-due").is_empty());
    assert_eq!(calls.scanned, 0, "{calls:?}");
    assert!(calls.reads() <= 2, "{calls:?}");
    assert_eq!(timers::next_due(&mut kv), Ok(Some(100 + i64::from(LEASE))));
}

#[test]
fn claim_due_reads_o_limit_entries_however_many_timers_are_due() {
    let mut kv = MemKv::new();
    for i in 0..5_000 {
        arm(&mut kv, timer("r", &format!("e{i:05}"), i));
    }
    let (got, calls) = counted(&mut kv, |kv| {
        kv.call(|kv| timers::claim_due(kv, 10_000, 10, 1_000))
    });
    assert_eq!(got.expect("claim-due").len(), 10);
    // Counted as the component runs it, over the call's buffer: the layout
    // mark and the feed head, 10 entries, 10 rows with their 10 logs, one
    // sealed mark (one run).
    assert_eq!(calls.scanned, 10, "{calls:?}");
    assert!(calls.reads() <= 35, "{calls:?}");
}

#[test]
fn next_due_reads_one_entry() {
    let mut kv = MemKv::new();
    for i in 0..3_000 {
        arm(&mut kv, timer("r", &format!("e{i:05}"), 3_000 - i));
    }
    let (at, calls) = counted(&mut kv, timers::next_due);
    assert_eq!(at, Ok(Some(1)));
    assert!(calls.reads() <= 2, "{calls:?}");
}

/// The "done when" of the leased-claims issue: 10,000 tasks held under live
/// leases and 10 whose leases lapsed, and `reclaim_lapsed` moves exactly the
/// 10 after reading their 10 lease entries and rows, never the live ones.
#[test]
fn reclaim_lapsed_reads_o_limit_entries_beside_ten_thousand_live_leases() {
    use crate::model::Lease;
    let mut kv = MemKv::new();
    let live = Lease {
        now: 1_000,
        lease_ms: 600_000,
    };
    for i in 0..10_000 {
        let id = format!("live-{i:05}");
        open(&mut kv, task(&id).roles(&["a"]));
        tasks::claim(&mut kv, &id, "holder", &names(&["a"]), Some(&live), None).expect("claims");
    }
    // Lapsed at 1,500..1,509: ahead of every live lease (601,000) in the
    // lease index, and behind them by id, so a walk by id would pass all
    // 10,000 first.
    for i in 0..10 {
        let id = format!("zz-lapsed-{i}");
        open(&mut kv, task(&id).roles(&["a"]));
        let short = Lease {
            now: 1_000 + i,
            lease_ms: 500,
        };
        tasks::claim(&mut kv, &id, "gone", &names(&["a"]), Some(&short), None).expect("claims");
    }
    assert_eq!(tasks::leased_count(&mut kv), Ok(10_010));

    let (moved, calls) = counted(&mut kv, |kv| {
        kv.call(|kv| tasks::reclaim_lapsed(kv, 2_000, 10))
    });
    let moved = moved.expect("reclaim-lapsed");
    assert_eq!(
        ids(&moved),
        (0..10)
            .map(|i| format!("zz-lapsed-{i}"))
            .collect::<Vec<_>>()
    );
    assert!(moved.iter().all(|t| t.state == TaskState::Open));
    // Counted as the component runs it, over the call's buffer: the layout
    // mark and the feed head, the 10 lapsed entries (one scan: the live ones
    // sit past `now`), their 10 rows, their 10 logs and at most 10
    // leased-claims shards, and the writer's search count shards, one per
    // state (one batch).
    assert_eq!(calls.scanned, 10, "{calls:?}");
    assert!(calls.reads() <= 48, "{calls:?}");
    assert_eq!(calls.round_trips(), 3, "{calls:?}");

    // With nothing lapsed, a sweep reads nothing of the lease index.
    let (moved, calls) = counted(&mut kv, |kv| {
        kv.call(|kv| tasks::reclaim_lapsed(kv, 2_000, 1000))
    });
    assert!(moved.expect("reclaim-lapsed").is_empty());
    assert_eq!(calls.scanned, 0, "{calls:?}");
    // The layout mark; the empty scan.
    assert_eq!(calls.reads(), 1, "{calls:?}");
    assert_eq!(calls.round_trips(), 2, "{calls:?}");
    assert_eq!(tasks::leased_count(&mut kv), Ok(10_000));
    assert_eq!(tasks::next_lease_end(&mut kv), Ok(Some(live.end())));
}

#[test]
fn reclaim_lapsed_reads_o_limit_entries_however_many_have_lapsed() {
    use crate::model::Lease;
    let mut kv = MemKv::new();
    for i in 0..3_000 {
        let id = format!("t{i:05}");
        open(&mut kv, task(&id));
        let lease = Lease {
            now: i64::from(i),
            lease_ms: 1,
        };
        tasks::claim(&mut kv, &id, "bob", &[], Some(&lease), None).expect("claims");
    }
    let (moved, calls) = counted(&mut kv, |kv| {
        kv.call(|kv| tasks::reclaim_lapsed(kv, 10_000, 4))
    });
    assert_eq!(
        ids(&moved.expect("reclaim-lapsed")),
        ["t00000", "t00001", "t00002", "t00003"]
    );
    assert_eq!(calls.scanned, 4, "{calls:?}");
    // The layout mark and the feed head, 4 entries, 4 rows, their 4 logs,
    // at most 4 shards and the writer's 6 search count shards.
    assert!(calls.reads() <= 24, "{calls:?}");
}

#[test]
fn next_lease_end_reads_one_entry_and_leased_count_one_batch() {
    use crate::model::Lease;
    let mut kv = MemKv::new();
    for i in 0..3_000 {
        let id = format!("t{i:05}");
        open(&mut kv, task(&id));
        let lease = Lease {
            now: 3_000 - i64::from(i),
            lease_ms: 10,
        };
        tasks::claim(&mut kv, &id, "bob", &[], Some(&lease), None).expect("claims");
    }
    let (at, calls) = counted(&mut kv, tasks::next_lease_end);
    assert_eq!(at, Ok(Some(11)));
    assert!(calls.reads() <= 2, "{calls:?}");
    assert_eq!(tasks::leased_count(&mut kv), Ok(3_000));
    assert_one_batch_of_every_shard(&mut kv, |kv| tasks::leased_count(kv));
}
