//! A soak of group commit: sixteen threads make a fixed number of mixed
//! calls on one redb file with fsync, among them claims that race, settles,
//! opens that fail validation, and calls into the hostile fixture that
//! write and then trap or refuse, all sharing commits. A watchdog fails the
//! run if no call finishes for two seconds; at the end every acknowledged
//! write is there, nothing a failed call wrote is, and the check is clean.
//!
//! `LEASEHOLD_SOAK_CALLS` sets the calls per thread (the suite's size is
//! small enough for CI; set it to thousands for a long soak).

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use leasehold_host::{Error, Refusal, SandboxError, Settlement, StoreError, TaskState};
use leasehold_tests::{
    HOSTILE_COMPONENT, Rng, TaskExt, TestDb, assert_consistent, seed, task, tenant_key,
};

const THREADS: usize = 16;
const POOL: usize = 48;
const STALL: Duration = Duration::from_secs(2);

/// What threads were told had succeeded.
#[derive(Default)]
struct Acked {
    /// Pool tasks: who claimed them, and whether that claimer settled.
    claimed: BTreeMap<String, (String, bool)>,
    opened: Vec<String>,
}

#[test]
fn sixteen_threads_of_mixed_calls_never_stall_and_lose_nothing_acknowledged() {
    let calls: usize = std::env::var("LEASEHOLD_SOAK_CALLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(60);
    let db = TestDb::redb();
    let engine = db.engine();
    let hostile = engine
        .with_component(HOSTILE_COMPONENT)
        .expect("the fixture beside the rules");
    let t = engine.tenant("soak").expect("tenant");
    for i in 0..POOL {
        t.open(&task(&format!("p{i}"), i as i64 + 1).roles(&["r"]))
            .expect("the pool opens");
    }
    let acked = Mutex::new(Acked::default());
    let finished = AtomicU64::new(0);
    let done_threads = AtomicUsize::new(0);
    let unexpected: Mutex<Vec<String>> = Mutex::new(Vec::new());
    let seed = seed();
    println!("soak seed {seed}, {calls} calls per thread");

    std::thread::scope(|s| {
        for me in 0..THREADS {
            let (t, hostile) = (t.clone(), hostile.tenant("soak").expect("tenant"));
            let (acked, finished, done_threads, unexpected) =
                (&acked, &finished, &done_threads, &unexpected);
            s.spawn(move || {
                let mut rng = Rng(seed.wrapping_mul(me as u64 + 1) | 1);
                let actor = format!("a{me}");
                let mut held: Vec<String> = Vec::new();
                for i in 0..calls {
                    let pick = format!("p{}", rng.below(POOL as u64));
                    let outcome: Result<(), String> = match rng.below(10) {
                        0..=3 => match t.claim(&pick, &actor, &["r"], None) {
                            Ok(task) if task.assignee.as_deref() == Some(&actor) => {
                                let mut a = acked.lock().expect("acked");
                                a.claimed.insert(pick.clone(), (actor.clone(), false));
                                if !held.contains(&pick) {
                                    held.push(pick);
                                }
                                Ok(())
                            }
                            Err(Error::Refused(
                                Refusal::AlreadyClaimed(_) | Refusal::NotPending(_),
                            )) => Ok(()),
                            other => Err(format!("claim {pick}: {other:?}")),
                        },
                        4 | 5 => match held.pop() {
                            Some(id) => match t.settle(&id, Settlement::Completed, Some(&actor)) {
                                Ok(true) => {
                                    let mut a = acked.lock().expect("acked");
                                    a.claimed.insert(id, (actor.clone(), true));
                                    Ok(())
                                }
                                other => Err(format!("settle {id}: {other:?}")),
                            },
                            None => Ok(()),
                        },
                        6 => {
                            let id = format!("n{me}-{i}");
                            match t.open(&task(&id, 1)) {
                                Ok(_) => {
                                    acked.lock().expect("acked").opened.push(id);
                                    Ok(())
                                }
                                other => Err(format!("open {id}: {other:?}")),
                            }
                        }
                        7 => match t.open(&task("", 1)) {
                            Err(Error::Store(StoreError::Invalid(_))) => Ok(()),
                            other => Err(format!("an invalid open: {other:?}")),
                        },
                        8 => match hostile.open(&task("write-then-trap", 1)) {
                            Err(Error::Sandbox(SandboxError::Trap(_))) => Ok(()),
                            other => Err(format!("a trapping call: {other:?}")),
                        },
                        _ => match hostile.open(&task("write-then-error", 1)) {
                            Err(Error::Store(StoreError::Invalid(_))) => Ok(()),
                            other => Err(format!("a refusing call: {other:?}")),
                        },
                    };
                    if let Err(e) = outcome {
                        unexpected.lock().expect("unexpected").push(e);
                    }
                    finished.fetch_add(1, Ordering::SeqCst);
                }
                done_threads.fetch_add(1, Ordering::SeqCst);
            });
        }
        // The watchdog: some call must finish every two seconds.
        let mut last = (0, Instant::now());
        while done_threads.load(Ordering::SeqCst) < THREADS {
            std::thread::sleep(Duration::from_millis(20));
            let now = finished.load(Ordering::SeqCst);
            if now != last.0 {
                last = (now, Instant::now());
            } else if last.1.elapsed() > STALL {
                panic!(
                    "no call finished for {STALL:?} after {now} calls (seed {seed}); \
                     group commit is stuck"
                );
            }
        }
    });

    let unexpected = unexpected.into_inner().expect("unexpected");
    assert!(unexpected.is_empty(), "(seed {seed}) {unexpected:#?}");
    let acked = acked.into_inner().expect("acked");
    for (id, (actor, settled)) in &acked.claimed {
        let task = t.get(id).expect("get").expect("pool tasks exist");
        let want = if *settled {
            TaskState::Completed
        } else {
            TaskState::Claimed
        };
        assert_eq!(
            (task.state, task.assignee.as_deref()),
            (want, Some(actor.as_str())),
            "task {id} (seed {seed})"
        );
    }
    for id in &acked.opened {
        assert!(t.get(id).expect("get").is_some(), "task {id} (seed {seed})");
    }
    assert_consistent(&t);
    let stats = engine.commit_stats().expect("redb groups commits");
    assert!(
        stats.largest <= u64::from(engine.limits().group_calls),
        "{stats:?}"
    );
    drop((t, hostile, engine));
    // Nothing the fixture wrote before it trapped or refused was committed.
    let keys = db.raw_all();
    for key in [&b"hostile-trap"[..], b"hostile-error"] {
        assert!(
            !keys.contains_key(&tenant_key("soak", key)),
            "a failed call's write was committed (seed {seed})"
        );
    }
}
