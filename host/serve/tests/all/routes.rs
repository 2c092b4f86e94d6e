//! Every route over real HTTP: its happy path, the problem answer for each
//! of its errors, and every answer held to the OpenAPI document.

use serde_json::{Value, json};

use crate::harness::checked_call as call;
use crate::harness::{each_backend, new_task, new_timer};

#[test]
fn tasks_open_get_and_move_through_the_claim_ladder() {
    each_backend(|svc| {
        // open: first open wins, the justification comes back as sent.
        let t = call(
            svc,
            "POST",
            "/v1/tasks",
            "/v1/tasks",
            "sam",
            Some(new_task("t-1")),
        );
        let task = t.expect_ok();
        assert_eq!(task["state"], "open");
        assert_eq!(
            task["justification"],
            json!({"amount": 1200, "why": "acme-secret"})
        );
        assert_eq!(task["created_at"], 1000);
        let mut again = new_task("t-1");
        again["kind"] = json!("other");
        let t = call(svc, "POST", "/v1/tasks", "/v1/tasks", "sam", Some(again));
        assert_eq!(t.expect_ok()["kind"], "approve", "first open wins");
        call(
            svc,
            "POST",
            "/v1/tasks",
            "/v1/tasks",
            "sam",
            Some(json!({"id": "", "run": "r", "kind": "k"})),
        )
        .expect_problem(400, "invalid");

        // get
        let g = call(svc, "GET", "/v1/tasks/{id}", "/v1/tasks/t-1", "alice", None);
        assert_eq!(g.expect_ok()["id"], "t-1");
        call(
            svc,
            "GET",
            "/v1/tasks/{id}",
            "/v1/tasks/nope",
            "alice",
            None,
        )
        .expect_problem(404, "not-found");
        // carol's roles are not the task's: to her it does not exist.
        call(svc, "GET", "/v1/tasks/{id}", "/v1/tasks/t-1", "carol", None)
            .expect_problem(404, "not-found");

        // claim, with a lease, at the server's clock
        let c = call(
            svc,
            "POST",
            "/v1/tasks/{id}/claim",
            "/v1/tasks/t-1/claim",
            "alice",
            Some(json!({"lease_ms": 60000})),
        );
        let held = c.expect_ok();
        assert_eq!(held["assignee"], "alice");
        assert_eq!(held["state"], "claimed");
        assert!(
            held["lease_until"].as_i64().unwrap_or(0) > 1_700_000_000_000,
            "{held}"
        );
        let r = call(
            svc,
            "POST",
            "/v1/tasks/{id}/claim",
            "/v1/tasks/t-1/claim",
            "bob",
            None,
        );
        r.expect_problem(409, "already-claimed");
        assert_eq!(r.body["holder"], "alice");
        // Carol (legal) may not see a finance task: to her it does not
        // exist. On her behalf, an operator hears the rung.
        call(
            svc,
            "POST",
            "/v1/tasks/{id}/claim",
            "/v1/tasks/t-1/claim",
            "carol",
            None,
        )
        .expect_problem(404, "not-found");
        call(
            svc,
            "POST",
            "/v1/tasks/{id}/claim",
            "/v1/tasks/t-1/claim",
            "olga",
            Some(json!({"actor": "carol", "roles": ["legal"]})),
        )
        .expect_problem(409, "wrong-role");
        call(
            svc,
            "POST",
            "/v1/tasks/{id}/claim",
            "/v1/tasks/none/claim",
            "alice",
            None,
        )
        .expect_problem(404, "not-found");
        call(
            svc,
            "POST",
            "/v1/tasks/{id}/claim",
            "/v1/tasks/t-1/claim",
            "alice",
            Some(json!({"lease_ms": 0})),
        )
        .expect_problem(400, "invalid");

        // renew
        let r = call(
            svc,
            "POST",
            "/v1/tasks/{id}/renew",
            "/v1/tasks/t-1/renew",
            "alice",
            Some(json!({"lease_ms": 120000})),
        );
        assert_eq!(r.expect_ok()["assignee"], "alice");
        let r = call(
            svc,
            "POST",
            "/v1/tasks/{id}/renew",
            "/v1/tasks/t-1/renew",
            "bob",
            Some(json!({"lease_ms": 1000})),
        );
        r.expect_problem(409, "not-held");
        assert_eq!(r.body["actor"], "bob");

        // release
        let r = call(
            svc,
            "POST",
            "/v1/tasks/{id}/release",
            "/v1/tasks/t-1/release",
            "bob",
            None,
        );
        r.expect_problem(409, "not-held");
        let r = call(
            svc,
            "POST",
            "/v1/tasks/{id}/release",
            "/v1/tasks/t-1/release",
            "alice",
            None,
        );
        assert_eq!(r.status, 204);

        // take-over: an operator moves bob's claim to alice
        call(
            svc,
            "POST",
            "/v1/tasks/{id}/claim",
            "/v1/tasks/t-1/claim",
            "bob",
            None,
        )
        .expect_ok();
        let r = call(
            svc,
            "POST",
            "/v1/tasks/{id}/take-over",
            "/v1/tasks/t-1/take-over",
            "olga",
            Some(
                json!({"from": "bob", "actor": "alice", "roles": ["finance"], "lease_ms": 1000, "now": 10}),
            ),
        );
        let moved = r.expect_ok();
        assert_eq!(moved["assignee"], "alice");
        assert_eq!(moved["lease_until"], 1010);
        call(
            svc,
            "POST",
            "/v1/tasks/{id}/take-over",
            "/v1/tasks/t-1/take-over",
            "olga",
            Some(json!({"from": "bob", "actor": "carol", "roles": ["finance"]})),
        )
        .expect_problem(409, "not-held");

        // settle: bob is not the holder; alice is
        let r = call(
            svc,
            "POST",
            "/v1/tasks/{id}/settle",
            "/v1/tasks/t-1/settle",
            "bob",
            Some(json!({"settlement": "completed"})),
        );
        r.expect_problem(409, "not-held");
        let r = call(
            svc,
            "POST",
            "/v1/tasks/{id}/settle",
            "/v1/tasks/t-1/settle",
            "alice",
            Some(json!({"settlement": "completed"})),
        );
        assert_eq!(r.expect_ok()["settled"], true);
        let r = call(
            svc,
            "POST",
            "/v1/tasks/{id}/settle",
            "/v1/tasks/t-1/settle",
            "sam",
            Some(json!({"settlement": "withdrawn"})),
        );
        assert_eq!(r.expect_ok()["settled"], false, "already settled");
        let r = call(
            svc,
            "POST",
            "/v1/tasks/{id}/claim",
            "/v1/tasks/t-1/claim",
            "alice",
            None,
        );
        r.expect_problem(409, "not-pending");
        assert_eq!(r.body["state"], "completed");
        call(
            svc,
            "POST",
            "/v1/tasks/{id}/settle",
            "/v1/tasks/none/settle",
            "sam",
            Some(json!({"settlement": "completed"})),
        )
        .expect_problem(404, "not-found");

        // excluded
        let mut t2 = new_task("t-2");
        t2["excluded_actors"] = json!(["bob"]);
        call(svc, "POST", "/v1/tasks", "/v1/tasks", "sam", Some(t2)).expect_ok();
        // Bob may not see a task he is excluded from; on his behalf, an
        // operator hears the rung.
        call(
            svc,
            "POST",
            "/v1/tasks/{id}/claim",
            "/v1/tasks/t-2/claim",
            "bob",
            None,
        )
        .expect_problem(404, "not-found");
        let r = call(
            svc,
            "POST",
            "/v1/tasks/{id}/claim",
            "/v1/tasks/t-2/claim",
            "olga",
            Some(json!({"actor": "bob", "roles": ["finance"]})),
        );
        r.expect_problem(409, "excluded");
        assert_eq!(r.body["actor"], "bob");

        // escalate: legal joins the audience
        let r = call(
            svc,
            "POST",
            "/v1/tasks/{id}/escalate",
            "/v1/tasks/t-2/escalate",
            "sam",
            None,
        );
        let e = r.expect_ok();
        assert_eq!(e["state"], "escalated");
        assert_eq!(e["candidate_roles"], json!(["finance", "legal"]));
        call(
            svc,
            "POST",
            "/v1/tasks/{id}/escalate",
            "/v1/tasks/none/escalate",
            "sam",
            None,
        )
        .expect_problem(404, "not-found");
    });
}

#[test]
fn the_queue_pages_and_claim_next_takes_its_head() {
    each_backend(|svc| {
        for i in 0..3 {
            let mut t = new_task(&format!("q-{i}"));
            t["created_at"] = json!(100 + i);
            call(svc, "POST", "/v1/tasks", "/v1/tasks", "sam", Some(t)).expect_ok();
        }
        let p = call(svc, "GET", "/v1/queue", "/v1/queue?limit=2", "alice", None);
        let page = p.expect_ok();
        assert_eq!(page["tasks"].as_array().map(Vec::len), Some(2));
        let next = page["next"].as_str().expect("a cursor").to_owned();
        let p = call(
            svc,
            "GET",
            "/v1/queue",
            &format!("/v1/queue?limit=2&after={next}"),
            "alice",
            None,
        );
        let rest = p.expect_ok();
        assert_eq!(rest["tasks"][0]["id"], "q-2");
        assert!(rest["next"].is_null());
        // carol (legal) sees none of them
        let p = call(svc, "GET", "/v1/queue", "/v1/queue", "carol", None);
        assert_eq!(p.expect_ok()["tasks"], json!([]));
        call(svc, "GET", "/v1/queue", "/v1/queue?limit=0", "alice", None)
            .expect_problem(400, "invalid");
        // an operator reads alice's queue on her behalf
        let p = call(
            svc,
            "GET",
            "/v1/queue",
            "/v1/queue?actor=alice&roles=finance",
            "olga",
            None,
        );
        assert_eq!(p.expect_ok()["tasks"].as_array().map(Vec::len), Some(3));

        let c = call(
            svc,
            "POST",
            "/v1/queue/claim-next",
            "/v1/queue/claim-next",
            "alice",
            Some(json!({"lease_ms": 30000})),
        );
        let got = c.expect_ok();
        assert_eq!(got["task"]["id"], "q-0");
        assert_eq!(got["task"]["assignee"], "alice");
        let c = call(
            svc,
            "POST",
            "/v1/queue/claim-next",
            "/v1/queue/claim-next",
            "carol",
            None,
        );
        assert_eq!(
            c.expect_ok()["task"],
            Value::Null,
            "an empty queue answers null"
        );
        call(
            svc,
            "POST",
            "/v1/queue/claim-next",
            "/v1/queue/claim-next",
            "alice",
            Some(json!({"lease_ms": 0})),
        )
        .expect_problem(400, "invalid");
    });
}

#[test]
fn cases_overdue_and_lapsed_leases() {
    each_backend(|svc| {
        for id in ["c-1", "c-2"] {
            call(
                svc,
                "POST",
                "/v1/tasks",
                "/v1/tasks",
                "sam",
                Some(new_task(id)),
            )
            .expect_ok();
        }
        let p = call(
            svc,
            "GET",
            "/v1/cases/{case}/tasks",
            "/v1/cases/case-1/tasks?limit=1",
            "alice",
            None,
        );
        let page = p.expect_ok();
        assert_eq!(page["tasks"][0]["id"], "c-1");
        assert!(page["next"].is_string());
        // carol may see neither, but the page still answers
        let p = call(
            svc,
            "GET",
            "/v1/cases/{case}/tasks",
            "/v1/cases/case-1/tasks",
            "carol",
            None,
        );
        assert_eq!(p.expect_ok()["tasks"], json!([]));
        call(
            svc,
            "GET",
            "/v1/cases/{case}/tasks",
            "/v1/cases/case-1/tasks?limit=5000",
            "sam",
            None,
        )
        .expect_problem(400, "invalid");

        // overdue: due at 5000
        let o = call(
            svc,
            "GET",
            "/v1/overdue",
            "/v1/overdue?now=4999",
            "sam",
            None,
        );
        assert_eq!(o.expect_ok()["tasks"], json!([]));
        let o = call(
            svc,
            "GET",
            "/v1/overdue",
            "/v1/overdue?now=5000&limit=10",
            "sam",
            None,
        );
        assert_eq!(o.expect_ok()["tasks"].as_array().map(Vec::len), Some(2));
        call(svc, "GET", "/v1/overdue", "/v1/overdue?now=-1", "sam", None)
            .expect_problem(400, "invalid");

        // reclaim-lapsed: alice's lease from t=100 for 50ms lapses at 150
        call(
            svc,
            "POST",
            "/v1/tasks/{id}/claim",
            "/v1/tasks/c-1/claim",
            "olga",
            Some(json!({"actor": "alice", "lease_ms": 50, "now": 100})),
        )
        .expect_ok();
        let r = call(
            svc,
            "POST",
            "/v1/reclaim-lapsed",
            "/v1/reclaim-lapsed",
            "sam",
            Some(json!({"now": 149})),
        );
        assert_eq!(r.expect_ok()["tasks"], json!([]));
        let r = call(
            svc,
            "POST",
            "/v1/reclaim-lapsed",
            "/v1/reclaim-lapsed",
            "sam",
            Some(json!({"now": 150, "limit": 5})),
        );
        let moved = r.expect_ok();
        assert_eq!(moved["tasks"][0]["id"], "c-1");
        assert_eq!(moved["tasks"][0]["state"], "open");
        call(
            svc,
            "POST",
            "/v1/reclaim-lapsed",
            "/v1/reclaim-lapsed",
            "sam",
            Some(json!({"limit": 0})),
        )
        .expect_problem(400, "invalid");
    });
}

#[test]
fn runs_seal_withdraw_and_timers_arm_claim_and_disarm() {
    each_backend(|svc| {
        for id in ["w-1", "w-2"] {
            call(
                svc,
                "POST",
                "/v1/tasks",
                "/v1/tasks",
                "sam",
                Some(new_task(id)),
            )
            .expect_ok();
        }
        let w = call(
            svc,
            "POST",
            "/v1/runs/{run}/withdraw",
            "/v1/runs/run-1/withdraw",
            "sam",
            Some(json!({"awaited": ["w-1", "nope"]})),
        );
        assert_eq!(w.expect_ok()["withdrawn"], 1);
        call(
            svc,
            "POST",
            "/v1/runs/{run}/withdraw",
            "/v1/runs/run-1/withdraw",
            "sam",
            Some(json!({"awaited": [""]})),
        )
        .expect_problem(400, "invalid");

        // timers
        let a = call(
            svc,
            "POST",
            "/v1/timers",
            "/v1/timers",
            "sam",
            Some(new_timer("run-1", "e-1", 100)),
        );
        assert_eq!(a.expect_ok()["outcome"], "armed");
        let a = call(
            svc,
            "POST",
            "/v1/timers",
            "/v1/timers",
            "sam",
            Some(new_timer("run-1", "e-1", 999)),
        );
        assert_eq!(a.expect_ok()["outcome"], "already_armed");
        call(
            svc,
            "POST",
            "/v1/timers",
            "/v1/timers",
            "sam",
            Some(new_timer("run-1", "e-2", 200)),
        )
        .expect_ok();
        call(
            svc,
            "POST",
            "/v1/timers",
            "/v1/timers",
            "sam",
            Some(new_timer("run-2", "e-1", 300)),
        )
        .expect_ok();
        call(
            svc,
            "POST",
            "/v1/timers",
            "/v1/timers",
            "sam",
            Some(new_timer("", "e-1", 300)),
        )
        .expect_problem(400, "invalid");
        let d = call(
            svc,
            "POST",
            "/v1/timers/claim-due",
            "/v1/timers/claim-due",
            "sam",
            Some(json!({"now": 150, "lease_ms": 1000})),
        );
        let due = d.expect_ok();
        assert_eq!(due["timers"].as_array().map(Vec::len), Some(1));
        assert_eq!(due["timers"][0]["effect"], "e-1");
        call(
            svc,
            "POST",
            "/v1/timers/claim-due",
            "/v1/timers/claim-due",
            "sam",
            Some(json!({"now": 150, "lease_ms": 0})),
        )
        .expect_problem(400, "invalid");
        let d = call(
            svc,
            "DELETE",
            "/v1/runs/{run}/timers/{effect}",
            "/v1/runs/run-1/timers/e-1",
            "sam",
            None,
        );
        assert_eq!(d.expect_ok()["disarmed"], true);
        let d = call(
            svc,
            "DELETE",
            "/v1/runs/{run}/timers/{effect}",
            "/v1/runs/run-1/timers/e-1",
            "sam",
            None,
        );
        assert_eq!(d.expect_ok()["disarmed"], false);
        let d = call(
            svc,
            "DELETE",
            "/v1/runs/{run}/timers",
            "/v1/runs/run-2/timers",
            "sam",
            None,
        );
        assert_eq!(d.expect_ok()["disarmed"], 1);

        // seal: run-1 still has e-2 and w-2
        let s = call(svc, "GET", "/v1/runs/{run}", "/v1/runs/run-1", "sam", None);
        assert_eq!(s.expect_ok()["sealed"], false);
        let s = call(
            svc,
            "POST",
            "/v1/runs/{run}/seal",
            "/v1/runs/run-1/seal",
            "sam",
            Some(json!({"awaited": ["w-2"]})),
        );
        assert_eq!(
            s.expect_ok(),
            &json!({"timers_disarmed": 1, "tasks_withdrawn": 1})
        );
        let s = call(svc, "GET", "/v1/runs/{run}", "/v1/runs/run-1", "sam", None);
        assert_eq!(s.expect_ok(), &json!({"run": "run-1", "sealed": true}));
        // A name the input rules refuse, in each path parameter.
        for (method, template, path) in [
            ("GET", "/v1/runs/{run}", "/v1/runs/a%01b"),
            ("DELETE", "/v1/runs/{run}/timers", "/v1/runs/a%01b/timers"),
            (
                "DELETE",
                "/v1/runs/{run}/timers/{effect}",
                "/v1/runs/run-1/timers/a%01b",
            ),
            ("GET", "/v1/cases/{case}/tasks", "/v1/cases/a%01b/tasks"),
        ] {
            call(svc, method, template, path, "sam", None).expect_problem(400, "invalid");
        }
        let a = call(
            svc,
            "POST",
            "/v1/timers",
            "/v1/timers",
            "sam",
            Some(new_timer("run-1", "e-9", 1)),
        );
        assert_eq!(a.expect_ok()["outcome"], "run_sealed");
        call(
            svc,
            "POST",
            "/v1/runs/{run}/seal",
            "/v1/runs/run-1/seal",
            "sam",
            Some(json!({"awaited": [""]})),
        )
        .expect_problem(400, "invalid");
    });
}

#[test]
fn stats_and_check_answer_the_tenants_counters() {
    each_backend(|svc| {
        call(
            svc,
            "POST",
            "/v1/tasks",
            "/v1/tasks",
            "sam",
            Some(new_task("s-1")),
        )
        .expect_ok();
        call(
            svc,
            "POST",
            "/v1/tasks/{id}/claim",
            "/v1/tasks/s-1/claim",
            "olga",
            Some(json!({"actor": "alice", "lease_ms": 500, "now": 1000})),
        )
        .expect_ok();
        call(
            svc,
            "POST",
            "/v1/timers",
            "/v1/timers",
            "sam",
            Some(new_timer("run-1", "e-1", 4242)),
        )
        .expect_ok();
        let get = |path: &str| {
            call(svc, "GET", path, path, "olga", None)
                .expect_ok()
                .clone()
        };
        assert_eq!(get("/v1/stats/open-count"), json!({"count": 1}));
        assert_eq!(get("/v1/stats/leased-count"), json!({"count": 1}));
        assert_eq!(get("/v1/stats/pending-count"), json!({"count": 1}));
        assert_eq!(get("/v1/stats/next-due"), json!({"at": 4242}));
        assert_eq!(get("/v1/stats/next-lease-end"), json!({"at": 1500}));
        assert_eq!(get("/v1/check"), json!({"discrepancies": []}));
        // the other tenant sees none of it
        let other = call(
            svc,
            "GET",
            "/v1/stats/open-count",
            "/v1/stats/open-count",
            "gina",
            None,
        );
        assert_eq!(other.expect_ok(), &json!({"count": 0}));
    });
}

#[test]
fn unknown_routes_and_methods_answer_problems() {
    each_backend(|svc| {
        let r = svc.call("GET", "/v1/nothing-here", Some("olga"), None);
        r.expect_problem(404, "not-found");
        let r = svc.call("PUT", "/v1/tasks/t-1", Some("olga"), None);
        r.expect_problem(405, "method-not-allowed");
    });
}

#[test]
fn history_events_and_trim_answer_as_the_record_stands() {
    each_backend(|svc| {
        call(
            svc,
            "POST",
            "/v1/tasks",
            "/v1/tasks",
            "sam",
            Some(new_task("t-1")),
        )
        .expect_ok();
        call(
            svc,
            "POST",
            "/v1/tasks/{id}/claim",
            "/v1/tasks/t-1/claim",
            "alice",
            Some(json!({})),
        )
        .expect_ok();
        let h = call(
            svc,
            "GET",
            "/v1/tasks/{id}/history",
            "/v1/tasks/t-1/history",
            "alice",
            None,
        );
        let entries = h.expect_ok()["entries"].clone();
        assert_eq!(entries[0]["verb"], "open");
        assert_eq!(entries[1]["actor"], "alice");
        assert_eq!(entries[1]["after"], "claimed");
        // A reviewer of another role sees no such task.
        call(
            svc,
            "GET",
            "/v1/tasks/{id}/history",
            "/v1/tasks/t-1/history",
            "carol",
            None,
        )
        .expect_problem(404, "not-found");
        let e = call(svc, "GET", "/v1/events", "/v1/events", "sam", None);
        let read = e.expect_ok();
        assert_eq!(read["gone"], false);
        assert_eq!(read["entries"].as_array().map(Vec::len), Some(2));
        let first = read["entries"][0]["position"]
            .as_str()
            .expect("position")
            .to_owned();
        let t = call(
            svc,
            "POST",
            "/v1/events/trim",
            "/v1/events/trim",
            "olga",
            Some(json!({"keep": 1})),
        );
        assert_eq!(t.expect_ok()["feed_removed"], 1);
        let e = call(
            svc,
            "GET",
            "/v1/events",
            &format!("/v1/events?after={first}"),
            "sam",
            None,
        );
        let read = e.expect_ok();
        assert_eq!(read["gone"], false, "position {first} was the floor");
        let e = call(
            svc,
            "GET",
            "/v1/events",
            "/v1/events?after=f0.0",
            "sam",
            None,
        );
        e.expect_problem(400, "invalid");
    });
}
