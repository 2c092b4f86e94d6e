//! The change record through the real component on the run's backend: a
//! task's life in its history, the feed followed by a reader while many
//! threads write, trimming past a reader, and waiters woken by commits and
//! never by a call that committed nothing. The feed's hazard (a later commit
//! carrying an earlier position) is forced on PostgreSQL, in
//! `postgres::changes`, where writers really run side by side.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};
use std::time::Duration;

use leasehold_host::{
    Change, Decision, Engine, FeedRead, Guard, HistoryEntry, Lease, ManualClock, Priority,
    Settlement, TaskChanges, TaskState, Tenant, TimerEvent,
};
use leasehold_tests::*;

/// An engine on `db` whose calls are recorded at `clock`.
fn engine_at(db: &TestDb, clock: &Arc<ManualClock>) -> Engine {
    let builder = Engine::builder().clock(clock.clone());
    match db.backend() {
        Backend::Redb => db.open(builder.durability(leasehold_host::Durability::None)),
        Backend::Postgres => db.open(builder),
    }
}

/// What the history says of one change, less what every entry repeats.
fn step(e: &HistoryEntry) -> (u64, i64, &str, Option<&str>, Option<TaskState>, TaskState) {
    (
        e.seq,
        e.at,
        e.verb.as_str(),
        e.actor.as_deref(),
        e.before,
        e.after,
    )
}

/// The issue's life of a task: open, claim, release, claim by another,
/// take-over, renew, settle; refusals and repeats in between record
/// nothing.
#[test]
fn a_tasks_life_is_listed_in_its_history_with_actor_states_and_times() {
    let db = TestDb::new();
    let clock = Arc::new(ManualClock::new(1_000));
    let e = engine_at(&db, &clock);
    let t = e.tenant("acme").expect("tenant");
    let lease = |now| {
        Some(Lease {
            now,
            lease_ms: 60_000,
        })
    };
    t.open(&task("pay-1", 5).roles(&["approver"]).excluding(&["eve"]))
        .expect("open");
    clock.set(2_000);
    t.claim("pay-1", "alice", &["approver"], None)
        .expect("claim");
    clock.set(3_000);
    t.release("pay-1", "alice").expect("release");
    clock.set(4_000);
    t.claim("pay-1", "bob", &["approver"], lease(4_000))
        .expect("claim by another");
    clock.set(4_500);
    assert!(t.claim("pay-1", "eve", &["approver"], None).is_err());
    assert!(t.claim("pay-1", "carol", &["approver"], None).is_err());
    clock.set(5_000);
    t.take_over("pay-1", "bob", "carol", &["approver"], lease(5_000))
        .expect("take-over");
    clock.set(6_000);
    t.renew("pay-1", "carol", 6_000, 60_000).expect("renew");
    clock.set(7_000);
    assert!(
        t.settle("pay-1", Settlement::Completed, Some("carol"))
            .expect("settle")
    );
    clock.set(8_000);
    assert!(
        !t.settle("pay-1", Settlement::Withdrawn, None)
            .expect("a repeat")
    );

    let history = t.history("pay-1", None, 100).expect("history");
    let steps: Vec<_> = history.iter().map(step).collect();
    use TaskState::*;
    assert_eq!(
        steps,
        [
            (1, 1_000, "open", None, None, Open),
            (2, 2_000, "claim", Some("alice"), Some(Open), Claimed),
            (3, 3_000, "release", Some("alice"), Some(Claimed), Open),
            (4, 4_000, "claim", Some("bob"), Some(Open), Claimed),
            (5, 5_000, "take-over", Some("carol"), Some(Claimed), Claimed),
            (6, 6_000, "renew", Some("carol"), Some(Claimed), Claimed),
            (7, 7_000, "settle", Some("carol"), Some(Claimed), Completed),
        ]
    );
    let holders: Vec<_> = history
        .iter()
        .map(|e| (e.assignee.as_deref(), e.lease_until))
        .collect();
    assert_eq!(
        holders,
        [
            (None, None),
            (Some("alice"), None),
            (None, None),
            (Some("bob"), Some(64_000)),
            (Some("carol"), Some(65_000)),
            (Some("carol"), Some(66_000)),
            (Some("carol"), None),
        ]
    );
    assert!(
        history
            .iter()
            .all(|e| e.candidate_roles == ["approver"] && e.excluded_actors == ["eve"])
    );
    // Paged, the same entries.
    let first = t.history("pay-1", None, 3).expect("a page");
    let rest = t.history("pay-1", Some(3), 100).expect("the rest");
    assert_eq!([first, rest].concat(), history);
    assert_consistent(&t);
}

/// Replays `entries` (what a reader received, in order) into the last
/// change of each task, checking every task's changes come once each, in
/// order, from 1.
fn replay(entries: &[leasehold_host::FeedEntry]) -> BTreeMap<String, HistoryEntry> {
    let mut last: BTreeMap<String, HistoryEntry> = BTreeMap::new();
    for e in entries {
        if let Change::Task(c) = &e.change {
            let want = last.get(&c.id).map_or(1, |l| l.seq + 1);
            assert_eq!(
                c.entry.seq, want,
                "task {}: change {} arrived where {want} was due",
                c.id, c.entry.seq
            );
            last.insert(c.id.clone(), c.entry.clone());
        }
    }
    last
}

/// Reads the feed from `after` until caught up, appending what it reads.
fn read_on(
    t: &Tenant,
    after: &mut Option<String>,
    limit: u32,
    out: &mut Vec<leasehold_host::FeedEntry>,
) {
    loop {
        match t.feed(after.as_deref(), limit).expect("feed") {
            FeedRead::Gone(head) => panic!("the reader's position was trimmed (head {head})"),
            FeedRead::Page(p) => {
                let done = p.entries.is_empty() || p.next == p.head;
                out.extend(p.entries);
                *after = Some(p.next);
                if done {
                    return;
                }
            }
        }
    }
}

/// Random calls from 8 threads, 10,000 in all, while a reader follows the
/// feed, woken by the engine's watch: the reader receives every change of
/// every task once, in order, and replaying what it received gives every
/// task's row as it ends.
#[test]
fn ten_thousand_random_calls_from_8_threads_replayed_from_the_feed_reproduce_every_row() {
    let db = TestDb::new();
    let e = db.fast_engine();
    let t = e.tenant("acme").expect("tenant");
    let ids: Vec<String> = (0..40).map(|i| format!("t{i:02}")).collect();
    let actors = ["ann", "bob", "cy", "dee"];
    let threads = 8;
    let per_thread = 10_000 / threads;
    let finished = AtomicUsize::new(0);
    let start = Barrier::new(threads + 1);
    let mut woken = e.watch("acme").expect("watch");
    // Every task opened first: the mix's opens then answer the stored task
    // and record nothing.
    for (i, id) in ids.iter().enumerate() {
        t.open(&task(id, i as i64).roles(&["r"])).expect("open");
    }
    let seed = seed();
    eprintln!("seed {seed}");
    let mut received = Vec::new();
    std::thread::scope(|s| {
        for w in 0..threads {
            let (t, ids, start, finished) = (&t, &ids, &start, &finished);
            s.spawn(move || {
                let mut rng = Rng(seed ^ (w as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15));
                start.wait();
                for i in 0..per_thread {
                    let id = &ids[rng.below(ids.len() as u64) as usize];
                    let actor = actors[rng.below(actors.len() as u64) as usize];
                    let now = i as i64;
                    // Refusals are part of the mix: they must record nothing.
                    let other = actors[rng.below(actors.len() as u64) as usize];
                    let _ = match rng.below(16) {
                        0 => t.open(&task(id, now).roles(&["r"])).map(drop),
                        1 | 2 => t.claim(id, actor, &["r"], None).map(drop),
                        3 => t.release(id, actor),
                        4 => t
                            .claim(id, actor, &["r"], Some(Lease { now, lease_ms: 5 }))
                            .map(drop),
                        5 => t.renew(id, actor, now, 50).map(drop),
                        6 => t.reclaim_lapsed(now, 5).map(drop),
                        7 => t.escalate(id).map(drop),
                        8 => t.settle(id, Settlement::Completed, Some(actor)).map(drop),
                        9 => {
                            let changes = TaskChanges {
                                priority: Some(if now % 2 == 0 {
                                    Priority::High
                                } else {
                                    Priority::Low
                                }),
                                excluded_actors: Some(vec![other.to_owned()]),
                                due_at: Some(Some(now + 1_000)),
                                ..TaskChanges::default()
                            };
                            t.update(id, Some("lead"), &changes).map(drop)
                        }
                        10 => t
                            .assign(id, actor, &["r"], None, false, Some("lead"))
                            .map(drop),
                        11 => t.unassign(id, Some("lead")).map(drop),
                        12 => t.delegate(id, actor, other, &["r"], None).map(drop),
                        13 => t.note(id, actor, "looked at it").map(drop),
                        14 => {
                            let d = Decision {
                                outcome: "approved".into(),
                                reason: Some(format!("by {actor}")),
                                output: Some(format!("{{\"n\":{now}}}")),
                            };
                            t.decide(id, Settlement::Completed, Some(actor), Some(&d))
                                .map(drop)
                        }
                        _ => {
                            // A decision on the task as it was a moment ago:
                            // refused whenever anything changed since.
                            let seen = t.get(id).ok().flatten().map_or(0, |r| r.revision);
                            t.guarded(Guard {
                                revision: Some(seen),
                                job: Some(format!("w{w}")),
                            })
                            .claim(id, actor, &["r"], None)
                            .map(drop)
                        }
                    };
                }
                finished.fetch_add(1, Ordering::AcqRel);
            });
        }
        start.wait();
        let mut after = None;
        loop {
            // Once every writer has returned, every call it made has
            // committed: the read that follows sees the last of them.
            let all_done = finished.load(Ordering::Acquire) == threads;
            read_on(&t, &mut after, 500, &mut received);
            if all_done {
                break;
            }
            // A hint only: a wake-up missed costs this wait, never an entry.
            let _ = woken.wait(Duration::from_millis(50));
        }
    });
    let last = replay(&received);
    assert_eq!(last.len(), ids.len());
    let decided: BTreeMap<&str, leasehold_host::DecisionRecord> = received
        .iter()
        .filter_map(|e| match &e.change {
            Change::Task(c) => Some((c.id.as_str(), c.entry.decision.clone()?)),
            Change::Timer(_) => None,
        })
        .collect();
    // Each change is one revision on from the task's change before.
    let mut revisions: BTreeMap<&str, u64> = BTreeMap::new();
    for e in &received {
        if let Change::Task(c) = &e.change {
            let want = revisions.get(c.id.as_str()).map_or(1, |r| r + 1);
            assert_eq!(c.entry.revision, want, "task {}", c.id);
            assert_eq!(c.run.as_deref(), Some("run-1"), "task {}", c.id);
            revisions.insert(c.id.as_str(), c.entry.revision);
        }
    }
    for id in &ids {
        let row = t.get(id).expect("get");
        match (row, last.get(id)) {
            (Some(row), Some(e)) => {
                assert_eq!(
                    (row.state, &row.assignee, row.lease_until),
                    (e.after, &e.assignee, e.lease_until),
                    "task {id}"
                );
                assert_eq!(row.candidate_roles, e.candidate_roles, "task {id}");
                assert_eq!(row.excluded_actors, e.excluded_actors, "task {id}");
                assert_eq!(row.revision, e.revision, "task {id}");
                if let Some(d) = &row.decision {
                    assert_eq!(decided.get(id.as_str()), Some(d), "task {id}");
                }
                // No excluded actor holds a task.
                if row.state == TaskState::Claimed {
                    let holder = row.assignee.as_ref().expect("a holder");
                    assert!(!row.excluded_actors.contains(holder), "task {id}");
                }
                assert_eq!(
                    t.history(id, Some(e.seq - 1), 1000).expect("history"),
                    std::slice::from_ref(e),
                    "task {id}"
                );
            }
            (row, e) => panic!("task {id}: row {row:?}, last change {e:?}"),
        }
    }
    assert_consistent(&t);
}

/// A reader whose position lies before what `trim` removed is told it is
/// gone, with the feed's end, from which it follows on after refreshing; a
/// reader at the end is not disturbed, and each task keeps its last entry.
#[test]
fn trimming_past_a_readers_position_answers_gone_and_keeps_each_tasks_last_entry() {
    let db = TestDb::new();
    let clock = Arc::new(ManualClock::new(1_000));
    let e = engine_at(&db, &clock);
    let t = e.tenant("acme").expect("tenant");
    for i in 0..10 {
        clock.set(1_000 + i);
        t.open(&task(&format!("t{i}"), i)).expect("open");
    }
    let early = match t.feed(None, 3).expect("feed") {
        FeedRead::Page(p) => p.next,
        FeedRead::Gone(_) => panic!("nothing was trimmed"),
    };
    let mut at_end = None;
    read_on(&t, &mut at_end, 100, &mut Vec::new());
    clock.set(5_000);
    t.claim("t9", "ann", &[], None).expect("claim");
    let out = t.trim(Some(1_005), None, 1000).expect("trim");
    assert_eq!(
        (out.feed_removed, out.history_removed, out.more),
        (5, 0, false)
    );
    let head = match t.feed(Some(&early), 10).expect("feed") {
        FeedRead::Gone(head) => head,
        FeedRead::Page(p) => panic!("read on past a gap: {p:?}"),
    };
    // Following on from the end the answer gave misses nothing after it.
    clock.set(6_000);
    t.claim("t8", "bob", &[], None).expect("claim");
    let mut after = Some(head);
    let mut got = Vec::new();
    read_on(&t, &mut after, 100, &mut got);
    assert_eq!(got.len(), 1, "{got:?}");
    // The reader that was at the end reads on without a gap.
    let mut got = Vec::new();
    read_on(&t, &mut at_end, 100, &mut got);
    assert_eq!(got.len(), 2, "{got:?}");
    for i in 0..10 {
        assert_eq!(
            t.history(&format!("t{i}"), None, 10)
                .expect("history")
                .len(),
            match i {
                8 | 9 => 2,
                _ => 1,
            },
            "t{i}"
        );
    }
    assert_consistent(&t);
}

/// A waiter wakes after a call that committed a change of its tenant, and
/// only then: not for a refusal, nor a call that changed nothing, nor
/// another tenant's commit.
#[test]
fn a_commit_wakes_its_tenants_waiters_and_a_call_that_committed_nothing_wakes_none() {
    let db = TestDb::new();
    let e = db.fast_engine();
    let acme = e.tenant("acme").expect("tenant");
    let other = e.tenant("other").expect("tenant");
    let mut one = e.watch("acme").expect("watch");
    let mut all = e.changes();
    acme.open(&task("t1", 1)).expect("open");
    let heard = one.try_take().expect("the open woke the tenant's waiter");
    assert!(heard.includes("acme"));
    let heard = all.try_take().expect("and the waiter of every tenant");
    assert_eq!(&*heard.tenants[0], "acme");
    // A refusal, a repeated open and a read commit nothing.
    assert!(acme.release("t1", "nobody").is_err());
    acme.open(&task("t1", 1)).expect("first open wins");
    acme.get("t1").expect("get");
    assert_eq!(one.try_take(), None);
    assert_eq!(all.try_take(), None);
    other.open(&task("x", 1)).expect("open");
    assert_eq!(one.try_take(), None, "another tenant's commit");
    assert!(all.try_take().expect("heard").includes("other"));
    // What was heard waits, merged, until taken.
    acme.claim("t1", "ann", &[], None).expect("claim");
    acme.release("t1", "ann").expect("release");
    let heard = one.wait(Duration::from_secs(5)).expect("woken");
    assert_eq!(heard.tenants.len(), 1);
    assert_eq!(one.try_take(), None);
}

/// A timer's life in the feed: armed, claimed by a sweep, retired.
#[test]
fn a_timers_life_is_in_the_feed() {
    let db = TestDb::new();
    let clock = Arc::new(ManualClock::new(10));
    let e = engine_at(&db, &clock);
    let t = e.tenant("acme").expect("tenant");
    t.arm(&timer("r1", "wake", 100)).expect("arm");
    clock.set(20);
    t.claim_due(200, 10, 1_000).expect("sweep");
    clock.set(30);
    assert!(t.disarm("r1", "wake").expect("disarm"));
    let mut got = Vec::new();
    read_on(&t, &mut None, 10, &mut got);
    let seen: Vec<_> = got
        .iter()
        .map(|e| match &e.change {
            Change::Timer(c) => (c.at, c.verb.clone(), c.what, c.lease_until),
            Change::Task(c) => panic!("a task change: {c:?}"),
        })
        .collect();
    assert_eq!(
        seen,
        [
            (10, "arm".to_owned(), TimerEvent::Armed, None),
            (20, "claim-due".to_owned(), TimerEvent::Claimed, Some(1_200)),
            (30, "disarm".to_owned(), TimerEvent::Retired, None),
        ]
    );
    assert_consistent(&t);
}
