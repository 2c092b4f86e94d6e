//! Recurring schedules over HTTP, on each backend: a schedule is added,
//! read, its occurrences computed across a daylight-saving change,
//! triggered and the trigger's timer claimed with `claim-due`, paused,
//! resumed, paged and removed; a bad spec is an `invalid` problem naming
//! the field and writes nothing; another tenant sees none of it and a
//! reviewer reaches none of it. Every answer is held to the document.

use serde_json::{Value, json};

use crate::harness::checked_call as call;
use crate::harness::{Reply, Service, each_backend, unix_now};

/// 2024-03-09 00:00 in New York (EST).
const MARCH_9_NY: i64 = 1_709_960_400_000;
/// 02:30 EST on 2024-03-09, 07:30 UTC.
const MARCH_9_0230: i64 = 1_709_969_400_000;
/// 2024-03-10 has no 02:30 in New York: shifted forward to the instant the
/// clocks jumped, 03:00 EDT, 07:00 UTC.
const MARCH_10_GAP: i64 = 1_710_054_000_000;
/// 02:30 EDT on 2024-03-11, 06:30 UTC.
const MARCH_11_0230: i64 = 1_710_138_600_000;

fn nightly() -> Value {
    json!({
        "id": "nightly",
        "run": "run-s",
        "case": "case-s",
        "step": 3,
        "recurrence": {"kind": "cron", "expr": "30 2 * * *"},
        "zone": "america/new_york",
    })
}

fn add(svc: &Service, who: &str, spec: Value) -> Reply {
    call(
        svc,
        "POST",
        "/v1/schedules",
        "/v1/schedules",
        who,
        Some(spec),
    )
}

fn ids(page: &Value) -> Vec<&str> {
    page["schedules"]
        .as_array()
        .expect("schedules")
        .iter()
        .map(|s| s["spec"]["id"].as_str().expect("an id"))
        .collect()
}

#[test]
fn a_schedule_is_added_read_fired_paused_paged_and_removed() {
    each_backend(|svc| {
        let before = unix_now() * 1000;
        let added = add(svc, "olga", nightly());
        assert_eq!(added.status, 201, "{added:#?}");
        let s = added.body.clone();
        assert_eq!(s["spec"]["zone"], "America/New_York", "canonical: {s}");
        assert_eq!(s["spec"]["phase"], "forward", "{s}");
        assert_eq!(s["spec"]["gap"], "shift_forward", "{s}");
        assert_eq!(
            s["spec"]["catch_up"],
            json!({"kind": "all_within", "window_ms": 365 * 86_400_000i64})
        );
        assert_eq!(
            (s["revision"].clone(), s["paused"].clone()),
            (json!(1), Value::Null)
        );
        // Armed at the first 02:30 in New York from the server's clock.
        let next_at = s["next_at"].as_i64().expect("armed");
        let soon = call(
            svc,
            "GET",
            "/v1/schedules/{id}/next",
            &format!("/v1/schedules/nightly/next?after={}&n=2", before - 1000),
            "olga",
            None,
        );
        let soon = soon.expect_ok()["occurrences"].clone();
        assert!(
            soon.as_array().expect("a list").contains(&json!(next_at)),
            "{next_at} not in {soon}"
        );
        let got = call(
            svc,
            "GET",
            "/v1/schedules/{id}",
            "/v1/schedules/nightly",
            "sam",
            None,
        );
        assert_eq!(got.expect_ok(), &s);
        call(
            svc,
            "GET",
            "/v1/schedules/{id}",
            "/v1/schedules/nope",
            "sam",
            None,
        )
        .expect_problem(404, "not-found");

        // Across the spring-forward gap: 02:30 does not exist on March 10.
        let next = call(
            svc,
            "GET",
            "/v1/schedules/{id}/next",
            &format!("/v1/schedules/nightly/next?after={MARCH_9_NY}&n=3"),
            "sam",
            None,
        );
        assert_eq!(
            next.expect_ok()["occurrences"],
            json!([MARCH_9_0230, MARCH_10_GAP, MARCH_11_0230])
        );
        call(
            svc,
            "GET",
            "/v1/schedules/{id}/next",
            "/v1/schedules/nightly/next?n=0",
            "sam",
            None,
        )
        .expect_problem(400, "invalid");

        // A trigger is a timer due now, which claim-due hands out.
        let fired = call(
            svc,
            "POST",
            "/v1/schedules/{id}/trigger",
            "/v1/schedules/nightly/trigger",
            "sam",
            None,
        );
        let timer = fired.expect_ok().clone();
        let effect = timer["effect"].as_str().expect("an effect").to_owned();
        assert!(effect.starts_with("schedule/nightly/"), "{timer}");
        assert_eq!(
            (
                timer["run"].clone(),
                timer["case"].clone(),
                timer["step"].clone()
            ),
            (json!("run-s"), json!("case-s"), json!(3))
        );
        let claimed = call(
            svc,
            "POST",
            "/v1/timers/claim-due",
            "/v1/timers/claim-due",
            "sam",
            Some(json!({"lease_ms": 60_000, "limit": 10})),
        );
        let claimed = claimed.expect_ok()["timers"].clone();
        assert!(
            claimed
                .as_array()
                .expect("timers")
                .iter()
                .any(|t| t["effect"] == json!(effect)),
            "{effect} not claimed: {claimed}"
        );

        // Paused with a note, nothing armed; resumed, armed again.
        let paused = call(
            svc,
            "POST",
            "/v1/schedules/{id}/pause",
            "/v1/schedules/nightly/pause",
            "olga",
            Some(json!({"note": "the warehouse is closed"})),
        );
        let paused = paused.expect_ok().clone();
        assert_eq!(paused["paused"], "the warehouse is closed", "{paused}");
        assert_eq!(paused["next_at"], Value::Null, "{paused}");
        assert_eq!(paused["revision"], 2, "{paused}");
        call(
            svc,
            "POST",
            "/v1/schedules/{id}/pause",
            "/v1/schedules/nightly/pause",
            "olga",
            Some(json!({"note": ""})),
        )
        .expect_problem(400, "invalid");
        let resumed = call(
            svc,
            "POST",
            "/v1/schedules/{id}/resume",
            "/v1/schedules/nightly/resume",
            "olga",
            None,
        );
        let resumed = resumed.expect_ok().clone();
        assert_eq!(resumed["paused"], Value::Null, "{resumed}");
        assert!(resumed["next_at"].as_i64().is_some(), "{resumed}");
        for (verb, path) in [("POST", "pause"), ("POST", "resume"), ("POST", "trigger")] {
            let body = (path == "pause").then(|| json!({"note": "x"}));
            call(
                svc,
                verb,
                &format!("/v1/schedules/{{id}}/{path}"),
                &format!("/v1/schedules/nope/{path}"),
                "olga",
                body,
            )
            .expect_problem(404, "not-found");
        }

        // Paged by id: an interval, and a weekly one in London.
        let hourly = json!({
            "id": "a-hourly", "run": "run-s", "zone": "UTC", "phase": "compensating",
            "recurrence": {"kind": "every", "every_ms": 3_600_000, "anchor": 0},
            "catch_up": {"kind": "none"}, "overlap": "buffer_one", "jitter_ms": 1000,
        });
        assert_eq!(add(svc, "sam", hourly).status, 201);
        let weekly = json!({
            "id": "z-weekly", "run": "run-s", "zone": "Europe/London",
            "recurrence": {"kind": "cron", "expr": "@weekly"},
            "catch_up": {"kind": "latest_within", "window_ms": 60_000},
            "repeat": "both", "gap": "skip",
        });
        let weekly = add(svc, "sam", weekly);
        assert_eq!(
            weekly.body["spec"]["catch_up"],
            json!({"kind": "latest_within", "window_ms": 60_000})
        );
        let first = call(
            svc,
            "GET",
            "/v1/schedules",
            "/v1/schedules?limit=2",
            "olga",
            None,
        );
        let first = first.expect_ok().clone();
        assert_eq!(ids(&first), ["a-hourly", "nightly"], "{first}");
        assert_eq!(
            first["schedules"][0]["spec"]["recurrence"],
            json!({"kind": "every", "every_ms": 3_600_000, "anchor": 0})
        );
        let after = first["next"].as_str().expect("more follow");
        let second = call(
            svc,
            "GET",
            "/v1/schedules",
            &format!("/v1/schedules?limit=2&after={after}"),
            "olga",
            None,
        );
        let second = second.expect_ok().clone();
        assert_eq!(ids(&second), ["z-weekly"], "{second}");
        assert_eq!(second["next"], Value::Null, "{second}");

        // Removed, with what it armed; a second removal finds nothing.
        for removed in [true, false] {
            let r = call(
                svc,
                "DELETE",
                "/v1/schedules/{id}",
                "/v1/schedules/nightly",
                "olga",
                None,
            );
            assert_eq!(r.expect_ok()["removed"], removed);
        }
        call(
            svc,
            "GET",
            "/v1/schedules/{id}",
            "/v1/schedules/nightly",
            "olga",
            None,
        )
        .expect_problem(404, "not-found");
        let tz = call(svc, "GET", "/v1/tz-version", "/v1/tz-version", "olga", None);
        let tz = tz.expect_ok()["tz_version"]
            .as_str()
            .expect("a release")
            .to_owned();
        assert!(tz.len() == 5 && tz.starts_with("20"), "{tz}");
    });
}

#[test]
fn a_bad_spec_is_refused_naming_its_field_and_writes_nothing() {
    each_backend(|svc| {
        assert_eq!(add(svc, "olga", nightly()).status, 201);
        let before = svc.snapshot();
        let with = |changes: Value| {
            let mut spec = nightly();
            spec["id"] = json!("other");
            for (k, v) in changes.as_object().expect("changes") {
                spec[k] = v.clone();
            }
            spec
        };
        for (spec, field, says) in [
            (
                with(json!({"zone": "Europe/Atlantis"})),
                "zone",
                "Europe/Atlantis",
            ),
            (
                with(json!({"recurrence": {"kind": "cron", "expr": "* 25 * * *"}})),
                "recurrence.expr",
                "hour field",
            ),
            (
                with(json!({"recurrence": {"kind": "every", "every_ms": 0, "anchor": 0}})),
                "recurrence.every_ms",
                "0 ms",
            ),
            (
                with(json!({"start": 2_000_000, "end": 1_000_000})),
                "end",
                "before the start",
            ),
            (
                with(json!({"catch_up": {"kind": "all_within", "window_ms": 0}})),
                "catch_up.window_ms",
                "0 ms",
            ),
            (
                with(json!({"jitter_ms": 86_400_001})),
                "jitter_ms",
                "jitter",
            ),
            (nightly(), "id", "exists"),
        ] {
            let r = add(svc, "olga", spec.clone());
            r.expect_problem(400, "invalid");
            assert_eq!(r.body["field"], field, "{spec}: {:#}", r.body);
            let detail = r.body["detail"].as_str().expect("a detail");
            assert!(detail.contains(says), "{spec}: {detail}");
        }
        // Not the shape the document gives: refused before the rules,
        // naming where.
        for (spec, field) in [
            (
                with(json!({"recurrence": {"kind": "hourly"}})),
                "recurrence.kind",
            ),
            (with(json!({"cron": "* * * * *"})), "cron"),
            (with(json!({"catch_up": "none"})), "catch_up"),
        ] {
            let r = add(svc, "olga", spec.clone());
            r.expect_problem(400, "invalid");
            assert_eq!(r.body["field"], field, "{spec}: {:#}", r.body);
        }
        assert!(svc.snapshot() == before, "a refused spec wrote");
    });
}

#[test]
fn another_tenant_sees_no_schedule_and_a_reviewer_reaches_none() {
    each_backend(|svc| {
        assert_eq!(add(svc, "olga", nightly()).status, 201);
        // gina, globex's operator, names acme's schedule: there is none.
        for (method, template, path, body) in [
            ("GET", "/v1/schedules/{id}", "/v1/schedules/nightly", None),
            (
                "GET",
                "/v1/schedules/{id}/next",
                "/v1/schedules/nightly/next",
                None,
            ),
            (
                "POST",
                "/v1/schedules/{id}/pause",
                "/v1/schedules/nightly/pause",
                Some(json!({"note": "mine now"})),
            ),
            (
                "POST",
                "/v1/schedules/{id}/resume",
                "/v1/schedules/nightly/resume",
                None,
            ),
            (
                "POST",
                "/v1/schedules/{id}/trigger",
                "/v1/schedules/nightly/trigger",
                None,
            ),
        ] {
            call(svc, method, template, path, "gina", body).expect_problem(404, "not-found");
        }
        let theirs = call(svc, "GET", "/v1/schedules", "/v1/schedules", "gina", None);
        assert_eq!(theirs.expect_ok()["schedules"], json!([]));
        let gone = call(
            svc,
            "DELETE",
            "/v1/schedules/{id}",
            "/v1/schedules/nightly",
            "gina",
            None,
        );
        assert_eq!(gone.expect_ok()["removed"], false);
        // globex may use the same id for a schedule of its own.
        assert_eq!(add(svc, "gina", nightly()).status, 201);
        let ours = call(svc, "GET", "/v1/schedules", "/v1/schedules", "olga", None);
        let ours = ours.expect_ok().clone();
        assert_eq!(ids(&ours), ["nightly"]);
        assert_eq!(ours["schedules"][0]["paused"], Value::Null, "{ours}");

        // A reviewer reaches no schedule route.
        for (method, path, body) in [
            ("POST", "/v1/schedules", Some(nightly())),
            ("GET", "/v1/schedules", None),
            ("GET", "/v1/schedules/nightly", None),
            ("DELETE", "/v1/schedules/nightly", None),
            (
                "POST",
                "/v1/schedules/nightly/pause",
                Some(json!({"note": "x"})),
            ),
            ("POST", "/v1/schedules/nightly/trigger", None),
            ("GET", "/v1/tz-version", None),
        ] {
            svc.call(method, path, Some("alice"), body)
                .expect_problem(403, "forbidden");
        }
        let still = call(
            svc,
            "GET",
            "/v1/schedules/{id}",
            "/v1/schedules/nightly",
            "sam",
            None,
        );
        assert_eq!(still.expect_ok()["revision"], 1);
    });
}

/// A recurrence's and a catch-up's variants take no field but their own
/// in the document, as the service refuses any other.
#[test]
fn the_document_closes_each_variant_of_a_spec() {
    let doc = serde_json::to_value(leasehold_serve::openapi()).expect("serializes");
    for name in ["Recurrence", "CatchUp"] {
        let variants = doc["components"]["schemas"][name]["oneOf"]
            .as_array()
            .unwrap_or_else(|| panic!("{name} is a oneOf"));
        assert!(!variants.is_empty(), "{name}");
        for v in variants {
            assert_eq!(v["additionalProperties"], false, "{name}: {v}");
            assert!(v["properties"]["kind"]["enum"].is_array(), "{name}: {v}");
        }
    }
}
