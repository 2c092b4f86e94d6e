//! Tenants apart under long-lived load, over real sockets: one reviewer's
//! long-polls and four tenants' event streams, each at every bound they
//! may reach, leave another tenant's calls, `/healthz` and `/readyz`
//! answered; and what a refusal says names no bound.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use crate::harness::{Service, claims, jwt, new_task, redb_store, test_options};

/// A bound on a failure, never a pace the test relies on.
const PATIENCE: Duration = Duration::from_secs(60);

fn connect(svc: &Service) -> TcpStream {
    let addr = svc.url("").trim_start_matches("http://").to_owned();
    let tcp = TcpStream::connect(&addr).expect("connects");
    tcp.set_read_timeout(Some(PATIENCE)).expect("timeout");
    tcp
}

/// Sends one request on a fresh connection and leaves it unread.
fn send(
    svc: &Service,
    method: &str,
    path: &str,
    token: &str,
    accept: &str,
    body: &str,
) -> TcpStream {
    let mut tcp = connect(svc);
    let req = format!(
        "{method} {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n\
         Accept: {accept}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    // A connection past the cap may be closed before the request is read.
    let _ = tcp.write_all(req.as_bytes());
    tcp
}

/// Whatever has arrived on each connection, until each has an answer's head
/// or has closed, except those still waiting when `enough` of them have
/// answered or the patience runs out.
fn answered(conns: &mut [TcpStream], enough: usize) -> Vec<Option<String>> {
    let mut got: Vec<Option<String>> = vec![None; conns.len()];
    for c in conns.iter() {
        c.set_nonblocking(true).expect("nonblocking");
    }
    let until = Instant::now() + PATIENCE;
    while got.iter().filter(|g| g.is_some()).count() < enough && Instant::now() < until {
        for (i, c) in conns.iter_mut().enumerate() {
            if got[i].is_some() {
                continue;
            }
            let mut buf = [0u8; 2048];
            match c.read(&mut buf) {
                Ok(0) => got[i] = Some("closed".to_owned()),
                Ok(n) => got[i] = Some(String::from_utf8_lossy(&buf[..n]).into_owned()),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(_) => got[i] = Some("reset".to_owned()),
            }
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    got
}

/// One reviewer's 1,100 long-polls, and four tenants' event streams (each
/// at its tenant's bound, from four callers at theirs), hold no more than
/// their bounds: the rest are refused at once (503 with Retry-After, the
/// connection closed), and another tenant's call, `/healthz` and `/readyz`
/// are answered while the holders hold on.
#[test]
fn one_callers_long_polls_and_four_tenants_streams_leave_others_answered() {
    let svc = Service::start(redb_store(), test_options());
    let o = test_options();
    let (streams_per_tenant, per_caller) = (
        o.events.max_subscribers_per_tenant,
        o.events.max_subscribers_per_caller,
    );
    let mut streams = Vec::new();
    for t in 0..4 {
        for a in 0..streams_per_tenant / per_caller + 1 {
            let token = jwt(
                "RS256",
                &claims(&format!("t{t}"), &format!("r{a}"), "reviewer", &["finance"]),
            );
            for _ in 0..per_caller {
                streams.push(send(
                    &svc,
                    "GET",
                    "/v1/events",
                    &token,
                    "text/event-stream",
                    "",
                ));
            }
        }
    }
    let alice = svc.tokens.get("alice").to_owned();
    let mut polls: Vec<TcpStream> = (0..1100)
        .map(|_| {
            send(
                &svc,
                "POST",
                "/v1/queue/claim-next",
                &alice,
                "application/json",
                r#"{"wait_ms": 30000}"#,
            )
        })
        .collect();
    let waiting = o.long_polls.per_caller;
    let enough = polls.len() - waiting;
    let polled = answered(&mut polls, enough);
    let quiet = polled.iter().filter(|g| g.is_none()).count();
    assert_eq!(
        quiet, waiting,
        "exactly the caller's bound of long-polls wait"
    );
    for g in polled.iter().flatten() {
        assert!(
            g.starts_with("HTTP/1.1 503") || g == "closed" || g == "reset",
            "a refusal: {g}"
        );
        if g.starts_with("HTTP/1.1 503") {
            let lower = g.to_ascii_lowercase();
            assert!(lower.contains("retry-after:"), "{g}");
            assert!(lower.contains("connection: close"), "{g}");
            assert!(!lower.contains("tenant"), "a refusal names no bound: {g}");
        }
    }
    // The streams: each tenant's bound of them began, the rest refused.
    let all = streams.len();
    let started = answered(&mut streams, all);
    let ok = started
        .iter()
        .flatten()
        .filter(|g| g.starts_with("HTTP/1.1 200"))
        .count();
    assert_eq!(
        ok,
        4 * streams_per_tenant,
        "each tenant holds its bound of streams"
    );
    // Meanwhile, everyone else is served.
    let c = &svc.client;
    for path in ["/healthz", "/readyz"] {
        let r = c.get(svc.url(path)).send().expect("answered");
        assert_eq!(r.status(), 200, "{path}");
    }
    svc.call("POST", "/v1/tasks", Some("gina"), Some(new_task("g-1")))
        .expect_ok();
    svc.call("GET", "/v1/tasks/g-1", Some("gus"), None)
        .expect_ok();
}

/// The operations listener answers probes and scrapes with no credential
/// while the API's `/metrics` takes an operator's.
#[test]
fn metrics_are_for_operators_and_the_operations_listener() {
    let mut o = test_options();
    o.ops_listen = Some("127.0.0.1:0".parse().expect("addr"));
    let svc = Service::start(redb_store(), o);
    svc.call("GET", "/metrics", None, None)
        .expect_problem(401, "unauthorized");
    svc.call("GET", "/metrics", Some("alice"), None)
        .expect_problem(403, "forbidden");
    let text = svc.call("GET", "/metrics", Some("olga"), None);
    assert_eq!(text.status, 200);
    // An operator of another tenant learns nothing of acme's calls.
    svc.call("GET", "/metrics", Some("gina"), None)
        .expect_problem(403, "forbidden");
    let ops = svc.ops_url().expect("an operations listener");
    for path in ["/healthz", "/readyz", "/metrics"] {
        let r = svc
            .client
            .get(format!("{ops}{path}"))
            .send()
            .expect("answered");
        assert_eq!(r.status(), 200, "{path}");
    }
    let r = svc
        .client
        .get(format!("{ops}/v1/whoami"))
        .send()
        .expect("answered");
    assert_eq!(r.status(), 404, "no API there");
}
