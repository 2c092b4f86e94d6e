//! A worker's batches over real HTTP, on every store: `claim-batch` and
//! `settle-and-claim` in queue order, each finished task answered on its
//! own, a reviewer held to its own name, another tenant's tasks out of
//! reach, a long-poll woken by a new task, and every answer held to the
//! OpenAPI document.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::harness::checked_call as call;
use crate::harness::{each_backend, new_task};

const BATCH: &str = "/v1/queue/claim-batch";
const ACK: &str = "/v1/queue/settle-and-claim";

fn open(svc: &mut crate::harness::Service, id: &str, created_at: i64) {
    let mut t = new_task(id);
    t["created_at"] = json!(created_at);
    t["due_at"] = Value::Null;
    call(svc, "POST", "/v1/tasks", "/v1/tasks", "sam", Some(t)).expect_ok();
}

fn ids(v: &Value) -> Vec<String> {
    v.as_array()
        .expect("a list")
        .iter()
        .map(|t| t["id"].as_str().expect("an id").to_owned())
        .collect()
}

#[test]
fn a_worker_claims_in_batches_and_acknowledges_with_the_next_fetch() {
    each_backend(|svc| {
        for i in 0..7 {
            open(svc, &format!("w-{i}"), 1000 + i);
        }
        let got = call(
            svc,
            "POST",
            BATCH,
            BATCH,
            "alice",
            Some(json!({"count": 3, "lease_ms": 30000})),
        );
        let got = got.expect_ok();
        assert_eq!(ids(&got["tasks"]), ["w-0", "w-1", "w-2"]);
        assert!(
            got["tasks"]
                .as_array()
                .expect("tasks")
                .iter()
                .all(|t| t["assignee"] == "alice" && t["state"] == "claimed")
        );
        // bob takes one; alice acknowledges hers, one twice, one of bob's,
        // an unknown one, and a refused decision, and asks for three more.
        let b = call(svc, "POST", BATCH, BATCH, "bob", Some(json!({"count": 1})));
        assert_eq!(ids(&b.expect_ok()["tasks"]), ["w-3"]);
        let body = json!({
            "done": [
                {"id": "w-0", "settlement": "completed",
                 "decision": {"outcome": "approved", "reason": "fine"}},
                {"id": "w-1", "settlement": "withdrawn"},
                {"id": "w-0", "settlement": "completed"},
                {"id": "w-3", "settlement": "completed"},
                {"id": "nope", "settlement": "completed"},
                {"id": "w-2", "settlement": "completed",
                 "decision": {"outcome": "x".repeat(65)}},
            ],
            "count": 3,
            "lease_ms": 30000,
        });
        let a = call(svc, "POST", ACK, ACK, "alice", Some(body));
        let a = a.expect_ok();
        let answers: Vec<&str> = a["settled"]
            .as_array()
            .expect("answers")
            .iter()
            .map(|r| r["answer"].as_str().expect("an answer"))
            .collect();
        assert_eq!(
            answers,
            [
                "settled",
                "settled",
                "already",
                "not_held",
                "not_found",
                "refused"
            ]
        );
        assert_eq!(a["settled"][2]["state"], "completed");
        assert_eq!(a["settled"][3]["holder"], "bob");
        assert!(
            a["settled"][5]["reason"]
                .as_str()
                .is_some_and(|r| r.contains("outcome")),
            "{}",
            a["settled"][5]
        );
        assert_eq!(ids(&a["tasks"]), ["w-4", "w-5", "w-6"]);
        let t = call(svc, "GET", "/v1/tasks/{id}", "/v1/tasks/w-0", "olga", None);
        let t = t.expect_ok();
        assert_eq!(t["state"], "completed");
        assert_eq!(t["decision"]["outcome"], "approved");
        assert_eq!(t["decision"]["by"], "alice");
        // w-2's refused decision left it held by alice; count 0 only settles.
        let a = call(
            svc,
            "POST",
            ACK,
            ACK,
            "alice",
            Some(json!({"done": [{"id": "w-2", "settlement": "completed"}], "count": 0})),
        );
        let a = a.expect_ok();
        assert_eq!(a["settled"][0]["answer"], "settled");
        assert_eq!(a["tasks"], json!([]));
    });
}

#[test]
fn bad_input_is_refused_whole_and_a_reviewer_claims_only_as_itself() {
    each_backend(|svc| {
        open(svc, "b-0", 1000);
        for body in [
            json!({"count": 0}),
            json!({"count": 101}),
            json!({"count": 2, "lease_ms": 0}),
            json!({"count": 2, "wait_ms": 30001}),
            json!({}),
        ] {
            call(svc, "POST", BATCH, BATCH, "alice", Some(body)).expect_problem(400, "invalid");
        }
        let many: Vec<Value> = (0..101)
            .map(|i| json!({"id": format!("x-{i}"), "settlement": "completed"}))
            .collect();
        call(
            svc,
            "POST",
            ACK,
            ACK,
            "alice",
            Some(json!({"done": many, "count": 1})),
        )
        .expect_problem(400, "invalid");
        call(
            svc,
            "POST",
            ACK,
            ACK,
            "alice",
            Some(json!({"done": [], "count": 101})),
        )
        .expect_problem(400, "invalid");
        // A reviewer naming someone else is refused; a service may not
        // claim at all; another tenant's operator sees none of acme's tasks.
        let r = svc.call(
            "POST",
            BATCH,
            Some("alice"),
            Some(json!({"count": 1, "actor": "bob"})),
        );
        assert_eq!(r.status, 403, "{:?}", r.body);
        let r = svc.call("POST", BATCH, Some("sam"), Some(json!({"count": 1})));
        assert_eq!(r.status, 403, "{:?}", r.body);
        let g = call(svc, "POST", BATCH, BATCH, "gus", Some(json!({"count": 5})));
        assert_eq!(g.expect_ok()["tasks"], json!([]));
        let t = call(svc, "GET", "/v1/tasks/{id}", "/v1/tasks/b-0", "olga", None);
        assert_eq!(t.expect_ok()["state"], "open", "nothing was claimed");
    });
}

#[test]
fn a_waiting_batch_is_woken_by_a_new_task() {
    each_backend(|svc| {
        let url = svc.url(ACK);
        let token = svc.tokens.get("alice").to_owned();
        let waiter = std::thread::spawn(move || {
            let started = Instant::now();
            let r = reqwest::blocking::Client::new()
                .post(url)
                .bearer_auth(token)
                .json(&json!({"done": [], "count": 5, "wait_ms": 20000}))
                .timeout(Duration::from_secs(60))
                .send()
                .expect("answers");
            let v: Value = r.json().expect("json");
            (v, started.elapsed())
        });
        // The waiter may not be waiting yet; the open wakes it either way,
        // since a try after the wait begins sees the task.
        open(svc, "late", 1000);
        let (v, _) = waiter.join().expect("the waiter");
        assert_eq!(ids(&v["tasks"]), ["late"]);
    });
}
