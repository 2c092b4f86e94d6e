//! Races through one engine from many threads: each call is one serialized
//! transaction, so a compare-and-set decided inside the guest has exactly one
//! winner however the calls interleave.

use std::collections::HashSet;
use std::sync::Barrier;
use std::sync::atomic::{AtomicUsize, Ordering};

use leasehold_host::{Engine, Error, Refusal, Settlement, Task, TaskState};
use leasehold_tests::*;

const CLAIMERS: usize = 8;
const ROUNDS: usize = 100;

#[test]
fn eight_threads_racing_to_claim_one_task_leave_exactly_one_winner_every_round() {
    let (t, _db) = fast_tenant();
    for round in 0..ROUNDS {
        let id = format!("t{round}");
        t.open(&task(&id, round as i64).roles(&["reviewer"]))
            .expect("open");
        let barrier = Barrier::new(CLAIMERS);
        let results: Vec<(String, Result<Task, Error>)> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..CLAIMERS)
                .map(|i| {
                    let (t, id, barrier) = (&t, &id, &barrier);
                    s.spawn(move || {
                        let actor = format!("actor-{i}");
                        barrier.wait();
                        let r = t.claim(id, &actor, &["reviewer"], None);
                        (actor, r)
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("claimer thread"))
                .collect()
        });
        let winners: Vec<&String> = results
            .iter()
            .filter(|(_, r)| r.is_ok())
            .map(|(a, _)| a)
            .collect();
        assert_eq!(winners.len(), 1, "round {round}: winners {winners:?}");
        let winner = winners[0].clone();
        for (actor, r) in &results {
            match r {
                Ok(task) => assert_eq!(task.assignee.as_ref(), Some(&winner)),
                Err(Error::Refused(Refusal::AlreadyClaimed(holder))) => assert_eq!(
                    holder, &winner,
                    "round {round}: {actor} was told the wrong holder"
                ),
                Err(e) => panic!("round {round}: {actor} got {e:?}"),
            }
        }
        let stored = t.get(&id).expect("get").expect("exists");
        assert_eq!(stored.state, TaskState::Claimed);
        assert_eq!(stored.assignee, Some(winner));
    }
    assert_eq!(t.open_count().expect("count"), ROUNDS as u64);
    assert_consistent(&t);
}

#[test]
fn a_claim_racing_an_expiry_settle_always_ends_expired() {
    let (t, _db) = fast_tenant();
    for round in 0..200 {
        let id = format!("t{round}");
        t.open(&task(&id, round).due(0)).expect("open");
        let barrier = Barrier::new(2);
        let (claimed, settled) = std::thread::scope(|s| {
            let claimer = s.spawn(|| {
                barrier.wait();
                t.claim(&id, "alice", &[], None)
            });
            let expirer = s.spawn(|| {
                barrier.wait();
                t.settle(&id, Settlement::Expired, None)
            });
            (
                claimer.join().expect("claimer thread"),
                expirer.join().expect("expirer thread"),
            )
        });
        assert!(
            settled.expect("settle answers"),
            "round {round}: a claim must never settle the task, so expiry wins"
        );
        let stored = t.get(&id).expect("get").expect("exists");
        assert_eq!(stored.state, TaskState::Expired, "round {round}");
        match claimed {
            Ok(_) => assert_eq!(stored.assignee.as_deref(), Some("alice")),
            Err(Error::Refused(Refusal::NotPending(TaskState::Expired))) => {
                assert_eq!(stored.assignee, None)
            }
            Err(e) => panic!("round {round}: the claim got {e:?}"),
        }
    }
    assert_eq!(t.open_count().expect("count"), 0);
    assert!(t.overdue(1, 10).expect("overdue").is_empty());
    assert_consistent(&t);
}

#[test]
fn racing_take_overs_from_one_holder_move_the_claim_exactly_once() {
    let (t, _db) = fast_tenant();
    for round in 0..50 {
        let id = format!("t{round}");
        t.open(&task(&id, round)).expect("open");
        t.claim(&id, "alice", &[], None).expect("alice claims");
        let barrier = Barrier::new(4);
        let results: Vec<Result<Task, Error>> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..4)
                .map(|i| {
                    let (t, id, barrier) = (&t, &id, &barrier);
                    s.spawn(move || {
                        barrier.wait();
                        t.take_over(id, "alice", &format!("actor-{i}"), &[], None)
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("thread"))
                .collect()
        });
        let won: Vec<&Task> = results.iter().filter_map(|r| r.as_ref().ok()).collect();
        assert_eq!(won.len(), 1, "round {round}");
        for r in &results {
            if let Err(e) = r {
                assert!(
                    matches!(e, Error::Refused(Refusal::NotHeld(from)) if from == "alice"),
                    "round {round}: {e:?}"
                );
            }
        }
        let stored = t.get(&id).expect("get").expect("exists");
        assert_eq!(stored.assignee, won[0].assignee);
    }
    assert_consistent(&t);
}

#[test]
fn four_racing_sweepers_deliver_each_of_1000_timers_exactly_once() {
    let (t, _db) = fast_tenant();
    for i in 0..1000 {
        t.arm(&timer(&format!("run-{}", i % 13), &format!("e{i}"), i))
            .expect("arm");
    }
    assert_eq!(t.pending_count().expect("count"), 1000);
    let barrier = Barrier::new(4);
    let handed_out = AtomicUsize::new(0);
    let delivered: Vec<Vec<(String, String)>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..4)
            .map(|_| {
                s.spawn(|| {
                    let mut mine = Vec::new();
                    barrier.wait();
                    loop {
                        let got = t.claim_due(5_000, 7, 600_000).expect("claim-due answers");
                        mine.extend(identities(&got));
                        // A timer handed out twice could keep the sweep going
                        // for ever; more than were armed is proof enough.
                        let so_far = handed_out.fetch_add(got.len(), Ordering::SeqCst) + got.len();
                        if got.is_empty() || so_far > 1000 {
                            return mine;
                        }
                    }
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("sweeper thread"))
            .collect()
    });
    let total: usize = delivered.iter().map(Vec::len).sum();
    let distinct: HashSet<&(String, String)> = delivered.iter().flatten().collect();
    assert_eq!(total, 1000, "every timer delivered, none twice");
    assert_eq!(distinct.len(), 1000);
    assert!(t.claim_due(5_000, 1000, 1).expect("sweep").is_empty());
    assert_eq!(t.pending_count().expect("count"), 1000);
    assert_consistent(&t);
}

/// Under group commit every call is still its own unit: many threads, each
/// making calls that succeed, answer an error after writing, or trap after
/// writing, on one durable store. Every call that succeeded is there; every
/// call that failed left nothing, though its group's other calls committed.
/// (PostgreSQL commits each call's transaction alone, beside the others: the
/// same promise, without the shared commit.)
#[test]
fn calls_that_fail_inside_a_shared_commit_leave_nothing_and_the_rest_commit() {
    let db = TestDb::new();
    let engine = db
        .try_open(leasehold_host::Engine::builder().component(HOSTILE_COMPONENT))
        .expect("the fixture implements the world");
    let threads = 8;
    let calls = 30;
    let ok = AtomicUsize::new(0);
    std::thread::scope(|s| {
        for w in 0..threads {
            let (engine, ok) = (&engine, &ok);
            s.spawn(move || {
                let t = engine.tenant("g").expect("tenant");
                for i in 0..calls {
                    match i % 3 {
                        0 => {
                            t.open(&task(&format!("work-0-{w}-{i}"), 0))
                                .expect("a plain write commits");
                            ok.fetch_add(1, Ordering::SeqCst);
                        }
                        1 => assert!(matches!(
                            t.open(&task("write-then-error", 0)),
                            Err(Error::Store(_))
                        )),
                        _ => assert!(matches!(
                            t.open(&task("write-then-trap", 0)),
                            Err(Error::Sandbox(_))
                        )),
                    }
                }
            });
        }
    });
    drop(engine);
    let keys: HashSet<Vec<u8>> = db.raw_all().into_keys().collect();
    let expected: HashSet<Vec<u8>> = (0..threads)
        .flat_map(|w| {
            (0..calls)
                .filter(|i| i % 3 == 0)
                .map(move |i| tenant_key("g", format!("work-0-{w}-{i}").as_bytes()))
        })
        .collect();
    assert_eq!(ok.load(Ordering::SeqCst), expected.len());
    assert_eq!(
        keys, expected,
        "a failed call's write leaked, or an ok one is missing"
    );
}

/// The same through the real rules: opens that succeed and opens refused as
/// invalid, from many threads sharing commits; the counters and indexes
/// agree with the rows afterwards.
#[test]
fn many_threads_of_valid_and_invalid_opens_leave_a_consistent_durable_store() {
    let (engine, _db) = temp_engine();
    let opened = AtomicUsize::new(0);
    std::thread::scope(|s| {
        for w in 0..8 {
            let (engine, opened) = (&engine, &opened);
            s.spawn(move || {
                let t = engine.tenant("g").expect("tenant");
                for i in 0..25 {
                    let id = format!("t{w}-{i}");
                    if i % 2 == 0 {
                        t.open(&task(&id, i).roles(&["r"]).due(i)).expect("open");
                        opened.fetch_add(1, Ordering::SeqCst);
                    } else {
                        let bad = Task {
                            kind: String::new(),
                            ..task(&id, i)
                        };
                        assert!(t.open(&bad).is_err());
                    }
                }
            });
        }
    });
    let t = engine.tenant("g").expect("tenant");
    assert_eq!(
        t.open_count().expect("count"),
        opened.load(Ordering::SeqCst) as u64
    );
    for w in 0..8 {
        for i in (1..25).step_by(2) {
            assert_eq!(t.get(&format!("t{w}-{i}")).expect("get"), None);
        }
    }
    assert_consistent(&t);
}

#[test]
fn eight_threads_calling_claim_next_on_one_queue_of_100_tasks_claim_each_exactly_once() {
    let (t, _db) = fast_tenant();
    for i in 0..100 {
        t.open(&task(&format!("t{i:03}"), i).roles(&["reviewer"]))
            .expect("open");
    }
    let barrier = Barrier::new(CLAIMERS);
    let claimed: Vec<(String, Vec<Task>)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..CLAIMERS)
            .map(|i| {
                let (t, barrier) = (&t, &barrier);
                s.spawn(move || {
                    let actor = format!("actor-{i}");
                    let q = query(&["reviewer"], Some(&actor), 1, None);
                    let mut mine = Vec::new();
                    barrier.wait();
                    // Every call must answer: a task, or none once the queue
                    // is empty. A refusal because another caller took the
                    // head would be an error here.
                    while let Some(got) = t.claim_next(&q, None).expect("claim-next answers") {
                        mine.push(got);
                        assert!(mine.len() <= 100, "{actor} was handed too many");
                    }
                    (actor, mine)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("claimer thread"))
            .collect()
    });
    let mut seen = HashSet::new();
    for (actor, tasks) in &claimed {
        for got in tasks {
            assert!(seen.insert(got.id.clone()), "{} handed out twice", got.id);
            assert_eq!(got.assignee.as_ref(), Some(actor));
            let stored = t.get(&got.id).expect("get").expect("exists");
            assert_eq!(stored.state, TaskState::Claimed);
            assert_eq!(stored.assignee.as_ref(), Some(actor), "{}", got.id);
        }
    }
    assert_eq!(seen.len(), 100, "every task claimed exactly once");
    assert!(
        t.queue(&query(&["reviewer"], None, 10, None))
            .expect("queue")
            .tasks
            .is_empty()
    );
    assert_eq!(t.open_count().expect("count"), 100);
    assert_consistent(&t);
}

#[test]
fn four_racing_sweepers_return_each_of_200_lapsed_tasks_exactly_once() {
    let (t, _db) = fast_tenant();
    for i in 0..200 {
        let id = format!("t{i:03}");
        t.open(&task(&id, i)).expect("open");
        let lease = leasehold_host::Lease {
            now: i,
            lease_ms: 10,
        };
        t.claim(&id, "gone", &[], Some(lease)).expect("claim");
    }
    let barrier = Barrier::new(4);
    let moved: Vec<Vec<String>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..4)
            .map(|_| {
                s.spawn(|| {
                    let mut mine = Vec::new();
                    barrier.wait();
                    loop {
                        let got = t.reclaim_lapsed(1_000, 7).expect("reclaim answers");
                        if got.is_empty() || mine.len() > 200 {
                            return mine;
                        }
                        mine.extend(ids(&got));
                    }
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("sweeper thread"))
            .collect()
    });
    let total: usize = moved.iter().map(Vec::len).sum();
    let distinct: HashSet<&String> = moved.iter().flatten().collect();
    assert_eq!(total, 200, "every task moved, none twice");
    assert_eq!(distinct.len(), 200);
    assert_eq!(t.leased_count().expect("count"), 0);
    assert_consistent(&t);
}

#[test]
fn a_renewal_racing_a_reclaim_either_keeps_the_claim_or_loses_it_never_both() {
    let (t, _db) = fast_tenant();
    for round in 0..100 {
        let id = format!("t{round}");
        t.open(&task(&id, round)).expect("open");
        let lease = leasehold_host::Lease {
            now: 0,
            lease_ms: 100,
        };
        t.claim(&id, "alice", &[], Some(lease)).expect("claim");
        let barrier = Barrier::new(2);
        let (renewed, reclaimed) = std::thread::scope(|s| {
            let renewer = s.spawn(|| {
                barrier.wait();
                t.renew(&id, "alice", 150, 100)
            });
            let sweeper = s.spawn(|| {
                barrier.wait();
                t.reclaim_lapsed(150, 1000)
            });
            (
                renewer.join().expect("renewer thread"),
                sweeper.join().expect("sweeper thread"),
            )
        });
        let reclaimed = reclaimed.expect("reclaim answers");
        let stored = t.get(&id).expect("get").expect("exists");
        match renewed {
            Ok(task) => {
                assert_eq!(task.lease_until, Some(250), "round {round}");
                assert!(reclaimed.is_empty(), "round {round}: moved after renewal");
                assert_eq!(stored.assignee.as_deref(), Some("alice"));
            }
            Err(Error::Refused(Refusal::NotHeld(a))) if a == "alice" => {
                assert_eq!(ids(&reclaimed), std::slice::from_ref(&id), "round {round}");
                assert_eq!(stored.state, TaskState::Open);
            }
            Err(e) => panic!("round {round}: the renewal got {e:?}"),
        }
    }
    assert_consistent(&t);
}

/// Group commit's own account, `Engine::commit_stats`: on redb each write
/// call of a lone thread is a commit of one call, reads and refused calls
/// make none, and calls from many threads are all covered by the commits
/// they shared. On PostgreSQL the server groups commits itself, and the
/// account is of the calls that take turns on a line (claim-next here),
/// which this process groups; other calls commit alone and are not in it.
#[test]
fn commit_stats_count_the_commits_and_the_calls_they_covered() {
    let db = TestDb::new();
    let engine = db.fast_engine();
    let start = engine
        .commit_stats()
        .expect("both backends keep the account");
    if db.backend() == Backend::Postgres {
        return lines_are_counted(&engine, start);
    }
    assert_eq!((start.commits, start.calls), (0, 0));
    let t = engine.tenant("stats").expect("tenant");
    for i in 0..3 {
        t.open(&task(&format!("alone-{i}"), 0)).expect("opens");
    }
    t.open_count().expect("reads");
    t.get("alone-0").expect("reads");
    assert!(matches!(
        t.open(&task("", 0)),
        Err(Error::Store(leasehold_host::StoreError::Invalid(_)))
    ));
    let alone = engine.commit_stats().expect("redb");
    assert_eq!((alone.commits, alone.calls), (3, 3), "{alone:?}");
    assert!(alone.committing > std::time::Duration::ZERO);

    let (threads, calls) = (4, 50);
    std::thread::scope(|s| {
        for w in 0..threads {
            let engine = &engine;
            s.spawn(move || {
                let t = engine.tenant("stats").expect("tenant");
                for i in 0..calls {
                    t.open(&task(&format!("shared-{w}-{i}"), 0)).expect("opens");
                }
            });
        }
    });
    let after = engine.commit_stats().expect("redb");
    assert_eq!(
        after.calls - alone.calls,
        (threads * calls) as u64,
        "{after:?}"
    );
    assert!(after.commits - alone.commits <= after.calls - alone.calls);
    assert!(after.committing >= alone.committing);
}

/// PostgreSQL's account: opens and reads are not in it; each lone
/// claim-next is a commit of one call; a refused one, or one that finds
/// nothing, makes none; claim-next from many threads are all covered.
fn lines_are_counted(engine: &Engine, start: leasehold_host::CommitStats) {
    let (threads, calls) = (4, 25);
    let t = engine.tenant("stats").expect("tenant");
    for i in 0..3 + threads * calls {
        t.open(&task(&format!("t{i:03}"), i as i64).roles(&["r"]))
            .expect("opens");
    }
    t.open_count().expect("reads");
    let opened = engine.commit_stats().expect("counted");
    assert_eq!((opened.commits, opened.calls), (start.commits, start.calls));
    for _ in 0..3 {
        t.claim_next(&query(&["r"], Some("alone"), 1, None), None)
            .expect("claims")
            .expect("a task");
    }
    assert!(matches!(
        t.claim_next(&query(&["r"], None, 1, None), None),
        Err(Error::Store(leasehold_host::StoreError::Invalid(_)))
    ));
    let alone = engine.commit_stats().expect("counted");
    assert_eq!(
        (alone.commits - start.commits, alone.calls - start.calls),
        (3, 3),
        "{alone:?}"
    );
    assert!(alone.committing > std::time::Duration::ZERO);
    std::thread::scope(|s| {
        for w in 0..threads {
            let t = &t;
            s.spawn(move || {
                let actor = format!("w{w}");
                for _ in 0..calls {
                    t.claim_next(&query(&["r"], Some(&actor), 1, None), None)
                        .expect("claims")
                        .expect("a task");
                }
            });
        }
    });
    assert_eq!(
        t.claim_next(&query(&["r"], Some("late"), 1, None), None)
            .expect("answers"),
        None
    );
    let after = engine.commit_stats().expect("counted");
    assert_eq!(
        after.calls - alone.calls,
        (threads * calls) as u64,
        "{after:?}"
    );
    assert!(after.commits - alone.commits <= after.calls - alone.calls);
    assert_eq!(after.waiting, 0);
    assert_consistent(&t);
}
