//! One verb in a tight loop, for a profiler: `perf record` sees the calls
//! and little else (the component compiles once and the seeding is small),
//! which the benchmark, with its many engines and fresh files, cannot give.
//!
//! ```sh
//! cargo build --profile profiling -p leasehold-host --example profile_loop
//! LEASEHOLD_PERF_MAP=1 perf record -F 10000 target/profiling/examples/profile_loop queue reuse 30000
//! perf report --no-children --sort dso,sym
//! ```
//!
//! Arguments: the verb (`queue`, a page of 50 of 1000 open tasks; `count`,
//! `open-count`; `open`; `claim`, a claim or a release of one of the 1000,
//! by turns; `due`, `claim-due` of 100 of 1000 timers; `settle`, a claim
//! then a settle of each of the n tasks, opened beforehand, counting the
//! pairs), then
//! `fresh` (a fresh instance per call) or `reuse` (instances kept, the
//! default), then the number of calls. It prints
//! the mean time per call. `GUEST_WASM=path` runs another build of the
//! guest, such as one that keeps its function names (`CARGO_PROFILE_RELEASE_STRIP=false`)
//! so that `perf report` names them. `DURABLE=1` commits with
//! `Durability::Immediate` (group commit), as the service does, rather than
//! without a flush. `THREADS=k` runs `claim` from k threads at once, each
//! on its own share of the tasks, so durable commits are grouped.
use anyhow::{bail, ensure};
use leasehold_host::{
    Durability, Engine, OnExpiry, Phase, Priority, QueueQuery, Settlement, Task, TaskState, Timer,
};
use std::time::Instant;

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn task(i: usize) -> Task {
    Task {
        id: format!("task-{i:06}"),
        run: format!("run-{}", i / 10),
        case: Some(format!("case-{}", i / 10)),
        kind: "review".into(),
        justification: r#"{"why":"bench"}"#.into(),
        candidate_roles: vec!["reviewer".into()],
        assignee: None,
        lease_until: None,
        priority: Priority::Normal,
        state: TaskState::Open,
        on_expiry: OnExpiry::Deny,
        escalate_to: vec![],
        excluded_actors: vec![],
        created_at: i as i64,
        due_at: None,
        revision: 0,
        decision: None,
        outcomes: Vec::new(),
        remind_before: Vec::new(),
        escalation: Vec::new(),
        steps_done: 0,
    }
}

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let what = args.get(1).map_or("queue", String::as_str);
    // Instances are kept unless `fresh` is asked for (`reuse`, the old
    // word for the default, still means it).
    let fresh = args.get(2).map(String::as_str) == Some("fresh");
    let n: usize = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(20_000);
    let dir = tempfile::tempdir()?;
    let durability = if std::env::var_os("DURABLE").is_some() {
        Durability::Immediate
    } else {
        Durability::None
    };
    let mut b = Engine::builder().durability(durability);
    if fresh {
        b = b.fresh_instances();
    }
    if let Ok(path) = std::env::var("GUEST_WASM") {
        b = b.component(std::fs::read(path)?);
    }
    let t = b.open(dir.path().join("db"))?.tenant("acme")?;
    let seeded = if what == "settle" { n } else { 1000 };
    for i in 0..seeded {
        t.open(&task(i))?;
    }
    if what == "due" {
        for i in 0..1000 {
            t.arm(&Timer {
                run: format!("run-{i}"),
                case: None,
                effect: "wake".into(),
                step: 1,
                phase: Phase::Forward,
                fire_at: i as i64,
            })?;
        }
    }
    let q = QueueQuery {
        roles: vec!["reviewer".into()],
        actor: Some("alice".into()),
        limit: 50,
        after: None,
    };
    let threads: usize = std::env::var("THREADS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1);
    if what == "settle" {
        return claim_and_settle(&t, threads.max(1), n);
    }
    if what == "claim" && threads > 1 {
        let started = Instant::now();
        std::thread::scope(|s| {
            let handles: Vec<_> = (0..threads)
                .map(|k| {
                    let t = &t;
                    s.spawn(move || -> anyhow::Result<()> {
                        // Thread k claims and releases the tasks whose number
                        // is k modulo `threads`, round after round.
                        let mine: Vec<String> = (k..1000)
                            .step_by(threads)
                            .map(|i| format!("task-{i:06}"))
                            .collect();
                        for i in 0..n / threads {
                            let id = &mine[i % mine.len()];
                            if (i / mine.len()).is_multiple_of(2) {
                                drop(t.claim(id, "alice", &["reviewer"], None)?);
                            } else {
                                t.release(id, "alice")?;
                            }
                        }
                        Ok(())
                    })
                })
                .collect();
            handles
                .into_iter()
                .try_for_each(|h| h.join().expect("a claiming thread panicked"))
        })?;
        let el = started.elapsed();
        let calls = n / threads * threads;
        eprintln!(
            "claim threads={threads} fresh={fresh}: {:.0} calls/s",
            calls as f64 / el.as_secs_f64()
        );
        return Ok(());
    }
    let started = Instant::now();
    for i in 0..n {
        match what {
            "queue" => ensure!(t.queue(&q)?.tasks.len() == 50, "a short page"),
            "due" => ensure!(
                t.claim_due(10_000 + i as i64 * 10, 100, 1)?.len() == 100,
                "a short sweep"
            ),
            "count" => ensure!(t.open_count()? == 1000, "a wrong count"),
            "open" => drop(t.open(&task(100_000 + i))?),
            "claim" => {
                // Round after round of the same 1000 tasks: claimed in odd
                // rounds, released in even ones.
                let id = format!("task-{:06}", i % 1000);
                if (i / 1000) % 2 == 0 {
                    drop(t.claim(&id, "alice", &["reviewer"], None)?);
                } else {
                    t.release(&id, "alice")?;
                }
            }
            other => bail!("no verb {other:?}: queue, due, count, open, claim or settle"),
        }
    }
    let el = started.elapsed();
    eprintln!(
        "{what} fresh={fresh}: {:.2} µs per call",
        el.as_secs_f64() * 1e6 / n as f64
    );
    Ok(())
}

/// Claim + settle from `threads` threads, thread k taking the tasks whose
/// number is k modulo `threads`: the life of a task a queue worker takes.
fn claim_and_settle(t: &leasehold_host::Tenant, threads: usize, n: usize) -> anyhow::Result<()> {
    let started = Instant::now();
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|k| {
                s.spawn(move || -> anyhow::Result<()> {
                    for i in (k..n).step_by(threads) {
                        let id = format!("task-{i:06}");
                        drop(t.claim(&id, "alice", &["reviewer"], None)?);
                        ensure!(
                            t.settle(&id, Settlement::Completed, Some("alice"))?,
                            "a claimed task did not settle"
                        );
                    }
                    Ok(())
                })
            })
            .collect();
        handles
            .into_iter()
            .try_for_each(|h| h.join().expect("a settling thread panicked"))
    })?;
    let el = started.elapsed();
    eprintln!(
        "claim+settle threads={threads}: {:.0} pairs/s",
        n as f64 / el.as_secs_f64()
    );
    Ok(())
}
