//! The `leasehold` binary, run for real: every subcommand's success, its
//! refusal (exit 1) where the engine can refuse, a bad input (exit 2), and
//! its `--json` output parsed back. Each test has a database of its own.

use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

use assert_cmd::Command;
use assert_cmd::cargo::cargo_bin_cmd;
use predicates::prelude::*;
use predicates::str::contains;
use serde_json::{Value, json};
use tempfile::TempDir;

#[path = "support/postgres.rs"]
mod pg_support;
use pg_support::postgres;

/// A scratch folder holding one database file (created on first use).
struct Scratch {
    dir: TempDir,
    db: PathBuf,
}

fn scratch() -> Scratch {
    let dir = tempfile::tempdir().expect("temp dir");
    let db = dir.path().join("test.redb");
    Scratch { dir, db }
}

impl Scratch {
    /// The binary on this database, run from the scratch folder so that a
    /// default path could never land in the source tree.
    fn cmd(&self) -> Command {
        let mut c = cargo_bin_cmd!("leasehold");
        c.current_dir(self.dir.path())
            .env_remove("LEASEHOLD_DB")
            .arg("--db")
            .arg(&self.db);
        c
    }

    fn run(&self, args: &[&str]) -> Command {
        let mut c = self.cmd();
        c.args(args);
        c
    }

    /// Runs with `--json`, expects exit 0, and parses stdout.
    fn json(&self, args: &[&str]) -> Value {
        let out = self.run(args).arg("--json").assert().success();
        parse(&out.get_output().stdout)
    }

    /// Runs with `--json`, expects `code`, and parses the error on stderr.
    fn json_error(&self, args: &[&str], code: i32) -> Value {
        let out = self.run(args).arg("--json").assert().code(code);
        let out = out.get_output();
        assert!(out.stdout.is_empty(), "an error prints nothing on stdout");
        parse(&out.stderr)
    }

    fn open(&self, task: &str) -> Value {
        let out = self
            .run(&["task", "open", "--json"])
            .write_stdin(task)
            .assert()
            .success();
        parse(&out.get_output().stdout)
    }

    fn arm(&self, timer: &str) -> Value {
        let out = self
            .run(&["timer", "arm", "--json"])
            .write_stdin(timer)
            .assert()
            .success();
        parse(&out.get_output().stdout)
    }

    fn file(&self, name: &str, text: &str) -> PathBuf {
        let path = self.dir.path().join(name);
        std::fs::write(&path, text).expect("write input file");
        path
    }
}

fn parse(bytes: &[u8]) -> Value {
    let text = String::from_utf8_lossy(bytes);
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
}

/// No user mistake may end in a panic or a backtrace.
fn no_panic() -> impl Predicate<str> {
    contains("panicked")
        .not()
        .and(contains("RUST_BACKTRACE").not())
}

const APPROVAL: &str = r#"{
  "id": "pay-1", "run": "inv-1", "case": "acme", "kind": "approve-payment",
  "justification": {"amount": 12.50},
  "candidate_roles": ["approver"], "excluded_actors": ["alice"],
  "escalate_to": ["finance-lead"], "priority": "high",
  "created_at": "2026-05-04T09:00:00Z", "due_at": "2026-05-04T09:30:00+00:00"
}"#;

/// 2026-05-04T09:00:00Z in milliseconds.
const NINE: i64 = 1_777_885_200_000;

// ---- task open ------------------------------------------------------------

#[test]
fn task_open_reads_friendly_json_from_a_file_and_answers_the_stored_task() {
    let s = scratch();
    let file = s.file("task.json", APPROVAL);
    s.run(&["task", "open"])
        .arg(&file)
        .assert()
        .success()
        .stdout(contains("Opened task pay-1."))
        .stdout(contains("not alice").not())
        .stdout(contains("excluded      alice"));
    let stored = s.json(&["task", "get", "pay-1"]);
    assert_eq!(stored["state"], "open");
    assert_eq!(stored["priority"], "high");
    assert_eq!(stored["on_expiry"], "deny", "the default policy");
    assert_eq!(stored["created_at"], NINE);
    assert_eq!(stored["due_at"], NINE + 30 * 60_000);
    assert_eq!(
        stored["justification"], r#"{"amount": 12.50}"#,
        "the document's exact text"
    );
    assert_eq!(stored["assignee"], Value::Null);
}

#[test]
fn task_open_keeps_the_first_task_when_the_id_exists() {
    let s = scratch();
    let first = s.open(APPROVAL);
    let second = APPROVAL.replace(r#""priority": "high""#, r#""priority": "low""#);
    s.run(&["task", "open", "-"])
        .write_stdin(second.clone())
        .assert()
        .success()
        .stdout(contains("already exists; the first open wins"));
    assert_eq!(s.open(&second), first, "the stored task, unchanged");
}

#[test]
fn task_open_reads_back_what_task_get_prints() {
    let s = scratch();
    let printed = s.open(APPROVAL);
    let mut copy = printed.clone();
    copy["id"] = "pay-2".into();
    let reopened = s.open(&copy.to_string());
    assert_eq!(reopened, copy, "the JSON shape round-trips");
}

#[test]
fn task_open_names_the_field_line_and_problem_of_bad_json() {
    let s = scratch();
    let cases = [
        (
            "{\"id\":\"t\",\"run\":\"r\",\"kind\":\"k\",\n\"due_at\":\"tomorrow\"}",
            vec!["line 2", "field `due_at`", "RFC 3339"],
        ),
        (
            r#"{"id":"t","run":"r","kind":"k","priority":"hgih"}"#,
            vec!["field `priority`", "unknown variant `hgih`"],
        ),
        (
            r#"{"id":"t","run":"r","kind":"k","prioritty":"high"}"#,
            vec!["unknown field `prioritty`"],
        ),
        (
            r#"{"id":"t","run":"r","kind":"k","candidate_roles":["a",7]}"#,
            vec!["field `candidate_roles[1]`", "expected a string"],
        ),
        (r#"{"run":"r","kind":"k"}"#, vec!["missing field `id`"]),
        (r#"{"id":"t","run":"r""#, vec!["EOF while parsing"]),
        ("", vec!["standard input is empty"]),
        (
            r#"{"id":"t","run":"r","kind":"k","candidate_roles":[""]}"#,
            vec!["the task is invalid", "candidate_roles[0] is empty"],
        ),
        (
            r#"{"id":"t","run":"r","kind":"k","justification":"not json"}"#,
            vec!["justification is not a JSON document"],
        ),
    ];
    for (input, expected) in cases {
        let mut assert = s
            .run(&["task", "open"])
            .write_stdin(input)
            .assert()
            .code(2)
            .stderr(no_panic());
        for text in expected {
            assert = assert.stderr(contains(text));
        }
    }
    s.run(&["task", "open", "missing.json"])
        .assert()
        .code(2)
        .stderr(contains("cannot read a task from missing.json"));
    let e = s.json_error(&["task", "open"], 2);
    assert_eq!(e["error"], "invalid");
    assert_eq!(e["exit"], 2);
}

// ---- task get ---------------------------------------------------------------

#[test]
fn task_get_shows_a_task_or_refuses_an_unknown_id() {
    let s = scratch();
    let opened = s.open(APPROVAL);
    s.run(&["task", "get", "pay-1"])
        .assert()
        .success()
        .stdout(contains("state         open"));
    assert_eq!(s.json(&["task", "get", "pay-1"]), opened);
    s.run(&["task", "get", "nope"])
        .assert()
        .code(1)
        .stderr(contains("not found: nope"));
    let e = s.json_error(&["task", "get", "nope"], 1);
    assert_eq!(
        (e["error"].as_str(), e["detail"].as_str()),
        (Some("not_found"), Some("nope"))
    );
    s.run(&["task", "get", ""])
        .assert()
        .code(2)
        .stderr(contains("id is empty"));
}

// ---- task claim / release / take-over ----------------------------------------

#[test]
fn task_claim_walks_the_ladder_in_order() {
    let s = scratch();
    s.open(APPROVAL);
    let claimed = s.json(&[
        "task", "claim", "pay-1", "--actor", "bob", "--role", "approver",
    ]);
    assert_eq!(
        (claimed["state"].as_str(), claimed["assignee"].as_str()),
        (Some("claimed"), Some("bob"))
    );
    // Barred before busy: alice is told she is excluded, not that bob holds it.
    s.run(&[
        "task", "claim", "pay-1", "--actor", "alice", "--role", "approver",
    ])
    .assert()
    .code(1)
    .stderr(contains("refused: alice is excluded from this task"));
    let e = s.json_error(
        &[
            "task", "claim", "pay-1", "--actor", "dave", "--role", "clerk", "intern",
        ],
        1,
    );
    assert_eq!(e["error"], "wrong_role");
    let e = s.json_error(
        &[
            "task", "claim", "pay-1", "--actor", "carol", "--role", "approver",
        ],
        1,
    );
    assert_eq!(
        (e["error"].as_str(), e["detail"].as_str()),
        (Some("already_claimed"), Some("bob"))
    );
    // The holder claiming again is idempotent success.
    s.run(&[
        "task", "claim", "pay-1", "--actor", "bob", "--role", "approver",
    ])
    .assert()
    .success()
    .stdout(contains("bob holds pay-1 until released."));
    s.run(&["task", "claim", "pay-1", "--role", "approver"])
        .assert()
        .code(2)
        .stderr(contains("--actor"));
    s.run(&[
        "task", "claim", "pay-1", "--actor", "", "--role", "approver",
    ])
    .assert()
    .code(2)
    .stderr(contains("actor is empty"));
}

#[test]
fn task_release_gives_back_only_the_holders_claim() {
    let s = scratch();
    s.open(APPROVAL);
    s.run(&[
        "task", "claim", "pay-1", "--actor", "bob", "--role", "approver",
    ])
    .assert()
    .success();
    s.run(&["task", "release", "pay-1", "--actor", "carol"])
        .assert()
        .code(1)
        .stderr(contains("carol does not hold the task"));
    let released = s.json(&["task", "release", "pay-1", "--actor", "bob"]);
    assert_eq!(released["released"], true);
    assert_eq!(s.json(&["task", "get", "pay-1"])["state"], "open");
    s.run(&["task", "release", "pay-1", "--actor", "bob"])
        .assert()
        .code(1)
        .stderr(contains("bob does not hold the task"));
    s.run(&["task", "release", "pay-1"]).assert().code(2);
}

#[test]
fn task_take_over_is_a_compare_and_swap_on_the_holder() {
    let s = scratch();
    s.open(APPROVAL);
    s.run(&[
        "task", "claim", "pay-1", "--actor", "bob", "--role", "approver",
    ])
    .assert()
    .success();
    let e = s.json_error(
        &[
            "task",
            "take-over",
            "pay-1",
            "--from",
            "zoe",
            "--actor",
            "carol",
            "--role",
            "approver",
        ],
        1,
    );
    assert_eq!(
        (e["error"].as_str(), e["detail"].as_str()),
        (Some("not_held"), Some("zoe"))
    );
    s.run(&[
        "task",
        "take-over",
        "pay-1",
        "--from",
        "bob",
        "--actor",
        "carol",
        "--role",
        "approver",
    ])
    .assert()
    .success()
    .stdout(contains("carol took pay-1 over from bob."));
    let task = s.json(&[
        "task",
        "take-over",
        "pay-1",
        "--from",
        "carol",
        "--actor",
        "dan",
        "--role",
        "approver",
    ]);
    assert_eq!(task["assignee"], "dan");
    s.run(&[
        "task",
        "take-over",
        "pay-1",
        "--from",
        "dan",
        "--actor",
        "erin",
        "--role",
        "",
    ])
    .assert()
    .code(2)
    .stderr(contains("roles[0] is empty"));
}

// ---- leases: task claim --lease / renew / reclaim / claim-next ------------------

#[test]
fn task_claim_with_a_lease_holds_until_its_end_and_task_renew_moves_it() {
    let s = scratch();
    s.open(APPROVAL);
    let now = NINE.to_string();
    s.run(&[
        "task", "claim", "pay-1", "--actor", "bob", "--role", "approver", "--lease", "5m", "--now",
        &now,
    ])
    .assert()
    .success()
    .stdout(
        contains("bob holds pay-1 until 2026-05-04T09:05:00Z")
            .and(contains("lease until   2026-05-04T09:05:00Z")),
    );
    assert_eq!(
        s.json(&["task", "get", "pay-1"])["lease_until"],
        NINE + 300_000
    );
    let stats = s.json(&["stats"]);
    assert_eq!(
        (
            stats["leased_count"].as_u64(),
            stats["next_lease_end"].as_i64()
        ),
        (Some(1), Some(NINE + 300_000))
    );
    s.run(&["stats"]).assert().success().stdout(
        contains("leased claims   1").and(contains("next lease end  2026-05-04T09:05:00Z")),
    );
    let renewed = s.json(&[
        "task",
        "renew",
        "pay-1",
        "--actor",
        "bob",
        "--lease",
        "10m",
        "--now",
        "2026-05-04T09:04:00Z",
    ]);
    assert_eq!(renewed["lease_until"], NINE + 840_000);
    let e = s.json_error(
        &[
            "task", "renew", "pay-1", "--actor", "carol", "--lease", "1m",
        ],
        1,
    );
    assert_eq!(
        (e["error"].as_str(), e["detail"].as_str()),
        (Some("not_held"), Some("carol"))
    );
    // A lease needs a length; --now alone means nothing.
    s.run(&["task", "renew", "pay-1", "--actor", "bob"])
        .assert()
        .code(2)
        .stderr(contains("--lease"));
    s.run(&[
        "task", "claim", "pay-1", "--actor", "bob", "--role", "approver", "--now", &now,
    ])
    .assert()
    .code(2)
    .stderr(contains("--lease"));
    s.run(&[
        "task", "claim", "pay-1", "--actor", "bob", "--role", "approver", "--lease", "0s",
    ])
    .assert()
    .code(2)
    .stderr(contains("shorter than one millisecond"));
}

#[test]
fn task_take_over_with_a_lease_gives_the_new_holder_that_lease() {
    let s = scratch();
    s.open(APPROVAL);
    s.run(&[
        "task", "claim", "pay-1", "--actor", "bob", "--role", "approver", "--lease", "1m",
    ])
    .assert()
    .success();
    let task = s.json(&[
        "task",
        "take-over",
        "pay-1",
        "--from",
        "bob",
        "--actor",
        "carol",
        "--role",
        "approver",
        "--lease",
        "2m",
        "--now",
        &NINE.to_string(),
    ]);
    assert_eq!(
        (task["assignee"].as_str(), task["lease_until"].as_i64()),
        (Some("carol"), Some(NINE + 120_000))
    );
}

#[test]
fn task_reclaim_returns_lapsed_claims_to_the_queue() {
    let s = scratch();
    s.open(APPROVAL);
    s.run(&[
        "task",
        "claim",
        "pay-1",
        "--actor",
        "bob",
        "--role",
        "approver",
        "--lease",
        "30s",
        "--now",
        &NINE.to_string(),
    ])
    .assert()
    .success();
    s.run(&["task", "reclaim", "--now", "2026-05-04T09:00:29Z"])
        .assert()
        .success()
        .stdout(contains("No leases had lapsed at 2026-05-04T09:00:29Z."));
    s.run(&["task", "reclaim", "--now", "2026-05-04T09:00:30Z"])
        .assert()
        .success()
        .stdout(contains("pay-1").and(contains("Returned 1 task to the queue")));
    let task = s.json(&["task", "get", "pay-1"]);
    assert_eq!(
        (task["state"].as_str(), task["assignee"].as_str()),
        (Some("open"), None)
    );
    assert_eq!(task["lease_until"], Value::Null);
    let again = s.json(&["task", "reclaim", "--now", "2026-05-04T10:00:00Z"]);
    assert_eq!(again, serde_json::json!([]));
    s.run(&["task", "reclaim", "--limit", "0"]).assert().code(2);
}

#[test]
fn task_settle_with_a_holder_refuses_anyone_who_does_not_hold_the_task() {
    let s = scratch();
    s.open(APPROVAL);
    s.run(&[
        "task", "claim", "pay-1", "--actor", "bob", "--role", "approver",
    ])
    .assert()
    .success();
    let e = s.json_error(
        &["task", "settle", "pay-1", "completed", "--holder", "carol"],
        1,
    );
    assert_eq!(
        (e["error"].as_str(), e["detail"].as_str()),
        (Some("not_held"), Some("carol"))
    );
    assert_eq!(s.json(&["task", "get", "pay-1"])["state"], "claimed");
    s.run(&["task", "settle", "pay-1", "completed", "--holder", "bob"])
        .assert()
        .success()
        .stdout(contains("Settled pay-1 as completed."));
}

#[test]
fn task_claim_next_claims_the_head_of_the_queue_or_says_it_is_empty() {
    let s = scratch();
    s.open(APPROVAL);
    s.open(r#"{"id": "pay-2", "run": "inv-2", "kind": "approve-payment", "candidate_roles": ["approver"], "priority": "urgent", "created_at": 5}"#);
    let first = s.json(&[
        "task",
        "claim-next",
        "--actor",
        "bob",
        "--role",
        "approver",
        "--lease",
        "1m",
        "--now",
        &NINE.to_string(),
    ]);
    assert_eq!(
        (
            first["id"].as_str(),
            first["assignee"].as_str(),
            first["lease_until"].as_i64()
        ),
        (Some("pay-2"), Some("bob"), Some(NINE + 60_000))
    );
    s.run(&["task", "claim-next", "--actor", "bob", "--role", "approver"])
        .assert()
        .success()
        .stdout(contains(
            "bob holds pay-1, the first task of the queue, until released.",
        ));
    s.run(&["task", "claim-next", "--actor", "bob", "--role", "approver"])
        .assert()
        .success()
        .stdout(contains("No queued tasks for bob with roles approver"));
    assert_eq!(
        s.json(&["task", "claim-next", "--actor", "bob", "--role", "approver"]),
        Value::Null
    );
    s.run(&["task", "claim-next", "--role", "approver"])
        .assert()
        .code(2)
        .stderr(contains("--actor"));
}

// ---- task settle / escalate / withdraw-run -----------------------------------

#[test]
fn task_settle_moves_a_pending_task_once() {
    let s = scratch();
    s.open(APPROVAL);
    s.run(&["task", "settle", "pay-1", "completed"])
        .assert()
        .success()
        .stdout(contains("Settled pay-1 as completed."));
    let late = s.json(&["task", "settle", "pay-1", "expired"]);
    assert_eq!(
        late,
        serde_json::json!({"id": "pay-1", "settlement": "expired", "settled": false})
    );
    assert_eq!(s.json(&["task", "get", "pay-1"])["state"], "completed");
    s.run(&["task", "settle", "nope", "completed"])
        .assert()
        .code(1)
        .stderr(contains("no task nope"));
    s.run(&["task", "settle", "pay-1", "done"])
        .assert()
        .code(2)
        .stderr(contains("possible values: completed, expired, withdrawn"));
}

#[test]
fn task_escalate_widens_the_audience_and_clears_the_holder() {
    let s = scratch();
    s.open(APPROVAL);
    s.run(&[
        "task", "claim", "pay-1", "--actor", "bob", "--role", "approver",
    ])
    .assert()
    .success();
    s.run(&["task", "escalate", "pay-1"])
        .assert()
        .success()
        .stdout(contains("offered to approver, finance-lead"));
    let task = s.json(&["task", "escalate", "pay-1"]);
    assert_eq!(task["state"], "escalated");
    assert_eq!(task["assignee"], Value::Null);
    assert_eq!(
        task["candidate_roles"],
        serde_json::json!(["approver", "finance-lead"])
    );
    s.run(&["task", "escalate", "nope"]).assert().code(1);
    s.run(&["task", "escalate", "bad\u{7}id"])
        .assert()
        .code(2)
        .stderr(contains("control character"));
}

#[test]
fn task_withdraw_run_settles_only_the_runs_pending_tasks() {
    let s = scratch();
    s.open(APPROVAL);
    s.open(r#"{"id":"other","run":"inv-2","kind":"k"}"#);
    let moved = s.json(&["task", "withdraw-run", "inv-1", "pay-1", "other", "ghost"]);
    assert_eq!(moved, serde_json::json!({"run": "inv-1", "withdrawn": 1}));
    s.run(&["task", "withdraw-run", "inv-1", "pay-1"])
        .assert()
        .success()
        .stdout(contains("Withdrew 0 pending tasks of run inv-1."));
    assert_eq!(s.json(&["task", "get", "other"])["state"], "open");
    s.run(&["task", "withdraw-run", "inv-1"])
        .assert()
        .code(2)
        .stderr(contains("<ID>"));
}

// ---- queue / overdue / case ---------------------------------------------------

fn backlog(s: &Scratch) {
    for (id, priority, minute) in [
        ("low-1", "low", 1),
        ("urgent-1", "urgent", 2),
        ("normal-1", "normal", 3),
        ("high-1", "high", 4),
    ] {
        s.open(&format!(
            r#"{{"id":"{id}","run":"r","case":"c","kind":"k","priority":"{priority}","candidate_roles":["approver"],"created_at":{},"due_at":{}}}"#,
            NINE + minute * 60_000,
            NINE + (10 + minute) * 60_000,
        ));
    }
    s.open(&format!(
        r#"{{"id":"barred","run":"r","case":"c","kind":"k","priority":"urgent","excluded_actors":["alice"],"created_at":{NINE}}}"#
    ));
}

fn ids(page: &Value) -> Vec<String> {
    page.as_array()
        .expect("a list of tasks")
        .iter()
        .map(|t| t["id"].as_str().unwrap_or_default().to_owned())
        .collect()
}

#[test]
fn queue_pages_in_priority_order_and_hides_what_a_claim_would_refuse() {
    let s = scratch();
    backlog(&s);
    let page = s.json(&[
        "queue", "--role", "approver", "--actor", "alice", "--limit", "3",
    ]);
    assert_eq!(ids(&page["tasks"]), ["urgent-1", "high-1", "normal-1"]);
    let cursor = page["next"].as_str().expect("a next cursor").to_owned();
    let rest = s.json(&[
        "queue", "--role", "approver", "--actor", "alice", "--after", &cursor,
    ]);
    assert_eq!(ids(&rest["tasks"]), ["low-1"]);
    assert_eq!(rest["next"], Value::Null);
    s.run(&["queue", "--role", "approver", "--limit", "2"])
        .assert()
        .success()
        .stdout(contains("barred").and(contains("urgent-1")))
        .stdout(contains("More follow: --after "));
    s.run(&["queue", "--role", "nobody", "--actor", "alice"])
        .assert()
        .success()
        .stdout(contains("No queued tasks for alice with roles nobody."));
    s.run(&["queue", "--role", "approver", "--limit", "0"])
        .assert()
        .code(2)
        .stderr(contains("limit is 0"));
    s.run(&["queue", "--role", "approver", "--after", "not-a-cursor"])
        .assert()
        .code(2)
        .stderr(no_panic());
}

#[test]
fn overdue_compares_due_times_with_the_given_now() {
    let s = scratch();
    backlog(&s);
    let due = s.json(&["overdue", "--now", "2026-05-04T09:12:00Z"]);
    assert_eq!(ids(&due), ["low-1", "urgent-1"]);
    let by_ms = s.json(&["overdue", "--now", &(NINE + 12 * 60_000).to_string()]);
    assert_eq!(
        by_ms, due,
        "RFC 3339 and milliseconds name the same instant"
    );
    s.run(&["overdue", "--now", "2026-05-04T09:00:00Z"])
        .assert()
        .success()
        .stdout(contains("Nothing is overdue at 2026-05-04T09:00:00Z."));
    s.run(&["overdue", "--now", "2026-05-04T09:20:00Z"])
        .assert()
        .success()
        .stdout(contains("4 tasks overdue"));
    s.run(&["overdue", "--now", "tomorrow"])
        .assert()
        .code(2)
        .stderr(contains("--now").and(contains("RFC 3339")));
    s.run(&["overdue", "--limit", "1001"])
        .assert()
        .code(2)
        .stderr(contains("limit is 1001"));
}

#[test]
fn case_lists_every_task_of_a_case_oldest_first() {
    let s = scratch();
    backlog(&s);
    s.run(&["task", "settle", "low-1", "completed"])
        .assert()
        .success();
    let page = s.json(&["case", "c"]);
    assert_eq!(
        ids(&page["tasks"]),
        ["barred", "low-1", "urgent-1", "normal-1", "high-1"]
    );
    s.run(&["case", "c", "--limit", "1"])
        .assert()
        .success()
        .stdout(contains("barred").and(contains("More follow")));
    s.run(&["case", "elsewhere"])
        .assert()
        .success()
        .stdout(contains("Case elsewhere has no tasks."));
    s.run(&["case", "c", "--limit", "none"])
        .assert()
        .code(2)
        .stderr(contains("--limit"));
}

// ---- timers ---------------------------------------------------------------------

#[test]
fn timer_arm_keeps_the_first_arming_and_refuses_bad_json() {
    let s = scratch();
    let file = s.file(
        "timer.json",
        r#"{"run":"r1","effect":"remind","fire_at":"2026-05-04T09:30:00Z"}"#,
    );
    s.run(&["timer", "arm"])
        .arg(&file)
        .assert()
        .success()
        .stdout(contains("Armed r1/remind to fire at 2026-05-04T09:30:00Z."));
    let again = s.arm(r#"{"run":"r1","effect":"remind","fire_at":5}"#);
    assert_eq!(
        again,
        serde_json::json!({"run": "r1", "effect": "remind", "outcome": "already_armed"})
    );
    s.run(&["run", "seal", "r2"]).assert().success();
    assert_eq!(
        s.arm(r#"{"run":"r2","effect":"e","fire_at":5}"#)["outcome"],
        "run_sealed"
    );
    s.run(&["timer", "arm"])
        .write_stdin(r#"{"run":"r1","effect":"e"}"#)
        .assert()
        .code(2)
        .stderr(contains("missing field `fire_at`"));
    s.run(&["timer", "arm"])
        .write_stdin(r#"{"run":"r1","effect":"e","fire_at":5,"phase":"backwards"}"#)
        .assert()
        .code(2)
        .stderr(contains("field `phase`").and(contains("forward")));
    s.run(&["timer", "arm"])
        .write_stdin(r#"{"run":"r1","effect":"e","fire_at":-5}"#)
        .assert()
        .code(2)
        .stderr(contains("the timer is invalid: fire_at is -5"));
}

#[test]
fn timer_sweep_claims_due_timers_once_under_a_lease() {
    let s = scratch();
    s.arm(&format!(
        r#"{{"run":"r1","effect":"early","fire_at":{NINE}}}"#
    ));
    s.arm(&format!(
        r#"{{"run":"r1","effect":"late","fire_at":{}}}"#,
        NINE + 3_600_000
    ));
    let now = (NINE + 60_000).to_string();
    let swept = s.json(&["timer", "sweep", "--now", &now, "--lease", "30s"]);
    assert_eq!(swept.as_array().map(Vec::len), Some(1));
    assert_eq!(swept[0]["effect"], "early");
    assert_eq!(swept[0]["fire_at"], NINE);
    // Held under its lease: a second sweep at the same instant gets nothing.
    s.run(&["timer", "sweep", "--now", &now])
        .assert()
        .success()
        .stdout(contains("No timers due at 2026-05-04T09:01:00Z."));
    // The lease lapsed: the timer is claimable again.
    s.run(&["timer", "sweep", "--now", "2026-05-04T09:01:30Z"])
        .assert()
        .success()
        .stdout(contains("early").and(contains(
            "Claimed 1 timer, leased until 2026-05-04T09:02:00Z",
        )));
    s.run(&["timer", "sweep", "--lease", "30"])
        .assert()
        .code(2)
        .stderr(contains("--lease").and(contains("30s")));
    s.run(&["timer", "sweep", "--lease", "8d"])
        .assert()
        .code(2)
        .stderr(contains("7-day"));
    s.run(&["timer", "sweep", "--limit", "0"]).assert().code(2);
}

#[test]
fn timer_disarm_and_disarm_run_retire_timers() {
    let s = scratch();
    for effect in ["a", "b", "c"] {
        s.arm(&format!(
            r#"{{"run":"r1","effect":"{effect}","fire_at":{NINE}}}"#
        ));
    }
    s.run(&["timer", "disarm", "r1", "a"])
        .assert()
        .success()
        .stdout(contains("Disarmed r1/a."));
    assert_eq!(
        s.json(&["timer", "disarm", "r1", "a"]),
        serde_json::json!({"run": "r1", "effect": "a", "disarmed": false})
    );
    assert_eq!(
        s.json(&["timer", "disarm-run", "r1"]),
        serde_json::json!({"run": "r1", "disarmed": 2})
    );
    s.run(&["timer", "disarm-run", "r1"])
        .assert()
        .success()
        .stdout(contains("Disarmed 0 timers of run r1."));
    s.run(&["timer", "disarm", "r1", ""])
        .assert()
        .code(2)
        .stderr(contains("effect is empty"));
    s.run(&["timer", "disarm-run", ""]).assert().code(2);
}

#[test]
fn timer_reschedule_moves_a_timer_and_the_listings_page_it() {
    let s = scratch();
    for (effect, at) in [("a", NINE), ("b", NINE + 1_000)] {
        s.arm(&format!(
            r#"{{"run":"r1","effect":"{effect}","fire_at":{at}}}"#
        ));
    }
    s.arm(&format!(r#"{{"run":"r2","effect":"a","fire_at":{NINE}}}"#));
    s.run(&[
        "timer",
        "reschedule",
        "r1",
        "a",
        "--at",
        "2026-05-04T10:00:00Z",
    ])
    .assert()
    .success()
    .stdout(contains("Moved r1/a to fire at 2026-05-04T10:00:00Z."));
    let first = s.json(&["timer", "list", "r1", "--limit", "1"]);
    assert_eq!(first["timers"][0]["timer"]["effect"], "a", "{first}");
    assert_eq!(first["timers"][0]["timer"]["fire_at"], NINE + 3_600_000);
    let next = first["next"].as_str().expect("more follow").to_owned();
    let second = s.json(&["timer", "timers-of", "r1", "--after", &next]);
    assert_eq!(second["timers"][0]["timer"]["effect"], "b", "{second}");
    assert_eq!(second["next"], Value::Null);
    // The window [09:00, 10:00): r1/a moved out of it.
    let due = s.json(&[
        "timer",
        "due",
        "--from",
        "2026-05-04T09:00:00Z",
        "--to",
        "2026-05-04T10:00:00Z",
    ]);
    let listed: Vec<(&str, &str)> = due["timers"]
        .as_array()
        .expect("timers")
        .iter()
        .map(|i| {
            (
                i["timer"]["run"].as_str().expect("run"),
                i["timer"]["effect"].as_str().expect("effect"),
            )
        })
        .collect();
    assert_eq!(listed, [("r2", "a"), ("r1", "b")], "{due}");
    // Claimed under an hour's lease from now: refused until taken back.
    s.run(&["timer", "sweep", "--lease", "1h"])
        .assert()
        .success();
    let held = s.json_error(&["timer", "reschedule", "r1", "b", "--at", "5"], 1);
    assert_eq!(held["error"], "timer_held", "{held}");
    assert_eq!(held["detail"], "r1/b");
    s.run(&["timer", "reschedule", "r1", "b", "--at", "5", "--take-back"])
        .assert()
        .success();
    let missing = s.json_error(&["timer", "reschedule", "r1", "zzz", "--at", "5"], 1);
    assert_eq!(missing["error"], "not_found", "{missing}");
    s.run(&["timer", "due", "--from", "10", "--to", "5"])
        .assert()
        .code(2)
        .stderr(contains("before from").and(no_panic()));
    s.run(&["timer", "reschedule", "r1", "a", "--at", "tomorrow"])
        .assert()
        .code(2)
        .stderr(no_panic());
}

#[test]
fn schedule_commands_add_read_fire_pause_and_remove_a_schedule() {
    let s = scratch();
    let added = s.json(&[
        "schedule",
        "add-schedule",
        "--id",
        "nightly",
        "--run",
        "reports",
        "--cron",
        "30 2 * * *",
        "--zone",
        "america/new_york",
        "--case",
        "c-1",
        "--step",
        "2",
    ]);
    // The API's shape: the spec under `spec`, the zone canonical.
    assert_eq!(added["spec"]["zone"], "America/New_York", "{added}");
    assert_eq!(
        added["spec"]["recurrence"],
        json!({"kind": "cron", "expr": "30 2 * * *"})
    );
    assert_eq!(added["revision"], 1);
    assert!(added["next_at"].is_i64(), "{added}");
    // Across New York's spring-forward gap: March 10 has no 02:30, so it
    // fires at 03:00 EDT, shown in UTC and in the zone.
    let after = "2024-03-09T05:00:00Z";
    let next = s.json(&["schedule", "next", "nightly", "--after", after, "-n", "3"]);
    assert_eq!(
        next["occurrences"],
        json!([
            1_709_969_400_000i64,
            1_710_054_000_000i64,
            1_710_138_600_000i64
        ])
    );
    s.run(&[
        "schedule",
        "next-occurrences",
        "nightly",
        "--after",
        after,
        "-n",
        "2",
    ])
    .assert()
    .success()
    .stdout(contains("2024-03-10T07:00:00Z").and(contains("2024-03-10 03:00:00 EDT")));
    let timer = s.json(&["schedule", "trigger", "nightly"]);
    let effect = timer["effect"].as_str().expect("an effect").to_owned();
    assert!(effect.starts_with("schedule/nightly/"), "{timer}");
    assert_eq!(
        (timer["run"].clone(), timer["step"].clone()),
        (json!("reports"), json!(2))
    );
    let swept = s.json(&["timer", "claim-due", "--lease", "1m"]);
    assert!(
        swept
            .as_array()
            .expect("the timers claimed")
            .iter()
            .any(|t| t["effect"] == json!(effect)),
        "{swept}"
    );
    let paused = s.json(&["schedule", "pause", "nightly", "--note", "quarter end"]);
    assert_eq!(
        (paused["paused"].clone(), paused["next_at"].clone()),
        (json!("quarter end"), Value::Null)
    );
    s.run(&["schedule", "get-schedule", "nightly"])
        .assert()
        .success()
        .stdout(contains("Paused: quarter end"));
    let resumed = s.json(&["schedule", "resume-schedule", "nightly"]);
    assert_eq!(resumed["paused"], Value::Null);
    s.json(&[
        "schedule",
        "add",
        "--id",
        "every-minute",
        "--run",
        "r",
        "--every-ms",
        "60000",
        "--catch-up",
        "latest-within:120000",
        "--overlap",
        "buffer-one",
    ]);
    let first = s.json(&["schedule", "list", "--limit", "1"]);
    assert_eq!(
        first["schedules"][0]["spec"]["id"], "every-minute",
        "{first}"
    );
    assert_eq!(
        first["schedules"][0]["spec"]["catch_up"],
        json!({"kind": "latest_within", "window_ms": 120_000})
    );
    let cursor = first["next"].as_str().expect("more follow").to_owned();
    let second = s.json(&[
        "schedule",
        "list-schedules",
        "--limit",
        "1",
        "--after",
        &cursor,
    ]);
    assert_eq!(second["schedules"][0]["spec"]["id"], "nightly", "{second}");
    s.run(&["schedule", "list"])
        .assert()
        .success()
        .stdout(contains("every-minute").and(contains("quarter end").not()));
    let tz = s.json(&["schedule", "tz-version"]);
    assert!(
        tz["tz_version"]
            .as_str()
            .is_some_and(|v| v.starts_with("20")),
        "{tz}"
    );

    // Bad specs: invalid input naming the field, nothing written.
    for (flags, field) in [
        (&["--cron", "* 25 * * *"][..], "cron: hour field"),
        (&["--cron", "@daily", "--zone", "Mars/Olympus"][..], "zone:"),
        (&["--every-ms", "0"][..], "every-ms:"),
        (
            &["--cron", "@daily", "--start", "2000", "--end", "1000"][..],
            "end:",
        ),
    ] {
        let mut args = vec!["schedule", "add", "--id", "bad", "--run", "r"];
        args.extend_from_slice(flags);
        let e = s.json_error(&args, 2);
        assert_eq!(e["error"], "invalid", "{flags:?}: {e}");
        assert!(
            e["message"].as_str().is_some_and(|m| m.contains(field)),
            "{flags:?}: {e}"
        );
    }
    s.run(&["schedule", "add", "--id", "bad", "--run", "r"])
        .assert()
        .code(2)
        .stderr(no_panic());
    s.run(&[
        "schedule",
        "add",
        "--id",
        "bad",
        "--run",
        "r",
        "--cron",
        "@daily",
        "--catch-up",
        "soon",
    ])
    .assert()
    .code(2)
    .stderr(no_panic());
    let missing = s.json_error(&["schedule", "get", "bad"], 1);
    assert_eq!(
        (missing["error"].clone(), missing["detail"].clone()),
        (json!("not_found"), json!("bad"))
    );
    let missing = s.json_error(&["schedule", "pause", "bad", "--note", "x"], 1);
    assert_eq!(missing["error"], "not_found", "{missing}");

    let removed = s.json(&["schedule", "remove-schedule", "nightly"]);
    assert_eq!(removed, json!({"id": "nightly", "removed": true}));
    s.run(&["schedule", "remove", "nightly"])
        .assert()
        .success()
        .stdout(contains("No schedule nightly; nothing was removed."));
}

#[test]
fn timer_next_says_when_a_sweeper_should_wake() {
    let s = scratch();
    // A write creates the database; reads never do.
    s.run(&["timer", "disarm-run", "r0"]).assert().success();
    assert_eq!(
        s.json(&["timer", "next"]),
        serde_json::json!({"next_due": null})
    );
    s.run(&["timer", "next"])
        .assert()
        .success()
        .stdout(contains("No timers are armed."));
    s.arm(&format!(r#"{{"run":"r1","effect":"a","fire_at":{NINE}}}"#));
    assert_eq!(s.json(&["timer", "next"])["next_due"], NINE);
    s.run(&["timer", "next"])
        .assert()
        .success()
        .stdout(contains("Next timer due at 2026-05-04T09:00:00Z"));
    s.run(&["timer", "next", "extra"]).assert().code(2);
}

// ---- runs -------------------------------------------------------------------------

#[test]
fn run_seal_retires_timers_and_withdraws_awaited_tasks() {
    let s = scratch();
    s.open(APPROVAL);
    s.arm(&format!(
        r#"{{"run":"inv-1","effect":"remind","fire_at":{NINE}}}"#
    ));
    let sealed = s.json(&["run", "seal", "inv-1", "--awaited", "pay-1", "ghost"]);
    assert_eq!(
        sealed,
        serde_json::json!({"run": "inv-1", "timers_disarmed": 1, "tasks_withdrawn": 1})
    );
    s.run(&["run", "seal", "inv-1", "--awaited", "pay-1"])
        .assert()
        .success()
        .stdout(contains(
            "Sealed run inv-1: 0 timers retired, 0 tasks withdrawn.",
        ));
    assert_eq!(s.json(&["task", "get", "pay-1"])["state"], "withdrawn");
    assert_eq!(
        s.json(&["run", "sealed", "inv-1"]),
        serde_json::json!({"run": "inv-1", "sealed": true})
    );
    s.run(&["run", "sealed", "inv-2"])
        .assert()
        .success()
        .stdout(contains("Run inv-2 is not sealed."));
    s.run(&["run", "seal", ""])
        .assert()
        .code(2)
        .stderr(contains("run is empty"));
    s.run(&["run", "sealed", ""]).assert().code(2);
}

// ---- stats / check --------------------------------------------------------------

#[test]
fn stats_counts_pending_tasks_and_armed_timers_per_tenant() {
    let s = scratch();
    s.open(APPROVAL);
    s.arm(&format!(
        r#"{{"run":"inv-1","effect":"remind","fire_at":{NINE}}}"#
    ));
    assert_eq!(
        s.json(&["stats"]),
        serde_json::json!({
            "tenant": "default",
            "open_count": 1,
            "leased_count": 0,
            "next_lease_end": null,
            // The approval's due time, still owed its expiry.
            "next_wake": NINE + 1_800_000,
            "pending_count": 1,
            "next_due": NINE
        })
    );
    let other = s.json(&["stats", "--tenant", "globex"]);
    assert_eq!(
        (
            other["open_count"].as_u64(),
            other["pending_count"].as_u64()
        ),
        (Some(0), Some(0))
    );
    s.run(&["stats"]).assert().success().stdout(
        contains("pending tasks   1")
            .and(contains("leased claims   0"))
            .and(contains("next lease end  none"))
            .and(contains("armed timers    1")),
    );
    s.run(&["--tenant", "", "stats"])
        .assert()
        .code(2)
        .stderr(contains("invalid tenant name"));
}

#[test]
fn check_exits_one_when_a_counter_disagrees_with_the_rows() {
    let s = scratch();
    s.open(APPROVAL);
    s.run(&["check"])
        .assert()
        .success()
        .stdout(contains("Consistent"));
    assert_eq!(s.json(&["check"]), serde_json::json!([]));
    // The finding names the counter, which pay-1 alone counts in: a redb
    // keyspace is laid out with one shard per counter.
    skew_open_count(&s.db, "default", 0, 99);
    s.run(&["check"]).assert().code(1).stdout(
        contains("counter open-tasks sum to 99; there are 1 pending")
            .and(contains("1 discrepancy found.")),
    );
    let out = s.run(&["check", "--json"]).assert().code(1);
    let found = parse(&out.get_output().stdout);
    assert_eq!(found.as_array().map(Vec::len), Some(1));
    assert_eq!(found[0]["subject"], "open-tasks");
    s.run(&["check", "--tenant", "a\u{1}b"]).assert().code(2);
}

/// Writes a wrong value into one shard of the tenant's open-task counter, as
/// damage would.
fn skew_open_count(db: &Path, tenant: &str, shard: u8, value: u64) {
    use leasehold_guest::schema;
    let table = redb::TableDefinition::<&[u8], &[u8]>::new(leasehold_host::KV_TABLE_NAME);
    let mut key = leasehold_host::tenant_prefix(tenant).expect("tenant prefix");
    key.extend_from_slice(schema::counter_shard(schema::OPEN_TASKS, shard).as_bytes());
    let db = redb::Database::open(db).expect("open the database");
    let w = db.begin_write().expect("write");
    {
        let mut t = w.open_table(table).expect("table");
        t.insert(key.as_slice(), value.to_be_bytes().as_slice())
            .expect("insert");
    }
    w.commit().expect("commit");
}

// ---- global behaviour ---------------------------------------------------------------

#[test]
fn a_file_that_is_not_a_database_is_refused_and_left_unchanged() {
    let s = scratch();
    let text = b"this is not a redb file, just text";
    std::fs::write(&s.db, text).expect("write");
    s.run(&["stats"])
        .assert()
        .code(3)
        .stderr(contains("is not a database").and(no_panic()));
    s.run(&["task", "escalate", "t1"])
        .assert()
        .code(3)
        .stderr(contains("is not a database").and(no_panic()));
    let e = s.json_error(&["stats"], 3);
    assert_eq!(e["error"], "not_a_database");
    assert_eq!(std::fs::read(&s.db).expect("read"), text);
}

#[test]
fn an_empty_file_is_refused_not_turned_into_a_database() {
    let s = scratch();
    std::fs::write(&s.db, b"").expect("write");
    s.run(&["stats"])
        .assert()
        .code(3)
        .stderr(contains("is an empty file (0 bytes), not a database").and(no_panic()));
    // Not by a writing command either: only a missing path is created.
    s.run(&["task", "open"])
        .write_stdin(APPROVAL)
        .assert()
        .code(3)
        .stderr(contains("empty file"));
    let e = s.json_error(&["timer", "next"], 3);
    assert_eq!(e["error"], "empty_file");
    assert_eq!(e["detail"].as_str(), s.db.to_str());
    assert_eq!(std::fs::metadata(&s.db).expect("metadata").len(), 0);
}

#[test]
fn a_reading_command_on_a_missing_database_says_so_and_creates_nothing() {
    let s = scratch();
    for args in [
        &["stats"][..],
        &["check"],
        &["task", "get", "t1"],
        &["queue", "--role", "r"],
        &["overdue"],
        &["case", "acme"],
        &["timer", "next"],
        &["run", "sealed", "inv-1"],
    ] {
        s.run(args)
            .assert()
            .code(2)
            .stderr(contains("no database at").and(no_panic()));
    }
    assert!(!s.db.exists(), "a read created the database");
    let e = s.json_error(&["stats"], 2);
    assert_eq!(e["error"], "no_database");
    // A command that writes creates it.
    s.open(APPROVAL);
    assert!(s.db.exists());
    s.run(&["stats"]).assert().success();
}

/// A wrong path is said before the component is compiled, which would
/// take a second or more: nothing reaches a fresh compile cache. A command
/// with work to do keeps its compilation there, and `--no-cache` keeps
/// nothing.
#[test]
fn a_missing_database_is_reported_before_compiling_anything() {
    let s = scratch();
    let cache = s.dir.path().join("cache");
    let cached = |cmd: &mut Command| {
        cmd.env("LEASEHOLD_CACHE_DIR", &cache);
    };
    let mut stats = s.run(&["stats"]);
    cached(&mut stats);
    stats
        .assert()
        .code(2)
        .stderr(contains("no database at").and(no_panic()));
    assert!(!cache.exists(), "the component was compiled first");

    let mut open = s.run(&["task", "open", "--no-cache"]);
    cached(&mut open);
    open.write_stdin(APPROVAL).assert().success();
    assert!(!cache.exists(), "--no-cache kept a compilation");

    let mut stats = s.run(&["stats"]);
    cached(&mut stats);
    stats
        .assert()
        .success()
        .stdout(contains("pending tasks   1"));
    let kept: Vec<_> = std::fs::read_dir(&cache)
        .expect("the cache")
        .map(|e| e.expect("an entry").path())
        .collect();
    assert_eq!(kept.len(), 1, "{kept:?}");
    s.run(&["stats", "--cache-dir"])
        .arg(&cache)
        .assert()
        .success()
        .stdout(contains("pending tasks   1"));
}

#[test]
fn the_database_comes_from_leasehold_db_when_db_is_not_given() {
    let s = scratch();
    let mut c = cargo_bin_cmd!("leasehold");
    c.current_dir(s.dir.path())
        .env("LEASEHOLD_DB", &s.db)
        .args(["task", "open"])
        .write_stdin(APPROVAL)
        .assert()
        .success();
    assert!(s.db.exists());
    assert!(!s.dir.path().join("leasehold.redb").exists());
    assert_eq!(s.json(&["task", "get", "pay-1"])["id"], "pay-1");
}

#[test]
fn tenants_do_not_see_each_others_tasks() {
    let s = scratch();
    s.open(APPROVAL);
    s.run(&["--tenant", "globex", "task", "get", "pay-1"])
        .assert()
        .code(1);
}

#[test]
fn help_lists_the_exit_codes_and_usage_errors_exit_two() {
    let s = scratch();
    s.run(&["--help"])
        .assert()
        .success()
        .stdout(contains("Exit codes:").and(contains("storage or sandbox failure")))
        .stdout(contains("4  busy").and(contains("[default: 5s]")));
    s.run(&["check", "--help"])
        .assert()
        .success()
        .stdout(contains("exits 1 when it finds any discrepancy"));
    s.run(&["frobnicate"]).assert().code(2).stderr(no_panic());
    s.run(&[]).assert().code(2);
}

// ---- reading commands do not write ---------------------------------------------------

/// Every command that only reads, over the data [`reading_fixture`] makes.
const READING: &[&[&str]] = &[
    &["task", "get", "pay-1"],
    &["queue", "--role", "approver"],
    &["case", "acme"],
    &["overdue", "--now", "2026-05-04T10:00:00Z"],
    &["stats"],
    &["check"],
    &["timer", "next"],
    &["run", "sealed", "inv-1"],
];

/// A database with a task and a timer in it, so every reading command has
/// something to read.
fn reading_fixture() -> Scratch {
    let s = scratch();
    s.open(APPROVAL);
    s.arm(&format!(
        r#"{{"run":"inv-1","effect":"remind","fire_at":{NINE}}}"#
    ));
    s
}

#[test]
fn reading_commands_leave_the_files_bytes_unchanged() {
    let s = reading_fixture();
    let before = std::fs::read(&s.db).expect("read");
    for args in READING {
        s.run(args).assert().success();
        s.run(args).arg("--json").assert().success();
        let after = std::fs::read(&s.db).expect("read");
        assert!(after == before, "{args:?} changed the file's bytes");
    }
}

/// A process holding the file read-only keeps every writer out (`--wait 0s`
/// makes the attempt once), so a command that succeeds beside it took no
/// write lock: unlike file permissions, this holds when the tests run as root.
#[test]
fn reading_commands_never_open_the_file_for_writing() {
    let s = reading_fixture();
    let reader = redb::ReadOnlyDatabase::open(&s.db).expect("open read-only");
    for args in READING {
        s.run(&["--wait", "0s"]).args(*args).assert().success();
    }
    let e = s.json_error(&["--wait", "0s", "task", "escalate", "pay-1"], 4);
    assert_eq!(e["error"], "busy", "the reader does keep writers out");
    drop(reader);
}

/// A file with mode 0444. Root may write any file, so when the tests run as
/// root the commands run as `nobody` (through `setpriv`), for whom the file
/// is as read-only as for any user; a writing command under the same
/// identity shows that the permission really bites.
#[cfg(unix)]
#[test]
fn reading_commands_work_on_a_file_the_user_may_only_read() {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let s = reading_fixture();
    let mode = |path: &Path, mode| {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod")
    };
    mode(&s.db, 0o444);
    mode(s.dir.path(), 0o755);
    // The test made the file, so it is owned by the test's user.
    let root = std::fs::metadata(&s.db).expect("metadata").uid() == 0;
    let setpriv = Path::new("/usr/bin/setpriv");
    if root && !setpriv.exists() {
        eprintln!("running as root without setpriv: the permission part of this test cannot bite");
    }
    let as_reader = |args: &[&str]| {
        let mut c = if root && setpriv.exists() {
            let mut c = std::process::Command::new(setpriv);
            c.args(["--reuid=65534", "--regid=65534", "--clear-groups"])
                .arg(env!("CARGO_BIN_EXE_leasehold"));
            c
        } else {
            std::process::Command::new(env!("CARGO_BIN_EXE_leasehold"))
        };
        c.current_dir(s.dir.path())
            .env_remove("LEASEHOLD_DB")
            .arg("--db")
            .arg(&s.db)
            .args(args);
        Command::from_std(c)
    };
    for args in READING {
        as_reader(args).assert().success();
    }
    if !root || setpriv.exists() {
        as_reader(&["task", "escalate", "pay-1"])
            .assert()
            .code(3)
            .stderr(contains("Permission denied"));
    }
}

// ---- two operators at once -------------------------------------------------------------

/// The binary on the scratch database, as a plain process that can run
/// beside others.
fn spawn(s: &Scratch, args: &[&str]) -> std::process::Child {
    std::process::Command::new(env!("CARGO_BIN_EXE_leasehold"))
        .current_dir(s.dir.path())
        .env_remove("LEASEHOLD_DB")
        .arg("--db")
        .arg(&s.db)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn leasehold")
}

#[test]
fn eight_claims_at_once_give_one_holder_and_seven_already_claimed() {
    let s = scratch();
    s.open(APPROVAL);
    let actors: Vec<String> = (1..=8).map(|i| format!("approver-{i}")).collect();
    let children: Vec<_> = actors
        .iter()
        .map(|a| {
            spawn(
                &s,
                &[
                    "--json", "task", "claim", "pay-1", "--actor", a, "--role", "approver",
                ],
            )
        })
        .collect();
    let outputs: Vec<Output> = children
        .into_iter()
        .map(|c| c.wait_with_output().expect("wait"))
        .collect();
    let said: Vec<String> = outputs
        .iter()
        .map(|o| {
            format!(
                "{:?}: {}",
                o.status.code(),
                String::from_utf8_lossy(&o.stderr)
            )
        })
        .collect();
    let (won, lost): (Vec<&Output>, Vec<&Output>) =
        outputs.iter().partition(|o| o.status.success());
    assert_eq!(won.len(), 1, "one claim wins: {said:#?}");
    let holder = parse(&won[0].stdout)["assignee"].clone();
    for o in lost {
        assert_eq!(o.status.code(), Some(1), "{said:#?}");
        let e = parse(&o.stderr);
        assert_eq!(e["error"], "already_claimed", "{said:#?}");
        assert_eq!(e["detail"], holder);
    }
    assert_eq!(s.json(&["task", "get", "pay-1"])["assignee"], holder);
}

#[test]
fn a_database_held_past_wait_exits_busy_with_its_own_code() {
    let s = scratch();
    s.open(APPROVAL);
    let held = redb::Database::open(&s.db).expect("hold the database");
    // Longer than the process takes to start, so only a wait accounts for it.
    let wait = Duration::from_millis(1500);
    let started = Instant::now();
    let e = s.json_error(
        &[
            "--wait", "1500ms", "task", "claim", "pay-1", "--actor", "bob", "--role", "approver",
        ],
        4,
    );
    assert!(started.elapsed() >= wait, "it gave up before --wait");
    assert_eq!(e["error"], "busy");
    assert_eq!(e["detail"].as_str(), s.db.to_str());
    let message = e["message"].as_str().unwrap_or_default();
    assert!(message.contains("held it for all of 1.5s"), "{message}");
    s.run(&["--wait", "300ms", "stats"])
        .assert()
        .code(4)
        .stderr(contains("is busy").and(contains("--wait")));
    drop(held);
    s.run(&["--wait", "0s", "stats"]).assert().success();
}

#[test]
fn a_second_operator_waits_for_the_database_by_default() {
    let s = scratch();
    s.open(APPROVAL);
    let held = redb::Database::open(&s.db).expect("hold the database");
    let hold = Duration::from_millis(1500);
    let started = Instant::now();
    let release = std::thread::spawn(move || {
        std::thread::sleep(hold);
        drop(held);
    });
    let claimed = s.json(&[
        "task", "claim", "pay-1", "--actor", "bob", "--role", "approver",
    ]);
    assert_eq!(claimed["assignee"], "bob");
    assert!(started.elapsed() >= hold, "it ran while the file was held");
    release.join().expect("release");
}

// ---- --json means JSON -------------------------------------------------------------------

/// Runs `args` with `--json` first or last, and answers the one JSON object
/// on stderr, checking it is all there is and that its exit is the exit.
fn one_json_error(s: &Scratch, args: &[&str], json_first: bool) -> Value {
    let mut c = s.cmd();
    if json_first {
        c.arg("--json");
    }
    c.args(args);
    if !json_first {
        c.arg("--json");
    }
    let out = c.output().expect("run");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.stdout.is_empty(), "{args:?}: stdout {:?}", out.stdout);
    assert_eq!(
        stderr.lines().count(),
        1,
        "{args:?}: not one line on stderr: {stderr}"
    );
    let e = parse(&out.stderr);
    assert_eq!(
        e["exit"].as_i64().map(|c| c as i32),
        out.status.code(),
        "{args:?}: {stderr}"
    );
    assert!(
        e["message"].as_str().is_some_and(|m| !m.is_empty()),
        "{args:?}: {stderr}"
    );
    e
}

#[test]
fn every_argument_error_under_json_is_one_json_object_on_stderr() {
    let s = scratch();
    s.open(APPROVAL);
    let cases: &[&[&str]] = &[
        &[],
        &["frobnicate"],
        &["task"],
        &["task", "frobnicate"],
        &["task", "claim"],
        &["task", "claim", "pay-1"],
        &["task", "claim", "pay-1", "--actr", "bob"],
        &["task", "claim", "pay-1", "--actor"],
        &["task", "settle", "pay-1", "done"],
        &["task", "settle", "pay-1"],
        &["task", "withdraw-run", "inv-1"],
        &["task", "get", "pay-1", "extra"],
        &["queue", "--limit", "-1"],
        &["queue", "--limit=-1"],
        &["queue", "--limit", "ten"],
        &["queue", "--limit"],
        &["overdue", "--now", "tomorrow"],
        &["overdue", "--now", "2026-05-04 09:00"],
        &["case"],
        &["case", "acme", "--limit", "0"],
        &["timer"],
        &["timer", "sweep", "--lease", "30"],
        &["timer", "sweep", "--lease", "8d"],
        &["timer", "sweep", "--limit", "5000000000"],
        &["timer", "disarm", "inv-1"],
        &["run"],
        &["run", "seal"],
        &["stats", "extra"],
        &["check", "--frobnicate"],
        &["--tenant"],
        &["--wait", "soon", "stats"],
        &["--wait", "-1s", "stats"],
        &["--db"],
        &["help", "frobnicate"],
    ];
    for args in cases {
        for json_first in [true, false] {
            let e = one_json_error(&s, args, json_first);
            assert_eq!(e["exit"], 2, "{args:?}");
            assert_eq!(e["error"], "usage", "{args:?}");
        }
    }
    let e = one_json_error(&s, &["queue", "--limit", "-1"], false);
    assert_eq!(e["detail"], "--limit <N>");
    // Without --json, clap's own text, as before.
    s.run(&["queue", "--limit", "-1"])
        .assert()
        .code(2)
        .stderr(predicate::str::starts_with("error: ").and(contains("try '--help'")));
    // After `--` it is a value, not the flag.
    s.run(&["task", "frobnicate", "--", "--json"])
        .assert()
        .code(2)
        .stderr(predicate::str::starts_with("error: "));
}

#[test]
fn a_limit_out_of_range_is_refused_with_the_real_range() {
    let s = scratch();
    s.open(APPROVAL);
    for verb in [
        &["queue"][..],
        &["overdue"],
        &["case", "acme"],
        &["timer", "sweep"],
    ] {
        for bad in [
            &["--limit", "-1"][..],
            &["--limit=-1"],
            &["--limit", "0"],
            &["--limit", "1001"],
            &["--limit", "4294967296"],
        ] {
            let args = [verb, bad].concat();
            let e = s.json_error(&args, 2);
            let message = e["message"].as_str().unwrap_or_default();
            assert!(message.contains("outside 1..=1000"), "{args:?}: {message}");
            assert!(!message.contains("4294967295"), "{args:?}: {message}");
        }
    }
    s.run(&["queue", "--limit", "-1"])
        .assert()
        .code(2)
        .stderr(contains("limit is -1, outside 1..=1000"));
    // A time before 1970 is a range error too, with the engine's range.
    s.run(&["overdue", "--now", "-1"])
        .assert()
        .code(2)
        .stderr(contains("outside 0..=253402300799999"));
}

// ---- demo -----------------------------------------------------------------------------

#[test]
fn demo_walks_through_the_scenario_on_a_temporary_database() {
    let s = scratch();
    let mut c = cargo_bin_cmd!("leasehold");
    c.current_dir(s.dir.path())
        .env_remove("LEASEHOLD_DB")
        .arg("demo");
    let out = c.assert().success().stderr("");
    let text = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    for sentence in [
        "a fresh database in a temporary file",
        "erin  → pay-1002, pay-1001, kyc-77, note-5",
        "alice (approver) → refused: alice is excluded from this task",
        "carol (approver) → refused: the task is held by bob",
        "Exactly one winner",
        "settle expired   → false",
        "escalate kyc-77 → escalated, offered to compliance, compliance-lead",
        "already armed",
        "sweeper-3 at 10:00:10 → nothing",
        "each delivered exactly once",
        "seal invoice-1002 → 1 timer retired, 1 task withdrawn",
        "arm invoice-1002/escalate-to-cfo → run sealed",
        "pending tasks 2, armed timers 0, consistency check: clean",
    ] {
        assert!(text.contains(sentence), "missing {sentence:?} in:\n{text}");
    }
    let winners = text.matches("→ holds pay-1002").count();
    assert_eq!(winners, 1, "one claim race winner in:\n{text}");
    assert!(
        !s.dir.path().join("leasehold.redb").exists(),
        "the demo leaves no database behind"
    );
}

#[test]
fn demo_keeps_its_database_where_db_names_a_new_file_and_never_reuses_one() {
    let s = scratch();
    s.run(&["demo"]).assert().success();
    let page = s.json(&["case", "acme"]);
    assert_eq!(ids(&page["tasks"]), ["pay-1001", "pay-1002"]);
    s.run(&["demo"])
        .assert()
        .code(2)
        .stderr(contains("the demo needs a fresh database"));
    s.run(&["demo", "--json"])
        .assert()
        .code(2)
        .stderr(contains("no JSON form"));
}

// ---- the component as a file ----------------------------------------------------------

#[test]
fn component_writes_the_embedded_bytes_and_prints_their_sha256() {
    use sha2::{Digest, Sha256};
    let s = scratch();
    let out = s.dir.path().join("leasehold.wasm");
    let printed = s
        .cmd()
        .args(["component", "--out"])
        .arg(&out)
        .assert()
        .success();
    let written = std::fs::read(&out).expect("the component file exists");
    assert!(
        written == leasehold_host::GUEST_COMPONENT,
        "the file holds other bytes than the host embeds"
    );
    let hex: String = Sha256::digest(&written)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let stdout = String::from_utf8_lossy(&printed.get_output().stdout).into_owned();
    assert_eq!(stdout, format!("{hex}  {}\n", out.display()));
    assert!(!s.db.exists(), "writing the component opened a database");

    let json = s.json(&["component", "--out", out.to_str().expect("utf-8 path")]);
    assert_eq!(json["sha256"], hex);
    assert_eq!(json["bytes"], written.len());
}

#[test]
fn component_to_an_unwritable_path_is_an_input_error() {
    let s = scratch();
    let e = s.json_error(&["component", "--out", "/nonexistent-dir/x.wasm"], 2);
    assert!(
        e["message"]
            .as_str()
            .is_some_and(|m| m.contains("cannot write"))
    );
}

// ---- PostgreSQL ---------------------------------------------------------------

/// `--db` may be a PostgreSQL URL, and so may `LEASEHOLD_DB`: the same
/// commands, the same answers, on a database other processes share. A read
/// command runs READ ONLY there. Skipped, in one line, without a server.
#[test]
fn db_may_be_a_postgres_url() {
    let Some(url) = postgres() else { return };
    // A tenant of this test's own: the test database is shared by the run.
    let tenant = format!(
        "cli-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0)
    );
    let s = Scratch {
        dir: tempfile::tempdir().expect("temp dir"),
        db: PathBuf::from(&url),
    };
    let opened = s
        .run(&["--tenant", &tenant, "task", "open", "--json"])
        .write_stdin(APPROVAL)
        .assert()
        .success();
    let opened = parse(&opened.get_output().stdout);
    assert_eq!(
        s.json(&["--tenant", &tenant, "task", "get", "pay-1"]),
        opened
    );
    // The same database through the environment, and another tenant sees
    // nothing of this one's.
    let mut c = cargo_bin_cmd!("leasehold");
    c.current_dir(s.dir.path())
        .env("LEASEHOLD_DB", &url)
        .args([
            "--tenant",
            &format!("{tenant}-other"),
            "task",
            "get",
            "pay-1",
        ])
        .assert()
        .code(1)
        .stderr(contains("not found: pay-1"));
    s.run(&["--tenant", &tenant, "check"]).assert().success();
}

#[test]
fn task_history_lists_every_change_with_who_and_when() {
    let s = scratch();
    s.open(r#"{"id":"pay-1","run":"r","kind":"k","candidate_roles":["approver"]}"#);
    s.run(&[
        "task", "claim", "pay-1", "--actor", "alice", "--role", "approver",
    ])
    .assert()
    .success();
    s.run(&["task", "release", "pay-1", "--actor", "alice"])
        .assert()
        .success();
    s.run(&[
        "task", "claim", "pay-1", "--actor", "bob", "--role", "approver",
    ])
    .assert()
    .success();
    s.run(&["task", "settle", "pay-1", "completed", "--holder", "bob"])
        .assert()
        .success();
    let h = s.json(&["task", "history", "pay-1"]);
    let steps: Vec<(u64, &str, Option<&str>, &str)> = h
        .as_array()
        .expect("a list")
        .iter()
        .map(|e| {
            (
                e["seq"].as_u64().expect("seq"),
                e["verb"].as_str().expect("verb"),
                e["actor"].as_str(),
                e["after"].as_str().expect("after"),
            )
        })
        .collect();
    assert_eq!(
        steps,
        [
            (1, "open", None, "open"),
            (2, "claim", Some("alice"), "claimed"),
            (3, "release", Some("alice"), "open"),
            (4, "claim", Some("bob"), "claimed"),
            (5, "settle", Some("bob"), "completed"),
        ]
    );
    assert!(
        h[0]["at"].as_i64().expect("at") > 1_700_000_000_000,
        "the clock's time"
    );
    let page = s.json(&["task", "history", "pay-1", "--after", "3", "--limit", "1"]);
    assert_eq!(page[0]["seq"], 4);
    s.run(&["task", "history", "pay-1"])
        .assert()
        .success()
        .stdout(
            contains("release")
                .and(contains("(service)"))
                .and(contains("alice")),
        );
    s.run(&["task", "history", "nope"]).assert().code(1);
}

/// Edits the `default` tenant behind the CLI's back: sets (or, with
/// `None`, deletes) each key.
fn raw_edit(db: &Path, edits: &[(Vec<u8>, Option<&[u8]>)]) {
    let table = redb::TableDefinition::<&[u8], &[u8]>::new(leasehold_host::KV_TABLE_NAME);
    let db = redb::Database::open(db).expect("open the database");
    let w = db.begin_write().expect("write");
    {
        let mut t = w.open_table(table).expect("table");
        for (key, value) in edits {
            let mut full = leasehold_host::tenant_prefix("default").expect("tenant prefix");
            full.extend_from_slice(key);
            match value {
                Some(v) => drop(t.insert(full.as_slice(), *v).expect("insert")),
                None => drop(t.remove(full.as_slice()).expect("remove")),
            }
        }
    }
    w.commit().expect("commit");
}

/// A task an earlier build (layout 5) wrote answers a history whose first
/// entry, seq 0, says it existed before history was kept; a database a
/// newer build moved to its layout is refused as `newer_layout` (exit 3),
/// naming both layouts, and left as it is.
#[test]
fn task_history_says_when_a_task_predates_it_and_a_newer_layout_is_refused_by_name() {
    use leasehold_guest::schema;
    let s = scratch();
    s.open(r#"{"id":"old","run":"r","kind":"k","candidate_roles":["approver"]}"#);
    let created = s.json(&["task", "get", "old"])["created_at"].clone();
    // What an earlier build leaves: the row, no record, its own mark.
    let sh = schema::Shards::SOLE;
    let mut edits: Vec<(Vec<u8>, Option<&[u8]>)> = Vec::new();
    for (k, _) in default_rows(&s.db) {
        let record = [
            schema::task_log(sh, "old"),
            schema::history(sh, "old"),
            schema::feed(),
        ];
        if record.iter().any(|p| k.starts_with(p.as_bytes())) {
            edits.push((k, None));
        }
    }
    assert!(!edits.is_empty());
    edits.push((schema::layout().into_bytes(), Some(b"5/1")));
    raw_edit(&s.db, &edits);
    let h = s.json(&["task", "history", "old"]);
    assert_eq!(h.as_array().map(Vec::len), Some(1), "{h}");
    assert_eq!(
        (&h[0]["seq"], &h[0]["verb"], &h[0]["before"], &h[0]["after"]),
        (
            &json!(0),
            &json!("before-history"),
            &json!(null),
            &json!("open")
        )
    );
    assert_eq!(h[0]["at"], created, "the task's creation");
    s.run(&["task", "history", "old"])
        .assert()
        .success()
        .stdout(contains("before-history"));
    s.run(&[
        "task", "claim", "old", "--actor", "alice", "--role", "approver",
    ])
    .assert()
    .success();
    let h = s.json(&["task", "history", "old"]);
    let steps: Vec<(u64, &str)> = h
        .as_array()
        .expect("a list")
        .iter()
        .map(|e| {
            (
                e["seq"].as_u64().expect("seq"),
                e["verb"].as_str().expect("verb"),
            )
        })
        .collect();
    assert_eq!(steps, [(0, "before-history"), (1, "claim")]);
    s.run(&["check"]).assert().success();

    let newer = format!("{}/1", schema::LAYOUT_VERSION + 1);
    raw_edit(
        &s.db,
        &[(schema::layout().into_bytes(), Some(newer.as_bytes()))],
    );
    let before = default_rows(&s.db);
    for args in [
        &["task", "release", "old", "--actor", "alice"][..],
        &["task", "history", "old"],
        &["check"],
    ] {
        let e = s.json_error(args, 3);
        assert_eq!(e["error"], "newer_layout", "{args:?}: {e}");
        let detail = e["detail"].as_str().expect("detail");
        assert!(
            detail.contains(&format!("layout {}", schema::LAYOUT_VERSION + 1))
                && detail.contains(&format!("writes layout {}", schema::LAYOUT_VERSION)),
            "{detail}"
        );
    }
    assert!(
        default_rows(&s.db) == before,
        "a refusal changed the tenant"
    );
}

/// Every key (without its prefix) and value of the `default` tenant.
fn default_rows(db: &Path) -> Vec<(Vec<u8>, Vec<u8>)> {
    use redb::{ReadableDatabase, ReadableTable};
    let table = redb::TableDefinition::<&[u8], &[u8]>::new(leasehold_host::KV_TABLE_NAME);
    let prefix = leasehold_host::tenant_prefix("default").expect("tenant prefix");
    let db = redb::Database::open(db).expect("open the database");
    let r = db.begin_read().expect("read");
    let t = r.open_table(table).expect("table");
    t.iter()
        .expect("iter")
        .map(|e| {
            let (k, v) = e.expect("entry");
            (k.value().to_vec(), v.value().to_vec())
        })
        .filter_map(|(k, v)| Some((k.strip_prefix(prefix.as_slice())?.to_vec(), v)))
        .collect()
}

#[test]
fn events_reads_on_from_a_position_and_says_when_it_was_trimmed() {
    let s = scratch();
    for i in 0..3 {
        s.open(&format!(r#"{{"id":"t{i}","run":"r","kind":"k"}}"#));
    }
    let read = s.json(&["events", "--limit", "2"]);
    let page = &read["page"];
    assert_eq!(page["entries"].as_array().expect("entries").len(), 2);
    let next = page["next"].as_str().expect("next").to_owned();
    let rest = s.json(&["events", "--after", &next]);
    assert_eq!(rest["page"]["entries"][0]["change"]["task"]["id"], "t2");
    assert_eq!(rest["page"]["next"], rest["page"]["head"]);
    s.run(&["events"])
        .assert()
        .success()
        .stdout(contains("task t0 #1: open").and(contains("Caught up")));
    let first = page["entries"][0]["position"]
        .as_str()
        .expect("position")
        .to_owned();
    let trimmed = s.json(&["trim", "--keep", "1", "--limit", "1"]);
    assert_eq!(trimmed["feed_removed"], 2);
    // A reader that had read two entries lost nothing; one that had read
    // one lost the second.
    let on = s.json(&["events", "--after", &next]);
    assert_eq!(on["page"]["entries"][0]["change"]["task"]["id"], "t2");
    let out = s
        .run(&["events", "--after", &first, "--json"])
        .assert()
        .code(1);
    let gone = parse(&out.get_output().stdout);
    assert_eq!(gone["gone"], rest["page"]["head"]);
    s.run(&["events", "--after", &first])
        .assert()
        .code(1)
        .stdout(contains("no longer holds"));
    s.run(&["trim"]).assert().code(2);
    s.run(&["events", "--after", "bogus"]).assert().code(2);
}

#[test]
fn events_follow_prints_changes_as_another_process_commits_them() {
    let s = scratch();
    s.open(r#"{"id":"first","run":"r","kind":"k"}"#);
    let mut follower = std::process::Command::new(env!("CARGO_BIN_EXE_leasehold"))
        .current_dir(s.dir.path())
        .env_remove("LEASEHOLD_DB")
        .args(["--db"])
        .arg(&s.db)
        .args(["--json", "--wait", "30s", "events", "--follow"])
        .stdout(Stdio::piped())
        .spawn()
        .expect("the follower starts");
    let out = follower.stdout.take().expect("stdout");
    let (tx, lines) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        use std::io::BufRead;
        for line in std::io::BufReader::new(out).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let next = |what: &str| -> Value {
        let line = lines
            .recv_timeout(Duration::from_secs(120))
            .unwrap_or_else(|_| panic!("the follower printed no {what}"));
        parse(line.as_bytes())
    };
    assert_eq!(next("first change")["change"]["task"]["id"], "first");
    // Written by other processes while the follower runs, each waiting for
    // the file while the follower reads it.
    let mut writer = s.run(&["--wait", "30s", "task", "open"]);
    writer
        .write_stdin(r#"{"id":"second","run":"r","kind":"k"}"#)
        .assert()
        .success();
    s.run(&["--wait", "30s", "task", "claim", "second", "--actor", "ann"])
        .assert()
        .success();
    let got: Vec<(String, u64)> = (0..2)
        .map(|_| {
            let e = next("later change");
            (
                e["change"]["task"]["id"].as_str().expect("id").to_owned(),
                e["change"]["task"]["entry"]["seq"].as_u64().expect("seq"),
            )
        })
        .collect();
    assert_eq!(got, [("second".into(), 1), ("second".into(), 2)]);
    follower.kill().expect("stop the follower");
    let _ = follower.wait();
}

#[test]
fn task_expire_acts_on_overdue_tasks_by_their_policy_once() {
    let s = scratch();
    s.open(r#"{"id":"esc","run":"r","kind":"k","due_at":1000,"on_expiry":"escalate","candidate_roles":["a"],"escalate_to":["boss"]}"#);
    s.open(r#"{"id":"deny","run":"r","kind":"k","due_at":2000,"on_expiry":"deny"}"#);
    s.open(r#"{"id":"later","run":"r","kind":"k","due_at":9000,"on_expiry":"deny"}"#);
    let acted = s.json(&["task", "expire", "--now", "5000"]);
    let states: Vec<(&str, &str)> = acted
        .as_array()
        .expect("a list")
        .iter()
        .map(|t| {
            (
                t["id"].as_str().expect("id"),
                t["state"].as_str().expect("state"),
            )
        })
        .collect();
    assert_eq!(states, [("esc", "escalated"), ("deny", "expired")]);
    s.run(&["task", "expire", "--now", "5000"])
        .assert()
        .success()
        .stdout(contains("No task was overdue"));
    s.run(&["task", "expire", "--now", "9000"])
        .assert()
        .success()
        .stdout(contains("later").and(contains("Acted on 1 overdue task")));
    s.run(&["task", "expire", "--limit", "0"]).assert().code(2);
    s.run(&["check"]).assert().success();
}

#[test]
fn task_claim_batch_and_settle_and_claim_work_a_queue_in_batches() {
    let s = scratch();
    for i in 0..4 {
        s.open(&format!(
            r#"{{"id": "job-{i}", "run": "r", "kind": "step", "candidate_roles": ["bot"], "created_at": {i}}}"#
        ));
    }
    // The verb, as bot-1 with role bot, then its own arguments.
    let as_bot = |verb: &'static str, rest: &[&'static str]| -> Vec<&'static str> {
        [
            &["task", verb, "--actor", "bot-1", "--role", "bot"][..],
            rest,
        ]
        .concat()
    };
    let first = s.json(&as_bot("claim-batch", &["--count", "2", "--lease", "1m"]));
    let ids: Vec<&str> = first
        .as_array()
        .expect("a list")
        .iter()
        .map(|t| t["id"].as_str().expect("an id"))
        .collect();
    assert_eq!(ids, ["job-0", "job-1"]);
    let next = s.json(&as_bot(
        "settle-and-claim",
        &["--done", "job-0", "job-1", "job-9", "--count", "5"],
    ));
    let answers: Vec<&str> = next["settled"]
        .as_array()
        .expect("answers")
        .iter()
        .map(|a| a["answer"].as_str().expect("an answer"))
        .collect();
    assert_eq!(answers, ["settled", "settled", "not_found"]);
    assert_eq!(next["claimed"].as_array().map(Vec::len), Some(2));
    assert_eq!(s.json(&["task", "get", "job-0"])["state"], "completed");
    s.run(&as_bot(
        "settle-and-claim",
        &["--done", "job-0", "--count", "0"],
    ))
    .assert()
    .success()
    .stdout(contains("job-0: already settled (completed); unchanged"))
    .stdout(contains("bot-1 claimed nothing"));
    s.run(&as_bot("claim-batch", &["--count", "101"]))
        .assert()
        .code(2)
        .stderr(contains("count"));
}
