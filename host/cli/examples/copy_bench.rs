//! How fast `leasehold copy` moves tasks: fills a redb file with TASKS
//! tasks across TENANTS tenants through the library (default 100,000 across
//! 10; the dataset of the copy test at scale, every state a task can be
//! in, with timers), then times the built binary copying it redb to redb
//! and, when LEASEHOLD_TEST_PG names a database, redb to PostgreSQL and
//! PostgreSQL to redb. Each time is split into the keys and the digests and
//! `check` the copy ends with.
//!
//! `cargo build -p leasehold-cli && cargo run -p leasehold-cli --example copy_bench`
//! (the binary is found beside this example, or at LEASEHOLD_BIN).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

#[path = "../tests/support/dataset.rs"]
mod dataset;

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
    // target/<profile>/examples/copy_bench → target/<profile>/leasehold
    me.parent()
        .and_then(Path::parent)
        .map(|p| p.join("leasehold"))
        .expect("a target folder")
}

fn copy(from: &str, to: &str, tenants: &[String], tasks: usize) {
    let mut c = Command::new(binary());
    c.args(["--json", "copy", "--from", from, "--to", to]);
    for t in tenants {
        c.args(["--tenant", t]);
    }
    let started = Instant::now();
    let out = c.output().expect("run leasehold copy");
    let secs = started.elapsed().as_secs_f64();
    assert!(
        out.status.success(),
        "copy failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let answer: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    let keys: u64 = answer["tenants"]
        .as_array()
        .expect("tenants")
        .iter()
        .filter_map(|t| t["keys"].as_u64())
        .sum();
    let ms = |field: &str| answer[field].as_f64().unwrap_or(f64::NAN) / 1000.0;
    let (keys_secs, verify_secs) = (ms("copy_ms"), ms("verify_ms"));
    println!(
        "{from} -> {to}: {tasks} tasks ({keys} keys) in {secs:.2}s: {:.0} tasks/s in all; \
         the keys {keys_secs:.2}s ({:.0} tasks/s), digests and check {verify_secs:.2}s",
        tasks as f64 / secs,
        tasks as f64 / keys_secs,
    );
}

fn main() {
    let tasks = number("TASKS", 100_000);
    let tenant_count = number("TENANTS", 10);
    let dir = tempfile::tempdir().expect("temp dir");
    // BENCH_DIR keeps the files, to look at them afterwards.
    let place = std::env::var_os("BENCH_DIR").map_or_else(|| dir.path().to_owned(), PathBuf::from);
    let src = place.join("src.redb");
    let stamp = std::process::id();
    let tenants: Vec<String> = (0..tenant_count)
        .map(|i| format!("bench{i}-{stamp}"))
        .collect();
    let started = Instant::now();
    dataset::fill_at_once(&src, &tenants, tasks / tenant_count);
    println!(
        "filled {tasks} tasks across {tenant_count} tenants in {:.1}s",
        started.elapsed().as_secs_f64()
    );
    let src = src.to_str().expect("utf-8").to_owned();
    let dst = place.join("dst.redb");
    copy(&src, dst.to_str().expect("utf-8"), &tenants, tasks);
    if let Ok(url) = std::env::var("LEASEHOLD_TEST_PG") {
        let back = place.join("back.redb");
        copy(&src, &url, &tenants, tasks);
        copy(&url, back.to_str().expect("utf-8"), &tenants, tasks);
        for t in &tenants {
            let status = Command::new(binary())
                .args(["--db", &url, "--tenant", t, "tenant", "delete", "--yes"])
                .output()
                .expect("delete");
            assert!(status.status.success());
        }
    }
}
