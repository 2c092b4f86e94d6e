//! Leasehold on PostgreSQL (BENCHMARKS.md, "PostgreSQL"): per-call latency
//! of claim, open, queue and claim-due; round trips per verb; then, from 1,
//! 2, 4 and 8 host processes on one database: claims/s on tasks of their
//! own, and claim-next with a lease then settle on one shared queue, beside
//! a plain SQL queue claimed with `FOR UPDATE SKIP LOCKED` (as River and
//! graphile-worker do) on a table of its own; and (`--peers`) that shared
//! queue beside graphile-worker's and pg-boss's (peers.rs).
//!
//! `cargo run --release -p leasehold-host --example pg_bench -- URL [OPTIONS]`
//!
//! URL names a database the benchmark may create schemas in; each run makes
//! a fresh schema and drops it at the end. Without options it runs
//! everything. `--contention` runs only the multi-process tables; `--queue`
//! only the shared-queue table; `--profile` a profile of the shared queue's
//! turn; `--disjoint [ROUNDS]` only disjoint work from 4 and 8 threads of
//! one process (calls/s and retries per 1,000 calls); `--peers` the sitting
//! beside the other job queues, where URL is a superuser's on a server of
//! the benchmark's own (peers/pg-server; options in peers.rs). `--procs
//! 1,2,4,8` picks the process counts, `--repeat N` runs each N times in
//! turn, `--seconds S` sets each run's length, `--backlog N` the queue's
//! size. The worker processes are this program again (`… -- URL
//! --child|--next|--batch|--skip …`), each one engine (or one plain connection) with
//! one calling thread, or a peer's Node worker. `GUEST_WASM=path` runs
//! another build of the guest (made for a measurement) in every engine, as
//! `profile_loop` does.

mod cpu;
mod peers;
mod turns;
mod workers;

use std::process::Command;
use std::time::{Duration, Instant};

use leasehold_host::{
    Engine, Error, OnExpiry, Phase, Priority, QueueQuery, Task, TaskState, Tenant, Timer,
};

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

fn task(id: String, created_at: i64) -> Task {
    Task {
        id,
        run: "r".into(),
        case: None,
        kind: "k".into(),
        justification: r#"{"why":"bench"}"#.into(),
        candidate_roles: vec!["reviewer".into()],
        assignee: None,
        lease_until: None,
        priority: Priority::Normal,
        state: TaskState::Open,
        on_expiry: OnExpiry::Deny,
        escalate_to: Vec::new(),
        excluded_actors: Vec::new(),
        created_at,
        due_at: None,
        revision: 0,
        decision: None,
        outcomes: Vec::new(),
        remind_before: Vec::new(),
        escalation: Vec::new(),
        steps_done: 0,
    }
}

/// The engine's builder, with the guest from `GUEST_WASM` when it names
/// one (a build made for a measurement), as `profile_loop` takes it; the
/// processes this program starts inherit it.
fn builder() -> Result<leasehold_host::EngineBuilder> {
    let b = Engine::builder();
    Ok(match std::env::var_os("GUEST_WASM") {
        Some(path) => b.component(std::fs::read(path)?),
        None => b,
    })
}

fn timer(i: usize) -> Timer {
    Timer {
        run: format!("run-{}", i % 97),
        case: None,
        effect: format!("e{i}"),
        step: 1,
        phase: Phase::Forward,
        fire_at: i as i64,
    }
}

fn query(limit: u32) -> QueueQuery {
    QueueQuery {
        roles: vec!["reviewer".into()],
        actor: None,
        limit,
        after: None,
    }
}

/// p50 and p99 of `samples`, in microseconds.
fn percentiles(mut samples: Vec<Duration>) -> (f64, f64) {
    samples.sort();
    let at = |q: f64| {
        let i = ((samples.len() as f64 - 1.0) * q).round() as usize;
        samples[i].as_secs_f64() * 1e6
    };
    (at(0.50), at(0.99))
}

/// Times `n` calls of `f`; answers (p50 µs, p99 µs, round trips per call,
/// retries per 1,000 calls).
fn measure(
    engine: &Engine,
    n: usize,
    mut f: impl FnMut(usize) -> std::result::Result<(), Error>,
) -> Result<(f64, f64, f64, f64)> {
    let trips = engine.round_trips().unwrap_or(0);
    let retries = engine.conflict_retries();
    let mut samples = Vec::with_capacity(n);
    for i in 0..n {
        let start = Instant::now();
        f(i)?;
        samples.push(start.elapsed());
    }
    let trips = (engine.round_trips().unwrap_or(0) - trips) as f64 / n as f64;
    let retries = (engine.conflict_retries() - retries) as f64 * 1000.0 / n as f64;
    let (p50, p99) = percentiles(samples);
    Ok((p50, p99, trips, retries))
}

fn schema_url(base: &str, schema: &str) -> String {
    let sep = if base.contains('?') { '&' } else { '?' };
    format!("{base}{sep}options=-c%20search_path%3D{schema}")
}

/// Runs SQL on the base database, outside any engine.
fn admin(base: &str, sql: &str) -> Result<()> {
    let status = Command::new("psql")
        .arg(base)
        .args(["-q", "-v", "ON_ERROR_STOP=1", "-c", sql])
        .status()?;
    if !status.success() {
        return Err(format!("psql failed: {sql}").into());
    }
    Ok(())
}

/// Disjoint work in one process (`--disjoint`): `threads` threads each open,
/// claim and settle tasks of their own beside 300 others, as the tests'
/// `postgres::writes_of_different_tasks_from_*_threads_seldom_conflict` do,
/// for several rounds; answers (calls/s, retries per 1,000 calls) of each.
fn disjoint_round(url: &str, threads: usize, round: usize) -> Result<(f64, f64)> {
    let engine = builder()?.pool_size(threads).postgres(url)?;
    let t = engine.tenant(&format!("apart{threads}r{round}"))?;
    for i in 0..300 {
        t.open(&task(format!("seed-{i}"), i))?;
    }
    let before = engine.conflict_retries();
    let per_thread = 150;
    let barrier = std::sync::Barrier::new(threads);
    let started = Instant::now();
    std::thread::scope(|s| -> Result<()> {
        let handles: Vec<_> = (0..threads)
            .map(|w| {
                let (t, barrier) = (&t, &barrier);
                s.spawn(move || -> std::result::Result<(), Error> {
                    barrier.wait();
                    for i in 0..per_thread {
                        let id = format!("w{w}-{i}");
                        t.open(&task(id.clone(), i as i64))?;
                        t.claim(&id, &format!("a{w}"), &["reviewer"], None)?;
                        t.settle(&id, leasehold_host::Settlement::Completed, None)?;
                    }
                    Ok(())
                })
            })
            .collect();
        for h in handles {
            h.join().map_err(|_| "a disjoint-work thread panicked")??;
        }
        Ok(())
    })?;
    let secs = started.elapsed().as_secs_f64();
    let calls = (threads * per_thread * 3) as f64;
    let retries = (engine.conflict_retries() - before) as f64;
    Ok((calls / secs, retries * 1000.0 / calls))
}

fn disjoint(url: &str, rounds: usize) -> Result<()> {
    println!("Disjoint work: threads opening, claiming and settling tasks of their own.");
    println!();
    println!("| threads | round | calls/s | retries / 1,000 calls |");
    println!("| --- | --- | --- | --- |");
    for round in 0..rounds {
        for threads in [4usize, 8] {
            let (rate, per_mille) = disjoint_round(url, threads, round)?;
            println!("| {threads} | {round} | {rate:.0} | {per_mille:.1} |");
        }
    }
    Ok(())
}

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.get(1).map(String::as_str) == Some("--child") {
        let url = args.get(2).ok_or("--child needs a URL")?;
        let prefix = args.get(3).ok_or("--child needs PREFIX")?;
        let tasks: usize = args.get(4).ok_or("--child needs TASKS")?.parse()?;
        let seconds: f64 = args.get(5).ok_or("--child needs SECONDS")?.parse()?;
        return workers::child(url, prefix, tasks, seconds);
    }
    if args.get(1).map(String::as_str) == Some("--batch") {
        let url = args.get(2).ok_or("--batch needs a URL")?;
        let actor = args.get(3).ok_or("--batch needs ACTOR")?;
        let count: u32 = args.get(4).ok_or("--batch needs COUNT")?.parse()?;
        return workers::batch_child(url, actor, count);
    }
    if let Some(mode @ ("--next" | "--skip")) = args.get(1).map(String::as_str) {
        let url = args.get(2).ok_or("needs a URL")?;
        let actor = args.get(3).ok_or("needs ACTOR")?;
        let profile = args.get(4).map(String::as_str) == Some("profile");
        return if mode == "--next" {
            workers::next_child(url, actor, profile)
        } else {
            workers::skip_child(url, actor)
        };
    }
    let flag = |name: &str| args.iter().any(|a| a == name);
    let value = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .cloned()
    };
    let counts: Vec<usize> = match value("--procs") {
        Some(list) => list
            .split(',')
            .map(str::parse)
            .collect::<std::result::Result<_, _>>()?,
        None => vec![1, 2, 4, 8],
    };
    let repeat: usize = value("--repeat").map_or(Ok(1), |v| v.parse())?;
    let seconds: f64 = value("--seconds").map_or(Ok(3.0), |v| v.parse())?;

    if flag("--peers") {
        let url = args.first().ok_or("usage: pg_bench URL --peers")?;
        let systems = value("--systems");
        return peers::sitting(
            url,
            &peers::Options {
                systems: systems.as_deref(),
                counts: &counts,
                repeat,
                seconds,
                statements: flag("--statements"),
            },
        );
    }
    let base = args
        .first()
        .ok_or("usage: pg_bench URL (a database the benchmark may create schemas in)")?
        .clone();
    let schema = format!("bench_{}", std::process::id());
    admin(&base, &format!("CREATE SCHEMA {schema}"))?;
    // Both queues in plaintext, so that neither pays for TLS the other
    // does not.
    let base_plain = if base.contains("sslmode=") {
        base.clone()
    } else {
        let sep = if base.contains('?') { '&' } else { '?' };
        format!("{base}{sep}sslmode=disable")
    };
    let url = schema_url(&base_plain, &schema);
    // Enough tasks for every run at a few thousand claims a second.
    let runs = counts.len() * if flag("--profile") { 2 } else { repeat };
    let backlog = match value("--backlog") {
        Some(n) => n.parse()?,
        None => ((runs as f64 * seconds * 3000.0) as usize).max(24_000),
    };
    let disjoint_rounds = args
        .iter()
        .position(|a| a == "--disjoint")
        .map(|i| args.get(i + 1).and_then(|n| n.parse().ok()).unwrap_or(3));
    let out = (|| {
        if let Some(rounds) = disjoint_rounds {
            return disjoint(&url, rounds);
        }
        if flag("--profile") {
            workers::seed_queues(&url, backlog)?;
            return turns::profile(&base, &url, &counts, seconds);
        }
        if flag("--queue") {
            workers::seed_queues(&url, backlog)?;
            return workers::contention(&base, &url, &counts, repeat, seconds);
        }
        if !flag("--contention") {
            run(&url)?;
        }
        workers::own_tasks(&base, &url, seconds)?;
        workers::seed_queues(&url, backlog)?;
        workers::contention(&base, &url, &counts, repeat, seconds)
    })();
    admin(&base, &format!("DROP SCHEMA {schema} CASCADE"))?;
    out
}

/// Opens `backlog` tasks named `prefix` and a number, from four threads so
/// seeding takes seconds.
fn seed(t: &Tenant, prefix: &str, backlog: usize) -> Result<()> {
    std::thread::scope(|s| -> Result<()> {
        let handles: Vec<_> = (0..4)
            .map(|w| {
                s.spawn(move || -> std::result::Result<(), Error> {
                    for i in (w..backlog).step_by(4) {
                        t.open(&task(format!("{prefix}{i:06}"), i as i64))?;
                    }
                    Ok(())
                })
            })
            .collect();
        for h in handles {
            h.join().map_err(|_| "a seeding thread panicked")??;
        }
        Ok(())
    })
}

fn run(url: &str) -> Result<()> {
    let engine = builder()?.postgres(url)?;
    let t = engine.tenant("bench")?;
    let n = 2000;
    let backlog = 4000;
    seed(&t, "b", backlog)?;
    println!("A schema of its own; {backlog} open tasks behind every measurement.");
    println!();
    println!("| verb | p50 | p99 | round trips / call | retries / 1,000 calls |");
    println!("| --- | --- | --- | --- | --- |");
    let row = |name: &str, (p50, p99, trips, retries): (f64, f64, f64, f64)| {
        println!("| {name} | {p50:.0} µs | {p99:.0} µs | {trips:.2} | {retries:.1} |");
    };
    row(
        "open",
        measure(&engine, n, |i| {
            t.open(&task(format!("o{i:06}"), (backlog + i) as i64))
                .map(drop)
        })?,
    );
    row(
        "claim",
        measure(&engine, n, |i| {
            t.claim(&format!("o{i:06}"), "alice", &["reviewer"], None)
                .map(drop)
        })?,
    );
    row(
        "settle",
        measure(&engine, n, |i| {
            t.settle(
                &format!("o{i:06}"),
                leasehold_host::Settlement::Completed,
                Some("alice"),
            )
            .map(drop)
        })?,
    );
    row(
        "queue (limit 50)",
        measure(&engine, n, |_| t.queue(&query(50)).map(drop))?,
    );
    row(
        "open-count",
        measure(&engine, n, |_| t.open_count().map(drop))?,
    );
    // The shared queue's head, alone: what one turn costs with nobody
    // waiting behind it.
    let lease = leasehold_host::Lease {
        now: 1,
        lease_ms: 3_600_000,
    };
    let head = QueueQuery {
        actor: Some("alice".into()),
        ..query(1)
    };
    row(
        "claim-next (with a lease)",
        measure(&engine, n, |_| {
            let got = t.claim_next(&head, Some(lease))?;
            assert!(got.is_some(), "the backlog holds a task");
            Ok(())
        })?,
    );
    // claim-due: a pool of due timers, none held, 100 per call; the pool is
    // armed again in a batch ahead of each timed call.
    for i in 0..2000 {
        t.arm(&timer(i))?;
    }
    let sweeps = 200;
    let mut now = 10_000_000i64;
    let claim_due = measure(&engine, sweeps, |_| {
        now += 1;
        // Leases of 1 ms: every timer is due again one millisecond later.
        let got = t.claim_due(now, 100, 1)?;
        assert_eq!(got.len(), 100, "a full pool");
        Ok(())
    })?;
    row("claim-due (limit 100)", claim_due);
    println!();

    Ok(())
}

/// Runs `sql` on one plain connection.
fn sql(url: &str, sql: &str) -> Result<()> {
    on_connection(url, |rt, client| rt.block_on(client.batch_execute(sql)))
}

/// Answers `f` on one plain connection, closed before it answers, so that
/// its server process is on its way out before whatever is measured next.
fn on_connection<T>(
    url: &str,
    f: impl FnOnce(
        &tokio::runtime::Runtime,
        &tokio_postgres::Client,
    ) -> std::result::Result<T, tokio_postgres::Error>,
) -> Result<T> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let (client, connection) = rt.block_on(tokio_postgres::connect(url, tokio_postgres::NoTls))?;
    let driver = rt.spawn(connection);
    let out = f(&rt, &client);
    drop(client);
    let _ = rt.block_on(driver);
    Ok(out?)
}

/// The rows of one query without parameters.
fn select(url: &str, sql: &str) -> Result<Vec<tokio_postgres::Row>> {
    on_connection(url, |rt, client| rt.block_on(client.query(sql, &[])))
}

/// The first column of the first row of `sql`, a bigint.
fn query_i64(url: &str, sql: &str) -> Result<i64> {
    select(url, sql)?
        .first()
        .ok_or_else(|| format!("no row from {sql}"))?
        .try_get(0)
        .map_err(Into::into)
}
