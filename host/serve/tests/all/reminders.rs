//! A task's reminders and escalation chain over HTTP: opened with the task,
//! answered with it, changed by `PATCH` (which re-arms them), fired by the
//! server's own sweeper with each fired step in the history and the feed,
//! `next-wake` as a stat, and a bad timeline refused naming its field with
//! nothing written. The sweeper runs on the real clock, so the instants
//! are placed around it (a step already past fires at the next sweep) and
//! each test waits for a condition, never for a span of time.

use serde_json::{Value, json};

use leasehold_serve::Options;

use crate::harness::{Service, each_backend, each_backend_with, new_task, test_options};
use crate::keeping_time::eventually;

const HOUR: i64 = 3_600_000;

fn unix_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("after 1970")
        .as_millis() as i64
}

fn escalate(after: i64, roles: &[&str]) -> Value {
    json!({"after_due_ms": after, "action": {"escalate": roles}})
}

fn get(svc: &Service, id: &str) -> Value {
    svc.call("GET", &format!("/v1/tasks/{id}"), Some("sam"), None)
        .expect_ok()
        .clone()
}

fn patch(svc: &Service, id: &str, body: Value) -> Value {
    svc.call("PATCH", &format!("/v1/tasks/{id}"), Some("sam"), Some(body))
        .expect_ok()
        .clone()
}

/// The steps the task's history says fired, in order.
fn fired(svc: &Service, id: &str) -> Vec<Value> {
    let r = svc.call("GET", &format!("/v1/tasks/{id}/history"), Some("sam"), None);
    r.expect_ok()["entries"]
        .as_array()
        .expect("entries")
        .iter()
        .filter(|e| !e["step"].is_null())
        .inspect(|e| {
            assert_eq!(e["verb"], "expire-overdue", "{e}");
            assert_eq!(e["actor"], Value::Null, "{e}");
        })
        .map(|e| e["step"].clone())
        .collect()
}

/// The steps of `id` the feed shows `who`, in order.
fn fed(svc: &Service, who: &str, id: &str) -> Vec<Value> {
    let page = svc.call("GET", "/v1/events?limit=1000", Some(who), None);
    page.expect_ok()["entries"]
        .as_array()
        .expect("entries")
        .iter()
        .filter_map(|e| e["change"]["task"].as_object())
        .filter(|t| t["id"] == id && !t["entry"]["step"].is_null())
        .map(|t| t["entry"]["step"].clone())
        .collect()
}

#[test]
fn the_servers_sweeper_fires_a_reminder_and_each_chain_step_and_patch_rearms_them() {
    let sweeping = Options {
        sweep: true,
        ..test_options()
    };
    each_backend_with(sweeping, |svc| {
        let now = unix_ms();
        let mut t = new_task("chain");
        t["created_at"] = json!(now - 48 * HOUR);
        t["due_at"] = json!(now + 24 * HOUR);
        t["on_expiry"] = json!("deny");
        t["remind_before"] = json!([HOUR]);
        t["escalation"] = json!([
            escalate(0, &["leads"]),
            escalate(4 * HOUR, &["directors"]),
            {"after_due_ms": 24 * HOUR, "action": "expire"},
        ]);
        let opened = svc
            .call("POST", "/v1/tasks", Some("sam"), Some(t))
            .expect_ok()
            .clone();
        assert_eq!(opened["remind_before"], json!([HOUR]));
        assert_eq!(opened["escalation"][2]["action"], "expire");
        assert_eq!(opened["steps_done"], 0);
        let wake = |svc: &Service| {
            svc.call("GET", "/v1/stats/next-wake", Some("olga"), None)
                .expect_ok()["at"]
                .clone()
        };
        assert_eq!(wake(svc), json!(now + 23 * HOUR));

        // Due in half an hour: the reminder's instant is past, and the
        // sweeper, woken by the commit, sends it.
        let due = now + HOUR / 2;
        let moved = patch(svc, "chain", json!({"due_at": due}));
        assert_eq!(moved["steps_done"], 0);
        eventually("the reminder to fire", || {
            get(svc, "chain")["steps_done"] == 1
        });
        let t = get(svc, "chain");
        assert_eq!(t["state"], "open");
        assert_eq!(fired(svc, "chain"), [json!({"reminder": HOUR})]);
        assert_eq!(wake(svc), json!(due));

        // Overdue by a minute: the reminder stays sent; the first step of
        // the chain, never fired, fires.
        patch(svc, "chain", json!({"due_at": now - 60_000}));
        eventually("the first step to fire", || {
            get(svc, "chain")["steps_done"] == 2
        });
        let t = get(svc, "chain");
        assert_eq!(t["state"], "escalated");
        assert_eq!(t["candidate_roles"], json!(["finance", "leads"]));

        // Overdue by five hours: the second step's instant is past too.
        let due = now - 5 * HOUR;
        patch(svc, "chain", json!({"due_at": due}));
        eventually("the second step to fire", || {
            get(svc, "chain")["steps_done"] == 3
        });
        let t = get(svc, "chain");
        assert_eq!(t["state"], "escalated");
        assert_eq!(
            t["candidate_roles"],
            json!(["finance", "leads", "directors"])
        );
        let steps = [
            json!({"reminder": HOUR}),
            json!({"escalation": escalate(0, &["leads"])}),
            json!({"escalation": escalate(4 * HOUR, &["directors"])}),
        ];
        assert_eq!(fired(svc, "chain"), steps);
        // The expiry waits for its instant, a day past the due time.
        assert_eq!(wake(svc), json!(due + 24 * HOUR));
        // The feed carries each step, to a reviewer of the task as to its
        // service.
        assert_eq!(fed(svc, "sam", "chain"), steps);
        assert_eq!(fed(svc, "alice", "chain"), steps);
    });
}

#[test]
fn patch_sets_reminders_and_a_chain_and_a_clock_override_sweep_fires_them() {
    each_backend(|svc| {
        // new_task: created at 1000, due at 5000.
        let mut t = new_task("r");
        t["remind_before"] = json!([1000, 3000.0, 1000]);
        let opened = svc
            .call("POST", "/v1/tasks", Some("sam"), Some(t))
            .expect_ok()
            .clone();
        assert_eq!(opened["remind_before"], json!([3000, 1000]));
        assert_eq!(opened["escalation"], json!([]));
        // A reviewer of the task reads them as well.
        let seen = svc.call("GET", "/v1/tasks/r", Some("alice"), None);
        assert_eq!(seen.expect_ok()["remind_before"], json!([3000, 1000]));

        // Numbers as JSON Schema counts integers, as every instant is read.
        let changed = patch(
            svc,
            "r",
            json!({"remind_before": [2000.0], "escalation": [
                {"after_due_ms": 0.0, "action": {"escalate": ["leads"]}},
            ]}),
        );
        assert_eq!(changed["remind_before"], json!([2000]));
        assert_eq!(changed["escalation"], json!([escalate(0, &["leads"])]));
        let sweep = |now: i64| {
            svc.call(
                "POST",
                "/v1/expire-overdue",
                Some("sam"),
                Some(json!({"now": now})),
            )
            .expect_ok()["tasks"]
                .clone()
        };
        assert_eq!(sweep(2999), json!([]));
        let acted = sweep(3000);
        assert_eq!(acted[0]["steps_done"], 1);
        assert_eq!(fired(svc, "r"), [json!({"reminder": 2000})]);

        // A due time a day later re-arms everything.
        let later = patch(svc, "r", json!({"due_at": 86_405_000}));
        assert_eq!(later["steps_done"], 0);
        let wake = svc.call("GET", "/v1/stats/next-wake", Some("olga"), None);
        assert_eq!(wake.expect_ok()["at"], 86_403_000);

        // Clearing both with empty lists: the due time leads to the task's
        // on_expiry again, and is all that waits.
        let cleared = patch(svc, "r", json!({"remind_before": [], "escalation": []}));
        assert_eq!(cleared["remind_before"], json!([]));
        assert_eq!(cleared["escalation"], json!([]));
        let wake = svc.call("GET", "/v1/stats/next-wake", Some("olga"), None);
        assert_eq!(wake.expect_ok()["at"], 86_405_000);
    });
}

#[test]
fn a_bad_timeline_is_refused_naming_its_field_and_nothing_is_written() {
    each_backend(|svc| {
        let mut t = new_task("t");
        t["remind_before"] = json!([1000]);
        svc.call("POST", "/v1/tasks", Some("sam"), Some(t))
            .expect_ok();
        let before = svc.snapshot();
        let open = |extra: Value| {
            let mut t = new_task("bad");
            for (k, v) in extra.as_object().expect("fields") {
                t[k] = v.clone();
            }
            svc.call("POST", "/v1/tasks", Some("sam"), Some(t))
        };
        let refusals = [
            // A reminder at the due time is no reminder.
            (open(json!({"remind_before": [0]})), "remind_before"),
            // More than the 4000 ms from creation to due.
            (open(json!({"remind_before": [500, 4001]})), "remind_before"),
            // A chain needs a due time.
            (
                open(
                    json!({"due_at": null, "escalation": [{"after_due_ms": 0, "action": "expire"}]}),
                ),
                "escalation",
            ),
            // Expiry only as the last step.
            (
                open(json!({"escalation": [
                    {"after_due_ms": 0, "action": "expire"},
                    escalate(10, &["leads"]),
                ]})),
                "escalation",
            ),
            (
                svc.call(
                    "PATCH",
                    "/v1/tasks/t",
                    Some("sam"),
                    Some(json!({"escalation": [escalate(10, &["a"]), escalate(10, &["b"])]})),
                ),
                "escalation",
            ),
            (
                svc.call(
                    "PATCH",
                    "/v1/tasks/t",
                    Some("sam"),
                    Some(json!({"escalation": [escalate(0, &[])]})),
                ),
                "escalation",
            ),
            (
                svc.call(
                    "PATCH",
                    "/v1/tasks/t",
                    Some("sam"),
                    Some(json!({"remind_before": [4001]})),
                ),
                "remind_before",
            ),
            // The due time cleared under a standing reminder.
            (
                svc.call(
                    "PATCH",
                    "/v1/tasks/t",
                    Some("sam"),
                    Some(json!({"due_at": null})),
                ),
                "remind_before",
            ),
            // Only due_at takes null.
            (
                svc.call(
                    "PATCH",
                    "/v1/tasks/t",
                    Some("sam"),
                    Some(json!({"remind_before": null})),
                ),
                "remind_before",
            ),
            (
                svc.call(
                    "PATCH",
                    "/v1/tasks/t",
                    Some("sam"),
                    Some(json!({"escalation": [{"after_due_ms": 0, "action": "later"}]})),
                ),
                // Read before the rules see it: the path of the bad value.
                "escalation[0].action",
            ),
        ];
        for (r, field) in refusals {
            r.expect_problem(400, "invalid");
            assert_eq!(r.body["field"], field, "{r:#?}");
        }
        let after = svc.snapshot();
        assert_eq!(before.0, after.0, "the check answers changed");
        assert!(before.1 == after.1, "the keyspace changed");
    });
}
