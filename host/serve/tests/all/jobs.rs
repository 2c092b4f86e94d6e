//! Bulk jobs over real HTTP: started, read, listed and cancelled by
//! operators and services only, each tenant its own; bad input refused
//! naming the body's field, with nothing started; and, with the server's
//! sweeper on, a job that runs to its end by itself, each task it changed
//! naming it in its history once, and its progress sent on the event
//! stream as `job` events to operators and services. The kill -9 test of a
//! running job is the CLI's (`host/cli/tests/serve/jobs_crash.rs`): it
//! runs the real binary.

use std::collections::BTreeSet;

use serde_json::{Value, json};

use crate::events::Stream;
use crate::harness::checked_call as call;
use crate::harness::history_entries as history;
use crate::harness::{Reply, Service, each_backend, each_backend_with, new_task, test_options};
use crate::keeping_time::eventually;

pub fn start(svc: &Service, who: &str, body: Value) -> Reply {
    call(svc, "POST", "/v1/jobs", "/v1/jobs", who, Some(body))
}

pub fn get(svc: &Service, who: &str, id: &str) -> Reply {
    call(
        svc,
        "GET",
        "/v1/jobs/{id}",
        &format!("/v1/jobs/{id}"),
        who,
        None,
    )
}

fn cancel(svc: &Service, who: &str, id: &str) -> Reply {
    call(
        svc,
        "POST",
        "/v1/jobs/{id}/cancel",
        &format!("/v1/jobs/{id}/cancel"),
        who,
        None,
    )
}

fn list(svc: &Service, who: &str, query: &str) -> Reply {
    call(
        svc,
        "GET",
        "/v1/jobs",
        &format!("/v1/jobs{query}"),
        who,
        None,
    )
}

fn list_ids(r: &Reply) -> Vec<String> {
    r.expect_ok()["jobs"]
        .as_array()
        .expect("jobs")
        .iter()
        .map(|j| j["id"].as_str().expect("an id").to_owned())
        .collect()
}

/// Opens `n` tasks offered to finance, with no due time (the sweeper
/// leaves them be), `p-0`, `p-1`, ...
pub fn open_tasks(svc: &Service, n: usize) {
    for i in 0..n {
        let mut t = new_task(&format!("p-{i}"));
        t.as_object_mut().map(|o| o.remove("due_at"));
        svc.call("POST", "/v1/tasks", Some("sam"), Some(t))
            .expect_ok();
    }
}

fn assign_to_bob() -> Value {
    json!({"kind": "assign", "to": "bob", "roles": ["finance"], "override_roles": false})
}

#[test]
fn a_job_is_started_read_listed_and_cancelled() {
    each_backend(|svc| {
        open_tasks(svc, 3);
        let before = crate::harness::unix_now() * 1000;
        let r = start(
            svc,
            "olga",
            json!({"id": "j-1", "filter": {"states": ["open"]}, "action": assign_to_bob()}),
        );
        assert_eq!(r.status, 201, "{r:#?}");
        assert_eq!(r.headers["location"], "/v1/jobs/j-1");
        let job = &r.body;
        assert_eq!(job["id"], "j-1");
        assert_eq!(job["filter"]["states"], json!(["open"]));
        assert_eq!(job["action"], assign_to_bob());
        assert_eq!(job["by"], "olga");
        // The server's sweeper is off here: nothing is counted yet.
        assert_eq!(job["state"], "counting");
        for n in ["total", "done", "skipped", "failed"] {
            assert_eq!(job[n], 0, "{n}");
        }
        assert_eq!(job["last_failures"], json!([]));
        assert_eq!(job["last_skipped"], json!([]));
        assert!(job["created_at"].as_i64().expect("an instant") >= before - 1000);
        assert_eq!(get(svc, "sam", "j-1").expect_ok(), job);

        // Without an id the server makes one; an update's changes read
        // back as given.
        let changes = json!({"priority": "high", "due_at": null});
        let made = start(
            svc,
            "sam",
            json!({"filter": {}, "action": {"kind": "update", "changes": changes}}),
        );
        assert_eq!(made.status, 201, "{made:#?}");
        let made_id = made.body["id"].as_str().expect("an id").to_owned();
        assert_eq!(
            made.headers["location"],
            format!("/v1/jobs/{made_id}").as_str()
        );
        assert_eq!(made.body["action"]["changes"], changes);
        assert_eq!(made.body["by"], "sam");
        for kind in ["release", "escalate", "withdraw"] {
            let r = start(
                svc,
                "olga",
                json!({"id": format!("k-{kind}"), "filter": {"kinds": ["none"]}, "action": {"kind": kind}}),
            );
            assert_eq!(r.status, 201, "{r:#?}");
            assert_eq!(r.body["action"], json!({"kind": kind}));
        }

        // Listed in id order, a page at a time.
        let mut all: Vec<String> = vec![
            "j-1".into(),
            made_id.clone(),
            "k-escalate".into(),
            "k-release".into(),
            "k-withdraw".into(),
        ];
        all.sort();
        assert_eq!(list_ids(&list(svc, "olga", "")), all);
        let mut walked = Vec::new();
        let mut query = "?limit=2".to_owned();
        loop {
            let page = list(svc, "sam", &query);
            walked.extend(list_ids(&page));
            match page.body["next"].as_str() {
                Some(next) => query = format!("?limit=2&after={next}"),
                None => break,
            }
        }
        assert_eq!(walked, all);

        // Cancelled at once, and again as it stands.
        let c = cancel(svc, "olga", "j-1");
        assert_eq!(c.expect_ok()["state"], "cancelled");
        assert_eq!(cancel(svc, "sam", "j-1").expect_ok()["state"], "cancelled");
        assert_eq!(get(svc, "olga", "j-1").expect_ok()["state"], "cancelled");
        // No task was changed by it.
        for i in 0..3 {
            assert_eq!(history(svc, &format!("p-{i}")).len(), 1);
        }

        get(svc, "olga", "nope").expect_problem(404, "not-found");
        cancel(svc, "olga", "nope").expect_problem(404, "not-found");
    });
}

#[test]
fn bad_input_is_refused_naming_the_field_and_starts_nothing() {
    each_backend(|svc| {
        start(
            svc,
            "olga",
            json!({"id": "j-1", "filter": {}, "action": {"kind": "release"}}),
        )
        .expect_ok();
        let cases = [
            (
                json!({"id": "j-1", "filter": {}, "action": {"kind": "release"}}),
                "id",
            ),
            (
                json!({"id": "", "filter": {}, "action": {"kind": "release"}}),
                "id",
            ),
            (
                json!({"filter": {"due_after": 10, "due_before": 5}, "action": {"kind": "release"}}),
                "filter.due_after",
            ),
            (
                json!({"filter": {"nope": 1}, "action": {"kind": "release"}}),
                "filter.nope",
            ),
            (
                json!({"filter": {"states": ["asleep"]}, "action": {"kind": "release"}}),
                "filter.states[0]",
            ),
            (json!({"action": {"kind": "release"}}), "filter"),
            (json!({"filter": {}}), "action"),
            (
                json!({"filter": {}, "action": {"kind": "assign"}}),
                "action.to",
            ),
            (
                json!({"filter": {}, "action": {"kind": "assign", "to": ""}}),
                "action.to",
            ),
            (
                json!({"filter": {}, "action": {"kind": "assign", "to": "bob", "roles": [""]}}),
                "action.roles",
            ),
            (
                json!({"filter": {}, "action": {"kind": "release", "to": "bob"}}),
                "action.to",
            ),
            (
                json!({"filter": {}, "action": {"kind": "update", "changes": {}}}),
                "action.changes",
            ),
            (
                json!({"filter": {}, "action": {"kind": "update", "changes": {"priority": "x"}}}),
                "action.changes.priority",
            ),
            (
                json!({"filter": {}, "action": {"kind": "update", "changes": {"nope": 1}}}),
                "action.changes.nope",
            ),
            (
                json!({"filter": {}, "action": {"kind": "update", "changes": {"candidate_roles": [""]}}}),
                "action.changes.candidate_roles",
            ),
            (
                json!({"filter": {}, "action": {"kind": "nap"}}),
                "action.kind",
            ),
            (json!({"filter": {}, "action": "release"}), "action"),
        ];
        for (body, field) in cases {
            let r = start(svc, "olga", body.clone());
            r.expect_problem(400, "invalid");
            let named = r.body["field"].as_str().unwrap_or_default();
            assert!(
                named == field || named.starts_with(&format!("{field}[")),
                "{body}: named {named:?}, not {field}: {r:#?}"
            );
        }
        assert_eq!(list_ids(&list(svc, "olga", "")), ["j-1"]);
        list(svc, "olga", "?limit=0").expect_problem(400, "invalid");
        list(svc, "olga", "?after=x").expect_problem(400, "invalid");
    });
}

#[test]
fn reviewers_reach_no_job_and_a_tenant_sees_only_its_own() {
    each_backend(|svc| {
        start(
            svc,
            "olga",
            json!({"id": "j-1", "filter": {}, "action": {"kind": "escalate"}}),
        )
        .expect_ok();
        let body = json!({"id": "j-2", "filter": {}, "action": {"kind": "escalate"}});
        start(svc, "alice", body.clone()).expect_problem(403, "forbidden");
        get(svc, "alice", "j-1").expect_problem(403, "forbidden");
        list(svc, "alice", "").expect_problem(403, "forbidden");
        cancel(svc, "alice", "j-1").expect_problem(403, "forbidden");
        // Globex's operator names acme's job and finds none, lists none,
        // cancels none; its own job of the same id is its own.
        get(svc, "gina", "j-1").expect_problem(404, "not-found");
        cancel(svc, "gina", "j-1").expect_problem(404, "not-found");
        assert!(list_ids(&list(svc, "gina", "")).is_empty());
        start(
            svc,
            "gina",
            json!({"id": "j-1", "filter": {}, "action": {"kind": "release"}}),
        )
        .expect_ok();
        assert_eq!(
            get(svc, "gina", "j-1").expect_ok()["action"]["kind"],
            "release"
        );
        let acme = get(svc, "olga", "j-1");
        assert_eq!(acme.expect_ok()["action"]["kind"], "escalate");
        assert_eq!(acme.body["state"], "counting");
        assert_eq!(list_ids(&list(svc, "olga", "")), ["j-1"]);
    });
}

/// The tests' options with the server's sweeper on, as `leasehold serve`
/// runs.
pub fn sweeping() -> leasehold_serve::Options {
    leasehold_serve::Options {
        sweep: true,
        ..test_options()
    }
}

/// Polls job `id` until it is `done` (failing after the bound of a hang).
pub fn until_done(svc: &Service, id: &str) -> Value {
    let mut last = Value::Null;
    eventually(&format!("job {id} to be done"), || {
        last = get(svc, "olga", id).expect_ok().clone();
        last["state"] == "done"
    });
    last
}

#[test]
fn a_job_over_no_task_is_done_with_a_total_of_zero() {
    each_backend_with(sweeping(), |svc| {
        open_tasks(svc, 2);
        let r = start(
            svc,
            "olga",
            json!({"id": "none", "filter": {"kinds": ["no-such-kind"]}, "action": assign_to_bob()}),
        );
        assert_eq!(r.status, 201, "{r:#?}");
        let job = until_done(svc, "none");
        for n in ["total", "done", "skipped", "failed"] {
            assert_eq!(job[n], 0, "{n}");
        }
        for i in 0..2 {
            assert_eq!(history(svc, &format!("p-{i}")).len(), 1);
        }
    });
}

#[test]
fn the_servers_sweeper_runs_a_job_to_its_end_each_task_naming_it_once() {
    each_backend_with(sweeping(), |svc| {
        let n = 40;
        open_tasks(svc, n);
        // One task is claimed before the job starts: not open, so not in
        // its set, and left as it is.
        svc.call(
            "POST",
            "/v1/tasks/p-0/claim",
            Some("alice"),
            Some(json!({"lease_ms": 3_600_000})),
        )
        .expect_ok();
        let r = start(
            svc,
            "olga",
            json!({"id": "give", "filter": {"states": ["open"]}, "action": assign_to_bob()}),
        );
        assert_eq!(r.status, 201, "{r:#?}");
        let job = until_done(svc, "give");
        assert_eq!(job["total"], n - 1, "{job:#}");
        assert_eq!(job["done"], n - 1, "{job:#}");
        assert_eq!(job["skipped"], 0, "{job:#}");
        assert_eq!(job["failed"], 0, "{job:#}");
        let mut changed = BTreeSet::new();
        for i in 0..n {
            let id = format!("p-{i}");
            let task = svc
                .call("GET", &format!("/v1/tasks/{id}"), Some("olga"), None)
                .expect_ok()
                .clone();
            let by_job: Vec<Value> = history(svc, &id)
                .into_iter()
                .filter(|e| e["job"] == "give")
                .collect();
            if i == 0 {
                assert_eq!(task["assignee"], "alice");
                assert!(by_job.is_empty(), "{by_job:?}");
                continue;
            }
            assert_eq!(task["assignee"], "bob", "{id}");
            assert_eq!(by_job.len(), 1, "{id}: {by_job:?}");
            assert_eq!(by_job[0]["verb"], "assign", "{id}");
            changed.insert(id);
        }
        assert_eq!(changed.len(), n - 1);
        // The feed carries each change with its job.
        let feed = svc
            .call("GET", "/v1/events?limit=1000", Some("olga"), None)
            .expect_ok()
            .clone();
        let named = feed["entries"]
            .as_array()
            .expect("entries")
            .iter()
            .filter(|e| e["change"]["task"]["entry"]["job"] == "give")
            .count();
        assert_eq!(named, n - 1);
        // Its steps are counted on /metrics once their turns report (every
        // server of this process counts there, so at least these).
        eventually("the job's steps on /metrics", || {
            crate::keeping_time::metric(svc, "leasehold_job_steps_total", "") >= (n - 1) as f64
        });
    });
}

#[test]
fn a_jobs_progress_is_a_job_event_for_operators_and_services_not_reviewers() {
    each_backend_with(sweeping(), |svc| {
        open_tasks(svc, 5);
        let mut olga = Stream::open(svc, "olga", None).expect("subscribed");
        assert_eq!(olga.next().expect("ready").event, "ready");
        let mut alice = Stream::open(svc, "alice", None).expect("subscribed");
        assert_eq!(alice.next().expect("ready").event, "ready");
        start(
            svc,
            "olga",
            json!({"id": "give", "filter": {"states": ["open"]}, "action": assign_to_bob()}),
        )
        .expect_ok();
        // Each change the job makes is a `task` event naming it, each page
        // of them followed by a `job` event: the job as it stands when that
        // is sent (which may be further on than the page). The last comes
        // after the last change, and says it is done.
        let mut named = BTreeSet::new();
        let mut last = Value::Null;
        while named.len() < 5 || last["state"] != "done" {
            let ev = olga.next_change().expect("the stream goes on");
            match ev.event.as_str() {
                "task" => {
                    assert_eq!(ev.data["change"]["task"]["entry"]["job"], "give");
                    named.insert(ev.task().as_str().expect("an id").to_owned());
                    last = Value::Null;
                }
                "job" => {
                    assert!(ev.id.is_none(), "a job event moves no position: {ev:?}");
                    assert_eq!(ev.data["id"], "give");
                    last = ev.data;
                }
                other => panic!("unexpected {other}: {ev:?}"),
            }
        }
        assert_eq!(last, until_done(svc, "give"));
        assert_eq!(last["done"], 5);
        assert_eq!(named.len(), 5, "{named:?}");
        // The reviewer: a change it may see after the job's, and no `job`
        // event before it.
        let mut t = new_task("after");
        t.as_object_mut().map(|o| o.remove("due_at"));
        svc.call("POST", "/v1/tasks", Some("sam"), Some(t))
            .expect_ok();
        loop {
            let ev = alice.next_change().expect("the stream goes on");
            assert_ne!(ev.event, "job", "{ev:?}");
            if *ev.task() == "after" {
                break;
            }
        }
    });
}
