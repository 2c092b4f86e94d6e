//! Search, counts and saved views through the `leasehold` binary, on a
//! database of its own: every filter flag narrows a search, pages follow
//! `next`, a reviewer sees only its own and what it may take, `count`
//! agrees with the search, views are saved, changed at their revision,
//! listed and deleted; bad input exits 2 naming the flag. And on a copy of
//! the layout-9 fixture, search is refused until `build-search-index` has
//! run, after which every task is found. It drives the binary only.

use std::path::Path;

use serde_json::{Value, json};

#[path = "support/scratch.rs"]
#[allow(dead_code)]
mod scratch;
use scratch::{Scratch, scratch};

/// 2026-05-04T09:00:00Z in milliseconds.
const NINE: i64 = 1_777_885_200_000;
const MINUTE: i64 = 60_000;

/// Six tasks: two kinds, roles, priorities, cases, runs and due times, one
/// of them claimed by bob.
fn fill(s: &Scratch) {
    let tasks = [
        ("a1", "approve", "approver", "high", "c1", "r1", Some(10)),
        ("a2", "approve", "approver", "low", "c1", "r1", Some(20)),
        ("a3", "approve", "finance", "urgent", "c2", "r2", None),
        ("v1", "verify", "approver", "normal", "c2", "r2", Some(5)),
        ("v2", "verify", "finance", "high", "c3", "r3", Some(30)),
        ("v3", "verify", "approver", "normal", "c3", "r3", None),
    ];
    for (i, (id, kind, role, priority, case, run, due)) in tasks.into_iter().enumerate() {
        let mut task = json!({
            "id": id, "run": run, "case": case, "kind": kind,
            "candidate_roles": [role], "priority": priority,
            "created_at": NINE + i as i64 * MINUTE,
        });
        if let Some(due) = due {
            task["due_at"] = json!(NINE + due * MINUTE);
        }
        s.open(&task.to_string());
    }
    s.json(&[
        "task", "claim", "v1", "--actor", "bob", "--role", "approver",
    ]);
}

fn ids(page: &Value) -> Vec<String> {
    page["tasks"]
        .as_array()
        .expect("tasks")
        .iter()
        .map(|t| t["id"].as_str().expect("an id").to_owned())
        .collect()
}

fn search(s: &Scratch, args: &[&str]) -> Vec<String> {
    let mut all = vec!["search"];
    all.extend_from_slice(args);
    let page = s.json(&all);
    assert!(page["next"].is_null(), "one page: {page}");
    ids(&page)
}

#[test]
fn every_filter_flag_narrows_a_search_and_pages_follow_next() {
    let s = scratch();
    fill(&s);
    // Queue order: urgent, high (older first), normal, low.
    assert_eq!(search(&s, &[]), ["a3", "a1", "v2", "v1", "v3", "a2"]);
    assert_eq!(search(&s, &["--state", "claimed"]), ["v1"]);
    assert_eq!(
        search(&s, &["--state", "open", "--kind", "verify"]),
        ["v2", "v3"]
    );
    assert_eq!(
        search(
            &s,
            &["--kind", "verify", "--kind", "approve", "--role", "finance"]
        ),
        ["a3", "v2"]
    );
    assert_eq!(search(&s, &["--assignee", "bob"]), ["v1"]);
    assert_eq!(search(&s, &["--assignee", "nobody"]).len(), 5);
    assert_eq!(search(&s, &["--case", "c1"]), ["a1", "a2"]);
    assert_eq!(search(&s, &["--run", "r3"]), ["v2", "v3"]);
    assert_eq!(
        search(&s, &["--priority-at-least", "high"]),
        ["a3", "a1", "v2"]
    );
    let at = |m: i64| (NINE + m * MINUTE).to_string();
    assert_eq!(search(&s, &["--due-before", &at(20)]), ["a1", "v1"]);
    assert_eq!(
        search(&s, &["--due-after", "2026-05-04T09:20:00Z"]),
        ["v2", "a2"]
    );
    assert_eq!(search(&s, &["--created-before", &at(1)]), ["a1"]);
    assert_eq!(search(&s, &["--created-after", &at(4)]), ["v2", "v3"]);
    // Pending and due by then: the claimed v1 is pending too.
    assert_eq!(search(&s, &["--overdue-at", &at(10)]), ["a1", "v1"]);
    assert_eq!(
        search(&s, &["--sort", "due-at"]),
        ["v1", "a1", "a2", "v2", "a3", "v3"]
    );
    assert_eq!(
        search(&s, &["--sort", "created-at", "--desc"]),
        ["v3", "v2", "v1", "a3", "a2", "a1"]
    );
    // A reviewer sees what it holds and what it may take.
    assert_eq!(
        search(&s, &["--as-actor", "bob", "--roles", "approver"]),
        ["a1", "v1", "v3", "a2"]
    );

    // Pages of two, each `next` the `--after` of the one that follows.
    let mut seen = Vec::new();
    let mut after: Option<String> = None;
    loop {
        let mut args = vec!["search", "--sort", "created-at", "--limit", "2"];
        if let Some(a) = &after {
            args.extend(["--after", a.as_str()]);
        }
        let page = s.json(&args);
        let got = ids(&page);
        assert!(got.len() <= 2, "{page}");
        seen.extend(got);
        match page["next"].as_str() {
            Some(next) => after = Some(next.to_owned()),
            None => break,
        }
    }
    assert_eq!(seen, ["a1", "a2", "a3", "v1", "v2", "v3"]);

    let text = s.human(&["search", "--kind", "approve", "--limit", "2"]);
    assert!(text.contains("ID") && text.contains("PRIORITY"), "{text}");
    assert!(text.contains("a3") && text.contains("a1"), "{text}");
    assert!(text.contains("next: "), "{text}");
}

#[test]
fn count_agrees_with_search_whichever_index_answers() {
    let s = scratch();
    fill(&s);
    let count = |args: &[&str]| -> u64 {
        let mut all = vec!["count"];
        all.extend_from_slice(args);
        let c = s.json(&all);
        c["count"].as_u64().expect("a count")
    };
    assert_eq!(count(&[]), 6);
    assert_eq!(count(&["--state", "open"]), 5);
    assert_eq!(count(&["--state", "open", "--state", "claimed"]), 6);
    assert_eq!(count(&["--state", "completed"]), 0);
    assert_eq!(count(&["--kind", "verify"]), 3);
    assert_eq!(count(&["--assignee", "nobody", "--role", "approver"]), 3);
    assert_eq!(count(&["--as-actor", "bob", "--roles", "approver"]), 4);
    let counters = s.json(&["count", "--state", "open"]);
    assert_eq!(counters["index"], "counters", "{counters}");
    let text = s.human(&["count", "--kind", "approve"]);
    assert!(text.starts_with("3 tasks match"), "{text}");
}

#[test]
fn a_view_is_saved_changed_at_its_revision_listed_and_deleted() {
    let s = scratch();
    fill(&s);
    let made = s.json(&[
        "view",
        "put",
        "--name",
        "mine",
        "--state",
        "open",
        "--kind",
        "verify",
        "--assignee",
        "nobody",
        "--sort",
        "due-at",
        "--desc",
        "--by",
        "ann",
    ]);
    assert_eq!(made["name"], "mine");
    assert_eq!(made["revision"], 1);
    assert_eq!(made["by"], "ann");
    assert_eq!(made["filter"]["states"], json!(["open"]));
    assert_eq!(made["filter"]["kinds"], json!(["verify"]));
    assert_eq!(made["filter"]["assignee"], "nobody");
    assert_eq!(made["sort"], json!({"key": "due-at", "descending": true}));
    assert_eq!(s.json(&["view", "get", "mine"]), made);

    // A name in use is refused without --expected; a stale one too.
    let e = s.json_error(&["view", "put", "--name", "mine"], 2);
    assert_eq!(e["error"], "invalid", "{e}");
    assert!(
        e["message"].as_str().expect("a message").contains("--name"),
        "{e}"
    );
    let e = s.json_error(&["view", "put", "--name", "mine", "--expected", "7"], 1);
    assert_eq!(
        (e["error"].as_str(), &e["revision"]),
        (Some("stale"), &json!(1))
    );
    let changed = s.json(&[
        "view",
        "put-view",
        "--name",
        "mine",
        "--role",
        "finance",
        "--expected",
        "1",
    ]);
    assert_eq!(changed["revision"], 2);
    assert_eq!(changed["filter"]["role"], "finance");
    assert_eq!(changed["filter"]["states"], json!([]));

    s.json(&["view", "put", "--name", "all"]);
    let list = s.json(&["view", "list"]);
    let names: Vec<&str> = list
        .as_array()
        .expect("a list")
        .iter()
        .map(|v| v["name"].as_str().expect("a name"))
        .collect();
    assert_eq!(names, ["all", "mine"]);
    let after = s.json(&["view", "list-views", "--after", "all"]);
    assert_eq!(after.as_array().map(Vec::len), Some(1));
    let text = s.human(&["view", "list"]);
    assert!(
        text.contains("--role finance") && text.contains("2 views"),
        "{text}"
    );

    let e = s.json_error(&["view", "delete", "mine", "--expected", "1"], 1);
    assert_eq!(e["error"], "stale", "{e}");
    assert_eq!(
        s.json(&["view", "delete-view", "mine", "--expected", "2"]),
        json!({"name": "mine", "deleted": true})
    );
    assert_eq!(
        s.json(&["view", "delete", "mine"]),
        json!({"name": "mine", "deleted": false})
    );
    let e = s.json_error(&["view", "get", "mine"], 1);
    assert_eq!(e["error"], "not_found", "{e}");
}

#[test]
fn bad_input_exits_2_naming_the_flag() {
    let s = scratch();
    fill(&s);
    let message = |args: &[&str]| -> String {
        let e = s.json_error(args, 2);
        e["message"].as_str().expect("a message").to_owned()
    };
    for (args, flag) in [
        (&["search", "--due-before", "tomorrow"][..], "--due-before"),
        (&["search", "--created-after", "9am"][..], "--created-after"),
        (&["search", "--state", "done"][..], "--state"),
        (&["search", "--sort", "name"][..], "--sort"),
        (
            &["search", "--priority-at-least", "top"][..],
            "--priority-at-least",
        ),
        (&["search", "--limit", "0"][..], "--limit"),
        (&["search", "--limit", "1001"][..], "--limit"),
        (&["search", "--roles", "approver"][..], "--as-actor"),
        (&["search", "--after", "not-a-cursor"][..], "--after"),
        (&["search", "--role", ""][..], "--role"),
        (&["count", "--assignee", ""][..], "--assignee"),
        (&["build-search-index", "--limit", "10001"][..], "--limit"),
        (&["view", "put", "--name", ""][..], "--name"),
    ] {
        let m = message(args);
        assert!(m.contains(flag), "{args:?}: {m}");
    }
    // A cursor of another search is refused, not read as a position.
    let page = s.json(&["search", "--limit", "1"]);
    let next = page["next"].as_str().expect("more follow");
    let m = message(&["search", "--state", "open", "--limit", "1", "--after", next]);
    assert!(m.contains("--after"), "{m}");
    let kinds: Vec<String> = (0..33).map(|i| format!("k{i}")).collect();
    let mut args = vec!["count"];
    for k in &kinds {
        args.extend(["--kind", k.as_str()]);
    }
    assert!(message(&args).contains("--kind"));
}

#[test]
fn an_old_database_is_searched_once_build_search_index_has_run() {
    let s = scratch();
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/layout-9/db.redb"),
        &s.db,
    )
    .expect("copy the layout-9 fixture");
    let tenant = |args: &[&str]| -> Vec<String> {
        let mut all = vec!["--tenant", "alpha"];
        all.extend_from_slice(args);
        all.into_iter().map(str::to_owned).collect()
    };
    let args = tenant(&["search"]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = s.run(&args).arg("--json").assert().failure();
    let e = scratch::parse(&out.get_output().stderr);
    assert_eq!(e["error"], "storage", "{e}");
    assert!(
        e["message"]
            .as_str()
            .expect("a message")
            .contains("leasehold build-search-index"),
        "{e}"
    );

    let build = tenant(&["build-search-index", "--limit", "3"]);
    let build: Vec<&str> = build.iter().map(String::as_str).collect();
    let built = s.json(&build);
    assert_eq!(built["built"], true, "{built}");
    let indexed = built["indexed"].as_u64().expect("indexed");
    assert!(indexed >= 10, "{built}");
    assert!(
        built["calls"].as_u64().expect("calls") > indexed / 3,
        "{built}"
    );
    // Built: a second run has nothing to do.
    let again = s.json(&build);
    assert_eq!(again["indexed"], 0, "{again}");
    let text = s.human(&build);
    assert!(text.contains("nothing was left"), "{text}");

    let count = tenant(&["count"]);
    let count: Vec<&str> = count.iter().map(String::as_str).collect();
    let total = s.json(&count)["count"].as_u64().expect("a count");
    assert_eq!(total, indexed);
    let mut found = 0u64;
    let mut after: Option<String> = None;
    loop {
        let mut args = tenant(&["search", "--limit", "5"]);
        if let Some(a) = &after {
            args.extend(["--after".to_owned(), a.clone()]);
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let page = s.json(&args);
        found += ids(&page).len() as u64;
        match page["next"].as_str() {
            Some(n) => after = Some(n.to_owned()),
            None => break,
        }
    }
    assert_eq!(found, total);
    let check = tenant(&["check"]);
    let check: Vec<&str> = check.iter().map(String::as_str).collect();
    assert_eq!(s.json(&check), json!([]));
}
