//! What the worklist's paged reads cost, in kv calls, however large the
//! backlog each test builds: a `queue` or `for-case` page reads O(limit)
//! index entries per role and its rows in one batch, `overdue` O(limit)
//! entries, and `claim-next` no more than a one-task `queue` page.

use super::cost_support::counted;
use super::*;
use crate::model::QueueQuery;
use crate::tasks;

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
/// the layout mark rides in that batch: a page of one role costs one
/// crossing that scans both its streams (the role's and the open-to-anyone
/// one) and one batched read, directly or over the call's buffer.
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
    assert_eq!(
        (calls.scan_manys, calls.batched_ranges),
        (1, 2),
        "{calls:?}"
    );
    assert_eq!(calls.get_manys, 1, "{calls:?}");
    // The layout mark and 50 rows; no read of its own.
    assert_eq!(calls.batched_keys, 51, "{calls:?}");
    assert_eq!(calls.gets, calls.batched_keys, "{calls:?}");
    assert_eq!(calls.round_trips(), 2, "{calls:?}");
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
        assert_eq!(calls.round_trips(), 2, "{calls:?}");
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
    // at most one shard and one log per row, the feed head, and the
    // writer's search count shards, one per state.
    let rows = page_calls.batched_keys - 1;
    assert!(
        calls.reads() <= page_calls.reads() + 2 * rows + 1 + 6,
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

/// `claim-next` with no task ahead that excludes the caller reads the row it
/// claims and no other: a queue of ten costs it the keys a queue of one
/// does. A second head's row, log and shard would each be one more key that
/// a claim of that task elsewhere conflicts with.
#[test]
fn claim_next_reads_only_the_row_it_claims_when_nothing_is_excluded() {
    use crate::model::Lease;
    let query = QueueQuery {
        roles: names(&["a"]),
        actor: Some("ann".into()),
        limit: 1,
        after: None,
    };
    let lease = Lease {
        now: 10,
        lease_ms: 1_000,
    };
    let mut keys = Vec::new();
    for backlog in [1, 10] {
        let mut kv = MemKv::new();
        for i in 0..backlog {
            open(
                &mut kv,
                task(&format!("t{i:05}")).roles(&["a"]).created(i as i64),
            );
        }
        let (got, calls) = counted(&mut kv, |kv| {
            kv.call(|kv| tasks::claim_next(kv, &query, Some(&lease)))
        });
        assert_eq!(got.expect("claim-next").expect("a task").id, "t00000");
        keys.push(calls.batched_keys);
        // Both streams' heads (the role's, and the empty one of tasks open
        // to anyone) in one crossing, then the row's batch.
        assert_eq!(calls.round_trips(), 2, "{calls:?}");
    }
    assert_eq!(keys[0], keys[1], "keys read from a queue of 1 and of 10");
}
