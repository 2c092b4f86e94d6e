//! The hard sandbox: a hostile or faulty component costs one failed call —
//! never the host, never partial writes, never another tenant's keys. Every
//! test here loads the hostile fixture (tests/fixtures/hostile) through the
//! real host on a real store.

use std::time::{Duration, Instant};

use leasehold_host::{Engine, EngineBuilder, Error, Limits, SandboxError, StoreError};
use leasehold_tests::*;

fn hostile_builder(limits: Limits) -> EngineBuilder {
    Engine::builder()
        .component(HOSTILE_COMPONENT)
        .limits(limits)
}

fn hostile(db: &TestDb, limits: Limits) -> Engine {
    db.try_open(hostile_builder(limits))
        .expect("the hostile fixture implements the world")
}

fn quick() -> Limits {
    Limits {
        deadline: Duration::from_millis(300),
        ..Limits::default()
    }
}

/// Every stored key of every tenant, spelt as `tenant_key` spells it.
fn keys_of(db: &TestDb) -> Vec<Vec<u8>> {
    db.raw_all().into_keys().collect()
}

fn sandbox_error(r: Result<impl std::fmt::Debug, Error>) -> SandboxError {
    match r {
        Err(Error::Sandbox(e)) => e,
        other => panic!("expected a sandbox error, got {other:?}"),
    }
}

/// The engine answers a plain call after a failed one: the failure cost only
/// that call.
fn still_serves(engine: &Engine) {
    let t = engine.tenant("a").expect("tenant");
    assert!(matches!(
        t.get("wrong-id"),
        Err(Error::Sandbox(SandboxError::Malformed(_)))
    ));
    assert_eq!(t.get("plain").expect("a read call still works"), None);
}

#[test]
fn a_guest_that_loops_forever_is_stopped_at_the_deadline() {
    let db = TestDb::new();
    let engine = hostile(&db, quick());
    let t = engine.tenant("a").expect("tenant");
    let started = Instant::now();
    let e = sandbox_error(t.get("loop"));
    assert_eq!(e, SandboxError::Deadline(Duration::from_millis(300)));
    assert_eq!(e.limit(), Some("deadline"));
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "the deadline did not stop the call: {:?}",
        started.elapsed()
    );
    still_serves(&engine);
}

#[test]
fn a_looping_call_does_not_hold_up_calls_on_other_threads() {
    let db = TestDb::new();
    let engine = hostile(
        &db,
        Limits {
            deadline: Duration::from_secs(2),
            ..Limits::default()
        },
    );
    std::thread::scope(|s| {
        let looping = s.spawn(|| engine.tenant("a").expect("tenant").get("loop"));
        std::thread::sleep(Duration::from_millis(100));
        let started = Instant::now();
        assert_eq!(
            engine
                .tenant("b")
                .expect("tenant")
                .get("plain")
                .expect("read"),
            None
        );
        assert!(started.elapsed() < Duration::from_secs(1));
        assert!(matches!(
            looping.join().expect("thread"),
            Err(Error::Sandbox(SandboxError::Deadline(_)))
        ));
    });
}

#[test]
fn a_call_past_the_concurrency_limit_is_refused_as_busy_not_queued() {
    let db = TestDb::new();
    let engine = hostile(
        &db,
        Limits {
            deadline: Duration::from_secs(2),
            concurrent_calls: 1,
            ..Limits::default()
        },
    );
    std::thread::scope(|s| {
        let looping = s.spawn(|| engine.tenant("a").expect("tenant").get("loop"));
        std::thread::sleep(Duration::from_millis(300));
        let r = engine.tenant("b").expect("tenant").get("plain");
        assert!(
            matches!(r, Err(Error::Sandbox(SandboxError::Busy(_)))),
            "{r:?}"
        );
        assert!(matches!(
            looping.join().expect("thread"),
            Err(Error::Sandbox(SandboxError::Deadline(_)))
        ));
    });
    // The slot is free again.
    assert_eq!(
        engine
            .tenant("b")
            .expect("tenant")
            .get("plain")
            .expect("read"),
        None
    );
}

#[test]
fn a_guest_that_allocates_without_bound_hits_the_memory_cap() {
    let db = TestDb::new();
    let cap = 16 << 20;
    let engine = hostile(
        &db,
        Limits {
            memory_bytes: cap,
            ..quick()
        },
    );
    let e = sandbox_error(engine.tenant("a").expect("tenant").get("alloc"));
    assert_eq!(e, SandboxError::Memory { cap });
    assert_eq!(e.limit(), Some("memory"));
    still_serves(&engine);
}

#[test]
fn writes_commit_when_the_guest_answers_ok() {
    // The control for the tests below: the raw check does see a write.
    let db = TestDb::new();
    let engine = hostile(&db, quick());
    engine
        .tenant("a")
        .expect("tenant")
        .open(&task("write-ok", 0))
        .expect("the fixture's plain write");
    drop(engine);
    assert_eq!(keys_of(&db), vec![tenant_key("a", b"hostile-ok")]);
}

#[test]
fn a_write_followed_by_a_trap_commits_nothing() {
    let db = TestDb::new();
    let engine = hostile(&db, quick());
    let e = sandbox_error(
        engine
            .tenant("a")
            .expect("tenant")
            .open(&task("write-then-trap", 0)),
    );
    assert!(matches!(e, SandboxError::Trap(_)), "{e:?}");
    still_serves(&engine);
    drop(engine);
    assert!(keys_of(&db).is_empty());
}

#[test]
fn a_write_followed_by_a_deadline_commits_nothing() {
    let db = TestDb::new();
    let engine = hostile(&db, quick());
    let e = sandbox_error(
        engine
            .tenant("a")
            .expect("tenant")
            .open(&task("write-then-loop", 0)),
    );
    assert!(matches!(e, SandboxError::Deadline(_)), "{e:?}");
    drop(engine);
    assert!(keys_of(&db).is_empty());
}

#[test]
fn a_write_followed_by_an_error_answer_commits_nothing() {
    let db = TestDb::new();
    let engine = hostile(&db, quick());
    let r = engine
        .tenant("a")
        .expect("tenant")
        .open(&task("write-then-error", 0));
    assert!(
        matches!(r, Err(Error::Store(StoreError::Invalid(_)))),
        "{r:?}"
    );
    drop(engine);
    assert!(keys_of(&db).is_empty());
}

#[test]
fn a_guest_that_stages_an_oversized_value_fails_by_name_and_commits_nothing() {
    let db = TestDb::new();
    let engine = hostile(&db, quick());
    let e = sandbox_error(
        engine
            .tenant("a")
            .expect("tenant")
            .open(&task("stage-too-large", 0)),
    );
    assert_eq!(
        e,
        SandboxError::ValueSize {
            size: 8 << 20,
            cap: Limits::default().value_bytes
        }
    );
    assert_eq!(e.limit(), Some("value-size"));
    still_serves(&engine);
    drop(engine);
    assert!(keys_of(&db).is_empty());
}

#[test]
fn a_guest_that_stages_twice_in_one_call_fails_and_commits_nothing() {
    let db = TestDb::new();
    let engine = hostile(&db, quick());
    let e = sandbox_error(
        engine
            .tenant("a")
            .expect("tenant")
            .open(&task("stage-twice", 0)),
    );
    assert_eq!(e, SandboxError::SecondBatch);
    drop(engine);
    assert!(keys_of(&db).is_empty());
}

/// The host checks an answer before it decides to commit: a faulty
/// component whose write verb answers something the contract rules out
/// (another task's id, more timers than the limit, one task twice, a claim
/// nobody holds, another schedule, a swept task no sweep leaves, another
/// subscription, an advance at another revision) leaves nothing behind,
/// not its writes and a `Malformed` for the caller.
#[test]
fn a_write_verb_whose_answer_the_contract_rules_out_commits_nothing() {
    let db = TestDb::new();
    let engine = hostile(&db, quick());
    let t = engine.tenant("a").expect("tenant");
    let malformed = |r: Result<(), Error>, what: &str| match r {
        Err(Error::Sandbox(SandboxError::Malformed(m))) => {
            assert!(m.contains(what), "{m}");
        }
        other => panic!("expected malformed, got {other:?}"),
    };
    malformed(t.open(&task("wrong-id", 0)).map(drop), "someone-else");
    malformed(t.claim("t", "ann", &[], None).map(drop), "someone-else");
    malformed(t.escalate("t").map(drop), "someone-else");
    malformed(
        t.claim_due(10, 3, 1000).map(drop),
        "4 entries for a limit of 3",
    );
    malformed(
        t.reschedule("r", "e", 10, false).map(drop),
        "answered r/someone-else",
    );
    malformed(
        t.timers_of("r", 5, None).map(drop),
        "answered a timer of run another-run",
    );
    malformed(
        t.reclaim_lapsed(10, 5).map(drop),
        "reclaim-lapsed answered task twice twice",
    );
    let nightly = leasehold_host::ScheduleDef {
        id: "nightly".into(),
        run: "r".into(),
        case: None,
        step: 0,
        phase: leasehold_host::Phase::Forward,
        spec: leasehold_host::ScheduleSpec::new(
            leasehold_host::Rule::Cron {
                expr: "0 3 * * *".into(),
            },
            "UTC",
        ),
    };
    malformed(
        t.add_schedule(&nightly, 10).map(drop),
        "answered schedule nightly-other",
    );
    malformed(
        t.get_schedule("nightly").map(drop),
        "answered schedule nightly-other",
    );
    malformed(
        t.next_occurrences("nightly", 10, 5).map(drop),
        "out of order",
    );
    malformed(t.tz_version().map(drop), "not a version");
    malformed(
        t.claim_next(&query(&[], Some("ann"), 1, None), None)
            .map(drop),
        "not claimed by ann",
    );
    malformed(
        t.claim_batch(&query(&[], Some("ann"), 1, None), None, 5)
            .map(drop),
        "not claimed by ann",
    );
    let done = [leasehold_host::Finished {
        id: "t".into(),
        settlement: leasehold_host::Settlement::Completed,
        decision: None,
    }];
    malformed(
        t.settle_and_claim(&done, &query(&[], Some("ann"), 1, None), None, 5)
            .map(drop),
        "answered 0 of 1 finished tasks",
    );
    malformed(
        t.get_subscription("s").map(drop),
        "answered subscription s-other",
    );
    // It writes first: the refusal must commit nothing.
    malformed(
        t.advance_subscription("s", 1, "f").map(drop),
        "at revision 1 answered revision 2",
    );
    // Open with no step fired, more reminders fired than it has, escalated
    // yet held: nothing a sweep leaves.
    for now in 0..3 {
        malformed(
            t.expire_overdue(now, 5).map(drop),
            "neither escalated, expired nor reminded",
        );
    }
    drop((t, engine));
    assert!(
        keys_of(&db).is_empty(),
        "a call refused as malformed committed its writes"
    );
}

/// The control for expire-overdue's check: a task a reminder left open,
/// one step fired of its one reminder, is an answer the host accepts.
#[test]
fn an_expire_overdue_answer_a_reminder_leaves_is_accepted() {
    let db = TestDb::new();
    let engine = hostile(&db, quick());
    let t = engine.tenant("a").expect("tenant");
    let swept = t
        .expire_overdue(3, 5)
        .expect("a reminded task is an answer");
    assert_eq!(swept.len(), 1);
    assert_eq!((swept[0].steps_done, swept[0].remind_before.len()), (1, 1));
}

/// What one call can make the host hold is bounded by byte budgets, not only
/// by counts: a scan of big values, a flood of reads and a flood of writes
/// each fail by name, and the host stays up and small.
#[test]
fn byte_budgets_bound_what_one_call_can_make_the_host_hold() {
    let db = TestDb::new();
    let limits = Limits {
        scan_bytes: 4 << 20,
        call_read_bytes: 8 << 20,
        call_write_bytes: 16 << 20,
        ..quick()
    };
    let engine = hostile(&db, limits);
    let t = engine.tenant("a").expect("tenant");
    for i in 0..6 {
        t.open(&task(&format!("big-{i}"), 0))
            .expect("a 1 MiB value is within every cap");
    }
    assert_eq!(
        sandbox_error(t.get("big-scan")),
        SandboxError::ScanBytes { cap: 4 << 20 }
    );
    // Each range of a scan-many within one scan's bytes, all of them past.
    assert_eq!(
        sandbox_error(t.get("big-scan-many")),
        SandboxError::ScanBytes { cap: 4 << 20 }
    );
    let read = sandbox_error(t.get("read-flood"));
    assert_eq!(read, SandboxError::ReadBytes { cap: 8 << 20 });
    assert_eq!(read.limit(), Some("read-bytes"));
    let wrote = sandbox_error(t.open(&task("write-flood", 0)));
    assert!(
        matches!(wrote, SandboxError::WriteBytes { cap, .. } if cap == 16 << 20),
        "{wrote:?}"
    );
    assert!(matches!(
        sandbox_error(t.get("long-get-many")),
        SandboxError::GetManyLength { asked: 100_000, .. }
    ));
    still_serves(&engine);
    drop((t, engine));
    let keys = keys_of(&db);
    assert_eq!(keys.len(), 6, "only the six big values are stored");
    // The whole test process, with every test beside it, stays far below
    // what the unbounded calls above would have needed.
    if let Some(peak) = peak_rss_bytes() {
        assert!(peak < 2 << 30, "peak resident memory {peak} bytes");
    }
}

/// The process's peak resident memory, where the OS reports it.
fn peak_rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// A writer's deadline measures its own work, not its wait for the writer
/// ahead of it: a call that queued behind a long write still gets its whole
/// budget.
///
/// On redb writers take turns. On PostgreSQL they run side by side but each
/// waits for a connection, and with a pool of one (which redb ignores) the
/// holder's is the only one, so the second writer queues behind it the same
/// way. The same holds for the lock-wait test below.
#[test]
fn a_writers_deadline_starts_when_its_turn_to_write_does() {
    let db = TestDb::new();
    let engine = db.open(
        hostile_builder(Limits {
            deadline: Duration::from_millis(1000),
            ..Limits::default()
        })
        .pool_size(1),
    );
    std::thread::scope(|s| {
        let holder = s.spawn(|| {
            engine
                .tenant("a")
                .expect("tenant")
                .open(&task("write-then-loop", 0))
        });
        std::thread::sleep(Duration::from_millis(100));
        // Waits about 900 ms for the turn, then works 500 ms: past its
        // deadline if the wait counted, well within it if not.
        let queued = engine
            .tenant("b")
            .expect("tenant")
            .open(&task("work-500", 0));
        assert!(queued.is_ok(), "{queued:?}");
        assert!(matches!(
            holder.join().expect("thread"),
            Err(Error::Sandbox(SandboxError::Deadline(_)))
        ));
    });
}

/// Waiting for the writer has a bound of its own, and running out of it is
/// its own, retryable error, which wrote nothing.
#[test]
fn a_writer_that_waits_past_the_lock_wait_is_told_the_database_is_busy() {
    let db = TestDb::new();
    let engine = db.open(
        hostile_builder(Limits {
            deadline: Duration::from_millis(1500),
            lock_wait: Duration::from_millis(200),
            ..Limits::default()
        })
        .pool_size(1),
    );
    std::thread::scope(|s| {
        let holder = s.spawn(|| {
            engine
                .tenant("a")
                .expect("tenant")
                .open(&task("write-then-loop", 0))
        });
        std::thread::sleep(Duration::from_millis(100));
        let started = Instant::now();
        let r = engine
            .tenant("b")
            .expect("tenant")
            .open(&task("write-ok", 0));
        match r {
            Err(e @ Error::LockTimeout(_)) => assert!(e.is_retryable()),
            other => panic!("expected a lock timeout, got {other:?}"),
        }
        assert!(started.elapsed() < Duration::from_millis(1200));
        holder
            .join()
            .expect("thread")
            .expect_err("the holder loops");
    });
    drop(engine);
    assert!(keys_of(&db).is_empty());
}

/// Writers queued for their turn hold no instance slot, so a burst of them
/// never starves readers of slots.
#[test]
fn readers_beside_a_burst_of_writers_never_fail() {
    let db = TestDb::new();
    // On PostgreSQL a call's turn is one of the pool's connections. A call
    // gives its connection back before its instance's slot is free, so a
    // slot beyond the pool's size can still be in use; a pool of one leaves
    // the slots the same margin as redb's one writer.
    let engine = db.open(
        hostile_builder(Limits {
            concurrent_calls: 3,
            deadline: Duration::from_secs(2),
            lock_wait: Duration::from_secs(30),
            ..Limits::default()
        })
        .pool_size(1),
    );
    let writers_done = std::sync::atomic::AtomicUsize::new(0);
    std::thread::scope(|s| {
        for w in 0..8 {
            let engine = &engine;
            let writers_done = &writers_done;
            s.spawn(move || {
                let t = engine.tenant("w").expect("tenant");
                let outcome: Result<(), Error> = (0..3)
                    .try_for_each(|i| t.open(&task(&format!("work-20-{w}-{i}"), 0)).map(drop));
                // Counted however it went, so the readers below stop.
                writers_done.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                outcome.expect("a queued writer waits for its turn");
            });
        }
        let mut reads = 0;
        while writers_done.load(std::sync::atomic::Ordering::SeqCst) < 8 {
            let r = engine.tenant("r").expect("tenant").get("plain");
            assert!(matches!(r, Ok(None)), "a read beside the writers: {r:?}");
            reads += 1;
        }
        assert!(reads > 0);
    });
}

#[test]
fn oversized_keys_and_overlong_scans_are_refused_by_name() {
    let db = TestDb::new();
    let engine = hostile(&db, quick());
    let t = engine.tenant("a").expect("tenant");
    let key = sandbox_error(t.get("huge-key"));
    assert_eq!(
        key,
        SandboxError::KeySize {
            size: 1 << 20,
            cap: Limits::default().key_bytes
        }
    );
    let scan = sandbox_error(t.get("long-scan"));
    assert_eq!(
        scan,
        SandboxError::ScanLength {
            asked: u32::MAX,
            cap: Limits::default().scan_entries
        }
    );
    // A scan-many is held to one scan's entries as a whole: its ranges'
    // limits together, and each range at least one, however many ask for
    // nothing.
    let cap = Limits::default().scan_entries;
    assert_eq!(
        sandbox_error(t.get("long-scan-many")),
        SandboxError::ScanLength {
            asked: u32::MAX,
            cap
        }
    );
    assert_eq!(
        sandbox_error(t.get("many-empty-scans")),
        SandboxError::ScanLength {
            asked: 100_000,
            cap
        }
    );
    assert_eq!(
        sandbox_error(t.get("scan-many-huge-key")),
        SandboxError::KeySize {
            size: 1 << 20,
            cap: Limits::default().key_bytes
        }
    );
    still_serves(&engine);
}

#[test]
fn a_read_only_call_cannot_write() {
    let db = TestDb::new();
    let engine = hostile(&db, quick());
    let e = sandbox_error(engine.tenant("a").expect("tenant").get("write"));
    assert_eq!(e, SandboxError::WriteInReadCall);
    drop(engine);
    assert!(keys_of(&db).is_empty());
}

#[test]
fn answers_the_contract_rules_out_are_reported_not_passed_on() {
    let db = TestDb::new();
    let engine = hostile(&db, quick());
    let t = engine.tenant("a").expect("tenant");
    assert!(matches!(
        sandbox_error(t.get("wrong-id")),
        SandboxError::Malformed(m) if m.contains("someone-else")
    ));
    assert!(matches!(
        sandbox_error(t.overdue(0, 3)),
        SandboxError::Malformed(m) if m.contains("4 entries for a limit of 3")
    ));
}

/// Search's two read verbs, and a job's, are held to their contract too: a
/// page of more tasks than its limit, a view under another name than the
/// one asked for, and a job under another id, are a faulty guest's, never
/// passed on to the caller.
#[test]
fn a_search_page_past_its_limit_and_another_view_are_refused() {
    let db = TestDb::new();
    let engine = hostile(&db, quick());
    let t = engine.tenant("a").expect("tenant");
    let query = leasehold_host::SearchQuery {
        filter: leasehold_host::TaskFilter::default(),
        sort: leasehold_host::TaskSort::default(),
        limit: 3,
        after: None,
        viewer: None,
    };
    assert!(matches!(
        sandbox_error(t.search(&query)),
        SandboxError::Malformed(m) if m.contains("search answered 4 entries for a limit of 3")
    ));
    assert!(matches!(
        sandbox_error(t.get_view("mine")),
        SandboxError::Malformed(m) if m.contains("answered view \"mine-other\"")
    ));
    assert!(matches!(
        sandbox_error(t.get_job("j")),
        SandboxError::Malformed(m) if m.contains("answered job \"j-not\"")
    ));
    drop((t, engine));
    assert!(keys_of(&db).is_empty());
}

#[test]
fn a_guest_sees_nothing_outside_its_tenant_however_it_asks() {
    let db = TestDb::new();
    // The victim's data, written by the real guest. Tenant "ab" shares the
    // hostile tenant's first letter, and "" would be every key.
    {
        let engine = db.engine();
        for name in ["ab", "b", "a-"] {
            let victim = engine.tenant(name).expect("tenant");
            victim.open(&task("secret", 1)).expect("open");
            victim.arm(&timer("run", "wake", 5)).expect("arm");
        }
    }
    let before = db.raw_all();
    let engine = hostile(&db, quick());
    let t = engine.tenant("a").expect("tenant");
    t.open(&task("write-ok", 0)).expect("own write");
    let seen = t
        .get("escape")
        .expect("the probe runs")
        .expect("the probe answers");
    let seen: Vec<String> = serde_json::from_str(&seen.justification).expect("hex list");
    let own = leasehold_guest::keys::to_hex(b"hostile-ok");
    assert!(
        !seen.is_empty(),
        "the probe saw nothing, not even its own key"
    );
    assert!(
        seen.iter().all(|k| *k == own),
        "the guest saw keys outside its tenant: {seen:?}"
    );
    drop((t, engine));
    // The other tenants' data is exactly as it was.
    let mut after = db.raw_all();
    after.remove(&tenant_key("a", b"hostile-ok"));
    assert_eq!(after, before);
}

#[test]
fn bytes_that_are_not_a_component_are_refused_at_setup() {
    let db = TestDb::new();
    let r = db.try_open(Engine::builder().component(&b"not wasm"[..]));
    assert!(matches!(r, Err(Error::Setup { .. })), "{r:?}");
}

#[test]
fn a_component_missing_the_world_is_refused_at_setup() {
    // A real component that exports nothing the host needs.
    let db = TestDb::new();
    let empty = wasm_component_with_no_exports();
    let r = db.try_open(Engine::builder().component(empty));
    assert!(
        matches!(&r, Err(Error::Setup { what, .. }) if what.contains("world")),
        "{r:?}"
    );
}

/// The smallest valid component: the component-model preamble and nothing
/// else (magic, version 0x0d, layer 1).
fn wasm_component_with_no_exports() -> Vec<u8> {
    vec![0x00, 0x61, 0x73, 0x6d, 0x0d, 0x00, 0x01, 0x00]
}

#[test]
fn the_guest_is_granted_no_environment_arguments_files_input_or_network() {
    let db = TestDb::new();
    let engine = hostile(&db, quick());
    let found = engine
        .tenant("a")
        .expect("tenant")
        .get("wasi")
        .expect("the probe runs")
        .expect("the probe answers");
    let found: serde_json::Value = serde_json::from_str(&found.justification).expect("json");
    assert_eq!(
        found,
        serde_json::json!({"env": 0, "args": 0, "files": 0, "stdin": 0, "network": false})
    );
}
