//! A task's life after it opens, over real HTTP: its revision as the
//! `ETag` and `If-Match` as the guard of every change (412 when stale),
//! what an actor holds, changes, assignment, delegation and notes; and
//! what an attacker with a reviewer's credential cannot do with them.

use serde_json::{Value, json};

use crate::harness::history_entries as history;
use crate::harness::{Reply, Service, each_backend, new_task, reply};

/// One request with extra headers, held to the document.
pub fn send(
    svc: &Service,
    method: &str,
    template: &str,
    path: &str,
    who: &str,
    headers: &[(&str, &str)],
    body: Option<Value>,
) -> Reply {
    let m = reqwest::Method::from_bytes(method.as_bytes()).expect("method");
    let mut req = svc
        .client
        .request(m, svc.url(path))
        .bearer_auth(svc.tokens.get(who));
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    if let Some(b) = body {
        req = req.json(&b);
    }
    let r = reply(req.send().expect("the server answers"));
    svc.conforms(method, template, &r);
    r
}

pub fn etag(r: &Reply) -> String {
    r.headers
        .get("etag")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_else(|| panic!("no ETag: {r:#?}"))
        .to_owned()
}

fn open(svc: &Service, id: &str) -> Value {
    svc.call("POST", "/v1/tasks", Some("sam"), Some(new_task(id)))
        .expect_ok()
        .clone()
}

fn get(svc: &Service, id: &str, who: &str) -> Reply {
    svc.call("GET", &format!("/v1/tasks/{id}"), Some(who), None)
}

fn held_ids(r: &Reply) -> Vec<String> {
    r.expect_ok()["tasks"]
        .as_array()
        .expect("tasks")
        .iter()
        .map(|t| t["id"].as_str().expect("id").to_owned())
        .collect()
}

#[test]
fn the_revision_is_the_etag_and_if_match_guards_every_change() {
    each_backend(|svc| {
        open(svc, "t-1");
        let g = send(
            svc,
            "GET",
            "/v1/tasks/{id}",
            "/v1/tasks/t-1",
            "alice",
            &[],
            None,
        );
        assert_eq!(g.expect_ok()["revision"], 1);
        assert_eq!(etag(&g), "\"1\"");
        assert_eq!(g.body["decision"], Value::Null);
        // A stale revision: 412, the current one in the problem and its
        // ETag, and nothing written.
        let claim = "/v1/tasks/{id}/claim";
        let r = send(
            svc,
            "POST",
            claim,
            "/v1/tasks/t-1/claim",
            "alice",
            &[("If-Match", "\"7\"")],
            None,
        );
        r.expect_problem(412, "stale");
        assert_eq!(r.body["revision"], 1);
        assert_eq!(etag(&r), "\"1\"");
        assert_eq!(get(svc, "t-1", "sam").body["state"], "open");
        assert_eq!(history(svc, "t-1").len(), 1);
        // Malformed: 400 naming the header, nothing written.
        for bad in ["1", "W/\"1\"", "\"1\", \"2\"", "\"x\""] {
            let r = send(
                svc,
                "POST",
                claim,
                "/v1/tasks/t-1/claim",
                "alice",
                &[("If-Match", bad)],
                None,
            );
            r.expect_problem(400, "invalid");
            assert_eq!(r.body["field"], "If-Match", "{bad}");
        }
        assert_eq!(history(svc, "t-1").len(), 1);
        // The current revision goes ahead; the answer carries the next.
        let r = send(
            svc,
            "POST",
            claim,
            "/v1/tasks/t-1/claim",
            "alice",
            &[("If-Match", "\"1\"")],
            Some(json!({"lease_ms": 60_000})),
        );
        assert_eq!(r.expect_ok()["revision"], 2);
        assert_eq!(etag(&r), "\"2\"");
        // `*` is no guard.
        let renew = "/v1/tasks/{id}/renew";
        let r = send(
            svc,
            "POST",
            renew,
            "/v1/tasks/t-1/renew",
            "alice",
            &[("If-Match", "*")],
            Some(json!({"lease_ms": 60_000})),
        );
        assert_eq!(etag(&r), "\"3\"");
        // Settle and release are guarded too.
        let settle = "/v1/tasks/{id}/settle";
        send(
            svc,
            "POST",
            settle,
            "/v1/tasks/t-1/settle",
            "alice",
            &[("If-Match", "\"2\"")],
            Some(json!({"settlement": "completed"})),
        )
        .expect_problem(412, "stale");
        let release = "/v1/tasks/{id}/release";
        send(
            svc,
            "POST",
            release,
            "/v1/tasks/t-1/release",
            "alice",
            &[("If-Match", "\"2\"")],
            None,
        )
        .expect_problem(412, "stale");
        assert_eq!(get(svc, "t-1", "sam").body["assignee"], "alice");
        // A reviewer who may not see a task learns nothing from a guard:
        // the same 404 as for a task that does not exist.
        send(
            svc,
            "POST",
            claim,
            "/v1/tasks/t-1/claim",
            "carol",
            &[("If-Match", "\"1\"")],
            None,
        )
        .expect_problem(404, "not-found");
        send(
            svc,
            "POST",
            claim,
            "/v1/tasks/nope/claim",
            "carol",
            &[("If-Match", "\"1\"")],
            None,
        )
        .expect_problem(404, "not-found");
        // Escalate (a service's) with the current revision.
        let r = send(
            svc,
            "POST",
            "/v1/tasks/{id}/escalate",
            "/v1/tasks/t-1/escalate",
            "sam",
            &[("If-Match", "\"3\"")],
            None,
        );
        assert_eq!(r.expect_ok()["state"], "escalated");
        assert_eq!(etag(&r), "\"4\"");
    });
}

#[test]
fn held_lists_the_callers_own_and_a_reviewer_reads_no_one_elses() {
    each_backend(|svc| {
        for id in ["h-1", "h-2", "h-3"] {
            open(svc, id);
        }
        for (who, id) in [("alice", "h-1"), ("alice", "h-2"), ("bob", "h-3")] {
            svc.call("POST", &format!("/v1/tasks/{id}/claim"), Some(who), None)
                .expect_ok();
        }
        let mine = send(
            svc,
            "GET",
            "/v1/me/tasks",
            "/v1/me/tasks",
            "alice",
            &[],
            None,
        );
        let mut ids = held_ids(&mine);
        ids.sort();
        assert_eq!(ids, ["h-1", "h-2"]);
        // Paged with limit and a sealed `after`.
        let p1 = send(
            svc,
            "GET",
            "/v1/me/tasks",
            "/v1/me/tasks?limit=1",
            "alice",
            &[],
            None,
        );
        assert_eq!(held_ids(&p1).len(), 1);
        let next = p1.body["next"].as_str().expect("a next").to_owned();
        let p2 = send(
            svc,
            "GET",
            "/v1/me/tasks",
            &format!("/v1/me/tasks?limit=1&after={next}"),
            "alice",
            &[],
            None,
        );
        assert_eq!(held_ids(&p2).len(), 1);
        assert_ne!(held_ids(&p1), held_ids(&p2));
        // alice's cursor is not bob's.
        send(
            svc,
            "GET",
            "/v1/me/tasks",
            &format!("/v1/me/tasks?after={next}"),
            "bob",
            &[],
            None,
        )
        .expect_problem(400, "invalid");
        assert_eq!(
            held_ids(&svc.call("GET", "/v1/me/tasks", Some("bob"), None)),
            ["h-3"]
        );
        // A reviewer may not read another's.
        send(
            svc,
            "GET",
            "/v1/me/tasks",
            "/v1/me/tasks?actor=bob",
            "alice",
            &[],
            None,
        )
        .expect_problem(403, "acting-as-another");
        // An operator or service may read anyone's.
        for who in ["olga", "sam"] {
            let r = send(
                svc,
                "GET",
                "/v1/me/tasks",
                "/v1/me/tasks?actor=bob",
                who,
                &[],
                None,
            );
            assert_eq!(held_ids(&r), ["h-3"]);
        }
        // Another tenant's operator sees none of acme's.
        let r = svc.call("GET", "/v1/me/tasks?actor=alice", Some("gina"), None);
        assert!(held_ids(&r).is_empty());
        // Settled, released: no longer held.
        svc.call(
            "POST",
            "/v1/tasks/h-1/settle",
            Some("alice"),
            Some(json!({"settlement": "completed"})),
        )
        .expect_ok();
        svc.call("POST", "/v1/tasks/h-2/release", Some("alice"), None);
        assert!(held_ids(&svc.call("GET", "/v1/me/tasks", Some("alice"), None)).is_empty());
    });
}

#[test]
fn a_change_names_known_fields_and_only_operators_and_services_make_it() {
    each_backend(|svc| {
        // The document says a change names at least one field.
        let schema = &svc.openapi()["components"]["schemas"]["TaskPatch"];
        assert_eq!(schema["minProperties"], 1, "{schema}");
        assert!(schema.get("maxProperties").is_none(), "{schema}");
        open(svc, "p-1");
        let patch = "/v1/tasks/{id}";
        let r = send(
            svc,
            "PATCH",
            patch,
            "/v1/tasks/p-1",
            "olga",
            &[("If-Match", "\"1\"")],
            Some(json!({"due_at": 9000, "priority": "urgent"})),
        );
        let t = r.expect_ok();
        assert_eq!(
            (
                t["due_at"].clone(),
                t["priority"].clone(),
                t["revision"].clone()
            ),
            (json!(9000), json!("urgent"), json!(2))
        );
        assert_eq!(etag(&r), "\"2\"");
        let last = history(svc, "p-1").pop().expect("an entry");
        assert_eq!(last["verb"], "update");
        assert_eq!(last["actor"], "olga");
        assert_eq!(last["revision"], 2);
        let fields: Vec<&str> = last["changes"]
            .as_array()
            .expect("changes")
            .iter()
            .map(|c| c["field"].as_str().expect("field"))
            .collect();
        assert!(
            fields.contains(&"due-at") && fields.contains(&"priority"),
            "{last}"
        );
        // An integer as JSON Schema counts them, then null clears it.
        let r = send(
            svc,
            "PATCH",
            patch,
            "/v1/tasks/p-1",
            "sam",
            &[],
            Some(json!({"due_at": 9100.0})),
        );
        assert_eq!(r.expect_ok()["due_at"], 9100);
        let r = send(
            svc,
            "PATCH",
            patch,
            "/v1/tasks/p-1",
            "sam",
            &[],
            Some(json!({"due_at": null})),
        );
        assert_eq!(r.expect_ok()["due_at"], Value::Null);
        // An unknown field, an empty change, a null where no clearing is
        // possible: 400, naming it, nothing written.
        let before = history(svc, "p-1").len();
        let r = send(
            svc,
            "PATCH",
            patch,
            "/v1/tasks/p-1",
            "olga",
            &[],
            Some(json!({"assignee": "bob"})),
        );
        r.expect_problem(400, "invalid");
        assert_eq!(r.body["field"], "assignee");
        send(
            svc,
            "PATCH",
            patch,
            "/v1/tasks/p-1",
            "olga",
            &[],
            Some(json!({})),
        )
        .expect_problem(400, "invalid");
        let r = send(
            svc,
            "PATCH",
            patch,
            "/v1/tasks/p-1",
            "olga",
            &[],
            Some(json!({"priority": null})),
        );
        r.expect_problem(400, "invalid");
        assert_eq!(r.body["field"], "priority");
        let r = send(
            svc,
            "PATCH",
            patch,
            "/v1/tasks/p-1",
            "olga",
            &[],
            Some(json!({"candidate_roles": [""]})),
        );
        r.expect_problem(400, "invalid");
        assert_eq!(r.body["field"], "candidate_roles");
        send(
            svc,
            "PATCH",
            patch,
            "/v1/tasks/p-1",
            "olga",
            &[("If-Match", "\"2\"")],
            Some(json!({"priority": "low"})),
        )
        .expect_problem(412, "stale");
        assert_eq!(history(svc, "p-1").len(), before);
        // A reviewer may not change a task, even one it holds.
        svc.call("POST", "/v1/tasks/p-1/claim", Some("alice"), None)
            .expect_ok();
        send(
            svc,
            "PATCH",
            patch,
            "/v1/tasks/p-1",
            "alice",
            &[],
            Some(json!({"priority": "low"})),
        )
        .expect_problem(403, "forbidden");
        // A change that excludes the holder ends the claim.
        let r = send(
            svc,
            "PATCH",
            patch,
            "/v1/tasks/p-1",
            "olga",
            &[],
            Some(json!({"excluded_actors": ["alice"]})),
        );
        assert_eq!(r.expect_ok()["state"], "open");
        assert_eq!(r.body["assignee"], Value::Null);
        // Another tenant's operator: 404, as for no task.
        send(
            svc,
            "PATCH",
            patch,
            "/v1/tasks/p-1",
            "gina",
            &[],
            Some(json!({"priority": "low"})),
        )
        .expect_problem(404, "not-found");
        // A settled task is not changed.
        svc.call(
            "POST",
            "/v1/tasks/p-1/settle",
            Some("sam"),
            Some(json!({"settlement": "withdrawn"})),
        )
        .expect_ok();
        send(
            svc,
            "PATCH",
            patch,
            "/v1/tasks/p-1",
            "olga",
            &[],
            Some(json!({"priority": "low"})),
        )
        .expect_problem(409, "not-pending");
    });
}

#[test]
fn operators_assign_and_unassign_and_reviewers_may_not() {
    each_backend(|svc| {
        open(svc, "a-1");
        let assign = "/v1/tasks/{id}/assign";
        for who in ["alice", "carol"] {
            send(
                svc,
                "POST",
                assign,
                "/v1/tasks/a-1/assign",
                who,
                &[],
                Some(json!({"to": who, "roles": ["finance"]})),
            )
            .expect_problem(403, "forbidden");
            send(
                svc,
                "POST",
                "/v1/tasks/{id}/unassign",
                "/v1/tasks/a-1/unassign",
                who,
                &[],
                None,
            )
            .expect_problem(403, "forbidden");
        }
        // The roles rung for `to`: carol's legal role is no candidate.
        send(
            svc,
            "POST",
            assign,
            "/v1/tasks/a-1/assign",
            "olga",
            &[],
            Some(json!({"to": "carol", "roles": ["legal"]})),
        )
        .expect_problem(409, "wrong-role");
        let r = send(
            svc,
            "POST",
            assign,
            "/v1/tasks/a-1/assign",
            "olga",
            &[("If-Match", "\"1\"")],
            Some(json!({"to": "bob", "roles": ["finance"], "lease_ms": 60_000})),
        );
        assert_eq!(r.expect_ok()["assignee"], "bob");
        assert_eq!(etag(&r), "\"2\"");
        // Overriding the roles rule is said in the record.
        let r = send(
            svc,
            "POST",
            assign,
            "/v1/tasks/a-1/assign",
            "sam",
            &[],
            Some(json!({"to": "carol", "override_roles": true})),
        );
        assert_eq!(r.expect_ok()["assignee"], "carol");
        let last = history(svc, "a-1").pop().expect("an entry");
        assert_eq!(last["verb"], "assign");
        assert!(
            last["changes"]
                .as_array()
                .expect("changes")
                .iter()
                .any(|c| c["field"] == "override-roles"),
            "{last}"
        );
        let r = send(
            svc,
            "POST",
            "/v1/tasks/{id}/unassign",
            "/v1/tasks/a-1/unassign",
            "olga",
            &[],
            None,
        );
        assert_eq!(r.expect_ok()["state"], "open");
        assert_eq!(r.body["assignee"], Value::Null);
    });
}

#[test]
fn a_reviewer_delegates_only_what_it_holds_to_whom_the_rules_accept() {
    each_backend(|svc| {
        open(svc, "d-1");
        let delegate = "/v1/tasks/{id}/delegate";
        // Not held by alice: not-held (she may see it), nothing written.
        send(
            svc,
            "POST",
            delegate,
            "/v1/tasks/d-1/delegate",
            "alice",
            &[],
            Some(json!({"to": "bob"})),
        )
        .expect_problem(409, "not-held");
        svc.call("POST", "/v1/tasks/d-1/claim", Some("alice"), None)
            .expect_ok();
        // She may not say whom she acts as, nor vouch for bob's roles.
        send(
            svc,
            "POST",
            delegate,
            "/v1/tasks/d-1/delegate",
            "bob",
            &[],
            Some(json!({"to": "bob", "from": "alice"})),
        )
        .expect_problem(403, "acting-as-another");
        send(
            svc,
            "POST",
            delegate,
            "/v1/tasks/d-1/delegate",
            "alice",
            &[],
            Some(json!({"to": "carol", "roles": ["finance"]})),
        )
        .expect_problem(403, "acting-as-another");
        // bob holds nothing: not-held, as bob.
        let r = send(
            svc,
            "POST",
            delegate,
            "/v1/tasks/d-1/delegate",
            "bob",
            &[],
            Some(json!({"to": "bob"})),
        );
        r.expect_problem(409, "not-held");
        assert_eq!(r.body["actor"], "bob");
        // carol's credentials give her only legal: the rules refuse her;
        // dave has no credential here at all, so no role.
        for to in ["carol", "dave"] {
            send(
                svc,
                "POST",
                delegate,
                "/v1/tasks/d-1/delegate",
                "alice",
                &[],
                Some(json!({"to": to})),
            )
            .expect_problem(409, "wrong-role");
        }
        // carol may not see the task at all: 404, as for no task.
        send(
            svc,
            "POST",
            delegate,
            "/v1/tasks/d-1/delegate",
            "carol",
            &[],
            Some(json!({"to": "carol"})),
        )
        .expect_problem(404, "not-found");
        let r = send(
            svc,
            "POST",
            delegate,
            "/v1/tasks/d-1/delegate",
            "alice",
            &[("If-Match", "\"2\"")],
            Some(json!({"to": "bob", "lease_ms": 60_000})),
        );
        assert_eq!(r.expect_ok()["assignee"], "bob");
        assert!(r.body["lease_until"].is_i64());
        let last = history(svc, "d-1").pop().expect("an entry");
        assert_eq!(
            (last["verb"].clone(), last["actor"].clone()),
            (json!("delegate"), json!("alice"))
        );
        // An operator may hand it on for anyone, naming the roles.
        let r = send(
            svc,
            "POST",
            delegate,
            "/v1/tasks/d-1/delegate",
            "olga",
            &[],
            Some(json!({"to": "carol", "from": "bob", "roles": ["finance"]})),
        );
        assert_eq!(r.expect_ok()["assignee"], "carol");
    });
}

#[test]
fn anyone_who_sees_a_task_notes_it_as_itself_and_no_one_else_can() {
    each_backend(|svc| {
        open(svc, "n-1");
        let notes = "/v1/tasks/{id}/notes";
        let r = send(
            svc,
            "POST",
            notes,
            "/v1/tasks/n-1/notes",
            "alice",
            &[],
            Some(json!({"text": "asked the vendor"})),
        );
        assert_eq!(r.expect_ok()["revision"], 2);
        assert_eq!(etag(&r), "\"2\"");
        let last = history(svc, "n-1").pop().expect("an entry");
        assert_eq!(last["verb"], "note");
        assert_eq!(last["actor"], "alice");
        assert_eq!(last["note"], "asked the vendor");
        // The reviewer sees the note in the history too.
        let h = svc.call("GET", "/v1/tasks/n-1/history", Some("alice"), None);
        assert!(
            h.expect_ok()["entries"]
                .as_array()
                .expect("entries")
                .iter()
                .any(|e| e["note"] == "asked the vendor")
        );
        // carol may not see it; gus is another tenant: 404, nothing written.
        for who in ["carol", "gus"] {
            send(
                svc,
                "POST",
                notes,
                "/v1/tasks/n-1/notes",
                who,
                &[],
                Some(json!({"text": "hi"})),
            )
            .expect_problem(404, "not-found");
        }
        // A stale revision, an empty or oversize text: refused.
        send(
            svc,
            "POST",
            notes,
            "/v1/tasks/n-1/notes",
            "bob",
            &[("If-Match", "\"1\"")],
            Some(json!({"text": "late"})),
        )
        .expect_problem(412, "stale");
        send(
            svc,
            "POST",
            notes,
            "/v1/tasks/n-1/notes",
            "bob",
            &[],
            Some(json!({"text": "x".repeat(4097)})),
        )
        .expect_problem(400, "invalid");
        assert_eq!(history(svc, "n-1").len(), 2);
        // No actor in the body: the note is always the caller's.
        send(
            svc,
            "POST",
            notes,
            "/v1/tasks/n-1/notes",
            "bob",
            &[],
            Some(json!({"text": "x", "actor": "alice"})),
        )
        .expect_problem(400, "invalid");
    });
}
