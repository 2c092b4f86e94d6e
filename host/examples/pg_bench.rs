//! Leasehold on PostgreSQL (BENCHMARKS.md, "PostgreSQL"): per-call latency
//! of claim, open, queue and claim-due; round trips per verb; then, from 1,
//! 2, 4 and 8 host processes on one database: claims/s on tasks of their
//! own, and claim-next with a lease then settle on one shared queue, beside
//! a plain SQL queue claimed with `FOR UPDATE SKIP LOCKED` (as River and
//! graphile-worker do) on a table of its own.
//!
//! `cargo run --release -p leasehold-host --example pg_bench -- URL [--contention | --disjoint [ROUNDS]]`
//!
//! URL names a database the benchmark may create schemas in; each run makes
//! a fresh schema and drops it at the end. `--contention` runs only the
//! multi-process tables; `--disjoint` only disjoint work from 4 and 8
//! threads of one process (calls/s and retries per 1,000 calls). The host processes are this program again (`… --
//! URL --child|--next|--skip …`), each one engine (or one plain connection)
//! with one calling thread.

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
    let engine = Engine::builder().postgres(url)?;
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

/// One host process on the shared queue: claim-next with a lease, then
/// settle, until the queue is empty or `seconds` passed. Prints `claims N
/// secs S retries N calls N` and `lat` with each claim-next's microseconds.
fn next_child(url: &str, actor: &str, seconds: f64) -> Result<()> {
    let engine = Engine::builder().postgres(url)?;
    let t = engine.tenant("queue")?;
    t.open_count()?;
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
    let (start, mut claims, mut calls, mut lat) = (Instant::now(), 0usize, 0usize, Vec::new());
    while start.elapsed().as_secs_f64() < seconds {
        let at = Instant::now();
        calls += 1;
        let Some(task) = t.claim_next(&q, Some(lease))? else {
            break;
        };
        lat.push(at.elapsed().as_micros().to_string());
        calls += 1;
        t.settle(&task.id, leasehold_host::Settlement::Completed, Some(actor))?;
        claims += 1;
    }
    println!(
        "claims {claims} secs {} retries {} calls {calls}",
        start.elapsed().as_secs_f64(),
        engine.conflict_retries()
    );
    println!("lat {}", lat.join(","));
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
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async {
        let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls).await?;
        tokio::spawn(connection);
        let claim = client.prepare(SKIP_CLAIM).await?;
        let settle = client.prepare(SKIP_SETTLE).await?;
        println!("ready");
        let mut line = String::new();
        std::io::stdin().read_line(&mut line)?;
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
        println!(
            "claims {claims} secs {} retries 0 calls {}",
            start.elapsed().as_secs_f64(),
            claims * 2
        );
        println!("lat {}", lat.join(","));
        Ok::<_, Box<dyn std::error::Error>>(())
    })
}

/// Disjoint work in one process (`--disjoint`): `threads` threads each open,
/// claim and settle tasks of their own beside 300 others, as the tests'
/// `postgres::writes_of_different_tasks_from_*_threads_seldom_conflict` do,
/// for several rounds; answers (calls/s, retries per 1,000 calls) of each.
fn disjoint_round(url: &str, threads: usize, round: usize) -> Result<(f64, f64)> {
    let engine = Engine::builder().pool_size(threads).postgres(url)?;
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
        return if mode == "--next" {
            next_child(url, actor, seconds)
        } else {
            skip_child(url, actor, seconds)
        };
    }
    let contention_only = args.iter().any(|a| a == "--contention");

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
    let disjoint_rounds = args
        .iter()
        .position(|a| a == "--disjoint")
        .map(|i| args.get(i + 1).and_then(|n| n.parse().ok()).unwrap_or(3));
    let out = if let Some(rounds) = disjoint_rounds {
        disjoint(&url, rounds)
    } else if contention_only {
        contention(&base, &url)
    } else {
        run(&url).and_then(|()| contention(&base, &url))
    };
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
    let engine = Engine::builder().postgres(url)?;
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

/// Starts `procs` copies of this program with `args(p)`, waits for each to
/// say `ready`, starts them together, and adds up what they print: (claims
/// per second, retries per 1,000 calls, p50 µs, p99 µs).
fn processes(procs: usize, args: impl Fn(usize) -> Vec<String>) -> Result<(f64, f64, f64, f64)> {
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
    let (mut rate, mut retries, mut calls) = (0f64, 0u64, 0u64);
    let mut lat = Vec::new();
    for (mut c, out) in children {
        for line in out.lines() {
            let line = line?;
            let w: Vec<&str> = line.split(' ').collect();
            match w.as_slice() {
                ["claims", n, "secs", secs, "retries", r, rest @ ..] => {
                    let n = n.parse::<u64>()?;
                    rate += n as f64 / secs.parse::<f64>()?;
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
                _ => {}
            }
        }
        if !c.wait()?.success() {
            return Err("a host process failed".into());
        }
    }
    let (p50, p99) = if lat.is_empty() {
        (0.0, 0.0)
    } else {
        percentiles(lat)
    };
    Ok((
        rate,
        retries as f64 * 1000.0 / calls.max(1) as f64,
        p50,
        p99,
    ))
}

/// The multi-process tables: tasks of their own, then one shared queue on
/// Leasehold and on the plain SQL queue, at 1, 2, 4 and 8 processes.
fn contention(base: &str, url: &str) -> Result<()> {
    let seconds = 3.0;
    let counts = [1usize, 2, 4, 8];
    println!("Tasks of their own: each process claims tasks it opened beforehand.");
    println!();
    println!("| host processes | claims/s | retries / 1,000 calls |");
    println!("| --- | --- | --- |");
    for procs in counts {
        let (rate, retries, _, _) = processes(procs, |p| {
            vec![
                base.to_owned(),
                "--child".into(),
                url.to_owned(),
                format!("x{procs}-{p}"),
                "1500".into(),
                seconds.to_string(),
            ]
        })?;
        println!("| {procs} | {rate:.0} | {retries:.1} |");
    }
    println!();

    // The shared queue: enough open tasks that no run empties it.
    let engine = Engine::builder().postgres(url)?;
    let t = engine.tenant("queue")?;
    let backlog = 24_000;
    seed(&t, "q", backlog)?;
    sql(
        url,
        "CREATE TABLE plain_queue (id bigserial PRIMARY KEY, state text NOT NULL, \
         holder text, lease_until bigint, priority int NOT NULL, created_at bigint NOT NULL); \
         CREATE INDEX plain_queue_open ON plain_queue (priority, created_at, id) \
         WHERE state = 'open'; \
         INSERT INTO plain_queue (state, priority, created_at) \
         SELECT 'open', 1, g FROM generate_series(1, 200000) g; ANALYZE plain_queue;",
    )?;
    println!(
        "One shared queue: claim-next with a lease, then settle; claims/s, and each claim's latency."
    );
    println!();
    println!(
        "| processes | Leasehold claims/s | p50 | p99 | retries / 1,000 calls | SKIP LOCKED claims/s | p50 | p99 |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- | --- |");
    for procs in counts {
        let (rate, retries, p50, p99) = processes(procs, |p| {
            vec![
                base.to_owned(),
                "--next".into(),
                url.to_owned(),
                format!("w{procs}-{p}"),
                seconds.to_string(),
            ]
        })?;
        let (s_rate, _, s_p50, s_p99) = processes(procs, |p| {
            vec![
                base.to_owned(),
                "--skip".into(),
                url.to_owned(),
                format!("w{procs}-{p}"),
                seconds.to_string(),
            ]
        })?;
        println!(
            "| {procs} | {rate:.0} | {p50:.0} µs | {p99:.0} µs | {retries:.1} | {s_rate:.0} | {s_p50:.0} µs | {s_p99:.0} µs |"
        );
    }
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
