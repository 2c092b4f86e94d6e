//! The service's benchmark (BENCHMARKS.md, "Service"): `claim` and `queue`
//! over HTTP at 1 and 16 concurrent connections, and the same verbs through
//! the library in the same run, on redb (`Durability::Immediate`, group
//! commit) and, given a URL, on PostgreSQL. The load generator is this
//! program: blocking reqwest clients on their own threads, one keep-alive
//! connection each.
//!
//! ```text
//! cargo run --release -p leasehold-serve --example serve_bench [-- postgres://…]
//! ```

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use leasehold_host::{Engine, OnExpiry, Priority, QueueQuery, Task, TaskState, Tenant};
use leasehold_serve::{Config, Credentials, Options, Principal, Scope, Server, TokenTable};

const CLAIMS: usize = 2000;
const QUEUES: usize = 2000;
const PAGE: u32 = 20;

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

struct Stats {
    p50: Duration,
    p99: Duration,
    per_sec: f64,
}

/// Runs `op(i)` for i in 0..n over `threads` threads; each thread gets its
/// own state from `make` (a client, a connection).
fn measure<S>(
    n: usize,
    threads: usize,
    make: impl Fn() -> S + Sync,
    op: impl Fn(&S, usize) + Sync,
) -> Stats {
    let next = AtomicUsize::new(0);
    let all = Mutex::new(Vec::with_capacity(n));
    let started = Instant::now();
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                let state = make();
                let mut mine = Vec::new();
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= n {
                        break;
                    }
                    let t = Instant::now();
                    op(&state, i);
                    mine.push(t.elapsed());
                }
                all.lock().expect("lock").extend(mine);
            });
        }
    });
    let elapsed = started.elapsed();
    let mut all = all.into_inner().expect("lock");
    all.sort();
    Stats {
        p50: all[all.len() / 2],
        p99: all[all.len() * 99 / 100],
        per_sec: n as f64 / elapsed.as_secs_f64(),
    }
}

fn row(backend: &str, via: &str, verb: &str, conns: usize, s: &Stats) {
    println!(
        "| {backend} | {via} | {verb} | {conns} | {:.0} | {:.0} | {:.0} |",
        s.p50.as_secs_f64() * 1e6,
        s.p99.as_secs_f64() * 1e6,
        s.per_sec
    );
}

fn open_pool(t: &Tenant, prefix: &str, n: usize) {
    for i in 0..n {
        t.open(&task(format!("{prefix}-{i:06}"))).expect("opens");
    }
}

fn bench(backend: &str, db: &str) {
    let token = "lh_bench_reviewer_token";
    let mut table = TokenTable::default();
    table.insert(
        token,
        Principal {
            tenant: "bench".to_owned(),
            actor: "alice".to_owned(),
            roles: Vec::new(),
            scope: Scope::Reviewer,
        },
    );
    // Library first, on its own engine; the server opens the same store
    // after it is closed (a redb file has one opener).
    {
        let engine = Engine::builder().open_any(db).expect("opens");
        let t = engine.tenant("bench").expect("tenant");
        open_pool(&t, "q", 200);
        for conns in [1, 16] {
            let prefix = format!("lib{conns}");
            open_pool(&t, &prefix, CLAIMS);
            let s = measure(
                CLAIMS,
                conns,
                || (),
                |(), i| {
                    t.claim(&format!("{prefix}-{i:06}"), "alice", &[], None)
                        .expect("claims");
                },
            );
            row(backend, "library", "claim", conns, &s);
            let q = QueueQuery {
                roles: Vec::new(),
                actor: Some("alice".to_owned()),
                limit: PAGE,
                after: None,
            };
            let s = measure(
                QUEUES,
                conns,
                || (),
                |(), _| {
                    t.queue(&q).expect("queue");
                },
            );
            row(backend, "library", "queue", conns, &s);
        }
        for conns in [1, 16] {
            open_pool(&t, &format!("http{conns}"), CLAIMS);
        }
    }
    let server = Server::start(Config {
        db: db.to_owned(),
        listen: "127.0.0.1:0".parse().expect("addr"),
        credentials: Credentials {
            tokens: table,
            jwt: None,
        },
        options: Options::default(),
        engine: Engine::builder(),
        tls: None,
        reload: None,
        cursor_key: None,
        handle_signals: false,
    })
    .expect("serves");
    let base = format!("http://{}", server.addr());
    let client = || {
        reqwest::blocking::Client::builder()
            .build()
            .expect("client")
    };
    for conns in [1, 16] {
        let prefix = format!("http{conns}");
        let s = measure(CLAIMS, conns, client, |c, i| {
            let r = c
                .post(format!("{base}/v1/tasks/{prefix}-{i:06}/claim"))
                .bearer_auth(token)
                .send()
                .expect("answers");
            assert_eq!(r.status(), 200);
            r.bytes().expect("body");
        });
        row(backend, "HTTP", "claim", conns, &s);
        let s = measure(QUEUES, conns, client, |c, _| {
            let r = c
                .get(format!("{base}/v1/queue?limit={PAGE}"))
                .bearer_auth(token)
                .send()
                .expect("answers");
            assert_eq!(r.status(), 200);
            r.bytes().expect("body");
        });
        row(backend, "HTTP", "queue", conns, &s);
    }
    // Where the HTTP time goes: the transport alone (/healthz), and the
    // transport plus credential check and problem rendering (a 401).
    let s = measure(QUEUES, 1, client, |c, _| {
        c.get(format!("{base}/healthz"))
            .send()
            .expect("answers")
            .bytes()
            .expect("body");
    });
    row(backend, "HTTP", "/healthz", 1, &s);
    let s = measure(QUEUES, 1, client, |c, _| {
        let r = c
            .get(format!("{base}/v1/queue"))
            .bearer_auth("lh_unknown")
            .send()
            .expect("answers");
        assert_eq!(r.status(), 401);
        r.bytes().expect("body");
    });
    row(backend, "HTTP", "401", 1, &s);
    server.shutdown().expect("stops");
}

fn main() {
    println!("| backend | via | verb | connections | p50 µs | p99 µs | requests/s |");
    println!("| --- | --- | --- | --- | --- | --- | --- |");
    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join("bench.redb");
    bench("redb", &file.to_string_lossy());
    if let Some(url) = std::env::args().nth(1) {
        // A fresh schema each run keeps runs apart.
        bench("postgres", &url);
    }
}
