//! The worker loop (`leasehold_host::Worker`) through the real component on
//! real storage: every task of a backlog handled once, a failing handler
//! losing no task, a lease kept while its handler outlives it, a stop that
//! settles what finished and releases what never started, and a crash whose
//! tasks come back once their leases lapse. Time is a `ManualClock`: a
//! lease lapses, or is due for renewal, only when the test moves the clock,
//! and the test waits on what the worker has done, never on how long.

use std::collections::HashMap;
use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use leasehold_host::{
    Engine, ManualClock, OnFailure, Outcome, Task, TaskState, Tenant, Worker, WorkerOptions,
};
use leasehold_tests::*;

/// An engine on `db` whose calls, and the worker's leases, are timed by
/// `clock`.
fn engine_at(db: &TestDb, clock: &Arc<ManualClock>) -> Engine {
    let builder = Engine::builder().clock(clock.clone());
    match db.backend() {
        Backend::Redb => db.open(builder.durability(leasehold_host::Durability::None)),
        Backend::Postgres => db.open(builder),
    }
}

/// `n` tasks for workers, `t0000` first in the queue.
fn backlog(t: &Tenant, n: usize) {
    for i in 0..n {
        t.open(&task(&id(i), i as i64).roles(&["worker"]))
            .expect("open");
    }
}

fn id(i: usize) -> String {
    format!("t{i:04}")
}

fn options(actor: &str) -> WorkerOptions {
    WorkerOptions::new(actor, &["worker"]).lease_ms(10_000)
}

/// Waits until `done` holds: what the worker has done, not how long it
/// took (the bound only turns a hang into a failure).
fn wait_for(what: &str, done: impl Fn() -> bool) {
    let until = Instant::now() + Duration::from_secs(120);
    while !done() {
        assert!(Instant::now() < until, "never happened: {what}");
        std::thread::sleep(Duration::from_millis(2));
    }
}

fn state(t: &Tenant, id: &str) -> (TaskState, Option<String>) {
    let task = t.get(id).expect("get").expect("exists");
    (task.state, task.assignee)
}

/// How many tasks of the first `n` are claimed (by anyone).
fn claimed(t: &Tenant, n: usize) -> usize {
    (0..n)
        .filter(|i| state(t, &id(*i)).0 == TaskState::Claimed)
        .count()
}

/// A handler that says it started and then waits for its go (or for the
/// gate to be dropped, which fails it).
fn gated(started: Sender<String>, go: Receiver<()>) -> impl Fn(&Task) -> Result<Outcome, String> {
    let go = Mutex::new(go);
    move |task: &Task| {
        let _ = started.send(task.id.clone());
        match go.lock().expect("gate").recv() {
            Ok(()) => Ok(Outcome::completed()),
            Err(_) => Err("gate dropped".to_owned()),
        }
    }
}

#[test]
fn every_task_of_a_backlog_is_handled_exactly_once() {
    let db = TestDb::new();
    let clock = Arc::new(ManualClock::new(1_000));
    let engine = engine_at(&db, &clock);
    let t = engine.tenant("acme").expect("tenant");
    let n = 300;
    backlog(&t, n);
    let seen: Arc<Mutex<HashMap<String, Vec<&'static str>>>> = Arc::default();
    let worker = |actor: &'static str| {
        let seen = seen.clone();
        Worker::start(
            &engine,
            "acme",
            options(actor).batch(10).concurrency(3),
            move |task: &Task| {
                assert_eq!(task.assignee.as_deref(), Some(actor));
                seen.lock()
                    .expect("seen")
                    .entry(task.id.clone())
                    .or_default()
                    .push(actor);
                Ok::<_, String>(Outcome::completed())
            },
        )
        .expect("starts")
    };
    let (a, b) = (worker("alice"), worker("bob"));
    wait_for("every task settled", || {
        a.stats().settled + b.stats().settled == n as u64
    });
    let (sa, sb) = (
        a.stop(Duration::from_secs(10)),
        b.stop(Duration::from_secs(10)),
    );
    let seen = seen.lock().expect("seen");
    assert_eq!(seen.len(), n);
    for (task, by) in seen.iter() {
        assert_eq!(by.len(), 1, "{task} handled by {by:?}");
        assert_eq!(
            state(&t, task),
            (TaskState::Completed, Some(by[0].to_owned()))
        );
    }
    for s in [sa, sb] {
        assert_eq!(s.claimed, s.settled, "{s:?}");
        assert_eq!(
            (s.failed, s.released, s.lost, s.abandoned),
            (0, 0, 0, 0),
            "{s:?}"
        );
    }
    assert_consistent(&t);
}

#[test]
fn a_failed_handler_releases_its_task_and_it_is_done_again() {
    let db = TestDb::new();
    let clock = Arc::new(ManualClock::new(1_000));
    let engine = engine_at(&db, &clock);
    let t = engine.tenant("acme").expect("tenant");
    backlog(&t, 10);
    let tries: Arc<Mutex<HashMap<String, u32>>> = Arc::default();
    let w = {
        let tries = tries.clone();
        Worker::start(
            &engine,
            "acme",
            options("alice").batch(4),
            move |task: &Task| {
                let n = {
                    let mut tries = tries.lock().expect("tries");
                    let n = tries.entry(task.id.clone()).or_default();
                    *n += 1;
                    *n
                };
                match (task.id.as_str(), n) {
                    ("t0003", 1) => Err("first try fails".to_owned()),
                    ("t0005", 1) => panic!("first try panics"),
                    _ => Ok(Outcome::completed()),
                }
            },
        )
        .expect("starts")
    };
    wait_for("every task settled", || w.stats().settled == 10);
    let s = w.stop(Duration::from_secs(10));
    assert_eq!(
        (s.failed, s.released, s.settled, s.lost),
        (2, 2, 10, 0),
        "{s:?}"
    );
    let tries = tries.lock().expect("tries");
    for i in 0..10 {
        let want = if i == 3 || i == 5 { 2 } else { 1 };
        assert_eq!(tries[&id(i)], want, "{}", id(i));
        assert_eq!(state(&t, &id(i)).0, TaskState::Completed);
    }
    assert_consistent(&t);
}

#[test]
fn a_failed_handler_under_keep_lease_leaves_its_task_to_its_lease() {
    let db = TestDb::new();
    let clock = Arc::new(ManualClock::new(1_000));
    let engine = engine_at(&db, &clock);
    let t = engine.tenant("acme").expect("tenant");
    backlog(&t, 5);
    let tries: Arc<Mutex<u32>> = Arc::default();
    let w = {
        let tries = tries.clone();
        let opts = options("alice").batch(5).on_failure(OnFailure::KeepLease);
        Worker::start(&engine, "acme", opts, move |task: &Task| {
            if task.id == "t0002" {
                let mut n = tries.lock().expect("tries");
                *n += 1;
                if *n == 1 {
                    return Err("first try fails");
                }
            }
            Ok(Outcome::completed())
        })
        .expect("starts")
    };
    wait_for("the others settled", || {
        let s = w.stats();
        s.settled == 4 && s.failed == 1
    });
    // Still held, under a lease nobody renews.
    let held = t.get("t0002").expect("get").expect("exists");
    assert_eq!(held.state, TaskState::Claimed);
    assert_eq!(held.lease_until, Some(11_000));
    assert!(t.reclaim_lapsed(10_999, 100).expect("reclaim").is_empty());
    // At the lease's end the worker returns it to the queue itself before
    // a fetch, and takes it again.
    clock.set(11_000);
    wait_for("the failed task settled", || w.stats().settled == 5);
    let s = w.stop(Duration::from_secs(10));
    assert_eq!(
        (s.failed, s.released, s.renewed, s.reclaimed),
        (1, 0, 0, 1),
        "{s:?}"
    );
    assert_eq!(*tries.lock().expect("tries"), 2);
    assert_eq!(state(&t, "t0002").0, TaskState::Completed);
    assert_consistent(&t);
}

#[test]
fn a_handler_that_outlives_its_lease_keeps_its_task() {
    let db = TestDb::new();
    let clock = Arc::new(ManualClock::new(1_000));
    let engine = engine_at(&db, &clock);
    let t = engine.tenant("acme").expect("tenant");
    backlog(&t, 1);
    let (started_tx, started) = channel();
    let (go, go_rx) = channel();
    let w =
        Worker::start(&engine, "acme", options("alice"), gated(started_tx, go_rx)).expect("starts");
    assert_eq!(started.recv().expect("started"), "t0000");
    let lease = |t: &Tenant| t.get("t0000").expect("get").expect("exists").lease_until;
    assert_eq!(lease(&t), Some(11_000));
    // Half the lease gone: renewed, from now.
    clock.set(6_000);
    wait_for("renewed", || w.stats().renewed == 1);
    assert_eq!(lease(&t), Some(16_000));
    // Past the first lease's end: not lapsed, and nobody else gets it.
    clock.set(12_000);
    assert!(t.reclaim_lapsed(12_000, 100).expect("reclaim").is_empty());
    let bob = query(&["worker"], Some("bob"), 10, None);
    assert!(t.claim_batch(&bob, None, 10).expect("claim").is_empty());
    wait_for("renewed again", || w.stats().renewed == 2);
    assert_eq!(lease(&t), Some(22_000));
    assert!(t.reclaim_lapsed(21_999, 100).expect("reclaim").is_empty());
    assert_eq!(
        state(&t, "t0000"),
        (TaskState::Claimed, Some("alice".into()))
    );
    go.send(()).expect("go");
    wait_for("settled", || w.stats().settled == 1);
    let s = w.stop(Duration::from_secs(10));
    assert_eq!((s.failed, s.lost, s.renewed), (0, 0, 2), "{s:?}");
    assert_eq!(
        state(&t, "t0000"),
        (TaskState::Completed, Some("alice".into()))
    );
    assert_consistent(&t);
}

#[test]
fn a_stop_settles_what_finished_and_releases_what_never_started() {
    let db = TestDb::new();
    let clock = Arc::new(ManualClock::new(1_000));
    let engine = engine_at(&db, &clock);
    let t = engine.tenant("acme").expect("tenant");
    backlog(&t, 20);
    let (started_tx, started) = channel();
    let (go, go_rx) = channel::<()>();
    let gate = gated(started_tx, go_rx);
    // Two handlers; the first two tasks finish at once, the next two wait
    // for the gate. Finished tasks wait for a fetch that never comes (the
    // buffer stays full), so they are settled by the stop.
    let opts = options("alice")
        .batch(10)
        .concurrency(2)
        .flush_after(Duration::from_secs(3600));
    let w = Worker::start(&engine, "acme", opts, move |task: &Task| {
        if task.id == "t0000" || task.id == "t0001" {
            Ok(Outcome::completed())
        } else {
            gate(task)
        }
    })
    .expect("starts");
    let mut running = vec![
        started.recv().expect("started"),
        started.recv().expect("started"),
    ];
    running.sort();
    assert_eq!(running, ["t0002", "t0003"]);
    // Both threads are past the two quick tasks, which wait to be settled.
    assert_eq!(w.stats().started, 4);
    assert_eq!(claimed(&t, 20), 10);
    let stopping = std::thread::spawn(move || w.stop(Duration::from_secs(120)));
    // The unstarted go back while the running finish.
    wait_for("the buffer released", || {
        (4..10).all(|i| state(&t, &id(i)) == (TaskState::Open, None))
    });
    assert_eq!(state(&t, "t0002").0, TaskState::Claimed);
    go.send(()).expect("go");
    go.send(()).expect("go");
    let s = stopping.join().expect("stops");
    assert_eq!(
        (
            s.claimed,
            s.started,
            s.settled,
            s.released,
            s.failed,
            s.abandoned
        ),
        (10, 4, 4, 6, 0, 0),
        "{s:?}"
    );
    for i in 0..20 {
        let want = if i < 4 {
            TaskState::Completed
        } else {
            TaskState::Open
        };
        assert_eq!(state(&t, &id(i)).0, want, "{}", id(i));
    }
    assert_eq!(claimed(&t, 20), 0);
    assert_consistent(&t);
}

#[test]
fn a_stop_past_its_grace_leaves_a_running_task_to_its_lease() {
    let db = TestDb::new();
    let clock = Arc::new(ManualClock::new(1_000));
    let engine = engine_at(&db, &clock);
    let t = engine.tenant("acme").expect("tenant");
    backlog(&t, 3);
    let (started_tx, started) = channel();
    let (go, go_rx) = channel::<()>();
    let w = Worker::start(
        &engine,
        "acme",
        options("alice").batch(3),
        gated(started_tx, go_rx),
    )
    .expect("starts");
    assert_eq!(started.recv().expect("started"), "t0000");
    let s = w.stop(Duration::ZERO);
    assert_eq!(
        (s.started, s.released, s.abandoned, s.settled),
        (1, 2, 1, 0),
        "{s:?}"
    );
    assert_eq!(
        state(&t, "t0000"),
        (TaskState::Claimed, Some("alice".into()))
    );
    assert_eq!(claimed(&t, 3), 1);
    // Its outcome, once it comes, is dropped: nothing settles it.
    go.send(()).expect("go");
    clock.set(11_000);
    assert_eq!(
        ids(&t.reclaim_lapsed(11_000, 100).expect("reclaim")),
        ["t0000"]
    );
    assert_eq!(state(&t, "t0000"), (TaskState::Open, None));
    assert_consistent(&t);
}

#[test]
fn a_crashed_workers_tasks_come_back_after_their_leases() {
    let db = TestDb::new();
    let clock = Arc::new(ManualClock::new(1_000));
    let engine = engine_at(&db, &clock);
    let t = engine.tenant("acme").expect("tenant");
    let n = 30;
    backlog(&t, n);
    let (started_tx, started) = channel();
    let (gate, gate_rx) = channel::<()>();
    let a = Worker::start(
        &engine,
        "acme",
        options("alice").batch(10).concurrency(2),
        gated(started_tx, gate_rx),
    )
    .expect("starts");
    started.recv().expect("started");
    started.recv().expect("started");
    // Killed with two tasks running and eight in its buffer: no call more.
    a.crash();
    assert_eq!(claimed(&t, n), 10);
    assert!(t.reclaim_lapsed(10_999, 100).expect("reclaim").is_empty());
    // At the leases' end a second worker returns all ten to the queue
    // itself (no sweeper runs here) and finishes them with the rest.
    clock.set(11_000);
    let seen: Arc<Mutex<Vec<String>>> = Arc::default();
    let b = {
        let seen = seen.clone();
        Worker::start(
            &engine,
            "acme",
            options("bob").batch(10).concurrency(2),
            move |task: &Task| {
                seen.lock().expect("seen").push(task.id.clone());
                Ok::<_, String>(Outcome::completed())
            },
        )
        .expect("starts")
    };
    wait_for("every task settled", || b.stats().settled == n as u64);
    // The crashed worker's handlers end now, and call nothing.
    drop(gate);
    let s = b.stop(Duration::from_secs(10));
    assert_eq!(
        (s.claimed, s.settled, s.lost, s.reclaimed),
        (30, 30, 0, 10),
        "{s:?}"
    );
    let mut seen = seen.lock().expect("seen").clone();
    seen.sort();
    assert_eq!(seen, (0..n).map(id).collect::<Vec<_>>());
    for i in 0..n {
        assert_eq!(
            state(&t, &id(i)),
            (TaskState::Completed, Some("bob".into()))
        );
    }
    assert_consistent(&t);
}
