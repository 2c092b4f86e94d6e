//! One shared queue through the service (BENCHMARKS.md, "One shared queue,
//! with calls of one line grouped on each host", its "Through the service"
//! table): reviewers over HTTP, each in a loop of
//! `claim-next` with a lease and `settle`, against 1 or 2 servers on one
//! PostgreSQL database, at 1 and 16 reviewers per server; claims per second
//! and each claim-next's latency, and the line groups each server made
//! (calls per commit), with line groups on (the default) and, beside them,
//! off (every claim-next committing alone).
//!
//! ```text
//! cargo run --release -p leasehold-serve --example queue_bench -- postgres://… [SECONDS]
//! ```
//!
//! Each server is the service in this process on a port of its own, with
//! an engine and a connection pool of its own, as two `leasehold serve`
//! processes would have; the reviewers are blocking reqwest clients on
//! threads of their own, one keep-alive connection each. The database
//! gets a fresh schema, dropped at the end.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use leasehold_host::{Engine, EngineBuilder, OnExpiry, Priority, Task, TaskState};
use leasehold_serve::{Config, Credentials, Options, Principal, Scope, Server, TokenTable};

fn task(id: String) -> Task {
    Task {
        id,
        run: "bench".to_owned(),
        case: None,
        kind: "approve".to_owned(),
        justification: r#"{"amount":100}"#.to_owned(),
        candidate_roles: Vec::new(),
        assignee: None,
        lease_until: None,
        priority: Priority::Normal,
        state: TaskState::Open,
        on_expiry: OnExpiry::Deny,
        escalate_to: Vec::new(),
        excluded_actors: Vec::new(),
        created_at: 1,
        due_at: None,
        revision: 0,
        decision: None,
        outcomes: Vec::new(),
        remind_before: Vec::new(),
        escalation: Vec::new(),
        steps_done: 0,
    }
}

/// The token of reviewer `r` of server `s`.
fn token(s: usize, r: usize) -> String {
    format!("lh_bench_s{s}_r{r}")
}

fn server(url: &str, s: usize, reviewers: usize, groups: bool) -> (Server, Engine) {
    let mut tokens = TokenTable::default();
    for r in 0..reviewers {
        tokens.insert(
            &token(s, r),
            Principal {
                tenant: "bench".to_owned(),
                actor: format!("s{s}r{r}"),
                roles: Vec::new(),
                scope: Scope::Reviewer,
            },
        );
    }
    let engine = EngineBuilder::default()
        .group_commit(groups)
        .postgres(url)
        .expect("engine");
    let server = Server::start_on(
        engine.clone(),
        Config {
            db: url.to_owned(),
            listen: "127.0.0.1:0".parse().expect("addr"),
            credentials: Credentials { tokens, jwt: None },
            reload: None,
            options: Options::default(),
            engine: EngineBuilder::default(),
            tls: None,
            cursor_key: None,
            handle_signals: false,
        },
    )
    .expect("serves");
    (server, engine)
}

struct Run {
    rate: f64,
    p50: Duration,
    p99: Duration,
    calls_per_commit: f64,
}

fn run(url: &str, servers: usize, reviewers: usize, groups: bool, seconds: f64) -> Run {
    let started: Vec<(Server, Engine)> = (0..servers)
        .map(|s| server(url, s, reviewers, groups))
        .collect();
    let bases: Vec<String> = started
        .iter()
        .map(|(s, _)| format!("http://{}", s.addr()))
        .collect();
    let lat = Mutex::new(Vec::new());
    let claims = Mutex::new(0usize);
    let go = std::sync::Barrier::new(servers * reviewers);
    let began = Instant::now();
    std::thread::scope(|scope| {
        for (s, base) in bases.iter().enumerate() {
            for r in 0..reviewers {
                let (lat, claims, go) = (&lat, &claims, &go);
                scope.spawn(move || {
                    let client = reqwest::blocking::Client::builder()
                        .build()
                        .expect("client");
                    let tok = token(s, r);
                    let (mut mine, mut n) = (Vec::new(), 0usize);
                    go.wait();
                    let start = Instant::now();
                    while start.elapsed().as_secs_f64() < seconds {
                        let at = Instant::now();
                        let resp = client
                            .post(format!("{base}/v1/queue/claim-next"))
                            .bearer_auth(&tok)
                            .json(&serde_json::json!({"lease_ms": 600_000}))
                            .send()
                            .expect("answers");
                        assert_eq!(resp.status(), 200);
                        let body: serde_json::Value = resp.json().expect("json");
                        mine.push(at.elapsed());
                        let id = body["task"]["id"].as_str().expect("a task").to_owned();
                        let resp = client
                            .post(format!("{base}/v1/tasks/{id}/settle"))
                            .bearer_auth(&tok)
                            .json(&serde_json::json!({"settlement": "completed"}))
                            .send()
                            .expect("answers");
                        assert_eq!(resp.status(), 200);
                        resp.bytes().expect("body");
                        n += 1;
                    }
                    lat.lock().expect("lat").extend(mine);
                    *claims.lock().expect("claims") += n;
                });
            }
        }
    });
    let elapsed = began.elapsed().as_secs_f64().min(seconds + 1.0);
    // Each server's own engine's groups (the metrics endpoint's counters
    // are the process's, shared by both servers here).
    let (mut commits, mut calls) = (0.0, 0.0);
    for (s, engine) in started {
        if let Some(c) = engine.commit_stats() {
            commits += c.commits as f64;
            calls += c.calls as f64;
        }
        s.shutdown().expect("stops");
    }
    let mut lat = lat.into_inner().expect("lat");
    lat.sort();
    let claims = claims.into_inner().expect("claims");
    Run {
        rate: claims as f64 / elapsed,
        p50: lat[lat.len() / 2],
        p99: lat[lat.len() * 99 / 100],
        calls_per_commit: if commits > 0.0 { calls / commits } else { 0.0 },
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let base = args
        .next()
        .expect("usage: queue_bench postgres://… [SECONDS]");
    let seconds: f64 = args.next().map_or(5.0, |s| s.parse().expect("seconds"));
    let schema = format!("qbench_{}", std::process::id());
    let mut admin = postgres::Client::connect(&base, postgres::NoTls).expect("connects");
    admin
        .batch_execute(&format!("CREATE SCHEMA {schema}"))
        .expect("schema");
    let sep = if base.contains('?') { '&' } else { '?' };
    let url = format!("{base}{sep}sslmode=disable&options=-c%20search_path%3D{schema}");
    let configs = [(1usize, 1usize), (1, 16), (2, 16)];
    {
        let engine = Engine::builder().postgres(&url).expect("engine");
        let t = engine.tenant("bench").expect("tenant");
        // Enough for every run at a few thousand claims a second.
        let n = (configs.len() as f64 * 2.0 * seconds * 3000.0) as usize;
        std::thread::scope(|s| {
            for w in 0..4 {
                let t = &t;
                s.spawn(move || {
                    for i in (w..n).step_by(4) {
                        t.open(&task(format!("q{i:07}"))).expect("opens");
                    }
                });
            }
        });
    }
    println!(
        "| servers × reviewers | line groups | claims/s | p50 claim-next | p99 | calls per commit (claim-next) | × 1 × 1 |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- |");
    let mut one = None;
    for groups in [true, false] {
        for &(servers, reviewers) in &configs {
            let r = run(&url, servers, reviewers, groups, seconds);
            let base_rate = *one.get_or_insert(r.rate);
            println!(
                "| {servers} × {reviewers} | {} | {:.0} | {:.0} µs | {:.0} µs | {:.2} | {:.2} |",
                if groups { "on" } else { "off" },
                r.rate,
                r.p50.as_secs_f64() * 1e6,
                r.p99.as_secs_f64() * 1e6,
                r.calls_per_commit,
                r.rate / base_rate
            );
        }
    }
    admin
        .batch_execute(&format!("DROP SCHEMA {schema} CASCADE"))
        .expect("drop");
}
