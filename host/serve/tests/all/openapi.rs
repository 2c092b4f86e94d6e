//! The OpenAPI document is held to the route table, the route table to the
//! WIT's verb list, and the served document to the generated one; what the
//! service issues to be passed back fits the document's parameters.

use std::collections::BTreeSet;

use leasehold_serve::routes;
use serde_json::{Value, json};

use crate::harness::{Service, each_backend, new_task, test_options};

/// Every exported function of the world, read from the WIT files as
/// host/src/verbs.rs's test reads them.
fn wit_verbs() -> BTreeSet<String> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../wit");
    let mut verbs = BTreeSet::new();
    for interface in [
        "tasks",
        "kinds",
        "timers",
        "runs",
        "admin",
        "changes",
        "schedules",
        "subscriptions",
        "search",
        "jobs",
    ] {
        let text = std::fs::read_to_string(dir.join(format!("{interface}.wit"))).expect("WIT");
        for line in text.lines() {
            let line = line.trim();
            if let Some((name, rest)) = line.split_once(':')
                && rest.trim_start().starts_with("func(")
                && !name.contains(' ')
            {
                verbs.insert(name.trim_start_matches('%').to_owned());
            }
        }
    }
    verbs
}

#[test]
fn every_wit_verb_has_exactly_one_route() {
    // Routes that call no verb of their own.
    let not_verbs = ["whoami", "resume-subscription"];
    // Verbs not served: the sweeper's (the search index's build, the jobs'
    // steps) and the delivery engine's own books.
    let not_served = [
        "build-search-index",
        "step-job",
        "runnable-jobs",
        "advance-subscription",
        "lease-subscription",
        "release-subscription",
        "record-subscription-attempts",
    ];
    let routed: Vec<&str> = routes()
        .iter()
        .map(|r| r.verb.as_str())
        .filter(|v| !not_verbs.contains(v))
        .collect();
    let routed_set: BTreeSet<String> = routed.iter().map(|s| (*s).to_owned()).collect();
    assert_eq!(routed.len(), routed_set.len(), "a verb has two routes");
    let mut wit = wit_verbs();
    assert_eq!(wit.len(), 81, "the WIT's verbs: {wit:?}");
    for v in not_served {
        assert!(wit.remove(v), "{v} is not a verb of the WIT");
    }
    assert_eq!(routed_set, wit);
}

#[test]
fn the_openapi_document_lists_exactly_the_route_table() {
    let doc = serde_json::to_value(leasehold_serve::openapi()).expect("serializes");
    assert_eq!(doc["openapi"], "3.1.0");
    let mut documented = BTreeSet::new();
    for (path, item) in doc["paths"].as_object().expect("paths") {
        for (method, op) in item.as_object().expect("operations") {
            let id = op["operationId"].as_str().expect("operationId").to_owned();
            assert!(
                op["security"].is_array(),
                "{method} {path} declares no security"
            );
            assert!(
                op["responses"]["default"]["content"]["application/problem+json"].is_object(),
                "{method} {path} does not document its problems"
            );
            documented.insert((method.to_ascii_uppercase(), path.clone(), id));
        }
    }
    let table: BTreeSet<_> = routes()
        .iter()
        .map(|r| (r.method.clone(), r.path.clone(), r.verb.clone()))
        .collect();
    assert_eq!(documented, table);
    assert!(doc["components"]["securitySchemes"]["bearer"].is_object());
}

#[test]
fn the_served_document_is_the_generated_one_and_every_route_answers() {
    each_backend(|svc| {
        let generated = serde_json::to_value(leasehold_serve::openapi()).expect("serializes");
        assert_eq!(svc.openapi(), &generated);
        // Every documented route is served: without a token it answers 401,
        // never 404 or 405.
        for r in routes() {
            let path = r
                .path
                .replace("{id}", "x")
                .replace("{case}", "x")
                .replace("{run}", "x")
                .replace("{effect}", "x");
            let reply = svc.call(&r.method, &path, None, None);
            assert_eq!(reply.status, 401, "{} {}", r.method, r.path);
        }
    });
}

/// What strict client generators and validators demand of parameters, and
/// what a schema-based client needs to be told about values only the
/// service issues: a cursor or position that matches its pattern may still
/// be refused, so each operation taking one documents that 400.
#[test]
fn path_parameters_are_required_and_issued_values_document_their_refusal() {
    let doc = serde_json::to_value(leasehold_serve::openapi()).expect("serializes");
    let mut issued = 0;
    for (path, item) in doc["paths"].as_object().expect("paths") {
        for (method, op) in item.as_object().expect("operations") {
            for p in op["parameters"].as_array().into_iter().flatten() {
                let name = p["name"].as_str().expect("a name");
                if p["in"] == "path" {
                    assert_eq!(p["required"], true, "{method} {path}: {name}");
                }
                let only_given = p["schema"]["description"]
                    .as_str()
                    .is_some_and(|d| d.contains("Only a value this service gave"));
                if only_given {
                    issued += 1;
                    assert!(
                        op["responses"]["400"]["content"]["application/problem+json"].is_object(),
                        "{method} {path} takes {name} but documents no 400"
                    );
                }
            }
        }
    }
    // The queue's and a case's cursors, the feed's position and the
    // stream's Last-Event-ID.
    assert!(issued >= 4, "{issued} issued-only parameters");
}

/// The schema of query parameter `name` of `GET path` in the served
/// document, as a JSON Schema 2020-12 validator (OpenAPI 3.1's dialect).
fn query_schema(doc: &Value, path: &str, name: &str) -> jsonschema::Validator {
    let schema = doc["paths"][path]["get"]["parameters"]
        .as_array()
        .expect("parameters")
        .iter()
        .find(|p| p["name"] == name && p["in"] == "query")
        .unwrap_or_else(|| panic!("GET {path} takes {name}"))["schema"]
        .clone();
    jsonschema::options()
        .with_draft(jsonschema::Draft::Draft202012)
        .build(&schema)
        .expect("the parameter's schema compiles")
}

/// Every position and cursor the service issues is one its document admits
/// as the parameter it is passed back in, and is taken back there: a
/// client that validates its requests against the document sends back
/// what it was given. Checked with a JSON Schema validator over reviewers'
/// positions of every length task names give them, a service's, and both
/// kinds of page cursor; and what the document forbids, the server refuses.
#[test]
fn issued_positions_and_cursors_fit_the_document_and_round_trip() {
    let svc = Service::start(crate::harness::redb_store(), test_options());
    let doc = svc.openapi().clone();
    let position = query_schema(&doc, "/v1/events", "after");
    let queue_cursor = query_schema(&doc, "/v1/queue", "after");
    let case_cursor = query_schema(&doc, "/v1/cases/{case}/tasks", "after");
    let mut checked = 0;
    // Sent back as the document's client would: validated first.
    let mut send_back = |v: &jsonschema::Validator, who: &str, path: &str, value: &str| {
        assert!(
            v.is_valid(&json!(value)),
            "{path}: the document forbids an issued value of {} characters: {:?}",
            value.len(),
            v.iter_errors(&json!(value))
                .map(|e| e.to_string())
                .collect::<Vec<_>>()
        );
        let sep = if path.contains('?') { '&' } else { '?' };
        let r = svc.call("GET", &format!("{path}{sep}after={value}"), Some(who), None);
        assert_eq!(
            r.status,
            200,
            "{path}: {} characters: {}",
            value.len(),
            r.text
        );
        checked += 1;
        r.body.clone()
    };
    // A reviewer's positions: on an empty feed, then after changes of
    // tasks whose names (which its positions carry, sealed) run from one
    // character to the longest a name may be.
    let empty = svc.call("GET", "/v1/events", Some("alice"), None);
    let mut after = empty.expect_ok()["next"].as_str().expect("next").to_owned();
    let mut lengths = BTreeSet::new();
    for n in [1, 2, 3, 5, 8, 13, 40, 100, 255, 256] {
        let id: String = std::iter::repeat_n('x', n - 1).chain(['a']).collect();
        svc.call("POST", "/v1/tasks", Some("sam"), Some(new_task(&id)))
            .expect_ok();
        let page = send_back(&position, "alice", "/v1/events?limit=1", &after);
        let entry = &page["entries"][0];
        assert_eq!(entry["change"]["task"]["id"], json!(id));
        for field in [&entry["position"], &page["next"], &page["head"]] {
            let shown = field.as_str().expect("a position").to_owned();
            lengths.insert(shown.len());
            send_back(&position, "alice", "/v1/events", &shown);
        }
        after = page["next"].as_str().expect("next").to_owned();
    }
    assert!(lengths.len() >= 8, "positions of few lengths: {lengths:?}");
    // A service's.
    let page = svc.call("GET", "/v1/events?limit=3", Some("sam"), None);
    let next = page.expect_ok()["next"].as_str().expect("next").to_owned();
    send_back(&position, "sam", "/v1/events", &next);
    // Page cursors, of the queue and of a case.
    for (v, path) in [
        (&queue_cursor, "/v1/queue?limit=1"),
        (&case_cursor, "/v1/cases/case-1/tasks?limit=1"),
    ] {
        let first = svc.call("GET", path, Some("alice"), None);
        let next = first.expect_ok()["next"]
            .as_str()
            .expect("a next")
            .to_owned();
        let second = send_back(v, "alice", path, &next);
        assert_ne!(second["tasks"], first.body["tasks"], "{path} reads on");
    }
    // What the document forbids, the server refuses.
    let cursor = svc.call("GET", "/v1/queue?limit=1", Some("alice"), None);
    let cursor = cursor.expect_ok()["next"]
        .as_str()
        .expect("a next")
        .to_owned();
    let longest = doc["paths"]["/v1/events"]["get"]["parameters"]
        .as_array()
        .expect("parameters")
        .iter()
        .find(|p| p["name"] == "after")
        .and_then(|p| p["schema"]["maxLength"].as_u64())
        .expect("a longest position") as usize;
    for (v, who, path, value) in [
        (&position, "alice", "/v1/events", "A".repeat(longest + 1)),
        (&position, "alice", "/v1/events", "A".repeat(20)),
        (&queue_cursor, "alice", "/v1/queue", format!("{cursor}A")),
        (&queue_cursor, "alice", "/v1/queue", cursor[1..].to_owned()),
    ] {
        assert!(
            !v.is_valid(&json!(value)),
            "{path}: {} admitted",
            value.len()
        );
        svc.call("GET", &format!("{path}?after={value}"), Some(who), None)
            .expect_problem(400, "invalid");
    }
    assert!(checked >= 30, "{checked} values sent back");
}
