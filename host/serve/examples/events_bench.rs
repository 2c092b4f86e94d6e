//! What the change feed and the server's own time-keeping cost and how soon
//! they act: a commit reaching an event-stream subscriber (one server on
//! redb; two servers on one PostgreSQL database), the memory of idle
//! subscribers and a commit reaching all of them, an `arm` reaching a
//! waiting worker, a lease end to the task
//! back in the queue, the CPU of idle long-polls, and a sweeper keeping
//! time for 1,000 tenants.
//!
//! ```sh
//! cargo run --release -p leasehold-serve --example events_bench -- ['postgres://…']
//! ```

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use leasehold_host::{Engine, Lease, Sweeper, SweeperOptions, Task};
use leasehold_serve::{
    Config, Credentials, Options, Principal, Scope, Server, TokenTable, new_token,
};
use serde_json::{Value, json};

fn unix_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("after 1970")
        .as_millis() as i64
}

/// This process's resident memory and CPU time so far.
fn rss_kib() -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").expect("status");
    s.lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches(" kB").trim().parse().ok())
        .expect("VmRSS")
}

fn cpu_ms() -> f64 {
    let s = std::fs::read_to_string("/proc/self/stat").expect("stat");
    let fields: Vec<&str> = s
        .rsplit(')')
        .next()
        .expect("stat")
        .split_whitespace()
        .collect();
    let ticks: f64 =
        fields[11].parse::<f64>().expect("utime") + fields[12].parse::<f64>().expect("stime");
    ticks * 10.0
}

fn pct(mut v: Vec<f64>, p: f64) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).expect("numbers"));
    v[((v.len() as f64 - 1.0) * p).round() as usize]
}

struct Bench {
    tokens: TokenTable,
    sam: String,
}

fn bench() -> Bench {
    let mut tokens = TokenTable::default();
    let sam = new_token().expect("random");
    tokens.insert(
        &sam,
        Principal {
            tenant: "acme".into(),
            actor: "sam".into(),
            roles: vec![],
            scope: Scope::Service,
        },
    );
    Bench { tokens, sam }
}

fn start(db: &str, b: &Bench, mut options: Options) -> Server {
    // Call counts are read from the operations listener, where an operator
    // scrapes them (the API listener's /metrics wants an admin credential).
    options.ops_listen = Some("127.0.0.1:0".parse().expect("addr"));
    Server::start(Config {
        db: db.to_owned(),
        listen: "127.0.0.1:0".parse().expect("addr"),
        credentials: Credentials {
            tokens: b.tokens.clone(),
            jwt: None,
        },
        reload: None,
        options,
        engine: Engine::builder(),
        tls: None,
        cursor_key: None,
        handle_signals: false,
    })
    .expect("server")
}

/// A subscriber's socket, its lines read on a thread: each `data:` line's
/// JSON, with the instant it arrived.
fn subscribe(addr: &str, token: &str) -> std::sync::mpsc::Receiver<(Instant, Value)> {
    let mut s = TcpStream::connect(addr).expect("connect");
    write!(
        s,
        "GET /v1/events HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {token}\r\nAccept: text/event-stream\r\n\r\n"
    )
    .expect("send");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(s).lines() {
            let Ok(line) = line else { return };
            if let Some(data) = line.strip_prefix("data: ")
                && let Ok(v) = serde_json::from_str::<Value>(data)
                && tx.send((Instant::now(), v)).is_err()
            {
                return;
            }
        }
    });
    rx
}

/// The server's calls of `verb` so far, whatever they answered.
/// The server's calls of one verb so far, from the operations listener's
/// /metrics (a count that cannot be read stops the benchmark: a silent zero
/// would read as "no calls").
fn calls(client: &reqwest::blocking::Client, server: &Server, verb: &str) -> f64 {
    let ops = server.ops_addr().expect("the operations listener");
    let answer = client
        .get(format!("http://{ops}/metrics"))
        .send()
        .expect("metrics");
    assert!(
        answer.status().is_success(),
        "/metrics answered {}",
        answer.status()
    );
    let text = answer.text().expect("text");
    let label = format!("verb=\"{verb}\"");
    text.lines()
        .filter(|l| l.starts_with("leasehold_calls_total{") && l.contains(&label))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

fn plain_task(id: &str) -> Task {
    serde_json::from_value(json!({
        "id": id, "run": "r", "case": null, "kind": "k", "justification": "{}",
        "candidate_roles": [], "assignee": null, "lease_until": null, "priority": "normal",
        "state": "open", "on_expiry": "deny", "escalate_to": [], "excluded_actors": [],
        "created_at": 1, "due_at": null
    }))
    .expect("task")
}

fn task(id: &str) -> Value {
    json!({"id": id, "run": "r", "kind": "k"})
}

/// Request sent to event received, over `n` opens through `writer` with a
/// subscriber on `reader`.
fn commit_to_subscriber(
    client: &reqwest::blocking::Client,
    writer: &str,
    reader: &str,
    token: &str,
    n: usize,
    tag: &str,
) -> (Vec<f64>, Vec<f64>) {
    let rx = subscribe(reader, token);
    let _ready = rx.recv_timeout(Duration::from_secs(30)).expect("ready");
    let (mut to_event, mut to_answer) = (Vec::new(), Vec::new());
    for i in 0..n {
        let id = format!("{tag}-{i}");
        let t0 = Instant::now();
        let r = client
            .post(format!("http://{writer}/v1/tasks"))
            .bearer_auth(token)
            .json(&task(&id))
            .send()
            .expect("open");
        assert!(r.status().is_success());
        to_answer.push(t0.elapsed().as_secs_f64() * 1e3);
        loop {
            let (at, v) = rx.recv_timeout(Duration::from_secs(30)).expect("the event");
            if v["change"]["task"]["id"] == id {
                to_event.push((at - t0).as_secs_f64() * 1e3);
                break;
            }
        }
    }
    (to_event, to_answer)
}

fn main() {
    let pg = std::env::args().nth(1);
    let b = bench();
    let dir = tempfile::tempdir().expect("dir");
    let db = dir
        .path()
        .join("events.redb")
        .to_string_lossy()
        .into_owned();
    let client = reqwest::blocking::Client::new();
    println!("| what | backend | p50 ms | p99 ms | n |\n| --- | --- | --- | --- | --- |");

    // 1. A commit to a subscriber on the same server (redb).
    let mut options = Options {
        sweep: false,
        ..Options::default()
    };
    options.events.max_subscribers_per_tenant = 1100;
    options.events.max_subscribers = 1100;
    options.events.max_subscribers_per_caller = 1100;
    options.connections.max_connections = 2048;
    let one = start(&db, &b, options);
    let addr = one.addr().to_string();
    let (ev, ans) = commit_to_subscriber(&client, &addr, &addr, &b.sam, 300, "one");
    println!(
        "| open: request sent → its answer | redb | {:.2} | {:.2} | {} |",
        pct(ans.clone(), 0.5),
        pct(ans, 0.99),
        ev.len()
    );
    println!(
        "| open: request sent → event at a subscriber | redb | {:.2} | {:.2} | {} |",
        pct(ev.clone(), 0.5),
        pct(ev, 0.99),
        300
    );

    // 2. Memory of 1,000 idle subscribers.
    let before = rss_kib();
    let mut idle = Vec::new();
    for _ in 0..1000 {
        let rx = subscribe(&addr, &b.sam);
        rx.recv_timeout(Duration::from_secs(30)).expect("ready");
        idle.push(rx);
    }
    std::thread::sleep(Duration::from_secs(2));
    let after = rss_kib();
    let cpu0 = cpu_ms();
    std::thread::sleep(Duration::from_secs(10));
    let idle_cpu = cpu_ms() - cpu0;
    println!(
        "\n1,000 idle subscribers (server and their client sockets in one process): RSS {} KiB → {} KiB, {:.1} KiB each; CPU over 10 s idle: {:.0} ms",
        before,
        after,
        (after as f64 - before as f64) / 1000.0,
        idle_cpu
    );
    // 2b. A commit to every one of the 1,000 (their streams wake together,
    // at one position): the last subscriber's delay, and the feed reads
    // the server made per commit.
    let feed_calls = || calls(&client, &one, "feed");
    let calls0 = feed_calls();
    let mut last = Vec::new();
    let n = 30;
    for i in 0..n {
        let id = format!("fan-{i}");
        let t0 = Instant::now();
        let r = client
            .post(format!("http://{addr}/v1/tasks"))
            .bearer_auth(&b.sam)
            .json(&task(&id))
            .send()
            .expect("open");
        assert!(r.status().is_success());
        let mut latest = t0;
        for rx in &idle {
            loop {
                let (at, v) = rx.recv_timeout(Duration::from_secs(60)).expect("the event");
                if v["change"]["task"]["id"] == id {
                    latest = latest.max(at);
                    break;
                }
            }
        }
        last.push((latest - t0).as_secs_f64() * 1e3);
    }
    println!(
        "\nA commit to all 1,000 (one tenant, one position): request sent → the last subscriber's event p50 {:.1} ms, p99 {:.1} ms over {n} opens; the server's feed reads per commit: {:.1}",
        pct(last.clone(), 0.5),
        pct(last, 0.99),
        (feed_calls() - calls0) / f64::from(n)
    );
    drop(idle);
    drop(one);

    // 3. An `arm` to a waiting worker, and 100 idle long-polls.
    let one = start(&db, &b, Options::default());
    let addr = one.addr().to_string();
    let mut delays = Vec::new();
    for i in 0..100 {
        let worker = {
            let client = client.clone();
            let addr = addr.clone();
            let token = b.sam.clone();
            std::thread::spawn(move || {
                let v: Value = client
                    .post(format!("http://{addr}/v1/timers/claim-due"))
                    .bearer_auth(&token)
                    .json(&json!({"lease_ms": 60000, "wait_ms": 30000, "limit": 1}))
                    .send()
                    .expect("claim-due")
                    .json()
                    .expect("json");
                (Instant::now(), v)
            })
        };
        std::thread::sleep(Duration::from_millis(20));
        let t0 = Instant::now();
        client
            .post(format!("http://{addr}/v1/timers"))
            .bearer_auth(&b.sam)
            .json(&json!({"run": "r", "effect": format!("e{i}"), "step": 1, "phase": "forward", "fire_at": unix_ms()}))
            .send()
            .expect("arm");
        let (at, v) = worker.join().expect("worker");
        assert_eq!(v["timers"][0]["effect"], format!("e{i}"));
        delays.push((at - t0).as_secs_f64() * 1e3);
    }
    println!("\n| what | backend | p50 ms | p99 ms | n |\n| --- | --- | --- | --- | --- |");
    println!(
        "| arm sent → a waiting worker's answer | redb | {:.2} | {:.2} | 100 |",
        pct(delays.clone(), 0.5),
        pct(delays, 0.99)
    );
    let workers: Vec<_> = (0..100)
        .map(|_| {
            let client = reqwest::blocking::Client::new();
            let addr = addr.clone();
            let token = b.sam.clone();
            std::thread::spawn(move || {
                let _ = client
                    .post(format!("http://{addr}/v1/timers/claim-due"))
                    .bearer_auth(&token)
                    .json(&json!({"lease_ms": 60000, "wait_ms": 30000, "limit": 1}))
                    .send();
            })
        })
        .collect();
    std::thread::sleep(Duration::from_secs(2));
    let (r0, c0) = (rss_kib(), cpu_ms());
    std::thread::sleep(Duration::from_secs(10));
    println!(
        "\n100 idle long-polls: CPU over 10 s: {:.0} ms; RSS {} KiB",
        cpu_ms() - c0,
        r0
    );
    // Tasks opened while the 100 wait for timers: what the waiting call.
    let woken = || calls(&client, &one, "claim-due") + calls(&client, &one, "next-due");
    let w0 = woken();
    let mut opens = Vec::new();
    for i in 0..200 {
        let t0 = Instant::now();
        let r = client
            .post(format!("http://{addr}/v1/tasks"))
            .bearer_auth(&b.sam)
            .json(&task(&format!("busy-{i}")))
            .send()
            .expect("open");
        assert!(r.status().is_success());
        opens.push(t0.elapsed().as_secs_f64() * 1e3);
    }
    println!(
        "200 tasks opened while the 100 wait: {:.1} calls by the waiting per open; open p50 {:.2} ms, p99 {:.2} ms",
        (woken() - w0) / 200.0,
        pct(opens.clone(), 0.5),
        pct(opens, 0.99)
    );
    for w in workers {
        let _ = w.join();
    }

    drop(one);
    // 4. A lease end to the task back in the queue (the sweeper, real clock).
    let engine = Engine::builder().open_any(&db).expect("engine");
    let t = engine.tenant("acme").expect("tenant");
    let start_ms = unix_ms() + 1000;
    for i in 0..50 {
        let id = format!("lease-{i}");
        t.open(&plain_task(&id)).expect("open");
        t.claim(
            &id,
            "sam",
            &[],
            Some(Lease {
                now: start_ms - 1000,
                lease_ms: 1000 + 20 * i,
            }),
        )
        .expect("claim");
    }
    let late: Arc<Mutex<Vec<f64>>> = Arc::default();
    let sweeper = {
        let late = late.clone();
        Sweeper::start(
            &engine,
            ["acme".to_owned()],
            SweeperOptions {
                on_sweep: Some(Arc::new(move |r| {
                    late.lock().expect("late").push(r.late_ms as f64)
                })),
                ..SweeperOptions::default()
            },
        )
        .expect("sweeper")
    };
    let until = Instant::now() + Duration::from_secs(60);
    while sweeper.stats().reclaimed < 50 && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(50));
    }
    let late = late.lock().expect("late").clone();
    println!("\n| what | backend | p50 ms | p99 ms | n |\n| --- | --- | --- | --- | --- |");
    println!(
        "| lease end → the sweep that reclaimed it | redb | {:.0} | {:.0} | {} sweeps, {} reclaimed |",
        pct(late.clone(), 0.5),
        pct(late.clone(), 0.99),
        late.len(),
        sweeper.stats().reclaimed
    );
    drop(sweeper);
    drop(t);
    drop(engine);

    // 5. 1,000 tenants with one lease each.
    let dir2 = tempfile::tempdir().expect("dir");
    let engine = Engine::builder()
        .durability(leasehold_host::Durability::None)
        .open_any(&dir2.path().join("tenants.redb").to_string_lossy())
        .expect("engine");
    let base = unix_ms() + 15_000;
    let names: Vec<String> = (0..1000).map(|i| format!("tenant-{i:04}")).collect();
    for (i, name) in names.iter().enumerate() {
        let t = engine.tenant(name).expect("tenant");
        t.open(&plain_task("one")).expect("open");
        t.claim(
            "one",
            "a",
            &[],
            Some(Lease {
                now: base - 1000,
                lease_ms: 1000 + (i as u32 % 100) * 10,
            }),
        )
        .expect("claim");
    }
    let late: Arc<Mutex<Vec<f64>>> = Arc::default();
    let started = Instant::now();
    let c0 = cpu_ms();
    let sweeper = {
        let late = late.clone();
        Sweeper::start(
            &engine,
            names.clone(),
            SweeperOptions {
                on_sweep: Some(Arc::new(move |r| {
                    late.lock().expect("late").push(r.late_ms as f64)
                })),
                ..SweeperOptions::default()
            },
        )
        .expect("sweeper")
    };
    while sweeper.stats().reads < 1000 {
        std::thread::sleep(Duration::from_millis(10));
    }
    let read_all = started.elapsed();
    let read_cpu = cpu_ms() - c0;
    let c1 = cpu_ms();
    std::thread::sleep(Duration::from_secs(5));
    let idle_cpu = cpu_ms() - c1;
    while sweeper.stats().reclaimed < 1000 && Instant::now() < started + Duration::from_secs(120) {
        std::thread::sleep(Duration::from_millis(50));
    }
    let late = late.lock().expect("late").clone();
    println!(
        "\n1,000 tenants, one lease each: reading every tenant's next instant at start took {:.0} ms ({:.0} ms CPU); CPU while idle over 5 s: {:.0} ms; lease end → sweep: p50 {:.0} ms, p99 {:.0} ms, max {:.0} ms over {} sweeps ({} reclaimed)",
        read_all.as_secs_f64() * 1e3,
        read_cpu,
        idle_cpu,
        pct(late.clone(), 0.5),
        pct(late.clone(), 0.99),
        pct(late.clone(), 1.0),
        late.len(),
        sweeper.stats().reclaimed
    );
    drop(sweeper);

    // 6. Across two servers on one PostgreSQL database.
    if let Some(url) = pg {
        let schema = format!("events_bench_{}", std::process::id());
        let mut c = postgres::Client::connect(&url, postgres::NoTls).expect("connect");
        c.batch_execute(&format!(
            "DROP SCHEMA IF EXISTS {schema} CASCADE; CREATE SCHEMA {schema}"
        ))
        .expect("schema");
        let sep = if url.contains('?') { '&' } else { '?' };
        let at = format!("{url}{sep}options=-c%20search_path%3D{schema}");
        let options = Options {
            sweep: false,
            ..Options::default()
        };
        let one = start(&at, &b, options.clone());
        let two = start(&at, &b, options);
        let (a, b2) = (one.addr().to_string(), two.addr().to_string());
        let (ev, ans) = commit_to_subscriber(&client, &a, &a, &b.sam, 200, "pg-one");
        println!("\n| what | backend | p50 ms | p99 ms | n |\n| --- | --- | --- | --- | --- |");
        println!(
            "| open: request sent → its answer | postgres | {:.2} | {:.2} | 200 |",
            pct(ans.clone(), 0.5),
            pct(ans, 0.99)
        );
        println!(
            "| open: request sent → event, same server | postgres | {:.2} | {:.2} | 200 |",
            pct(ev.clone(), 0.5),
            pct(ev, 0.99)
        );
        let (ev, _) = commit_to_subscriber(&client, &a, &b2, &b.sam, 200, "pg-two");
        println!(
            "| open: request sent → event, other server | postgres | {:.2} | {:.2} | 200 |",
            pct(ev.clone(), 0.5),
            pct(ev, 0.99)
        );
        drop(one);
        drop(two);
        let _ = c.batch_execute(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE"));
    }
}
