//! Event streams of one tenant sharing their reads of the feed, and
//! long-polls woken only by changes that could give them something, counted
//! by the server's own metrics. A binary of its own: the metrics are the
//! process's, and here no other test's calls add to them (its tests take
//! turns).

use std::io::{BufRead, BufReader};
use std::time::{Duration, Instant};

use leasehold_host::Engine;
use leasehold_serve::{
    Config, Credentials, Options, Principal, Scope, Server, TokenTable, new_token,
};
use serde_json::{Value, json};

/// A bound on a failure, never a pace the test relies on.
const PATIENCE: Duration = Duration::from_secs(60);

/// The tests take turns: the metrics they count are the process's.
static TURN: std::sync::Mutex<()> = std::sync::Mutex::new(());

struct People {
    table: TokenTable,
    sam: String,
    alice: String,
    lena: String,
    gus: String,
}

fn people() -> People {
    let mut table = TokenTable::default();
    let mut token = |tenant: &str, actor: &str, scope: Scope, role: &str| {
        let t = new_token().expect("random");
        table.insert(
            &t,
            Principal {
                tenant: tenant.into(),
                actor: actor.into(),
                roles: vec![role.into()],
                scope,
            },
        );
        t
    };
    let sam = token("acme", "sam", Scope::Service, "finance");
    let alice = token("acme", "alice", Scope::Reviewer, "finance");
    let lena = token("acme", "lena", Scope::Reviewer, "legal");
    let gus = token("globex", "gus", Scope::Reviewer, "finance");
    People {
        table,
        sam,
        alice,
        lena,
        gus,
    }
}

/// The `data` of each event of a stream, read on a thread of its own.
fn subscribe(
    client: &reqwest::blocking::Client,
    base: &str,
    token: &str,
) -> std::sync::mpsc::Receiver<Value> {
    let r = client
        .get(format!("{base}/v1/events"))
        .bearer_auth(token)
        .header("accept", "text/event-stream")
        .send()
        .expect("subscribe");
    assert_eq!(r.status(), 200);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(r).lines() {
            let Ok(line) = line else { return };
            if let Some(data) = line.strip_prefix("data: ")
                && tx
                    .send(serde_json::from_str(data).expect("JSON data"))
                    .is_err()
            {
                return;
            }
        }
    });
    rx
}

/// The sum of a metric's series whose line starts with `prefix` (the name
/// and, within its braces, the labels that pick them).
fn metric(client: &reqwest::blocking::Client, base: &str, prefix: &str) -> u64 {
    let text = client
        .get(format!("{base}/metrics"))
        .send()
        .expect("metrics")
        .text()
        .expect("text");
    text.lines()
        .filter(|l| l.starts_with(prefix))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum::<f64>() as u64
}

/// Reads made and taken so far: `leasehold_event_reads_total{read}`.
fn reads(client: &reqwest::blocking::Client, base: &str) -> (u64, u64) {
    (
        metric(client, base, "leasehold_event_reads_total{read=\"own\"}"),
        metric(client, base, "leasehold_event_reads_total{read=\"shared\"}"),
    )
}

/// Calls of `verb` so far, whatever they answered.
fn calls(client: &reqwest::blocking::Client, base: &str, verb: &str) -> u64 {
    metric(
        client,
        base,
        &format!("leasehold_calls_total{{verb=\"{verb}\","),
    )
}

/// Polls until `done` holds (the bound is on a failure only).
fn until(mut done: impl FnMut() -> bool) {
    let since = Instant::now();
    while !done() {
        assert!(since.elapsed() < PATIENCE, "gave up waiting");
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn server(dir: &tempfile::TempDir, p: &People) -> Server {
    Server::start(Config {
        db: dir.path().join("db").to_string_lossy().into_owned(),
        listen: "127.0.0.1:0".parse().expect("an address"),
        credentials: Credentials {
            tokens: p.table.clone(),
            jwt: None,
        },
        reload: None,
        options: Options {
            sweep: false,
            // The metrics these tests count, read without a credential.
            ops_listen: Some("127.0.0.1:0".parse().expect("an address")),
            ..Options::default()
        },
        engine: Engine::builder(),
        tls: None,
        cursor_key: None,
        handle_signals: false,
    })
    .expect("a server")
}

/// A test's server, its people and a client, held while the test takes
/// its turn.
struct Rig {
    _turn: std::sync::MutexGuard<'static, ()>,
    _dir: tempfile::TempDir,
    p: People,
    server: Server,
    base: String,
    /// The operations listener, where the metrics are read.
    ops: String,
    client: reqwest::blocking::Client,
}

impl Rig {
    fn new() -> Rig {
        let turn = TURN.lock().unwrap_or_else(|p| p.into_inner());
        let dir = tempfile::tempdir().expect("a directory");
        let p = people();
        let server = server(&dir, &p);
        Rig {
            _turn: turn,
            base: format!("http://{}", server.addr()),
            ops: format!(
                "http://{}",
                server.ops_addr().expect("an operations listener")
            ),
            _dir: dir,
            p,
            server,
            client: reqwest::blocking::Client::builder()
                .timeout(PATIENCE)
                .build()
                .expect("a client"),
        }
    }
}

fn open(client: &reqwest::blocking::Client, base: &str, token: &str, id: &str, role: &str) {
    let r = client
        .post(format!("{base}/v1/tasks"))
        .bearer_auth(token)
        .json(&json!({"id": id, "run": "r", "kind": "k", "candidate_roles": [role]}))
        .send()
        .expect("open");
    assert!(r.status().is_success(), "{:?}", r.text());
}

#[test]
fn a_tenants_streams_make_one_read_per_commit_between_them() {
    let Rig {
        _turn,
        _dir,
        p,
        server,
        base,
        ops,
        client,
    } = Rig::new();

    let before = reads(&client, &ops);
    let since = |now: (u64, u64)| (now.0 - before.0, now.1 - before.1);
    // Twelve streams of acme (a service's and a reviewer's) and two of
    // globex, all at their feed's head.
    let mut acme = Vec::new();
    for i in 0..12 {
        let token = if i % 2 == 0 { &p.sam } else { &p.alice };
        let rx = subscribe(&client, &base, token);
        let ready = rx.recv_timeout(PATIENCE).expect("ready");
        assert!(ready["position"].is_string(), "{ready}");
        acme.push(rx);
    }
    let globex: Vec<_> = (0..2)
        .map(|_| {
            let rx = subscribe(&client, &base, &p.gus);
            rx.recv_timeout(PATIENCE).expect("ready");
            rx
        })
        .collect();

    // A stream reads once after its `ready`; with no commit between the
    // streams, each tenant's first stream makes the read and the rest take
    // it.
    until(|| {
        let now = since(reads(&client, &ops));
        now.0 + now.1 >= 14
    });
    assert_eq!(
        since(reads(&client, &ops)),
        (2, 12),
        "the first reads, made and taken"
    );

    // Commits one at a time, each waited for at every acme stream: each
    // wakes the twelve at one position, and they read it once.
    for k in 0..10 {
        let id = format!("t-{k}");
        open(&client, &base, &p.sam, &id, "finance");
        for rx in &acme {
            let v = rx.recv_timeout(PATIENCE).expect("the event");
            assert_eq!(v["change"]["task"]["id"], id.as_str(), "{v}");
        }
    }
    assert_eq!(
        since(reads(&client, &ops)),
        (2 + 10, 12 + 10 * 11),
        "one read per commit, taken by the other eleven"
    );
    // globex's streams heard nothing of acme's commits and read nothing.
    for rx in &globex {
        assert!(rx.try_recv().is_err());
    }
    server.shutdown().expect("a clean shutdown");
}

#[test]
fn a_waiting_claim_is_woken_only_by_a_change_that_could_give_it_something() {
    let Rig {
        _turn,
        _dir,
        p,
        server,
        base,
        ops,
        client,
    } = Rig::new();
    let post = |token: &str, path: &str, body: Value| {
        let (client, base, token, path) = (
            client.clone(),
            base.clone(),
            token.to_owned(),
            path.to_owned(),
        );
        std::thread::spawn(move || -> Value {
            let r = client
                .post(format!("{base}{path}"))
                .bearer_auth(&token)
                .json(&body)
                .send()
                .expect("a long-poll");
            assert!(r.status().is_success(), "{:?}", r.text());
            r.json().expect("JSON")
        })
    };
    let waiting = || metric(&client, &ops, "leasehold_requests_waiting");
    let before = (
        calls(&client, &ops, "claim-next"),
        calls(&client, &ops, "claim-due"),
    );

    // Four finance reviewers wait on claim-next, two workers on claim-due
    // for one timer each.
    let reviewers: Vec<_> = (0..4)
        .map(|_| {
            post(
                &p.alice,
                "/v1/queue/claim-next",
                json!({"wait_ms": 30000, "lease_ms": 60000}),
            )
        })
        .collect();
    let workers: Vec<_> = (0..2)
        .map(|_| {
            post(
                &p.sam,
                "/v1/timers/claim-due",
                json!({"wait_ms": 30000, "lease_ms": 60000, "limit": 1}),
            )
        })
        .collect();
    until(|| waiting() == 6);
    let next0 = calls(&client, &ops, "claim-next");
    let due0 = calls(&client, &ops, "claim-due");
    // Each tried, read where the feed stands, and tried once more.
    assert_eq!((next0 - before.0, due0 - before.1), (8, 4));

    // Changes that give a finance reviewer nothing, and a worker no timer:
    // legal's tasks opened, one claimed and settled.
    for k in 0..6 {
        open(&client, &base, &p.sam, &format!("legal-{k}"), "legal");
    }
    let r = client
        .post(format!("{base}/v1/tasks/legal-0/claim"))
        .bearer_auth(&p.lena)
        .json(&json!({}))
        .send()
        .expect("claim");
    assert!(r.status().is_success(), "{:?}", r.text());
    let r = client
        .post(format!("{base}/v1/tasks/legal-0/settle"))
        .bearer_auth(&p.lena)
        .json(&json!({"settlement": "completed"}))
        .send()
        .expect("settle");
    assert!(r.status().is_success(), "{:?}", r.text());

    // One finance task: the four try once each, one has it.
    open(&client, &base, &p.sam, "fin-0", "finance");
    until(|| calls(&client, &ops, "claim-next") >= next0 + 4 && waiting() == 5);
    assert_eq!(
        calls(&client, &ops, "claim-next"),
        next0 + 4,
        "the reviewers tried again for the finance task only"
    );
    assert_eq!(
        calls(&client, &ops, "claim-due"),
        due0,
        "a worker waiting for timers was woken by tasks' changes"
    );
    // Three more finance tasks for the three still waiting.
    for k in 1..4 {
        open(&client, &base, &p.sam, &format!("fin-{k}"), "finance");
    }
    let mut got: Vec<String> = reviewers
        .into_iter()
        .map(|r| {
            let v = r.join().expect("a reviewer");
            v["task"]["id"].as_str().expect("a task").to_owned()
        })
        .collect();
    got.sort();
    assert_eq!(got, ["fin-0", "fin-1", "fin-2", "fin-3"]);
    // Two timers due at once: a change of a timer wakes the workers.
    for effect in ["e1", "e2"] {
        let r = client
            .post(format!("{base}/v1/timers"))
            .bearer_auth(&p.sam)
            .json(
                &json!({"run": "r", "effect": effect, "step": 1, "phase": "forward", "fire_at": 1}),
            )
            .send()
            .expect("arm");
        assert!(r.status().is_success(), "{:?}", r.text());
    }
    let mut fired: Vec<String> = workers
        .into_iter()
        .map(|w| {
            let v = w.join().expect("a worker");
            let timers = v["timers"].as_array().expect("timers");
            assert_eq!(timers.len(), 1, "{v}");
            timers[0]["effect"].as_str().expect("an effect").to_owned()
        })
        .collect();
    fired.sort();
    assert_eq!(fired, ["e1", "e2"]);
    server.shutdown().expect("a clean shutdown");
}

/// A reviewer's refusal about a task it may not see costs what one about a
/// missing task does: the verb, then one read of the task, whichever it is,
/// and both are answered 404 alike. Counted by the server's own metrics.
#[test]
fn a_hidden_task_and_a_missing_one_cost_a_reviewer_the_same_calls() {
    let Rig {
        _turn,
        _dir,
        p,
        server: _server,
        base,
        ops,
        client,
    } = Rig::new();
    open(&client, &base, &p.sam, "legal-1", "legal");
    let count = |verb: &str| calls(&client, &ops, verb);
    let mut costs = Vec::new();
    for id in ["legal-1", "no-such-task"] {
        for (verb, path, body) in [
            ("release", "release", json!({})),
            ("renew", "renew", json!({"lease_ms": 1000})),
            ("settle", "settle", json!({"settlement": "completed"})),
        ] {
            let before = (count(verb), count("get"));
            let r = client
                .post(format!("{base}/v1/tasks/{id}/{path}"))
                .bearer_auth(&p.alice)
                .json(&body)
                .send()
                .expect("answered");
            assert_eq!(r.status(), 404, "{verb} {id}");
            let problem: Value = r.json().expect("a problem");
            assert_eq!(problem["detail"], format!("no task {id}"));
            costs.push((verb, count(verb) - before.0, count("get") - before.1));
        }
    }
    let (hidden, missing) = costs.split_at(3);
    assert_eq!(
        hidden, missing,
        "the same calls for a hidden and a missing task"
    );
    assert!(
        hidden.iter().all(|&(_, v, g)| v == 1 && g == 1),
        "{hidden:?}"
    );
}

/// A reviewer's JSON read of the feed reads at most this many pages of the
/// feed, however many changes it may not see lie ahead (docs/service.md).
const REVIEWER_PAGES: u64 = 4;

/// A reviewer's read of the feed costs the same whatever lies hidden behind
/// its position: with far more changes it may not see ahead than one
/// request reads, each request makes at most `REVIEWER_PAGES` reads of the
/// feed and answers a `next` that goes on from where it stopped, and
/// following `next` reaches the change it may see. Counted by the server's
/// own metrics.
#[test]
fn a_reviewers_read_costs_a_bounded_number_of_pages_whatever_lies_hidden() {
    let Rig {
        _turn,
        _dir,
        p,
        server: _server,
        base,
        ops,
        client,
    } = Rig::new();
    let read = |after: Option<&str>| -> Value {
        let mut url = format!("{base}/v1/events?limit=10");
        if let Some(a) = after {
            url.push_str(&format!("&after={a}"));
        }
        let r = client
            .get(url)
            .bearer_auth(&p.alice)
            .send()
            .expect("answered");
        assert_eq!(r.status(), 200);
        r.json().expect("JSON")
    };
    let start = read(None);
    assert_eq!(start["entries"], json!([]));
    // Ten pages of changes alice may not see, then one she may.
    let hidden = 10 * 100;
    for i in 0..hidden {
        open(&client, &base, &p.sam, &format!("legal-{i}"), "legal");
    }
    open(&client, &base, &p.sam, "fin-1", "finance");
    let mut after = start["next"].as_str().expect("next").to_owned();
    let mut requests = 0;
    let found = loop {
        requests += 1;
        assert!(requests <= hidden / 100 + 2, "never reached the change");
        let before = calls(&client, &ops, "feed");
        let page = read(Some(&after));
        let made = calls(&client, &ops, "feed") - before;
        assert!(
            made <= REVIEWER_PAGES,
            "request {requests}: {made} reads of the feed"
        );
        let entries = page["entries"].as_array().expect("entries");
        let next = page["next"].as_str().expect("next").to_owned();
        if !entries.is_empty() {
            break entries.clone();
        }
        // Stopped at its bound: not at the feed's end, and reading on
        // from `next` goes further.
        assert_ne!(page["next"], page["head"], "request {requests}");
        assert_ne!(next, after, "request {requests} went nowhere");
        after = next;
    };
    assert!(requests > 1, "one request read every hidden change");
    assert_eq!(found.len(), 1);
    assert_eq!(found[0]["change"]["task"]["id"], "fin-1");
}
