//! How fast `leasehold backup` and `restore` go: fills a redb file with
//! TASKS tasks across TENANTS tenants through the library (default 100,000
//! across 10), then times the built binary taking a backup through a
//! running `leasehold serve` (GET /backup, an operator of the backup
//! admin's tenant), the same offline (`backup --db`, once the server has
//! stopped), and a restore of it into a fresh file (with its digests and
//! `check`). Keys/s and MB/s are the backup's own count over the command's
//! wall time.
//!
//! `cargo build -p leasehold-cli && cargo run -p leasehold-cli --example backup_bench`
//! (the binary is found beside this example, or at LEASEHOLD_BIN).

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use leasehold_host::{Durability, Engine, OnExpiry, Priority, Task, TaskState};
use serde_json::Value;

const T0: i64 = 1_780_000_000_000;

fn number(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn binary() -> PathBuf {
    if let Some(bin) = std::env::var_os("LEASEHOLD_BIN") {
        return bin.into();
    }
    let me = std::env::current_exe().expect("this example's path");
    // target/<profile>/examples/backup_bench → target/<profile>/leasehold
    me.parent()
        .and_then(Path::parent)
        .map(|p| p.join("leasehold"))
        .expect("a target folder")
}

fn task(tenant: &str, i: usize) -> Task {
    Task {
        id: format!("{tenant}-{i:06}"),
        run: format!("run-{}", i % 97),
        case: Some(format!("case-{}", i % 31)),
        kind: "review".into(),
        justification: format!("{{\"n\":{i}}}"),
        candidate_roles: vec![format!("r{}", i % 3)],
        assignee: None,
        lease_until: None,
        priority: [Priority::Low, Priority::Normal, Priority::High][i % 3],
        state: TaskState::Open,
        on_expiry: OnExpiry::Deny,
        escalate_to: vec![],
        excluded_actors: vec![],
        created_at: T0 + i as i64,
        due_at: None,
        revision: 0,
        decision: None,
        outcomes: Vec::new(),
        remind_before: Vec::new(),
        escalation: Vec::new(),
        steps_done: 0,
    }
}

/// Runs the binary with `--json` and `args`; answers its JSON and seconds.
fn timed(dir: &Path, args: &[&str]) -> (Value, f64) {
    let started = Instant::now();
    let out = Command::new(binary())
        .current_dir(dir)
        .arg("--json")
        .args(args)
        .output()
        .expect("run leasehold");
    let secs = started.elapsed().as_secs_f64();
    assert!(
        out.status.success(),
        "{args:?} failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (serde_json::from_slice(&out.stdout).expect("json"), secs)
}

fn report(what: &str, answer: &Value, secs: f64) {
    let keys = answer["keys"].as_u64().unwrap_or(0);
    let file = answer["file_bytes"].as_u64().unwrap_or(0);
    println!(
        "{what}: {keys} keys, {:.1} MB of file in {secs:.2}s: {:.0} keys/s, {:.1} MB/s",
        file as f64 / 1e6,
        keys as f64 / secs,
        file as f64 / 1e6 / secs,
    );
}

fn main() {
    let tasks = number("TASKS", 100_000);
    let tenant_count = number("TENANTS", 10);
    let dir = tempfile::tempdir().expect("temp dir");
    // BENCH_DIR keeps the files, to look at them afterwards.
    let place = std::env::var_os("BENCH_DIR").map_or_else(|| dir.path().to_owned(), PathBuf::from);
    let src = place.join("src.redb");
    let tenants: Vec<String> = (0..tenant_count).map(|i| format!("bench{i}")).collect();
    let started = Instant::now();
    {
        let engine = Engine::builder()
            .durability(Durability::None)
            .open(&src)
            .expect("open");
        std::thread::scope(|s| {
            for name in &tenants {
                let engine = engine.clone();
                s.spawn(move || {
                    let t = engine.tenant(name).expect("tenant");
                    for i in 0..tasks / tenant_count {
                        t.open(&task(name, i)).expect("open");
                    }
                });
            }
        });
    }
    println!(
        "filled {tasks} tasks across {tenant_count} tenants in {:.1}s",
        started.elapsed().as_secs_f64()
    );
    let (minted, _) = timed(
        &place,
        &[
            "--tenant",
            &tenants[0],
            "token",
            "new",
            "--actor",
            "ops",
            "--scope",
            "operator",
        ],
    );
    let tokens = place.join("tokens");
    std::fs::write(
        &tokens,
        format!("{}\n", minted["line"].as_str().expect("line")),
    )
    .expect("write");
    let token = place.join("token");
    std::fs::write(
        &token,
        format!("{}\n", minted["token"].as_str().expect("token")),
    )
    .expect("write");
    let src = src.to_str().expect("utf-8").to_owned();
    let mut server = Command::new(binary())
        .current_dir(&place)
        .args([
            "--db",
            &src,
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--no-sweep",
        ])
        .args(["--tokens", tokens.to_str().expect("utf-8")])
        .args(["--admin-tenant", &tenants[0]])
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .expect("serve");
    let mut lines = BufReader::new(server.stderr.take().expect("stderr")).lines();
    let base = loop {
        let line = lines
            .next()
            .expect("serve printed its address")
            .expect("line");
        if let Some(at) = line.split("listening on ").nth(1) {
            break at.trim().to_owned();
        }
    };
    std::thread::spawn(move || for _ in lines.map_while(Result::ok) {});
    let online = place.join("online.backup");
    let (answer, secs) = timed(
        &place,
        &[
            "backup",
            "--server",
            &base,
            "--token-file",
            token.to_str().expect("utf-8"),
            "--out",
            online.to_str().expect("utf-8"),
        ],
    );
    report("backup through serve", &answer, secs);
    // Stopped cleanly, so that the file opens read-only at once.
    let _ = Command::new("kill")
        .args(["-TERM", &server.id().to_string()])
        .status();
    let _ = server.wait();
    let offline = place.join("offline.backup");
    let (answer, secs) = timed(
        &place,
        &[
            "--db",
            &src,
            "backup",
            "--out",
            offline.to_str().expect("utf-8"),
        ],
    );
    report("backup offline (--db)", &answer, secs);
    let restored = place.join("restored.redb");
    let (answer, secs) = timed(
        &place,
        &[
            "restore",
            "--in",
            online.to_str().expect("utf-8"),
            "--to",
            restored.to_str().expect("utf-8"),
        ],
    );
    assert_eq!(answer["ok"], true, "{answer}");
    let keys: u64 = answer["tenants"]
        .as_array()
        .expect("tenants")
        .iter()
        .filter_map(|t| t["keys"].as_u64())
        .sum();
    println!(
        "restore (with digests and check): {keys} keys in {secs:.2}s: {:.0} keys/s",
        keys as f64 / secs
    );
}
