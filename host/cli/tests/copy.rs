//! `leasehold copy` and `leasehold tenant export/import/delete`, run for
//! real: tenants filled through the library (tasks in every state, timers,
//! sealed runs, history and feed), copied redb to redb and redb to
//! PostgreSQL and back, then every read answered the same from both sides,
//! the digests equal and `check` clean; a non-empty target refused; a copy
//! stopped part way leaves nothing; an export imported back; a tenant
//! deleted. Moves are bounded and all-or-nothing (issue 60): an entry over
//! the engine's limits, a line of a gibibyte, a file swapped after it was
//! checked, a failure after a thousand good entries, a writer meeting the
//! import: each leaves the target as it was; a second import started while
//! one holds the target goes on only after it committed.

use std::path::{Path, PathBuf};
use std::process::Output;

use assert_cmd::cargo::cargo_bin_cmd;
use leasehold_host::{Durability, Engine};
use serde_json::Value;

#[path = "support/dataset.rs"]
mod dataset;
use dataset::{T0, fill_at_once, fill_tenant};

#[path = "support/postgres.rs"]
mod pg_support;
use pg_support::postgres;

/// The test-only hook that stops a copy after this many batches.
const STOP_AFTER: &str = "LEASEHOLD_COPY_STOP_AFTER_BATCHES";

/// Runs the binary with `args` (with `--json`), from `dir`.
fn leasehold(dir: &Path, args: &[&str]) -> Output {
    leasehold_env(dir, args, None)
}

fn leasehold_env(dir: &Path, args: &[&str], env: Option<(&str, &str)>) -> Output {
    let mut c = cargo_bin_cmd!("leasehold");
    c.current_dir(dir)
        .env_remove("LEASEHOLD_DB")
        .env_remove(STOP_AFTER)
        .arg("--json")
        .args(args);
    if let Some((k, v)) = env {
        c.env(k, v);
    }
    c.output().expect("run leasehold")
}

fn json(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not JSON ({e}): {}\nstderr: {}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

fn ok(out: Output) -> Value {
    assert!(
        out.status.success(),
        "exit {:?}: {}{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    json(&out)
}

fn error(out: &Output, code: i32) -> Value {
    assert_eq!(
        out.status.code(),
        Some(code),
        "stdout: {}\nstderr: {}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stderr).expect("the error is one JSON object")
}

/// Fills each tenant with `n` tasks in every state, timers armed, swept
/// and disarmed, and a sealed run.
fn fill(db: &Path, tenants: &[&str], n: usize) {
    let engine = Engine::builder()
        .durability(Durability::None)
        .open(db)
        .expect("open the source");
    for name in tenants {
        fill_tenant(&engine.tenant(name).expect("tenant"), name, n);
    }
}

/// What every read answers for `tenant` on `db`, as the binary prints it.
fn reads(dir: &Path, db: &str, tenant: &str, n: usize) -> Vec<Value> {
    let mut answers = Vec::new();
    let mut read = |args: &[&str]| {
        let mut all = vec!["--db", db, "--tenant", tenant];
        all.extend_from_slice(args);
        answers.push(ok(leasehold(dir, &all)));
    };
    for role in ["r0", "r1", "r2"] {
        read(&["queue", "--role", role, "lead", "--limit", "1000"]);
    }
    read(&["events", "--limit", "1000"]);
    read(&["case", "case-3", "--limit", "1000"]);
    read(&[
        "overdue",
        "--now",
        &(T0 + 120_000).to_string(),
        "--limit",
        "1000",
    ]);
    read(&["timer", "next"]);
    read(&["run", "sealed", "run-10"]);
    for i in [0, 1, 2, 3, 5, 10, n - 1] {
        let id = format!("{tenant}-t{i:05}");
        read(&["task", "get", &id]);
        read(&["task", "history", &id]);
    }
    let mut stats = ok(leasehold(dir, &["--db", db, "--tenant", tenant, "stats"]));
    // The only read of the clock: when the answer was made.
    if let Some(o) = stats.as_object_mut() {
        o.remove("now");
    }
    answers.push(stats);
    answers
}

fn copy(dir: &Path, from: &str, to: &str, tenants: &[&str]) -> Output {
    let mut args = vec!["copy", "--from", from, "--to", to];
    for t in tenants {
        args.extend(["--tenant", t]);
    }
    leasehold(dir, &args)
}

/// Asserts a copy's answer says every tenant's digests match and its check
/// is clean, and answers each tenant's outcome and target digest.
fn copied(answer: &Value) -> Vec<(String, String, String)> {
    assert_eq!(answer["ok"], true, "{answer}");
    answer["tenants"]
        .as_array()
        .expect("tenants")
        .iter()
        .map(|t| {
            assert_eq!(t["digests_match"], true, "{t}");
            assert_eq!(t["source_sha256"], t["target_sha256"], "{t}");
            assert_eq!(t["discrepancies"], serde_json::json!([]), "{t}");
            (
                t["tenant"].as_str().expect("tenant").to_owned(),
                t["outcome"].as_str().expect("outcome").to_owned(),
                t["target_sha256"].as_str().expect("digest").to_owned(),
            )
        })
        .collect()
}

fn path(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

fn export_digest(dir: &Path, db: &str, tenant: &str) -> (u64, String) {
    let file = dir.join(format!("{tenant}.export"));
    let answer = ok(leasehold(
        dir,
        &[
            "--db",
            db,
            "--tenant",
            tenant,
            "tenant",
            "export",
            "--out",
            path(&file),
        ],
    ));
    (
        answer["keys"].as_u64().expect("keys"),
        answer["sha256"].as_str().expect("sha256").to_owned(),
    )
}

#[test]
fn copy_redb_to_redb_answers_every_read_the_same_and_a_second_copy_writes_nothing() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (src, dst) = (dir.path().join("src.redb"), dir.path().join("dst.redb"));
    let tenants = ["acme", "globex", "initech"];
    let n = 120;
    fill(&src, &tenants, n);

    let answer = ok(copy(dir.path(), path(&src), path(&dst), &[]));
    let done = copied(&answer);
    let names: Vec<&str> = done.iter().map(|(t, _, _)| t.as_str()).collect();
    assert_eq!(names, tenants, "every tenant of the source, in order");
    assert!(done.iter().all(|(_, o, _)| o == "copied"), "{answer}");

    for tenant in tenants {
        assert_eq!(
            reads(dir.path(), path(&src), tenant, n),
            reads(dir.path(), path(&dst), tenant, n),
            "{tenant} reads differently after the copy"
        );
        let check = ok(leasehold(
            dir.path(),
            &["--db", path(&dst), "--tenant", tenant, "check"],
        ));
        assert_eq!(check, serde_json::json!([]), "{tenant}");
    }

    // Run again: every tenant is recognised as copied and nothing is written.
    let again = ok(copy(dir.path(), path(&src), path(&dst), &["globex"]));
    let again = copied(&again);
    assert_eq!(again.len(), 1);
    assert_eq!(again[0].1, "already_copied");
    assert_eq!(again[0].2, done[1].2, "the same digest as the first copy");
}

#[test]
fn copy_refuses_a_target_tenant_that_holds_other_keys_and_writes_nothing() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (src, dst) = (dir.path().join("src.redb"), dir.path().join("dst.redb"));
    fill(&src, &["acme", "globex"], 20);
    // The target's globex holds a task of its own.
    let own = dir.path().join("own.json");
    std::fs::write(&own, r#"{"id":"theirs","run":"r","kind":"k"}"#).expect("write");
    ok(leasehold(
        dir.path(),
        &[
            "--db",
            path(&dst),
            "--tenant",
            "globex",
            "task",
            "open",
            path(&own),
        ],
    ));
    let (keys_before, digest_before) = export_digest(dir.path(), path(&dst), "globex");

    let out = copy(dir.path(), path(&src), path(&dst), &[]);
    let e = error(&out, 1);
    assert_eq!(e["error"], "not_empty", "{e}");
    assert_eq!(e["detail"], "globex", "{e}");
    assert!(
        e["message"].as_str().is_some_and(|m| m.contains("globex")),
        "{e}"
    );
    assert_eq!(
        export_digest(dir.path(), path(&dst), "globex"),
        (keys_before, digest_before),
        "the refused tenant is untouched"
    );
    assert_eq!(
        export_digest(dir.path(), path(&dst), "acme").0,
        0,
        "a refusal comes before any tenant is written"
    );
    // Named on its own, the empty tenant copies.
    ok(copy(dir.path(), path(&src), path(&dst), &["acme"]));

    // Copying a file onto itself is refused before anything opens.
    error(&copy(dir.path(), path(&src), path(&src), &[]), 2);
}

/// A copy is one transaction on its target: stopped after its first batch
/// went in (as a killed one would be), it leaves the target as it was,
/// another tenant there untouched, and the same command run again copies
/// the whole, with the digest of a copy that was never stopped.
#[test]
fn a_copy_stopped_part_way_leaves_the_target_as_it_was_and_runs_again_whole() {
    let dir = tempfile::tempdir().expect("temp dir");
    let src = dir.path().join("src.redb");
    let (once, twice) = (dir.path().join("once.redb"), dir.path().join("twice.redb"));
    let n = 1500;
    fill(&src, &["acme"], n);
    fill(&twice, &["other"], 10);
    let other = export_digest(dir.path(), path(&twice), "other");

    let whole = copied(&ok(copy(dir.path(), path(&src), path(&once), &["acme"])));
    assert_eq!(whole[0].1, "copied");

    let stopped = leasehold_env(
        dir.path(),
        &[
            "copy",
            "--from",
            path(&src),
            "--to",
            path(&twice),
            "--tenant",
            "acme",
        ],
        Some((STOP_AFTER, "1")),
    );
    let e = error(&stopped, 3);
    assert_eq!(e["error"], "stopped", "{e}");
    let (all, digest) = export_digest(dir.path(), path(&src), "acme");
    assert!(
        all > 4096,
        "{all} keys make one batch only: make the tenant larger"
    );
    assert_eq!(
        export_digest(dir.path(), path(&twice), "acme").0,
        0,
        "a copy stopped part way left nothing"
    );
    assert_eq!(export_digest(dir.path(), path(&twice), "other"), other);

    let again = ok(copy(dir.path(), path(&src), path(&twice), &["acme"]));
    assert_eq!(again["tenants"][0]["kept_keys"], 0, "{again}");
    let again = copied(&again);
    assert_eq!(again[0].1, "copied");
    assert_eq!(again[0].2, whole[0].2, "the same digest as a whole copy");
    assert_eq!(again[0].2, digest, "the same digest as the export's");
    assert_eq!(
        reads(dir.path(), path(&once), "acme", n),
        reads(dir.path(), path(&twice), "acme", n)
    );
}

#[test]
fn an_export_imports_back_to_the_same_digest_and_a_damaged_one_is_refused() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (src, dst) = (dir.path().join("src.redb"), dir.path().join("dst.redb"));
    let n = 800;
    fill(&src, &["acme"], n);
    let file = dir.path().join("acme.jsonl");
    let exported = ok(leasehold(
        dir.path(),
        &[
            "--db",
            path(&src),
            "--tenant",
            "acme",
            "tenant",
            "export",
            "--out",
            path(&file),
        ],
    ));
    let text = std::fs::read_to_string(&file).expect("read export");
    let first: Value = serde_json::from_str(text.lines().next().expect("a line")).expect("json");
    assert_eq!(first["format"], "leasehold-tenant-keys");
    assert_eq!(first["tenant"], "acme");

    // A file cut short, or with a changed value, is refused.
    let lines: Vec<&str> = text.lines().collect();
    let cut = dir.path().join("cut.jsonl");
    std::fs::write(&cut, lines[..lines.len() - 1].join("\n")).expect("write");
    let e = error(
        &leasehold(
            dir.path(),
            &["--db", path(&dst), "tenant", "import", "--in", path(&cut)],
        ),
        2,
    );
    assert_eq!(e["error"], "bad_file", "{e}");
    let changed = dir.path().join("changed.jsonl");
    let mut altered: Vec<String> = lines.iter().map(|l| (*l).to_owned()).collect();
    let late = altered.len() - 2;
    altered[late] = altered[late].replacen("\"value\":\"", "\"value\":\"00", 1);
    std::fs::write(&changed, altered.join("\n")).expect("write");
    let e = error(
        &leasehold(
            dir.path(),
            &[
                "--db",
                path(&dst),
                "--tenant",
                "elsewhere",
                "tenant",
                "import",
                "--in",
                path(&changed),
            ],
        ),
        2,
    );
    assert_eq!(e["error"], "bad_file", "{e}");
    assert!(
        !dst.exists(),
        "a damaged file is refused with no database left at the name"
    );

    // Into a tenant of another name: the same keys, the same digest.
    let imported = ok(leasehold(
        dir.path(),
        &[
            "--db",
            path(&dst),
            "--tenant",
            "copy-of-acme",
            "tenant",
            "import",
            "--in",
            path(&file),
        ],
    ));
    assert_eq!(imported["digests_match"], true, "{imported}");
    assert_eq!(imported["discrepancies"], serde_json::json!([]));
    assert_eq!(imported["target_sha256"], exported["sha256"], "{imported}");
    assert_eq!(imported["keys"], exported["keys"]);
    assert_eq!(
        export_digest(dir.path(), path(&dst), "copy-of-acme").1,
        exported["sha256"].as_str().expect("sha256")
    );
    // Its reads are the source's (the ids carry the old name, as they should).
    let src_get = ok(leasehold(
        dir.path(),
        &[
            "--db",
            path(&src),
            "--tenant",
            "acme",
            "task",
            "get",
            "acme-t00002",
        ],
    ));
    let dst_get = ok(leasehold(
        dir.path(),
        &[
            "--db",
            path(&dst),
            "--tenant",
            "copy-of-acme",
            "task",
            "get",
            "acme-t00002",
        ],
    ));
    assert_eq!(src_get, dst_get);
}

#[test]
fn delete_empties_one_tenant_leaves_the_others_and_wants_yes() {
    let dir = tempfile::tempdir().expect("temp dir");
    let db = dir.path().join("db.redb");
    fill(&db, &["acme", "acmeco", "globex"], 60);
    let others: Vec<_> = ["acmeco", "globex"]
        .iter()
        .map(|t| export_digest(dir.path(), path(&db), t))
        .collect();

    let e = error(
        &leasehold(
            dir.path(),
            &["--db", path(&db), "--tenant", "acme", "tenant", "delete"],
        ),
        2,
    );
    assert!(
        e["message"].as_str().is_some_and(|m| m.contains("--yes")),
        "{e}"
    );
    // Never the default tenant by omission.
    error(
        &leasehold(
            dir.path(),
            &["--db", path(&db), "tenant", "delete", "--yes"],
        ),
        2,
    );
    let (keys, _) = export_digest(dir.path(), path(&db), "acme");
    let deleted = ok(leasehold(
        dir.path(),
        &[
            "--db",
            path(&db),
            "--tenant",
            "acme",
            "tenant",
            "delete",
            "--yes",
        ],
    ));
    assert_eq!(deleted["deleted_keys"], keys, "{deleted}");
    assert_eq!(export_digest(dir.path(), path(&db), "acme").0, 0);
    let stats = ok(leasehold(
        dir.path(),
        &["--db", path(&db), "--tenant", "acme", "stats"],
    ));
    assert_eq!(stats["open_count"], 0, "{stats}");
    let listed = ok(leasehold(
        dir.path(),
        &[
            "copy",
            "--from",
            path(&db),
            "--to",
            path(&dir.path().join("x.redb")),
        ],
    ));
    let names: Vec<&str> = listed["tenants"]
        .as_array()
        .expect("tenants")
        .iter()
        .filter_map(|t| t["tenant"].as_str())
        .collect();
    assert_eq!(names, ["acmeco", "globex"], "acme is gone from the listing");
    let after: Vec<_> = ["acmeco", "globex"]
        .iter()
        .map(|t| export_digest(dir.path(), path(&db), t))
        .collect();
    assert_eq!(others, after, "the other tenants are untouched");
}

#[test]
fn copy_redb_to_postgres_and_back_answers_every_read_the_same() {
    let Some(url) = postgres() else { return };
    // Tenants of this test's own: the test database is shared by the run.
    let run = format!(
        "{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis())
            .unwrap_or(0)
    );
    let names: Vec<String> = ["a", "b"].iter().map(|t| format!("cp{t}-{run}")).collect();
    let tenants: Vec<&str> = names.iter().map(String::as_str).collect();
    let dir = tempfile::tempdir().expect("temp dir");
    let (src, back): (PathBuf, PathBuf) =
        (dir.path().join("src.redb"), dir.path().join("back.redb"));
    let n = 300;
    fill(&src, &tenants, n);

    // Stopped after its first batch (the first tenant, whole): the copy is
    // one transaction, so it left nothing; run again, it copies both.
    let mut args = vec!["copy", "--from", path(&src), "--to", &url];
    for t in &tenants {
        args.extend(["--tenant", t]);
    }
    let stopped = leasehold_env(dir.path(), &args, Some((STOP_AFTER, "1")));
    assert_eq!(error(&stopped, 3)["error"], "stopped");
    for t in &tenants {
        assert_eq!(
            export_digest(dir.path(), &url, t).0,
            0,
            "{t}: nothing written"
        );
    }
    let there = copied(&ok(copy(dir.path(), path(&src), &url, &tenants)));
    let outcomes: Vec<&str> = there.iter().map(|(_, o, _)| o.as_str()).collect();
    assert_eq!(outcomes, ["copied", "copied"]);
    // A second copy finds both whole and writes nothing.
    let again = copied(&ok(copy(dir.path(), path(&src), &url, &tenants)));
    let outcomes: Vec<&str> = again.iter().map(|(_, o, _)| o.as_str()).collect();
    assert_eq!(outcomes, ["already_copied", "already_copied"]);
    let back_again = copied(&ok(copy(dir.path(), &url, path(&back), &tenants)));
    for ((t, _, d1), (_, _, d2)) in there.iter().zip(&back_again) {
        assert_eq!(d1, d2, "{t}: the digest survives the round trip");
    }
    for tenant in &tenants {
        let from_redb = reads(dir.path(), path(&src), tenant, n);
        assert_eq!(
            from_redb,
            reads(dir.path(), &url, tenant, n),
            "{tenant} on PostgreSQL"
        );
        assert_eq!(
            from_redb,
            reads(dir.path(), path(&back), tenant, n),
            "{tenant} back on redb"
        );
    }
    // Leave the shared database as it was.
    for tenant in &tenants {
        ok(leasehold(
            dir.path(),
            &[
                "--db", &url, "--tenant", tenant, "tenant", "delete", "--yes",
            ],
        ));
    }
}

/// `--out` naming something that is not a plain file (a pipe here; a
/// device such as `/dev/null` alike) is written to, never renamed over: it
/// is still a pipe afterwards, and what came through it is the export.
#[test]
fn an_export_to_a_pipe_writes_through_it_and_leaves_it_a_pipe() {
    use std::os::unix::fs::FileTypeExt;
    let dir = tempfile::tempdir().expect("temp dir");
    let src = dir.path().join("src.redb");
    fill(&src, &["acme"], 50);
    let fifo = dir.path().join("pipe");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .expect("mkfifo runs");
    assert!(made.success());
    let reader = {
        let fifo = fifo.clone();
        std::thread::spawn(move || std::fs::read_to_string(fifo).expect("read the pipe"))
    };
    let exported = ok(leasehold(
        dir.path(),
        &[
            "--db",
            path(&src),
            "--tenant",
            "acme",
            "tenant",
            "export",
            "--out",
            path(&fifo),
        ],
    ));
    // Checked before the reader is joined: a pipe renamed over would leave
    // it waiting for a writer for ever.
    let kind = std::fs::symlink_metadata(&fifo)
        .expect("still there")
        .file_type();
    assert!(kind.is_fifo(), "the pipe was replaced: {kind:?}");
    let text = reader.join().expect("the reader");
    let first: Value = serde_json::from_str(text.lines().next().expect("a line")).expect("json");
    assert_eq!(first["format"], "leasehold-tenant-keys");
    assert!(exported["keys"].as_u64().expect("keys") > 0);
}

// ---- At scale: 20,000 tasks, redb → PostgreSQL → redb, killed part way ----

/// Tenants and tasks per tenant of the test at scale: 20,000 tasks. What
/// the size must give is every shape the copy and the reads meet at any
/// size: each tenant's keys in many batches of one transaction, tenants
/// after the first still being written when a progress line comes (where
/// the copy is killed), reads of more than one page, and every state a
/// task can be in. A fifth of issue 43's 100,000 gives each of them; the
/// 100,000 themselves are `copy_bench`'s (BENCHMARKS.md, "Moving a
/// database"), where their time is what is measured.
const SCALE_TENANTS: usize = 4;
const SCALE_TASKS: usize = 5_000;

/// Runs the binary and answers its stdout, exactly as printed.
fn stdout_of(dir: &Path, args: &[&str]) -> Vec<u8> {
    let out = leasehold(dir, args);
    assert!(
        out.status.success(),
        "{args:?}: exit {:?}: {}",
        out.status.code(),
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// Every page of a paged read (`--limit 1000`, then `--after` the cursor
/// each page names), each as printed.
fn pages(dir: &Path, args: &[&str], answers: &mut Vec<Vec<u8>>) {
    let mut after: Option<String> = None;
    loop {
        let mut all: Vec<&str> = args.to_vec();
        all.extend(["--limit", "1000"]);
        if let Some(cursor) = &after {
            all.extend(["--after", cursor]);
        }
        let page = stdout_of(dir, &all);
        let v: Value = serde_json::from_slice(&page).expect("a page is JSON");
        answers.push(page);
        match v["next"].as_str() {
            Some(next) => after = Some(next.to_owned()),
            None => return,
        }
    }
}

/// What the reads of every tenant answer on `db`, byte for byte as the
/// binary prints them: every page of each role's queue and of each case,
/// the overdue list, the first pages of the feed, the next timer, a sealed
/// run, the counters, and a sample of tasks with their history.
fn every_read(dir: &Path, db: &str, tenants: &[String], n: usize) -> Vec<Vec<u8>> {
    let mut answers = Vec::new();
    for tenant in tenants {
        let on = |args: &[&str]| -> Vec<String> {
            let mut all: Vec<String> = ["--db", db, "--tenant", tenant]
                .iter()
                .map(|s| (*s).to_owned())
                .collect();
            all.extend(args.iter().map(|s| (*s).to_owned()));
            all
        };
        let run = |args: &[&str], answers: &mut Vec<Vec<u8>>| {
            let all = on(args);
            let all: Vec<&str> = all.iter().map(String::as_str).collect();
            pages(dir, &all, answers);
        };
        for role in ["r0", "r1", "r2"] {
            run(&["queue", "--role", role, "lead"], &mut answers);
        }
        for case in 0..5 {
            run(&["case", &format!("case-{case}")], &mut answers);
        }
        let overdue = (T0 + 120_000).to_string();
        run(&["overdue", "--now", &overdue], &mut answers);
        // The feed's first two pages: the order its entries were made in.
        let first = on(&["events", "--limit", "1000"]);
        let first: Vec<&str> = first.iter().map(String::as_str).collect();
        let page = stdout_of(dir, &first);
        let v: Value = serde_json::from_slice(&page).expect("events JSON");
        answers.push(page);
        if let Some(next) = v["next"].as_str() {
            let second = on(&["events", "--limit", "1000", "--after", next]);
            let second: Vec<&str> = second.iter().map(String::as_str).collect();
            answers.push(stdout_of(dir, &second));
        }
        for args in [&["timer", "next"][..], &["run", "sealed", "run-10"]] {
            let all = on(args);
            let all: Vec<&str> = all.iter().map(String::as_str).collect();
            answers.push(stdout_of(dir, &all));
        }
        for i in [0, 1, 2, 3, 4, 5, 6, n / 2, n - 1] {
            let id = format!("{tenant}-t{i:05}");
            for verb in ["get", "history"] {
                let all = on(&["task", verb, &id]);
                let all: Vec<&str> = all.iter().map(String::as_str).collect();
                answers.push(stdout_of(dir, &all));
            }
        }
        let all = on(&["stats"]);
        let all: Vec<&str> = all.iter().map(String::as_str).collect();
        let mut stats: Value = serde_json::from_slice(&stdout_of(dir, &all)).expect("stats");
        // The only read of the clock: when the answer was made.
        if let Some(o) = stats.as_object_mut() {
            o.remove("now");
        }
        answers.push(stats.to_string().into_bytes());
    }
    answers
}

/// Each tenant's digest on `db`, from `tenant export` (to /dev/null): a
/// reading of its own, apart from any copy.
fn digests(dir: &Path, db: &str, tenants: &[String]) -> Vec<String> {
    tenants
        .iter()
        .map(|t| {
            let answer = ok(leasehold(
                dir,
                &[
                    "--db",
                    db,
                    "--tenant",
                    t,
                    "tenant",
                    "export",
                    "--out",
                    "/dev/null",
                ],
            ));
            answer["sha256"].as_str().expect("sha256").to_owned()
        })
        .collect()
}

/// Runs `copy` as its own process and SIGKILLs it while it holds after the
/// first batch of its second tenant (the test-only hold): part way through
/// the keys, where the copy itself says, not by a guess at how long it
/// takes.
fn copy_killed_part_way(dir: &Path, from: &str, to: &str) {
    use std::os::unix::process::ExitStatusExt;
    use std::process::{Command, Stdio};
    // The copy holds after the first batch of its second tenant, on a pipe
    // the test opens: once the open returns, the copy is waiting there,
    // the first tenant's keys in its transaction, and is killed.
    let fifo = dir.join("hold-part-way");
    let made = Command::new("mkfifo").arg(&fifo).status().expect("mkfifo");
    assert!(made.success(), "mkfifo");
    let mut child = Command::new(env!("CARGO_BIN_EXE_leasehold"))
        .current_dir(dir)
        .env_remove("LEASEHOLD_DB")
        .env_remove(STOP_AFTER)
        .env("LEASEHOLD_COPY_HOLD_FIFO", &fifo)
        .env("LEASEHOLD_COPY_HOLD_FROM_TENANT", "2")
        .args(["--json", "copy", "--from", from, "--to", to])
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn leasehold copy");
    let (opened, writer) = std::sync::mpsc::channel();
    let pipe = fifo.clone();
    std::thread::spawn(move || {
        let _ = opened.send(std::fs::OpenOptions::new().write(true).open(&pipe));
    });
    let writer = loop {
        if let Ok(w) = writer.recv_timeout(std::time::Duration::from_millis(100)) {
            break w.expect("open the pipe");
        }
        if let Some(status) = child.try_wait().expect("the copy's status") {
            // Nobody reads the pipe now: open it so the opener ends.
            let _ = std::fs::File::open(&fifo);
            panic!("the copy ended before it reached its second tenant: {status:?}");
        }
    };
    child.kill().expect("SIGKILL the copy");
    let status = child.wait().expect("wait for the copy");
    drop(writer);
    assert_eq!(
        status.signal(),
        Some(9),
        "the copy ended before it was killed: {status:?}"
    );
}

/// Issue 43's bar for `copy`, at the size [`SCALE_TASKS`] says: tasks in
/// every state across several tenants, copied from redb to PostgreSQL
/// (killed part way, which leaves nothing, then run again) and back to a
/// fresh redb file; every hop's digests equal the source's, `check` is
/// clean on each target, and every read answers byte for byte the same on
/// all three. Without PostgreSQL the middle hop is a redb file, so the
/// rest still runs.
#[test]
fn tasks_at_scale_go_to_postgres_and_back_killed_part_way_and_read_the_same() {
    let dir = tempfile::tempdir().expect("temp dir");
    let run = format!(
        "{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis())
            .unwrap_or(0)
    );
    // Tenants of this test's own: the test database is shared by the run.
    let tenants: Vec<String> = (0..SCALE_TENANTS)
        .map(|i| format!("big{i}-{run}"))
        .collect();
    let src = dir.path().join("src.redb");
    let back = dir.path().join("back.redb");
    let pg = postgres();
    if pg.is_none() {
        eprintln!("this test runs on, with a redb file in PostgreSQL's place");
    }
    let mid_file = dir.path().join("mid.redb");
    let mid = pg.clone().unwrap_or_else(|| path(&mid_file).to_owned());
    let (src, back) = (path(&src).to_owned(), path(&back).to_owned());

    let started = std::time::Instant::now();
    fill_at_once(Path::new(&src), &tenants, SCALE_TASKS);
    eprintln!("filled in {:?}", started.elapsed());
    for tenant in &tenants {
        let check = ok(leasehold(
            dir.path(),
            &["--db", &src, "--tenant", tenant, "check"],
        ));
        assert_eq!(check, serde_json::json!([]), "the source's {tenant}");
    }
    let source = digests(dir.path(), &src, &tenants);

    // redb → the middle, killed part way through the keys, then again.
    copy_killed_part_way(dir.path(), &src, &mid);
    eprintln!("killed at {:?}", started.elapsed());
    // One transaction: the killed copy left nothing in the middle (a redb
    // file it was building is not at the name at all).
    match &pg {
        Some(url) => {
            let nothing = leasehold_host::tenant_keys::Digest::default().hex();
            for (tenant, digest) in tenants.iter().zip(digests(dir.path(), url, &tenants)) {
                assert_eq!(digest, nothing, "{tenant} holds keys after the killed copy");
            }
        }
        None => assert!(!mid_file.exists(), "a half-built file at the name"),
    }
    let there = ok(copy(dir.path(), &src, &mid, &[]));
    eprintln!(
        "copied again at {:?} (keys {} ms, digests and checks {} ms)",
        started.elapsed(),
        there["copy_ms"],
        there["verify_ms"]
    );
    let hop = copied(&there);
    let listed: Vec<&str> = hop.iter().map(|(t, _, _)| t.as_str()).collect();
    assert_eq!(listed, tenants, "every tenant, and only these: {there}");
    assert!(hop.iter().all(|(_, o, _)| o == "copied"), "{there}");
    let hop_digests: Vec<&str> = hop.iter().map(|(_, _, d)| d.as_str()).collect();
    assert_eq!(hop_digests, source, "redb → {mid}: the source's digests");

    // The middle → a fresh redb file: these tenants only, as the database
    // may hold other tests' tenants.
    let named: Vec<&str> = tenants.iter().map(String::as_str).collect();
    let home = ok(copy(dir.path(), &mid, &back, &named));
    eprintln!("back at {:?}", started.elapsed());
    let hop = copied(&home);
    assert!(hop.iter().all(|(_, o, _)| o == "copied"), "{home}");
    let hop_digests: Vec<&str> = hop.iter().map(|(_, _, d)| d.as_str()).collect();
    assert_eq!(hop_digests, source, "{mid} → redb: the source's digests");

    // Every read, byte for byte, on all three. A redb file is opened by one
    // process at a time, so each is read by a thread of its own;
    // PostgreSQL serves several, so its tenants are read a few at once.
    let [on_src, on_mid, on_back] = std::thread::scope(|s| {
        let read = |db: &str, some: &[String]| {
            let (dir, some, db) = (dir.path(), some.to_vec(), db.to_owned());
            s.spawn(move || every_read(dir, &db, &some, SCALE_TASKS))
        };
        let on_src = read(&src, &tenants);
        let on_back = read(&back, &tenants);
        let at_once = if pg.is_some() { 4 } else { 1 };
        let mid: Vec<_> = tenants
            .chunks(tenants.len().div_ceil(at_once))
            .map(|some| read(&mid, some))
            .collect();
        let join = |h: std::thread::ScopedJoinHandle<'_, Vec<Vec<u8>>>| h.join().expect("reads");
        let on_mid: Vec<Vec<u8>> = mid.into_iter().flat_map(join).collect();
        [join(on_src), on_mid, join(on_back)]
    });
    eprintln!("read at {:?}", started.elapsed());
    assert!(on_src.len() > tenants.len() * 20, "{} reads", on_src.len());
    // The size gives reads of more than one page, so the cursors crossed.
    assert!(
        on_src
            .iter()
            .any(|a| serde_json::from_slice::<Value>(a).is_ok_and(|v| v["next"].is_string())),
        "no read of the source had a second page"
    );
    for (what, answers) in [
        ("PostgreSQL (or the middle file)", &on_mid),
        ("back on redb", &on_back),
    ] {
        assert_eq!(answers.len(), on_src.len(), "{what}: as many answers");
        for (i, (a, b)) in on_src.iter().zip(answers.iter()).enumerate() {
            assert!(
                a == b,
                "{what}: read {i} differs:\n{}\n{}",
                String::from_utf8_lossy(a),
                String::from_utf8_lossy(b)
            );
        }
    }

    // Leave the shared database as it was, every tenant deleted at once:
    // on PostgreSQL their batches meet in the hash index's buckets and make
    // each other fail, and each delete must still finish (a batch that
    // keeps losing goes in smaller halves).
    if let Some(url) = pg {
        std::thread::scope(|s| {
            for tenant in &tenants {
                let (dir, url) = (dir.path(), &url);
                s.spawn(move || {
                    ok(leasehold(
                        dir,
                        &["--db", url, "--tenant", tenant, "tenant", "delete", "--yes"],
                    ))
                });
            }
        });
    }
    eprintln!("done at {:?}", started.elapsed());
}

/// `--progress`: `auto` prints nothing when stderr is not a terminal (as
/// here), `always` prints lines (sentences, or JSON objects with `--json`),
/// and the answer on stdout is the same either way.
#[test]
fn progress_lines_go_to_stderr_only_when_asked_or_at_a_terminal() {
    let dir = tempfile::tempdir().expect("temp dir");
    let src = dir.path().join("src.redb");
    fill(&src, &["acme", "globex"], 20);
    let run = |to: &str, extra: &[&str], json: bool| {
        let mut c = cargo_bin_cmd!("leasehold");
        c.current_dir(dir.path())
            .env_remove("LEASEHOLD_DB")
            .env_remove(STOP_AFTER);
        if json {
            c.arg("--json");
        }
        c.args(extra)
            .args(["copy", "--from", path(&src), "--to", to])
            .output()
            .expect("run leasehold")
    };
    let quiet = run("a.redb", &[], false);
    assert!(quiet.status.success());
    assert_eq!(
        String::from_utf8_lossy(&quiet.stderr),
        "",
        "auto, not a terminal"
    );

    let told = run("b.redb", &["--progress", "always"], false);
    assert!(told.status.success());
    let err = String::from_utf8_lossy(&told.stderr);
    assert!(
        err.lines()
            .any(|l| l
                == "leasehold copy: the keys are in; digests and check of 2 tenants, 2 at a time"),
        "{err}"
    );
    assert_eq!(
        String::from_utf8_lossy(&told.stdout).replace("b.redb", "a.redb"),
        String::from_utf8_lossy(&quiet.stdout).replace("b.redb", "a.redb"),
        "the answer does not change"
    );

    let lines = run("c.redb", &["--progress", "always"], true);
    assert!(lines.status.success());
    // Every line is a JSON object; the one that says the checks began is
    // always there (lines about keys only when the keys take a while).
    let objects: Vec<Value> = String::from_utf8_lossy(&lines.stderr)
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    assert!(
        objects.contains(&serde_json::json!({"progress": "check", "tenants": 2, "at_once": 2})),
        "{objects:?}"
    );
    assert_eq!(json(&lines)["ok"], true);

    let never = run("d.redb", &["--progress", "never"], false);
    assert!(never.status.success());
    assert_eq!(String::from_utf8_lossy(&never.stderr), "");
}

// ---- Bounded and all-or-nothing (issue 60) ----

/// Bounds a hang only: nothing here waits this long when all is well.
const HANG: std::time::Duration = std::time::Duration::from_secs(180);

/// The lines of `tenant`'s export from `db`.
fn export_lines(dir: &Path, db: &Path, tenant: &str) -> Vec<String> {
    let file = dir.join(format!("{tenant}-lines.export"));
    ok(leasehold(
        dir,
        &[
            "--db",
            path(db),
            "--tenant",
            tenant,
            "tenant",
            "export",
            "--out",
            path(&file),
        ],
    ));
    let text = std::fs::read_to_string(&file).expect("read the export");
    text.lines().map(str::to_owned).collect()
}

/// An export's first line and entries (its last line dropped), then
/// `extra` entries, then a last line whose count and digest match them
/// all: a file another tool could have written.
fn with_entries(lines: &[String], extra: &[(Vec<u8>, Vec<u8>)]) -> Vec<u8> {
    use leasehold_host::tenant_keys::{Digest, hex, unhex};
    let mut digest = Digest::default();
    let mut out = Vec::new();
    out.extend_from_slice(lines[0].as_bytes());
    out.push(b'\n');
    for line in &lines[1..lines.len() - 1] {
        let v: Value = serde_json::from_str(line).expect("an entry");
        let key = unhex(v["key"].as_str().expect("key")).expect("hex");
        let value = unhex(v["value"].as_str().expect("value")).expect("hex");
        digest.add(&key, &value);
        out.extend_from_slice(line.as_bytes());
        out.push(b'\n');
    }
    for (key, value) in extra {
        digest.add(key, value);
        out.extend_from_slice(b"{\"key\":\"");
        out.extend_from_slice(hex(key).as_bytes());
        out.extend_from_slice(b"\",\"value\":\"");
        out.extend_from_slice(hex(value).as_bytes());
        out.extend_from_slice(b"\"}\n");
    }
    let end = serde_json::json!({"end": {
        "keys": digest.keys(), "bytes": digest.bytes(), "sha256": digest.hex(),
    }});
    out.extend_from_slice(end.to_string().as_bytes());
    out.push(b'\n');
    out
}

/// The key of an export's last entry.
fn last_key(lines: &[String]) -> Vec<u8> {
    let v: Value = serde_json::from_str(&lines[lines.len() - 2]).expect("an entry");
    leasehold_host::tenant_keys::unhex(v["key"].as_str().expect("key")).expect("hex")
}

/// Runs the binary with `--json` and `args`, `input` on its standard input.
fn leasehold_stdin(dir: &Path, args: &[&str], env: Option<(&str, &str)>, input: Vec<u8>) -> Output {
    use std::io::Write as _;
    use std::process::{Command, Stdio};
    let mut c = Command::new(env!("CARGO_BIN_EXE_leasehold"));
    c.current_dir(dir)
        .env_remove("LEASEHOLD_DB")
        .env_remove(STOP_AFTER)
        .arg("--json")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some((k, v)) = env {
        c.env(k, v);
    }
    let mut child = c.spawn().expect("spawn leasehold");
    let mut stdin = child.stdin.take().expect("stdin");
    // The import may refuse before it reads everything: a broken pipe then.
    let feeder = std::thread::spawn(move || {
        let _ = stdin.write_all(&input);
    });
    let out = child.wait_with_output().expect("wait for leasehold");
    feeder.join().expect("the feeder");
    out
}

/// Issue 60: an entry no call could write (a 20 MiB value, a value one
/// byte over 4 MiB, a key over 4,096 bytes), after a thousand good ones,
/// with the last line's count and digest made to match, is refused at its
/// line; nothing of the file is written, another tenant of the target is
/// untouched, and the target still backs up and copies whole afterwards.
#[test]
fn an_entry_over_the_engines_limits_after_a_thousand_good_ones_is_refused_and_nothing_is_written() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (src, dst) = (dir.path().join("src.redb"), dir.path().join("dst.redb"));
    fill(&src, &["acme"], 200);
    fill(&dst, &["other"], 10);
    let other = export_digest(dir.path(), path(&dst), "other");
    let lines = export_lines(dir.path(), &src, "acme");
    assert!(lines.len() - 2 >= 1000, "{} entries", lines.len() - 2);
    let mut past = last_key(&lines);
    past.push(0xff);
    for (name, key, value, why) in [
        (
            "twenty-mib",
            past.clone(),
            vec![0x5a; 20 << 20],
            "longer than 8396864 bytes",
        ),
        (
            "value-over",
            past.clone(),
            vec![0x5a; (4 << 20) + 1],
            "a value of 4194305 bytes",
        ),
        (
            "key-over",
            vec![0xff; 4097],
            b"v".to_vec(),
            "a key of 4097 bytes",
        ),
    ] {
        let file = dir.path().join(format!("{name}.jsonl"));
        std::fs::write(&file, with_entries(&lines, &[(key, value)])).expect("write");
        let e = error(
            &leasehold(
                dir.path(),
                &[
                    "--db",
                    path(&dst),
                    "--tenant",
                    "acme",
                    "tenant",
                    "import",
                    "--in",
                    path(&file),
                ],
            ),
            2,
        );
        assert_eq!(e["error"], "bad_file", "{name}: {e}");
        let message = e["message"].as_str().expect("message");
        assert!(message.contains(why), "{name}: {message}");
        assert!(
            message.contains(&format!("line {}", lines.len())),
            "{name}: the entry's own line: {message}"
        );
        assert_eq!(
            export_digest(dir.path(), path(&dst), "acme").0,
            0,
            "{name}: nothing written"
        );
        assert_eq!(
            export_digest(dir.path(), path(&dst), "other"),
            other,
            "{name}"
        );
    }
    let backup = dir.path().join("dst.backup");
    ok(leasehold(
        dir.path(),
        &["--db", path(&dst), "backup", "--out", path(&backup)],
    ));
    let third = dir.path().join("third.redb");
    ok(copy(dir.path(), path(&dst), path(&third), &[]));
}

/// Issue 60: an import that fails after many batches went in (a value
/// changed late in the file, found at its last line; read from standard
/// input, which is read once as it comes) or that stops after its first
/// batch, leaves the target as it was, another tenant untouched; the good
/// file then goes in whole.
#[test]
fn an_import_that_fails_after_many_batches_leaves_the_target_as_it_was() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (src, dst) = (dir.path().join("src.redb"), dir.path().join("dst.redb"));
    fill(&src, &["acme"], 1500);
    fill(&dst, &["other"], 10);
    let other = export_digest(dir.path(), path(&dst), "other");
    let lines = export_lines(dir.path(), &src, "acme");
    assert!(lines.len() - 2 > 2 * 4096, "{} entries", lines.len() - 2);
    let mut altered = lines.clone();
    let late = altered.len() - 2;
    altered[late] = altered[late].replacen("\"value\":\"", "\"value\":\"00", 1);
    let e = error(
        &leasehold_stdin(
            dir.path(),
            &["--db", path(&dst), "--tenant", "acme", "tenant", "import"],
            None,
            (altered.join("\n") + "\n").into_bytes(),
        ),
        2,
    );
    assert_eq!(e["error"], "bad_file", "{e}");
    assert!(
        e["message"]
            .as_str()
            .is_some_and(|m| m.contains(&format!("line {}", lines.len()))),
        "{e}"
    );
    assert_eq!(export_digest(dir.path(), path(&dst), "acme").0, 0);
    assert_eq!(export_digest(dir.path(), path(&dst), "other"), other);

    let good = (lines.join("\n") + "\n").into_bytes();
    let stopped = leasehold_stdin(
        dir.path(),
        &["--db", path(&dst), "--tenant", "acme", "tenant", "import"],
        Some((STOP_AFTER, "1")),
        good.clone(),
    );
    assert_eq!(error(&stopped, 3)["error"], "stopped");
    assert_eq!(export_digest(dir.path(), path(&dst), "acme").0, 0);
    assert_eq!(export_digest(dir.path(), path(&dst), "other"), other);

    let imported = ok(leasehold_stdin(
        dir.path(),
        &["--db", path(&dst), "--tenant", "acme", "tenant", "import"],
        None,
        good,
    ));
    assert_eq!(imported["digests_match"], true, "{imported}");
    assert_eq!(imported["keys"].as_u64(), Some((lines.len() - 2) as u64));
}

/// Runs the binary under a bound on its address space (`ulimit -v`, in
/// KiB), so that reading a gibibyte into memory fails where a bounded read
/// does not.
fn leasehold_bounded(dir: &Path, kib: u64, args: &[&str]) -> Output {
    std::process::Command::new("sh")
        .current_dir(dir)
        .env_remove("LEASEHOLD_DB")
        .env_remove(STOP_AFTER)
        .arg("-c")
        .arg(format!("ulimit -v {kib} && exec \"$0\" --json \"$@\""))
        .arg(env!("CARGO_BIN_EXE_leasehold"))
        .args(args)
        .output()
        .expect("run leasehold under sh")
}

/// Issue 60: a line of a gibibyte (a valid first line, then 1 GiB of zero
/// bytes, a sparse file that fills no disk) is refused at its line, by an
/// import held to 512 MiB of address space: it read no more of the line
/// than the bound. Nothing is written, and no file is left at the target.
#[test]
fn a_gibibyte_line_is_refused_having_read_no_more_than_the_bound() {
    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join("huge.jsonl");
    let head = b"{\"format\":\"leasehold-tenant-keys\",\"version\":1,\"tenant\":\"acme\"}\n{\"key\":\"00\",\"value\":\"";
    std::fs::write(&file, head).expect("write");
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(&file)
        .expect("open");
    f.set_len(head.len() as u64 + (1 << 30)).expect("extend");
    drop(f);
    let dst = dir.path().join("dst.redb");
    let out = leasehold_bounded(
        dir.path(),
        512 * 1024,
        &["--db", path(&dst), "tenant", "import", "--in", path(&file)],
    );
    let e = error(&out, 2);
    assert_eq!(e["error"], "bad_file", "{e}");
    assert!(
        e["message"]
            .as_str()
            .is_some_and(|m| m.contains("line 2") && m.contains("longer than")),
        "{e}"
    );
    assert!(!dst.exists(), "nothing is left at the target");
}

/// Issue 60: the import's file is opened once. The path first names a
/// named pipe, through which the import is handed the export it checks;
/// once that is written, a different, valid export is renamed over the
/// path, so any later open of it (a second pass over "the same file")
/// finds that one. What is written is what was read: the first.
#[test]
fn a_file_swapped_after_it_was_read_is_not_what_is_written() {
    use std::io::Write as _;
    use std::process::{Command, Stdio};
    let dir = tempfile::tempdir().expect("temp dir");
    let (src, dst) = (dir.path().join("src.redb"), dir.path().join("dst.redb"));
    fill(&src, &["acme", "globex"], 30);
    let checked = (export_lines(dir.path(), &src, "acme").join("\n") + "\n").into_bytes();
    let (_, acme_digest) = export_digest(dir.path(), path(&src), "acme");
    let other = dir.path().join("other.export");
    std::fs::write(
        &other,
        export_lines(dir.path(), &src, "globex").join("\n") + "\n",
    )
    .expect("write");
    let fifo = dir.path().join("export.jsonl");
    let made = Command::new("mkfifo").arg(&fifo).status().expect("mkfifo");
    assert!(made.success());
    let child = Command::new(env!("CARGO_BIN_EXE_leasehold"))
        .current_dir(dir.path())
        .env_remove("LEASEHOLD_DB")
        .env_remove(STOP_AFTER)
        .args([
            "--json",
            "--db",
            path(&dst),
            "--tenant",
            "acme",
            "tenant",
            "import",
        ])
        .arg("--in")
        .arg(&fifo)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn the import");
    // The open for writing returns once the import has opened the pipe.
    std::fs::OpenOptions::new()
        .write(true)
        .open(&fifo)
        .and_then(|mut f| f.write_all(&checked))
        .expect("hand the import its file");
    std::fs::rename(&other, &fifo).expect("swap another export in");
    let imported = ok(child.wait_with_output().expect("the import's output"));
    assert_eq!(imported["digests_match"], true, "{imported}");
    assert_eq!(
        export_digest(dir.path(), path(&dst), "acme").1,
        acme_digest,
        "the target holds the export that was read, not the one swapped in"
    );
}

/// A task of the target's own, opened by a writer of its own.
fn open_own_task(dir: &Path, db: &str, tenant: &str) -> Output {
    let own = dir.join("own-task.json");
    std::fs::write(&own, r#"{"id":"theirs","run":"r","kind":"k"}"#).expect("write");
    leasehold(
        dir,
        &[
            "--db",
            db,
            "--tenant",
            tenant,
            "--wait",
            "1s",
            "task",
            "open",
            path(&own),
        ],
    )
}

/// Starts `tenant import` of `file` into `tenant` on `db` with the test's
/// hold (`extra` before the command): answers once its first batch is in
/// its transaction, with the process and the pipe whose closing lets it
/// go on.
fn held_import(
    dir: &Path,
    db: &str,
    tenant: &str,
    file: &Path,
    extra: &[&str],
) -> (std::process::Child, std::fs::File) {
    use std::process::{Command, Stdio};
    let fifo = dir.join(format!("hold-{tenant}.pipe"));
    let made = Command::new("mkfifo").arg(&fifo).status().expect("mkfifo");
    assert!(made.success());
    let mut import = Command::new(env!("CARGO_BIN_EXE_leasehold"))
        .current_dir(dir)
        .env_remove("LEASEHOLD_DB")
        .env_remove(STOP_AFTER)
        .env("LEASEHOLD_COPY_HOLD_FIFO", &fifo)
        .args(["--json", "--db", db, "--tenant", tenant])
        .args(extra)
        .args(["tenant", "import", "--in"])
        .arg(file)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn the import");
    // Opening the pipe waits until the import holds, its keys put.
    let (held_tx, held_rx) = std::sync::mpsc::channel();
    let opener = {
        let fifo = fifo.clone();
        std::thread::spawn(move || {
            let _ = held_tx.send(std::fs::OpenOptions::new().write(true).open(fifo));
        })
    };
    let hold = match held_rx.recv_timeout(HANG) {
        Ok(opened) => opened.expect("open the hold"),
        Err(_) => {
            let _ = import.kill();
            panic!("the import never held its target");
        }
    };
    opener.join().expect("the opener");
    std::fs::remove_file(&fifo).expect("remove the pipe");
    (import, hold)
}

/// Issue 60's concurrent writer, on `db` (a redb file or PostgreSQL):
/// while an import holds its target tenant (paused by the test's hook
/// after its first batch went in), a writer of that tenant fails or waits;
/// it never commits between the import's look and its commit. Whatever
/// the order, the tenant ends as one of them alone left it, never mixed.
/// A writer that finished before the import makes the import refuse.
fn a_writer_meeting_an_import_never_interleaves(dir: &Path, db: &str, tenant: &str) {
    let src = dir.join("writer-src.redb");
    fill(&src, &["acme"], 20);
    let file = dir.join("acme-writer.export");
    std::fs::write(&file, export_lines(dir, &src, "acme").join("\n") + "\n").expect("write");
    let (keys, digest) = export_digest(dir, path(&src), "acme");
    let (import, hold) = held_import(dir, db, tenant, &file, &[]);
    let writer = open_own_task(dir, db, tenant);
    drop(hold);
    let imported = import.wait_with_output().expect("the import's output");
    let (wrote, took) = (writer.status.success(), imported.status.success());
    assert!(
        !(wrote && took),
        "both committed: the writer {} and the import {}",
        String::from_utf8_lossy(&writer.stdout),
        String::from_utf8_lossy(&imported.stdout)
    );
    let there = export_digest(dir, db, tenant);
    let theirs = leasehold(
        dir,
        &["--db", db, "--tenant", tenant, "task", "get", "theirs"],
    );
    if took {
        assert_eq!(there, (keys, digest.clone()), "the import's keys alone");
        assert!(!theirs.status.success(), "the writer's task is not there");
    } else {
        assert_ne!(there.1, digest, "the import wrote nothing");
        assert_eq!(
            theirs.status.success(),
            wrote,
            "the writer's task, if it wrote"
        );
    }
    // Finished before the import began, a writer makes it refuse.
    let other = format!("{tenant}-first");
    ok(open_own_task(dir, db, &other));
    let e = error(
        &leasehold(
            dir,
            &[
                "--db",
                db,
                "--tenant",
                &other,
                "tenant",
                "import",
                "--in",
                path(&file),
            ],
        ),
        1,
    );
    assert_eq!(e["error"], "not_empty", "{e}");
    for t in [tenant, other.as_str()] {
        ok(leasehold(
            dir,
            &["--db", db, "--tenant", t, "tenant", "delete", "--yes"],
        ));
    }
}

#[test]
fn a_writer_meeting_an_import_on_redb_never_interleaves() {
    let dir = tempfile::tempdir().expect("temp dir");
    let db = dir.path().join("held.redb");
    fill(&db, &["other"], 5);
    a_writer_meeting_an_import_never_interleaves(dir.path(), path(&db), "acme");
}

#[test]
fn a_writer_meeting_an_import_on_postgres_never_interleaves() {
    let Some(url) = postgres() else { return };
    let dir = tempfile::tempdir().expect("temp dir");
    let tenant = format!(
        "held-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis())
            .unwrap_or(0)
    );
    a_writer_meeting_an_import_never_interleaves(dir.path(), &url, &tenant);
}

/// An export of `n` tasks of one tenant, written to a file: the file and
/// its count and digest.
fn an_export(dir: &Path, tenant: &str, n: usize) -> (PathBuf, (u64, String)) {
    let src = dir.join(format!("{tenant}-{n}-src.redb"));
    fill(&src, &[tenant], n);
    let file = dir.join(format!("{tenant}-{n}.export"));
    std::fs::write(&file, export_lines(dir, &src, tenant).join("\n") + "\n").expect("write");
    (file, export_digest(dir, path(&src), tenant))
}

/// Issue 60, the target held for the whole operation, on redb: a second
/// import into the same tenant, started while the first holds its target
/// and told to wait for the file as long as it takes, goes on only once
/// the first committed: it finds the first's keys there and refuses.
#[test]
fn a_second_import_started_while_one_holds_redb_goes_on_only_after_it() {
    let dir = tempfile::tempdir().expect("temp dir");
    let db = dir.path().join("held.redb");
    fill(&db, &["other"], 5);
    let (file, whole) = an_export(dir.path(), "acme", 20);
    // Another export of the tenant: the same keys and more, some holding
    // other values.
    let (other, _) = an_export(dir.path(), "acme", 21);
    let (first, hold) = held_import(dir.path(), path(&db), "acme", &file, &[]);
    let second = std::process::Command::new(env!("CARGO_BIN_EXE_leasehold"))
        .current_dir(dir.path())
        .env_remove("LEASEHOLD_DB")
        .env_remove(STOP_AFTER)
        .args([
            "--json",
            "--db",
            path(&db),
            "--tenant",
            "acme",
            "--wait",
            "180s",
        ])
        .args(["tenant", "import", "--in", path(&other)])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn the second import");
    drop(hold);
    let first = ok(first.wait_with_output().expect("the first import"));
    assert_eq!(first["digests_match"], true, "{first}");
    let second = second.wait_with_output().expect("the second import");
    assert_eq!(error(&second, 1)["error"], "not_empty");
    assert_eq!(export_digest(dir.path(), path(&db), "acme"), whole);
}

/// How many of the server's sessions named `application` wait on a lock.
fn waiting_on_a_lock(url: &str, application: &str) -> u64 {
    let out = std::process::Command::new("psql")
        .args([url, "-Atc"])
        .arg(format!(
            "SELECT count(*) FROM pg_stat_activity \
             WHERE application_name = '{application}' AND wait_event_type = 'Lock'"
        ))
        .output()
        .expect("run psql");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .expect("a count")
}

/// Issue 60, the target held for the whole operation, on PostgreSQL: a
/// second import into the same tenant, started while the first holds it,
/// is seen waiting on the first's lock, and is still waiting when the
/// first is let go; the first commits, the second then fails as a
/// conflict (busy: it wrote nothing), and run again finds the tenant
/// holding the first's keys and refuses. The tenant holds the first's
/// keys alone.
#[test]
fn a_second_import_started_while_one_holds_postgres_waits_and_goes_on_only_after_it() {
    let Some(url) = postgres() else { return };
    let dir = tempfile::tempdir().expect("temp dir");
    let tenant = format!(
        "wait-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis())
            .unwrap_or(0)
    );
    let application = format!("lh-second-{tenant}");
    let sep = if url.contains('?') { '&' } else { '?' };
    let second_url = format!("{url}{sep}application_name={application}");
    let (file, whole) = an_export(dir.path(), "acme", 20);
    let (other, _) = an_export(dir.path(), "acme", 21);
    let (first, hold) = held_import(dir.path(), &url, &tenant, &file, &[]);
    let mut second = std::process::Command::new(env!("CARGO_BIN_EXE_leasehold"))
        .current_dir(dir.path())
        .env_remove("LEASEHOLD_DB")
        .env_remove(STOP_AFTER)
        .args(["--json", "--db", &second_url, "--tenant", &tenant])
        .args(["tenant", "import", "--in", path(&other)])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn the second import");
    let until = std::time::Instant::now() + HANG;
    while waiting_on_a_lock(&url, &application) == 0 {
        if let Some(status) = second.try_wait().expect("the second import") {
            panic!("the second import ended ({status}) without waiting on the first");
        }
        assert!(std::time::Instant::now() < until, "never seen waiting");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert!(second.try_wait().expect("the second import").is_none());
    drop(hold);
    let first = ok(first.wait_with_output().expect("the first import"));
    assert_eq!(first["digests_match"], true, "{first}");
    let second = second.wait_with_output().expect("the second import");
    assert_eq!(error(&second, 4)["error"], "storage");
    assert_eq!(export_digest(dir.path(), &url, &tenant), whole);
    let again = leasehold(
        dir.path(),
        &[
            "--db",
            &url,
            "--tenant",
            &tenant,
            "tenant",
            "import",
            "--in",
            path(&other),
        ],
    );
    assert_eq!(error(&again, 1)["error"], "not_empty");
    ok(leasehold(
        dir.path(),
        &[
            "--db", &url, "--tenant", &tenant, "tenant", "delete", "--yes",
        ],
    ));
}

/// Issue 60 for `copy`: an entry no call could write in the source (put
/// there behind the engine's back: a 5 MiB value, and a 20 MiB one, over
/// a scan) refuses the whole copy; the tenant copied before it is not
/// written either, another tenant of the target is untouched, and a
/// target file that did not exist is not left behind; an offline backup
/// of the source is refused likewise. A tenant named twice is refused
/// before anything opens.
#[test]
fn copy_refuses_an_entry_over_the_engines_limits_and_writes_nothing() {
    let dir = tempfile::tempdir().expect("temp dir");
    let dst = dir.path().join("dst.redb");
    fill(&dst, &["other"], 5);
    let other = export_digest(dir.path(), path(&dst), "other");
    for (name, size) in [("five-mib", 5 << 20), ("twenty-mib", 20 << 20)] {
        let src = dir.path().join(format!("{name}.redb"));
        fill(&src, &["acme", "globex"], 20);
        {
            let db = redb::Database::open(&src).expect("open the source with redb");
            let table: redb::TableDefinition<&[u8], &[u8]> =
                redb::TableDefinition::new("leasehold-kv");
            let txn = db.begin_write().expect("write");
            {
                let mut t = txn.open_table(table).expect("table");
                let mut key = vec![6u8];
                key.extend_from_slice(b"globex");
                key.extend_from_slice(&[0xff, 0xff]);
                t.insert(key.as_slice(), vec![7u8; size].as_slice())
                    .expect("insert");
            }
            txn.commit().expect("commit");
        }
        let e = error(&copy(dir.path(), path(&src), path(&dst), &[]), 2);
        assert_eq!(e["error"], "too_large", "{name}: {e}");
        assert_eq!(e["detail"], "globex", "{name}: {e}");
        for t in ["acme", "globex"] {
            assert_eq!(
                export_digest(dir.path(), path(&dst), t).0,
                0,
                "{name}: {t} was not written"
            );
        }
        assert_eq!(export_digest(dir.path(), path(&dst), "other"), other);
        let fresh = dir.path().join(format!("{name}-fresh.redb"));
        error(&copy(dir.path(), path(&src), path(&fresh), &[]), 2);
        assert!(!fresh.exists(), "{name}: no file left at the name");
        // An offline backup of it is refused too, and leaves no file.
        let backup = dir.path().join(format!("{name}.backup"));
        let e = error(
            &leasehold(
                dir.path(),
                &["--db", path(&src), "backup", "--out", path(&backup)],
            ),
            2,
        );
        assert_eq!(e["error"], "too_large", "{name}: {e}");
        assert!(!backup.exists(), "{name}: no backup left at the name");
    }
    let src = dir.path().join("five-mib.redb");
    let e = error(
        &copy(dir.path(), path(&src), path(&dst), &["acme", "acme"]),
        2,
    );
    assert!(
        e["message"].as_str().is_some_and(|m| m.contains("twice")),
        "{e}"
    );
}
