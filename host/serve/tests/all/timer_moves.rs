//! Moving and listing timers over HTTP, on each backend: a reschedule
//! answers the timer as it now waits, a sweeper's lease is a `timer-held`
//! problem naming its end until `take_back`, a run's timers and a window of
//! due timers page with sealed cursors, and a reviewer reaches none of it.

use serde_json::{Value, json};

use crate::harness::{each_backend, new_timer};

fn reschedule(fire_at: i64, take_back: bool) -> Option<Value> {
    Some(json!({ "fire_at": fire_at, "take_back": take_back }))
}

#[test]
fn a_timer_moves_and_lists_through_the_service() {
    each_backend(|svc| {
        for (run, effect, at) in [
            ("run-1", "a", 5_000),
            ("run-1", "b", 6_000),
            ("run-2", "a", 5_500),
        ] {
            svc.call(
                "POST",
                "/v1/timers",
                Some("sam"),
                Some(new_timer(run, effect, at)),
            )
            .expect_ok();
        }
        let moved = svc
            .call(
                "POST",
                "/v1/runs/run-1/timers/a/reschedule",
                Some("sam"),
                reschedule(9_000, false),
            )
            .expect_ok()
            .clone();
        assert_eq!(moved["timer"]["fire_at"], 9_000, "{moved}");
        assert_eq!(moved["timer"]["step"], 1, "{moved}");
        assert_eq!(moved["lease_until"], Value::Null, "{moved}");

        // A run's timers, a page of one at a time.
        let first = svc
            .call("GET", "/v1/runs/run-1/timers?limit=1", Some("sam"), None)
            .expect_ok()
            .clone();
        assert_eq!(first["timers"][0]["timer"]["effect"], "a", "{first}");
        let next = first["next"].as_str().expect("more follow").to_owned();
        let second = svc
            .call(
                "GET",
                &format!("/v1/runs/run-1/timers?limit=1&after={next}"),
                Some("sam"),
                None,
            )
            .expect_ok()
            .clone();
        assert_eq!(second["timers"][0]["timer"]["effect"], "b", "{second}");
        assert_eq!(second["next"], Value::Null, "{second}");
        // The cursor pages run-1's list only.
        svc.call(
            "GET",
            &format!("/v1/runs/run-2/timers?after={next}"),
            Some("sam"),
            None,
        )
        .expect_problem(400, "invalid");

        // The window [5000, 9000): 9000 is not in it.
        let window = svc
            .call("GET", "/v1/timers/due?from=5000&to=9000", Some("sam"), None)
            .expect_ok()
            .clone();
        let listed: Vec<(&str, &str)> = window["timers"]
            .as_array()
            .expect("timers")
            .iter()
            .map(|i| {
                (
                    i["timer"]["run"].as_str().expect("run"),
                    i["timer"]["effect"].as_str().expect("effect"),
                )
            })
            .collect();
        assert_eq!(listed, [("run-2", "a"), ("run-1", "b")], "{window}");
        svc.call("GET", "/v1/timers/due?from=10&to=5", Some("sam"), None)
            .expect_problem(400, "invalid");

        // Held by a sweeper under a lease that ends a minute from now:
        // refused with the lease's end, then taken back.
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("after 1970")
            .as_millis() as i64;
        let claimed = svc
            .call(
                "POST",
                "/v1/timers/claim-due",
                Some("sam"),
                Some(json!({"lease_ms": 60_000, "limit": 10, "now": now})),
            )
            .expect_ok()
            .clone();
        assert_eq!(
            claimed["timers"].as_array().map(Vec::len),
            Some(3),
            "{claimed}"
        );
        let held = svc.call(
            "POST",
            "/v1/runs/run-1/timers/a/reschedule",
            Some("sam"),
            reschedule(20_000, false),
        );
        held.expect_problem(409, "timer-held");
        assert_eq!(held.body["lease_until"], now + 60_000, "{:?}", held.body);
        let taken = svc
            .call(
                "POST",
                "/v1/runs/run-1/timers/a/reschedule",
                Some("sam"),
                reschedule(20_000, true),
            )
            .expect_ok()
            .clone();
        assert_eq!(
            (
                taken["timer"]["fire_at"].clone(),
                taken["lease_until"].clone()
            ),
            (json!(20_000), Value::Null)
        );
        svc.call(
            "POST",
            "/v1/runs/run-9/timers/x/reschedule",
            Some("sam"),
            reschedule(1, false),
        )
        .expect_problem(404, "not-found");
        svc.call(
            "POST",
            "/v1/runs/run-1/timers/a/reschedule",
            Some("alice"),
            reschedule(1, false),
        )
        .expect_problem(403, "forbidden");
        svc.call("GET", "/v1/timers/due?from=0&to=5", Some("alice"), None)
            .expect_problem(403, "forbidden");
        svc.call(
            "POST",
            "/v1/runs/run-2/seal",
            Some("sam"),
            Some(json!({"awaited": []})),
        )
        .expect_ok();
        svc.call(
            "POST",
            "/v1/runs/run-2/timers/a/reschedule",
            Some("sam"),
            reschedule(1, false),
        )
        .expect_problem(409, "run-sealed");
    });
}

/// The window's two ends are required parameters in the document, as the
/// route refuses a request without either.
#[test]
fn the_document_requires_both_ends_of_the_window() {
    let doc = serde_json::to_value(leasehold_serve::openapi()).expect("serializes");
    let params = doc["paths"]["/v1/timers/due"]["get"]["parameters"]
        .as_array()
        .expect("parameters")
        .clone();
    for name in ["from", "to"] {
        let p = params
            .iter()
            .find(|p| p["name"] == name)
            .unwrap_or_else(|| panic!("no parameter {name}"));
        assert_eq!(p["required"], true, "{name}: {p}");
    }
    for name in ["limit", "after"] {
        let p = params
            .iter()
            .find(|p| p["name"] == name)
            .expect("documented");
        assert_ne!(p["required"], true, "{name}: {p}");
    }
}
