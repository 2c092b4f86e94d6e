//! The benchmark's worker processes and how the parent drives them: each
//! is this program again (`pg_bench BASE --child|--next|--skip …`) or a
//! peer's Node worker (peers/worker.mjs), says `ready`, works from `go`
//! until `stop` (or, for `--child`, its own bound), prints what it did, and
//! exits. The parent reads CPU from `/proc` around the window (cpu.rs) and
//! adds up what the workers print. Also the two tables that use only these
//! processes: tasks of their own, and Leasehold's shared queue beside the
//! plain SKIP LOCKED one.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use leasehold_host::QueueQuery;

use crate::cpu::{self, Server, Split};
use crate::turns::{trips, turn_line};
use crate::{Result, builder, percentiles, seed, sql, task};

/// Reads `go`, then answers a flag that turns true when the next line
/// (`stop`) or the end of stdin arrives.
fn await_go() -> Result<Arc<AtomicBool>> {
    let mut line = String::new();
    std::io::stdin().read_line(&mut line)?;
    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    std::thread::spawn(move || {
        let mut line = String::new();
        let _ = std::io::stdin().read_line(&mut line);
        flag.store(true, Ordering::Relaxed);
    });
    Ok(stop)
}

/// One host process: opens `tasks` tasks of its own (untimed), then claims
/// them for at most `seconds`, printing `claims N secs S retries N`.
pub fn child(url: &str, prefix: &str, tasks: usize, seconds: f64) -> Result<()> {
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

/// One host process on the shared queue: claim-next with a lease, then
/// settle, from `go` until `stop` or an empty queue (`empty`). Prints
/// `claims N secs S retries N calls N`, `lat` with each claim-next's
/// microseconds and `trips` with its round trips of claim-next and of
/// settle; with `profile`, a `turn` line per claim-next (see [`turn_line`]).
pub fn next_child(url: &str, actor: &str, profile: bool) -> Result<()> {
    if profile {
        trips::Collector::install();
    }
    let engine = builder()?.postgres(url)?;
    let t = engine.tenant("queue")?;
    t.open_count()?;
    println!("ready");
    let stop = await_go()?;
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
    let retries = engine.conflict_retries();
    let (mut next_trips, mut settle_trips) = (0u64, 0u64);
    let mut turns = Vec::new();
    let (start, mut claims, mut calls, mut lat) = (Instant::now(), 0usize, 0usize, Vec::new());
    while !stop.load(Ordering::Relaxed) {
        let at = Instant::now();
        let before = engine.round_trips().unwrap_or(0);
        calls += 1;
        let Some(task) = t.claim_next(&q, Some(lease))? else {
            println!("empty");
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
    println!(
        "claims {claims} secs {secs} retries {} calls {calls}",
        engine.conflict_retries() - retries
    );
    println!("lat {}", lat.join(","));
    println!("trips {next_trips} {settle_trips}");
    for l in turns {
        println!("{l}");
    }
    Ok(())
}

/// One host process on the shared queue as a batching worker does it:
/// `settle-and-claim` of `count` with a lease, each batch's no-op jobs
/// acknowledged with the next fetch, from `go` until `stop` or an empty
/// queue. Prints what [`next_child`] prints, a claim counted when its task
/// is settled; `trips` holds every call's round trips, the second number 0.
pub fn batch_child(url: &str, actor: &str, count: u32) -> Result<()> {
    let engine = builder()?.postgres(url)?;
    let t = engine.tenant("queue")?;
    t.open_count()?;
    println!("ready");
    let stop = await_go()?;
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
    let retries = engine.conflict_retries();
    let mut trips = 0u64;
    let (start, mut claims, mut calls, mut lat) = (Instant::now(), 0usize, 0usize, Vec::new());
    let mut done: Vec<leasehold_host::Finished> = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        let at = Instant::now();
        let before = engine.round_trips().unwrap_or(0);
        calls += 1;
        let answer = t.settle_and_claim(&done, &q, Some(lease), count)?;
        lat.push(at.elapsed().as_micros().to_string());
        trips += engine.round_trips().unwrap_or(0) - before;
        claims += answer
            .settled
            .iter()
            .filter(|a| **a == leasehold_host::SettleAnswer::Settled)
            .count();
        if answer.claimed.is_empty() {
            println!("empty");
            break;
        }
        done = answer
            .claimed
            .into_iter()
            .map(|task| leasehold_host::Finished {
                id: task.id,
                settlement: leasehold_host::Settlement::Completed,
                decision: None,
            })
            .collect();
    }
    let secs = start.elapsed().as_secs_f64();
    // What the last batch finished is settled after the window: a worker
    // stopping leaves nothing held.
    t.settle_and_claim(&done, &q, None, 0)?;
    println!(
        "claims {claims} secs {secs} retries {} calls {calls}",
        engine.conflict_retries() - retries
    );
    println!("lat {}", lat.join(","));
    println!("trips {trips} 0");
    Ok(())
}

/// The plain SQL queue: each claim one autocommitted statement at READ
/// COMMITTED, skipping rows other claimers hold locked.
const SKIP_CLAIM: &str = "UPDATE plain_queue SET state = 'claimed', holder = $1, lease_until = $2 \
     WHERE id = (SELECT id FROM plain_queue WHERE state = 'open' \
     ORDER BY priority, created_at, id LIMIT 1 FOR UPDATE SKIP LOCKED) RETURNING id";
const SKIP_SETTLE: &str =
    "UPDATE plain_queue SET state = 'done', lease_until = NULL WHERE id = $1 AND holder = $2";

/// The plain queue's table, in the database or schema `url` names.
pub const SKIP_TABLE: &str = "CREATE TABLE IF NOT EXISTS plain_queue (id bigserial PRIMARY KEY, \
     state text NOT NULL, holder text, lease_until bigint, priority int NOT NULL, \
     created_at bigint NOT NULL); \
     CREATE INDEX IF NOT EXISTS plain_queue_open ON plain_queue (priority, created_at, id) \
     WHERE state = 'open';";

/// One process on the plain queue, as [`next_child`] on Leasehold's.
pub fn skip_child(url: &str, actor: &str) -> Result<()> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let (client, connection) = rt.block_on(tokio_postgres::connect(url, tokio_postgres::NoTls))?;
    rt.spawn(connection);
    rt.block_on(async {
        let claim = client.prepare(SKIP_CLAIM).await?;
        let settle = client.prepare(SKIP_SETTLE).await?;
        println!("ready");
        let stop = await_go()?;
        let (start, mut claims, mut lat) = (Instant::now(), 0usize, Vec::new());
        while !stop.load(Ordering::Relaxed) {
            let at = Instant::now();
            let Some(row) = client.query_opt(&claim, &[&actor, &3_600_001i64]).await? else {
                println!("empty");
                break;
            };
            lat.push(at.elapsed().as_micros().to_string());
            let id: i64 = row.get(0);
            client.execute(&settle, &[&id, &actor]).await?;
            claims += 1;
        }
        let secs = start.elapsed().as_secs_f64();
        println!("claims {claims} secs {secs} retries 0 calls {}", claims * 2);
        println!("lat {}", lat.join(","));
        println!("trips {claims} {claims}");
        Ok::<_, Box<dyn std::error::Error>>(())
    })
}

/// What the processes of one measurement printed, added up, with the CPU
/// the parent read around the window.
#[derive(Default)]
pub struct Run {
    /// Jobs per second, all processes together.
    pub rate: f64,
    pub retries_per_mille: f64,
    pub p50: f64,
    pub p99: f64,
    /// Jobs done in the window.
    pub claims: u64,
    /// Jobs done by the time the processes exited (a peer finishes what it
    /// held when told to stop).
    pub total: u64,
    /// Whether a process found the queue empty.
    pub empty: bool,
    /// CPU seconds of the window, when the server's processes are readable.
    pub cpu: Option<Split>,
    /// The server processes that served the workers (gone once this is
    /// answered).
    pub serving: Vec<u32>,
    /// Round trips of claim-next and of settle, all processes together.
    pub trips: (u64, u64),
    /// One row per claim-next, from `--profile` (see [`turn_line`]).
    pub turns: Vec<[u64; 7]>,
}

impl Run {
    /// Worker and server CPU per claim (the claim and its settle), in µs.
    pub fn cpu_per_claim(&self) -> String {
        match self.cpu {
            Some(c) if self.claims > 0 => format!(
                "{:.0} + {:.0} µs",
                c.workers * 1e6 / self.claims as f64,
                c.backends * 1e6 / self.claims as f64
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

/// Worker processes, started and waiting for `go`.
pub struct Workers {
    children: Vec<(Child, Option<ChildStdin>, BufReader<ChildStdout>)>,
}

impl Workers {
    /// Starts `procs` processes made by `command(p)` and waits for each to
    /// say `ready`.
    pub fn start(procs: usize, command: impl Fn(usize) -> Command) -> Result<Workers> {
        let mut children = Vec::new();
        for p in 0..procs {
            let mut c = command(p)
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .spawn()?;
            let mut out = BufReader::new(c.stdout.take().ok_or("child stdout")?);
            let mut line = String::new();
            out.read_line(&mut line)?;
            if line.trim() != "ready" {
                let _ = c.kill();
                return Err(format!("a worker process said {line:?}").into());
            }
            let stdin = c.stdin.take();
            children.push((c, stdin, out));
        }
        Ok(Workers { children })
    }

    /// Copies of this program with `args(p)`.
    pub fn this(procs: usize, args: impl Fn(usize) -> Vec<String>) -> Result<Workers> {
        let exe = std::env::current_exe()?;
        Workers::start(procs, |p| {
            let mut c = Command::new(&exe);
            c.args(args(p));
            c
        })
    }

    pub fn pids(&self) -> Vec<u32> {
        self.children.iter().map(|(c, _, _)| c.id()).collect()
    }

    fn say(&mut self, word: &str) {
        for (_, stdin, _) in &mut self.children {
            // A process that already ended (its own bound, or an empty
            // queue) has nothing left to hear.
            if let Some(s) = stdin {
                let _ = writeln!(s, "{word}").and_then(|()| s.flush());
            }
        }
    }

    /// Starts them together, lets them work `seconds`, reading CPU around
    /// the window when `server` is readable, stops them, and adds up what
    /// they print.
    pub fn window(mut self, seconds: f64, server: Option<&Server>) -> Result<Run> {
        let pids = self.pids();
        let before = cpu::sample(server, &pids);
        self.say("go");
        std::thread::sleep(Duration::from_secs_f64(seconds));
        let after = cpu::sample(server, &pids);
        let (split, serving) = cpu::split(&before, &after, &pids);
        self.say("stop");
        for (_, stdin, _) in &mut self.children {
            stdin.take();
        }
        let mut run = self.finish()?;
        if server.is_some() {
            run.cpu = Some(split);
            run.serving = serving;
        }
        Ok(run)
    }

    /// Reads what every process prints until it exits.
    fn finish(self) -> Result<Run> {
        let mut run = Run::default();
        let (mut retries, mut calls) = (0u64, 0u64);
        let mut lat = Vec::new();
        let mut totals = 0u64;
        let mut saw_total = false;
        for (mut c, _, out) in self.children {
            for line in out.lines() {
                let line = line?;
                let w: Vec<&str> = line.split(' ').collect();
                match w.as_slice() {
                    ["claims", n, "secs", secs, "retries", r, rest @ ..] => {
                        let n = n.parse::<u64>()?;
                        run.claims += n;
                        run.rate += n as f64 / secs.parse::<f64>()?.max(1e-9);
                        retries += r.parse::<u64>()?;
                        calls += match rest {
                            ["calls", c] => c.parse::<u64>()?,
                            _ => n,
                        };
                    }
                    ["total", n] => {
                        saw_total = true;
                        totals += n.parse::<u64>()?;
                    }
                    ["empty"] => run.empty = true,
                    ["lat", list] => {
                        for v in list.split(',').filter(|v| !v.is_empty()) {
                            lat.push(Duration::from_micros(v.parse()?));
                        }
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
                return Err("a worker process failed".into());
            }
        }
        run.total = if saw_total { totals } else { run.claims };
        if !lat.is_empty() {
            (run.p50, run.p99) = percentiles(lat);
        }
        run.retries_per_mille = retries as f64 * 1000.0 / calls.max(1) as f64;
        Ok(run)
    }
}

/// The tasks-of-their-own table: each process claims tasks it opened
/// beforehand, at 1, 2, 4 and 8 processes.
pub fn own_tasks(base: &str, url: &str, seconds: f64) -> Result<()> {
    println!("Tasks of their own: each process claims tasks it opened beforehand.");
    println!();
    println!("| host processes | claims/s | retries / 1,000 calls |");
    println!("| --- | --- | --- |");
    for procs in [1usize, 2, 4, 8] {
        let workers = Workers::this(procs, |p| {
            vec![
                base.to_owned(),
                "--child".into(),
                url.to_owned(),
                format!("x{procs}-{p}"),
                "1500".into(),
                seconds.to_string(),
            ]
        })?;
        // Each process ends at its own bound; the window only starts them.
        let run = workers.window(0.0, None)?;
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
pub fn seed_queues(url: &str, backlog: usize) -> Result<()> {
    let engine = builder()?.postgres(url)?;
    let t = engine.tenant("queue")?;
    seed(&t, "q", backlog)?;
    sql(
        url,
        &format!(
            "{SKIP_TABLE} INSERT INTO plain_queue (state, priority, created_at) \
             SELECT 'open', 1, g FROM generate_series(1, 8 * {backlog}) g; ANALYZE plain_queue;"
        ),
    )
}

/// One measurement of the shared queue: `mode` is `--next` (Leasehold) or
/// `--skip` (the plain table); `extra` goes after the child's arguments.
pub fn queue_run(
    base: &str,
    url: &str,
    mode: &str,
    procs: usize,
    seconds: f64,
    tag: &str,
    extra: &[&str],
) -> Result<Run> {
    let server = Server::find(url);
    let workers = Workers::this(procs, |p| {
        let mut a = vec![
            base.to_owned(),
            mode.to_owned(),
            url.to_owned(),
            format!("{tag}{procs}-{p}"),
        ];
        a.extend(extra.iter().map(|s| (*s).to_owned()));
        a
    })?;
    workers.window(seconds, server.as_ref())
}

/// The shared-queue table: at each process count, Leasehold's claim-next
/// then settle beside the plain SKIP LOCKED queue, `repeat` times in turn.
pub fn contention(
    base: &str,
    url: &str,
    counts: &[usize],
    repeat: usize,
    seconds: f64,
) -> Result<()> {
    println!(
        "One shared queue: claim-next with a lease, then settle; claims/s, and each claim's latency."
    );
    println!(
        "CPU per claim is the claim and its settle: the worker processes' + their server processes'."
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
