//! Leasehold on PostgreSQL (BENCHMARKS.md, "PostgreSQL"): per-call latency
//! of claim, open, queue and claim-due; claims/s from 1, 2 and 4 host
//! processes on one database; retries per 1,000 calls; round trips per verb.
//!
//! `cargo run --release -p leasehold-host --example pg_bench -- URL`
//!
//! URL names a database the benchmark may create schemas in; each run makes
//! a fresh schema and drops it at the end. The host processes are this
//! program again (`… -- URL --child SCHEMA_URL PREFIX TASKS SECONDS`), each one
//! engine with one calling thread, claiming tasks it opened beforehand.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use leasehold_host::{
    Engine, Error, OnExpiry, Phase, Priority, QueueQuery, Task, TaskState, Timer,
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

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.get(1).map(String::as_str) == Some("--child") {
        let url = args.get(2).ok_or("--child needs a URL")?;
        let prefix = args.get(3).ok_or("--child needs PREFIX")?;
        let tasks: usize = args.get(4).ok_or("--child needs TASKS")?.parse()?;
        let seconds: f64 = args.get(5).ok_or("--child needs SECONDS")?.parse()?;
        return child(url, prefix, tasks, seconds);
    }
    let base = args
        .first()
        .ok_or("usage: pg_bench URL (a database the benchmark may create schemas in)")?
        .clone();
    let schema = format!("bench_{}", std::process::id());
    admin(&base, &format!("CREATE SCHEMA {schema}"))?;
    let url = schema_url(&base, &schema);
    let out = run(&base, &url);
    admin(&base, &format!("DROP SCHEMA {schema} CASCADE"))?;
    out
}

fn run(base: &str, url: &str) -> Result<()> {
    let engine = Engine::builder().postgres(url)?;
    let t = engine.tenant("bench")?;
    let n = 2000;
    // A backlog, opened from four threads so seeding takes seconds.
    let backlog = 4000;
    std::thread::scope(|s| -> Result<()> {
        let handles: Vec<_> = (0..4)
            .map(|w| {
                let t = &t;
                s.spawn(move || -> std::result::Result<(), Error> {
                    for i in (w..backlog).step_by(4) {
                        t.open(&task(format!("b{i:06}"), i as i64))?;
                    }
                    Ok(())
                })
            })
            .collect();
        for h in handles {
            h.join().map_err(|_| "a seeding thread panicked")??;
        }
        Ok(())
    })?;
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

    // Claims/s from several host processes, each claiming tasks of its own.
    let seconds = 3.0;
    println!("| host processes | claims/s | retries / 1,000 calls |");
    println!("| --- | --- | --- |");
    for procs in [1usize, 2, 4] {
        let exe = std::env::current_exe()?;
        let mut children = Vec::new();
        for p in 0..procs {
            let mut c = Command::new(&exe)
                .args([
                    base,
                    "--child",
                    url,
                    &format!("x{procs}-{p}"),
                    "10000",
                    &seconds.to_string(),
                ])
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
        let (mut claims, mut rate, mut retries) = (0u64, 0f64, 0u64);
        for (mut c, out) in children {
            for line in out.lines() {
                let line = line?;
                let w: Vec<&str> = line.split(' ').collect();
                if let ["claims", n, "secs", secs, "retries", r] = w.as_slice() {
                    let n = n.parse::<u64>()?;
                    claims += n;
                    rate += n as f64 / secs.parse::<f64>()?;
                    retries += r.parse::<u64>()?;
                }
            }
            if !c.wait()?.success() {
                return Err("a host process failed".into());
            }
        }
        println!(
            "| {procs} | {rate:.0} | {:.1} |",
            retries as f64 * 1000.0 / claims.max(1) as f64
        );
    }
    Ok(())
}
