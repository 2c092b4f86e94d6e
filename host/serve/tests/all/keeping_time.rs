//! The server keeps time by itself: a lapsed claim comes back and a due
//! task acts with no client call; workers long-poll `claim-due` and
//! `claim-next`; a waiter that goes away claims nothing; two servers on one
//! PostgreSQL database wake each other's waiters and reclaim a lease once.
//! The server runs on the real clock here (the sweeper's own tests inject
//! one), so each test waits for a condition, bounded only against a hang,
//! and asserts what happened, never how soon.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use leasehold_serve::Options;

use crate::harness::{Service, Store, each_backend_with, new_timer, stores, test_options};

/// Long-poll tests read a process-wide gauge of waiting requests, so they
/// run one at a time.
static WAITERS: Mutex<()> = Mutex::new(());

pub fn serially() -> std::sync::MutexGuard<'static, ()> {
    WAITERS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Waits until `done` holds, failing after two minutes: the bound of a hang.
pub fn eventually(what: &str, mut done: impl FnMut() -> bool) {
    let until = Instant::now() + Duration::from_secs(120);
    while !done() {
        assert!(Instant::now() < until, "waited two minutes for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn unix_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("after 1970")
        .as_millis() as i64
}

/// The tests' options with the sweeper on, as `leasehold serve` runs.
fn sweeping() -> Options {
    Options {
        sweep: true,
        ..test_options()
    }
}

fn each_backend(body: impl Fn(&mut Service)) {
    each_backend_with(sweeping(), body);
}

/// A task with no due time, so that the sweeper leaves it be.
fn new_task(id: &str) -> Value {
    let mut t = crate::harness::new_task(id);
    t["due_at"] = Value::Null;
    t["created_at"] = json!(unix_ms());
    t
}

fn state(svc: &Service, id: &str) -> String {
    let r = svc.call("GET", &format!("/v1/tasks/{id}"), Some("sam"), None);
    r.expect_ok()["state"].as_str().expect("state").to_owned()
}

fn history(svc: &Service, id: &str) -> Vec<String> {
    let r = svc.call("GET", &format!("/v1/tasks/{id}/history"), Some("sam"), None);
    r.expect_ok()["entries"]
        .as_array()
        .expect("entries")
        .iter()
        .map(|e| e["verb"].as_str().expect("verb").to_owned())
        .collect()
}

/// A metric's value summed over its series whose labels contain `labels`.
pub fn metric(svc: &Service, name: &str, labels: &str) -> f64 {
    let text = svc.call("GET", "/metrics", Some("olga"), None).text;
    text.lines()
        .filter(|l| l.starts_with(name) && l.contains(labels))
        .filter(|l| l[name.len()..].starts_with(['{', ' ']))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// A task due at `due_at` with the given policy, created now.
fn due_task(id: &str, due_at: i64, policy: &str) -> Value {
    let mut t = new_task(id);
    t["created_at"] = json!(unix_ms() - 1000);
    t["due_at"] = json!(due_at);
    t["on_expiry"] = json!(policy);
    t
}

#[test]
fn a_lapsed_claim_comes_back_and_due_tasks_act_with_no_client_call() {
    each_backend(|svc| {
        let now = unix_ms();
        svc.call(
            "POST",
            "/v1/tasks",
            Some("sam"),
            Some(due_task("leased", now + 3_600_000, "deny")),
        )
        .expect_ok();
        svc.call(
            "POST",
            "/v1/tasks/leased/claim",
            Some("alice"),
            Some(json!({"lease_ms": 1500})),
        )
        .expect_ok();
        for (id, policy) in [
            ("esc", "escalate"),
            ("deny", "deny"),
            ("proceed", "proceed"),
        ] {
            svc.call(
                "POST",
                "/v1/tasks",
                Some("sam"),
                Some(due_task(id, now + 1500, policy)),
            )
            .expect_ok();
        }
        eventually("the lapsed claim to come back", || {
            state(svc, "leased") == "open"
        });
        assert_eq!(history(svc, "leased"), ["open", "claim", "reclaim-lapsed"]);
        eventually("the due tasks to act", || {
            state(svc, "esc") == "escalated"
                && state(svc, "deny") == "expired"
                && state(svc, "proceed") == "expired"
        });
        let esc = svc.call("GET", "/v1/tasks/esc", Some("sam"), None);
        assert!(
            esc.expect_ok()["candidate_roles"]
                .as_array()
                .expect("roles")
                .contains(&json!("legal")),
            "escalation widened the audience"
        );
        // Claimed again after its escalation, it is left alone.
        svc.call(
            "POST",
            "/v1/tasks/esc/claim",
            Some("carol"),
            Some(json!({})),
        )
        .expect_ok();
        assert_eq!(history(svc, "esc"), ["open", "expire-overdue", "claim"]);
        assert!(metric(svc, "leasehold_swept_tasks_total", "reclaimed") >= 1.0);
        assert!(metric(svc, "leasehold_sweeps_total", "ok") >= 1.0);
        let checks = svc.checks();
        assert!(
            checks.iter().all(|c| c["discrepancies"] == json!([])),
            "{checks:?}"
        );
    });
}

fn claim_due(svc: &Service, wait_ms: u32) -> Value {
    svc.call(
        "POST",
        "/v1/timers/claim-due",
        Some("sam"),
        Some(json!({"lease_ms": 60_000, "limit": 1, "wait_ms": wait_ms})),
    )
    .expect_ok()
    .clone()
}

#[test]
fn a_waiting_worker_receives_a_timer_armed_while_it_waits() {
    let _one = serially();
    each_backend(|svc| {
        let svc: &Service = svc;
        std::thread::scope(|s| {
            let worker = s.spawn(|| claim_due(svc, 30_000));
            eventually("the worker to wait", || {
                metric(svc, "leasehold_requests_waiting", "") >= 1.0
            });
            let fire_at = unix_ms() + 200;
            svc.call(
                "POST",
                "/v1/timers",
                Some("sam"),
                Some(new_timer("run-1", "wake", fire_at)),
            )
            .expect_ok();
            let got = worker.join().expect("the worker");
            assert_eq!(got["timers"][0]["effect"], "wake", "{got}");
            assert!(unix_ms() >= fire_at, "not before it was due");
        });
        // Nothing due and a short wait: an empty answer at its end.
        assert_eq!(claim_due(svc, 50)["timers"], json!([]));
        // Bad waits are refused.
        svc.call(
            "POST",
            "/v1/timers/claim-due",
            Some("sam"),
            Some(json!({"lease_ms": 1, "wait_ms": 30_001})),
        )
        .expect_problem(400, "invalid");
        // With `now`, the claim is tried once, without waiting.
        svc.call(
            "POST",
            "/v1/timers/claim-due",
            Some("sam"),
            Some(json!({"lease_ms": 1, "wait_ms": 30_000, "now": 5})),
        )
        .expect_ok();
    });
}

#[test]
fn eight_waiting_workers_receive_each_of_a_hundred_timers_exactly_once() {
    let _one = serially();
    each_backend(|svc| {
        let svc: &Service = svc;
        let got: Arc<Mutex<Vec<String>>> = Arc::default();
        std::thread::scope(|s| {
            for _ in 0..8 {
                let got = got.clone();
                s.spawn(move || {
                    while got.lock().expect("got").len() < 100 {
                        let answer = claim_due(svc, 1_000);
                        for t in answer["timers"].as_array().expect("timers") {
                            got.lock()
                                .expect("got")
                                .push(t["effect"].as_str().expect("effect").to_owned());
                        }
                    }
                });
            }
            eventually("the workers to wait", || {
                metric(svc, "leasehold_requests_waiting", "") >= 1.0
            });
            let now = unix_ms();
            for i in 0..100 {
                svc.call(
                    "POST",
                    "/v1/timers",
                    Some("sam"),
                    Some(new_timer("run-1", &format!("e{i:03}"), now)),
                )
                .expect_ok();
            }
        });
        let mut counts: BTreeMap<String, usize> = BTreeMap::new();
        for e in got.lock().expect("got").iter() {
            *counts.entry(e.clone()).or_default() += 1;
        }
        assert_eq!(counts.len(), 100);
        assert!(counts.values().all(|&n| n == 1), "{counts:?}");
    });
}

#[test]
fn a_waiter_that_goes_away_claims_nothing() {
    let _one = serially();
    each_backend(|svc| {
        let body = r#"{"lease_ms": 60000, "wait_ms": 30000}"#;
        let addr = svc.url("").trim_start_matches("http://").to_owned();
        let mut s = TcpStream::connect(&addr).expect("connect");
        write!(
            s,
            "POST /v1/timers/claim-due HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {}\r\n\
             Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            svc.tokens.get("sam"),
            body.len()
        )
        .expect("send");
        eventually("the request to wait", || {
            metric(svc, "leasehold_requests_waiting", "") >= 1.0
        });
        drop(s);
        eventually("the request to end with its connection", || {
            metric(svc, "leasehold_requests_waiting", "") == 0.0
        });
        svc.call(
            "POST",
            "/v1/timers",
            Some("sam"),
            Some(new_timer("run-1", "left", unix_ms())),
        )
        .expect_ok();
        // The timer is there for the next worker: the one that left took
        // nothing.
        let got = claim_due(svc, 0);
        assert_eq!(got["timers"][0]["effect"], "left", "{got}");
        let mut buf = Vec::new();
        let _ = TcpStream::connect(&addr).map(|mut c| c.read_to_end(&mut buf));
    });
}

#[test]
fn a_reviewer_waiting_on_claim_next_receives_the_next_task_opened() {
    let _one = serially();
    each_backend(|svc| {
        let svc: &Service = svc;
        std::thread::scope(|s| {
            let bob = s.spawn(|| {
                svc.call(
                    "POST",
                    "/v1/queue/claim-next",
                    Some("bob"),
                    Some(json!({"wait_ms": 30_000})),
                )
                .expect_ok()
                .clone()
            });
            eventually("bob to wait", || {
                metric(svc, "leasehold_requests_waiting", "") >= 1.0
            });
            // Not his role: he goes on waiting.
            let mut legal = new_task("legal-1");
            legal["candidate_roles"] = json!(["legal"]);
            svc.call("POST", "/v1/tasks", Some("sam"), Some(legal))
                .expect_ok();
            svc.call("POST", "/v1/tasks", Some("sam"), Some(new_task("fin-1")))
                .expect_ok();
            let got = bob.join().expect("bob");
            assert_eq!(got["task"]["id"], "fin-1");
            assert_eq!(got["task"]["assignee"], "bob");
        });
        assert_eq!(state(svc, "legal-1"), "open");
    });
}

#[test]
fn two_servers_wake_each_others_waiters_and_reclaim_a_lease_once() {
    let _one = serially();
    let Some(store) = stores()
        .into_iter()
        .find(|s| matches!(s, Store::Postgres(_)))
    else {
        eprintln!("skipped: no PostgreSQL (LEASEHOLD_TEST_PG)");
        return;
    };
    let one = Service::start(store, sweeping());
    let two = one.twin();
    let client = reqwest::blocking::Client::new();
    std::thread::scope(|s| {
        let worker = s.spawn(|| {
            client
                .post(format!("{}/v1/timers/claim-due", two.url))
                .bearer_auth(one.tokens.get("sam"))
                .json(&json!({"lease_ms": 60_000, "wait_ms": 30_000}))
                .send()
                .expect("answered")
                .json::<Value>()
                .expect("JSON")
        });
        eventually("the worker on the second server to wait", || {
            metric(&one, "leasehold_requests_waiting", "") >= 1.0
        });
        one.call(
            "POST",
            "/v1/timers",
            Some("sam"),
            Some(new_timer("run-1", "across", unix_ms())),
        )
        .expect_ok();
        let got = worker.join().expect("the worker");
        assert_eq!(got["timers"][0]["effect"], "across", "{got}");
    });
    // Both servers sweep; the lapsed lease comes back once.
    one.call("POST", "/v1/tasks", Some("sam"), Some(new_task("shared")))
        .expect_ok();
    one.call(
        "POST",
        "/v1/tasks/shared/claim",
        Some("alice"),
        Some(json!({"lease_ms": 1000})),
    )
    .expect_ok();
    eventually("the lease to come back", || state(&one, "shared") == "open");
    assert_eq!(history(&one, "shared"), ["open", "claim", "reclaim-lapsed"]);
}
