//! Every earlier layout, proven: the databases earlier builds wrote
//! (`tests/fixtures/`, made once by `tests/fixtures/make` with each build's
//! own binary) opened with this build.
//!
//! For each fixture, on a copy (a redb file copied, a PostgreSQL dump
//! restored into a schema of its own): every read the earlier build answered
//! (`reads.json`) is asked again and must be answered the same, but for the
//! differences named in [`documented`]; the tenant's layout mark is still
//! the earlier build's after those reads; then writes of every verb kind go
//! onto the old data, the untouched tenant still reads as before, and
//! `check` is clean in every tenant. This module owns that comparison; it
//! must never write to a fixture in place, nor accept a difference it does
//! not name.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use assert_cmd::cargo::cargo_bin_cmd;
use serde_json::{Value, json};

#[path = "support/postgres.rs"]
mod pg_support;
use pg_support::postgres;

/// The fixtures `tests/fixtures/make` writes, every one of which must be
/// there: a missing fixture fails its test rather than passing empty.
fn fixture_dir(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures")
        .join(name)
}

/// What an earlier build answered to one read.
struct Read {
    args: Vec<String>,
    exit: i64,
    stdout: Value,
    stderr: Value,
}

struct Fixture {
    name: String,
    commit: String,
    /// Whether the earlier build had `task history` and `events`.
    history: bool,
    reads: Vec<Read>,
}

fn load(name: &str) -> Fixture {
    let dir = fixture_dir(name);
    let text = |f: &str| {
        std::fs::read_to_string(dir.join(f))
            .unwrap_or_else(|e| panic!("{name}: cannot read {f} ({e}); run tests/fixtures/make"))
    };
    let meta: Value = serde_json::from_str(&text("fixture.json")).expect("fixture.json");
    let reads: Value = serde_json::from_str(&text("reads.json")).expect("reads.json");
    let reads = reads
        .as_array()
        .expect("reads.json is a list")
        .iter()
        .map(|r| Read {
            args: r["args"]
                .as_array()
                .expect("args")
                .iter()
                .map(|a| a.as_str().expect("an argument").to_owned())
                .collect(),
            exit: r["exit"].as_i64().expect("exit"),
            stdout: r["stdout"].clone(),
            stderr: r["stderr"].clone(),
        })
        .collect::<Vec<_>>();
    assert!(reads.len() > 50, "{name}: only {} reads", reads.len());
    Fixture {
        name: name.to_owned(),
        commit: meta["commit"].as_str().expect("commit").to_owned(),
        history: meta["history"].as_bool().expect("history"),
        reads,
    }
}

/// This build, with `--json` and the database.
fn leasehold(dir: &Path, db: &str, args: &[&str]) -> Output {
    cargo_bin_cmd!("leasehold")
        .current_dir(dir)
        .env_remove("LEASEHOLD_DB")
        .args(["--json", "--db", db])
        .args(args)
        .output()
        .expect("run leasehold")
}

/// An output as `make` records it: nothing is null, JSON is parsed, any
/// other text is kept as it is.
fn parsed(bytes: &[u8]) -> Value {
    let text = String::from_utf8_lossy(bytes);
    if text.is_empty() {
        return Value::Null;
    }
    serde_json::from_str(&text).unwrap_or_else(|_| Value::String(text.into_owned()))
}

fn ok(out: &Output, what: &str) -> Value {
    assert!(
        out.status.success(),
        "{what}: exit {:?}, stderr {}",
        out.status.code(),
        String::from_utf8_lossy(&out.stderr)
    );
    parsed(&out.stdout)
}

/// The one history entry this build may answer for a task whose changes
/// were made before history was kept (docs/operations.md, Upgrades):
/// sequence number 0, verb `before-history`.
fn before_history(v: &Value) -> bool {
    v.as_array().is_some_and(|entries| {
        entries.len() == 1 && entries[0]["seq"] == 0 && entries[0]["verb"] == "before-history"
    })
}

/// The differences between an earlier build's answer and this build's that
/// are documented on purpose, each by name; `None` when the answers differ
/// in any other way.
fn documented(read: &Read, now: &Value) -> Option<&'static str> {
    let history = read.args.iter().any(|a| a == "history");
    if history && read.stdout == json!([]) && before_history(now) {
        return Some("a task from before history was kept answers one before-history entry");
    }
    // Layout 10 adds fields to tasks, history entries and feed entries;
    // an old task reads with each at its default (revision 0, no decision,
    // no outcomes, no reminders or chain and no step fired; no changes,
    // note, job or step; no run or kind on an old change), and everything
    // else as it was.
    if let Some(old) = without_layout_10_defaults(now)
        && old != *now
        && (old == read.stdout || history && read.stdout == json!([]) && before_history(&old))
    {
        return Some("layout 10's fields, at their defaults on old data");
    }
    // Stats may come to name the tenant's layout, and name its next wake
    // (the earliest instant `expire-overdue` owes anything): keys the
    // earlier build's answer lacked, every other key as it was.
    if read.args.last().is_some_and(|a| a == "stats")
        && let (Some(old), Some(new)) = (read.stdout.as_object(), now.as_object())
    {
        let mut rest = new.clone();
        rest.retain(|k, _| old.contains_key(k) || !(k.contains("layout") || k == "next_wake"));
        if &rest == old && rest.len() < new.len() {
            return Some("stats name the tenant's layout or next wake");
        }
    }
    None
}

/// The fields layout 10 adds, with the value an old task, history entry or
/// feed entry must read with.
/// A field and the value it must hold on old data.
type FieldDefault = (&'static str, fn() -> Value);

const LAYOUT_10_DEFAULTS: [(&str, &[FieldDefault]); 3] = [
    (
        "task",
        &[
            ("revision", || json!(0)),
            ("decision", || Value::Null),
            ("outcomes", || json!([])),
            ("remind_before", || json!([])),
            ("escalation", || json!([])),
            ("steps_done", || json!(0)),
        ],
    ),
    (
        "history entry",
        &[
            ("revision", || json!(0)),
            ("changes", || json!([])),
            ("decision", || Value::Null),
            ("note", || Value::Null),
            ("job", || Value::Null),
            ("step", || Value::Null),
        ],
    ),
    (
        "task change",
        &[("run", || Value::Null), ("kind", || Value::Null)],
    ),
];

/// `v` with layout 10's fields taken out of every task, history entry and
/// feed change in it, or `None` when one of them holds anything but its
/// default: an old thing must read with the defaults, never a guess.
fn without_layout_10_defaults(v: &Value) -> Option<Value> {
    match v {
        Value::Array(items) => items
            .iter()
            .map(without_layout_10_defaults)
            .collect::<Option<Vec<_>>>()
            .map(Value::Array),
        Value::Object(map) => {
            let mut out = serde_json::Map::new();
            for (k, v) in map {
                out.insert(k.clone(), without_layout_10_defaults(v)?);
            }
            let shape = if map.contains_key("justification") {
                Some("task")
            } else if map.contains_key("seq") && map.contains_key("verb") {
                Some("history entry")
            } else if map.contains_key("entry") && map.contains_key("id") {
                Some("task change")
            } else {
                None
            };
            if let Some(shape) = shape {
                let (_, fields) = LAYOUT_10_DEFAULTS
                    .iter()
                    .find(|(name, _)| *name == shape)
                    .expect("a shape named in the table");
                for (field, default) in *fields {
                    match out.remove(*field) {
                        Some(found) if found != default() => return None,
                        Some(_) => {}
                        // This build always answers them.
                        None => return None,
                    }
                }
            }
            Some(Value::Object(out))
        }
        other => Some(other.clone()),
    }
}

/// Asks this build every read of the fixture (of one tenant, if given) and
/// returns a line for each answer that differs from the earlier build's
/// without a documented reason.
fn compare(f: &Fixture, dir: &Path, db: &str, tenant: Option<&str>) -> Vec<String> {
    let mut wrong = Vec::new();
    for read in &f.reads {
        if tenant.is_some_and(|t| read.args.get(1).map(String::as_str) != Some(t)) {
            continue;
        }
        let args: Vec<&str> = read.args.iter().map(String::as_str).collect();
        let out = leasehold(dir, db, &args);
        let exit = i64::from(out.status.code().unwrap_or(-1));
        let stdout = parsed(&out.stdout);
        let stderr = parsed(&out.stderr);
        if exit == read.exit && stdout == read.stdout && stderr == read.stderr {
            continue;
        }
        if exit == read.exit && stderr == read.stderr && documented(read, &stdout).is_some() {
            continue;
        }
        wrong.push(format!(
            "{} {}: the earlier build ({}) answered exit {} {} {}; this build exit {exit} {stdout} {stderr}",
            f.name,
            args.join(" "),
            &f.commit[..7],
            read.exit,
            read.stdout,
            read.stderr
        ));
    }
    wrong
}

/// The task ids a fixture's reads ask about, per tenant.
fn task_ids(f: &Fixture, tenant: &str) -> Vec<String> {
    f.reads
        .iter()
        .filter(|r| r.exit == 0)
        .filter_map(|r| match r.args.as_slice() {
            [_, t, task, get, id] if t == tenant && task == "task" && get == "get" => {
                Some(id.clone())
            }
            _ => None,
        })
        .collect()
}

/// Where one fixture's copy lives and how its layout mark is read.
enum Replica {
    Redb {
        file: PathBuf,
    },
    Postgres {
        /// The test database's URL, for psql.
        url: String,
        /// The same, with the copy's schema as the search path.
        db: String,
        schema: String,
    },
}

impl Replica {
    fn db(&self) -> &str {
        match self {
            Replica::Redb { file } => file.to_str().expect("a UTF-8 path"),
            Replica::Postgres { db, .. } => db,
        }
    }

    /// The tenant's layout mark, as stored (`3`, `4/1`, `5/64`...).
    fn mark(&self, tenant: &str) -> String {
        let key = leasehold_guest::schema::layout();
        match self {
            Replica::Redb { file } => {
                let table =
                    redb::TableDefinition::<&[u8], &[u8]>::new(leasehold_host::KV_TABLE_NAME);
                let mut full = leasehold_host::tenant_prefix(tenant).expect("tenant prefix");
                full.extend_from_slice(key.as_bytes());
                use redb::ReadableDatabase;
                let db = redb::Database::open(file).expect("open the copy");
                let r = db.begin_read().expect("read");
                let t = r.open_table(table).expect("table");
                let v = t.get(full.as_slice()).expect("get").expect("a layout mark");
                String::from_utf8(v.value().to_vec()).expect("an ASCII mark")
            }
            Replica::Postgres { url, schema, .. } => {
                let hex: String = key.as_bytes().iter().map(|b| format!("{b:02x}")).collect();
                psql(
                    url,
                    &format!(
                        "SELECT convert_from(value, 'UTF8') FROM {schema}.leasehold_kv \
                         WHERE tenant = '{tenant}' AND key = '\\x{hex}'::bytea"
                    ),
                )
                .trim()
                .to_owned()
            }
        }
    }
}

/// Runs SQL through psql (the dump's COPY blocks need it) and returns what
/// it printed, unaligned.
fn psql(url: &str, sql: &str) -> String {
    use std::io::Write;
    let mut child = Command::new("psql")
        .args(["-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", url])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("psql runs where PostgreSQL tests do");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(sql.as_bytes())
        .expect("write to psql");
    let out = child.wait_with_output().expect("psql");
    assert!(
        out.status.success(),
        "psql: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The layout version a mark names: what precedes its `/`.
fn version(mark: &str) -> u32 {
    mark.split('/')
        .next()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("mark {mark:?}"))
}

const TENANTS: [&str; 4] = ["alpha", "beta", "gamma", "delta"];

/// The layout this build writes: a write moves any older mark to it.
const THIS_LAYOUT: u32 = 10;

/// The whole proof for one fixture on its copy.
fn prove(f: &Fixture, copy: &Replica, layout: u32, dir: &Path) {
    let db = copy.db();
    let marks: Vec<String> = TENANTS.iter().map(|t| copy.mark(t)).collect();
    for (t, m) in TENANTS.iter().zip(&marks) {
        assert_eq!(version(m), layout, "{}: {t}'s mark is {m}", f.name);
    }

    // 1. Every read as the earlier build answered it.
    let wrong = compare(f, dir, db, None);
    assert!(
        wrong.is_empty(),
        "{} answers differ:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
    // A build without history never answered one; this build answers each
    // old task's history as empty, or as the one entry the other change
    // documents, and never invents changes it did not see.
    if !f.history {
        for id in task_ids(f, "alpha") {
            let h = ok(
                &leasehold(dir, db, &["--tenant", "alpha", "task", "history", &id]),
                "history",
            );
            assert!(
                h == json!([]) || before_history(&h),
                "{}: history of {id} before any write: {h}",
                f.name
            );
        }
    }
    // Reading moves no mark.
    let after_reads: Vec<String> = TENANTS.iter().map(|t| copy.mark(t)).collect();
    assert_eq!(marks, after_reads, "{}: reads moved a layout mark", f.name);

    // 2. Writes of every verb kind on the old data, in alpha, beta and gamma.
    let alpha = |args: &[&str]| -> Value {
        let mut all = vec!["--tenant", "alpha"];
        all.extend_from_slice(args);
        ok(
            &leasehold(dir, db, &all),
            &format!("{}: {}", f.name, args.join(" ")),
        )
    };
    let day1 = "2026-05-05T09:00:00Z";
    let new_task = r#"{"id":"new-1","run":"r-1","kind":"review","case":"c1","candidate_roles":["clerk"],"created_at":"2026-05-05T09:00:00Z"}"#;
    let opened = write_stdin(dir, db, "alpha", &["task", "open", "-"], new_task);
    assert_eq!(opened["state"], "open", "{}: {opened}", f.name);
    let old = ok(
        &leasehold(dir, db, &["--tenant", "alpha", "task", "get", "q-high"]),
        "get",
    );
    let again = write_stdin(
        dir,
        db,
        "alpha",
        &["task", "open", "-"],
        r#"{"id":"q-high","run":"r-9","kind":"other"}"#,
    );
    assert_eq!(
        again, old,
        "{}: the first open wins over an old task",
        f.name
    );
    let claimed = alpha(&[
        "task", "claim", "q-high", "--actor", "alice", "--role", "clerk", "--lease", "1h", "--now",
        day1,
    ]);
    assert_eq!(claimed["assignee"], "alice", "{}: {claimed}", f.name);
    // An old task's first change under this build is its revision 1, and
    // its history goes on without inventing the changes before it.
    assert_eq!(claimed["revision"], 1, "{}: {claimed}", f.name);
    assert_eq!(claimed["decision"], Value::Null, "{}: {claimed}", f.name);
    alpha(&[
        "task",
        "renew",
        "q-high",
        "--actor",
        "alice",
        "--lease",
        "2h",
        "--now",
        "2026-05-05T09:30:00Z",
    ]);
    let next = alpha(&[
        "task",
        "claim-next",
        "--actor",
        "frank",
        "--role",
        "clerk",
        "--lease",
        "1h",
        "--now",
        day1,
    ]);
    assert_eq!(next["id"], "q-multi", "{}: urgent first: {next}", f.name);
    alpha(&["task", "release", "held", "--actor", "alice"]);
    let taken = alpha(&[
        "task",
        "take-over",
        "taken",
        "--from",
        "dave",
        "--actor",
        "erin",
        "--role",
        "clerk",
    ]);
    assert_eq!(taken["assignee"], "erin", "{}: {taken}", f.name);
    let settled = alpha(&["task", "settle", "leased", "completed", "--holder", "bob"]);
    assert_eq!(settled["settled"], true, "{}: {settled}", f.name);
    let escalated = alpha(&["task", "escalate", "q-multi"]);
    assert_eq!(escalated["state"], "escalated", "{}: {escalated}", f.name);
    let reclaimed = alpha(&["task", "reclaim", "--now", "2026-05-06T00:00:00Z"]);
    assert!(
        reclaimed
            .as_array()
            .is_some_and(|r| r.iter().any(|t| t["id"] == "renewed")),
        "{}: the old lease of `renewed` lapsed: {reclaimed}",
        f.name
    );
    let expired = alpha(&["task", "expire", "--now", "2026-05-06T00:00:00Z"]);
    assert!(
        expired
            .as_array()
            .is_some_and(|r| r.iter().any(|t| t["id"] == "q-late")),
        "{}: the old overdue task acts: {expired}",
        f.name
    );
    let withdrawn = alpha(&["task", "withdraw-run", "r-1", "lapsed", "released"]);
    assert_eq!(withdrawn["withdrawn"], 2, "{}: {withdrawn}", f.name);
    let armed = write_stdin(
        dir,
        db,
        "alpha",
        &["timer", "arm", "-"],
        r#"{"run":"r-t","effect":"fresh","fire_at":"2026-05-05T00:00:00Z"}"#,
    );
    assert_eq!(armed["outcome"], "armed", "{}: {armed}", f.name);
    let swept = alpha(&[
        "timer",
        "sweep",
        "--now",
        "2026-05-07T00:00:00Z",
        "--lease",
        "30s",
    ]);
    let effects: Vec<&str> = swept
        .as_array()
        .expect("claimed timers")
        .iter()
        .filter_map(|t| t["effect"].as_str())
        .collect();
    assert_eq!(
        effects,
        ["soon", "undo", "fresh", "later"],
        "{}: old and new timers due, the old claim lapsed",
        f.name
    );
    let one = alpha(&["timer", "disarm", "r-t", "undo"]);
    assert_eq!(one["disarmed"], true, "{}: {one}", f.name);
    let run = alpha(&["timer", "disarm-run", "r-t"]);
    assert_eq!(run["disarmed"], 3, "{}: {run}", f.name);
    let sealed = alpha(&["run", "seal", "r-1", "--awaited", "new-1", "renewed"]);
    assert_eq!(sealed["tasks_withdrawn"], 2, "{}: {sealed}", f.name);
    // This build records history on every layout: the writes above are in it.
    let history = alpha(&["task", "history", "q-high"]);
    let verbs: Vec<&str> = history
        .as_array()
        .expect("history")
        .iter()
        .filter_map(|e| e["verb"].as_str())
        .collect();
    assert!(
        verbs.ends_with(&["claim", "renew", "reclaim-lapsed", "expire-overdue"]),
        "{}: history of q-high after the writes: {verbs:?}",
        f.name
    );
    // Each history the earlier build kept goes on where it stood: every old
    // task's history, after the writes above, begins with what that build
    // answered, whether this build reads it under its keys or in the feed.
    if f.history {
        for read in &f.reads {
            let [_, t, task, history, id] = read.args.as_slice() else {
                continue;
            };
            if read.exit != 0 || t != "alpha" || task != "task" || history != "history" {
                continue;
            }
            let now = alpha(&["task", "history", id]);
            let (old, new) = (
                read.stdout.as_array().expect("the earlier history"),
                now.as_array().expect("this build's history"),
            );
            // The old entries read with layout 10's fields at their defaults.
            let kept = new
                .get(..old.len())
                .and_then(|kept| without_layout_10_defaults(&Value::Array(kept.to_vec())));
            assert!(
                kept.as_ref().and_then(Value::as_array) == Some(old),
                "{}: the history of {id} was {} and is now {now}",
                f.name,
                read.stdout
            );
        }
    }
    let events = alpha(&["events", "--limit", "1000"]);
    assert!(
        events["page"]["entries"]
            .as_array()
            .is_some_and(|e| !e.is_empty()),
        "{}: {events}",
        f.name
    );
    let trimmed = alpha(&["trim", "--keep", "5"]);
    assert!(trimmed["feed_removed"].is_u64(), "{}: {trimmed}", f.name);

    let beta = ok(
        &leasehold(
            dir,
            db,
            &[
                "--tenant", "beta", "task", "claim", "b-open", "--actor", "bob", "--role", "clerk",
            ],
        ),
        "beta claim",
    );
    assert_eq!(beta["assignee"], "bob");
    ok(
        &leasehold(
            dir,
            db,
            &[
                "--tenant",
                "beta",
                "task",
                "settle",
                "b-held",
                "completed",
                "--holder",
                "alice",
            ],
        ),
        "beta settle",
    );
    let gamma = ok(
        &leasehold(
            dir,
            db,
            &[
                "--tenant",
                "gamma",
                "timer",
                "sweep",
                "--now",
                "2026-05-10T00:00:00Z",
            ],
        ),
        "gamma sweep",
    );
    assert_eq!(
        gamma.as_array().map(Vec::len),
        Some(3),
        "{}: {gamma}",
        f.name
    );
    ok(
        &leasehold(dir, db, &["--tenant", "gamma", "run", "seal", "r-t"]),
        "gamma seal",
    );
    // A tenant new to this database is laid out by this build.
    write_stdin(
        dir,
        db,
        "epsilon",
        &["task", "open", "-"],
        r#"{"id":"e-1","run":"r-e","kind":"review"}"#,
    );

    // 3. The tenant nobody wrote to reads as before, every tenant checks
    //    clean, and every mark names this layout or a later one.
    let wrong = compare(f, dir, db, Some("delta"));
    assert!(
        wrong.is_empty(),
        "{}: delta changed under the other tenants' writes:\n{}",
        f.name,
        wrong.join("\n")
    );
    for tenant in TENANTS.iter().chain(&["epsilon"]) {
        let found = ok(
            &leasehold(dir, db, &["--tenant", tenant, "check"]),
            &format!("{}: check {tenant}", f.name),
        );
        assert_eq!(found, json!([]), "{}: check {tenant}", f.name);
    }
    // A write may move a tenant's mark to this build's layout, never back;
    // the tenants written all stand at one layout, and delta, never
    // written, keeps its mark.
    let after: Vec<String> = TENANTS.iter().map(|t| copy.mark(t)).collect();
    for ((tenant, before), after) in TENANTS.iter().zip(&marks).zip(&after) {
        assert!(
            version(after) >= version(before),
            "{}: {tenant}'s mark went from {before} to {after}",
            f.name
        );
    }
    let written: Vec<u32> = after[..3].iter().map(|m| version(m)).collect();
    assert!(
        written.iter().all(|v| *v == THIS_LAYOUT),
        "{}: the first write moves a mark to layout {THIS_LAYOUT}: {after:?}",
        f.name
    );
    assert_eq!(
        after[3], marks[3],
        "{}: delta's mark moved unwritten",
        f.name
    );
    assert_eq!(
        version(&copy.mark("epsilon")),
        written[0],
        "{}: a new tenant is laid out at the layout the written ones now have",
        f.name
    );
}

/// A write that reads JSON on standard input.
fn write_stdin(dir: &Path, db: &str, tenant: &str, args: &[&str], input: &str) -> Value {
    let out = cargo_bin_cmd!("leasehold")
        .current_dir(dir)
        .env_remove("LEASEHOLD_DB")
        .args(["--json", "--db", db, "--tenant", tenant])
        .args(args)
        .write_stdin(input)
        .output()
        .expect("run leasehold");
    ok(&out, &format!("{tenant}: {}", args.join(" ")))
}

fn redb_fixture(name: &str, layout: u32) {
    let f = load(name);
    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join("copy.redb");
    std::fs::copy(fixture_dir(name).join("db.redb"), &file).expect("copy the fixture");
    prove(&f, &Replica::Redb { file }, layout, dir.path());
}

fn postgres_fixture(name: &str, layout: u32) {
    let Some(url) = postgres() else { return };
    let f = load(name);
    let dir = tempfile::tempdir().expect("temp dir");
    // A schema of this run's own: the test database is shared by the run.
    let schema = format!(
        "fixture_{}_{}_{}",
        name.replace('-', "_"),
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis())
            .unwrap_or(0)
    );
    let dump = std::fs::read_to_string(fixture_dir(name).join("db.sql"))
        .unwrap_or_else(|e| panic!("{name}: db.sql ({e}); run tests/fixtures/make"));
    psql(
        &url,
        &format!("CREATE SCHEMA {schema}; SET search_path TO {schema};\n{dump}"),
    );
    let sep = if url.contains('?') { '&' } else { '?' };
    let db = format!("{url}{sep}options=-csearch_path%3D{schema}");
    let copy = Replica::Postgres {
        url: url.clone(),
        db,
        schema: schema.clone(),
    };
    prove(&f, &copy, layout, dir.path());
    psql(&url, &format!("DROP SCHEMA {schema} CASCADE;"));
}

#[test]
fn layout_3_written_by_an_earlier_build_reads_the_same_and_checks_clean_after_writes() {
    redb_fixture("layout-3", 3);
}

#[test]
fn layout_4_written_by_an_earlier_build_reads_the_same_and_checks_clean_after_writes() {
    redb_fixture("layout-4", 4);
}

#[test]
fn layout_5_written_by_the_previous_release_reads_the_same_and_checks_clean_after_writes() {
    redb_fixture("layout-5", 5);
}

#[test]
fn layout_7_written_by_an_earlier_build_reads_the_same_and_checks_clean_after_writes() {
    redb_fixture("layout-7", 7);
}

#[test]
fn layout_8_written_by_an_earlier_build_reads_the_same_and_checks_clean_after_writes() {
    redb_fixture("layout-8", 8);
}

#[test]
fn layout_9_written_by_the_previous_release_reads_the_same_and_checks_clean_after_writes() {
    redb_fixture("layout-9", 9);
}

/// The other half of the version rule: the previous release (layout 9)
/// meets a keyspace this build wrote. `tests/fixtures/make` asked that
/// build's own binary, once, about a copy of its fixture after this
/// build's `newer.write` (`newer.json`); it refused by name and wrote
/// nothing. Here this build makes the same write on a fresh copy and must
/// leave the mark the old binary was shown, so what it answered still
/// holds for what this build writes.
#[test]
fn the_previous_release_refuses_a_keyspace_this_build_wrote_as_newer_layout() {
    let dir = fixture_dir("layout-9");
    let text = std::fs::read_to_string(dir.join("newer.json"))
        .unwrap_or_else(|e| panic!("layout-9: newer.json ({e}); run tests/fixtures/make layout-9"));
    let newer: Value = serde_json::from_str(&text).expect("newer.json");
    let refusal = &newer["read"];
    assert_ne!(refusal["exit"], 0, "{newer}");
    assert_eq!(refusal["stdout"], Value::Null, "{newer}");
    assert_eq!(refusal["stderr"]["error"], "newer_layout", "{newer}");
    let detail = refusal["stderr"]["detail"].as_str().expect("a detail");
    assert!(
        detail.contains("layout 10") && detail.contains("layout 9"),
        "the refusal names both layouts: {detail}"
    );

    let f = load("layout-9");
    let scratch = tempfile::tempdir().expect("temp dir");
    let file = scratch.path().join("copy.redb");
    std::fs::copy(dir.join("db.redb"), &file).expect("copy the fixture");
    let copy = Replica::Redb { file };
    let args: Vec<&str> = newer["write"]
        .as_array()
        .expect("the write's arguments")
        .iter()
        .map(|a| a.as_str().expect("an argument"))
        // `leasehold` here passes --json itself.
        .filter(|a| *a != "--json")
        .collect();
    ok(
        &leasehold(scratch.path(), copy.db(), &args),
        "the newer write",
    );
    assert_eq!(
        copy.mark("alpha"),
        newer["mark"].as_str().expect("the mark shown"),
        "{}: this build's first write leaves the mark the old build refused",
        f.name
    );
}

#[test]
fn postgres_schema_1_written_by_an_earlier_build_reads_the_same_and_checks_clean_after_writes() {
    postgres_fixture("postgres-1", 4);
}

#[test]
fn postgres_schema_2_written_by_the_previous_release_reads_the_same_and_checks_clean_after_writes()
{
    postgres_fixture("postgres-2", 5);
}

/// The named differences are as narrow as their names: anything else that
/// differs is reported.
#[test]
fn only_the_named_differences_are_forgiven() {
    let read = |args: &[&str], stdout: Value| Read {
        args: args.iter().map(|a| (*a).to_owned()).collect(),
        exit: 0,
        stdout,
        stderr: Value::Null,
    };
    let history = read(&["--tenant", "a", "task", "history", "t"], json!([]));
    let marker = json!([{"seq": 0, "verb": "before-history"}]);
    assert!(documented(&history, &marker).is_some());
    let two = json!([{"seq": 0, "verb": "before-history"}, {"seq": 1, "verb": "claim"}]);
    assert!(documented(&history, &two).is_none(), "a change invented");
    let real = read(
        &["--tenant", "a", "task", "history", "t"],
        json!([{"seq": 1, "verb": "open"}]),
    );
    assert!(documented(&real, &marker).is_none(), "a kept history lost");
    let get = read(&["--tenant", "a", "task", "get", "t"], json!([]));
    assert!(documented(&get, &marker).is_none(), "not a history read");

    let old_task = json!({"id": "t", "justification": "{}", "state": "open"});
    let get = read(&["--tenant", "a", "task", "get", "t"], old_task.clone());
    let mut now = old_task.clone();
    now["revision"] = json!(0);
    now["decision"] = Value::Null;
    now["outcomes"] = json!([]);
    now["remind_before"] = json!([]);
    now["escalation"] = json!([]);
    now["steps_done"] = json!(0);
    assert!(documented(&get, &now).is_some());
    let mut reminded = now.clone();
    reminded["steps_done"] = json!(1);
    assert!(
        documented(&get, &reminded).is_none(),
        "a step fired on old data"
    );
    let mut changed = now.clone();
    changed["revision"] = json!(1);
    assert!(
        documented(&get, &changed).is_none(),
        "an old task at revision 1"
    );
    let mut decided = now.clone();
    decided["decision"] = json!({"outcome": "approved"});
    assert!(documented(&get, &decided).is_none(), "a decision invented");
    let mut other = now.clone();
    other["state"] = json!("claimed");
    assert!(documented(&get, &other).is_none(), "another field changed");
    let mut lost = now;
    lost.as_object_mut().map(|m| m.remove("revision"));
    assert!(documented(&get, &lost).is_none(), "a new field left out");

    let stats = read(&["--tenant", "a", "stats"], json!({"open_count": 1}));
    assert!(documented(&stats, &json!({"open_count": 1, "layout": "8/1"})).is_some());
    assert!(documented(&stats, &json!({"open_count": 2, "layout": "8/1"})).is_none());
    assert!(documented(&stats, &json!({"open_count": 1, "other": 1})).is_none());
    assert!(documented(&stats, &json!({"open_count": 1, "next_wake": null})).is_some());
    assert!(
        documented(&stats, &json!({"layout": "8/1"})).is_none(),
        "a key lost"
    );
    let case = read(
        &["--tenant", "a", "case", "layout"],
        json!({"open_count": 1}),
    );
    assert!(documented(&case, &json!({"open_count": 1, "layout": "8/1"})).is_none());
}
