//! Bulk jobs, issue 56: a job that assigns every task of one tenant to
//! another actor, run to its end on a durable store (as a server runs:
//! `Durability::Immediate`, group commit on; redb, and PostgreSQL where
//! `LEASEHOLD_TEST_PG` names a database), while another tenant's caller
//! claims and releases tasks of its own in a steady loop. The job is
//! stepped either by the sweeper's jobs duty, in the sweeper's turns (as
//! `serve` runs it), or by a plain loop of `step-job` calls, to show what
//! the turns give the other tenant. The caller's claims with no job beside
//! them are timed in the same run, right before and right after the job,
//! on the same engine and the same tasks, so the ratio compares like with
//! like.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};
use leasehold_guest::tasks;
use leasehold_host::native::NativeEngine;
use leasehold_host::{
    AssigneeFilter, CommitStats, Durability, Engine, JobAction, JobAssign, JobState, StepJobs,
    SweepReport, Sweeper, SweeperOptions, Task, TaskFilter, TaskState, Tenant, standard_duties,
};

use crate::bench::Bench;
use crate::drivers::bench_limits;
use crate::stats::{Run, us};
use crate::workload::{ALICE, REVIEWER, task};

/// The tenant whose tasks the job changes.
const JOB_TENANT: &str = "acme";
/// The tenant whose caller claims beside the job.
const CALLER_TENANT: &str = "beta";
const JOB: &str = "reassign";
/// Whom the job assigns every task to.
const TO: &str = "bob";

/// Who steps the job.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Stepper {
    /// The sweeper's jobs duty ([`StepJobs`]), in its turns.
    Sweeper,
    /// One thread calling `step-job` back to back.
    Loop,
}

impl Stepper {
    fn name(self) -> &'static str {
        match self {
            Stepper::Sweeper => "the sweeper (`StepJobs`, default turns)",
            Stepper::Loop => "a loop of `step-job` calls",
        }
    }
}

/// Where a run keeps its tenants.
#[derive(Clone)]
enum Store {
    /// A fresh redb file.
    Redb,
    /// A fresh schema of the PostgreSQL database this URL names.
    Postgres(String),
}

impl Store {
    fn name(&self) -> &'static str {
        match self {
            Store::Redb => "redb",
            Store::Postgres(_) => "PostgreSQL",
        }
    }
}

/// A fresh schema of a PostgreSQL database, dropped with this value.
struct PgSchema {
    base: String,
    name: String,
    /// A URL whose connections use only this schema.
    url: String,
}

impl PgSchema {
    fn fresh(base: &str) -> Result<PgSchema> {
        let name = format!(
            "bench_jobs_{}_{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.subsec_nanos())
                .unwrap_or(0)
        );
        pg_execute(base, &format!("CREATE SCHEMA {name}"))?;
        let sep = if base.contains('?') { '&' } else { '?' };
        Ok(PgSchema {
            url: format!("{base}{sep}options=-c%20search_path%3D{name}"),
            base: base.to_owned(),
            name,
        })
    }
}

impl Drop for PgSchema {
    fn drop(&mut self) {
        let _ = pg_execute(
            &self.base,
            &format!("DROP SCHEMA IF EXISTS {} CASCADE", self.name),
        );
    }
}

/// Runs one statement on a connection of its own.
fn pg_execute(url: &str, sql: &str) -> Result<()> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async {
        let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls).await?;
        let connection = tokio::spawn(connection);
        client.batch_execute(sql).await?;
        drop(client);
        let _ = connection.await;
        Ok(())
    })
}

/// One run of one stepper.
struct Outcome {
    store: &'static str,
    stepper: Stepper,
    tasks: usize,
    /// From `start-job` to the job found `done`.
    wall: Duration,
    /// The caller's claims with no job: right before and right after.
    quiet: Run,
    /// The caller's claims that started and ended while the job ran.
    during: Run,
    /// The caller's claim + release cycles a second, without and with the
    /// job.
    quiet_rate: f64,
    during_rate: f64,
    /// Write calls per durable commit while the job ran, and the mean
    /// commit's time (its fsync included), µs, with no job (before it) and
    /// while it ran: where the backend keeps commit stats (redb).
    calls_per_commit: Option<f64>,
    quiet_commit_us: Option<f64>,
    during_commit_us: Option<f64>,
    /// The sweeper's turns while the job ran (all tenants).
    turns: u64,
}

/// A task the sweeper leaves alone: no due time (the seed's tasks were
/// created long before the wall clock's now), no lease.
fn quiet_task(id: String, i: usize) -> Task {
    let mut t = task(id, 1_000 + i as i64, REVIEWER, format!("case-{}", i / 10));
    t.due_at = None;
    t
}

fn job_task(i: usize) -> String {
    format!("a-{i:06}")
}

fn caller_task(i: usize) -> String {
    format!("b-{i:06}")
}

/// Every task of the job's tenant, open, and the caller's pool, through the
/// native build of the rules, a transaction per tenant.
fn seed_tenants(path: &std::path::Path, tasks_n: usize, pool: usize) -> Result<()> {
    let native = NativeEngine::open(path, Durability::Immediate)?;
    native.tenant(JOB_TENANT)?.write(|kv| {
        for i in 0..tasks_n {
            tasks::open(kv, &quiet_task(job_task(i), i))?;
        }
        Ok::<_, leasehold_host::Error>(())
    })?;
    native.tenant(CALLER_TENANT)?.write(|kv| {
        for i in 0..pool {
            tasks::open(kv, &quiet_task(caller_task(i), i))?;
        }
        Ok::<_, leasehold_host::Error>(())
    })?;
    Ok(())
}

/// [`seed_tenants`] through the product, a few threads at once: the
/// native build runs over redb only.
fn seed_through(engine: &Engine, tasks_n: usize, pool: usize) -> Result<()> {
    const THREADS: usize = 4;
    let a = engine.tenant(JOB_TENANT)?;
    let b = engine.tenant(CALLER_TENANT)?;
    std::thread::scope(|sc| -> Result<()> {
        let handles: Vec<_> = (0..THREADS)
            .map(|w| {
                let (a, b) = (&a, &b);
                sc.spawn(move || -> Result<()> {
                    for i in (w..tasks_n).step_by(THREADS) {
                        a.open(&quiet_task(job_task(i), i))?;
                    }
                    for i in (w..pool).step_by(THREADS) {
                        b.open(&quiet_task(caller_task(i), i))?;
                    }
                    Ok(())
                })
            })
            .collect();
        for h in handles {
            h.join()
                .unwrap_or_else(|_| bail!("a seeding thread panicked"))?;
        }
        Ok(())
    })
}

/// The caller's loop: claim a task of its pool (timed), release it, the
/// next, until `done` says stop. Each claim's start (since `origin`) and
/// latency, µs.
fn claim_loop(
    t: &Tenant,
    pool: usize,
    origin: Instant,
    done: impl Fn() -> bool,
) -> Result<Vec<(f64, f64)>> {
    let mut out = Vec::new();
    let mut i = 0;
    while !done() {
        let id = caller_task(i % pool);
        let started = Instant::now();
        let got = t.claim(&id, ALICE, &[REVIEWER], None)?;
        let took = started.elapsed();
        ensure!(got.state == TaskState::Claimed, "{id} was not claimed");
        out.push((
            started.duration_since(origin).as_secs_f64() * 1e6,
            took.as_secs_f64() * 1e6,
        ));
        t.release(&id, ALICE)?;
        i += 1;
    }
    Ok(out)
}

/// The caller alone for `quiet`: its claims' latencies and its cycles.
fn quiet_phase(t: &Tenant, pool: usize, quiet: Duration) -> Result<(Vec<f64>, usize)> {
    let origin = Instant::now();
    let calls = claim_loop(t, pool, origin, || origin.elapsed() >= quiet)?;
    let n = calls.len();
    Ok((calls.into_iter().map(|(_, l)| l).collect(), n))
}

/// Two readings of the commit stats with commits between them: a backend
/// that counts none (PostgreSQL outside its lines) says nothing.
fn both<'a>(
    from: &'a Option<CommitStats>,
    to: &'a Option<CommitStats>,
) -> Option<(&'a CommitStats, &'a CommitStats)> {
    from.as_ref()
        .zip(to.as_ref())
        .filter(|(f, t)| t.commits > f.commits)
}

/// The mean commit's time between two readings of the commit stats, µs.
fn mean_commit_us(from: &CommitStats, to: &CommitStats) -> f64 {
    let commits = to.commits - from.commits;
    (to.committing - from.committing).as_secs_f64() * 1e6 / commits.max(1) as f64
}

impl Bench {
    pub(crate) fn jobs(&mut self) -> Result<()> {
        let s = self.sizes;
        println!("## Bulk jobs (issue 56)\n");
        println!(
            "A job assigns all {} open tasks of tenant `{JOB_TENANT}` to `{TO}` (`start-job`, \
             filter: state open; action `assign`), run to `done`, on one redb file (and, where \
             `LEASEHOLD_TEST_PG` names a database, a fresh schema of it) with \
             Durability::Immediate and group commit on (as `serve` opens them), a sweeper with \
             the standard duties running (default options: {} calls a turn). Meanwhile \
             tenant `{CALLER_TENANT}`'s caller, on another thread, claims a task of its pool \
             of {} (timed) and releases it, round and round. Its claims with no job are timed \
             for {:?} right before and {:?} right after the job, on the same engine. Tasks/s = \
             tasks ÷ the wall time from `start-job` to `done`. Latency in µs.\n",
            s.jobs_tasks,
            SweeperOptions::default().calls_per_turn,
            s.jobs_pool,
            s.jobs_quiet,
            s.jobs_quiet,
        );
        let mut stores = vec![Store::Redb];
        match std::env::var("LEASEHOLD_TEST_PG") {
            Ok(url) if !url.is_empty() => stores.push(Store::Postgres(url)),
            _ => println!(
                "PostgreSQL not measured: LEASEHOLD_TEST_PG names no database (tests/pg-setup \
                 prints one).\n"
            ),
        }
        let mut outcomes = Vec::new();
        for store in &stores {
            for stepper in [Stepper::Sweeper, Stepper::Loop] {
                outcomes.push(self.job_run(store, stepper)?);
            }
        }
        println!(
            "| store | job stepped by | tasks | wall s | tasks/s | claim p50 no job | claim p50 during | \
             claim p99 no job | claim p99 during | **p99 during ÷ no job** | claim max no job | \
             claim max during | caller cycles/s no job | during | calls per commit during | \
             commit µs no job | commit µs during | sweeper turns |"
        );
        println!(
            "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
        );
        for o in &outcomes {
            println!(
                "| {} | {} | {} | {:.2} | {:.0} | {} | {} | {} | {} | **{:.2}** | {} | {} | {:.0} | {:.0} | {} | {} | {} | {} |",
                o.store,
                o.stepper.name(),
                o.tasks,
                o.wall.as_secs_f64(),
                o.tasks as f64 / o.wall.as_secs_f64(),
                us(o.quiet.p50()),
                us(o.during.p50()),
                us(o.quiet.p99()),
                us(o.during.p99()),
                o.during.p99() / o.quiet.p99(),
                us(o.quiet.max()),
                us(o.during.max()),
                o.quiet_rate,
                o.during_rate,
                o.calls_per_commit.map_or("—".into(), |x| format!("{x:.2}")),
                o.quiet_commit_us.map_or("—".into(), us),
                o.during_commit_us.map_or("—".into(), us),
                o.turns,
            );
        }
        println!(
            "\nClaims timed: {}.\n",
            outcomes
                .iter()
                .map(|o| format!(
                    "{} with no job, {} during the job ({}, {})",
                    o.quiet.0.len(),
                    o.during.0.len(),
                    o.store,
                    match o.stepper {
                        Stepper::Sweeper => "sweeper",
                        Stepper::Loop => "loop",
                    }
                ))
                .collect::<Vec<_>>()
                .join("; ")
        );
        for o in outcomes.iter().filter(|o| o.stepper == Stepper::Sweeper) {
            let ratio = o.during.p99() / o.quiet.p99();
            self.target(
                format!(
                    "another tenant's durable `claim` p99 during a 10,000-task bulk job (sweeper, {}) ÷ with no job",
                    o.store
                ),
                "≤ 2×",
                format!("{ratio:.2}×"),
                ratio <= 2.0,
            );
        }
        Ok(())
    }

    fn job_run(&mut self, store: &Store, stepper: Stepper) -> Result<Outcome> {
        let s = self.sizes;
        let builder = Engine::builder()
            .durability(Durability::Immediate)
            .limits(bench_limits());
        let (engine, path, schema) = match store {
            Store::Redb => {
                let path = self.fresh_file();
                seed_tenants(&path, s.jobs_tasks, s.jobs_pool)?;
                (builder.open(&path)?, Some(path), None)
            }
            Store::Postgres(base) => {
                let schema = PgSchema::fresh(base)?;
                let engine = builder.postgres(&schema.url)?;
                seed_through(&engine, s.jobs_tasks, s.jobs_pool)?;
                (engine, None, Some(schema))
            }
        };
        let a = engine.tenant(JOB_TENANT)?;
        let b = engine.tenant(CALLER_TENANT)?;

        // The sweeper says when a turn of the job's tenant ended with nothing
        // left to do: the job is done (checked by `get-job` below).
        let (ended_tx, ended) = mpsc::channel::<()>();
        let ended_tx = Mutex::new(ended_tx);
        let on_sweep = Arc::new(move |r: &SweepReport| {
            if r.tenant == JOB_TENANT && !r.more && r.error.is_none() {
                let _ = ended_tx
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .send(());
            }
        });
        let options = SweeperOptions {
            on_sweep: Some(on_sweep),
            ..SweeperOptions::default()
        };
        let mut duties = standard_duties(&options);
        if stepper == Stepper::Sweeper {
            duties.push(Box::new(StepJobs::default()));
        }
        let sweeper = Sweeper::start_with(
            &engine,
            [JOB_TENANT, CALLER_TENANT].map(String::from),
            options,
            duties,
        )?;

        let quiet_from = engine.commit_stats();
        let (before, before_n) = quiet_phase(&b, s.jobs_pool, s.jobs_quiet)?;
        let quiet_time = s.jobs_quiet;

        let filter = TaskFilter {
            states: vec![TaskState::Open],
            ..TaskFilter::default()
        };
        let action = JobAction::Assign(JobAssign {
            to: TO.into(),
            roles: vec![REVIEWER.into()],
            override_roles: false,
        });
        let commits_before = engine.commit_stats();
        let quiet_commit_us = both(&quiet_from, &commits_before).map(|(f, t)| mean_commit_us(f, t));
        let turns_before = sweeper.stats().sweeps;
        let stop = AtomicBool::new(false);
        let origin = Instant::now();
        let (job, wall, t0, t1, during) = std::thread::scope(|sc| -> Result<_> {
            let caller =
                sc.spawn(|| claim_loop(&b, s.jobs_pool, origin, || stop.load(Ordering::Relaxed)));
            // Let the caller get going before the job starts.
            std::thread::sleep(Duration::from_millis(50));
            let t0 = origin.elapsed();
            let started = Instant::now();
            let outcome = (|| -> Result<_> {
                a.start_job(JOB, &filter, &action, Some("lead"), engine.clock().now())?;
                let job = match stepper {
                    Stepper::Sweeper => loop {
                        // A turn that ended with nothing left says so at once;
                        // the poll is a fallback.
                        let _ = ended.recv_timeout(Duration::from_millis(100));
                        let job = a.get_job(JOB)?.context("the job is gone")?;
                        if !matches!(job.state, JobState::Counting | JobState::Running) {
                            break job;
                        }
                        if started.elapsed() > Duration::from_secs(1800) {
                            bail!("the job did not end in 30 minutes: {job:?}");
                        }
                    },
                    Stepper::Loop => loop {
                        let job = a.step_job(JOB)?;
                        if !matches!(job.state, JobState::Counting | JobState::Running) {
                            break job;
                        }
                    },
                };
                Ok(job)
            })();
            let wall = started.elapsed();
            let t1 = origin.elapsed();
            stop.store(true, Ordering::Relaxed);
            let during = caller
                .join()
                .unwrap_or_else(|_| bail!("the caller panicked"))?;
            Ok((outcome?, wall, t0, t1, during))
        })?;
        let commits_after = engine.commit_stats();
        let turns = sweeper.stats().sweeps - turns_before;

        let (after, after_n) = quiet_phase(&b, s.jobs_pool, s.jobs_quiet)?;
        drop(sweeper);

        let n = s.jobs_tasks as u64;
        ensure!(
            job.state == JobState::Done
                && (job.total, job.done, job.skipped, job.failed) == (n, n, 0, 0),
            "the job did not assign every task: {job:?}"
        );
        let held = a.count(
            &TaskFilter {
                assignee: Some(AssigneeFilter::Actor(TO.into())),
                ..TaskFilter::default()
            },
            None,
            None,
        )?;
        ensure!(
            held.exact && held.count == n,
            "{TO} holds {} tasks, not {n}",
            held.count
        );
        if s.smoke {
            ensure!(a.check()?.is_empty(), "the job's tenant is inconsistent");
            ensure!(b.check()?.is_empty(), "the caller's tenant is inconsistent");
        }

        let (t0, t1) = (t0.as_secs_f64() * 1e6, t1.as_secs_f64() * 1e6);
        let within: Vec<f64> = during
            .iter()
            .filter(|(at, took)| *at >= t0 && at + took <= t1)
            .map(|(_, took)| *took)
            .collect();
        let quiet: Vec<f64> = before.into_iter().chain(after).collect();
        let during_commits = both(&commits_before, &commits_after);
        drop((a, b, engine));
        if let Some(path) = path {
            std::fs::remove_file(&path)?;
        }
        drop(schema);
        Ok(Outcome {
            store: store.name(),
            stepper,
            tasks: s.jobs_tasks,
            wall,
            quiet_rate: (before_n + after_n) as f64 / (2.0 * quiet_time.as_secs_f64()),
            during_rate: within.len() as f64 / wall.as_secs_f64(),
            quiet: Run(quiet),
            during: Run(within),
            calls_per_commit: during_commits
                .map(|(f, t)| (t.calls - f.calls) as f64 / (t.commits - f.commits).max(1) as f64),
            quiet_commit_us,
            during_commit_us: during_commits.map(|(f, t)| mean_commit_us(f, t)),
            turns,
        })
    }
}
