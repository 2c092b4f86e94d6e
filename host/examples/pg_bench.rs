//! Leasehold on PostgreSQL (BENCHMARKS.md, "PostgreSQL"): per-call latency
//! of claim, open, queue and claim-due; round trips per verb; then, from 1,
//! 2, 4 and 8 host processes on one database: claims/s on tasks of their
//! own, and claim-next with a lease then settle on one shared queue, beside
//! a plain SQL queue claimed with `FOR UPDATE SKIP LOCKED` (as River and
//! graphile-worker do) on a table of its own.
//!
//! `cargo run --release -p leasehold-host --example pg_bench -- URL [OPTIONS]`
//!
//! URL names a database the benchmark may create schemas in; each run makes
//! a fresh schema and drops it at the end. Without options it runs
//! everything. `--contention` runs only the multi-process tables; `--queue`
//! only the shared-queue table; `--profile` a profile of the shared queue's
//! turn; `--disjoint [ROUNDS]` only disjoint work from 4 and 8 threads of
//! one process (calls/s and retries per 1,000 calls). `--procs 1,2,4,8`
//! picks the process counts, `--repeat N` runs each N times in turn,
//! `--seconds S` sets each run's length, `--backlog N` the queue's size.
//! The host processes are this program again (`… --
//! URL --child|--next|--skip …`), each one engine (or one plain connection)
//! with one calling thread. `GUEST_WASM=path` runs another build of the
//! guest (made for a measurement) in every engine, as `profile_loop` does.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
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

/// One host process: opens `tasks` tasks of its own (untimed), then claims
/// them for at most `seconds`, printing `claims N secs S retries N`.
fn child(url: &str, prefix: &str, tasks: usize, seconds: f64) -> Result<()> {
    let engine = builder()?.postgres(url)?;
    let t = engine.tenant("bench")?;
    for i in 0..tasks {
        t.open(&task(format!("{prefix}-{i}"), i as i64))?;
    }
    let retries = engine.conflict_retries();
    println!("ready");
    let mut line = String::new();
    std::io::stdin().read_line(&mut line)?;
    let start = Instant::now();
    let mut claims = 0usize;
    while claims < tasks && start.elapsed().as_secs_f64() < seconds {
        t.claim(&format!("{prefix}-{claims}"), "alice", &["reviewer"], None)?;
        claims += 1;
    }
    println!(
        "claims {claims} secs {} retries {}",
        start.elapsed().as_secs_f64(),
        engine.conflict_retries() - retries
    );
    Ok(())
}

/// CPU time this thread has had, in nanoseconds (`/proc/thread-self/schedstat`),
/// or `None` where the kernel does not say.
fn own_cpu_ns() -> Option<u64> {
    cpu_ns("/proc/thread-self/schedstat")
}

fn cpu_ns(path: &str) -> Option<u64> {
    std::fs::read_to_string(path)
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// The server process serving the sessions named `app`, found through a
/// connection of its own; `None` when the server is not on this machine
/// or not readable.
fn backend_pids(url: &str, app: &str) -> Result<Vec<u32>> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async {
        let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls).await?;
        tokio::spawn(connection);
        let rows = client
            .query(
                "SELECT pid FROM pg_stat_activity WHERE application_name = $1",
                &[&app],
            )
            .await?;
        Ok(rows.iter().map(|r| r.get::<_, i32>(0) as u32).collect())
    })
}

/// CPU time the server processes `pids` have had, in nanoseconds, if
/// readable.
fn backends_cpu_ns(pids: &[u32]) -> Option<u64> {
    pids.iter()
        .map(|p| cpu_ns(&format!("/proc/{p}/schedstat")))
        .sum()
}

/// The URL with `application_name` set, so the server's processes for it
/// can be found.
fn named(url: &str, app: &str) -> String {
    let sep = if url.contains('?') { '&' } else { '?' };
    format!("{url}{sep}application_name={app}")
}

/// Round trips of the PostgreSQL backend, as its trace events report them
/// (`leasehold::pg`, trace level): collected on this thread, for the
/// profile of a turn.
mod trips {
    use std::cell::RefCell;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::time::Instant;
    use tracing::field::{Field, Visit};
    use tracing::span::{Attributes, Id, Record};
    use tracing::{Event, Metadata, Subscriber};

    /// One round trip: what it carried, whether it began the transaction,
    /// its wait in microseconds, and when it ended.
    #[derive(Clone, Debug)]
    pub struct Trip {
        pub commit: bool,
        pub first: bool,
        pub micros: u64,
        pub ended: Instant,
    }

    thread_local! {
        static TRIPS: RefCell<Vec<Trip>> = const { RefCell::new(Vec::new()) };
    }

    /// The round trips since the last call.
    pub fn take() -> Vec<Trip> {
        TRIPS.with(|t| std::mem::take(&mut *t.borrow_mut()))
    }

    pub struct Collector {
        next: AtomicU64,
    }

    impl Collector {
        pub fn install() {
            let _ = tracing::subscriber::set_global_default(Collector {
                next: AtomicU64::new(1),
            });
        }
    }

    #[derive(Default)]
    struct Fields {
        what: String,
        first: bool,
        micros: u64,
    }

    impl Visit for Fields {
        fn record_str(&mut self, f: &Field, v: &str) {
            if f.name() == "what" {
                self.what = v.to_owned();
            }
        }
        fn record_bool(&mut self, f: &Field, v: bool) {
            if f.name() == "first" {
                self.first = v;
            }
        }
        fn record_u64(&mut self, f: &Field, v: u64) {
            if f.name() == "micros" {
                self.micros = v;
            }
        }
        fn record_debug(&mut self, _: &Field, _: &dyn std::fmt::Debug) {}
    }

    impl Subscriber for Collector {
        fn enabled(&self, m: &Metadata<'_>) -> bool {
            m.target() == "leasehold::pg"
        }
        fn new_span(&self, _: &Attributes<'_>) -> Id {
            Id::from_u64(self.next.fetch_add(1, Ordering::Relaxed))
        }
        fn record(&self, _: &Id, _: &Record<'_>) {}
        fn record_follows_from(&self, _: &Id, _: &Id) {}
        fn event(&self, e: &Event<'_>) {
            let ended = Instant::now();
            let mut f = Fields::default();
            e.record(&mut f);
            TRIPS.with(|t| {
                t.borrow_mut().push(Trip {
                    commit: f.what == "commit",
                    first: f.first,
                    micros: f.micros,
                    ended,
                })
            });
        }
        fn enter(&self, _: &Id) {}
        fn exit(&self, _: &Id) {}
    }
}

/// What one claim-next's round trips say of its turn: the first round trip
/// (the wait for the turn, `BEGIN` and the first read), the reads after it,
/// the commit (the writes, `COMMIT` with its WAL flush, and the turn given
/// back), and the turn as the host sees it: from the first round trip's
/// answer to the commit's, of which the rest is the host's own time.
fn turn_line(call_started: Instant, trips: &[trips::Trip]) -> Option<String> {
    let first = trips.iter().find(|t| t.first)?;
    let commit = trips.iter().rev().find(|t| t.commit)?;
    let reads: Vec<&trips::Trip> = trips.iter().filter(|t| !t.first && !t.commit).collect();
    let read_us: u64 = reads.iter().map(|t| t.micros).sum();
    let hold = commit.ended.duration_since(first.ended).as_micros() as u64;
    let host = hold.saturating_sub(read_us + commit.micros);
    let before = first
        .ended
        .duration_since(call_started)
        .as_micros()
        .saturating_sub(u128::from(first.micros)) as u64;
    Some(format!(
        "turn {} {} {} {} {hold} {host} {before}",
        first.micros,
        read_us,
        reads.len(),
        commit.micros
    ))
}

/// One host process on the shared queue: claim-next with a lease, then
/// settle, until the queue is empty or `seconds` passed. Prints `claims N
/// secs S retries N calls N`, `lat` with each claim-next's microseconds,
/// `cpu` with its own and its server process's CPU nanoseconds and `trips`
/// with its round trips per claim-next and per settle; with `profile`, a
/// `turn` line per claim-next (see [`turn_line`]).
fn next_child(url: &str, actor: &str, seconds: f64, profile: bool) -> Result<()> {
    if profile {
        trips::Collector::install();
    }
    let app = format!("lhb-{actor}");
    let engine = builder()?.postgres(&named(url, &app))?;
    let t = engine.tenant("queue")?;
    t.open_count()?;
    let pids = backend_pids(url, &app).unwrap_or_default();
    println!("ready");
    let mut line = String::new();
    std::io::stdin().read_line(&mut line)?;
    let lease = leasehold_host::Lease {
        now: 1,
        lease_ms: 3_600_000,
    };
    let q = QueueQuery {
        roles: vec!["reviewer".into()],
        actor: Some(actor.into()),
        limit: 1,
        after: None,
    };
    let (cpu0, server0) = (own_cpu_ns(), backends_cpu_ns(&pids));
    let (mut next_trips, mut settle_trips) = (0u64, 0u64);
    let mut turns = Vec::new();
    let (start, mut claims, mut calls, mut lat) = (Instant::now(), 0usize, 0usize, Vec::new());
    while start.elapsed().as_secs_f64() < seconds {
        let at = Instant::now();
        let before = engine.round_trips().unwrap_or(0);
        calls += 1;
        let Some(task) = t.claim_next(&q, Some(lease))? else {
            break;
        };
        lat.push(at.elapsed().as_micros().to_string());
        let mid = engine.round_trips().unwrap_or(0);
        next_trips += mid - before;
        if profile && let Some(l) = turn_line(at, &trips::take()) {
            turns.push(l);
        }
        calls += 1;
        t.settle(&task.id, leasehold_host::Settlement::Completed, Some(actor))?;
        settle_trips += engine.round_trips().unwrap_or(0) - mid;
        if profile {
            trips::take();
        }
        claims += 1;
    }
    let secs = start.elapsed().as_secs_f64();
    let cpu = own_cpu_ns().zip(cpu0).map(|(b, a)| b - a);
    let server = backends_cpu_ns(&pids).zip(server0).map(|(b, a)| b - a);
    println!(
        "claims {claims} secs {secs} retries {} calls {calls}",
        engine.conflict_retries()
    );
    println!("lat {}", lat.join(","));
    if let (Some(c), Some(s)) = (cpu, server) {
        println!("cpu {c} {s}");
    }
    println!("trips {next_trips} {settle_trips}");
    for l in turns {
        println!("{l}");
    }
    Ok(())
}

/// The plain SQL queue: each claim one autocommitted statement at READ
/// COMMITTED, skipping rows other claimers hold locked.
const SKIP_CLAIM: &str = "UPDATE plain_queue SET state = 'claimed', holder = $1, lease_until = $2 \
     WHERE id = (SELECT id FROM plain_queue WHERE state = 'open' \
     ORDER BY priority, created_at, id LIMIT 1 FOR UPDATE SKIP LOCKED) RETURNING id";
const SKIP_SETTLE: &str =
    "UPDATE plain_queue SET state = 'done', lease_until = NULL WHERE id = $1 AND holder = $2";

fn skip_child(url: &str, actor: &str, seconds: f64) -> Result<()> {
    let app = format!("lhb-{actor}");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let (client, connection) = rt.block_on(tokio_postgres::connect(
        &named(url, &app),
        tokio_postgres::NoTls,
    ))?;
    rt.spawn(connection);
    let pids = backend_pids(url, &app).unwrap_or_default();
    rt.block_on(async {
        let claim = client.prepare(SKIP_CLAIM).await?;
        let settle = client.prepare(SKIP_SETTLE).await?;
        println!("ready");
        let mut line = String::new();
        std::io::stdin().read_line(&mut line)?;
        let (cpu0, server0) = (own_cpu_ns(), backends_cpu_ns(&pids));
        let (start, mut claims, mut lat) = (Instant::now(), 0usize, Vec::new());
        while start.elapsed().as_secs_f64() < seconds {
            let at = Instant::now();
            let Some(row) = client.query_opt(&claim, &[&actor, &3_600_001i64]).await? else {
                break;
            };
            lat.push(at.elapsed().as_micros().to_string());
            let id: i64 = row.get(0);
            client.execute(&settle, &[&id, &actor]).await?;
            claims += 1;
        }
        let secs = start.elapsed().as_secs_f64();
        let cpu = own_cpu_ns().zip(cpu0).map(|(b, a)| b - a);
        let server = backends_cpu_ns(&pids).zip(server0).map(|(b, a)| b - a);
        println!("claims {claims} secs {secs} retries 0 calls {}", claims * 2);
        println!("lat {}", lat.join(","));
        if let (Some(c), Some(s)) = (cpu, server) {
            println!("cpu {c} {s}");
        }
        println!("trips {claims} {claims}");
        Ok::<_, Box<dyn std::error::Error>>(())
    })
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
        return child(url, prefix, tasks, seconds);
    }
    if let Some(mode @ ("--next" | "--skip")) = args.get(1).map(String::as_str) {
        let url = args.get(2).ok_or("needs a URL")?;
        let actor = args.get(3).ok_or("needs ACTOR")?;
        let seconds: f64 = args.get(4).ok_or("needs SECONDS")?.parse()?;
        let profile = args.get(5).map(String::as_str) == Some("profile");
        return if mode == "--next" {
            next_child(url, actor, seconds, profile)
        } else {
            skip_child(url, actor, seconds)
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
            seed_queues(&url, backlog)?;
            return profile(&base, &url, &counts, seconds);
        }
        if flag("--queue") {
            seed_queues(&url, backlog)?;
            return contention(&base, &url, &counts, repeat, seconds);
        }
        if !flag("--contention") {
            run(&url)?;
        }
        own_tasks(&base, &url, seconds)?;
        seed_queues(&url, backlog)?;
        contention(&base, &url, &counts, repeat, seconds)
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

/// What the processes of one measurement printed, added up.
#[derive(Default)]
struct Run {
    /// Claims per second, all processes together.
    rate: f64,
    retries_per_mille: f64,
    p50: f64,
    p99: f64,
    claims: u64,
    /// CPU nanoseconds of the host processes and of their server processes,
    /// when readable.
    cpu: Option<(u64, u64)>,
    /// Round trips of claim-next and of settle, all processes together.
    trips: (u64, u64),
    /// One row per claim-next, from `--profile` (see [`turn_line`]).
    turns: Vec<[u64; 7]>,
}

impl Run {
    /// Host and server CPU per claim (the claim and its settle), in µs.
    fn cpu_per_claim(&self) -> String {
        match self.cpu {
            Some((c, s)) if self.claims > 0 => format!(
                "{:.0} + {:.0} µs",
                c as f64 / 1e3 / self.claims as f64,
                s as f64 / 1e3 / self.claims as f64
            ),
            _ => "n/a".into(),
        }
    }

    fn trips_per_claim(&self) -> String {
        let n = self.claims.max(1) as f64;
        format!(
            "{:.2} + {:.2}",
            self.trips.0 as f64 / n,
            self.trips.1 as f64 / n
        )
    }
}

/// Starts `procs` copies of this program with `args(p)`, waits for each to
/// say `ready`, starts them together, and adds up what they print.
fn processes(procs: usize, args: impl Fn(usize) -> Vec<String>) -> Result<Run> {
    let exe = std::env::current_exe()?;
    let mut children = Vec::new();
    for p in 0..procs {
        let mut c = Command::new(&exe)
            .args(args(p))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()?;
        let mut out = BufReader::new(c.stdout.take().ok_or("child stdout")?);
        let mut line = String::new();
        out.read_line(&mut line)?;
        if line.trim() != "ready" {
            return Err(format!("a host process said {line:?}").into());
        }
        children.push((c, out));
    }
    for (c, _) in &mut children {
        use std::io::Write;
        writeln!(c.stdin.take().ok_or("child stdin")?, "go")?;
    }
    let mut run = Run::default();
    let (mut retries, mut calls) = (0u64, 0u64);
    let mut lat = Vec::new();
    let mut cpu = Some((0u64, 0u64));
    let mut saw_cpu = false;
    for (mut c, out) in children {
        for line in out.lines() {
            let line = line?;
            let w: Vec<&str> = line.split(' ').collect();
            match w.as_slice() {
                ["claims", n, "secs", secs, "retries", r, rest @ ..] => {
                    let n = n.parse::<u64>()?;
                    run.claims += n;
                    run.rate += n as f64 / secs.parse::<f64>()?;
                    retries += r.parse::<u64>()?;
                    calls += match rest {
                        ["calls", c] => c.parse::<u64>()?,
                        _ => n,
                    };
                }
                ["lat", list] => {
                    for v in list.split(',').filter(|v| !v.is_empty()) {
                        lat.push(Duration::from_micros(v.parse()?));
                    }
                }
                ["cpu", c, s] => {
                    saw_cpu = true;
                    cpu = cpu.map(|(a, b)| {
                        (
                            a + c.parse::<u64>().unwrap_or(0),
                            b + s.parse::<u64>().unwrap_or(0),
                        )
                    });
                }
                ["trips", a, b] => {
                    run.trips.0 += a.parse::<u64>()?;
                    run.trips.1 += b.parse::<u64>()?;
                }
                ["turn", rest @ ..] if rest.len() == 7 => {
                    let mut row = [0u64; 7];
                    for (slot, v) in row.iter_mut().zip(rest) {
                        *slot = v.parse()?;
                    }
                    run.turns.push(row);
                }
                _ => {}
            }
        }
        if !c.wait()?.success() {
            return Err("a host process failed".into());
        }
    }
    run.cpu = cpu.filter(|_| saw_cpu);
    if !lat.is_empty() {
        (run.p50, run.p99) = percentiles(lat);
    }
    run.retries_per_mille = retries as f64 * 1000.0 / calls.max(1) as f64;
    Ok(run)
}

/// The tasks-of-their-own table: each process claims tasks it opened
/// beforehand, at 1, 2, 4 and 8 processes.
fn own_tasks(base: &str, url: &str, seconds: f64) -> Result<()> {
    println!("Tasks of their own: each process claims tasks it opened beforehand.");
    println!();
    println!("| host processes | claims/s | retries / 1,000 calls |");
    println!("| --- | --- | --- |");
    for procs in [1usize, 2, 4, 8] {
        let run = processes(procs, |p| {
            vec![
                base.to_owned(),
                "--child".into(),
                url.to_owned(),
                format!("x{procs}-{p}"),
                "1500".into(),
                seconds.to_string(),
            ]
        })?;
        println!(
            "| {procs} | {:.0} | {:.1} |",
            run.rate, run.retries_per_mille
        );
    }
    println!();
    Ok(())
}

/// Seeds the shared queue (Leasehold's, and the plain table, with 8 times
/// as many) with `backlog` open tasks, enough that no run empties it.
fn seed_queues(url: &str, backlog: usize) -> Result<()> {
    let engine = builder()?.postgres(url)?;
    let t = engine.tenant("queue")?;
    seed(&t, "q", backlog)?;
    sql(
        url,
        &"CREATE TABLE plain_queue (id bigserial PRIMARY KEY, state text NOT NULL, \
         holder text, lease_until bigint, priority int NOT NULL, created_at bigint NOT NULL); \
         CREATE INDEX plain_queue_open ON plain_queue (priority, created_at, id) \
         WHERE state = 'open'; \
         INSERT INTO plain_queue (state, priority, created_at) \
         SELECT 'open', 1, g FROM generate_series(1, 8 * $BACKLOG) g; ANALYZE plain_queue;"
            .replace("$BACKLOG", &backlog.to_string()),
    )
}

/// One measurement of the shared queue: `mode` is `--next` (Leasehold) or
/// `--skip` (the plain table); `extra` goes after the child's arguments.
fn queue_run(
    base: &str,
    url: &str,
    mode: &str,
    procs: usize,
    seconds: f64,
    tag: &str,
    extra: &[&str],
) -> Result<Run> {
    processes(procs, |p| {
        let mut a = vec![
            base.to_owned(),
            mode.to_owned(),
            url.to_owned(),
            format!("{tag}{procs}-{p}"),
            seconds.to_string(),
        ];
        a.extend(extra.iter().map(|s| (*s).to_owned()));
        a
    })
}

/// The shared-queue table: at each process count, Leasehold's claim-next
/// then settle beside the plain SKIP LOCKED queue, `repeat` times in turn.
fn contention(base: &str, url: &str, counts: &[usize], repeat: usize, seconds: f64) -> Result<()> {
    println!(
        "One shared queue: claim-next with a lease, then settle; claims/s, and each claim's latency."
    );
    println!(
        "CPU per claim is the claim and its settle: the host processes' + their server processes'."
    );
    println!();
    println!(
        "| processes | Leasehold claims/s | p50 | p99 | retries / 1,000 calls | round trips (claim-next + settle) | CPU / claim | SKIP LOCKED claims/s | p50 | p99 | CPU / claim | Leasehold / SKIP LOCKED |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |");
    for round in 0..repeat {
        for &procs in counts {
            let tag = format!("r{round}w");
            let l = queue_run(base, url, "--next", procs, seconds, &tag, &[])?;
            let k = queue_run(base, url, "--skip", procs, seconds, &tag, &[])?;
            println!(
                "| {procs} | {:.0} | {:.0} µs | {:.0} µs | {:.1} | {} | {} | {:.0} | {:.0} µs | {:.0} µs | {} | {:.2} |",
                l.rate,
                l.p50,
                l.p99,
                l.retries_per_mille,
                l.trips_per_claim(),
                l.cpu_per_claim(),
                k.rate,
                k.p50,
                k.p99,
                k.cpu_per_claim(),
                l.rate / k.rate.max(1.0)
            );
        }
    }
    println!();
    Ok(())
}

fn median(mut v: Vec<u64>) -> u64 {
    v.sort_unstable();
    v.get(v.len() / 2).copied().unwrap_or(0)
}

/// Where a claim-next's turn goes, from the backend's round trips, at each
/// process count, with the server's `COMMIT` waiting for its WAL flush (as
/// shipped) and, beside it, not waiting (`synchronous_commit = off`, for
/// this measurement only): the difference is the flush.
fn profile(base: &str, url: &str, counts: &[usize], seconds: f64) -> Result<()> {
    println!(
        "Where a claim-next's turn goes (medians over every claim, µs; see pg_bench.rs, turn_line):"
    );
    println!();
    println!(
        "| processes | WAL flush at COMMIT | claims/s | first round trip (waits for the turn) | reads after it | commit round trip | turn held (host's view) | of it, host's own time | before the first round trip |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- | --- | --- |");
    let no_flush = url.replace(
        "options=-c%20search_path",
        "options=-c%20synchronous_commit%3Doff%20-c%20search_path",
    );
    for &procs in counts {
        for (label, u) in [("waited for", url), ("not waited for", no_flush.as_str())] {
            let run = queue_run(base, u, "--next", procs, seconds, "p", &["profile"])?;
            let col = |i: usize| median(run.turns.iter().map(|r| r[i]).collect());
            let reads =
                run.turns.iter().map(|r| r[2]).sum::<u64>() as f64 / run.turns.len().max(1) as f64;
            println!(
                "| {procs} | {label} | {:.0} | {} | {} ({reads:.1} trips) | {} | {} | {} | {} |",
                run.rate,
                col(0),
                col(1),
                col(3),
                col(4),
                col(5),
                col(6)
            );
        }
    }
    println!();
    Ok(())
}

/// Runs `sql` on one plain connection.
fn sql(url: &str, sql: &str) -> Result<()> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async {
        let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls).await?;
        tokio::spawn(connection);
        client.batch_execute(sql).await?;
        Ok::<_, Box<dyn std::error::Error>>(())
    })
}
