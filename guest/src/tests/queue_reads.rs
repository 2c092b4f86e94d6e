//! The paged reads: `queue` (order, eligibility, cursors) and `for-case`.

use super::*;
use crate::keys::{self, Elem};
use crate::model::{Page, QueueQuery, Settlement};
use crate::tasks;

fn query(roles: &[&str], actor: Option<&str>, limit: u32, after: Option<String>) -> QueueQuery {
    QueueQuery {
        roles: names(roles),
        actor: actor.map(str::to_owned),
        limit,
        after,
    }
}

fn queue(kv: &mut MemKv, roles: &[&str], actor: Option<&str>, limit: u32) -> Page {
    tasks::queue(kv, &query(roles, actor, limit, None)).expect("queue")
}

/// Pages through the whole queue with `limit`, checking the paging rules on
/// the way: no page is longer than `limit`, a page with `next` is full, and a
/// `next` is followed by at least one more task.
fn page_through_queue(
    kv: &mut MemKv,
    roles: &[&str],
    actor: Option<&str>,
    limit: u32,
) -> Vec<String> {
    let mut out = Vec::new();
    let mut after = None;
    for _ in 0..10_000 {
        let had_cursor = after.is_some();
        let page = tasks::queue(kv, &query(roles, actor, limit, after)).expect("queue");
        assert!(page.tasks.len() <= limit as usize);
        if had_cursor {
            assert!(!page.tasks.is_empty(), "a next cursor led to an empty page");
        }
        if page.next.is_some() {
            assert_eq!(page.tasks.len(), limit as usize, "a short page with next");
        }
        out.extend(ids(&page.tasks));
        match page.next {
            Some(next) => after = Some(next),
            None => return out,
        }
    }
    panic!("paging did not end");
}

fn page_through_case(kv: &mut MemKv, case: &str, limit: u32) -> Vec<String> {
    let mut out = Vec::new();
    let mut after: Option<String> = None;
    for _ in 0..10_000 {
        let had_cursor = after.is_some();
        let page = tasks::for_case(kv, case, limit, after.as_deref()).expect("for-case");
        assert!(page.tasks.len() <= limit as usize);
        if had_cursor {
            assert!(!page.tasks.is_empty(), "a next cursor led to an empty page");
        }
        if page.next.is_some() {
            assert_eq!(page.tasks.len(), limit as usize, "a short page with next");
        }
        out.extend(ids(&page.tasks));
        match page.next {
            Some(next) => after = Some(next),
            None => return out,
        }
    }
    panic!("paging did not end");
}

#[test]
fn queue_orders_by_priority_urgent_first_then_created_at_then_id() {
    let mut kv = MemKv::new();
    open(&mut kv, task("low").priority(Priority::Low).created(1));
    open(
        &mut kv,
        task("normal-late").priority(Priority::Normal).created(50),
    );
    open(
        &mut kv,
        task("normal-b").priority(Priority::Normal).created(20),
    );
    open(
        &mut kv,
        task("normal-a").priority(Priority::Normal).created(20),
    );
    open(&mut kv, task("high").priority(Priority::High).created(99));
    open(
        &mut kv,
        task("urgent-2").priority(Priority::Urgent).created(7),
    );
    open(
        &mut kv,
        task("urgent-1").priority(Priority::Urgent).created(7),
    );
    let page = queue(&mut kv, &[], None, 100);
    assert_eq!(
        ids(&page.tasks),
        [
            "urgent-1",
            "urgent-2",
            "high",
            "normal-a",
            "normal-b",
            "normal-late",
            "low"
        ]
    );
    assert_eq!(page.next, None);
}

#[test]
fn queue_shows_tasks_for_the_callers_roles_and_tasks_open_to_anyone() {
    let mut kv = MemKv::new();
    open(&mut kv, task("for-a").roles(&["a"]).created(1));
    open(&mut kv, task("for-b").roles(&["b"]).created(2));
    open(&mut kv, task("for-anyone").created(3));
    open(&mut kv, task("for-c-or-a").roles(&["c", "a"]).created(4));
    assert_eq!(
        ids(&queue(&mut kv, &["a"], None, 10).tasks),
        ["for-a", "for-anyone", "for-c-or-a"]
    );
    assert_eq!(
        ids(&queue(&mut kv, &["b"], None, 10).tasks),
        ["for-b", "for-anyone"]
    );
    assert_eq!(ids(&queue(&mut kv, &[], None, 10).tasks), ["for-anyone"]);
    assert_eq!(
        ids(&queue(&mut kv, &["zzz"], None, 10).tasks),
        ["for-anyone"]
    );
    // Role names are verbatim: "A" is not "a".
    assert_eq!(ids(&queue(&mut kv, &["A"], None, 10).tasks), ["for-anyone"]);
}

#[test]
fn a_task_offered_to_several_of_the_callers_roles_is_listed_once() {
    let mut kv = MemKv::new();
    open(&mut kv, task("both").roles(&["a", "b", "c"]).created(1));
    open(&mut kv, task("only-b").roles(&["b"]).created(2));
    let page = queue(&mut kv, &["c", "a", "b", "a"], None, 10);
    assert_eq!(ids(&page.tasks), ["both", "only-b"]);
    // And the limit counts it once.
    let page = queue(&mut kv, &["a", "b", "c"], None, 1);
    assert_eq!(ids(&page.tasks), ["both"]);
    assert!(page.next.is_some());
}

#[test]
fn the_queue_never_offers_what_claim_would_refuse_the_actor() {
    let mut kv = MemKv::new();
    open(
        &mut kv,
        task("t1").roles(&["a"]).excluding(&["ann"]).created(1),
    );
    open(&mut kv, task("t2").roles(&["a"]).created(2));
    open(&mut kv, task("t3").excluding(&["bob", "ann"]).created(3));
    assert_eq!(ids(&queue(&mut kv, &["a"], Some("ann"), 10).tasks), ["t2"]);
    assert_eq!(
        ids(&queue(&mut kv, &["a"], Some("bob"), 10).tasks),
        ["t1", "t2"]
    );
    assert_eq!(
        ids(&queue(&mut kv, &["a"], None, 10).tasks),
        ["t1", "t2", "t3"]
    );
    // Every task offered can in fact be claimed by the actor.
    for t in queue(&mut kv, &["a"], Some("bob"), 10).tasks {
        tasks::claim(&mut kv, &t.id, "bob", &names(&["a"]), None, None)
            .expect("offered, so claimable");
    }
}

#[test]
fn the_queue_never_shows_claimed_or_settled_tasks() {
    let mut kv = MemKv::new();
    for id in [
        "open",
        "claimed",
        "escalated",
        "completed",
        "expired",
        "withdrawn",
    ] {
        open(&mut kv, task(id).roles(&["a"]));
    }
    tasks::claim(&mut kv, "claimed", "bob", &names(&["a"]), None, None).expect("claims");
    tasks::escalate(&mut kv, "escalated", None).expect("escalates");
    tasks::settle(
        &mut kv,
        "completed",
        Settlement::Completed,
        None,
        None,
        None,
    )
    .expect("settles");
    tasks::settle(&mut kv, "expired", Settlement::Expired, None, None, None).expect("settles");
    tasks::settle(
        &mut kv,
        "withdrawn",
        Settlement::Withdrawn,
        None,
        None,
        None,
    )
    .expect("settles");
    assert_eq!(
        ids(&queue(&mut kv, &["a"], None, 10).tasks),
        ["escalated", "open"]
    );
}

/// A deterministic backlog of 60 tasks with priorities, creation times (many
/// ties), role sets, exclusions and states all mixed.
fn mixed_backlog(kv: &mut MemKv) -> Vec<Task> {
    let prios = [
        Priority::Low,
        Priority::Normal,
        Priority::High,
        Priority::Urgent,
    ];
    let role_sets: [&[&str]; 5] = [&[], &["a"], &["b"], &["a", "b"], &["c"]];
    for i in 0..60usize {
        let id = format!("t{:02}", (i * 13) % 60);
        let mut t = task(&id)
            .priority(prios[(i * 7) % 4])
            .created(((i * 37) % 11) as i64 * 100)
            .roles(role_sets[i % 5]);
        if i % 7 == 0 {
            t = t.excluding(&["ann"]);
        }
        open(kv, t);
        if i % 9 == 0 {
            tasks::claim(kv, &id, "zed", &names(&["a", "b", "c"]), None, None).expect("claims");
        } else if i % 11 == 0 {
            tasks::settle(kv, &id, Settlement::Completed, None, None, None).expect("settles");
        }
    }
    let mut all: Vec<Task> = (0..60).map(|i| stored(kv, &format!("t{i:02}"))).collect();
    all.sort_by(|x, y| {
        (x.priority.rank(), x.created_at, &x.id).cmp(&(y.priority.rank(), y.created_at, &y.id))
    });
    all
}

fn expected_queue(all: &[Task], roles: &[&str], actor: Option<&str>) -> Vec<String> {
    all.iter()
        .filter(|t| t.state.is_queued())
        .filter(|t| {
            t.candidate_roles.is_empty() || t.candidate_roles.iter().any(|r| roles.contains(&&**r))
        })
        .filter(|t| actor.is_none_or(|a| !t.excluded_actors.iter().any(|x| x == a)))
        .map(|t| t.id.clone())
        .collect()
}

#[test]
fn paging_the_queue_with_any_limit_neither_gaps_nor_overlaps() {
    let mut kv = MemKv::new();
    let all = mixed_backlog(&mut kv);
    let role_sets: [&[&str]; 6] = [&["a"], &["b"], &["a", "b"], &["c"], &[], &["c", "a", "zzz"]];
    for roles in role_sets {
        for actor in [None, Some("ann")] {
            let expected = expected_queue(&all, roles, actor);
            assert!(expected.len() > 5, "the fixture offers enough to page");
            for limit in [1, 2, 3, 7, 10, 59, 60, 61, 1000] {
                let got = page_through_queue(&mut kv, roles, actor, limit);
                assert_eq!(
                    got, expected,
                    "roles {roles:?}, actor {actor:?}, limit {limit}"
                );
            }
        }
    }
    assert_healthy(&mut kv);
}

#[test]
fn next_is_present_exactly_when_more_tasks_follow() {
    let mut kv = MemKv::new();
    for (i, id) in ["t1", "t2", "t3"].into_iter().enumerate() {
        open(&mut kv, task(id).roles(&["a"]).created(i as i64));
    }
    assert_eq!(queue(&mut kv, &["a"], None, 3).next, None);
    assert_eq!(queue(&mut kv, &["a"], None, 4).next, None);
    let page = queue(&mut kv, &["a"], None, 2);
    assert_eq!(ids(&page.tasks), ["t1", "t2"]);
    let next = page.next.expect("one more follows");
    let last = tasks::queue(&mut kv, &query(&["a"], None, 2, Some(next))).expect("queue");
    assert_eq!(ids(&last.tasks), ["t3"]);
    assert_eq!(last.next, None);

    // A following task the actor may not see does not count as "more".
    open(
        &mut kv,
        task("t4").roles(&["a"]).excluding(&["ann"]).created(9),
    );
    assert_eq!(queue(&mut kv, &["a"], Some("ann"), 3).next, None);
    assert!(queue(&mut kv, &["a"], None, 3).next.is_some());
    // Nor does one the caller's roles do not match.
    open(&mut kv, task("t5").roles(&["b"]).created(10));
    assert_eq!(queue(&mut kv, &["a"], Some("ann"), 3).next, None);
}

#[test]
fn a_queue_cursor_stays_valid_when_its_task_leaves_the_queue() {
    let mut kv = MemKv::new();
    for i in 1..=6 {
        open(
            &mut kv,
            task(&format!("t{i}")).roles(&["a"]).created(i * 10),
        );
    }
    let first = queue(&mut kv, &["a"], None, 2);
    assert_eq!(ids(&first.tasks), ["t1", "t2"]);
    let cursor = first.next.expect("more follow");
    // The task the cursor points at is claimed, the one before it settled.
    tasks::claim(&mut kv, "t2", "bob", &names(&["a"]), None, None).expect("claims");
    tasks::settle(&mut kv, "t1", Settlement::Completed, None, None, None).expect("settles");
    // A task opened before the cursor's position is not shown; one after is.
    open(&mut kv, task("early").roles(&["a"]).created(15));
    open(&mut kv, task("t3b").roles(&["a"]).created(30));
    let second = tasks::queue(&mut kv, &query(&["a"], None, 3, Some(cursor.clone())))
        .expect("the cursor is still valid");
    assert_eq!(ids(&second.tasks), ["t3", "t3b", "t4"]);
    // The cursor names a position, so it still reads the same after the task
    // at it is settled outright.
    tasks::settle(&mut kv, "t2", Settlement::Completed, None, None, None).expect("settles");
    let again = tasks::queue(&mut kv, &query(&["a"], None, 3, Some(cursor))).expect("still valid");
    assert_eq!(again, second);
}

#[test]
fn a_queue_cursor_may_be_reused_with_other_roles() {
    let mut kv = MemKv::new();
    for i in 1..=4 {
        open(
            &mut kv,
            task(&format!("a{i}")).roles(&["a"]).created(i * 10),
        );
        open(
            &mut kv,
            task(&format!("b{i}")).roles(&["b"]).created(i * 10 + 5),
        );
    }
    let page = queue(&mut kv, &["a"], None, 2);
    assert_eq!(ids(&page.tasks), ["a1", "a2"]);
    let cursor = page.next.expect("more follow");
    // Position (normal, 20, "a2"): b2 at 25 is after it, b1 at 15 before.
    let b = tasks::queue(&mut kv, &query(&["b"], None, 10, Some(cursor.clone())))
        .expect("the cursor is a position, valid for any roles");
    assert_eq!(ids(&b.tasks), ["b2", "b3", "b4"]);
    let both = tasks::queue(&mut kv, &query(&["a", "b"], Some("x"), 10, Some(cursor)))
        .expect("valid with an actor too");
    assert_eq!(ids(&both.tasks), ["b2", "a3", "b3", "a4", "b4"]);
}

#[test]
fn a_for_case_cursor_is_invalid_for_queue_and_garbage_cursors_are_invalid() {
    let mut kv = MemKv::new();
    for i in 1..=3 {
        open(&mut kv, task(&format!("t{i}")).in_case("c").created(i));
    }
    let case_cursor = tasks::for_case(&mut kv, "c", 1, None)
        .expect("for-case")
        .next
        .expect("more follow");
    let queue_cursor = queue(&mut kv, &[], None, 1).next.expect("more follow");

    let good_hex = queue_cursor
        .strip_prefix('q')
        .expect("a queue cursor starts with its verb")
        .to_owned();
    let bad_rank = format!(
        "q{}",
        keys::to_hex(&keys::encode(&[Elem::Int(4), Elem::Int(1), "t1".into()]))
    );
    let bad_id = format!(
        "q{}",
        keys::to_hex(&keys::encode(&[Elem::Int(2), Elem::Int(1), "".into()]))
    );
    let bad_time = format!(
        "q{}",
        keys::to_hex(&keys::encode(&[Elem::Int(2), Elem::Int(-1), "t1".into()]))
    );
    let wrong_shape = format!(
        "q{}",
        keys::to_hex(&keys::encode(&[Elem::Int(2), "t1".into()]))
    );
    for garbage in [
        case_cursor.clone(),
        String::new(),
        "q".to_owned(),
        "garbage".to_owned(),
        format!("q{}", good_hex.replacen('0', "g", 1)),
        format!("q{good_hex}0"),
        format!("q{good_hex}00"),
        format!("Q{good_hex}"),
        format!(" {queue_cursor}"),
        good_hex.clone(),
        bad_rank,
        bad_id,
        bad_time,
        wrong_shape,
    ] {
        let why = invalid_reason(fails_cleanly(&mut kv, |kv| {
            tasks::queue(kv, &query(&[], None, 5, Some(garbage.clone())))
        }));
        assert!(why.contains("after"), "{why}");
    }
    // And the other way round.
    for garbage in [
        queue_cursor.as_str(),
        "",
        "c",
        "czz",
        &format!("C{}", &case_cursor[1..]),
    ] {
        invalid_reason(fails_cleanly(&mut kv, |kv| {
            tasks::for_case(kv, "c", 5, Some(garbage))
        }));
    }
}

#[test]
fn for_case_lists_every_state_ordered_by_created_at_then_id() {
    let mut kv = MemKv::new();
    open(
        &mut kv,
        task("late")
            .in_case("c")
            .created(300)
            .priority(Priority::Urgent),
    );
    open(
        &mut kv,
        task("b").in_case("c").created(100).priority(Priority::Low),
    );
    open(
        &mut kv,
        task("a")
            .in_case("c")
            .created(100)
            .priority(Priority::Normal),
    );
    open(&mut kv, task("claimed").in_case("c").created(200));
    open(&mut kv, task("settled").in_case("c").created(50));
    open(&mut kv, task("other-case").in_case("c2").created(1));
    open(&mut kv, task("no-case").created(1));
    tasks::claim(&mut kv, "claimed", "bob", &[], None, None).expect("claims");
    tasks::settle(&mut kv, "settled", Settlement::Withdrawn, None, None, None).expect("settles");
    let page = tasks::for_case(&mut kv, "c", 100, None).expect("for-case");
    assert_eq!(ids(&page.tasks), ["settled", "a", "b", "claimed", "late"]);
    assert_eq!(page.next, None);
    assert_eq!(page.tasks[0].state, TaskState::Withdrawn);
    assert_eq!(page.tasks[3].assignee.as_deref(), Some("bob"));
    for limit in [1, 2, 3, 4, 5, 6] {
        assert_eq!(
            page_through_case(&mut kv, "c", limit),
            ["settled", "a", "b", "claimed", "late"],
            "limit {limit}"
        );
    }
    assert!(
        tasks::for_case(&mut kv, "nobody", 10, None)
            .expect("for-case")
            .tasks
            .is_empty()
    );
}

#[test]
fn cases_whose_names_share_a_prefix_do_not_mix() {
    let mut kv = MemKv::new();
    open(&mut kv, task("x1").in_case("c").created(5));
    open(&mut kv, task("x2").in_case("c1").created(1));
    open(&mut kv, task("x3").in_case("c 1").created(2));
    open(&mut kv, task("x4").in_case("cc").created(3));
    assert_eq!(page_through_case(&mut kv, "c", 1), ["x1"]);
    assert_eq!(page_through_case(&mut kv, "c1", 1), ["x2"]);
    assert_eq!(page_through_case(&mut kv, "c 1", 1), ["x3"]);
}

#[test]
fn a_for_case_cursor_may_be_reused_for_another_case() {
    let mut kv = MemKv::new();
    for i in 1..=3 {
        open(&mut kv, task(&format!("a{i}")).in_case("a").created(i * 10));
        open(
            &mut kv,
            task(&format!("b{i}")).in_case("b").created(i * 10 + 5),
        );
    }
    let cursor = tasks::for_case(&mut kv, "a", 1, None)
        .expect("for-case")
        .next
        .expect("more follow");
    let page = tasks::for_case(&mut kv, "b", 10, Some(&cursor)).expect("valid");
    assert_eq!(ids(&page.tasks), ["b1", "b2", "b3"]);
    let page = tasks::for_case(&mut kv, "a", 10, Some(&cursor)).expect("valid");
    assert_eq!(ids(&page.tasks), ["a2", "a3"]);
}

#[test]
fn queue_and_for_case_refuse_limits_outside_one_to_a_thousand() {
    let mut kv = MemKv::new();
    open(&mut kv, task("t").in_case("c"));
    for limit in [0, 1001, u32::MAX] {
        invalid_reason(fails_cleanly(&mut kv, |kv| {
            tasks::queue(kv, &query(&[], None, limit, None))
        }));
        invalid_reason(fails_cleanly(&mut kv, |kv| {
            tasks::for_case(kv, "c", limit, None)
        }));
    }
    assert_eq!(queue(&mut kv, &[], None, 1000).tasks.len(), 1);
}
