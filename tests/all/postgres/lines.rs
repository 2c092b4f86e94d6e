//! Calls of one line on one host share the line's turn and one commit:
//! held behind a turn that a session of the test's own takes on the
//! server, the calls of the line queue in the process (the engine counts
//! them), and once let go they run as one group, in arrival order, each
//! answering what it would have answered alone. Which calls share a group
//! is decided by the test, never by the scheduler.

use std::time::{Duration, Instant};

use leasehold_host::storage::postgres::PgBackend;
use leasehold_host::storage::{Backend, Mode, StorageError, Write};
use leasehold_host::{Engine, Error, Lease, Limits};

use super::*;

/// Groups as large as a test makes them: no call closes a group for its
/// age, and none gives up waiting for its turn, however long the test
/// holds the turn.
fn unhurried() -> Limits {
    Limits {
        group_age: Duration::from_secs(3600),
        lock_wait: Duration::from_secs(3600),
        ..Limits::default()
    }
}

fn grouping_engine(schema: &Schema) -> Engine {
    Engine::builder()
        .limits(unhurried())
        .postgres(&schema.url)
        .expect("the engine connects")
}

/// The advisory-lock class of lines' turns, as the backend takes them.
const LINE_LOCKS: i32 = 19529;

/// A session of the test's own holding the turn of `tenant`'s `line` on
/// the server, as a call on that line would.
struct HeldTurn {
    client: postgres::Client,
    key: String,
}

impl HeldTurn {
    fn take(schema: &Schema, tenant: &str, line: &str) -> HeldTurn {
        let mut client = schema.client();
        let key = format!("/{tenant}/{line}");
        client
            .execute(
                "SELECT pg_advisory_lock($1, hashtext(current_schema() || $2))",
                &[&LINE_LOCKS, &key],
            )
            .expect("the test takes the turn");
        HeldTurn { client, key }
    }

    /// Waits until a session other than this one waits on the server for
    /// the turn this one holds: a condition, not a guess at how long
    /// that takes; the bound only turns a hang into a failure.
    fn until_another_waits(&mut self) {
        let started = Instant::now();
        loop {
            let waiting: i64 = self
                .client
                .query_one(
                    "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted \
                     AND database = (SELECT oid FROM pg_database WHERE datname = current_database()) \
                     AND classid::bigint = $1 \
                     AND objid::bigint = (hashtext(current_schema() || $2)::bigint + 4294967296) % 4294967296",
                    &[&i64::from(LINE_LOCKS), &self.key],
                )
                .expect("the test reads the server's locks")
                .get(0);
            if waiting > 0 {
                return;
            }
            assert!(
                started.elapsed() < Duration::from_secs(120),
                "no call came to wait on the server for the turn"
            );
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    fn give_back(mut self) {
        let row = self
            .client
            .query_one(
                "SELECT pg_advisory_unlock($1, hashtext(current_schema() || $2))",
                &[&LINE_LOCKS, &self.key],
            )
            .expect("the test gives the turn back");
        assert!(row.get::<_, bool>(0), "the test held the turn");
    }
}

/// Waits until `n` calls of `engine` wait for a line's turn in the process.
/// A condition the test waits for, not a guess at how long things take:
/// the bound only turns a hang into a failure.
fn until_waiting(engine: &Engine, n: u64) {
    let started = Instant::now();
    loop {
        let waiting = engine
            .commit_stats()
            .expect("PostgreSQL counts lines")
            .waiting;
        if waiting == n {
            return;
        }
        assert!(waiting < n, "{waiting} calls wait, more than {n}");
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "{waiting} of {n} calls came to wait for the turn"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
}

fn lease() -> Option<Lease> {
    Some(Lease {
        now: 1,
        lease_ms: 60_000,
    })
}

/// Sixteen claim-next calls on one host, one of them by an actor every task
/// excludes, all behind one turn: they make one group and one commit; the
/// fifteen others get the fifteen first tasks, one each, as fifteen calls
/// one after another would have; the excluded one answers that there is
/// nothing for it; nothing else changes.
#[test]
fn sixteen_claimants_share_one_turn_and_the_excluded_one_is_refused_alone() {
    let Some(schema) = Schema::fresh() else {
        return;
    };
    let e = grouping_engine(&schema);
    let t = e.tenant("acme").expect("tenant");
    for i in 0..40 {
        t.open(
            &task(&format!("t{i:02}"), i)
                .roles(&["r"])
                .excluding(&["outcast"]),
        )
        .expect("open");
    }
    let before = e.commit_stats().expect("PostgreSQL counts lines");
    let held = HeldTurn::take(&schema, "acme", "tasks");
    let actors: Vec<String> = (0..15)
        .map(|w| format!("w{w:02}"))
        .chain(["outcast".to_owned()])
        .collect();
    let answers: Vec<(String, Result<Option<leasehold_host::Task>, Error>)> =
        std::thread::scope(|s| {
            let handles: Vec<_> = actors
                .iter()
                .map(|actor| {
                    let t = &t;
                    s.spawn(move || {
                        let got = t.claim_next(&query(&["r"], Some(actor), 1, None), lease());
                        (actor.clone(), got)
                    })
                })
                .collect();
            // One call takes the process's turn and waits for the server's,
            // which the test holds; the other fifteen wait behind it.
            until_waiting(&e, 15);
            held.give_back();
            handles
                .into_iter()
                .map(|h| h.join().expect("claimant"))
                .collect()
        });
    let after = e.commit_stats().expect("counted");
    assert_eq!(after.commits - before.commits, 1, "{after:?}");
    assert_eq!(after.calls - before.calls, 16, "{after:?}");
    assert!(after.largest >= 16, "{after:?}");

    let mut claimed = Vec::new();
    for (actor, got) in answers {
        match (actor.as_str(), got) {
            ("outcast", Ok(None)) => {}
            ("outcast", other) => panic!("the excluded actor got {other:?}"),
            (_, Ok(Some(task))) => {
                assert_eq!(task.assignee.as_deref(), Some(actor.as_str()));
                assert_eq!(t.get(&task.id).expect("get"), Some(task.clone()));
                claimed.push(task.id);
            }
            (_, other) => panic!("{actor} got {other:?}"),
        }
    }
    claimed.sort();
    let first: Vec<String> = (0..15).map(|i| format!("t{i:02}")).collect();
    assert_eq!(claimed, first, "the fifteen first tasks, one each");
    assert_eq!(t.open_count().expect("count"), 40);
    assert_eq!(t.leased_count().expect("count"), 15);
    for i in 15..40 {
        let rest = t.get(&format!("t{i:02}")).expect("get").expect("exists");
        assert_eq!(rest.state, leasehold_host::TaskState::Open, "t{i:02}");
        assert_eq!(rest.assignee, None);
    }
    assert_eq!(e.conflict_retries(), 0);
    assert_consistent(&t);
}

/// A call of the group that answers an error (here, bad input) writes
/// nothing and is told its own error; the calls before and after it in the
/// group commit as if it had not run.
#[test]
fn a_call_that_fails_inside_a_group_leaves_the_others_to_commit() {
    let Some(schema) = Schema::fresh() else {
        return;
    };
    let e = grouping_engine(&schema);
    let t = e.tenant("acme").expect("tenant");
    for i in 0..10 {
        t.open(&task(&format!("t{i:02}"), i).roles(&["r"]))
            .expect("open");
    }
    let before = e.commit_stats().expect("counted");
    let mut held = HeldTurn::take(&schema, "acme", "tasks");
    let answers: Vec<Result<Option<leasehold_host::Task>, Error>> = std::thread::scope(|s| {
        let claim = |actor: &'static str| {
            let t = &t;
            s.spawn(move || t.claim_next(&query(&["r"], Some(actor), 1, None), lease()))
        };
        // A valid call first, until it holds the process's turn and waits
        // on the server for the line's: had the failing call come first, it
        // would have failed alone, before any group, and the test would
        // show nothing.
        let mut handles = vec![claim("a")];
        held.until_another_waits();
        handles.extend(["b", "", "c", "d"].map(claim));
        until_waiting(&e, 4);
        held.give_back();
        handles
            .into_iter()
            .map(|h| h.join().expect("claimant"))
            .collect()
    });
    let after = e.commit_stats().expect("counted");
    assert_eq!(after.commits - before.commits, 1, "{after:?}");
    assert!(
        matches!(
            &answers[2],
            Err(Error::Store(leasehold_host::StoreError::Invalid(_)))
        ),
        "{:?}",
        answers[2]
    );
    let mut got: Vec<String> = answers
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != 2)
        .map(|(_, a)| match a {
            Ok(Some(task)) => task.id.clone(),
            other => panic!("a valid claimant got {other:?}"),
        })
        .collect();
    got.sort();
    assert_eq!(got, ["t00", "t01", "t02", "t03"]);
    assert_eq!(t.leased_count().expect("count"), 4);
    assert_consistent(&t);
}

/// The backend alone, so the test can put a conflicting write between a
/// group's reads and its commit: the group's transaction read a key another
/// session then changed, so the group's commit loses the race, and every
/// call of the group is told it lost (a conflict, run again), not a shared
/// failure; nothing of the group is written.
#[test]
fn a_group_whose_commit_loses_a_race_tells_every_member_so() {
    let Some(schema) = Schema::fresh() else {
        return;
    };
    let backend = PgBackend::connect(&schema.url, 4, false)
        .expect("connects")
        .with_groups(true, &unhurried());
    let lock = Duration::from_secs(60);
    let deadline = Duration::from_secs(60);
    {
        let txn = backend.begin("acme", Mode::Write, lock).expect("begin");
        txn.commit(vec![
            Write::Put(b"k".to_vec(), b"0".to_vec()),
            Write::Put(b"m".to_vec(), b"0".to_vec()),
        ])
        .expect("commit")
        .wait()
        .expect("durable");
    }
    let held = HeldTurn::take(&schema, "acme", "tasks");
    let (began_tx, began_rx) = std::sync::mpsc::channel();
    let (read_tx, read_rx) = std::sync::mpsc::channel();
    let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
    let outcomes: Vec<Result<(), StorageError>> = std::thread::scope(|s| {
        let backend = &backend;
        let first = s.spawn(move || {
            let mut txn = backend
                .begin_in_line("acme", Mode::Write, lock, deadline, "tasks")
                .expect("the first call's turn");
            began_tx.send(()).expect("tell the test");
            assert_eq!(txn.get(b"k").expect("read"), Some(b"0".to_vec()));
            read_tx.send(()).expect("tell the test");
            go_rx.recv().expect("the test says go");
            txn.commit(vec![Write::Put(b"k".to_vec(), b"1".to_vec())])
                .and_then(|p| p.wait())
        });
        // The first call has the process's turn, and waits in its first read
        // for the server's, which the test holds.
        began_rx.recv().expect("the first call has its turn");
        let second = s.spawn(move || {
            let mut txn = backend
                .begin_in_line("acme", Mode::Write, lock, deadline, "tasks")
                .expect("the second call's turn");
            let _ = txn.get(b"m").expect("read");
            txn.commit(vec![Write::Put(b"m".to_vec(), b"2".to_vec())])
                .and_then(|p| p.wait())
        });
        until_waiting_backend(backend, 1);
        held.give_back();
        read_rx.recv().expect("the first call has read");
        // Another session changes what the group read, and commits first.
        schema
            .client()
            .execute(
                "UPDATE leasehold_kv SET value = '\\x39' WHERE tenant = 'acme' AND key = '\\x6b'",
                &[],
            )
            .expect("the other session writes");
        go_tx.send(()).expect("go");
        vec![
            first.join().expect("first call"),
            second.join().expect("second call"),
        ]
    });
    for (i, outcome) in outcomes.iter().enumerate() {
        assert!(
            matches!(outcome, Err(StorageError::Conflict(_))),
            "call {i}: {outcome:?}"
        );
    }
    let mut txn = backend.begin("acme", Mode::Read, lock).expect("read");
    assert_eq!(txn.get(b"k").expect("read"), Some(b"9".to_vec()));
    assert_eq!(txn.get(b"m").expect("read"), Some(b"0".to_vec()));
    let stats = backend.commit_stats().expect("counted");
    assert_eq!((stats.commits, stats.failed), (0, 1), "{stats:?}");
}

/// [`until_waiting`] for a backend used without an engine.
fn until_waiting_backend(backend: &dyn Backend, n: u64) {
    let started = Instant::now();
    while backend.commit_stats().expect("counted").waiting != n {
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "calls never came to wait for the turn"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
}
