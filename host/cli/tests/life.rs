//! A task's whole life through the `leasehold` binary, run for real on a
//! database of its own: `task update`, `task assign`, `task unassign`,
//! `task delegate`, `task note`, `held`, `kind …`, a settle with a
//! decision, and `--if-revision` on the commands that change one task.
//! Every refusal exits non-zero, names the field or the revision, and
//! leaves the task as it was.

use predicates::str::contains;
use serde_json::{Value, json};

#[path = "support/scratch.rs"]
#[allow(dead_code)]
mod scratch;
use scratch::scratch;

#[test]
fn task_update_changes_the_named_fields_and_refuses_a_change_naming_none() {
    let s = scratch();
    let opened =
        s.open(r#"{"id":"t1","run":"r1","kind":"review","due_at":"2030-01-01T00:00:00Z"}"#);
    assert_eq!(opened["revision"], 1);
    let t = s.json(&[
        "task",
        "update",
        "t1",
        "--priority",
        "urgent",
        "--roles",
        "clerk",
        "lead",
        "--by",
        "boss",
    ]);
    assert_eq!(t["priority"], "urgent");
    assert_eq!(t["candidate_roles"], json!(["clerk", "lead"]));
    assert_eq!(t["revision"], 2);
    let t = s.json(&["task", "update", "t1", "--no-due", "--roles"]);
    assert_eq!(t["due_at"], Value::Null);
    assert_eq!(t["candidate_roles"], json!([]));
    let e = s.json_error(&["task", "update", "t1"], 2);
    assert_eq!(e["error"], "invalid");
    let e = s.json_error(&["task", "update", "t1", "--roles", ""], 2);
    assert_eq!(e["error"], "invalid");
    assert!(
        e["detail"]
            .as_str()
            .unwrap_or("")
            .contains("candidate-roles"),
        "{e}"
    );
    s.run(&["task", "update", "t1", "--due", "soon"])
        .assert()
        .code(2)
        .stderr(contains("--due"));
    assert_eq!(s.get("t1")["revision"], 3);
    let history = s.json(&["task", "history", "t1"]);
    let entry = &history[1];
    assert_eq!(entry["verb"], "update");
    assert_eq!(entry["actor"], "boss");
    assert_eq!(entry["changes"][0]["field"], "priority");
}

#[test]
fn excluding_the_holder_ends_the_claim_and_held_lists_what_an_actor_holds() {
    let s = scratch();
    s.open(r#"{"id":"a","run":"r1","kind":"review"}"#);
    s.open(r#"{"id":"b","run":"r1","kind":"review"}"#);
    s.json(&["task", "claim", "a", "--actor", "ann"]);
    s.json(&["task", "claim", "b", "--actor", "ann", "--lease", "5m"]);
    let held = s.json(&["held", "ann"]);
    let ids: Vec<&str> = held["tasks"]
        .as_array()
        .expect("tasks")
        .iter()
        .map(|t| t["id"].as_str().expect("an id"))
        .collect();
    assert_eq!(ids, ["b", "a"], "the leased one first");
    s.run(&["held", "ann"])
        .assert()
        .success()
        .stdout(contains("LEASE UNTIL"))
        .stdout(contains("2 tasks."));
    let t = s.json(&["task", "update", "a", "--exclude", "ann", "--by", "boss"]);
    assert_eq!(t["state"], "open");
    assert_eq!(t["assignee"], Value::Null);
    assert_eq!(
        s.json(&["held", "ann", "--limit", "10"])["tasks"]
            .as_array()
            .map(Vec::len),
        Some(1)
    );
    s.run(&["held", "nobody"])
        .assert()
        .success()
        .stdout(contains("nobody holds no tasks."));
}

#[test]
fn task_assign_refuses_an_excluded_actor_and_records_an_override_of_the_roles() {
    let s = scratch();
    s.open(r#"{"id":"t1","run":"r1","kind":"review","candidate_roles":["approver"],"excluded_actors":["eve"]}"#);
    let e = s.json_error(
        &["task", "assign", "t1", "--to", "eve", "--override-roles"],
        1,
    );
    assert_eq!(e["error"], "excluded");
    assert_eq!(e["detail"], "eve");
    let e = s.json_error(
        &["task", "assign", "t1", "--to", "dave", "--role", "clerk"],
        1,
    );
    assert_eq!(e["error"], "wrong_role");
    let t = s.json(&[
        "task",
        "assign",
        "t1",
        "--to",
        "dave",
        "--role",
        "clerk",
        "--override-roles",
        "--by",
        "boss",
    ]);
    assert_eq!(t["assignee"], "dave");
    let history = s.json(&["task", "history", "t1"]);
    let fields: Vec<&str> = history[1]["changes"]
        .as_array()
        .expect("changes")
        .iter()
        .map(|c| c["field"].as_str().expect("a field"))
        .collect();
    assert_eq!(fields, ["assignee", "override-roles"]);
    s.run(&["task", "history", "t1"])
        .assert()
        .success()
        .stdout(contains("override-roles: false -> true"));
    let t = s.json(&["task", "unassign", "t1", "--by", "boss"]);
    assert_eq!(t["state"], "open");
    assert_eq!(t["assignee"], Value::Null);
}

#[test]
fn task_delegate_is_refused_unless_from_holds_it_and_a_note_is_kept_in_the_history() {
    let s = scratch();
    s.open(r#"{"id":"t1","run":"r1","kind":"review"}"#);
    s.json(&["task", "claim", "t1", "--actor", "ann"]);
    let e = s.json_error(
        &["task", "delegate", "t1", "--from", "bob", "--to", "cy"],
        1,
    );
    assert_eq!(e["error"], "not_held");
    assert_eq!(e["detail"], "bob");
    assert_eq!(s.get("t1")["assignee"], "ann");
    let t = s.json(&["task", "delegate", "t1", "--from", "ann", "--to", "cy"]);
    assert_eq!(t["assignee"], "cy");
    let t = s.json(&[
        "task",
        "note",
        "t1",
        "--actor",
        "ann",
        "--text",
        "Over to you.",
    ]);
    assert_eq!(t["revision"], 4);
    let e = s.json_error(&["task", "note", "t1", "--actor", "ann", "--text", ""], 2);
    assert_eq!(e["error"], "invalid");
    s.run(&["task", "history", "t1"])
        .assert()
        .success()
        .stdout(contains("note: Over to you."));
}

#[test]
fn if_revision_refuses_a_stale_change_with_the_current_revision_and_writes_nothing() {
    let s = scratch();
    s.open(r#"{"id":"t1","run":"r1","kind":"review"}"#);
    for args in [
        &[
            "task",
            "claim",
            "t1",
            "--actor",
            "ann",
            "--if-revision",
            "7",
        ][..],
        &[
            "task",
            "update",
            "t1",
            "--priority",
            "low",
            "--if-revision",
            "7",
        ],
        &["task", "assign", "t1", "--to", "ann", "--if-revision", "7"],
        &["task", "escalate", "t1", "--if-revision", "7"],
        &[
            "task",
            "note",
            "t1",
            "--actor",
            "a",
            "--text",
            "x",
            "--if-revision",
            "7",
        ],
        &["task", "settle", "t1", "completed", "--if-revision", "7"],
    ] {
        let e = s.json_error(args, 1);
        assert_eq!(e["error"], "stale", "{args:?}");
        assert_eq!(e["revision"], 1, "{args:?}");
    }
    s.run(&[
        "task",
        "claim",
        "t1",
        "--actor",
        "ann",
        "--if-revision",
        "7",
    ])
    .assert()
    .code(1)
    .stderr(contains("its revision is now 1"));
    let t = s.get("t1");
    assert_eq!(
        (t["revision"].clone(), t["state"].clone()),
        (json!(1), json!("open"))
    );
    let t = s.json(&[
        "task",
        "claim",
        "t1",
        "--actor",
        "ann",
        "--if-revision",
        "1",
    ]);
    assert_eq!(t["revision"], 2);
    let e = s.json_error(
        &[
            "task",
            "release",
            "t1",
            "--actor",
            "ann",
            "--if-revision",
            "1",
        ],
        1,
    );
    assert_eq!(e["revision"], 2);
}

#[test]
fn a_decision_is_checked_against_the_kind_and_kept_with_who_decided() {
    let s = scratch();
    let def = s.file(
        "kind.json",
        r#"{"kind":"invoice","outcomes":[
            {"name":"approved","output_schema":{"type":"object","properties":{"amount":{"type":"integer","maximum":1000}},"required":["amount"]}},
            {"name":"rejected","needs_reason":true}]}"#,
    );
    let k = s.json(&["kind", "define", &def, "--if-revision", "0"]);
    assert_eq!(k["revision"], 1);
    let e = s.json_error(&["kind", "define", &def, "--if-revision", "0"], 1);
    assert_eq!(
        (e["error"].clone(), e["revision"].clone()),
        (json!("stale"), json!(1))
    );
    let bad = s.file(
        "bad.json",
        r#"{"kind":"x","outcomes":[{"name":"a","output_schema":{"type":"wrong"}}]}"#,
    );
    s.run(&["kind", "define", &bad])
        .assert()
        .code(2)
        .stderr(contains("bad.json"));
    let unknown = s.file("unknown.json", r#"{"kind":"x","outcome":[]}"#);
    s.run(&["kind", "define", &unknown])
        .assert()
        .code(2)
        .stderr(contains("outcome"));
    assert_eq!(s.json(&["kind", "get", "invoice"])["kind"], "invoice");
    assert_eq!(s.json(&["kind", "list"]).as_array().map(Vec::len), Some(1));

    s.open(r#"{"id":"t1","run":"r1","kind":"invoice"}"#);
    s.json(&["task", "claim", "t1", "--actor", "ann"]);
    let e = s.json_error(
        &["task", "settle", "t1", "completed", "--outcome", "returned"],
        2,
    );
    assert!(
        e["detail"]
            .as_str()
            .unwrap_or("")
            .contains("decision.outcome"),
        "{e}"
    );
    let e = s.json_error(
        &["task", "settle", "t1", "completed", "--outcome", "rejected"],
        2,
    );
    assert!(e["detail"].as_str().unwrap_or("").contains("reason"), "{e}");
    let over = s.file("over.json", r#"{"amount": 1500}"#);
    let e = s.json_error(
        &[
            "task",
            "settle",
            "t1",
            "completed",
            "--outcome",
            "approved",
            "--output-file",
            &over,
        ],
        2,
    );
    assert_eq!(
        e["detail"],
        "decision.output: /amount: maximum: 1500 is above 1000"
    );
    let broken = s.file("broken.json", "{not json");
    s.run(&[
        "task",
        "settle",
        "t1",
        "completed",
        "--outcome",
        "approved",
        "--output-file",
        &broken,
    ])
    .assert()
    .code(2)
    .stderr(contains("--output-file"));
    assert_eq!(s.get("t1")["state"], "claimed");
    let done = s.json(&[
        "task",
        "settle",
        "t1",
        "completed",
        "--holder",
        "ann",
        "--outcome",
        "rejected",
        "--reason",
        "A duplicate.",
    ]);
    assert_eq!(done["settled"], true);
    let t = s.get("t1");
    assert_eq!(t["decision"]["outcome"], "rejected");
    assert_eq!(t["decision"]["reason"], "A duplicate.");
    assert_eq!(t["decision"]["by"], "ann");
    s.run(&["task", "show", "t1"])
        .assert()
        .success()
        .stdout(contains("decision      rejected by ann"))
        .stdout(contains("revision      3"));
    // A task's own outcomes, given when it opens, outrank its kind's.
    let own = s.open(
        r#"{"id":"t2","run":"r1","kind":"invoice","outcomes":[{"name":"returned","needs_reason":false,"output_schema":null}]}"#,
    );
    assert_eq!(own["outcomes"][0]["name"], "returned");
    s.json_error(
        &["task", "settle", "t2", "completed", "--outcome", "approved"],
        2,
    );
    assert_eq!(
        s.json(&["task", "settle", "t2", "completed", "--outcome", "returned"])["outcome"],
        "returned"
    );
    assert_eq!(s.json(&["kind", "remove", "invoice"])["removed"], true);
    s.run(&["kind", "get", "invoice"]).assert().code(1);
}
