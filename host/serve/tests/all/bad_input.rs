//! Bad input: malformed JSON, wrong types, unknown fields, oversized
//! bodies, bad ids and bad cursors. Each is a 4xx problem naming what was
//! wrong, and none changes the store.

use serde_json::json;

use crate::harness::{Reply, each_backend, new_task};

#[track_caller]
fn names(r: &Reply, status: u16, kind: &str, words: &[&str]) {
    r.expect_problem(status, kind);
    let detail = r.body["detail"].as_str().unwrap_or_default();
    for w in words {
        assert!(detail.contains(w), "{detail:?} does not name {w:?}");
    }
}

#[test]
fn bad_input_is_refused_naming_the_problem_and_changes_nothing() {
    each_backend(|svc| {
        svc.call("POST", "/v1/tasks", Some("sam"), Some(new_task("t-1")))
            .expect_ok();
        let before = svc.snapshot();
        let json_ct = "application/json";

        // Malformed JSON.
        let r = svc.raw_call("POST", "/v1/tasks", "sam", json_ct, b"{\"id\": ".to_vec());
        names(&r, 400, "malformed-body", &["not JSON"]);
        let r = svc.raw_call(
            "POST",
            "/v1/tasks/t-1/claim",
            "alice",
            json_ct,
            b"{} {}".to_vec(),
        );
        names(&r, 400, "malformed-body", &["one JSON value"]);

        // Wrong types: the field is named.
        let r = svc.raw_call(
            "POST",
            "/v1/tasks/t-1/claim",
            "alice",
            json_ct,
            br#"{"lease_ms": "soon"}"#.to_vec(),
        );
        names(&r, 400, "invalid", &["lease_ms"]);
        assert_eq!(r.body["field"], "lease_ms");
        let r = svc.raw_call(
            "POST",
            "/v1/tasks/t-1/settle",
            "sam",
            json_ct,
            br#"{"settlement": "done"}"#.to_vec(),
        );
        names(&r, 400, "invalid", &["settlement"]);
        let mut t = new_task("t-9");
        t["candidate_roles"] = json!("finance");
        let r = svc.call("POST", "/v1/tasks", Some("sam"), Some(t));
        names(&r, 400, "invalid", &["candidate_roles"]);
        let r = svc.raw_call("POST", "/v1/tasks", "sam", json_ct, b"[1, 2]".to_vec());
        names(&r, 400, "invalid", &["a JSON object"]);

        // Missing and unknown fields.
        let r = svc.call(
            "POST",
            "/v1/tasks",
            Some("sam"),
            Some(json!({"id": "t-9", "run": "r"})),
        );
        names(&r, 400, "invalid", &["kind"]);
        let mut t = new_task("t-9");
        t["state"] = json!("claimed");
        let r = svc.call("POST", "/v1/tasks", Some("sam"), Some(t));
        names(&r, 400, "invalid", &["state"]);
        let r = svc.call(
            "POST",
            "/v1/tasks/t-1/claim",
            Some("alice"),
            Some(json!({"tenant": "globex"})),
        );
        names(&r, 400, "invalid", &["tenant"]);
        let r = svc.call("GET", "/v1/queue?colour=blue", Some("alice"), None);
        names(&r, 400, "invalid", &["colour"]);
        let r = svc.call("GET", "/v1/queue?limit=ten", Some("alice"), None);
        names(&r, 400, "invalid", &["limit"]);

        // Not JSON at all.
        let r = svc.raw_call("POST", "/v1/tasks", "sam", "text/plain", b"id=t-9".to_vec());
        r.expect_problem(415, "unsupported-media-type");

        // Oversized: past the body limit, whatever it holds.
        let mut big = new_task("t-big");
        big["justification"] = json!({"pad": "x".repeat(600 * 1024)});
        let r = svc.call("POST", "/v1/tasks", Some("sam"), Some(big));
        names(&r, 413, "body-too-large", &["larger than"]);

        // Bad ids: a control character, and one too long.
        let r = svc.call("GET", "/v1/tasks/a%01b", Some("sam"), None);
        names(&r, 400, "invalid", &["id", "control character"]);
        assert_eq!(r.body["field"], "id");
        let long = "x".repeat(300);
        let r = svc.call(
            "POST",
            &format!("/v1/tasks/{long}/claim"),
            Some("alice"),
            None,
        );
        names(&r, 400, "invalid", &["id", "300 characters"]);
        let r = svc.call(
            "POST",
            "/v1/tasks",
            Some("sam"),
            Some(json!({"id": "a\u{7}", "run": "r", "kind": "k"})),
        );
        names(&r, 400, "invalid", &["id"]);

        // Bad cursors.
        for cursor in ["%00", "not-a-cursor-at-all", &"z".repeat(300)] {
            let r = svc.call(
                "GET",
                &format!("/v1/queue?after={cursor}"),
                Some("alice"),
                None,
            );
            assert_eq!(r.status, 400, "{cursor}: {r:#?}");
            r.expect_problem(400, "invalid");
            let r = svc.call(
                "GET",
                &format!("/v1/cases/case-1/tasks?after={cursor}"),
                Some("sam"),
                None,
            );
            r.expect_problem(400, "invalid");
        }

        let after = svc.snapshot();
        assert_eq!(before.0, after.0, "the check answers changed");
        assert!(before.1 == after.1, "the keyspace changed");
    });
}
