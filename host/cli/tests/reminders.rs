//! A task's reminders and escalation chain through the `leasehold` binary,
//! on a database of its own: opened from a file, shown by `task get`,
//! replaced and cleared by `task update`'s flags, fired one step per call
//! by `task expire-overdue --now`, said by `task history`, and `stats`
//! naming the next wake. A bad timeline exits non-zero naming the field,
//! and leaves the task as it was.

use predicates::str::contains;
use serde_json::{Value, json};

const HOUR: i64 = 3_600_000;
/// 2030-01-01T00:00:00Z, the tasks' due time.
const DUE: i64 = 1_893_456_000_000;

#[path = "support/scratch.rs"]
#[allow(dead_code)]
mod scratch;
use scratch::scratch;

fn task() -> Value {
    json!({
        "id": "t1", "run": "r1", "kind": "review", "candidate_roles": ["clerk"],
        "created_at": DUE - 2 * 24 * HOUR, "due_at": DUE,
        "remind_before": [HOUR],
        "escalation": [
            {"after_due_ms": 0, "action": {"escalate": ["leads"]}},
            {"after_due_ms": 24 * HOUR, "action": "expire"},
        ],
    })
}

#[test]
fn a_timeline_opened_from_a_file_is_shown_fired_and_said_in_the_history() {
    let s = scratch();
    let t = s.open(&task().to_string());
    assert_eq!(t["remind_before"], json!([HOUR]));
    assert_eq!(t["escalation"][1]["action"], "expire");
    assert_eq!(t["steps_done"], 0);
    let shown = s.human(&["task", "get", "t1"]);
    assert!(
        shown.contains(
            "reminds 1h before due; at due escalates to leads; at due + 1d expires (0 of 3 steps fired)"
        ),
        "{shown}"
    );
    assert_eq!(s.json(&["stats", "next-wake"]), json!({"at": DUE - HOUR}));
    assert_eq!(s.json(&["stats"])["next_wake"], DUE - HOUR);
    assert!(s.human(&["stats"]).contains("next wake"));

    // One step per call, each at its instant.
    let now = |at: i64| at.to_string();
    let fired = s.json(&["task", "expire-overdue", "--now", &now(DUE - HOUR - 1)]);
    assert_eq!(fired, json!([]), "{fired}");
    let fired = s.json(&["task", "expire-overdue", "--now", &now(DUE)]);
    assert_eq!(fired[0]["steps_done"], 1, "{fired}");
    let fired = s.json(&["task", "expire-overdue", "--now", &now(DUE)]);
    assert_eq!(fired[0]["state"], "escalated", "{fired}");
    assert_eq!(fired[0]["candidate_roles"], json!(["clerk", "leads"]));
    let history = s.json(&["task", "history", "t1"]);
    let steps: Vec<&Value> = history
        .as_array()
        .expect("entries")
        .iter()
        .filter_map(|e| e.get("step").filter(|s| !s.is_null()))
        .collect();
    assert_eq!(
        steps,
        [
            &json!({"reminder": HOUR}),
            &json!({"escalation": {"after_due_ms": 0, "action": {"escalate": ["leads"]}}}),
        ]
    );
    let said = s.human(&["task", "history", "t1"]);
    assert!(said.contains("reminder: due in 1h"), "{said}");
    assert!(
        said.contains("chain step: at due escalates to leads"),
        "{said}"
    );
}

#[test]
fn task_update_replaces_and_clears_the_timeline_by_flags() {
    let s = scratch();
    s.open(&task().to_string());
    let t = s.json(&[
        "task",
        "update",
        "t1",
        "--remind-before",
        "1d,30m",
        "--remind-before",
        "2h",
        "--escalate-at",
        "0s:leads",
        "--escalate-at",
        "4h:directors,vps",
        "--expire-after",
        "1d",
    ]);
    assert_eq!(t["remind_before"], json!([24 * HOUR, 2 * HOUR, HOUR / 2]));
    assert_eq!(
        t["escalation"],
        json!([
            {"after_due_ms": 0, "action": {"escalate": ["leads"]}},
            {"after_due_ms": 4 * HOUR, "action": {"escalate": ["directors", "vps"]}},
            {"after_due_ms": 24 * HOUR, "action": "expire"},
        ])
    );
    // The expiry alone: a chain of one step; the reminders stay.
    let t = s.json(&["task", "update", "t1", "--expire-after", "2h"]);
    assert_eq!(
        t["escalation"],
        json!([{"after_due_ms": 2 * HOUR, "action": "expire"}])
    );
    assert_eq!(t["remind_before"].as_array().map(Vec::len), Some(3));
    let t = s.json(&["task", "update", "t1", "--no-reminders", "--no-escalation"]);
    assert_eq!(t["remind_before"], json!([]));
    assert_eq!(t["escalation"], json!([]));
    assert_eq!(s.json(&["stats", "next-wake"]), json!({"at": DUE}));
}

#[test]
fn a_bad_timeline_exits_naming_the_field_and_changes_nothing() {
    let s = scratch();
    s.open(&task().to_string());
    let before = s.json(&["task", "get", "t1"]);
    // More than the two days from creation to due.
    let e = s.json_error(&["task", "update", "t1", "--remind-before", "3d"], 2);
    assert_eq!(e["error"], "invalid");
    assert!(
        e["detail"].as_str().unwrap_or("").contains("remind-before"),
        "{e}"
    );
    // Not strictly increasing.
    let e = s.json_error(
        &[
            "task",
            "update",
            "t1",
            "--escalate-at",
            "4h:leads",
            "--escalate-at",
            "4h:directors",
        ],
        2,
    );
    assert!(
        e["detail"].as_str().unwrap_or("").contains("escalation[1]"),
        "{e}"
    );
    // The flags' own forms are refused before anything is opened.
    for (flag, value) in [
        ("--remind-before", "0s"),
        ("--remind-before", "soon"),
        ("--escalate-at", "4h"),
        ("--escalate-at", "4h:"),
        ("--expire-after", "-1h"),
    ] {
        s.run(&["task", "update", "t1", &format!("{flag}={value}")])
            .assert()
            .code(2)
            .stderr(contains(flag));
    }
    s.run(&[
        "task",
        "update",
        "t1",
        "--remind-before",
        "1h",
        "--no-reminders",
    ])
    .assert()
    .code(2);
    assert_eq!(s.json(&["task", "get", "t1"]), before);
}
