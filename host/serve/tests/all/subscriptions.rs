//! Webhook subscriptions over real HTTP: an operator adds one pointing at
//! a receiver running in the test, task changes arrive there signed in
//! the Standard Webhooks format and in order per task, and pausing,
//! resuming, rotating, replaying and deleting do what they say; a server
//! with the default policy refuses endpoints it may not reach; only a
//! tenant's operators see its subscriptions; a subscription outlives a
//! restart and resumes where it was acknowledged. Every wait is for a
//! condition, within a generous bound.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicU16, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::http::{HeaderMap, StatusCode};
use leasehold_serve::{IpNet, Options, WebhookOptions};
use leasehold_webhooks::Secret;
use serde_json::{Value, json};

use crate::harness::{
    Reply, Service, claims, each_backend, each_backend_with, jwt, new_task, test_options, validate,
};

/// How long a test waits for what must happen.
const BOUND: Duration = Duration::from_secs(60);

/// The test options, with endpoints on loopback over plain http allowed,
/// as `--webhooks-allow-http --webhooks-allow-range 127.0.0.0/8` allow
/// them.
fn push_options() -> Options {
    Options {
        webhooks: WebhookOptions {
            allow_http: true,
            allow_ranges: vec!["127.0.0.0/8".parse::<IpNet>().expect("a range")],
            ..WebhookOptions::default()
        },
        ..test_options()
    }
}

/// One request the receiver heard.
#[derive(Clone, Debug)]
struct Got {
    id: String,
    timestamp: i64,
    signature: String,
    body: Vec<u8>,
}

impl Got {
    fn json(&self) -> Value {
        serde_json::from_slice(&self.body).expect("a JSON body")
    }

    /// The task and history number a task change carries.
    fn task_seq(&self) -> Option<(String, u64)> {
        let v = self.json();
        let t = &v["data"]["change"]["task"];
        Some((t["id"].as_str()?.to_owned(), t["entry"]["seq"].as_u64()?))
    }
}

/// A webhook receiver on 127.0.0.1, on a runtime of its own: it records
/// every request and answers with the status it is set to (200).
struct Receiver {
    url: String,
    got: Arc<Mutex<Vec<Got>>>,
    status: Arc<AtomicU16>,
    _rt: tokio::runtime::Runtime,
}

impl Receiver {
    fn start() -> Receiver {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("a runtime");
        let listener = rt
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        let got: Arc<Mutex<Vec<Got>>> = Arc::default();
        let status = Arc::new(AtomicU16::new(200));
        let (g, s) = (got.clone(), status.clone());
        let app = axum::Router::new().fallback(move |headers: HeaderMap, body: Bytes| {
            let (g, s) = (g.clone(), s.clone());
            async move {
                let header = |n: &str| {
                    headers
                        .get(n)
                        .and_then(|v| v.to_str().ok())
                        .unwrap_or("")
                        .to_owned()
                };
                g.lock().expect("lock").push(Got {
                    id: header("webhook-id"),
                    timestamp: header("webhook-timestamp").parse().unwrap_or(0),
                    signature: header("webhook-signature"),
                    body: body.to_vec(),
                });
                StatusCode::from_u16(s.load(Ordering::SeqCst)).unwrap_or(StatusCode::OK)
            }
        });
        rt.spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Receiver {
            url: format!("http://{addr}/hooks"),
            got,
            status,
            _rt: rt,
        }
    }

    fn got(&self) -> Vec<Got> {
        self.got.lock().expect("lock").clone()
    }

    /// Waits until `done` holds of what arrived, and answers it.
    #[track_caller]
    fn wait_until(&self, what: &str, done: impl Fn(&[Got]) -> bool) -> Vec<Got> {
        let started = Instant::now();
        loop {
            let got = self.got();
            if done(&got) {
                return got;
            }
            assert!(
                started.elapsed() < BOUND,
                "waited {BOUND:?} for {what}; got {} requests",
                got.len()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Waits until every one of `tasks`' first `seqs` history entries has
    /// arrived.
    #[track_caller]
    fn wait_for_entries(&self, tasks: &[&str], seqs: u64) -> Vec<Got> {
        self.wait_until(&format!("entries 1..={seqs} of {tasks:?}"), |got| {
            let seen: BTreeSet<(String, u64)> = got.iter().filter_map(Got::task_seq).collect();
            tasks
                .iter()
                .all(|t| (1..=seqs).all(|s| seen.contains(&((*t).to_owned(), s))))
        })
    }
}

/// Waits until `f` answers something, and answers it.
#[track_caller]
fn wait_for<T>(what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let started = Instant::now();
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(started.elapsed() < BOUND, "waited {BOUND:?} for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Adds a subscription as olga; answers its id, its secret and the answer.
fn subscribe(svc: &Service, body: Value) -> (String, Secret, Value) {
    let r = svc.call("POST", "/v1/subscriptions", Some("olga"), Some(body));
    svc.conforms("POST", "/v1/subscriptions", &r);
    assert_eq!(r.status, 201, "{r:#?}");
    let id = r.body["subscription"]["id"]
        .as_str()
        .expect("an id")
        .to_owned();
    let secret = Secret::parse(r.body["secret"].as_str().expect("a secret")).expect("whsec_");
    (id, secret, r.body["subscription"].clone())
}

/// One subscription, as olga reads it, held to the document.
fn read(svc: &Service, id: &str) -> Value {
    let r = svc.call(
        "GET",
        &format!("/v1/subscriptions/{id}"),
        Some("olga"),
        None,
    );
    svc.conforms("GET", "/v1/subscriptions/{id}", &r);
    r.expect_ok().clone()
}

/// `action` (`pause`, `resume`, `rotate`, `replay`) of subscription `id`.
fn act(svc: &Service, id: &str, action: &str, body: Option<Value>) -> Reply {
    let r = svc.call(
        "POST",
        &format!("/v1/subscriptions/{id}/{action}"),
        Some("olga"),
        body,
    );
    svc.conforms("POST", &format!("/v1/subscriptions/{{id}}/{action}"), &r);
    r
}

/// Opens task `id`, has alice claim it and settle it: three history
/// entries, three changes in the feed.
fn life(svc: &Service, id: &str) {
    let mut t = new_task(id);
    t.as_object_mut().map(|o| o.remove("created_at"));
    svc.call("POST", "/v1/tasks", Some("sam"), Some(t))
        .expect_ok();
    svc.call(
        "POST",
        &format!("/v1/tasks/{id}/claim"),
        Some("alice"),
        Some(json!({})),
    )
    .expect_ok();
    svc.call(
        "POST",
        &format!("/v1/tasks/{id}/settle"),
        Some("alice"),
        Some(json!({"settlement": "completed"})),
    )
    .expect_ok();
}

/// Opens task `id`: one change.
fn open(svc: &Service, id: &str) {
    let mut t = new_task(id);
    t.as_object_mut().map(|o| o.remove("created_at"));
    svc.call("POST", "/v1/tasks", Some("sam"), Some(t))
        .expect_ok();
}

/// Each task's history numbers, in the order they first arrived.
fn first_arrivals(got: &[Got]) -> BTreeMap<String, Vec<u64>> {
    let mut seen = BTreeSet::new();
    let mut out: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    for (task, seq) in got.iter().filter_map(Got::task_seq) {
        if seen.insert((task.clone(), seq)) {
            out.entry(task).or_default().push(seq);
        }
    }
    out
}

/// Every request verifies under `secret`, and one change always came
/// under one id.
#[track_caller]
fn signed_and_stable(got: &[Got], secret: &Secret) {
    let mut ids: BTreeMap<(String, u64), BTreeSet<String>> = BTreeMap::new();
    for g in got {
        assert!(
            secret.verify(&g.signature, &g.id, g.timestamp, &g.body),
            "a delivery did not verify: {g:?}"
        );
        if let Some(k) = g.task_seq() {
            ids.entry(k).or_default().insert(g.id.clone());
        }
    }
    for (k, v) in ids {
        assert_eq!(v.len(), 1, "{k:?} came under several ids: {v:?}");
    }
}

/// Waits until the stored position has caught up with what this server
/// delivered, and the lag is nil: every change acknowledged is saved.
fn settled(svc: &Service, id: &str) -> Value {
    wait_for("the position to be saved", || {
        let s = read(svc, id);
        let d = &s["delivery"];
        let saved = d["here"] == true
            && d["in_flight"] == 0
            && d["lag_entries"] == 0
            && s["position"].as_str().is_some()
            && s["position"] == d["delivered_to"];
        saved.then_some(s)
    })
}

#[test]
fn changes_arrive_signed_in_order_per_task_and_the_operator_sees_them() {
    each_backend_with(push_options(), |svc| {
        let r = Receiver::start();
        let (id, secret, shown) =
            subscribe(svc, json!({"url": r.url, "filter": {"timers": false}}));
        assert!(id.starts_with("sub_") && id.len() == 4 + 32, "{id}");
        assert_eq!(shown["state"], "active");
        assert_eq!(shown["keys"], json!([{"until": null}]));
        assert_eq!(shown["filter"]["timers"], false);
        assert_eq!(shown["filter"]["tasks"], true);
        for t in ["t-1", "t-2", "t-3"] {
            life(svc, t);
        }
        // A timer the filter leaves out.
        svc.call(
            "POST",
            "/v1/timers",
            Some("sam"),
            Some(crate::harness::new_timer("run-1", "e-1", 10)),
        )
        .expect_ok();
        let got = r.wait_for_entries(&["t-1", "t-2", "t-3"], 3);
        signed_and_stable(&got, &secret);
        for (task, seqs) in first_arrivals(&got) {
            assert_eq!(seqs, [1, 2, 3], "{task} arrived out of order");
        }
        let doc = svc.openapi().clone();
        let payload = json!({"$ref": "#/components/schemas/WebhookPayload"});
        for g in &got {
            let body = g.json();
            validate(&doc, &payload, &body, "$").expect("a payload as documented");
            assert_eq!(body["subscription"], id.as_str());
            assert!(
                body["type"]
                    .as_str()
                    .is_some_and(|t| t.starts_with("task."))
            );
            assert!(g.id.starts_with("msg_"), "{}", g.id);
        }
        let settle = got
            .iter()
            .find(|g| g.task_seq() == Some(("t-1".to_owned(), 3)))
            .expect("t-1's settle");
        assert_eq!(settle.json()["type"], "task.settle");
        assert_eq!(
            settle.json()["data"]["change"]["task"]["entry"]["after"],
            "completed"
        );
        let s = settled(svc, &id);
        assert_eq!(s["delivery"]["here"], true);
        let last = s["delivery"]["last_attempts"]
            .as_array()
            .expect("attempts")
            .last()
            .expect("an attempt")
            .clone();
        assert_eq!(last["status"], 200);
        assert_eq!(last["outcome"], "200");
        assert!(last["latency_ms"].as_u64().is_some());
        assert!(s["lease"]["holder"].as_str().is_some(), "{s:#}");
        // The list shows it too, and the metrics count it.
        let list = svc.call("GET", "/v1/subscriptions", Some("olga"), None);
        svc.conforms("GET", "/v1/subscriptions", &list);
        let listed = list.expect_ok()["subscriptions"].clone();
        assert_eq!(listed.as_array().map(Vec::len), Some(1));
        assert_eq!(listed[0]["id"], id.as_str());
        let m = svc.call("GET", "/metrics", Some("olga"), None);
        assert_eq!(m.status, 200);
        let counted =
            format!("leasehold_webhook_delivered_total{{tenant=\"acme\",subscription=\"{id}\"}} ");
        let line = m
            .text
            .lines()
            .find(|l| l.starts_with(&counted))
            .unwrap_or_else(|| panic!("no {counted} in the metrics"));
        let n: f64 = line[counted.len()..].parse().expect("a number");
        assert!(n >= 9.0, "{line}");
        assert!(m.text.contains(&format!(
            "leasehold_webhook_attempt_seconds_count{{tenant=\"acme\",subscription=\"{id}\"}}"
        )));
    });
}

#[test]
fn pausing_stops_deliveries_and_resuming_sends_from_the_position() {
    each_backend_with(push_options(), |svc| {
        let r = Receiver::start();
        let (id, secret, _) = subscribe(svc, json!({"url": r.url}));
        open(svc, "p-1");
        r.wait_for_entries(&["p-1"], 1);
        let before = settled(svc, &id);
        let paused = act(
            svc,
            &id,
            "pause",
            Some(json!({"note": "receiver down for upgrade"})),
        );
        let p = paused.expect_ok();
        assert_eq!(p["state"], "paused");
        assert_eq!(p["note"], "receiver down for upgrade");
        assert_eq!(p["delivery"]["here"], false, "stopped before the answer");
        assert_eq!(p["revision"], before["revision"].as_u64().expect("n") + 1);
        assert_eq!(
            paused.headers.get("etag").and_then(|v| v.to_str().ok()),
            Some(format!("\"{}\"", p["revision"]).as_str())
        );
        let heard = r.got().len();
        open(svc, "p-2");
        open(svc, "p-3");
        // While paused, the position stays and the lag shows what is owed;
        // nothing reaches the receiver however often one looks.
        for _ in 0..10 {
            let s = read(svc, &id);
            assert_eq!(s["state"], "paused");
            assert_eq!(s["position"], before["position"]);
            assert_eq!(s["delivery"]["here"], false);
            assert_eq!(s["delivery"]["lag_entries"], 2);
            assert_eq!(r.got().len(), heard, "a paused subscription delivered");
            std::thread::sleep(Duration::from_millis(50));
        }
        // A stale revision is refused, and changes nothing.
        let stale = svc
            .client
            .post(svc.url(&format!("/v1/subscriptions/{id}/resume")))
            .bearer_auth(svc.tokens.get("olga"))
            .header("if-match", format!("\"{}\"", before["revision"]))
            .send()
            .expect("an answer");
        let stale = crate::harness::reply(stale);
        stale.expect_problem(412, "stale");
        assert_eq!(stale.body["revision"], p["revision"]);
        let resumed = act(svc, &id, "resume", None);
        assert_eq!(resumed.expect_ok()["state"], "active");
        assert_eq!(resumed.body["note"], Value::Null);
        let got = r.wait_for_entries(&["p-1", "p-2", "p-3"], 1);
        signed_and_stable(&got, &secret);
        // p-1 was acknowledged and saved before the pause: not sent again.
        let p1 = got
            .iter()
            .filter(|g| g.task_seq() == Some(("p-1".to_owned(), 1)))
            .count();
        assert_eq!(p1, 1, "an acknowledged, saved change was sent again");
    });
}

#[test]
fn a_rotated_key_signs_beside_the_new_one_until_its_overlap_ends() {
    each_backend_with(push_options(), |svc| {
        let r = Receiver::start();
        let (id, old, _) = subscribe(svc, json!({"url": r.url}));
        let rotated = act(svc, &id, "rotate", None);
        let body = rotated.expect_ok().clone();
        let new = Secret::parse(body["secret"].as_str().expect("a secret")).expect("whsec_");
        assert_ne!(new, old);
        let keys = body["subscription"]["keys"]
            .as_array()
            .expect("keys")
            .clone();
        assert_eq!(keys.len(), 2);
        assert_eq!(keys[1]["until"], Value::Null, "the new key is current");
        let until = keys[0]["until"].as_i64().expect("the old key's end");
        let day = 24 * 3600 * 1000;
        assert!(
            (until - body["subscription"]["created_at"].as_i64().expect("ms") - day).abs() < 60_000,
            "the old key signs a day more: {until}"
        );
        assert!(
            !rotated.text.contains(&old.to_whsec()),
            "an old secret shown again"
        );
        open(svc, "r-1");
        let got = r.wait_for_entries(&["r-1"], 1);
        let g = got.last().expect("a delivery");
        assert_eq!(g.signature.split(' ').count(), 2, "{}", g.signature);
        assert!(old.verify(&g.signature, &g.id, g.timestamp, &g.body));
        assert!(new.verify(&g.signature, &g.id, g.timestamp, &g.body));
        // With no overlap, the old keys stop signing at once.
        let again = act(svc, &id, "rotate", Some(json!({"overlap_ms": 0})));
        let newest =
            Secret::parse(again.expect_ok()["secret"].as_str().expect("a secret")).expect("whsec_");
        open(svc, "r-2");
        let got = r.wait_for_entries(&["r-2"], 1);
        let g = got
            .iter()
            .find(|g| g.task_seq() == Some(("r-2".to_owned(), 1)))
            .expect("r-2");
        assert_eq!(g.signature.split(' ').count(), 1, "{}", g.signature);
        assert!(newest.verify(&g.signature, &g.id, g.timestamp, &g.body));
        assert!(!new.verify(&g.signature, &g.id, g.timestamp, &g.body));
        // An overlap past seven days is refused.
        act(svc, &id, "rotate", Some(json!({"overlap_ms": 8 * day})))
            .expect_problem(400, "invalid");
    });
}

#[test]
fn deleting_stops_deliveries_at_once() {
    each_backend_with(push_options(), |svc| {
        let r = Receiver::start();
        let (id, _, _) = subscribe(svc, json!({"url": r.url}));
        open(svc, "d-1");
        r.wait_for_entries(&["d-1"], 1);
        let gone = svc.call(
            "DELETE",
            &format!("/v1/subscriptions/{id}"),
            Some("olga"),
            None,
        );
        svc.conforms("DELETE", "/v1/subscriptions/{id}", &gone);
        assert_eq!(gone.expect_ok()["removed"], true);
        let heard = r.got().len();
        open(svc, "d-2");
        for _ in 0..10 {
            assert_eq!(r.got().len(), heard, "a deleted subscription delivered");
            std::thread::sleep(Duration::from_millis(50));
        }
        svc.call(
            "GET",
            &format!("/v1/subscriptions/{id}"),
            Some("olga"),
            None,
        )
        .expect_problem(404, "not-found");
        let again = svc.call(
            "DELETE",
            &format!("/v1/subscriptions/{id}"),
            Some("olga"),
            None,
        );
        assert_eq!(again.expect_ok()["removed"], false);
        // Its counters went with it.
        let m = svc.call("GET", "/metrics", Some("olga"), None);
        assert_eq!(m.status, 200);
        assert!(
            !m.text.contains(&id),
            "a deleted subscription's counters stayed"
        );
    });
}

#[test]
fn a_replay_sends_again_under_the_same_ids_and_a_trimmed_position_is_refused() {
    each_backend_with(push_options(), |svc| {
        let r = Receiver::start();
        let (id, secret, shown) = subscribe(svc, json!({"url": r.url}));
        let start = shown["position"].clone();
        life(svc, "y-1");
        let first = r.wait_for_entries(&["y-1"], 3);
        let ids: BTreeMap<(String, u64), String> = first
            .iter()
            .filter_map(|g| Some((g.task_seq()?, g.id.clone())))
            .collect();
        settled(svc, &id);
        let heard = first.len();
        // From the position it was made at: y-1's changes again.
        let body = match start.as_str() {
            Some(p) => json!({"from": p}),
            None => json!({}),
        };
        let replayed = act(svc, &id, "replay", Some(body));
        assert_eq!(replayed.expect_ok()["state"], "active");
        assert_eq!(replayed.body["position"], start);
        let got = r.wait_until("y-1's changes again", |got| {
            got[heard.min(got.len())..]
                .iter()
                .filter_map(Got::task_seq)
                .collect::<BTreeSet<_>>()
                .len()
                == 3
        });
        signed_and_stable(&got, &secret);
        for g in &got[heard..] {
            let k = g.task_seq().expect("a task change");
            assert_eq!(
                ids.get(&k),
                Some(&g.id),
                "{k:?} was sent again under another id"
            );
        }
        // Once the feed is trimmed, its start is no longer held.
        settled(svc, &id);
        let t = svc.call(
            "POST",
            "/v1/events/trim",
            Some("olga"),
            Some(json!({"keep": 1})),
        );
        assert!(
            t.expect_ok()["feed_removed"]
                .as_u64()
                .is_some_and(|n| n >= 1),
            "{t:#?}"
        );
        let refused = act(svc, &id, "replay", Some(json!({})));
        refused.expect_problem(400, "invalid");
        assert_eq!(refused.body["field"], "from");
        let refused = act(svc, &id, "replay", Some(json!({"from": "f0.1"})));
        refused.expect_problem(400, "invalid");
        assert_eq!(refused.body["field"], "from");
        let unknown = act(svc, "sub_none", "replay", Some(json!({})));
        unknown.expect_problem(404, "not-found");
    });
}

#[test]
fn the_default_server_refuses_endpoints_it_may_not_reach() {
    each_backend(|svc| {
        for (url, says) in [
            ("http://hooks.example.com/in", "https"),
            ("https://127.0.0.1/in", "loopback"),
            ("https://[::1]/in", "loopback"),
            ("https://10.1.2.3/in", "private"),
            ("https://169.254.169.254/latest/meta-data/", "metadata"),
            ("https://[fd00::1]/in", "local"),
            ("https://user:pass@hooks.example.com/", "credentials"),
            ("ftp://hooks.example.com/", "URL"),
        ] {
            let r = svc.call(
                "POST",
                "/v1/subscriptions",
                Some("olga"),
                Some(json!({"url": url})),
            );
            svc.conforms("POST", "/v1/subscriptions", &r);
            r.expect_problem(400, "invalid");
            assert_eq!(r.body["field"], "url", "{url}: {r:#?}");
            let detail = r.body["detail"].as_str().expect("a detail");
            assert!(detail.contains(says), "{url}: {detail}");
        }
        // A public name is taken; a change to a refused URL is not.
        let (id, _, _) = subscribe(svc, json!({"url": "https://hooks.example.com/in"}));
        let patched = svc.call(
            "PATCH",
            &format!("/v1/subscriptions/{id}"),
            Some("olga"),
            Some(json!({"url": "https://127.0.0.1/in"})),
        );
        svc.conforms("PATCH", "/v1/subscriptions/{id}", &patched);
        patched.expect_problem(400, "invalid");
        assert_eq!(patched.body["field"], "url");
        // A change names what it changes; a filter matching nothing and a
        // position past the feed's head are refused too, naming them.
        svc.call(
            "PATCH",
            &format!("/v1/subscriptions/{id}"),
            Some("olga"),
            Some(json!({})),
        )
        .expect_problem(400, "invalid");
        let none = svc.call(
            "POST",
            "/v1/subscriptions",
            Some("olga"),
            Some(json!({"url": "https://hooks.example.com/in", "filter": {"tasks": false, "timers": false}})),
        );
        none.expect_problem(400, "invalid");
        assert_eq!(none.body["field"], "filter");
        let past = svc.call(
            "POST",
            "/v1/subscriptions",
            Some("olga"),
            Some(json!({"url": "https://hooks.example.com/in", "from": "f0.999"})),
        );
        past.expect_problem(400, "invalid");
        assert_eq!(past.body["field"], "from");
        // A change of filter moves the revision and answers its ETag.
        let changed = svc.call(
            "PATCH",
            &format!("/v1/subscriptions/{id}"),
            Some("olga"),
            Some(json!({"filter": {"settling_only": true, "kinds": ["approve"]}})),
        );
        svc.conforms("PATCH", "/v1/subscriptions/{id}", &changed);
        let c = changed.expect_ok();
        assert_eq!(c["revision"], 2);
        assert_eq!(c["filter"]["settling_only"], true);
        assert_eq!(c["filter"]["kinds"], json!(["approve"]));
        assert_eq!(
            changed.headers.get("etag").and_then(|v| v.to_str().ok()),
            Some("\"2\"")
        );
    });
}

#[test]
fn only_the_tenants_operators_see_its_subscriptions() {
    each_backend(|svc| {
        let (id, _, _) = subscribe(svc, json!({"url": "https://hooks.example.com/acme"}));
        for who in ["sam", "alice"] {
            svc.call("GET", "/v1/subscriptions", Some(who), None)
                .expect_problem(403, "forbidden");
            svc.call(
                "POST",
                "/v1/subscriptions",
                Some(who),
                Some(json!({"url": "https://hooks.example.com/x"})),
            )
            .expect_problem(403, "forbidden");
            svc.call("GET", &format!("/v1/subscriptions/{id}"), Some(who), None)
                .expect_problem(403, "forbidden");
        }
        // globex's operator finds nothing of acme's.
        let listed = svc.call("GET", "/v1/subscriptions", Some("gina"), None);
        assert_eq!(listed.expect_ok()["subscriptions"], json!([]));
        svc.call(
            "GET",
            &format!("/v1/subscriptions/{id}"),
            Some("gina"),
            None,
        )
        .expect_problem(404, "not-found");
        svc.call(
            "POST",
            &format!("/v1/subscriptions/{id}/pause"),
            Some("gina"),
            None,
        )
        .expect_problem(404, "not-found");
        let removed = svc.call(
            "DELETE",
            &format!("/v1/subscriptions/{id}"),
            Some("gina"),
            None,
        );
        assert_eq!(removed.expect_ok()["removed"], false);
        let (theirs, _, _) = subscribe_as(svc, "gina", "https://hooks.example.com/globex");
        let mine = svc.call("GET", "/v1/subscriptions", Some("olga"), None);
        let ids: Vec<Value> = mine.expect_ok()["subscriptions"]
            .as_array()
            .expect("a list")
            .iter()
            .map(|s| s["id"].clone())
            .collect();
        assert_eq!(ids, [json!(id)], "acme sees only its own, not {theirs}");
        read(svc, &id);
    });
}

/// Adds a subscription as `who`.
fn subscribe_as(svc: &Service, who: &str, url: &str) -> (String, Value, u16) {
    let r = svc.call(
        "POST",
        "/v1/subscriptions",
        Some(who),
        Some(json!({"url": url})),
    );
    let id = r.body["subscription"]["id"]
        .as_str()
        .unwrap_or("")
        .to_owned();
    (id, r.body.clone(), r.status)
}

#[test]
fn a_subscription_outlives_a_restart_and_resumes_where_it_was_acknowledged() {
    each_backend_with(push_options(), |svc| {
        let r = Receiver::start();
        let (id, secret, _) = subscribe(svc, json!({"url": r.url}));
        // A tenant no token names, whose operator signs in with a JWT: it
        // is delivered for once it holds a subscription, and after a
        // restart because its stored data holds one.
        let initech = jwt("RS256", &claims("initech", "ian", "operator", &[]));
        let theirs = Receiver::start();
        let made = svc.call(
            "POST",
            "/v1/subscriptions",
            Some(&initech),
            Some(json!({"url": theirs.url, "filter": {"tasks": false}})),
        );
        assert_eq!(made.status, 201, "{made:#?}");
        let arm = |svc: &Service, effect: &str| {
            svc.call(
                "POST",
                "/v1/timers",
                Some(&jwt("RS256", &claims("initech", "svc", "service", &[]))),
                Some(crate::harness::new_timer("run-i", effect, 253402300799999)),
            )
            .expect_ok();
        };
        arm(svc, "i-1");
        theirs.wait_until("initech's timer", |got| !got.is_empty());
        for t in ["s-1", "s-2"] {
            life(svc, t);
        }
        r.wait_for_entries(&["s-1", "s-2"], 3);
        let before = settled(svc, &id);
        let holder = before["lease"]["holder"].clone();
        let heard = r.got().len();
        svc.stop();
        svc.restart();
        let after = read(svc, &id);
        assert_eq!(
            after["position"], before["position"],
            "the position was kept"
        );
        assert_eq!(after["revision"], before["revision"]);
        life(svc, "s-3");
        let got = r.wait_for_entries(&["s-1", "s-2", "s-3"], 3);
        signed_and_stable(&got, &secret);
        let again: Vec<(String, u64)> = got[heard..]
            .iter()
            .filter_map(Got::task_seq)
            .filter(|(t, _)| t != "s-3")
            .collect();
        assert!(again.is_empty(), "sent again after the restart: {again:?}");
        let now = settled(svc, &id);
        assert_ne!(now["lease"]["holder"], holder, "a new server holds it");
        arm(svc, "i-2");
        theirs.wait_until("initech's second timer", |got| {
            got.iter()
                .any(|g| g.json()["data"]["change"]["timer"]["effect"] == "i-2")
        });
    });
}

#[test]
fn a_failing_endpoint_shows_its_attempts_and_one_answering_410_is_paused() {
    each_backend_with(push_options(), |svc| {
        let r = Receiver::start();
        r.status.store(503, Ordering::SeqCst);
        let (id, _, _) = subscribe(svc, json!({"url": r.url}));
        open(svc, "f-1");
        // This server's worker shows the failure and the retry it plans;
        // the row keeps the failed attempt for every server to show.
        let s = wait_for("a failed attempt, recorded", || {
            let s = read(svc, &id);
            let failed = s["delivery"]["last_attempts"]
                .as_array()
                .and_then(|a| a.last())
                .is_some_and(|a| a["status"] == 503 && a["outcome"] == "503");
            let recorded = s["attempts"]
                .as_array()
                .is_some_and(|a| a.iter().any(|a| a["status"] == 503));
            (failed && recorded && s["delivery"]["next_retry"].is_i64()).then_some(s)
        });
        assert_eq!(s["state"], "active");
        assert_eq!(s["delivery"]["lag_entries"], 1, "{s:#}");
        // A receiver that answers 410 Gone has the subscription paused.
        r.status.store(410, Ordering::SeqCst);
        let paused = wait_for("the pause a 410 makes", || {
            let s = read(svc, &id);
            (s["state"] == "paused").then_some(s)
        });
        assert!(
            paused["note"].as_str().is_some_and(|n| n.contains("410")),
            "{paused:#}"
        );
        // The state gauge says so, for an alert.
        let gauge = format!(
            "leasehold_webhook_state{{tenant=\"acme\",subscription=\"{id}\",state=\"paused\"}} 1"
        );
        wait_for("the state gauge to show the pause", || {
            let m = svc.call("GET", "/metrics", Some("olga"), None);
            m.text.contains(&gauge).then_some(())
        });
        // Resumed, the change still owed is sent again, and taken.
        r.status.store(200, Ordering::SeqCst);
        act(svc, &id, "resume", None).expect_ok();
        r.wait_until("f-1 acknowledged", |got| got.len() >= 3);
        settled(svc, &id);
    });
}

/// A subscription is the tenant's: the operator credential that made it
/// revoked (the credentials read again without it), its deliveries go on.
#[test]
fn a_revoked_operators_subscription_keeps_delivering() {
    use leasehold_serve::{Config, Credentials, Principal, Scope, Server, TokenTable};
    let dir = tempfile::tempdir().expect("temp dir");
    let principal = |tenant: &str, actor: &str, scope: Scope| Principal {
        tenant: tenant.to_owned(),
        actor: actor.to_owned(),
        roles: Vec::new(),
        scope,
    };
    let (olga, sam) = ("lh_revoked_olga", "lh_revoked_sam");
    let mut before = TokenTable::default();
    before.insert(olga, principal("acme", "olga", Scope::Operator));
    before.insert(sam, principal("acme", "sam", Scope::Service));
    let mut after = TokenTable::default();
    after.insert(sam, principal("acme", "sam", Scope::Service));
    let server = Server::start(Config {
        db: dir
            .path()
            .join("revoked.redb")
            .to_string_lossy()
            .into_owned(),
        listen: "127.0.0.1:0".parse().expect("addr"),
        credentials: Credentials {
            tokens: before,
            jwt: None,
        },
        options: push_options(),
        engine: leasehold_host::Engine::builder(),
        tls: None,
        reload: Some(Arc::new(move || {
            Ok(Credentials {
                tokens: after.clone(),
                jwt: None,
            })
        })),
        cursor_key: None,
        handle_signals: false,
    })
    .expect("the server starts");
    let base = format!("http://{}", server.addr());
    let client = reqwest::blocking::Client::new();
    let call = |token: &str, method: reqwest::Method, path: &str, body: Value| {
        crate::harness::reply(
            client
                .request(method, format!("{base}{path}"))
                .bearer_auth(token)
                .json(&body)
                .send()
                .expect("an answer"),
        )
    };
    let r = Receiver::start();
    let made = call(
        olga,
        reqwest::Method::POST,
        "/v1/subscriptions",
        json!({"url": r.url}),
    );
    assert_eq!(made.status, 201, "{made:#?}");
    let open = |id: &str| {
        let mut t = new_task(id);
        t.as_object_mut().map(|o| o.remove("created_at"));
        call(sam, reqwest::Method::POST, "/v1/tasks", t).expect_ok();
    };
    open("v-1");
    r.wait_for_entries(&["v-1"], 1);
    assert_eq!(server.reload_credentials(), Ok((1, 0)));
    call(olga, reqwest::Method::GET, "/v1/subscriptions", json!({}))
        .expect_problem(401, "unauthorized");
    open("v-2");
    r.wait_for_entries(&["v-1", "v-2"], 1);
    server.shutdown().expect("stops");
}
