//! What the verbs cost, in kv calls: every bound here holds however large the
//! backlog, so each test builds a large one the verb must not walk.

use super::*;
use crate::kv::{Calls, Kv};
use crate::model::QueueQuery;
use crate::{tasks, timers};

/// Runs `f` with the call counters reset, answering its result and the calls
/// it made.
fn counted<T>(kv: &mut MemKv, f: impl FnOnce(&mut MemKv) -> T) -> (T, Calls) {
    kv.calls = Calls::default();
    let out = f(kv);
    (out, kv.calls)
}

/// What a count costs, directly and over the call's buffer: the layout mark
/// and the counter's 64 shards, in one batched read and nothing else, however
/// many rows are counted.
#[track_caller]
fn assert_one_batch_of_every_shard(
    kv: &mut MemKv,
    count: fn(&mut dyn Kv) -> Result<u64, StoreError>,
) {
    let (_, calls) = counted(kv, |kv| count(kv));
    let expected = Calls {
        gets: 65,
        get_manys: 1,
        batched_keys: 65,
        // What the host's keyspaces have, so that one batch holds them.
        asks: 1,
        ..Calls::default()
    };
    assert_eq!(calls, expected);
    assert_eq!(calls.round_trips(), 1, "{calls:?}");
    let (_, calls) = counted(kv, |kv| kv.call(|kv| count(kv)));
    assert_eq!(calls, expected, "over the buffer");
}

#[test]
fn open_count_reads_every_shard_in_one_batch_however_many_tasks() {
    let mut kv = MemKv::new();
    for i in 0..3_000 {
        open(&mut kv, task(&format!("t{i}")).roles(&["a"]));
    }
    assert_eq!(tasks::open_count(&mut kv), Ok(3_000));
    assert_one_batch_of_every_shard(&mut kv, |kv| tasks::open_count(kv));
}

#[test]
fn pending_count_reads_every_shard_in_one_batch_however_many_timers() {
    let mut kv = MemKv::new();
    for i in 0..3_000 {
        arm(&mut kv, timer(&format!("r{}", i % 7), &format!("e{i}"), i));
    }
    assert_eq!(timers::pending_count(&mut kv), Ok(3_000));
    assert_one_batch_of_every_shard(&mut kv, |kv| timers::pending_count(kv));
}

#[test]
fn queue_for_a_narrow_role_reads_o_limit_entries_despite_a_large_backlog() {
    let mut kv = MemKv::new();
    // 10,000 urgent tasks for other roles: ahead of the narrow role's tasks
    // in any single global order, so an unindexed walk would read them all.
    for i in 0..10_000 {
        open(
            &mut kv,
            task(&format!("other-{i:05}"))
                .roles(&[&format!("role-{}", i % 20), "busy"])
                .priority(Priority::Urgent)
                .created(i64::from(i)),
        );
    }
    for i in 0..10 {
        open(
            &mut kv,
            task(&format!("narrow-{i}"))
                .roles(&["narrow"])
                .priority(Priority::Low)
                .created(50_000 + i64::from(i)),
        );
    }
    let query = QueueQuery {
        roles: names(&["narrow"]),
        actor: Some("ann".into()),
        limit: 10,
        after: None,
    };
    let (page, calls) = counted(&mut kv, |kv| tasks::queue(kv, &query));
    let page = page.expect("queue");
    assert_eq!(page.tasks.len(), 10);
    assert_eq!(page.next, None);
    assert!(page.tasks.iter().all(|t| t.id.starts_with("narrow-")));
    // 10 entries of the narrow index, none of the open-to-anyone one, and
    // 10 rows with the layout mark: about 21.
    assert!(calls.reads() < 60, "{calls:?}");

    // A page of 3 out of the 10 costs O(3), not O(10).
    let query = QueueQuery { limit: 3, ..query };
    let (page, calls) = counted(&mut kv, |kv| tasks::queue(kv, &query));
    assert_eq!(page.expect("queue").tasks.len(), 3);
    assert!(calls.reads() < 20, "{calls:?}");
}

#[test]
fn queue_reads_o_limit_times_roles_entries() {
    let mut kv = MemKv::new();
    for i in 0..3_000 {
        open(
            &mut kv,
            task(&format!("t{i:05}"))
                .roles(&[["a", "b", "c"][i % 3]])
                .created(i as i64),
        );
    }
    for i in 0..1_000 {
        open(&mut kv, task(&format!("any{i:05}")).created(i as i64));
    }
    let query = QueueQuery {
        roles: names(&["a", "b", "c"]),
        actor: None,
        limit: 10,
        after: None,
    };
    let (page, calls) = counted(&mut kv, |kv| tasks::queue(kv, &query));
    let page = page.expect("queue");
    assert_eq!(page.tasks.len(), 10);
    assert!(page.next.is_some());
    // Four indexes read at most limit + 1 entries each, plus limit + 1 rows
    // and the layout mark in their batch: (10 + 1) * 4 + 11 + 1 = 56.
    assert!(calls.reads() <= 56, "{calls:?}");
    // A later page costs the same, wherever it starts.
    let query = QueueQuery {
        after: page.next,
        ..query
    };
    let (page, calls) = counted(&mut kv, |kv| tasks::queue(kv, &query));
    assert_eq!(page.expect("queue").tasks.len(), 10);
    assert!(calls.reads() <= 56, "{calls:?}");
}

/// With `actor` given, a task that excludes the actor and lies ahead of the
/// page's end is read and dropped: the bound stated in the WIT is
/// O((limit + E) × (roles + 1)) entries, E being such tasks, however large
/// the backlog behind the page.
#[test]
fn queue_with_an_actor_reads_o_limit_plus_excluded_ahead_times_roles() {
    let mut kv = MemKv::new();
    let excluded_ahead = 300;
    for i in 0..5_000 {
        let t = task(&format!("t{i:05}")).roles(&["a"]).created(i as i64);
        let t = if i < excluded_ahead {
            t.excluding(&["ann"])
        } else {
            t
        };
        open(&mut kv, t);
    }
    let query = QueueQuery {
        roles: names(&["a"]),
        actor: Some("ann".into()),
        limit: 10,
        after: None,
    };
    let (page, calls) = counted(&mut kv, |kv| tasks::queue(kv, &query));
    let page = page.expect("queue");
    assert_eq!(page.tasks.first().map(|t| t.id.as_str()), Some("t00300"));
    assert_eq!(page.tasks.len(), 10);
    let (limit, e, streams) = (10u64, excluded_ahead as u64, 2u64);
    let chunk = limit + 1;
    // Each stream: every position up to the page's end and one chunk more;
    // one row per position taken; the layout mark, in the first batch.
    let bound = streams * (e + limit + 1 + chunk) + (e + limit + 1) + 1;
    assert!(calls.reads() <= bound, "{calls:?} > {bound}");
    // Without the actor the same page skips nothing.
    let (page, calls) = counted(&mut kv, |kv| {
        tasks::queue(
            kv,
            &QueueQuery {
                actor: None,
                ..query.clone()
            },
        )
    });
    assert_eq!(page.expect("queue").tasks.len(), 10);
    assert!(
        calls.reads() <= streams * (limit + 1) + limit + 1,
        "{calls:?}"
    );
}

/// A queue page's rows are read in one batch, not one round trip each, and
/// the layout mark rides in that batch: a page of one role costs one scan of
/// each of its two streams (the role's and the open-to-anyone one) and one
/// batched read, directly or over the call's buffer.
#[test]
fn a_queue_page_reads_its_rows_and_the_layout_in_one_batch() {
    let mut kv = MemKv::new();
    for i in 0..200 {
        open(
            &mut kv,
            task(&format!("t{i:05}")).roles(&["a"]).created(i as i64),
        );
    }
    let query = QueueQuery {
        roles: names(&["a"]),
        actor: None,
        limit: 50,
        after: None,
    };
    let (page, calls) = counted(&mut kv, |kv| tasks::queue(kv, &query));
    assert_eq!(page.expect("queue").tasks.len(), 50);
    assert_eq!(calls.scans, 2, "{calls:?}");
    assert_eq!(calls.get_manys, 1, "{calls:?}");
    // The layout mark and 50 rows; no read of its own.
    assert_eq!(calls.batched_keys, 51, "{calls:?}");
    assert_eq!(calls.gets, calls.batched_keys, "{calls:?}");
    assert_eq!(calls.round_trips(), 3, "{calls:?}");
    let (page, buffered) = counted(&mut kv, |kv| kv.call(|kv| tasks::queue(kv, &query)));
    assert_eq!(page.expect("queue").tasks.len(), 50);
    assert_eq!(buffered, calls, "over the buffer");

    // An empty queue has no row to read the mark with: the mark alone.
    let query = QueueQuery {
        roles: names(&["nobody"]),
        ..query
    };
    let mut empty = MemKv::new();
    open(&mut empty, task("t").roles(&["a"]));
    for kv in [&mut kv, &mut empty] {
        let (page, calls) = counted(kv, |kv| kv.call(|kv| tasks::queue(kv, &query)));
        assert!(page.expect("queue").tasks.is_empty());
        assert_eq!(
            calls.get_manys + calls.gets - calls.batched_keys,
            1,
            "{calls:?}"
        );
        assert_eq!(calls.round_trips(), 3, "{calls:?}");
    }
}

#[test]
fn for_case_reads_o_limit_entries_despite_other_cases() {
    let mut kv = MemKv::new();
    for i in 0..10_000 {
        // Cases that sort on both sides of "case-1", one sharing its prefix.
        let case = ["case-0", "case-10", "case-2"][i % 3];
        open(
            &mut kv,
            task(&format!("o{i:05}")).in_case(case).created(i as i64),
        );
    }
    for i in 0..10 {
        open(
            &mut kv,
            task(&format!("mine-{i}")).in_case("case-1").created(i),
        );
    }
    let (page, calls) = counted(&mut kv, |kv| tasks::for_case(kv, "case-1", 10, None));
    let page = page.expect("for-case");
    assert_eq!(page.tasks.len(), 10);
    assert_eq!(page.next, None);
    // Layout, up to 11 index entries, 10 rows.
    assert!(calls.reads() <= 22, "{calls:?}");
    let (page, calls) = counted(&mut kv, |kv| tasks::for_case(kv, "case-1", 4, None));
    assert_eq!(page.expect("for-case").tasks.len(), 4);
    // Layout, 5 entries (one to know whether more follow), their 5 rows.
    assert!(calls.reads() <= 11, "{calls:?}");
}

#[test]
fn overdue_reads_o_limit_entries() {
    let mut kv = MemKv::new();
    for i in 0..3_000 {
        open(&mut kv, task(&format!("t{i:05}")).due(i));
    }
    let (found, calls) = counted(&mut kv, |kv| tasks::overdue(kv, 10_000, 5));
    assert_eq!(found.expect("overdue").len(), 5);
    assert!(calls.reads() <= 11, "{calls:?}");
}

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

#[test]
fn claim_and_settle_touch_only_their_own_task() {
    let mut kv = MemKv::new();
    for i in 0..3_000 {
        open(&mut kv, task(&format!("t{i:05}")).roles(&["a"]).due(i));
    }
    let (t, calls) = counted(&mut kv, |kv| {
        tasks::claim(kv, "t01500", "bob", &names(&["a"]), None)
    });
    t.expect("claims");
    // The layout mark, the row, a shard, the task's log and the feed head,
    // over a bare store that keeps nothing it read (so the mark is read
    // again by the writes).
    assert_eq!(calls.scans, 0, "{calls:?}");
    assert!(calls.reads() <= 8, "{calls:?}");
    let (moved, calls) = counted(&mut kv, |kv| {
        tasks::settle(kv, "t01500", crate::model::Settlement::Completed, None)
    });
    assert_eq!(moved, Ok(true));
    assert_eq!(calls.scans, 0, "{calls:?}");
    assert!(calls.reads() <= 8, "{calls:?}");
}

/// As the component runs them, over the call's buffer, the verbs on one task
/// or timer cross to the store once: the layout mark, the row, its own
/// counter shards, its log and the feed head in one batch (never all 64
/// shards).
#[test]
fn verbs_on_one_task_or_timer_make_one_crossing() {
    use crate::model::{Lease, Settlement};
    let mut kv = MemKv::new();
    for i in 0..1_000 {
        open(&mut kv, task(&format!("t{i:05}")).roles(&["a"]));
    }
    let lease = Lease {
        now: 10,
        lease_ms: 1_000,
    };
    let one = Calls {
        gets: 6,
        get_manys: 1,
        batched_keys: 6,
        ..Calls::default()
    };
    let crossings = |c: Calls| (c.round_trips(), c.batched_keys, c.gets);
    let (t, calls) = counted(&mut kv, |kv| kv.call(|kv| tasks::open(kv, &task("new"))));
    t.expect("opens");
    assert_eq!(crossings(calls), crossings(one), "open: {calls:?}");
    let (t, calls) = counted(&mut kv, |kv| {
        kv.call(|kv| tasks::claim(kv, "t00500", "bob", &names(&["a"]), Some(&lease)))
    });
    t.expect("claims");
    assert_eq!(crossings(calls), crossings(one), "claim: {calls:?}");
    // What the host's keyspaces have, asked once per call at most.
    assert_eq!(calls.asks, 1, "claim: {calls:?}");
    let (t, calls) = counted(&mut kv, |kv| {
        kv.call(|kv| tasks::settle(kv, "t00500", Settlement::Completed, Some("bob")))
    });
    assert_eq!(t, Ok(true));
    assert_eq!(crossings(calls), crossings(one), "settle: {calls:?}");
    // A timer: the layout mark, the run's seal, the row, its shard, its log
    // and the feed head.
    let (t, calls) = counted(&mut kv, |kv| {
        kv.call(|kv| timers::arm(kv, &timer("r", "e", 5)))
    });
    t.expect("arms");
    assert_eq!(crossings(calls), crossings(one), "arm: {calls:?}");
    // The layout mark, the row, its shard, its log and the feed head.
    let (t, calls) = counted(&mut kv, |kv| kv.call(|kv| timers::disarm(kv, "r", "e")));
    assert_eq!(t, Ok(true));
    assert_eq!(
        (calls.round_trips(), calls.batched_keys),
        (1, 5),
        "disarm: {calls:?}"
    );
}

/// Disarming a run moves the shards of all its timers, which it learns only
/// as it walks them: it reads their logs in one batch per walk's chunk and
/// those shards in one batch at the end, not one crossing per timer.
#[test]
fn disarm_run_reads_the_shards_it_moves_in_one_batch() {
    let mut kv = MemKv::new();
    for i in 0..200 {
        arm(&mut kv, timer("r", &format!("e{i:03}"), i));
    }
    arm(&mut kv, timer("other", "e", 1));
    let (n, calls) = counted(&mut kv, |kv| kv.call(|kv| timers::disarm_run(kv, "r")));
    assert_eq!(n, Ok(200));
    // The layout mark and the feed head (one batch, so the buffer keeps
    // them for the writes), one scan of the run's timers, one batch of their
    // 200 logs, one batch of shards.
    assert_eq!(calls.scans, 1, "{calls:?}");
    assert_eq!(calls.get_manys, 3, "{calls:?}");
    assert_eq!(calls.round_trips(), 4, "{calls:?}");
    assert!(calls.batched_keys <= 2 + 200 + 64, "{calls:?}");
    assert_eq!(timers::pending_count(&mut kv), Ok(1));
    assert_healthy(&mut kv);
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
        tasks::claim(&mut kv, &id, "holder", &names(&["a"]), Some(&live)).expect("claims");
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
        tasks::claim(&mut kv, &id, "gone", &names(&["a"]), Some(&short)).expect("claims");
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
    // leased-claims shards (one batch).
    assert_eq!(calls.scanned, 10, "{calls:?}");
    assert!(calls.reads() <= 42, "{calls:?}");
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
        tasks::claim(&mut kv, &id, "bob", &[], Some(&lease)).expect("claims");
    }
    let (moved, calls) = counted(&mut kv, |kv| {
        kv.call(|kv| tasks::reclaim_lapsed(kv, 10_000, 4))
    });
    assert_eq!(
        ids(&moved.expect("reclaim-lapsed")),
        ["t00000", "t00001", "t00002", "t00003"]
    );
    assert_eq!(calls.scanned, 4, "{calls:?}");
    // The layout mark and the feed head, 4 entries, 4 rows, their 4 logs
    // and at most 4 shards.
    assert!(calls.reads() <= 18, "{calls:?}");
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
        tasks::claim(&mut kv, &id, "bob", &[], Some(&lease)).expect("claims");
    }
    let (at, calls) = counted(&mut kv, tasks::next_lease_end);
    assert_eq!(at, Ok(Some(11)));
    assert!(calls.reads() <= 2, "{calls:?}");
    assert_eq!(tasks::leased_count(&mut kv), Ok(3_000));
    assert_one_batch_of_every_shard(&mut kv, |kv| tasks::leased_count(kv));
}

/// `claim-next` costs what a one-task `queue` page costs, however large the
/// backlog, with or without tasks ahead that exclude the caller: the same
/// crossings, its batches carrying besides the page's keys the leased-claims
/// shard of each row, so that the claim reads nothing more. Both are counted
/// as the component runs them, over the call's buffer, so a read the buffer
/// answers costs nothing.
#[test]
fn claim_next_reads_no_more_than_a_one_task_queue_page() {
    use crate::model::Lease;
    let mut kv = MemKv::new();
    for i in 0..3_000 {
        let t = task(&format!("t{i:05}"))
            .roles(&[["a", "b"][i % 2]])
            .created(i as i64);
        // A few tasks at the head exclude ann.
        let t = if i < 3 { t.excluding(&["ann"]) } else { t };
        open(&mut kv, t);
    }
    for i in 0..1_000 {
        open(&mut kv, task(&format!("any{i:05}")).created(5_000 + i));
    }
    let query = QueueQuery {
        roles: names(&["a", "b"]),
        actor: Some("ann".into()),
        limit: 1,
        after: None,
    };
    let (page, page_calls) = counted(&mut kv, |kv| kv.call(|kv| tasks::queue(kv, &query)));
    assert_eq!(ids(&page.expect("queue").tasks), ["t00003"]);
    let lease = Lease {
        now: 10,
        lease_ms: 1_000,
    };
    let (got, calls) = counted(&mut kv, |kv| {
        kv.call(|kv| tasks::claim_next(kv, &query, Some(&lease)))
    });
    let got = got.expect("claim-next").expect("a task");
    assert_eq!(got.id, "t00003");
    assert_eq!(got.assignee.as_deref(), Some("ann"));
    // The page's batches hold the layout mark and the rows; claim-next's add
    // at most one shard and one log per row, and the feed head.
    let rows = page_calls.batched_keys - 1;
    assert!(
        calls.reads() <= page_calls.reads() + 2 * rows + 1,
        "{calls:?} against a page's {page_calls:?}"
    );
    assert_eq!(
        calls.round_trips(),
        page_calls.round_trips(),
        "{calls:?} against a page's {page_calls:?}"
    );
    assert_eq!(
        calls.gets, calls.batched_keys,
        "no read of its own: {calls:?}"
    );
    assert!(calls.reads() < 30, "{calls:?}");
}

#[test]
fn the_check_reads_ahead_a_few_batches_a_chunk_not_a_trip_a_key() {
    let mut kv = MemKv::new();
    let approver = names(&["approver"]);
    for i in 0..1_200 {
        let id = format!("t{i:04}");
        open(
            &mut kv,
            task(&id)
                .roles(&["approver"])
                .in_case(&format!("c{}", i % 7))
                .due(1_000 + i64::from(i)),
        );
        if i % 3 == 0 {
            tasks::claim(&mut kv, &id, "bob", &approver, None).expect("claims");
        }
    }
    for i in 0..400 {
        arm(
            &mut kv,
            timer(&format!("r{}", i % 5), &format!("e{i}"), i64::from(i)),
        );
    }
    let direct = crate::check::check(&mut kv).expect("the check runs");
    assert!(direct.is_empty(), "{direct:?}");
    let (found, calls) = counted(&mut kv, |kv| kv.call(|kv| crate::check::check(kv)));
    assert_eq!(found.expect("the check runs over the buffer"), direct);
    // Every point read of a chunk's entries was read ahead: what is left one
    // key at a time is the layout, the shards and the feed's heads.
    let single = calls.gets - calls.batched_keys;
    assert!(
        single <= 16,
        "{single} point reads one at a time: {calls:?}"
    );
    // A scan per chunk and at most a few batches beside it.
    assert!(
        calls.round_trips() <= 3 * calls.scans + 16,
        "{} round trips for {} scans: {calls:?}",
        calls.round_trips(),
        calls.scans
    );
    // An embedded store, the keyspace's only writer, answers point reads in
    // place: nothing is read ahead there, and the check finds the same.
    kv.sole_writer = true;
    let (found, calls) = counted(&mut kv, |kv| kv.call(|kv| crate::check::check(kv)));
    assert_eq!(found.expect("the check runs over the buffer"), direct);
    assert!(calls.get_manys <= 4, "{calls:?}");
}
