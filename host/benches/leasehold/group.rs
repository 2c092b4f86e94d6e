//! Section 5, durable claims from many threads with group commit on and
//! off, what each commit cost, and an fsync probe of the same disk. Every
//! claim is durable (`Durability::Immediate`), and the threads must share
//! nothing but the engine and a start barrier, so that what group commit
//! gains comes from the commits alone.

use std::path::Path;
use std::time::Instant;

use anyhow::{Context, Result, bail, ensure};
use leasehold_host::{Durability, Engine, TaskState, Tenant};

use crate::bench::Bench;
use crate::drivers::{TENANT, bench_limits};
use crate::stats::{Run, Spread, time_calls};
use crate::workload::{ALICE, REVIEWER, reviewer_task, seed, seed_tasks, task_id};

/// One burst of claims from many threads.
struct Burst {
    /// Claims per second, all threads together, over the burst's wall time.
    rate: f64,
    /// Every call's latency.
    latency: Run,
    /// Write calls per durable commit, and the mean commit's time in µs.
    calls_per_commit: f64,
    commit_us: f64,
}

/// Fsyncs the probe times for each number of pages.
const FSYNC_PROBES: usize = 60;

/// The median time of `fdatasync` after writing 1, 4, 16 and 32 scattered
/// pages: how an fsync's cost grows with what a commit wrote.
fn fsync_probe(path: &Path) -> Result<Vec<(usize, f64)>> {
    use std::os::unix::fs::FileExt;
    const PAGES: u64 = 4096;
    let file = std::fs::File::create(path).context("the fsync probe's file")?;
    file.set_len(PAGES * 4096)?;
    file.sync_all()?;
    let page = [0x5au8; 4096];
    // A fixed sequence of offsets, so every run writes the same pages.
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut out = Vec::new();
    for pages in [1usize, 4, 16, 32] {
        let mut took = Vec::with_capacity(FSYNC_PROBES);
        for _ in 0..FSYNC_PROBES {
            for _ in 0..pages {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                file.write_at(&page, (x % PAGES) * 4096)?;
            }
            let started = Instant::now();
            file.sync_data()?;
            took.push(started.elapsed().as_secs_f64() * 1e6);
        }
        out.push((pages, Spread::of(&took).median));
    }
    drop(file);
    std::fs::remove_file(path)?;
    Ok(out)
}

/// `threads` threads claim `claims` distinct tasks each, all at once.
fn claim_burst(tenant: &Tenant, threads: usize, claims: usize) -> Result<Burst> {
    let start = std::sync::Barrier::new(threads);
    let started = Instant::now();
    let runs: Vec<Result<Run>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|w| {
                let start = &start;
                s.spawn(move || {
                    start.wait();
                    time_calls(claims, |i| {
                        let got =
                            tenant.claim(&task_id(w * claims + i), ALICE, &[REVIEWER], None)?;
                        ensure!(got.state == TaskState::Claimed, "claim did not claim");
                        Ok(())
                    })
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|_| bail!("a claimer panicked")))
            .collect()
    });
    let wall = started.elapsed().as_secs_f64();
    let mut all = Vec::new();
    for run in runs {
        all.extend(run?.0);
    }
    Ok(Burst {
        rate: (threads * claims) as f64 / wall,
        latency: Run(all),
        calls_per_commit: f64::NAN,
        commit_us: f64::NAN,
    })
}

impl Bench {
    /// Durable claims from 1, 2, 4 and 8 writer threads at once, with group
    /// commit on and off (`Durability::Immediate`: every commit an fsync).
    pub(crate) fn group_commit(&mut self) -> Result<()> {
        let s = self.sizes;
        let threads = [1usize, 2, 4, 8];
        let mut rows = Vec::new();
        for &n in &threads {
            let mut on = Vec::new();
            let mut off = Vec::new();
            for _ in 0..s.runs.min(5) {
                for (grouped, out) in [(true, &mut on), (false, &mut off)] {
                    let path = self.fresh_file();
                    let claims = s.group_claims;
                    seed(&path, |kv| {
                        seed_tasks(kv, (0..n * claims).map(reviewer_task))
                    })?;
                    let engine = Engine::builder()
                        .durability(Durability::Immediate)
                        .group_commit(grouped)
                        .limits(bench_limits())
                        .open(&path)?;
                    let tenant = engine.tenant(TENANT)?;
                    let mut burst = claim_burst(&tenant, n, claims)?;
                    let stats = engine.commit_stats().context("redb keeps commit stats")?;
                    ensure!(stats.commits > 0, "the burst made no commit");
                    burst.calls_per_commit = stats.calls as f64 / stats.commits as f64;
                    burst.commit_us = stats.committing.as_secs_f64() * 1e6 / stats.commits as f64;
                    out.push(burst);
                    if s.smoke {
                        ensure!(tenant.check()?.is_empty(), "inconsistent after the burst");
                    }
                }
            }
            rows.push((n, on, off));
        }
        println!("## 5. Durable claims from many threads: group commit\n");
        println!(
            "Each run: N threads claim {} distinct tasks each, as fast as they can, on one \
             database file under Durability::Immediate (every commit one fsync). *on*: calls \
             that queue while a commit is flushing share the next one; *off*: every call \
             commits alone (`EngineBuilder::group_commit(false)`). Median of {} runs, with \
             (min–max); latency per call within a run, µs.\n",
            s.group_claims,
            s.runs.min(5)
        );
        println!(
            "| writer threads | claims/s on | claims/s off | on/off | p50 on | p50 off | p99 on | p99 off |"
        );
        println!("| --- | --- | --- | --- | --- | --- | --- | --- |");
        let mut one = None;
        let mut four = None;
        for (n, on, off) in &rows {
            let rate = |b: &[Burst]| Spread::of(&b.iter().map(|x| x.rate).collect::<Vec<_>>());
            let p = |b: &[Burst], q: f64| {
                Spread::of(&b.iter().map(|x| x.latency.quantile(q)).collect::<Vec<_>>())
            };
            let (r_on, r_off) = (rate(on), rate(off));
            println!(
                "| {n} | {} | {} | {:.2} | {} | {} | {} | {} |",
                r_on.rate(),
                r_off.rate(),
                r_on.median / r_off.median,
                p(on, 0.5).us(),
                p(off, 0.5).us(),
                p(on, 0.99).us(),
                p(off, 0.99).us(),
            );
            if *n == 1 {
                one = Some(r_on.median);
            }
            if *n == 4 {
                four = Some(r_on.median);
            }
        }
        println!();
        println!(
            "What the commits cost. A commit covers *calls per commit* write calls and \
             takes *commit µs* (redb's commit, its fsync included); the threads wait \
             for their commit, so even with no CPU spent per call they could not make \
             more than calls per commit ÷ commit time claims/s: the *ceiling*, and \
             beside it that ceiling over the 1-thread rate (on). Medians of the runs.\n"
        );
        println!(
            "| writer threads | calls per commit (on) | commit µs (on) | commit µs (off) | ceiling (on) | ceiling / 1-thread rate |"
        );
        println!("| --- | --- | --- | --- | --- | --- |");
        for (n, on, off) in &rows {
            let med = |b: &[Burst], f: fn(&Burst) -> f64| {
                Spread::of(&b.iter().map(f).collect::<Vec<_>>()).median
            };
            let size = med(on, |b| b.calls_per_commit);
            let took = med(on, |b| b.commit_us);
            let ceiling = size / took * 1e6;
            println!(
                "| {n} | {size:.2} | {took:.0} | {:.0} | {:.1}k | {} |",
                med(off, |b| b.commit_us),
                ceiling / 1e3,
                one.map_or("—".into(), |one| format!("{:.2}×", ceiling / one)),
            );
        }
        println!();
        let probe = fsync_probe(&self.fresh_file())?;
        println!(
            "This disk, in the same run: `fdatasync` after writing N scattered 4 KiB pages \
             into a 16 MiB file, median of {FSYNC_PROBES}: {}.\n",
            probe
                .iter()
                .map(|(pages, us)| format!("{pages} pages {us:.0} µs"))
                .collect::<Vec<_>>()
                .join(", ")
        );
        if let (Some(one), Some(four)) = (one, four) {
            self.target(
                "durable claims, 4 writer threads vs 1 (group commit)",
                "≥ 3× the 1-thread rate",
                format!("{:.2}×", four / one),
                four / one >= 3.0,
            );
        }
        Ok(())
    }
}
