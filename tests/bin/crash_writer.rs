//! The child process of the crash test: performs a stream of mutating calls on
//! a database file and prints one line per call the engine acknowledged, so
//! the parent knows exactly what was promised before it kills this process.
//!
//! Usage: `crash-writer DB FIRST [THREADS]` — ids start at `FIRST`, the
//! stream never ends on its own. With THREADS, that many threads write at
//! once (so their calls share commits), each opening and claiming tasks of
//! its own and printing `open ID` / `claim ID` as each call is acknowledged.

use std::io::Write;

use leasehold_host::{Engine, Lease, Settlement};
use leasehold_tests::{TaskExt, task, timer};

fn main() {
    let mut args = std::env::args().skip(1);
    let (Some(db), Some(first)) = (args.next(), args.next()) else {
        eprintln!("usage: crash-writer DB FIRST");
        std::process::exit(2);
    };
    let first: u64 = first.parse().expect("FIRST is a number");
    let engine = Engine::open(&db).expect("the database opens");
    if let Some(threads) = args.next() {
        let threads: u64 = threads.parse().expect("THREADS is a number");
        many_writers(&engine, first, threads);
    }
    let t = engine.tenant("crash").expect("tenant");
    let mut out = std::io::stdout().lock();
    let mut ack = |line: String| {
        writeln!(out, "{line}").expect("stdout");
        out.flush().expect("stdout");
    };
    for i in first.. {
        let id = format!("t{i}");
        let due = i as i64;
        t.open(
            &task(&id, i as i64)
                .roles(&["r"])
                .in_case(&format!("c{}", i % 7))
                .due(due),
        )
        .expect("open");
        ack(format!("open {id}"));
        if i % 3 == 0 {
            // Every other claim under a lease too long to lapse, so the kill
            // also lands amid lease-index and leased-counter writes.
            let lease = (i % 6 == 0).then_some(Lease {
                now: i as i64,
                lease_ms: 604_800_000,
            });
            t.claim(&id, "w", &["r"], lease).expect("claim");
            ack(format!("claim {id}"));
        }
        if i % 4 == 0 {
            t.settle(&id, Settlement::Completed, None).expect("settle");
            ack(format!("settle {id}"));
        }
        let run = format!("run-{i}");
        t.arm(&timer(&run, "wake", i as i64)).expect("arm");
        ack(format!("arm {run}"));
        if i % 10 == 0 {
            let n = t.claim_due(i as i64, 5, 60_000).expect("sweep").len();
            ack(format!("sweep {n}"));
        }
    }
}

/// `threads` writers at once, each on tasks of its own.
fn many_writers(engine: &Engine, first: u64, threads: u64) -> ! {
    std::thread::scope(|s| {
        for w in 0..threads {
            let t = engine.tenant("crash").expect("tenant");
            s.spawn(move || {
                for i in 0.. {
                    let id = format!("t{}-{w}-{i}", first);
                    t.open(&task(&id, i).roles(&["r"]).due(i)).expect("open");
                    println!("open {id}");
                    if i % 2 == 0 {
                        t.claim(&id, "w", &["r"], None).expect("claim");
                        println!("claim {id}");
                    }
                }
            });
        }
    });
    std::process::exit(0)
}
