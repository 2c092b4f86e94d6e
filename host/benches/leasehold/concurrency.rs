//! Section 4, reads beside a writer: two reader threads alone, beside a
//! writer on the same database, and beside one on another database as the
//! control. Readers run on snapshots; the harness must never make them wait
//! on the writer (beside the engine, the threads share only a stop flag), or
//! the comparison would measure the harness.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};
use leasehold_host::{Durability, Engine, Tenant};

use crate::bench::Bench;
use crate::drivers::TENANT;
use crate::stats::{Run, Runs};
use crate::workload::{REVIEWER, reviewer_query, reviewer_task, seed, seed_tasks, task};

impl Bench {
    /// Item 4: read latency from two threads, alone and beside a writer that
    /// commits with an fsync each call.
    pub(crate) fn concurrency(&mut self) -> Result<()> {
        let s = self.sizes;
        let path = self.fresh_file();
        let backlog = 1000.min(s.queue_backlog);
        seed(&path, |kv| seed_tasks(kv, (0..backlog).map(reviewer_task)))?;
        let tenant = Engine::builder()
            .durability(Durability::Immediate)
            .open(&path)?
            .tenant(TENANT)?;
        // The control: the same writer on a database of its own, so it
        // competes for the cores and the disk but holds no lock a reader of
        // the first database could wait on.
        let elsewhere_path = self.fresh_file();
        seed(&elsewhere_path, |_| Ok(()))?;
        let elsewhere = Engine::builder()
            .durability(Durability::Immediate)
            .open(&elsewhere_path)?
            .tenant(TENANT)?;
        let mut alone = Vec::new();
        let mut beside = Vec::new();
        let mut control = Vec::new();
        let mut writes = Vec::new();
        for run in 0..s.runs {
            let from = run * 1_000_000;
            alone.push(read_phase(&tenant, backlog, s.concurrency_for, None)?.0);
            let (reads, wrote) =
                read_phase(&tenant, backlog, s.concurrency_for, Some((&tenant, from)))?;
            beside.push(reads);
            writes.push(wrote.context("the writer's run")?);
            let reads = read_phase(
                &tenant,
                backlog,
                s.concurrency_for,
                Some((&elsewhere, from)),
            )?;
            control.push(reads.0);
        }
        if s.smoke {
            let found = tenant.check()?;
            ensure!(
                found.is_empty(),
                "discrepancies after the concurrency run: {found:?}"
            );
        }
        let (alone, beside, control, writes) =
            (Runs(alone), Runs(beside), Runs(control), Runs(writes));
        println!("## 4. Reads beside a writer\n");
        println!(
            "Two threads read for {:.1} s (each call one of `get`, `queue` (limit 10), \
             `open-count`, in turn) on the product engine, Durability::Immediate, {backlog} \
             queued tasks; then the same with a third thread opening tasks as fast as it can, \
             every commit an fsync; then, as a control, with that writer writing to another \
             database, where it shares the cores and the disk with the readers but no lock. \
             Reads run on snapshots and should not wait for the writer: if they did, the second \
             row would be slower than the third.\n",
            s.concurrency_for.as_secs_f64()
        );
        println!(
            "| | reads/s (both threads) | read p50 µs | read p99 µs | read max µs | reads over 1 ms |"
        );
        println!("| --- | --- | --- | --- | --- | --- |");
        for (name, r) in [
            ("readers alone", &alone),
            ("beside a writer on the same database", &beside),
            ("beside a writer on another database (control)", &control),
        ] {
            let slow = r.spread(|r| {
                100.0 * r.0.iter().filter(|&&t| t > 1000.0).count() as f64 / r.0.len() as f64
            });
            println!(
                "| {name} | {} | {} | {} | {} | {:.2}% ({:.2}–{:.2}%) |",
                r.spread(|r| r.0.len() as f64 / s.concurrency_for.as_secs_f64())
                    .rate(),
                r.p50().us(),
                r.p99().us(),
                r.spread(Run::max).us(),
                slow.median,
                slow.min,
                slow.max,
            );
        }
        println!(
            "\nThe writer on the same database meanwhile: {} opens/s, p50 {} µs, p99 {} µs per commit.\n",
            writes
                .spread(|r| r.0.len() as f64 / s.concurrency_for.as_secs_f64())
                .rate(),
            writes.p50().us(),
            writes.p99().us(),
        );
        std::fs::remove_file(&path)?;
        std::fs::remove_file(&elsewhere_path)?;
        Ok(())
    }
}

/// Two readers for `length`; with `writer`, a third thread opens tasks on
/// that tenant (ids from that number on) until the readers stop. Answers the
/// readers' latencies, merged, and the writer's.
fn read_phase(
    tenant: &Tenant,
    backlog: usize,
    length: Duration,
    writer: Option<(&Tenant, usize)>,
) -> Result<(Run, Option<Run>)> {
    let stop = Arc::new(AtomicBool::new(false));
    std::thread::scope(|scope| -> Result<(Run, Option<Run>)> {
        let writer = writer.map(|(writes_to, from)| {
            let stop = stop.clone();
            scope.spawn(move || -> Result<Run> {
                let mut out = Vec::new();
                let mut i = from;
                while !stop.load(Ordering::Relaxed) {
                    let t = task(
                        format!("written-{i:09}"),
                        2_000_000 + i as i64,
                        REVIEWER,
                        "written".into(),
                    );
                    let started = Instant::now();
                    writes_to.open(&t)?;
                    out.push(started.elapsed().as_secs_f64() * 1e6);
                    i += 1;
                }
                Ok(Run(out))
            })
        });
        let readers: Vec<_> = (0..2)
            .map(|r| {
                scope.spawn(move || -> Result<Vec<f64>> {
                    let query = reviewer_query(10);
                    let ends = Instant::now() + length;
                    let mut out = Vec::new();
                    let mut i = r;
                    while Instant::now() < ends {
                        let started = Instant::now();
                        match i % 3 {
                            0 => {
                                let id = format!("task-{:07}", (i * 7919) % backlog);
                                ensure!(tenant.get(&id)?.is_some(), "no task {id}");
                            }
                            1 => {
                                let page = tenant.queue(&query)?;
                                ensure!(page.tasks.len() == 10, "short queue page");
                            }
                            _ => {
                                ensure!(tenant.open_count()? >= backlog as u64, "open-count");
                            }
                        }
                        out.push(started.elapsed().as_secs_f64() * 1e6);
                        i += 1;
                    }
                    Ok(out)
                })
            })
            .collect();
        let joined: Vec<_> = readers.into_iter().map(|r| r.join()).collect();
        // Stop the writer before any error ends the scope, which waits for it.
        stop.store(true, Ordering::Relaxed);
        let wrote = match writer.map(|w| w.join()) {
            None => None,
            Some(Ok(got)) => Some(got?),
            Some(Err(_)) => bail!("the writer panicked"),
        };
        let mut reads = Vec::new();
        for r in joined {
            match r {
                Ok(got) => reads.extend(got?),
                Err(_) => bail!("a reader panicked"),
            }
        }
        Ok((Run(reads), wrote))
    })
}
