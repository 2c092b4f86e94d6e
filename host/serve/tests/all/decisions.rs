//! Decisions over real HTTP: kinds that declare outcomes, a settle held to
//! them (refused naming the field, and the path of a schema violation),
//! and a workflow that learns the decision by waiting on its task and by
//! reading its run's feed, each exactly once, on one server and across two
//! on one PostgreSQL database.

use serde_json::{Value, json};

use crate::harness::{Service, Store, each_backend, new_task, reply, stores, test_options};
use crate::keeping_time::{eventually, metric, serially};
use crate::task_life::{etag, send};

fn kind_body() -> Value {
    json!({"outcomes": [
        {"name": "approved", "output_schema": {
            "type": "object",
            "properties": {"amount": {"type": "integer", "maximum": 10}},
            "required": ["amount"]
        }},
        {"name": "rejected", "needs_reason": true},
        {"name": "returned"}
    ]})
}

fn open_in(svc: &Service, id: &str, run: &str) {
    let mut t = new_task(id);
    t["run"] = json!(run);
    svc.call("POST", "/v1/tasks", Some("sam"), Some(t))
        .expect_ok();
}

fn settle(svc: &Service, id: &str, who: &str, decision: Value) -> crate::harness::Reply {
    send(
        svc,
        "POST",
        "/v1/tasks/{id}/settle",
        &format!("/v1/tasks/{id}/settle"),
        who,
        &[],
        Some(json!({"settlement": "completed", "decision": decision})),
    )
}

#[test]
fn kinds_declare_outcomes_and_a_settle_is_held_to_them() {
    each_backend(|svc| {
        let kind = "/v1/kinds/{kind}";
        send(
            svc,
            "PUT",
            kind,
            "/v1/kinds/approve",
            "alice",
            &[],
            Some(kind_body()),
        )
        .expect_problem(403, "forbidden");
        // Not yet defined: its revision is 0.
        let r = send(
            svc,
            "PUT",
            kind,
            "/v1/kinds/approve",
            "olga",
            &[("If-Match", "\"1\"")],
            Some(kind_body()),
        );
        r.expect_problem(412, "stale");
        assert_eq!(r.body["revision"], 0);
        let r = send(
            svc,
            "PUT",
            kind,
            "/v1/kinds/approve",
            "olga",
            &[("If-Match", "\"0\"")],
            Some(kind_body()),
        );
        assert_eq!(r.expect_ok()["revision"], 1);
        assert_eq!(etag(&r), "\"1\"");
        assert_eq!(
            r.body["outcomes"][0]["output_schema"]["required"],
            json!(["amount"])
        );
        send(
            svc,
            "PUT",
            kind,
            "/v1/kinds/approve",
            "olga",
            &[("If-Match", "\"0\"")],
            Some(kind_body()),
        )
        .expect_problem(412, "stale");
        // A schema with a keyword the rules do not support: refused when
        // declared.
        let r = send(
            svc,
            "PUT",
            kind,
            "/v1/kinds/other",
            "olga",
            &[],
            Some(
                json!({"outcomes": [{"name": "ok", "output_schema": {"type": "object", "frobnicate": 1}}]}),
            ),
        );
        r.expect_problem(400, "invalid");
        assert_eq!(r.body["field"], "outcomes");
        let r = send(svc, "GET", kind, "/v1/kinds/approve", "alice", &[], None);
        assert_eq!(r.expect_ok()["kind"], "approve");
        assert_eq!(etag(&r), "\"1\"");
        send(svc, "GET", kind, "/v1/kinds/other", "alice", &[], None)
            .expect_problem(404, "not-found");
        send(svc, "GET", kind, "/v1/kinds/approve", "gus", &[], None)
            .expect_problem(404, "not-found");
        let list = send(svc, "GET", "/v1/kinds", "/v1/kinds", "olga", &[], None);
        assert_eq!(
            list.expect_ok()["kinds"].as_array().expect("kinds").len(),
            1
        );
        send(svc, "GET", "/v1/kinds", "/v1/kinds", "alice", &[], None)
            .expect_problem(403, "forbidden");

        // A decision on a task of the kind.
        svc.call("POST", "/v1/tasks", Some("sam"), Some(new_task("k-1")))
            .expect_ok();
        svc.call("POST", "/v1/tasks/k-1/claim", Some("alice"), None)
            .expect_ok();
        let r = settle(svc, "k-1", "alice", json!({"outcome": "maybe"}));
        r.expect_problem(400, "invalid");
        assert_eq!(r.body["field"], "decision.outcome");
        let r = settle(svc, "k-1", "alice", json!({"outcome": "rejected"}));
        r.expect_problem(400, "invalid");
        assert_eq!(r.body["field"], "decision.reason");
        let r = settle(
            svc,
            "k-1",
            "alice",
            json!({"outcome": "approved", "output": {"amount": 12}}),
        );
        r.expect_problem(400, "invalid");
        assert_eq!(r.body["field"], "decision.output");
        assert_eq!(r.body["path"], "/amount");
        let t = svc.call("GET", "/v1/tasks/k-1", Some("sam"), None);
        assert_eq!(
            (t.body["state"].clone(), t.body["revision"].clone()),
            (json!("claimed"), json!(2))
        );
        let r = settle(
            svc,
            "k-1",
            "alice",
            json!({"outcome": "rejected", "reason": "over budget"}),
        );
        assert_eq!(r.expect_ok()["settled"], true);
        let t = svc.call("GET", "/v1/tasks/k-1", Some("sam"), None);
        let d = &t.body["decision"];
        assert_eq!(
            (d["outcome"].clone(), d["reason"].clone(), d["by"].clone()),
            (json!("rejected"), json!("over budget"), json!("alice"))
        );
        assert_eq!(t.body["state"], "completed");
        let h = svc.call("GET", "/v1/tasks/k-1/history", Some("alice"), None);
        let last = h.expect_ok()["entries"]
            .as_array()
            .expect("entries")
            .last()
            .cloned()
            .expect("an entry");
        assert_eq!(last["decision"]["outcome"], "rejected");

        // A task's own outcomes come before its kind's.
        svc.call("POST", "/v1/tasks", Some("sam"), Some(new_task("k-2")))
            .expect_ok();
        svc.call(
            "PATCH",
            "/v1/tasks/k-2",
            Some("olga"),
            Some(json!({"outcomes": [{"name": "sent-to-cfo"}]})),
        )
        .expect_ok();
        svc.call("POST", "/v1/tasks/k-2/claim", Some("bob"), None)
            .expect_ok();
        settle(svc, "k-2", "bob", json!({"outcome": "returned"})).expect_problem(400, "invalid");
        let r = settle(
            svc,
            "k-2",
            "bob",
            json!({"outcome": "sent-to-cfo", "output": [1, "two"]}),
        );
        assert_eq!(r.expect_ok()["settled"], true);
        let t = svc.call("GET", "/v1/tasks/k-2", Some("bob"), None);
        assert_eq!(t.body["decision"]["output"], json!([1, "two"]));

        send(svc, "DELETE", kind, "/v1/kinds/approve", "alice", &[], None)
            .expect_problem(403, "forbidden");
        let r = send(svc, "DELETE", kind, "/v1/kinds/approve", "olga", &[], None);
        assert_eq!(r.status, 204);
        send(svc, "DELETE", kind, "/v1/kinds/approve", "olga", &[], None)
            .expect_problem(404, "not-found");
    });
}

/// Waits on `base`'s task `id` as the service, up to 30 s, for it to
/// settle.
fn wait_for(client: &reqwest::blocking::Client, base: &str, token: &str, id: &str) -> Value {
    let r = reply(
        client
            .get(format!("{base}/v1/tasks/{id}?wait_ms=30000"))
            .bearer_auth(token)
            .send()
            .expect("answered"),
    );
    r.expect_ok().clone()
}

/// The run's decisions a workflow reads from the feed after `after`, as
/// the service: every entry must be of the run.
fn run_decisions(base: &str, token: &str, run: &str, after: &str) -> Vec<Value> {
    let client = reqwest::blocking::Client::new();
    let mut at = after.to_owned();
    let mut out = Vec::new();
    loop {
        let r = reply(
            client
                .get(format!("{base}/v1/events?run={run}&after={at}&limit=100"))
                .bearer_auth(token)
                .send()
                .expect("answered"),
        );
        let page = r.expect_ok();
        let entries = page["entries"].as_array().expect("entries");
        for e in entries {
            assert_eq!(e["change"]["task"]["run"], run, "{e}");
            if !e["change"]["task"]["entry"]["decision"].is_null() {
                out.push(e["change"]["task"].clone());
            }
        }
        let next = page["next"].as_str().expect("next").to_owned();
        if next == page["head"] {
            return out;
        }
        at = next;
    }
}

fn head(base: &str, token: &str) -> String {
    let r = reply(
        reqwest::blocking::Client::new()
            .get(format!("{base}/v1/events?limit=1"))
            .bearer_auth(token)
            .send()
            .expect("answered"),
    );
    r.expect_ok()["head"].as_str().expect("head").to_owned()
}

/// The decision as a waiter and a run's reader must each see it.
fn assert_decided(task: &Value) {
    let d = &task["decision"];
    assert_eq!(d["outcome"], "approved", "{task}");
    assert_eq!(d["reason"], "within budget", "{task}");
    assert_eq!(d["output"], json!({"amount": 7}), "{task}");
    assert_eq!(d["by"], "alice", "{task}");
    assert!(d["at"].is_i64(), "{task}");
}

/// A waiter on `base_wait`, the settle through `one`, the run read from
/// `base_wait` too.
fn the_decision_reaches_a_waiter_and_a_run_reader_once(one: &Service, base_wait: &str) {
    let sam = one.tokens.get("sam").to_owned();
    let start = head(base_wait, &sam);
    open_in(one, "w-1", "run-w");
    open_in(one, "w-other", "run-other");
    one.call("POST", "/v1/tasks/w-1/claim", Some("alice"), None)
        .expect_ok();
    // Nobody may wait on what they may not see: carol's roles are not the
    // task's, gus is another tenant. Answered at once, 404.
    for who in ["carol", "gus"] {
        one.call("GET", "/v1/tasks/w-1?wait_ms=30000", Some(who), None)
            .expect_problem(404, "not-found");
    }
    let client = reqwest::blocking::Client::new();
    std::thread::scope(|s| {
        let waiter = s.spawn(|| wait_for(&client, base_wait, &sam, "w-1"));
        eventually("the waiter to wait", || {
            metric(one, "leasehold_requests_waiting", "") >= 1.0
        });
        // A change that does not settle it: the waiter waits on.
        one.call(
            "POST",
            "/v1/tasks/w-1/notes",
            Some("bob"),
            Some(json!({"text": "checked"})),
        )
        .expect_ok();
        one.call("POST", "/v1/tasks/w-other/claim", Some("bob"), None)
            .expect_ok();
        one.call(
            "POST",
            "/v1/tasks/w-1/settle",
            Some("alice"),
            Some(json!({"settlement": "completed", "decision": {
                "outcome": "approved", "reason": "within budget", "output": {"amount": 7}
            }})),
        )
        .expect_ok();
        let got = waiter.join().expect("the waiter");
        assert_eq!(got["state"], "completed", "{got}");
        assert_decided(&got);
    });
    one.call(
        "POST",
        "/v1/tasks/w-other/settle",
        Some("bob"),
        Some(json!({"settlement": "completed", "decision": {"outcome": "approved"}})),
    )
    .expect_ok();
    let decisions = run_decisions(base_wait, &sam, "run-w", &start);
    assert_eq!(decisions.len(), 1, "{decisions:?}");
    assert_eq!(decisions[0]["id"], "w-1");
    assert_eq!(decisions[0]["entry"]["actor"], "alice");
    assert_decided(&json!({"decision": decisions[0]["entry"]["decision"]}));
    // A wait on a settled task, or past a revision the caller no longer
    // has, is answered at once.
    let r = one.call(
        "GET",
        "/v1/tasks/w-1?wait_ms=30000&revision=1",
        Some("alice"),
        None,
    );
    assert_eq!(r.expect_ok()["state"], "completed");
}

#[test]
fn a_waiter_and_a_reader_of_the_run_each_receive_the_decision_once() {
    let _one = serially();
    each_backend(|svc| {
        let base = svc.url("");
        the_decision_reaches_a_waiter_and_a_run_reader_once(svc, &base);
    });
}

#[test]
fn across_two_servers_the_decision_reaches_a_waiter_on_the_other() {
    let _one = serially();
    let Some(store) = stores()
        .into_iter()
        .find(|s| matches!(s, Store::Postgres(_)))
    else {
        eprintln!("skipped: no PostgreSQL (LEASEHOLD_TEST_PG)");
        return;
    };
    let one = Service::start(store, test_options());
    let two = one.twin();
    the_decision_reaches_a_waiter_and_a_run_reader_once(&one, &two.url);
}

#[test]
fn a_wait_ends_when_the_task_moves_past_the_revision_the_caller_has() {
    let _one = serially();
    each_backend(|svc| {
        open_in(svc, "r-1", "run-r");
        let svc: &Service = svc;
        std::thread::scope(|s| {
            let waiter = s.spawn(|| {
                svc.call(
                    "GET",
                    "/v1/tasks/r-1?wait_ms=30000&revision=1",
                    Some("bob"),
                    None,
                )
                .expect_ok()
                .clone()
            });
            eventually("bob to wait", || {
                metric(svc, "leasehold_requests_waiting", "") >= 1.0
            });
            svc.call("POST", "/v1/tasks/r-1/claim", Some("alice"), None)
                .expect_ok();
            let got = waiter.join().expect("bob");
            assert_eq!(
                (got["revision"].clone(), got["assignee"].clone()),
                (json!(2), json!("alice"))
            );
        });
        svc.call("GET", "/v1/tasks/r-1?wait_ms=30001", Some("bob"), None)
            .expect_problem(400, "invalid");
    });
}
