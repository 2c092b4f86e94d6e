//! A host process for the PostgreSQL tests: one engine on a shared database,
//! doing one kind of work and printing one line per acknowledged result, so
//! the parent test can add up what several processes did.
//!
//! Every mode prints `ready` once connected and waits for a line on stdin
//! before it starts, so all processes start together. At the end it prints
//! `calls N retries N` (calls made, and runs again after conflicts).
//!
//! - `claim URL TENANT PROC THREADS TASKS`: each thread is a claimant
//!   `pPROC-tI` that tries to claim every task `task-0` … `task-(TASKS-1)`,
//!   starting at its own offset; prints `won ID ACTOR` for each claim won.
//! - `sweep URL TENANT NOW`: claims due timers, 20 at a time under a long
//!   lease, until none is left; prints `fired RUN EFFECT` for each.
//! - `write URL TENANT PREFIX`: opens and claims tasks of its own, for ever;
//!   prints `open ID` / `claim ID` as each is acknowledged (to be killed).
//! - `disjoint URL TENANT PREFIX THREADS TASKS`: each thread opens, claims
//!   and settles `TASKS` tasks of its own, `PREFIX-tI-N`; conflicts are run
//!   again by the engine only (a conflict that surfaces fails the worker).
//! - `next URL TENANT PROC THREADS`: each thread calls claim-next with a
//!   lease on the queue of role `r`, then settles what it got, until the
//!   queue is empty; prints `won ID ACTOR` for each; a surfaced conflict
//!   fails the worker.
//! - `hold URL TENANT`: runs the hostile component's `read-then-loop`, which
//!   reads (so its transaction is open on the server) and then spins until
//!   the process is killed.

use std::io::{BufRead, Write};
use std::sync::atomic::{AtomicU64, Ordering};

use leasehold_host::{Engine, Error, Lease, Limits, Refusal, Settlement};
use leasehold_tests::{HOSTILE_COMPONENT, TaskExt, query, task};

fn usage() -> ! {
    eprintln!("usage: pg-worker claim|sweep|write|hold URL TENANT …");
    std::process::exit(2)
}

fn arg<T: std::str::FromStr>(args: &[String], i: usize) -> T {
    args.get(i)
        .and_then(|a| a.parse().ok())
        .unwrap_or_else(|| usage())
}

fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{line}").expect("stdout");
    out.flush().expect("stdout");
}

/// Makes `call` until it answers something other than a retryable
/// conflict or busy error: a call that lost every race is simply made again.
fn persist<T>(calls: &AtomicU64, mut call: impl FnMut() -> Result<T, Error>) -> Result<T, Error> {
    loop {
        calls.fetch_add(1, Ordering::Relaxed);
        match call() {
            Err(Error::Conflict { .. } | Error::LockTimeout(_)) => continue,
            out => return out,
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mode = args.first().cloned().unwrap_or_else(|| usage());
    let url: String = arg(&args, 1);
    let tenant: String = arg(&args, 2);
    let builder = Engine::builder();
    let engine = if mode == "hold" {
        let limits = Limits {
            deadline: std::time::Duration::from_secs(600),
            ..Limits::default()
        };
        builder.limits(limits).component(HOSTILE_COMPONENT)
    } else {
        builder
    }
    .postgres(&url)
    .expect("the engine connects");
    let t = engine.tenant(&tenant).expect("tenant");
    say("ready");
    let mut go = String::new();
    std::io::stdin().lock().read_line(&mut go).expect("stdin");
    let calls = AtomicU64::new(0);
    match mode.as_str() {
        "claim" => {
            let proc: usize = arg(&args, 3);
            let threads: usize = arg(&args, 4);
            let tasks: usize = arg(&args, 5);
            std::thread::scope(|s| {
                for i in 0..threads {
                    let (t, calls) = (&t, &calls);
                    s.spawn(move || {
                        let actor = format!("p{proc}-t{i}");
                        let offset = (proc * threads + i) * 13;
                        for n in 0..tasks {
                            let id = format!("task-{}", (n + offset) % tasks);
                            match persist(calls, || t.claim(&id, &actor, &["r"], None)) {
                                Ok(_) => say(&format!("won {id} {actor}")),
                                Err(Error::Refused(Refusal::AlreadyClaimed(_))) => {}
                                Err(e) => panic!("claim {id} as {actor}: {e}"),
                            }
                        }
                    });
                }
            });
        }
        "sweep" => {
            let now: i64 = arg(&args, 3);
            loop {
                let got = persist(&calls, || t.claim_due(now, 20, 3_600_000)).expect("claim-due");
                if got.is_empty() {
                    break;
                }
                for timer in got {
                    say(&format!("fired {} {}", timer.run, timer.effect));
                }
            }
        }
        "write" => {
            let prefix: String = arg(&args, 3);
            for i in 0i64.. {
                let id = format!("{prefix}-{i}");
                persist(&calls, || t.open(&task(&id, i).roles(&["r"]))).expect("open");
                say(&format!("open {id}"));
                persist(&calls, || {
                    t.claim(
                        &id,
                        "w",
                        &["r"],
                        Some(Lease {
                            now: i,
                            lease_ms: 600_000,
                        }),
                    )
                })
                .expect("claim");
                say(&format!("claim {id}"));
            }
        }
        "disjoint" => {
            let prefix: String = arg(&args, 3);
            let threads: usize = arg(&args, 4);
            let tasks: i64 = arg(&args, 5);
            std::thread::scope(|s| {
                for i in 0..threads {
                    let (t, calls, prefix) = (&t, &calls, &prefix);
                    s.spawn(move || {
                        for n in 0..tasks {
                            let id = format!("{prefix}-t{i}-{n}");
                            t.open(&task(&id, n).roles(&["r"])).expect("open");
                            t.claim(&id, "a", &["r"], None).expect("claim");
                            t.settle(&id, Settlement::Completed, None).expect("settle");
                            calls.fetch_add(3, Ordering::Relaxed);
                        }
                    });
                }
            });
        }
        "next" => {
            let proc: usize = arg(&args, 3);
            let threads: usize = arg(&args, 4);
            std::thread::scope(|s| {
                for i in 0..threads {
                    let (t, calls) = (&t, &calls);
                    s.spawn(move || {
                        let actor = format!("p{proc}-t{i}");
                        let lease = Lease {
                            now: 1,
                            lease_ms: 3_600_000,
                        };
                        loop {
                            calls.fetch_add(1, Ordering::Relaxed);
                            let got = t
                                .claim_next(&query(&["r"], Some(&actor), 1, None), Some(lease))
                                .expect("claim-next");
                            let Some(task) = got else { break };
                            say(&format!("won {} {actor}", task.id));
                            calls.fetch_add(1, Ordering::Relaxed);
                            t.settle(&task.id, Settlement::Completed, Some(&actor))
                                .expect("settle");
                        }
                    });
                }
            });
        }
        "hold" => {
            let held = t.open(&task("read-then-loop", 1));
            panic!("read-then-loop returned: {held:?}");
        }
        _ => usage(),
    }
    say(&format!(
        "calls {} retries {}",
        calls.load(Ordering::Relaxed),
        engine.conflict_retries()
    ));
}
