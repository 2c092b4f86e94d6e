//! Event streams of one tenant sharing their reads of the feed, counted by
//! the server's own metric. A binary of its own: the metrics are the
//! process's, and here no other test's streams add to them.

use std::io::{BufRead, BufReader};
use std::time::{Duration, Instant};

use leasehold_host::Engine;
use leasehold_serve::{
    Config, Credentials, Options, Principal, Scope, Server, TokenTable, new_token,
};
use serde_json::{Value, json};

/// A bound on a failure, never a pace the test relies on.
const PATIENCE: Duration = Duration::from_secs(60);

struct People {
    table: TokenTable,
    sam: String,
    alice: String,
    gus: String,
}

fn people() -> People {
    let mut table = TokenTable::default();
    let mut token = |tenant: &str, actor: &str, scope: Scope| {
        let t = new_token().expect("random");
        table.insert(
            &t,
            Principal {
                tenant: tenant.into(),
                actor: actor.into(),
                roles: vec!["finance".into()],
                scope,
            },
        );
        t
    };
    let sam = token("acme", "sam", Scope::Service);
    let alice = token("acme", "alice", Scope::Reviewer);
    let gus = token("globex", "gus", Scope::Reviewer);
    People {
        table,
        sam,
        alice,
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

/// Reads made and taken so far: `leasehold_event_reads_total{read}`.
fn reads(client: &reqwest::blocking::Client, base: &str) -> (u64, u64) {
    let text = client
        .get(format!("{base}/metrics"))
        .send()
        .expect("metrics")
        .text()
        .expect("text");
    let count = |how: &str| {
        let needle = format!("leasehold_event_reads_total{{read=\"{how}\"}} ");
        text.lines()
            .find_map(|l| l.strip_prefix(&needle))
            .map_or(0, |n| n.trim().parse().expect("a count"))
    };
    (count("own"), count("shared"))
}

#[test]
fn a_tenants_streams_make_one_read_per_commit_between_them() {
    let dir = tempfile::tempdir().expect("a directory");
    let p = people();
    let server = Server::start(Config {
        db: dir.path().join("db").to_string_lossy().into_owned(),
        listen: "127.0.0.1:0".parse().expect("an address"),
        credentials: Credentials {
            tokens: p.table.clone(),
            jwt: None,
        },
        reload: None,
        options: Options {
            sweep: false,
            ..Options::default()
        },
        engine: Engine::builder(),
        tls: None,
        cursor_key: None,
        handle_signals: false,
    })
    .expect("a server");
    let base = format!("http://{}", server.addr());
    let client = reqwest::blocking::Client::builder()
        .timeout(PATIENCE)
        .build()
        .expect("a client");

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
    let since = Instant::now();
    let mut now = reads(&client, &base);
    while now.0 + now.1 < 14 && since.elapsed() < PATIENCE {
        std::thread::sleep(Duration::from_millis(10));
        now = reads(&client, &base);
    }
    assert_eq!(now, (2, 12), "the first reads, made and taken");

    // Commits one at a time, each waited for at every acme stream: each
    // wakes the twelve at one position, and they read it once.
    for k in 0..10 {
        let id = format!("t-{k}");
        let r = client
            .post(format!("{base}/v1/tasks"))
            .bearer_auth(&p.sam)
            .json(&json!({"id": id, "run": "r", "kind": "k", "candidate_roles": ["finance"]}))
            .send()
            .expect("open");
        assert!(r.status().is_success(), "{:?}", r.text());
        for rx in &acme {
            let v = rx.recv_timeout(PATIENCE).expect("the event");
            assert_eq!(v["task"], id.as_str(), "{v}");
        }
    }
    assert_eq!(
        reads(&client, &base),
        (2 + 10, 12 + 10 * 11),
        "one read per commit, taken by the other eleven"
    );
    // globex's streams heard nothing of acme's commits and read nothing.
    for rx in &globex {
        assert!(rx.try_recv().is_err());
    }
    server.shutdown().expect("a clean shutdown");
}
