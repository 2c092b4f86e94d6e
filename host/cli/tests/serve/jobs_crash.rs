//! A bulk job whose server is killed with SIGKILL half-way: started again
//! on the same store (a redb file, or a PostgreSQL database), the server's
//! sweeper resumes the job from its stored row and finishes it, and every
//! task of its set was changed exactly once, its history naming the job
//! once.
//!
//! Nothing waits on time: the test polls the job until it is part-way
//! (some tasks done, some not) and kills the server then. Should the job
//! finish before a poll sees it part-way, the test starts again with a set
//! twice as large, and fails after a few such tries rather than pass
//! without a kill in the middle.

use std::path::Path;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};

use super::fleet::Fleet;
use super::{client, mint};

/// The bound of a hang: no wait here is a pace the test relies on.
const PATIENCE: Duration = Duration::from_secs(180);

/// Tries before the test gives up on catching a job part-way.
const TRIES: u32 = 4;

struct Client<'a> {
    fleet: &'a Fleet,
    token: String,
    http: reqwest::blocking::Client,
}

impl Client<'_> {
    /// One call to the live server; the answer must be a success.
    fn call(&self, method: reqwest::Method, path: &str, body: Option<&Value>) -> Value {
        let base = self.fleet.base(0);
        let mut req = self
            .http
            .request(method.clone(), format!("{base}{path}"))
            .bearer_auth(&self.token);
        if let Some(b) = body {
            req = req.json(b);
        }
        let r = req
            .send()
            .unwrap_or_else(|e| panic!("{method} {path}: {e}"));
        let status = r.status();
        let text = r.text().unwrap_or_default();
        assert!(status.is_success(), "{method} {path}: {status} {text}");
        serde_json::from_str(&text).expect("a JSON answer")
    }

    fn job(&self, id: &str) -> Value {
        self.call(reqwest::Method::GET, &format!("/v1/jobs/{id}"), None)
    }
}

/// Opens `n` tasks of run `run`, offered to finance; answers their ids.
fn open(c: &Client<'_>, run: &str, n: usize) -> Vec<String> {
    (0..n)
        .map(|i| {
            let id = format!("{run}-{i}");
            c.call(
                reqwest::Method::POST,
                "/v1/tasks",
                Some(&json!({"id": id, "run": run, "kind": "approve",
                    "candidate_roles": ["finance"], "justification": {"n": i}})),
            );
            id
        })
        .collect()
}

/// Polls job `id` until `stop` holds of it, as fast as answers come.
fn poll(c: &Client<'_>, id: &str, what: &str, stop: impl Fn(&Value) -> bool) -> Value {
    let until = Instant::now() + PATIENCE;
    loop {
        let job = c.job(id);
        if stop(&job) {
            return job;
        }
        assert!(Instant::now() < until, "job {id}: waited for {what}: {job}");
    }
}

fn a_killed_server_resumes_its_job(db: &Path, dir: &Path, label: &str) {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    // A tenant of this run alone: the PostgreSQL database is shared.
    let tenant = format!("jobs-{label}-{}-{nanos}", std::process::id());
    let (operator, line) = mint(dir, &tenant, "ops", "operator", &[]);
    let tokens = dir.join("tokens");
    std::fs::write(&tokens, format!("{line}\n")).expect("tokens");
    let fleet = Fleet::new(dir, db, tokens.to_str().expect("utf-8"), &[], 1);
    fleet.start(0);
    let c = Client {
        fleet: &fleet,
        token: operator,
        http: client(),
    };
    let mut n = 300;
    for attempt in 0..TRIES {
        let run = format!("r{attempt}");
        let ids = open(&c, &run, n);
        let job_id = format!("give-{attempt}");
        let started = c.call(
            reqwest::Method::POST,
            "/v1/jobs",
            Some(&json!({
                "id": job_id,
                "filter": {"run": run, "states": ["open"]},
                "action": {"kind": "assign", "to": "bob", "roles": ["finance"],
                           "override_roles": false},
            })),
        );
        assert_eq!(started["id"], job_id.as_str());
        // A third of the way or more (not yet done), or finished before a
        // poll saw it so.
        let seen = poll(&c, &job_id, "it to be part-way or done", |j| {
            let done = j["done"].as_u64().unwrap_or(0);
            let total = j["total"].as_u64().unwrap_or(0);
            j["state"] == "done" || (j["state"] == "running" && done >= 1 && done * 3 >= total)
        });
        if seen["state"] == "done" {
            println!("{label}: job over {n} tasks finished before it was seen part-way");
            n *= 2;
            continue;
        }
        fleet.kill(0);
        let total = seen["total"].as_u64().expect("a total");
        let at_kill = seen["done"].as_u64().expect("done");
        assert_eq!(total, n as u64, "{seen}");
        assert!(at_kill >= 1 && at_kill < total, "{seen}");
        println!("{label}: killed at {at_kill} of {total} done");

        fleet.start(0);
        let job = poll(&c, &job_id, "it to be done", |j| j["state"] == "done");
        assert_eq!(job["total"], total, "{job}");
        assert_eq!(job["done"], total, "{job}");
        assert_eq!(job["skipped"], 0, "{job}");
        assert_eq!(job["failed"], 0, "{job}");
        for id in &ids {
            let task = c.call(reqwest::Method::GET, &format!("/v1/tasks/{id}"), None);
            assert_eq!(task["assignee"], "bob", "{id}: {task}");
            let history = c.call(
                reqwest::Method::GET,
                &format!("/v1/tasks/{id}/history"),
                None,
            );
            let entries = history["entries"].as_array().expect("entries");
            let assigned: Vec<&Value> = entries.iter().filter(|e| e["verb"] == "assign").collect();
            assert_eq!(assigned.len(), 1, "{id} changed more than once: {history}");
            let naming = entries
                .iter()
                .filter(|e| e["job"] == job_id.as_str())
                .count();
            assert_eq!(naming, 1, "{id}: {history}");
            // Opened, then changed by the job: nothing else.
            assert_eq!(entries.len(), 2, "{id}: {history}");
        }
        fleet.kill(0);
        return;
    }
    panic!("{label}: the job finished before it was seen part-way, {TRIES} times over");
}

#[test]
fn on_redb_a_job_killed_half_way_finishes_changing_each_task_once() {
    let dir = tempfile::tempdir().expect("temp dir");
    let db = dir.path().join("jobs.redb");
    a_killed_server_resumes_its_job(&db, dir.path(), "redb");
}

#[test]
fn on_postgres_a_job_killed_half_way_finishes_changing_each_task_once() {
    let Some(url) = super::postgres() else { return };
    let dir = tempfile::tempdir().expect("temp dir");
    a_killed_server_resumes_its_job(Path::new(&url), dir.path(), "postgres");
}
