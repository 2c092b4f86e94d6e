//! A guest that misbehaves, behind the HTTP service: a sandbox failure is a
//! 500 that says nothing of the guest and writes nothing, and a call still
//! running when the server is told to stop finishes and is kept.

use serde_json::json;

use crate::harness::{Service, stores, test_options};

fn hostile() -> leasehold_host::EngineBuilder {
    leasehold_host::Engine::builder().component(leasehold_tests::HOSTILE_COMPONENT)
}

fn open_body(id: &str) -> serde_json::Value {
    json!({"id": id, "run": "r", "kind": "k"})
}

#[test]
fn a_sandbox_failure_is_a_500_that_shows_no_guest_internals_and_writes_nothing() {
    for store in stores() {
        let mut svc = Service::start_with(store, test_options(), hostile());
        let r = svc.call(
            "POST",
            "/v1/tasks",
            Some("sam"),
            Some(open_body("write-then-trap")),
        );
        r.expect_problem(500, "sandbox");
        assert!(
            !r.text.contains("fixture") && !r.text.contains("trap"),
            "{}",
            r.text
        );
        let r = svc.call("GET", "/v1/tasks/wrong-id", Some("sam"), None);
        r.expect_problem(500, "sandbox");
        assert!(!r.text.contains("wrong-id\","), "{}", r.text);
        svc.conforms("GET", "/v1/tasks/{id}", &r);
        // The service keeps serving, and the trapped call wrote nothing.
        let ok = svc.call(
            "POST",
            "/v1/tasks",
            Some("sam"),
            Some(open_body("write-ok")),
        );
        ok.expect_ok();
        svc.stop();
        let raw = svc.store.raw();
        assert!(raw.keys().any(|(_, k)| k == b"hostile-ok"));
        assert!(!raw.keys().any(|(_, k)| k == b"hostile-trap"));
    }
}

/// Stopping the server while a slow call runs: the call either completes
/// (200, and its write is there after a restart) or was refused before it
/// started (no answer, and no write); it is never cut off midway. The
/// in-flight gauge says a call is running before the stop is asked for; it
/// is shared by every server in this test process, so a round may stop
/// before this call started, and rounds repeat until one catches it running.
#[test]
fn a_call_running_when_the_server_stops_finishes_and_is_kept() {
    for store in stores() {
        let mut svc = Service::start_with(store, test_options(), hostile());
        let mut caught = false;
        for round in 0..10 {
            let id = format!("work-1500-{round}");
            let url = svc.url("/v1/tasks");
            let metrics = svc.url("/metrics");
            let token = svc.tokens.get("sam").to_owned();
            let client = svc.client.clone();
            let body = open_body(&id);
            let slow = std::thread::spawn(move || {
                let r = client.post(&url).bearer_auth(&token).json(&body).send();
                r.map(|r| r.status().as_u16())
            });
            let in_flight = |text: &str| {
                text.lines()
                    .filter(|l| l.starts_with("leasehold_calls_in_flight"))
                    .filter_map(|l| l.split_whitespace().last()?.parse::<f64>().ok())
                    .sum::<f64>()
            };
            loop {
                let text = svc
                    .client
                    .get(&metrics)
                    .bearer_auth(svc.tokens.get("olga"))
                    .send()
                    .and_then(|r| r.text())
                    .unwrap_or_default();
                if in_flight(&text) >= 1.0 {
                    break;
                }
            }
            svc.stop();
            let answered = slow.join().expect("client");
            let written = svc.store.raw().keys().any(|(_, k)| k == id.as_bytes());
            match answered {
                Ok(status) => {
                    assert_eq!(status, 200, "round {round}");
                    assert!(written, "round {round}: answered 200 but not kept");
                    caught = true;
                }
                Err(e) => assert!(!written, "round {round}: cut off after writing: {e}"),
            }
            svc.restart();
            if caught {
                break;
            }
        }
        assert!(caught, "no round stopped the server while the call ran");
    }
}
