//! Measures deliveries on one machine, with subscriptions kept where a
//! server keeps them (the component's rows, [`ComponentStore`]):
//! commit-to-delivery latency of tenant B's changes alone, and again
//! beside tenant A whose endpoints answer in 10 s or never; then the rate
//! at which a backlog drains to a local receiver. On a redb file in a
//! temporary directory, then on PostgreSQL when `LEASEHOLD_TEST_PG` names
//! a database (a fresh schema of it); the engine's default options but
//! quicker polls.
//!
//! `cargo run --release -p leasehold-webhooks --example isolation`

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use leasehold_guest::subscriptions::SubFilter;
use leasehold_host::{Engine, OnExpiry, Priority, Settlement, Task, TaskState, Tenant};
use leasehold_webhooks::{
    ComponentStore, Deliveries, Options, Parts, Secret, Sender, SenderOptions,
};

type Arrivals = Arc<Mutex<HashMap<(String, u64), Instant>>>;

/// A receiver on 127.0.0.1 that notes when each task change first
/// arrives; `delay` of `None` never answers.
async fn receiver(delay: Option<Duration>) -> (String, Arrivals) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let url = format!("http://{}/hooks", listener.local_addr().expect("addr"));
    let arrivals: Arrivals = Arc::default();
    let seen = arrivals.clone();
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            let seen = seen.clone();
            let svc = service_fn(move |req: hyper::Request<Incoming>| {
                let seen = seen.clone();
                async move {
                    let at = Instant::now();
                    let body = req.into_body().collect().await.map(|b| b.to_bytes());
                    if let Ok(v) = body.map(|b| serde_json::from_slice::<serde_json::Value>(&b)) {
                        let v = v.unwrap_or_default();
                        let t = &v["data"]["change"]["task"];
                        if let (Some(id), Some(seq)) =
                            (t["id"].as_str(), t["entry"]["seq"].as_u64())
                        {
                            let mut s = seen.lock().unwrap_or_else(|p| p.into_inner());
                            s.entry((id.to_owned(), seq)).or_insert(at);
                        }
                    }
                    match delay {
                        None => std::future::pending::<()>().await,
                        Some(d) => tokio::time::sleep(d).await,
                    }
                    let mut res = hyper::Response::new(Full::new(Bytes::new()));
                    *res.status_mut() = hyper::StatusCode::NO_CONTENT;
                    Ok::<_, Infallible>(res)
                }
            });
            tokio::spawn(async move {
                let _ = http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), svc)
                    .await;
            });
        }
    });
    (url, arrivals)
}

fn task(id: &str) -> Task {
    Task {
        id: id.to_owned(),
        run: "run-1".to_owned(),
        case: None,
        kind: "approve".to_owned(),
        justification: "{}".to_owned(),
        candidate_roles: Vec::new(),
        assignee: None,
        lease_until: None,
        priority: Priority::Normal,
        state: TaskState::Open,
        on_expiry: OnExpiry::Deny,
        escalate_to: Vec::new(),
        excluded_actors: Vec::new(),
        created_at: 1_700_000_000_000,
        due_at: None,
        revision: 0,
        decision: None,
        outcomes: Vec::new(),
        remind_before: Vec::new(),
        escalation: Vec::new(),
        steps_done: 0,
    }
}

/// Opens, claims and settles task `id`, noting when each change committed.
fn life(t: &Tenant, id: &str, commits: &mut HashMap<(String, u64), Instant>) {
    t.open(&task(id)).expect("open");
    commits.insert((id.to_owned(), 1), Instant::now());
    t.claim(id, "alice", &[], None).expect("claim");
    commits.insert((id.to_owned(), 2), Instant::now());
    t.settle(id, Settlement::Completed, Some("alice"))
        .expect("settle");
    commits.insert((id.to_owned(), 3), Instant::now());
}

/// Adds a subscription of every change to `url`, kept in `tenant`'s
/// keyspace, from the feed's head.
async fn subscribe(engine: &Engine, tenant: &str, id: &str, url: &str) {
    let (engine, tenant, id, url) = (
        engine.clone(),
        tenant.to_owned(),
        id.to_owned(),
        url.to_owned(),
    );
    tokio::task::spawn_blocking(move || {
        let filter = SubFilter {
            tasks: true,
            timers: true,
            verbs: vec![],
            kinds: vec![],
            runs: vec![],
            settling_only: false,
        };
        let key = Secret::generate().expect("secret");
        engine
            .tenant(&tenant)
            .expect("tenant")
            .add_subscription(&id, &url, &filter, key.as_bytes(), None, 0)
            .expect("add a subscription");
    })
    .await
    .expect("subscribe");
}

fn quantile(sorted: &[f64], q: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * q).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

/// Tenant B's changes, paced, each timed from its commit to its arrival.
async fn measure_b(
    engine: &Engine,
    arrivals: &Arrivals,
    prefix: &str,
    n: usize,
) -> (f64, f64, f64) {
    let b = engine.tenant("b").expect("tenant");
    let mut commits = HashMap::new();
    for i in 0..n {
        let b = b.clone();
        let id = format!("{prefix}{i}");
        let mut mine = HashMap::new();
        let c = tokio::task::spawn_blocking(move || {
            life(&b, &id, &mut mine);
            mine
        })
        .await
        .expect("life");
        commits.extend(c);
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let all = {
            let got = arrivals.lock().unwrap_or_else(|p| p.into_inner());
            commits.keys().all(|k| got.contains_key(k))
        };
        if all || Instant::now() > deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let got = arrivals.lock().unwrap_or_else(|p| p.into_inner());
    let mut lat: Vec<f64> = commits
        .iter()
        .filter_map(|(k, c)| {
            got.get(k)
                .map(|a| a.duration_since(*c).as_secs_f64() * 1000.0)
        })
        .collect();
    lat.sort_by(f64::total_cmp);
    let missing = commits.len() - lat.len();
    assert_eq!(missing, 0, "{missing} of B's changes never arrived");
    (quantile(&lat, 0.5), quantile(&lat, 0.99), lat.len() as f64)
}

fn main() {
    let dir = tempfile::tempdir().expect("tmp");
    let redb = Engine::open(dir.path().join("bench.redb")).expect("engine");
    run("redb", redb);
    if let Some(schema) = leasehold_tests::pg::Schema::fresh() {
        let pg = Engine::builder().postgres(&schema.url).expect("engine");
        run("postgres", pg);
    }
}

/// Every measurement, on one engine. The engine's calls block (a
/// PostgreSQL engine runs a runtime of its own), so they run on blocking
/// threads.
fn run(store: &str, engine: Engine) {
    println!("== {store}");
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    rt.block_on(measure(&engine));
    // The runtime and what its tasks hold go first: the engine's last
    // handle is dropped here, outside it.
    drop(rt);
    drop(engine);
}

async fn measure(engine: &Engine) {
    let sender = Sender::new(SenderOptions {
        allow_http: true,
        allowed: vec!["127.0.0.0/8".parse().expect("net")],
        timeout: Duration::from_secs(30),
        ..SenderOptions::default()
    })
    .expect("sender");
    let options = Options {
        poll: Duration::from_millis(200),
        ..Options::default()
    };
    let d = Deliveries::new(
        Parts::new(
            Arc::new(ComponentStore::new(engine.clone())),
            Arc::new(engine.clone()),
            sender,
        ),
        options,
    );
    let _follow = d.follow(engine.changes());
    let (b_url, b_arrivals) = receiver(Some(Duration::ZERO)).await;
    subscribe(engine, "b", "sub_b", &b_url).await;
    d.serve("b");

    let n = 300;
    let (p50, p99, count) = measure_b(engine, &b_arrivals, "alone-", n).await;
    println!(
        "B alone:            {count} changes, commit to delivery p50 {p50:.2} ms, p99 {p99:.2} ms"
    );

    let (a_never, _) = receiver(None).await;
    let (a_slow, _) = receiver(Some(Duration::from_secs(10))).await;
    subscribe(engine, "a", "sub_never", &a_never).await;
    subscribe(engine, "a", "sub_10s", &a_slow).await;
    d.serve("a");
    let a = engine.tenant("a").expect("tenant");
    let writer = tokio::task::spawn_blocking(move || {
        let mut sink = HashMap::new();
        for i in 0..400 {
            life(&a, &format!("a{i}"), &mut sink);
            std::thread::sleep(Duration::from_millis(5));
        }
    });
    let (p50, p99, count) = measure_b(engine, &b_arrivals, "beside-", n).await;
    println!(
        "B beside A (10 s / never): {count} changes, commit to delivery p50 {p50:.2} ms, p99 {p99:.2} ms"
    );
    writer.await.expect("writer");

    // A backlog: changes made while nothing delivers, then drained.
    let (c_url, c_arrivals) = receiver(Some(Duration::ZERO)).await;
    let c = engine.tenant("c").expect("tenant");
    let backlog = 1000;
    let c2 = c.clone();
    tokio::task::spawn_blocking(move || {
        let mut sink = HashMap::new();
        for i in 0..backlog {
            life(&c2, &format!("c{i}"), &mut sink);
        }
    })
    .await
    .expect("backlog");
    // From the feed's start, so the whole backlog is owed.
    let engine2 = engine.clone();
    let c_url2 = c_url.clone();
    tokio::task::spawn_blocking(move || {
        let filter = SubFilter {
            tasks: true,
            timers: true,
            verbs: vec![],
            kinds: vec![],
            runs: vec![],
            settling_only: false,
        };
        let key = Secret::generate().expect("secret");
        engine2
            .tenant("c")
            .expect("tenant")
            .add_subscription("sub_c", &c_url2, &filter, key.as_bytes(), Some("f"), 0)
            .expect("add a subscription");
    })
    .await
    .expect("subscribe");
    let start = Instant::now();
    d.serve("c");
    loop {
        if c_arrivals.lock().unwrap_or_else(|p| p.into_inner()).len() >= backlog * 3 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let secs = start.elapsed().as_secs_f64();
    println!(
        "backlog of {} changes drained in {secs:.2} s: {:.0} deliveries/s (parallelism {})",
        backlog * 3,
        (backlog * 3) as f64 / secs,
        d.options().endpoint_parallelism
    );
    d.shutdown().await;
}
