//! The indexed reads: the queue (order, role filter, exclusions, paging),
//! for-case, open-count and overdue.

use leasehold_host::{Error, Page, Priority, Settlement, StoreError, Task, Tenant};
use leasehold_tests::*;

/// Pages through the whole queue for `roles` as `actor`, `limit` at a time.
fn all_pages(t: &Tenant, roles: &[&str], actor: Option<&str>, limit: u32) -> Vec<Page> {
    let mut pages = Vec::new();
    let mut after = None;
    loop {
        let page = t
            .queue(&query(roles, actor, limit, after))
            .expect("queue page");
        assert!(page.tasks.len() <= limit as usize);
        after = page.next.clone();
        pages.push(page);
        if after.is_none() {
            return pages;
        }
        assert!(pages.len() < 10_000, "paging never ends");
    }
}

fn queue_order(a: &Task, b: &Task) -> std::cmp::Ordering {
    (a.priority.rank(), a.created_at, &a.id).cmp(&(b.priority.rank(), b.created_at, &b.id))
}

#[test]
fn the_queue_orders_by_priority_urgent_first_then_created_at_then_id() {
    let (t, _db) = temp_tenant();
    t.open(&task("n-20", 20)).expect("open");
    t.open(&task("low-1", 1).priority(Priority::Low))
        .expect("open");
    t.open(&task("b-urgent-50", 50).priority(Priority::Urgent))
        .expect("open");
    t.open(&task("a-urgent-50", 50).priority(Priority::Urgent))
        .expect("open");
    t.open(&task("high-90", 90).priority(Priority::High))
        .expect("open");
    t.open(&task("n-5", 5)).expect("open");
    let page = t.queue(&query(&[], None, 100, None)).expect("queue");
    assert_eq!(
        ids(&page.tasks),
        [
            "a-urgent-50",
            "b-urgent-50",
            "high-90",
            "n-5",
            "n-20",
            "low-1"
        ]
    );
    assert_eq!(page.next, None);
    assert_consistent(&t);
}

#[test]
fn the_queue_shows_the_callers_roles_and_tasks_open_to_anyone_only() {
    let (t, _db) = temp_tenant();
    t.open(&task("rev", 1).roles(&["reviewer"])).expect("open");
    t.open(&task("legal", 2).roles(&["legal"])).expect("open");
    t.open(&task("anyone", 3)).expect("open");
    t.open(&task("both", 4).roles(&["legal", "reviewer"]))
        .expect("open");
    let rev = t
        .queue(&query(&["reviewer"], None, 10, None))
        .expect("queue");
    assert_eq!(ids(&rev.tasks), ["rev", "anyone", "both"]);
    let nobody = t.queue(&query(&["clerk"], None, 10, None)).expect("queue");
    assert_eq!(ids(&nobody.tasks), ["anyone"]);
    let many = t
        .queue(&query(&["legal", "reviewer", "legal"], None, 10, None))
        .expect("queue");
    assert_eq!(
        ids(&many.tasks),
        ["rev", "legal", "anyone", "both"],
        "a task offered to several of the caller's roles appears once"
    );
    assert_consistent(&t);
}

#[test]
fn the_queue_never_offers_what_claim_would_refuse_the_actor() {
    let (t, _db) = temp_tenant();
    t.open(&task("t1", 1).roles(&["reviewer"]).excluding(&["bob"]))
        .expect("open");
    t.open(&task("t2", 2).roles(&["reviewer"])).expect("open");
    t.open(&task("t3", 3).excluding(&["bob"])).expect("open");
    let bob = t
        .queue(&query(&["reviewer"], Some("bob"), 10, None))
        .expect("queue");
    assert_eq!(ids(&bob.tasks), ["t2"]);
    let alice = t
        .queue(&query(&["reviewer"], Some("alice"), 10, None))
        .expect("queue");
    assert_eq!(ids(&alice.tasks), ["t1", "t2", "t3"]);
    let anonymous = t
        .queue(&query(&["reviewer"], None, 10, None))
        .expect("queue");
    assert_eq!(ids(&anonymous.tasks), ["t1", "t2", "t3"]);
    assert_consistent(&t);
}

#[test]
fn only_open_and_escalated_tasks_are_queued() {
    let (t, _db) = temp_tenant();
    for (i, id) in ["open", "claimed", "esc", "done", "esc-claimed"]
        .iter()
        .enumerate()
    {
        t.open(&task(id, i as i64).roles(&["reviewer"]))
            .expect("open");
    }
    t.claim("claimed", "alice", &["reviewer"], None)
        .expect("claim");
    t.escalate("esc").expect("escalate");
    t.settle("done", Settlement::Completed, None)
        .expect("settle");
    t.escalate("esc-claimed").expect("escalate");
    t.claim("esc-claimed", "alice", &["reviewer"], None)
        .expect("claim");
    let page = t
        .queue(&query(&["reviewer"], None, 10, None))
        .expect("queue");
    assert_eq!(ids(&page.tasks), ["open", "esc"]);
    assert_consistent(&t);
}

#[test]
fn paging_57_tasks_five_at_a_time_has_no_gap_no_overlap_and_keeps_the_order() {
    let (t, _db) = fast_tenant();
    let priorities = [
        Priority::Low,
        Priority::Urgent,
        Priority::Normal,
        Priority::High,
    ];
    let mut expected = Vec::new();
    for i in 0..57_i64 {
        // Many ties on priority and created-at, so ids decide often.
        let mut tk = task(&format!("t{:02}", (i * 37) % 57), (i % 4) * 10)
            .priority(priorities[(i % 4) as usize]);
        tk = match i % 3 {
            0 => tk.roles(&["reviewer"]),
            1 => tk.roles(&["legal", "reviewer"]),
            _ => tk,
        };
        expected.push(t.open(&tk).expect("open"));
    }
    // Noise the caller must never see.
    t.open(&task("x-other-role", 0).roles(&["clerk"]))
        .expect("open");
    t.open(&task("x-excluded", 0).excluding(&["alice"]))
        .expect("open");
    expected.sort_by(queue_order);

    let pages = all_pages(&t, &["reviewer", "legal"], Some("alice"), 5);
    assert_eq!(pages.len(), 12, "57 tasks make 11 full pages and one of 2");
    for p in &pages[..11] {
        assert_eq!(p.tasks.len(), 5);
        assert!(p.next.is_some());
    }
    assert_eq!(pages[11].tasks.len(), 2);
    let seen: Vec<Task> = pages.into_iter().flat_map(|p| p.tasks).collect();
    assert_eq!(ids(&seen), ids(&expected));
    assert_consistent(&t);
}

#[test]
fn next_is_present_exactly_when_another_task_follows() {
    let (t, _db) = temp_tenant();
    for i in 0..10 {
        t.open(&task(&format!("t{i}"), i)).expect("open");
    }
    let first = t.queue(&query(&[], None, 5, None)).expect("queue");
    assert_eq!(ids(&first.tasks), ["t0", "t1", "t2", "t3", "t4"]);
    let second = t
        .queue(&query(&[], None, 5, first.next.clone()))
        .expect("queue");
    assert_eq!(ids(&second.tasks), ["t5", "t6", "t7", "t8", "t9"]);
    assert_eq!(second.next, None, "a full last page has no next");
    let whole = t.queue(&query(&[], None, 10, None)).expect("queue");
    assert_eq!(whole.next, None);
    let short = t.queue(&query(&[], None, 9, None)).expect("queue");
    assert!(short.next.is_some());
}

#[test]
fn a_cursor_stays_valid_after_the_task_it_points_at_leaves_the_queue() {
    let (t, _db) = temp_tenant();
    for i in 0..12 {
        t.open(&task(&format!("t{i:02}"), i).roles(&["reviewer"]))
            .expect("open");
    }
    let first = t
        .queue(&query(&["reviewer"], None, 5, None))
        .expect("queue");
    assert_eq!(ids(&first.tasks), ["t00", "t01", "t02", "t03", "t04"]);
    // The task the cursor names is claimed, and the one after it settled.
    t.claim("t04", "alice", &["reviewer"], None).expect("claim");
    t.settle("t05", Settlement::Withdrawn, None)
        .expect("settle");
    let second = t
        .queue(&query(&["reviewer"], None, 5, first.next.clone()))
        .expect("the cursor still names a position");
    assert_eq!(ids(&second.tasks), ["t06", "t07", "t08", "t09", "t10"]);
    let third = t
        .queue(&query(&["reviewer"], None, 5, second.next))
        .expect("queue");
    assert_eq!(ids(&third.tasks), ["t11"]);
    assert_eq!(third.next, None);
    assert_consistent(&t);
}

#[test]
fn a_queue_cursor_may_be_reused_with_other_roles() {
    let (t, _db) = temp_tenant();
    for i in 0..6 {
        let role = if i % 2 == 0 { "reviewer" } else { "legal" };
        t.open(&task(&format!("t{i}"), i).roles(&[role]))
            .expect("open");
    }
    let first = t
        .queue(&query(&["reviewer"], None, 2, None))
        .expect("queue");
    assert_eq!(ids(&first.tasks), ["t0", "t2"]);
    let legal = t
        .queue(&query(&["legal"], None, 10, first.next))
        .expect("a position is valid in any role's queue");
    assert_eq!(ids(&legal.tasks), ["t3", "t5"]);
}

#[test]
fn a_cursor_that_is_not_from_this_verb_is_invalid() {
    let (t, _db) = temp_tenant();
    for i in 0..4 {
        t.open(&task(&format!("t{i}"), i).in_case("c1"))
            .expect("open");
    }
    let case_page = t.for_case("c1", 1, None).expect("for-case");
    let queue_page = t.queue(&query(&[], None, 1, None)).expect("queue");
    let case_cursor = case_page.next.expect("more in the case");
    let queue_cursor = queue_page.next.expect("more in the queue");
    assert!(matches!(
        t.queue(&query(&[], None, 1, Some(case_cursor))),
        Err(Error::Store(StoreError::Invalid(_)))
    ));
    assert!(matches!(
        t.for_case("c1", 1, Some(&queue_cursor)),
        Err(Error::Store(StoreError::Invalid(_)))
    ));
    for junk in ["", "q", "qzz", "q00", "hello"] {
        assert!(
            matches!(
                t.queue(&query(&[], None, 1, Some(junk.into()))),
                Err(Error::Store(StoreError::Invalid(_)))
            ),
            "cursor {junk:?} accepted"
        );
    }
}

#[test]
fn a_limit_of_zero_or_above_1000_is_invalid_and_1000_is_allowed() {
    let (t, _db) = temp_tenant();
    t.open(&task("t1", 1).in_case("c1").due(5)).expect("open");
    for bad in [0, 1001] {
        assert!(matches!(
            t.queue(&query(&[], None, bad, None)),
            Err(Error::Store(StoreError::Invalid(_)))
        ));
        assert!(matches!(
            t.for_case("c1", bad, None),
            Err(Error::Store(StoreError::Invalid(_)))
        ));
        assert!(matches!(
            t.overdue(10, bad),
            Err(Error::Store(StoreError::Invalid(_)))
        ));
    }
    assert_eq!(
        t.queue(&query(&[], None, 1000, None))
            .expect("queue")
            .tasks
            .len(),
        1
    );
}

// ---- for-case ----

#[test]
fn for_case_lists_every_task_of_the_case_in_any_state_by_created_at_then_id() {
    let (t, _db) = temp_tenant();
    t.open(&task("b", 5).in_case("c1")).expect("open");
    t.open(&task("a", 5).in_case("c1")).expect("open");
    t.open(&task("z", 1).in_case("c1").priority(Priority::Low))
        .expect("open");
    t.open(&task("late", 9).in_case("c1").roles(&["reviewer"]))
        .expect("open");
    t.open(&task("other-case", 0).in_case("c2")).expect("open");
    t.open(&task("no-case", 0)).expect("open");
    t.claim("a", "alice", &[], None).expect("claim");
    t.settle("b", Settlement::Expired, None).expect("settle");
    t.escalate("late").expect("escalate");
    let page = t.for_case("c1", 10, None).expect("for-case");
    assert_eq!(ids(&page.tasks), ["z", "a", "b", "late"]);
    assert_eq!(page.next, None);
    assert_eq!(
        ids(&t.for_case("c2", 10, None).expect("for-case").tasks),
        ["other-case"]
    );
    assert!(
        t.for_case("c3", 10, None)
            .expect("for-case")
            .tasks
            .is_empty()
    );
    assert_consistent(&t);
}

#[test]
fn for_case_pages_without_gap_or_overlap() {
    let (t, _db) = fast_tenant();
    let mut expected = Vec::new();
    for i in 0..23_i64 {
        let tk = task(&format!("k{:02}", (i * 7) % 23), i % 5).in_case("c1");
        expected.push(t.open(&tk).expect("open"));
        t.open(&task(&format!("other{i}"), i).in_case("c1-suffix"))
            .expect("open");
    }
    // Settling some must not change what the case lists.
    t.settle("k03", Settlement::Completed, None)
        .expect("settle");
    t.claim("k04", "alice", &[], None).expect("claim");
    expected.sort_by_key(|t| (t.created_at, t.id.clone()));
    let mut seen = Vec::new();
    let mut after: Option<String> = None;
    let mut pages = 0;
    loop {
        let page = t
            .for_case("c1", 4, after.as_deref())
            .expect("for-case page");
        pages += 1;
        assert!(page.tasks.len() <= 4);
        seen.extend(page.tasks);
        after = page.next;
        if after.is_none() {
            break;
        }
    }
    assert_eq!(pages, 6, "23 tasks make 5 full pages and one of 3");
    assert_eq!(ids(&seen), ids(&expected));
    assert_consistent(&t);
}

// ---- open-count ----

#[test]
fn open_count_counts_pending_tasks_across_claim_release_escalate_and_settle() {
    let (t, _db) = temp_tenant();
    let count = || t.open_count().expect("open-count");
    assert_eq!(count(), 0);
    for i in 0..4 {
        t.open(&task(&format!("t{i}"), i)).expect("open");
    }
    assert_eq!(count(), 4);
    t.open(&task("t0", 0)).expect("a repeat open");
    assert_eq!(count(), 4, "a repeat open adds nothing");
    t.claim("t0", "alice", &[], None).expect("claim");
    assert_eq!(count(), 4, "a held task is still a decision waiting");
    t.escalate("t1").expect("escalate");
    assert_eq!(count(), 4);
    t.release("t0", "alice").expect("release");
    assert_eq!(count(), 4);
    t.settle("t0", Settlement::Completed, None).expect("settle");
    assert_eq!(count(), 3);
    t.settle("t0", Settlement::Expired, None)
        .expect("settle again");
    assert_eq!(count(), 3, "a losing settle moves nothing");
    t.settle("t1", Settlement::Expired, None)
        .expect("settle escalated");
    assert_eq!(count(), 2);
    t.escalate("t1").expect("escalate settled");
    assert_eq!(count(), 2);
    t.withdraw_run("run-1", &["t2", "t3"]).expect("withdraw");
    assert_eq!(count(), 0);
    assert_consistent(&t);
}

// ---- overdue ----

#[test]
fn overdue_lists_open_and_claimed_tasks_due_by_now_earliest_first_then_id() {
    let (t, _db) = temp_tenant();
    t.open(&task("late", 0).due(300)).expect("open");
    t.open(&task("b", 0).due(100)).expect("open");
    t.open(&task("a", 0).due(100)).expect("open");
    t.open(&task("held", 0).due(200)).expect("open");
    t.claim("held", "alice", &[], None).expect("claim");
    t.open(&task("now", 0).due(250)).expect("open");
    t.open(&task("never", 0)).expect("open");
    t.open(&task("done", 0).due(50)).expect("open");
    t.settle("done", Settlement::Completed, None)
        .expect("settle");
    let due = t.overdue(250, 10).expect("overdue");
    assert_eq!(
        ids(&due),
        ["a", "b", "held", "now"],
        "due-at == now is overdue"
    );
    assert_eq!(ids(&t.overdue(250, 2).expect("overdue")), ["a", "b"]);
    assert!(t.overdue(99, 10).expect("overdue").is_empty());
    assert_eq!(
        ids(&t.overdue(10_000, 10).expect("overdue")),
        ["a", "b", "held", "now", "late"]
    );
    assert_consistent(&t);
}

#[test]
fn an_escalated_task_is_never_overdue_not_when_claimed_nor_when_released() {
    let (t, _db) = temp_tenant();
    t.open(
        &task("t1", 0)
            .due(100)
            .roles(&["reviewer"])
            .escalating_to(&["manager"]),
    )
    .expect("open");
    t.open(&task("t2", 0).due(100)).expect("open");
    assert_eq!(ids(&t.overdue(100, 10).expect("overdue")), ["t1", "t2"]);
    t.escalate("t1").expect("escalate");
    assert_eq!(ids(&t.overdue(100, 10).expect("overdue")), ["t2"]);
    t.claim("t1", "mona", &["manager"], None).expect("claim");
    assert_eq!(
        ids(&t.overdue(100, 10).expect("overdue")),
        ["t2"],
        "an escalated-then-claimed task must not come back as overdue"
    );
    t.release("t1", "mona").expect("release");
    assert_eq!(ids(&t.overdue(100, 10).expect("overdue")), ["t2"]);
    t.claim("t1", "mona", &["manager"], None)
        .expect("claim again");
    t.settle("t2", Settlement::Expired, None).expect("settle");
    assert!(t.overdue(1_000, 10).expect("overdue").is_empty());
    assert_consistent(&t);
}
