//! The authorization matrix: every route × {no token, bad token, expired
//! JWT, wrong tenant, wrong scope, reviewer acting as someone else}. Each
//! gets its status and none changes the store: the check answers and the
//! raw keyspace are the same before and after.

use leasehold_serve::{Route, Scope, routes};
use serde_json::{Value, json};

use crate::harness::{Service, claims, each_backend, jwt, new_task, new_timer, unix_now};

/// A concrete path for a route template, naming data that exists in acme.
fn path(r: &Route) -> String {
    r.path
        .replace("{id}", "t-1")
        .replace("{case}", "case-1")
        .replace("{run}", "run-1")
        .replace("{effect}", "e-1")
        .replace("{name}", "v-1")
}

/// A body the route accepts, so only the credential decides.
fn body(r: &Route) -> Option<Value> {
    Some(match r.verb.as_str() {
        "open" => new_task("t-new"),
        "claim" | "claim-next" => json!({"lease_ms": 1000}),
        "claim-batch" => json!({"count": 5, "lease_ms": 1000}),
        "settle-and-claim" => json!({
            "done": [{"id": "t-1", "settlement": "completed"}],
            "count": 5,
            "lease_ms": 1000,
        }),
        "release" => json!({}),
        "take-over" => json!({"from": "alice"}),
        "renew" => json!({"lease_ms": 1000}),
        "settle" => json!({"settlement": "completed"}),
        "reclaim-lapsed" => json!({"now": 253402300799999i64}),
        "withdraw-run" | "seal" => json!({"awaited": ["t-1"]}),
        "arm" => new_timer("run-1", "e-new", 1),
        "claim-due" => json!({"lease_ms": 1000, "now": 253402300799999i64}),
        "add-schedule" => new_schedule("s-new"),
        "pause-schedule" => json!({"note": "x"}),
        _ => return None,
    })
}

/// A schedule body for `add-schedule`.
fn new_schedule(id: &str) -> Value {
    json!({
        "id": id, "run": "run-1", "zone": "UTC",
        "recurrence": {"kind": "cron", "expr": "0 0 1 1 *"},
    })
}

/// The data every cell of the matrix could reach; answers the id of acme's
/// subscription (paused, so no delivery writes while the matrix runs).
fn seed(svc: &Service) -> String {
    svc.call("POST", "/v1/tasks", Some("sam"), Some(new_task("t-1")))
        .expect_ok();
    svc.call("POST", "/v1/tasks", Some("sam"), Some(new_task("t-2")))
        .expect_ok();
    svc.call(
        "POST",
        "/v1/tasks/t-1/claim",
        Some("alice"),
        Some(json!({"lease_ms": 3_600_000})),
    )
    .expect_ok();
    svc.call(
        "POST",
        "/v1/timers",
        Some("sam"),
        Some(new_timer("run-1", "e-1", 10)),
    )
    .expect_ok();
    svc.call(
        "POST",
        "/v1/schedules",
        Some("olga"),
        Some(new_schedule("t-1")),
    )
    .expect_ok();
    let mut globex = new_task("g-1");
    globex["case"] = json!("globex-case");
    globex["justification"] = json!({"globex": true});
    svc.call("POST", "/v1/tasks", Some("gina"), Some(globex))
        .expect_ok();
    svc.call("PUT", "/v1/views/v-1", Some("olga"), Some(json!({})))
        .expect_ok();
    // The sweeper is off: the job stays as started.
    svc.call(
        "POST",
        "/v1/jobs",
        Some("olga"),
        Some(json!({"id": "t-1", "filter": {}, "action": {"kind": "release"}})),
    )
    .expect_ok();
    let sub = svc.call(
        "POST",
        "/v1/subscriptions",
        Some("olga"),
        Some(json!({"url": "https://hooks.example.com/acme"})),
    );
    let id = sub.expect_ok()["subscription"]["id"]
        .as_str()
        .expect("an id")
        .to_owned();
    svc.call(
        "POST",
        &format!("/v1/subscriptions/{id}/pause"),
        Some("olga"),
        None,
    )
    .expect_ok();
    id
}

/// A token of `scope` in acme, if the matrix has one.
fn token_of(scope: Scope) -> &'static str {
    match scope {
        Scope::Reviewer => "alice",
        Scope::Service => "sam",
        Scope::Operator => "olga",
    }
}

#[test]
fn no_credential_outside_its_rights_changes_anything() {
    each_backend(|svc| {
        let sub = seed(svc);
        let before = svc.snapshot();
        let expired = jwt("RS256", &{
            let mut c = claims("acme", "olga", "operator", &["finance"]);
            c["exp"] = json!(unix_now() - 3600);
            c["iat"] = json!(unix_now() - 7200);
            c["nbf"] = json!(unix_now() - 7200);
            c
        });
        let mut cells = 0;
        for r in routes() {
            let p = path(r);
            let b = body(r);
            let send = |who: Option<&str>, body: Option<Value>| {
                let reply = svc.call(&r.method, &p, who, body);
                svc.conforms(&r.method, &r.path, &reply);
                reply
            };
            // No token, a bad token, an expired JWT: 401.
            send(None, b.clone()).expect_problem(401, "unauthorized");
            send(Some("lh_0000000000000000"), b.clone()).expect_problem(401, "unauthorized");
            send(Some(&expired), b.clone()).expect_problem(401, "unauthorized");
            let www = send(None, b.clone());
            assert!(www.headers.contains_key("www-authenticate"), "{}", r.verb);
            cells += 3;

            // Wrong scope: every scope this route does not admit.
            for scope in [Scope::Reviewer, Scope::Service, Scope::Operator] {
                if !r.scopes.contains(&scope) {
                    send(Some(token_of(scope)), b.clone()).expect_problem(403, "forbidden");
                    cells += 1;
                }
            }

            // A reviewer acting as someone else, or giving its own time.
            if r.scopes.contains(&Scope::Reviewer) {
                let as_bob = match r.verb.as_str() {
                    "claim" | "claim-next" => Some(json!({"actor": "bob", "lease_ms": 1000})),
                    "claim-batch" => Some(json!({"actor": "bob", "count": 5})),
                    "settle-and-claim" => Some(json!({"actor": "bob", "done": [], "count": 5})),
                    "release" => Some(json!({"actor": "bob"})),
                    "renew" => Some(json!({"actor": "bob", "lease_ms": 1000})),
                    "settle" => Some(json!({"settlement": "completed", "holder": "bob"})),
                    "search" | "count" => {
                        Some(json!({"viewer": {"actor": "bob", "roles": ["finance"]}}))
                    }
                    _ => None,
                };
                if let Some(as_bob) = as_bob {
                    send(Some("alice"), Some(as_bob)).expect_problem(403, "acting-as-another");
                    cells += 1;
                }
                if r.verb == "delegate" {
                    let as_bob = json!({"to": "alice", "from": "bob"});
                    send(Some("alice"), Some(as_bob)).expect_problem(403, "acting-as-another");
                    let vouched = json!({"to": "carol", "roles": ["finance"]});
                    send(Some("alice"), Some(vouched)).expect_problem(403, "acting-as-another");
                    cells += 2;
                }
                if r.verb == "held" {
                    let q = svc.call("GET", "/v1/me/tasks?actor=bob", Some("alice"), None);
                    q.expect_problem(403, "acting-as-another");
                    cells += 1;
                }
                if r.verb == "queue" {
                    let q = svc.call("GET", "/v1/queue?actor=bob", Some("alice"), None);
                    q.expect_problem(403, "acting-as-another");
                    let q = svc.call("GET", "/v1/queue?roles=legal", Some("alice"), None);
                    q.expect_problem(403, "acting-as-another");
                    cells += 2;
                }
                if matches!(
                    r.verb.as_str(),
                    "claim" | "claim-next" | "claim-batch" | "settle-and-claim" | "renew"
                ) {
                    let mut timed = b.clone().unwrap_or_else(|| json!({}));
                    timed["now"] = json!(5);
                    send(Some("alice"), Some(timed)).expect_problem(403, "forbidden");
                    cells += 1;
                }
            }
        }
        // Wrong tenant: globex's credentials name acme's ids and see only
        // globex, where none of them exists; nothing of acme leaks.
        for (who, method, p, b) in [
            ("gina", "GET", "/v1/tasks/t-1", None),
            ("gus", "GET", "/v1/tasks/t-1", None),
            (
                "gina",
                "POST",
                "/v1/tasks/t-1/claim",
                Some(json!({"actor": "alice"})),
            ),
            ("gus", "POST", "/v1/tasks/t-1/claim", None),
            ("gus", "POST", "/v1/tasks/t-1/release", None),
            (
                "gus",
                "POST",
                "/v1/tasks/t-1/renew",
                Some(json!({"lease_ms": 10})),
            ),
            (
                "gus",
                "POST",
                "/v1/tasks/t-1/settle",
                Some(json!({"settlement": "completed"})),
            ),
            (
                "gina",
                "POST",
                "/v1/tasks/t-1/settle",
                Some(json!({"settlement": "completed"})),
            ),
            ("gina", "POST", "/v1/tasks/t-1/escalate", None),
            (
                "gina",
                "PATCH",
                "/v1/tasks/t-1",
                Some(json!({"priority": "low"})),
            ),
            (
                "gina",
                "POST",
                "/v1/tasks/t-1/assign",
                Some(json!({"to": "gus", "override_roles": true})),
            ),
            ("gina", "POST", "/v1/tasks/t-1/unassign", None),
            (
                "gus",
                "POST",
                "/v1/tasks/t-1/delegate",
                Some(json!({"to": "gus"})),
            ),
            (
                "gus",
                "POST",
                "/v1/tasks/t-1/notes",
                Some(json!({"text": "hello"})),
            ),
            ("gus", "GET", "/v1/tasks/t-1?wait_ms=30000", None),
            (
                "gina",
                "POST",
                "/v1/tasks/t-1/take-over",
                Some(json!({"from": "alice"})),
            ),
        ] {
            let reply = svc.call(method, p, Some(who), b);
            reply.expect_problem(404, "not-found");
            cells += 1;
        }
        for (who, p) in [
            ("gina", "/v1/cases/case-1/tasks"),
            ("gus", "/v1/queue"),
            ("gina", "/v1/overdue?now=99999"),
        ] {
            let reply = svc.call("GET", p, Some(who), None);
            let tasks = reply.expect_ok()["tasks"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            assert!(
                tasks
                    .iter()
                    .all(|t| t["id"].as_str().is_some_and(|id| id.starts_with("g-"))),
                "{who} {p}: {tasks:?}"
            );
            assert!(!reply.text.contains("acme-secret"));
            cells += 1;
        }
        for (p, key, none) in [
            ("/v1/runs/run-1", "sealed", json!(false)),
            ("/v1/stats/pending-count", "count", json!(0)),
            ("/v1/stats/open-count", "count", json!(1)),
        ] {
            let reply = svc.call("GET", p, Some("gina"), None);
            assert_eq!(reply.expect_ok()[key], none, "{p}");
            cells += 1;
        }
        // Nor of acme's schedules: globex's operator names one and finds
        // none, lists none, removes none.
        for (method, p, b) in [
            ("GET", "/v1/schedules/t-1", None),
            ("GET", "/v1/schedules/t-1/next", None),
            (
                "POST",
                "/v1/schedules/t-1/pause",
                Some(json!({"note": "x"})),
            ),
            ("POST", "/v1/schedules/t-1/resume", None),
            ("POST", "/v1/schedules/t-1/trigger", None),
        ] {
            let reply = svc.call(method, p, Some("gina"), b);
            reply.expect_problem(404, "not-found");
            cells += 1;
        }
        let listed = svc.call("GET", "/v1/schedules", Some("gina"), None);
        assert_eq!(listed.expect_ok()["schedules"], json!([]));
        let removed = svc.call("DELETE", "/v1/schedules/t-1", Some("gina"), None);
        assert_eq!(removed.expect_ok()["removed"], false);
        cells += 2;
        // Nor of acme's subscriptions: globex's operator names acme's and
        // finds none, lists none, removes none.
        let one = format!("/v1/subscriptions/{sub}");
        for (method, p, b) in [
            ("GET", one.clone(), None),
            (
                "PATCH",
                one.clone(),
                Some(json!({"url": "https://hooks.example.com/globex"})),
            ),
            ("POST", format!("{one}/pause"), None),
            ("POST", format!("{one}/resume"), None),
            ("POST", format!("{one}/rotate"), None),
            ("POST", format!("{one}/replay"), None),
        ] {
            let reply = svc.call(method, &p, Some("gina"), b);
            reply.expect_problem(404, "not-found");
            assert!(!reply.text.contains("hooks.example.com/acme"));
            cells += 1;
        }
        // Nor of acme's views and tasks by search: globex's credentials
        // find none of acme's, count none, remove none.
        for who in ["gina", "gus"] {
            let reply = svc.call("GET", "/v1/views/v-1", Some(who), None);
            reply.expect_problem(404, "not-found");
            let listed = svc.call("GET", "/v1/views", Some(who), None);
            assert_eq!(listed.expect_ok()["views"], json!([]));
            let found = svc.call("POST", "/v1/search", Some(who), Some(json!({})));
            let ids: Vec<&str> = found.expect_ok()["tasks"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|t| t["id"].as_str())
                .collect();
            assert_eq!(ids, ["g-1"], "{who}");
            assert!(!found.text.contains("acme-secret"));
            let counted = svc.call("POST", "/v1/search/count", Some(who), Some(json!({})));
            assert_eq!(counted.expect_ok()["count"], 1, "{who}");
            cells += 4;
        }
        let removed = svc.call("DELETE", "/v1/views/v-1", Some("gina"), None);
        removed.expect_problem(404, "not-found");
        cells += 1;
        // Nor of acme's jobs: globex's operator names acme's and finds
        // none, lists none, cancels none.
        svc.call("GET", "/v1/jobs/t-1", Some("gina"), None)
            .expect_problem(404, "not-found");
        svc.call("POST", "/v1/jobs/t-1/cancel", Some("gina"), None)
            .expect_problem(404, "not-found");
        let listed = svc.call("GET", "/v1/jobs", Some("gina"), None);
        assert_eq!(listed.expect_ok()["jobs"], json!([]));
        cells += 3;
        let listed = svc.call("GET", "/v1/subscriptions", Some("gina"), None);
        assert_eq!(listed.expect_ok()["subscriptions"], json!([]));
        let removed = svc.call("DELETE", &one, Some("gina"), None);
        assert_eq!(removed.expect_ok()["removed"], false);
        cells += 2;
        let after = svc.snapshot();
        assert_eq!(before.0, after.0, "the check answers changed");
        assert!(before.1 == after.1, "the keyspace changed");
        // 264: `next-wake` added five (three credentials, two scopes), as
        // every operator-only read does; 317: the nine operator-only
        // subscription routes, five each, and eight of globex's operator
        // naming acme's subscription; 350: search and count (three
        // credentials, a reviewer acting as another), the views' two
        // readers (three) and two operator-only writers (five), and nine
        // of globex naming acme's view or searching; 369: the four
        // operator-and-service job routes (four each), and three of
        // globex naming acme's job; 381: the worker's two routes, six each
        // (three credentials, a service's 403, a reviewer acting as bob or
        // giving its own time).
        assert_eq!(cells, 381, "the matrix has as many cells as it had");
    });
}

#[test]
fn signed_jwts_of_both_algorithms_act_as_their_claims_say() {
    each_backend(|svc| {
        svc.call("POST", "/v1/tasks", Some("sam"), Some(new_task("t-1")))
            .expect_ok();
        for alg in ["RS256", "ES256"] {
            let alice = jwt(alg, &claims("acme", "alice", "reviewer", &["finance"]));
            let r = svc.call("GET", "/v1/tasks/t-1", Some(&alice), None);
            assert_eq!(r.expect_ok()["id"], "t-1", "{alg}");
            // The scope claim binds: a reviewer JWT may not open tasks.
            svc.call("POST", "/v1/tasks", Some(&alice), Some(new_task("x")))
                .expect_problem(403, "forbidden");
        }
        let mut bad = Vec::new();
        let base = claims("acme", "alice", "reviewer", &["finance"]);
        for (field, value) in [
            ("iss", json!("https://evil.test")),
            ("aud", json!("someone-else")),
            ("nbf", json!(unix_now() + 3600)),
            ("exp", json!(unix_now() - 3600)),
            ("scope", json!("reviewer operator")),
            ("scope", json!("admin")),
        ] {
            let mut c = base.clone();
            c[field] = value;
            bad.push((field.to_owned(), jwt("ES256", &c)));
        }
        let mut missing = base.clone();
        missing.as_object_mut().map(|o| o.remove("tenant"));
        bad.push(("no tenant".to_owned(), jwt("RS256", &missing)));
        // A token signed by another key: the signature fails.
        let good = jwt("RS256", &base);
        let (head, rest) = good.split_once('.').unwrap_or_default();
        let (payload, _) = rest.split_once('.').unwrap_or_default();
        bad.push(("forged".to_owned(), format!("{head}.{payload}.AAAA")));
        // alg none is never accepted.
        let none_head = "eyJhbGciOiJub25lIiwidHlwIjoiSldUIn0";
        bad.push(("alg none".to_owned(), format!("{none_head}.{payload}.")));
        for (why, token) in bad {
            let r = svc.call("GET", "/v1/tasks/t-1", Some(&token), None);
            assert_eq!(r.status, 401, "{why}: {r:#?}");
        }
    });
}

/// The simplest value `schema` (of the served document `doc`) admits: an
/// enum's first, the least number, one character, no items, and of an
/// object its required properties alone; so a request built from the
/// document alone is one its route takes.
fn least(doc: &Value, schema: &Value) -> Value {
    if let Some(r) = schema["$ref"].as_str() {
        let name = r.trim_start_matches("#/components/schemas/");
        return least(doc, &doc["components"]["schemas"][name]);
    }
    if let Some(first) = schema["enum"].as_array().and_then(|e| e.first()) {
        return first.clone();
    }
    for key in ["oneOf", "anyOf"] {
        if let Some(list) = schema[key].as_array() {
            let pick = list
                .iter()
                .find(|s| s["type"] != "null")
                .unwrap_or(&list[0]);
            return least(doc, pick);
        }
    }
    let types: Vec<&str> = match &schema["type"] {
        Value::String(t) => vec![t.as_str()],
        Value::Array(ts) => ts.iter().filter_map(Value::as_str).collect(),
        _ => vec!["object"],
    };
    match types
        .iter()
        .find(|t| **t != "null")
        .copied()
        .unwrap_or("null")
    {
        "object" => {
            let mut out = serde_json::Map::new();
            for name in schema["required"].as_array().into_iter().flatten() {
                let name = name.as_str().expect("a property name");
                out.insert(name.to_owned(), least(doc, &schema["properties"][name]));
            }
            Value::Object(out)
        }
        // Every number of the document is an integer.
        "integer" | "number" => json!(schema["minimum"].as_f64().map_or(0, |n| n as i64)),
        "string" => json!("x"),
        "boolean" => json!(false),
        "array" => json!([]),
        _ => Value::Null,
    }
}

/// Every route that names a task, called by a reviewer about a task it may
/// not see (offered to another role; excluding it; held by someone it may
/// not see), answers exactly what it answers about a task that does not
/// exist: the same status and the same body but for the id. The routes
/// are the served route table's, their bodies and other path parameters
/// made from the served document, so a route added later is checked too.
#[test]
fn a_task_a_reviewer_may_not_see_is_answered_as_one_that_does_not_exist() {
    each_backend(|svc| {
        let doc = svc.openapi().clone();
        let mut legal = new_task("legal-1");
        legal["candidate_roles"] = json!(["legal"]);
        let mut excluding = new_task("four-eyes-1");
        excluding["excluded_actors"] = json!(["alice"]);
        let mut held = new_task("legal-held");
        held["candidate_roles"] = json!(["legal"]);
        for t in [legal, excluding, held] {
            svc.call("POST", "/v1/tasks", Some("sam"), Some(t))
                .expect_ok();
        }
        svc.call(
            "POST",
            "/v1/tasks/legal-held/claim",
            Some("carol"),
            Some(json!({"lease_ms": 3_600_000})),
        )
        .expect_ok();
        let hidden = ["legal-1", "four-eyes-1", "legal-held"];
        let unknown = "no-such-1";
        let mut checked = 0;
        for (k, r) in routes().iter().enumerate() {
            if !r.path.contains("{id}") {
                continue;
            }
            let op = &doc["paths"][&r.path][r.method.to_ascii_lowercase()];
            let mut template = r.path.clone();
            for p in op["parameters"].as_array().into_iter().flatten() {
                let name = p["name"].as_str().expect("a name");
                if p["in"] == "path" && name != "id" {
                    let v = least(&doc, &p["schema"]);
                    let v = v.as_str().map_or_else(|| v.to_string(), str::to_owned);
                    template = template.replace(&format!("{{{name}}}"), &v);
                }
            }
            let body = op["requestBody"]["content"]["application/json"]["schema"]
                .is_object()
                .then(|| {
                    least(
                        &doc,
                        &op["requestBody"]["content"]["application/json"]["schema"],
                    )
                });
            let ask = |id: &str| {
                let reply = svc.call(
                    &r.method,
                    &template.replace("{id}", id),
                    Some("alice"),
                    body.clone(),
                );
                svc.conforms(&r.method, &r.path, &reply);
                reply
            };
            let missing = ask(unknown);
            assert!(
                missing.status >= 400,
                "{} {}: {missing:#?}",
                r.method,
                r.path
            );
            let as_missing = missing.text.replace(unknown, "{id}");
            for id in hidden {
                let reply = ask(id);
                assert_eq!(reply.status, missing.status, "{} {} {id}", r.method, r.path);
                assert_eq!(reply.content_type(), missing.content_type());
                assert_eq!(
                    reply.text.replace(id, "{id}"),
                    as_missing,
                    "{} {} {id}",
                    r.method,
                    r.path
                );
                checked += 1;
            }
            // The same request about a task it may see is taken: neither
            // refused as malformed nor answered as missing.
            if r.allows(Scope::Reviewer) {
                let id = format!("fin-{k}");
                svc.call("POST", "/v1/tasks", Some("sam"), Some(new_task(&id)))
                    .expect_ok();
                let seen = ask(&id);
                assert!(
                    ![400, 403, 404].contains(&seen.status),
                    "{} {} about a task alice may see: {seen:#?}",
                    r.method,
                    r.path
                );
            }
        }
        assert!(
            checked >= 3 * 9,
            "{checked} checks: the routes that name a task"
        );
    });
}
