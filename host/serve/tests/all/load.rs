//! Load: 64 concurrent clients claim-next and settle over a pool of tasks,
//! with racing claims of named tasks mixed in. No unexpected error (a 503
//! that says nothing was done is retried after its Retry-After), every task
//! settled exactly once, and the check clean.

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use serde_json::{Value, json};

use crate::harness::{Reply, each_backend, new_task, reply};

const CLIENTS: usize = 64;
const TASKS: usize = 256;

#[test]
fn sixty_four_clients_settle_every_task_exactly_once() {
    each_backend(|svc| {
        for i in 0..TASKS {
            let mut t = new_task(&format!("p-{i}"));
            t["created_at"] = json!(i);
            svc.call("POST", "/v1/tasks", Some("sam"), Some(t))
                .expect_ok();
        }
        let settled = Mutex::new(Vec::<String>::new());
        let retried = AtomicUsize::new(0);
        let url = |p: &str| svc.url(p);
        std::thread::scope(|s| {
            for c in 0..CLIENTS {
                let settled = &settled;
                let retried = &retried;
                let client = svc.client.clone();
                // Reviewers of the finance role, each acting as itself via
                // an operator credential naming it (so there are 64 actors).
                let token = svc.tokens.get("olga").to_owned();
                let actor = format!("r-{c}");
                let next = url("/v1/queue/claim-next");
                let base = url("/v1/tasks/");
                s.spawn(move || {
                    // A 503 whose type says nothing was done (a transaction that
                    // lost every retry to the others, a busy database) is
                    // retried after its Retry-After, as a client should;
                    // any other 5xx fails the test.
                    let send = |path: &str, body: &Value| -> Reply {
                        loop {
                            let r = reply(
                                client
                                    .post(path)
                                    .bearer_auth(&token)
                                    .json(body)
                                    .send()
                                    .expect("answers"),
                            );
                            if r.status == 503 && matches!(r.problem_type(), "conflict" | "busy") {
                                let wait = r.headers["retry-after"]
                                    .to_str()
                                    .ok()
                                    .and_then(|s| s.parse::<u64>().ok())
                                    .expect("a Retry-After in seconds");
                                retried.fetch_add(1, Ordering::Relaxed);
                                std::thread::sleep(Duration::from_secs(wait));
                                continue;
                            }
                            return r;
                        }
                    };
                    let mut round = 0usize;
                    loop {
                        round += 1;
                        // A racing claim of a task some other client may hold.
                        if round.is_multiple_of(3) {
                            let id = format!("p-{}", (c * 7 + round) % TASKS);
                            let r = send(
                                &format!("{base}{id}/claim"),
                                &json!({"actor": actor, "roles": ["finance"]}),
                            );
                            match r.status {
                                200 => {
                                    let s = send(
                                        &format!("{base}{id}/settle"),
                                        &json!({"settlement": "completed", "holder": actor}),
                                    );
                                    assert_eq!(s.status, 200, "{s:#?}");
                                    if s.body["settled"] == true {
                                        settled.lock().expect("lock").push(id);
                                    }
                                }
                                409 => assert!(
                                    matches!(r.problem_type(), "already-claimed" | "not-pending"),
                                    "{r:#?}"
                                ),
                                _ => panic!("unexpected answer to a racing claim: {r:#?}"),
                            }
                        }
                        let r = send(
                            &next,
                            &json!({"actor": actor, "roles": ["finance"], "lease_ms": 60000}),
                        );
                        assert_eq!(r.status, 200, "{r:#?}");
                        let Some(id) = r.body["task"]["id"].as_str().map(str::to_owned) else {
                            break;
                        };
                        let s = send(
                            &format!("{base}{id}/settle"),
                            &json!({"settlement": "completed", "holder": actor}),
                        );
                        assert_eq!(s.status, 200, "{s:#?}");
                        assert_eq!(
                            s.body["settled"], true,
                            "a task claimed by one client settled by it"
                        );
                        settled.lock().expect("lock").push(id);
                    }
                });
            }
        });
        eprintln!(
            "{} answers were 503 with Retry-After and were retried",
            retried.load(Ordering::Relaxed)
        );
        let mut settled = settled.into_inner().expect("lock");
        settled.sort();
        let n = settled.len();
        settled.dedup();
        assert_eq!(n, settled.len(), "a task was settled twice");
        assert_eq!(n, TASKS, "every task settled");
        let open = svc.call("GET", "/v1/stats/open-count", Some("olga"), None);
        assert_eq!(open.expect_ok()["count"], 0);
        assert_eq!(svc.checks()[0]["discrepancies"], json!([]));
    });
}
