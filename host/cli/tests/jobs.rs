//! Bulk jobs through the `leasehold` binary, on a redb file of its own: a
//! job started runs to its end in the process, its `--json` lines parse
//! and end at `done`, each task changed once with its history naming the
//! job; get, list, step, cancel and run; a job over no task; bad input
//! exits 2 naming the flag; a refused verb exits 1. And a `jobs start-job`
//! killed with SIGKILL half-way is finished by `jobs run`, every task of
//! its set changed exactly once. Tasks are made through the library (many
//! at once); everything else drives the binary.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::Stdio;

use leasehold_host::{Durability, Engine, Priority, Task, TaskState};
use serde_json::{Value, json};

#[path = "support/scratch.rs"]
#[allow(dead_code)]
mod scratch;
use scratch::{Scratch, parse, scratch};

/// Task `i` of a set: kind `approve` (even) or `review` (odd), open to
/// anyone, created at `1000 + i`; mallory may not hold the multiples of 5.
fn task(i: usize) -> Task {
    Task {
        id: format!("t{i:05}"),
        run: "r".into(),
        case: None,
        kind: if i.is_multiple_of(2) {
            "approve"
        } else {
            "review"
        }
        .into(),
        justification: "{}".into(),
        candidate_roles: Vec::new(),
        assignee: None,
        lease_until: None,
        priority: Priority::Normal,
        state: TaskState::Open,
        on_expiry: leasehold_host::OnExpiry::Deny,
        escalate_to: Vec::new(),
        excluded_actors: if i.is_multiple_of(5) {
            vec!["mallory".into()]
        } else {
            Vec::new()
        },
        created_at: 1000 + i as i64,
        due_at: None,
        revision: 0,
        decision: None,
        outcomes: Vec::new(),
        remind_before: Vec::new(),
        escalation: Vec::new(),
        steps_done: 0,
    }
}

fn engine(db: &Path) -> Engine {
    Engine::builder()
        .durability(Durability::None)
        .open(db)
        .expect("open the database")
}

/// `n` tasks in the default tenant, made through the library; the engine
/// is closed before the binary runs.
fn fill(s: &Scratch, n: usize) {
    let e = engine(&s.db);
    let t = e.tenant("default").expect("tenant");
    for i in 0..n {
        t.open(&task(i)).expect("open");
    }
}

/// How many history entries of each of `ids` name `job`.
fn changes_by(db: &Path, ids: impl Iterator<Item = String>, job: &str) -> Vec<(String, usize)> {
    let e = engine(db);
    let t = e.tenant("default").expect("tenant");
    ids.map(|id| {
        let n = t
            .history(&id, None, 100)
            .expect("history")
            .iter()
            .filter(|h| h.job.as_deref() == Some(job))
            .count();
        (id, n)
    })
    .collect()
}

/// Every line of `--json` output, parsed.
fn lines(stdout: &[u8]) -> Vec<Value> {
    std::str::from_utf8(stdout)
        .expect("UTF-8")
        .lines()
        .map(|l| parse(l.as_bytes()))
        .collect()
}

#[test]
fn a_started_job_runs_to_its_end_its_json_lines_end_at_done_and_history_names_it() {
    let s = scratch();
    fill(&s, 40);
    let out = s
        .run(&[
            "jobs",
            "start-job",
            "--id",
            "urgent",
            "--kind",
            "approve",
            "--priority",
            "urgent",
            "--by",
            "ops",
            "--json",
        ])
        .assert()
        .success();
    let all = lines(&out.get_output().stdout);
    let (first, last) = (&all[0], &all[all.len() - 1]);
    assert_eq!(
        (&first["state"], &first["total"], &first["by"]),
        (&json!("counting"), &json!(0), &json!("ops"))
    );
    assert_eq!(first["action"], json!({"update": {"priority": "urgent"}}));
    assert_eq!(
        (
            &last["state"],
            &last["total"],
            &last["done"],
            &last["failed"]
        ),
        (&json!("done"), &json!(20), &json!(20), &json!(0))
    );
    // Progress only moves forward; only the last line is the end.
    let done: Vec<u64> = all
        .iter()
        .map(|l| l["done"].as_u64().expect("done"))
        .collect();
    assert!(done.windows(2).all(|w| w[0] <= w[1]), "{done:?}");
    assert!(all[..all.len() - 1].iter().all(|l| l["state"] != "done"));

    assert_eq!(s.get("t00002")["priority"], "urgent");
    assert_eq!(s.get("t00003")["priority"], "normal");
    let history = s.json(&["task", "history", "t00004"]);
    let named: Vec<&Value> = history["entries"]
        .as_array()
        .or(history.as_array())
        .expect("entries")
        .iter()
        .filter(|e| e["job"] == "urgent")
        .collect();
    assert_eq!(named.len(), 1, "{history}");
    let counts = changes_by(&s.db, (0..40).map(|i| format!("t{i:05}")), "urgent");
    assert!(
        counts
            .iter()
            .all(|(id, n)| *n == usize::from(id.ends_with(['0', '2', '4', '6', '8']))),
        "{counts:?}"
    );
    // Done: run answers it as it stands, and it is no longer runnable.
    assert_eq!(s.json(&["jobs", "run", "urgent"])["done"], 20);
    assert_eq!(s.json(&["jobs", "runnable-jobs"]), json!([]));
}

#[test]
fn jobs_are_stepped_listed_cancelled_and_run_and_a_job_over_no_task_is_done() {
    let s = scratch();
    fill(&s, 6);
    let started = s.json(&["jobs", "start", "--id", "esc", "--escalate", "--detach"]);
    assert_eq!(
        (&started["state"], &started["total"]),
        (&json!("counting"), &json!(0))
    );
    assert_eq!(s.json(&["jobs", "runnable"]), json!(["esc"]));
    let counted = s.json(&["jobs", "step-job", "esc"]);
    assert_eq!(
        (&counted["state"], &counted["total"]),
        (&json!("running"), &json!(6))
    );
    assert_eq!(s.json(&["jobs", "step", "esc"])["done"], 1);
    let cancelled = s.json(&["jobs", "cancel-job", "esc"]);
    assert_eq!(
        (&cancelled["state"], &cancelled["done"]),
        (&json!("cancelled"), &json!(1))
    );
    // Running a cancelled job changes nothing, and exits 1 for a script to notice.
    let out = s.run(&["jobs", "run", "esc", "--json"]).assert().code(1);
    let ran = lines(&out.get_output().stdout);
    assert_eq!(ran.last().expect("a line")["state"], "cancelled");
    assert_eq!(s.get("t00000")["state"], "escalated");
    assert_eq!(s.get("t00001")["state"], "open");
    let text = s.human(&["jobs", "get", "esc"]);
    assert!(
        text.contains("Job esc (cancelled): --escalate over every task"),
        "{text}"
    );
    assert!(text.contains("1 done of 6, 0 skipped, 0 failed"), "{text}");

    let out = s
        .run(&[
            "jobs",
            "start",
            "--id",
            "none",
            "--kind",
            "nothing",
            "--release",
            "--json",
        ])
        .assert()
        .success();
    let none = lines(&out.get_output().stdout);
    assert_eq!(
        (
            &none.last().expect("a line")["state"],
            &none.last().expect("a line")["total"]
        ),
        (&json!("done"), &json!(0))
    );
    let ids = |v: Value| -> Vec<String> {
        v.as_array()
            .expect("a list")
            .iter()
            .map(|j| j["id"].as_str().expect("an id").to_owned())
            .collect()
    };
    assert_eq!(ids(s.json(&["jobs", "list-jobs"])), ["esc", "none"]);
    assert_eq!(ids(s.json(&["jobs", "list", "--after", "esc"])), ["none"]);
    assert!(s.human(&["jobs", "list"]).contains("2 jobs"));
    assert_eq!(
        s.json_error(&["jobs", "get-job", "nope"], 1)["error"],
        "not_found"
    );
    assert_eq!(
        s.json_error(&["jobs", "run", "nope"], 1)["error"],
        "not_found"
    );
    assert_eq!(
        s.json_error(&["jobs", "cancel", "nope"], 1)["error"],
        "not_found"
    );
}

#[test]
fn a_job_whose_verb_refuses_a_task_exits_1_with_the_reason() {
    let s = scratch();
    fill(&s, 6);
    let out = s
        .run(&[
            "jobs",
            "start",
            "--id",
            "to-m",
            "--assign-to",
            "mallory",
            "--json",
        ])
        .assert()
        .code(1);
    let end = lines(&out.get_output().stdout).pop().expect("a line");
    assert_eq!(
        (&end["state"], &end["done"], &end["failed"]),
        (&json!("done"), &json!(4), &json!(2))
    );
    assert_eq!(
        end["last_failures"],
        json!([
            {"id": "t00000", "reason": "assign: mallory is excluded from this task"},
            {"id": "t00005", "reason": "assign: mallory is excluded from this task"},
        ])
    );
    assert_eq!(s.get("t00001")["assignee"], "mallory");
    assert_eq!(s.get("t00005")["assignee"], Value::Null);
}

#[test]
fn bad_input_exits_2_naming_the_flag() {
    let s = scratch();
    fill(&s, 2);
    s.json(&["jobs", "start", "--id", "taken", "--release", "--detach"]);
    let message = |args: &[&str]| -> String {
        let e = s.json_error(args, 2);
        e["message"].as_str().expect("a message").to_owned()
    };
    for (args, flag) in [
        (&["jobs", "start", "--id", "x"][..], "--release"),
        (
            &["jobs", "start", "--release", "--escalate"][..],
            "--escalate",
        ),
        (
            &["jobs", "start", "--withdraw", "--priority", "high"][..],
            "--priority",
        ),
        (
            &["jobs", "start", "--release", "--roles", "a"][..],
            "--assign-to",
        ),
        (&["jobs", "start", "--due", "9am", "--release"][..], "--due"),
        (&["jobs", "start", "--id", "", "--release"][..], "--id"),
        (&["jobs", "start", "--id", "taken", "--release"][..], "--id"),
        (&["jobs", "start", "--assign-to", ""][..], "--assign-to"),
        (
            &["jobs", "start", "--assign-to", "a", "--roles", ""][..],
            "--roles",
        ),
        (&["jobs", "start", "--release", "--by", ""][..], "--by"),
        (&["jobs", "start", "--release", "--kind", ""][..], "--kind"),
        (
            &["jobs", "start", "--release", "--state", "done"][..],
            "--state",
        ),
        (
            &[
                "jobs",
                "start",
                "--release",
                "--due-before",
                "1",
                "--due-after",
                "2",
            ][..],
            "--due-",
        ),
        (&["jobs", "list", "--limit", "0"][..], "--limit"),
        (&["jobs", "runnable", "--limit", "1001"][..], "--limit"),
    ] {
        let m = message(args);
        assert!(m.contains(flag), "{args:?}: {m}");
    }
    // Nothing was started by any of them.
    let list = s.json(&["jobs", "list"]);
    assert_eq!(list.as_array().map(Vec::len), Some(1), "{list}");
}

/// Starts `jobs start-job` over `n` tasks and kills it with SIGKILL once a
/// line shows it part-way; `None` when the job ended before a line showed
/// it part-way, or before the signal reached it (the set was too small to
/// catch).
fn kill_part_way(s: &Scratch) -> Option<Value> {
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_leasehold"))
        .current_dir(s.dir.path())
        .env_remove("LEASEHOLD_DB")
        .args(["--db"])
        .arg(&s.db)
        .args([
            "jobs",
            "start-job",
            "--id",
            "big",
            "--state",
            "open",
            "--priority",
            "high",
        ])
        .args(["--by", "ops", "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn leasehold");
    let stdout = child.stdout.take().expect("stdout");
    let mut seen = None;
    for line in BufReader::new(stdout).lines() {
        let job = parse(line.expect("a line").as_bytes());
        let done = job["done"].as_u64().expect("done");
        let total = job["total"].as_u64().expect("total");
        if job["state"] == "running" && done >= 1 && done < total {
            child.kill().expect("SIGKILL");
            seen = Some(job);
            break;
        }
    }
    let status = child.wait().expect("wait");
    match seen {
        Some(job) if !status.success() => Some(job),
        // It finished between the line and the signal: not caught part-way.
        Some(_) => None,
        None => {
            assert!(status.success(), "ended without a part-way line: {status}");
            None
        }
    }
}

#[test]
fn a_job_killed_part_way_is_finished_by_run_and_no_task_changes_twice() {
    // A bigger set each time the job ended before it could be caught.
    let mut n = 300;
    let (s, seen) = loop {
        let s = scratch();
        fill(&s, n);
        if let Some(seen) = kill_part_way(&s) {
            break (s, seen);
        }
        assert!(n < 20_000, "no part-way line even at {n} tasks");
        n *= 4;
    };
    println!("killed part-way over {n} tasks, after the line {seen}");
    // What the killed process left: running, part of its set changed.
    let left = s.json(&["jobs", "get-job", "big"]);
    assert_eq!(left["state"], "running", "{left}");
    let left_done = left["done"].as_u64().expect("done");
    assert!(
        left_done >= seen["done"].as_u64().expect("done"),
        "{left} after {seen}"
    );
    assert!(left_done < n as u64, "{left}");

    let out = s.run(&["jobs", "run", "big", "--json"]).assert().success();
    let end = lines(&out.get_output().stdout).pop().expect("a line");
    assert_eq!(
        (
            &end["state"],
            &end["total"],
            &end["done"],
            &end["skipped"],
            &end["failed"]
        ),
        (&json!("done"), &json!(n), &json!(n), &json!(0), &json!(0)),
        "{end}"
    );
    let counts = changes_by(&s.db, (0..n).map(|i| format!("t{i:05}")), "big");
    let wrong: Vec<_> = counts.iter().filter(|(_, c)| *c != 1).collect();
    assert!(
        wrong.is_empty(),
        "tasks not changed exactly once: {wrong:?}"
    );
    assert_eq!(s.get("t00000")["priority"], "high");
}
