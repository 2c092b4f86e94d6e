//! Looking at a database file right after its writer was killed: the
//! reading commands repair it when they may, say so on stderr, and show
//! everything the writer was told had succeeded.
//!
//! The writer is a real process (this test binary run again as a child,
//! writing through the library) killed with SIGKILL mid-stream; the readers
//! are the real `leasehold` binary.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command as Process, Stdio};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use assert_cmd::cargo::cargo_bin_cmd;
use serde_json::Value;

const CHILD: &str = "LEASEHOLD_TEST_CRASH_WRITER";

/// In the child only: opens tasks one after another on the file `CHILD`
/// names, printing each id once it is acknowledged, until killed.
#[test]
fn crash_writer_child() {
    let Some(db) = std::env::var_os(CHILD) else {
        return;
    };
    let engine = leasehold_host::Engine::open(db).expect("the database opens");
    let t = engine.tenant("crash").expect("tenant");
    let mut out = std::io::stdout().lock();
    for i in 0u64.. {
        let id = format!("t{}-{i}", std::process::id());
        let task = leasehold_host::Task {
            id: id.clone(),
            run: "r".into(),
            case: None,
            kind: "approve".into(),
            justification: "{}".into(),
            candidate_roles: vec![],
            assignee: None,
            lease_until: None,
            priority: leasehold_host::Priority::Normal,
            state: leasehold_host::TaskState::Open,
            on_expiry: leasehold_host::OnExpiry::Deny,
            escalate_to: vec![],
            excluded_actors: vec![],
            created_at: i as i64 + 1,
            due_at: None,
            revision: 0,
            decision: None,
            outcomes: Vec::new(),
            remind_before: Vec::new(),
            escalation: Vec::new(),
            steps_done: 0,
        };
        t.open(&task).expect("open");
        writeln!(out, "acked {id}").expect("stdout");
        out.flush().expect("stdout");
    }
}

/// The id on a line the child printed; the test harness may have begun the
/// line with its own words ("test crash_writer_child ... ").
fn acked_id(line: &str) -> Option<&str> {
    line.split_once("acked ").map(|(_, id)| id)
}

fn leasehold(db: &std::path::Path, args: &[&str]) -> std::process::Output {
    cargo_bin_cmd!("leasehold")
        .env_remove("LEASEHOLD_DB")
        .args(["--db"])
        .arg(db)
        .args(["--tenant", "crash"])
        .args(args)
        .output()
        .expect("leasehold runs")
}

/// Kill -9 a writer mid-stream, then `check` at once: it repairs the file
/// (saying so on stderr), exits 0 and reports it consistent, and every
/// task the writer was told it had opened is there.
#[test]
fn check_right_after_a_writer_is_killed_repairs_the_file_and_finds_it_consistent() {
    let seed = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(1, |d| d.as_nanos() as u64);
    println!("seed {seed}");
    let dir = tempfile::tempdir().expect("temp dir");
    let db = dir.path().join("crash.redb");
    let mut acked: Vec<String> = Vec::new();
    for round in 0..3u64 {
        let mut child = Process::new(std::env::current_exe().expect("this test binary"))
            .args([
                "--exact",
                "crash_writer_child",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CHILD, &db)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("the writer starts");
        let mut lines = BufReader::new(child.stdout.take().expect("piped")).lines();
        let wanted = 5 + (seed >> (round * 8)) % 40;
        let mut seen = 0;
        while seen < wanted {
            let line = lines
                .next()
                .unwrap_or_else(|| panic!("the writer stopped by itself (seed {seed})"))
                .expect("utf-8");
            if let Some(id) = acked_id(&line) {
                acked.push(id.to_owned());
                seen += 1;
            }
        }
        std::thread::sleep(Duration::from_micros((seed >> round) % 2000));
        child.kill().expect("SIGKILL");
        child.wait().expect("reaped");
        acked.extend(
            lines
                .map_while(Result::ok)
                .filter_map(|l| acked_id(&l).map(str::to_owned)),
        );

        let check = leasehold(&db, &["check"]);
        let stderr = String::from_utf8_lossy(&check.stderr);
        assert_eq!(
            check.status.code(),
            Some(0),
            "check after the kill (seed {seed}, round {round}): {stderr}"
        );
        assert!(
            String::from_utf8_lossy(&check.stdout).starts_with("Consistent"),
            "(seed {seed}, round {round})"
        );
        assert!(
            stderr.contains("was not closed cleanly") && stderr.contains("repaired"),
            "check did not say it repaired the file (seed {seed}, round {round}): {stderr}"
        );

        // Now clean: a second reader has nothing to repair or say.
        let stats = leasehold(&db, &["stats", "--json"]);
        assert_eq!(stats.status.code(), Some(0));
        assert!(
            stats.stderr.is_empty(),
            "{}",
            String::from_utf8_lossy(&stats.stderr)
        );
        let stats: Value = serde_json::from_slice(&stats.stdout).expect("json");
        let open = stats["open_count"].as_u64().expect("a count");
        let acked_count = acked.len() as u64;
        // The call after the last acknowledged one may have committed.
        if !(open >= acked_count && open <= acked_count + round + 1) {
            let q = leasehold(&db, &["queue", "--role", "x", "--limit", "1000"]);
            panic!(
                "{open} tasks open, {acked_count} acknowledged (seed {seed}, round {round}): {acked:?}\n{}",
                String::from_utf8_lossy(&q.stdout)
            );
        }
        let last = acked.last().expect("some were acknowledged");
        let got = leasehold(&db, &["task", "get", last, "--json"]);
        assert_eq!(
            got.status.code(),
            Some(0),
            "acknowledged task {last} (seed {seed}, round {round})"
        );
    }
}

/// `leasehold repair` on a cleanly closed file leaves it be and says so.
#[test]
fn repair_leaves_a_clean_file_as_it_is() {
    let dir = tempfile::tempdir().expect("temp dir");
    let db = dir.path().join("clean.redb");
    drop(leasehold_host::Engine::open(&db).expect("created"));
    let before = std::fs::read(&db).expect("read");
    let out = leasehold(&db, &["repair", "--json"]);
    assert_eq!(out.status.code(), Some(0));
    let answer: Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(answer["repaired"], Value::Bool(false));
    assert_eq!(std::fs::read(&db).expect("read"), before);
}
