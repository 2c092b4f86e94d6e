//! The worker loop (issue 59): one `Worker` with one handler
//! thread and a handler that does nothing, draining a backlog on a redb
//! file, with batches of 1 and 10, beside a plain loop of `claim-next` and
//! `settle` calls (two calls a task), each on a fresh file with the same
//! tasks. What the worker saves is calls, and with them commits: the table
//! gives tasks a second and the calls each task cost.

use std::time::{Duration, Instant};

use anyhow::{Result, ensure};
use leasehold_host::{Durability, Engine, Outcome, Settlement, Worker, WorkerOptions};

use crate::bench::Bench;
use crate::drivers::{TENANT, bench_limits};
use crate::stats::Spread;
use crate::workload::{ALICE, REVIEWER, reviewer_query, reviewer_task, seed, seed_tasks};

/// How the backlog is drained.
#[derive(Clone, Copy)]
enum Drain {
    /// `claim-next` then `settle`, one task at a time.
    Loop,
    /// A worker fetching this many at once.
    Worker(u32),
}

impl Drain {
    fn name(self) -> String {
        match self {
            Drain::Loop => "loop of claim-next + settle".to_owned(),
            Drain::Worker(b) => format!("Worker, batch {b}"),
        }
    }
}

/// Drains `n` tasks; answers tasks a second and calls a task.
fn drain(engine: &Engine, n: usize, how: Drain) -> Result<(f64, f64)> {
    let started = Instant::now();
    let calls = match how {
        Drain::Loop => {
            let t = engine.tenant(TENANT)?;
            let mut calls = 0;
            while let Some(task) = t.claim_next(&reviewer_query(1), None)? {
                ensure!(
                    t.settle(&task.id, Settlement::Completed, Some(ALICE))?,
                    "not settled"
                );
                calls += 2;
            }
            calls + 1
        }
        Drain::Worker(batch) => {
            let options = WorkerOptions::new(ALICE, &[REVIEWER]).batch(batch);
            let w = Worker::start(engine, TENANT, options, |_| {
                Ok::<_, String>(Outcome::completed())
            })?;
            while w.stats().settled < n as u64 {
                ensure!(
                    started.elapsed() < Duration::from_secs(600),
                    "the worker stalled"
                );
                std::thread::sleep(Duration::from_micros(200));
            }
            let s = w.stop(Duration::from_secs(10));
            ensure!(s.failed == 0 && s.lost == 0, "the worker failed: {s:?}");
            s.calls
        }
    };
    let wall = started.elapsed().as_secs_f64();
    Ok((n as f64 / wall, calls as f64 / n as f64))
}

impl Bench {
    /// One worker draining a backlog, batch 1 and 10, beside a plain loop.
    pub(crate) fn worker(&mut self) -> Result<()> {
        let s = self.sizes;
        let runs = s.runs.min(5);
        let mut rows = Vec::new();
        for (durability, n) in [
            (Durability::None, s.worker_tasks),
            (Durability::Immediate, s.worker_tasks_durable),
        ] {
            for how in [Drain::Loop, Drain::Worker(1), Drain::Worker(10)] {
                let mut rates = Vec::new();
                let mut per = Vec::new();
                for _ in 0..runs {
                    let path = self.fresh_file();
                    seed(&path, |kv| seed_tasks(kv, (0..n).map(reviewer_task)))?;
                    let engine = Engine::builder()
                        .durability(durability)
                        .limits(bench_limits())
                        .open(&path)?;
                    let (rate, calls) = drain(&engine, n, how)?;
                    if s.smoke {
                        ensure!(engine.tenant(TENANT)?.check()?.is_empty(), "inconsistent");
                    }
                    rates.push(rate);
                    per.push(calls);
                }
                rows.push((durability, n, how, Spread::of(&rates), Spread::of(&per)));
            }
        }
        println!("## The worker loop (issue 59)\n");
        println!(
            "One `Worker` (one handler thread, a handler that does nothing, default \
             options but the batch) drains a backlog on a fresh redb file, beside a loop \
             of `claim-next` and `settle` on the same tasks. Tasks/s over the whole drain \
             (from the start to the last settled); calls per task counts every call, the \
             empty fetches at the end included. Median of {runs} runs, with (min–max).\n"
        );
        println!("| durability | tasks | drained by | tasks/s | calls per task |");
        println!("| --- | --- | --- | --- | --- |");
        for (d, n, how, rate, per) in rows {
            println!(
                "| {d:?} | {n} | {} | {} | {:.2} ({:.2}–{:.2}) |",
                how.name(),
                rate.rate(),
                per.median,
                per.min,
                per.max
            );
        }
        println!();
        Ok(())
    }
}
