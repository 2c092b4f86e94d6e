//! Measures deliveries on one machine: commit-to-delivery latency of
//! tenant B's changes alone, and again beside tenant A whose endpoints
//! answer in 10 s or never; then the rate at which a backlog drains to a
//! local receiver. Over a redb file in a temporary directory, the
//! engine's default options but quicker polls.
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
use leasehold_host::{Engine, OnExpiry, Priority, Settlement, Task, TaskState, Tenant};
use leasehold_webhooks::{
    Deliveries, Filter, MemoryStore, Options, Parts, Secret, Sender, SenderOptions, SigningKey,
    SubState, Subscription,
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

fn subscription(id: &str, url: &str) -> Subscription {
    Subscription {
        id: id.to_owned(),
        url: url.to_owned(),
        filter: Filter::default(),
        state: SubState::Active,
        position: None,
        secrets: vec![SigningKey {
            secret: Secret::generate().expect("secret"),
            until: None,
        }],
        note: None,
        created_at: 0,
        revision: 1,
        attempts: Vec::new(),
    }
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

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    let dir = tempfile::tempdir().expect("tmp");
    let engine = Engine::open(dir.path().join("bench.redb")).expect("engine");
    let store = Arc::new(MemoryStore::new());
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
        Parts::new(store.clone(), Arc::new(engine.clone()), sender),
        options,
    );
    let _follow = d.follow(engine.changes());
    let (b_url, b_arrivals) = receiver(Some(Duration::ZERO)).await;
    store.insert("b", subscription("sub_b", &b_url));
    d.serve("b");

    let n = 300;
    let (p50, p99, count) = measure_b(&engine, &b_arrivals, "alone-", n).await;
    println!(
        "B alone:            {count} changes, commit to delivery p50 {p50:.2} ms, p99 {p99:.2} ms"
    );

    let (a_never, _) = receiver(None).await;
    let (a_slow, _) = receiver(Some(Duration::from_secs(10))).await;
    store.insert("a", subscription("sub_never", &a_never));
    store.insert("a", subscription("sub_10s", &a_slow));
    d.serve("a");
    let a = engine.tenant("a").expect("tenant");
    let writer = tokio::task::spawn_blocking(move || {
        let mut sink = HashMap::new();
        for i in 0..400 {
            life(&a, &format!("a{i}"), &mut sink);
            std::thread::sleep(Duration::from_millis(5));
        }
    });
    let (p50, p99, count) = measure_b(&engine, &b_arrivals, "beside-", n).await;
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
    store.insert("c", subscription("sub_c", &c_url));
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
