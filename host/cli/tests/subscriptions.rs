//! Webhook subscriptions through the `leasehold` binary, on a database of
//! its own: added with a secret shown once, listed and shown without any
//! key, changed (a stale `--if-revision` refused), paused and resumed,
//! given a new key, replayed from a position and from the start, and
//! removed. Bad input (a URL without a host, a filter of nothing, a
//! position the feed does not hold, an overlap past a week, an unknown id)
//! exits non-zero with a clear message and leaves every subscription as it
//! was. It drives the binary only and must never write the database but
//! through it; delivery is `leasehold-webhooks`' to test.

use serde_json::{Value, json};

#[path = "support/scratch.rs"]
#[allow(dead_code)]
mod scratch;
use scratch::{Scratch, scratch};

const HOUR: i64 = 3_600_000;

/// Opens a task, so the feed moves on by one entry; answers the feed's
/// head after it.
fn a_change(s: &Scratch, id: &str) -> String {
    s.open(&json!({"id": id, "run": "r1", "kind": "review"}).to_string());
    let read = s.json(&["feed", "--limit", "1000"]);
    read["page"]["head"]
        .as_str()
        .expect("the feed's head")
        .to_owned()
}

fn sub(s: &Scratch, args: &[&str]) -> Value {
    let mut all = vec!["subscription"];
    all.extend_from_slice(args);
    s.json(&all)
}

fn sub_text(s: &Scratch, args: &[&str]) -> String {
    let mut all = vec!["subscription"];
    all.extend_from_slice(args);
    s.human(&all)
}

fn sub_error(s: &Scratch, args: &[&str], code: i32) -> Value {
    let mut all = vec!["subscription"];
    all.extend_from_slice(args);
    s.json_error(&all, code)
}

/// The `whsec_` form of a 32-byte key: standard base64 with its padding.
fn assert_whsec(secret: &Value) -> String {
    let text = secret.as_str().expect("a secret");
    let body = text.strip_prefix("whsec_").expect("whsec_ first");
    assert_eq!(body.len(), 44, "{text}");
    assert!(body.ends_with('='), "{text}");
    assert!(
        body.trim_end_matches('=')
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '+' || c == '/'),
        "{text}"
    );
    text.to_owned()
}

#[test]
fn a_subscription_lives_from_add_to_remove_and_its_keys_are_never_shown() {
    let s = scratch();
    let head = a_change(&s, "t1");

    // Added at the feed's head, its secret in the answer.
    let added = sub(
        &s,
        &[
            "add",
            "--id",
            "s1",
            "--url",
            "https://hooks.example.com/in",
            "--verb",
            "settle",
            "--verb",
            "claim",
            "--kind",
            "review",
        ],
    );
    let secret = assert_whsec(&added["secret"]);
    assert_eq!(added["id"], "s1");
    assert_eq!(added["state"], "active");
    assert_eq!(added["revision"], 1);
    assert_eq!(added["position"], json!(head));
    assert_eq!(added["keys"], json!([{"until": null}]));
    assert_eq!(
        added["filter"],
        json!({"tasks": true, "timers": true, "verbs": ["settle", "claim"],
               "kinds": ["review"], "runs": [], "settling_only": false})
    );

    // A person is told the secret is shown this once; an id is made when
    // none is given.
    let told = sub_text(
        &s,
        &["add", "--url", "https://b.example.com/", "--no-tasks"],
    );
    assert!(
        told.contains("give the receiver this secret; it is not shown again"),
        "{told}"
    );
    assert!(told.contains("whsec_"), "{told}");
    let listed = sub(&s, &["list"]);
    let ids: Vec<&str> = listed["subscriptions"]
        .as_array()
        .expect("a list")
        .iter()
        .map(|x| x["id"].as_str().expect("an id"))
        .collect();
    assert_eq!(ids.len(), 2, "{listed}");
    assert_eq!(ids[0], "s1");
    let made = ids[1];
    assert!(
        made.len() == 20
            && made.starts_with("sub_")
            && made[4..].chars().all(|c| c.is_ascii_hexdigit()),
        "{made}"
    );
    assert_eq!(listed["next"], Value::Null);
    let paged = sub(&s, &["list", "--limit", "1"]);
    assert_eq!(paged["subscriptions"].as_array().map(Vec::len), Some(1));
    assert_eq!(paged["next"], "s1");
    let rest = sub(&s, &["list", "--after", "s1"]);
    assert_eq!(rest["subscriptions"][0]["id"], made);
    assert_eq!(rest["subscriptions"][0]["filter"]["tasks"], false);

    // No read shows a key: not the secret, not a byte of it.
    for args in [
        &["get", "s1"][..],
        &["get-subscription", "s1"],
        &["list"],
        &["list-subscriptions"],
    ] {
        let text = sub_text(&s, args);
        let json = sub(&s, args).to_string();
        for shown in [&text, &json] {
            assert!(!shown.contains("whsec_"), "{args:?}: {shown}");
            assert!(!shown.contains(&secret[6..]), "{args:?}: {shown}");
            assert!(!shown.contains("\"secret\""), "{args:?}: {shown}");
            assert!(!shown.contains("\"key\""), "{args:?}: {shown}");
        }
    }
    let shown = sub_text(&s, &["get", "s1"]);
    for line in [
        "Subscription s1 (revision 1): active",
        "URL: https://hooks.example.com/in",
        "Sends: changes of tasks and timers",
        "Only: made by settle, claim; tasks of kind review",
        &format!("Delivered up to: {head}"),
        "Signing: 1 key, the current one",
    ] {
        assert!(shown.contains(line), "{line:?} in {shown}");
    }
    let table = sub_text(&s, &["list"]);
    assert!(table.starts_with("ID "), "{table}");
    assert!(table.contains("s1  "), "{table}");

    // A change at the revision read; a stale one is refused and writes
    // nothing.
    let changed = sub(
        &s,
        &[
            "change",
            "s1",
            "--url",
            "https://hooks.example.com/v2",
            "--if-revision",
            "1",
        ],
    );
    assert_eq!(changed["revision"], 2);
    assert_eq!(changed["url"], "https://hooks.example.com/v2");
    assert_eq!(changed["filter"]["verbs"], json!(["settle", "claim"]));
    let stale = sub_error(&s, &["change", "s1", "--no-timers", "--expected", "1"], 1);
    assert_eq!(stale["error"], "stale", "{stale}");
    assert_eq!(stale["revision"], 2, "{stale}");
    assert_eq!(stale["exit"], 1, "{stale}");
    assert!(
        stale["message"]
            .as_str()
            .is_some_and(|m| m.contains("stale") && m.contains('2')),
        "{stale}"
    );
    let said = s
        .run(&[
            "subscription",
            "change",
            "s1",
            "--url",
            "https://x.example.com/",
            "--if-revision",
            "1",
        ])
        .assert()
        .code(1);
    let said = String::from_utf8_lossy(&said.get_output().stderr).into_owned();
    assert!(said.contains("the current revision is 2"), "{said}");
    let now = sub(&s, &["get", "s1"]);
    assert_eq!(now["revision"], 2);
    assert_eq!(now["url"], "https://hooks.example.com/v2");
    assert_eq!(now["filter"]["timers"], true);

    // Filter flags change only what they name.
    let narrowed = sub(
        &s,
        &[
            "change",
            "s1",
            "--no-timers",
            "--settling-only",
            "--any-kind",
        ],
    );
    assert_eq!(narrowed["revision"], 3);
    assert_eq!(
        narrowed["filter"],
        json!({"tasks": true, "timers": false, "verbs": ["settle", "claim"],
               "kinds": [], "runs": [], "settling_only": true})
    );
    let same = sub(&s, &["change", "s1", "--no-timers"]);
    assert_eq!(same["revision"], 3, "a change to what it is writes nothing");

    // Paused with a note, resumed from where it stopped.
    let paused = sub(&s, &["pause", "s1", "--note", "receiver down for upgrade"]);
    assert_eq!(paused["state"], "paused");
    assert_eq!(paused["note"], "receiver down for upgrade");
    assert_eq!(paused["revision"], 4);
    let shown = sub_text(&s, &["get", "s1"]);
    assert!(shown.contains("(revision 4): paused"), "{shown}");
    assert!(shown.contains("Note: receiver down for upgrade"), "{shown}");
    let resumed = sub(&s, &["resume-subscription", "s1", "--if-revision", "4"]);
    assert_eq!(resumed["state"], "active");
    assert_eq!(resumed["note"], Value::Null);
    assert_eq!(resumed["position"], json!(head));
    let failing = sub(
        &s,
        &[
            "set-subscription-state",
            "s1",
            "failing",
            "--note",
            "by hand",
        ],
    );
    assert_eq!(failing["state"], "failing");
    assert_eq!(failing["revision"], 6);

    // A new key: both sign for the overlap, and only the new secret is
    // shown, once.
    let before = clock_now();
    let rotated = sub(&s, &["rotate", "s1", "--overlap", "1h"]);
    let new_secret = assert_whsec(&rotated["secret"]);
    assert_ne!(new_secret, secret);
    assert_eq!(rotated["revision"], 7);
    let keys = rotated["keys"].as_array().expect("keys");
    assert_eq!(keys.len(), 2, "{rotated}");
    assert_eq!(keys[1]["until"], Value::Null);
    let until = keys[0]["until"].as_i64().expect("the old key's end");
    assert!(
        (before + HOUR..=clock_now() + HOUR).contains(&until),
        "{until}"
    );
    let shown = sub_text(&s, &["get", "s1"]);
    assert!(
        shown.contains("Signing: 2 keys: the current one, and 1 older key until "),
        "{shown}"
    );
    assert!(!shown.contains(&new_secret[6..]), "{shown}");
    let told = sub_text(&s, &["rotate-subscription-key", "s1"]);
    assert!(told.contains("signs with a new key"), "{told}");
    assert!(told.contains("it is not shown again"), "{told}");
    assert_eq!(
        sub(&s, &["get", "s1"])["keys"].as_array().map(Vec::len),
        Some(3)
    );

    // Replayed from the start, then from a position the feed holds.
    let later = a_change(&s, "t2");
    assert_ne!(later, head);
    let replayed = sub(&s, &["replay", "s1"]);
    assert_eq!(replayed["position"], Value::Null);
    assert_eq!(replayed["state"], "active");
    assert_eq!(replayed["note"], Value::Null);
    assert!(
        sub_text(&s, &["get", "s1"]).contains("Delivered up to: the feed's start"),
        "a person reads the start as such"
    );
    let replayed = sub(&s, &["rewind-subscription", "s1", "--from", &head]);
    assert_eq!(replayed["position"], json!(head));

    // Removed: gone for every command after.
    assert_eq!(
        sub(&s, &["remove", "s1"]),
        json!({"id": "s1", "removed": true})
    );
    assert_eq!(
        sub(&s, &["remove-subscription", "s1"]),
        json!({"id": "s1", "removed": false})
    );
    let missing = sub_error(&s, &["get", "s1"], 1);
    assert_eq!(missing["error"], "not_found");
    assert_eq!(
        sub(&s, &["list"])["subscriptions"].as_array().map(Vec::len),
        Some(1)
    );
    s.run(&["check"]).assert().success();
}

/// The clock, as the binary reads it.
fn clock_now() -> i64 {
    let since = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("after 1970");
    i64::try_from(since.as_millis()).expect("in range")
}

#[test]
fn bad_input_is_refused_clearly_and_changes_nothing() {
    let s = scratch();
    let head = a_change(&s, "t1");
    let refused = |args: &[&str], code: i32, says: &str| {
        let e = sub_error(&s, args, code);
        assert_eq!(e["exit"], code, "{args:?}: {e}");
        let message = e["message"].as_str().expect("a message");
        assert!(message.contains(says), "{args:?}: {says:?} in {e}");
        e
    };

    // Nothing is added by an add the rules refuse.
    let e = refused(&["add", "--url", "http:///in"], 2, "url has no host");
    assert_eq!(e["error"], "invalid");
    refused(&["add", "--url", "http://"], 2, "url has no host");
    refused(
        &["add", "--url", "ftp://hooks.example.com/"],
        2,
        "url must start with https:// or http://",
    );
    refused(
        &[
            "add",
            "--url",
            "https://hooks.example.com/",
            "--no-tasks",
            "--no-timers",
        ],
        2,
        "neither tasks nor timers",
    );
    refused(
        &["add", "--url", "https://hooks.example.com/", "--verb", ""],
        2,
        "filter.verbs",
    );
    refused(
        &[
            "add",
            "--url",
            "https://hooks.example.com/",
            "--from",
            "f0.99",
        ],
        2,
        "past the feed's head",
    );
    refused(
        &[
            "add",
            "--url",
            "https://hooks.example.com/",
            "--from",
            "yesterday",
        ],
        2,
        "not a position of the feed",
    );
    let e = refused(
        &[
            "add",
            "--url",
            "https://hooks.example.com/",
            "--verb",
            "a",
            "--any-verb",
        ],
        2,
        "cannot be used with",
    );
    assert_eq!(e["error"], "usage");
    assert_eq!(
        sub(&s, &["list"]),
        json!({"subscriptions": [], "next": null})
    );
    assert_eq!(sub_text(&s, &["list"]), "No subscriptions.\n");

    // One that stands, and what may not be done to it.
    sub(
        &s,
        &["add", "--id", "s1", "--url", "https://hooks.example.com/"],
    );
    let kept = sub(&s, &["get", "s1"]);
    refused(
        &["add", "--id", "s1", "--url", "https://other.example.com/"],
        2,
        "in use",
    );
    refused(
        &["change", "s1"],
        2,
        "nothing to change: give --url or a filter flag",
    );
    refused(&["change", "s1", "--url", "https://"], 2, "url has no host");
    refused(
        &["change", "s1", "--no-tasks", "--no-timers"],
        2,
        "neither tasks nor timers",
    );
    refused(&["pause", "s1", "--note", ""], 2, "note");
    refused(&["rotate", "s1", "--overlap", "8d"], 2, "more than 7 days");
    refused(&["rotate", "s1", "--overlap", "soon"], 2, "a duration like");
    refused(
        &["replay", "s1", "--from", &format!("{head}_1.5")],
        2,
        "past the feed's head",
    );
    refused(&["set-subscription-state", "s1", "asleep"], 2, "asleep");
    assert_eq!(sub(&s, &["get", "s1"]), kept, "nothing changed");

    // An unknown id is refused as not found, naming it, for every command
    // that needs one.
    for args in [
        &["get", "nope"][..],
        &["change", "nope", "--url", "https://hooks.example.com/"],
        &["change", "nope", "--no-timers"],
        &["pause", "nope"],
        &["resume", "nope"],
        &["set-subscription-state", "nope", "gone"],
        &["rotate", "nope"],
        &["replay", "nope"],
    ] {
        let e = refused(args, 1, "no subscription nope; nothing changed");
        assert_eq!(e["error"], "not_found", "{args:?}");
        assert_eq!(e["detail"], "nope", "{args:?}");
    }
    let said = s.run(&["subscription", "get", "nope"]).assert().code(1);
    let said = String::from_utf8_lossy(&said.get_output().stderr).into_owned();
    assert_eq!(said, "error: no subscription nope; nothing changed\n");
    assert_eq!(
        sub_text(&s, &["remove", "nope"]),
        "No subscription nope; nothing was removed.\n"
    );
    assert_eq!(sub(&s, &["get", "s1"]), kept, "nothing changed");
    assert_eq!(
        sub(&s, &["list"])["subscriptions"].as_array().map(Vec::len),
        Some(1)
    );
}

/// The reading commands open the database read-only, as the verb table
/// says: beside a process holding the file read-only (which keeps every
/// writer out, root or not) they run at once and change no byte of it.
#[test]
fn reading_a_subscription_never_opens_the_file_for_writing() {
    let s = scratch();
    sub(
        &s,
        &["add", "--id", "s1", "--url", "https://hooks.example.com/"],
    );
    let before = std::fs::read(&s.db).expect("read");
    let reader = redb::ReadOnlyDatabase::open(&s.db).expect("open read-only");
    for args in [
        &["subscription", "get", "s1"][..],
        &["subscription", "list"],
        &["subscription", "list-subscriptions", "--limit", "1"],
    ] {
        s.run(&["--wait", "0s"]).args(args).assert().success();
        s.run(&["--wait", "0s", "--json"])
            .args(args)
            .assert()
            .success();
    }
    let e = s.json_error(&["--wait", "0s", "subscription", "pause", "s1"], 4);
    assert_eq!(e["error"], "busy", "the reader does keep writers out");
    drop(reader);
    assert!(
        std::fs::read(&s.db).expect("read") == before,
        "a read changed the file"
    );
}

/// A subscription is a row of its tenant's keyspace, so what moves a
/// tenant moves it: `copy`, `backup` then `restore`, and `tenant export`
/// then `tenant import` each bring it, position and keys and all.
#[test]
fn copy_backup_and_tenant_export_carry_a_subscription() {
    use assert_cmd::cargo::cargo_bin_cmd;
    let s = scratch();
    let head = a_change(&s, "t1");
    let added = sub(
        &s,
        &[
            "add",
            "--id",
            "sub_moves",
            "--url",
            "https://hooks.example.com/in",
        ],
    );
    assert_eq!(added["position"], head.as_str());
    sub(&s, &["rotate", "sub_moves"]);
    let before = sub(&s, &["get", "sub_moves"]);
    let dir = s.dir.path();
    let run = |args: &[&str]| {
        cargo_bin_cmd!("leasehold")
            .current_dir(dir)
            .env_remove("LEASEHOLD_DB")
            .args(args)
            .assert()
            .success();
    };
    let db = s.db.to_str().expect("a path").to_owned();
    let at = |name: &str| dir.join(name).to_str().expect("a path").to_owned();
    run(&["copy", "--from", &db, "--to", &at("copied.redb")]);
    run(&["--db", &db, "backup", "--out", &at("backup.lhb")]);
    run(&[
        "restore",
        "--in",
        &at("backup.lhb"),
        "--to",
        &at("restored.redb"),
    ]);
    run(&[
        "--db",
        &db,
        "tenant",
        "export",
        "--out",
        &at("tenant.jsonl"),
    ]);
    run(&[
        "--db",
        &at("imported.redb"),
        "tenant",
        "import",
        "--in",
        &at("tenant.jsonl"),
    ]);
    for target in ["copied.redb", "restored.redb", "imported.redb"] {
        let there = scratch::Scratch {
            dir: tempfile::tempdir().expect("dir"),
            db: dir.join(target),
        };
        let got = there.json(&["subscription", "get", "sub_moves"]);
        assert_eq!(got, before, "{target}");
    }
}
