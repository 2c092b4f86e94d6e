//! The OpenAPI document is held to the route table, the route table to the
//! WIT's verb list, and the served document to the generated one.

use std::collections::BTreeSet;

use leasehold_serve::routes;

use crate::harness::each_backend;

/// Every exported function of the world, read from the WIT files as
/// host/src/verbs.rs's test reads them.
fn wit_verbs() -> BTreeSet<String> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../wit");
    let mut verbs = BTreeSet::new();
    for interface in ["tasks", "timers", "runs", "admin", "changes"] {
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
    let not_verbs = ["whoami"];
    let routed: Vec<&str> = routes()
        .iter()
        .map(|r| r.verb.as_str())
        .filter(|v| !not_verbs.contains(v))
        .collect();
    let routed_set: BTreeSet<String> = routed.iter().map(|s| (*s).to_owned()).collect();
    assert_eq!(routed.len(), routed_set.len(), "a verb has two routes");
    let wit = wit_verbs();
    assert_eq!(wit.len(), 31, "the WIT's verbs: {wit:?}");
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
