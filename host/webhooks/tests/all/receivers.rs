//! The receiver examples (`examples/receivers`), run under Python and
//! Node with the Standard Webhooks packages from PyPI and npm, verify what
//! the engine sends them unchanged, and refuse a forged delivery.
//!
//! Each interpreter's package is installed once into this crate's target
//! tmp directory (or taken from `LEASEHOLD_WEBHOOKS_PYTHON`, a Python with
//! `standardwebhooks`, and `LEASEHOLD_WEBHOOKS_NODE_DIR`, a directory with
//! it in `node_modules`). Without `python3` or `node` the test says it is
//! skipped, unless `LEASEHOLD_REQUIRE_RECEIVERS` is set (as CI does), when
//! it fails.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use leasehold_host::Engine;
use leasehold_webhooks::{MemoryStore, Outcome, Secret, Signed};
use tokio::io::{AsyncBufReadExt, BufReader};

use crate::harness::*;

/// The package versions the examples are tested with.
const PYPI: &str = "standardwebhooks==1.3.0";
const NPM: &str = "standardwebhooks@1.3.0";

fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/receivers")
}

fn runs(cmd: &mut Command) -> bool {
    cmd.stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .status()
        .is_ok_and(|s| s.success())
}

fn skip(what: &str) {
    assert!(
        std::env::var_os("LEASEHOLD_REQUIRE_RECEIVERS").is_none(),
        "{what} is required here (LEASEHOLD_REQUIRE_RECEIVERS)"
    );
    eprintln!("skipped: {what} is not available");
}

/// A Python with `standardwebhooks`, made once.
fn python() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("LEASEHOLD_WEBHOOKS_PYTHON") {
        return Some(p.into());
    }
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("webhooks-python");
    let py = dir.join("bin/python");
    if runs(Command::new(&py).args(["-c", "import standardwebhooks"])) {
        return Some(py);
    }
    if !runs(Command::new("python3").arg("--version")) {
        return None;
    }
    assert!(
        runs(Command::new("python3").args(["-m", "venv"]).arg(&dir)),
        "python3 -m venv"
    );
    assert!(
        runs(Command::new(&py).args([
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            PYPI
        ])),
        "pip install {PYPI}"
    );
    Some(py)
}

/// A directory with `standardwebhooks` in its `node_modules`, made once.
fn node_dir() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("LEASEHOLD_WEBHOOKS_NODE_DIR") {
        return Some(p.into());
    }
    if !runs(Command::new("node").arg("--version")) {
        return None;
    }
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("webhooks-node");
    if !dir
        .join("node_modules/standardwebhooks/package.json")
        .exists()
    {
        std::fs::create_dir_all(&dir).expect("a directory");
        assert!(
            runs(
                Command::new("npm")
                    .args(["install", "--no-audit", "--no-fund", "--silent", "--prefix"])
                    .arg(&dir)
                    .arg(NPM)
            ),
            "npm install {NPM}"
        );
    }
    Some(dir)
}

/// Runs `program script` as a receiver, has the engine deliver three
/// tasks' changes to it, sends it one forged delivery, and checks its
/// reports.
async fn receiver_verifies(mut command: tokio::process::Command) {
    let secret = Secret::generate().expect("secret");
    let mut child = command
        .env("LEASEHOLD_WEBHOOK_SECRET", secret.to_whsec())
        .env("PORT", "0")
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("the receiver starts");
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let mut next = async || -> serde_json::Value {
        let line = tokio::time::timeout(BOUND, lines.next_line())
            .await
            .expect("the receiver reports in time")
            .expect("stdout reads")
            .expect("the receiver is running");
        serde_json::from_str(&line).expect("a JSON report")
    };
    let port = next().await["listening"].as_u64().expect("a port");
    let url = format!("http://127.0.0.1:{port}/hooks");

    let engine = Engine::in_memory().expect("engine");
    let acme = engine.tenant("acme").expect("tenant");
    for i in 0..3 {
        life(&acme, &format!("t{i}"), "approve");
    }
    let store = Arc::new(MemoryStore::new());
    store.insert("acme", subscription("sub_py", &url, &secret));
    let sender = local_sender("a", Duration::from_secs(10));
    let d = deliveries(&engine, &store, sender.clone(), quick("a"));
    d.serve("acme");
    let end = head(&acme);
    wait_until("every entry to be acknowledged", || {
        stored(&store, "acme", "sub_py").position.as_deref() == Some(end.as_str())
    })
    .await;
    d.shutdown().await;

    // A delivery signed with another key is refused.
    let body = br#"{"type":"task.open","data":{}}"#;
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("time")
        .as_secs() as i64;
    let forger = Secret::generate().expect("secret");
    let forged = Signed {
        id: "msg_forged".into(),
        timestamp: now,
        signature: forger.sign("msg_forged", now, body),
        body: bytes::Bytes::from_static(body),
    };
    assert_eq!(
        sender.send(&url, &forged).await.outcome,
        Outcome::Status(400)
    );

    let mut verified = Vec::new();
    loop {
        let report = next().await;
        if report["verified"] == false {
            assert_eq!(report["id"], "msg_forged");
            break;
        }
        verified.push(report);
    }
    assert_eq!(verified.len(), 9, "{verified:?}");
    let mut seen = std::collections::BTreeSet::new();
    for r in &verified {
        assert_eq!(r["subscription"], "sub_py");
        assert!(r["id"].as_str().is_some_and(|i| i.starts_with("msg_")));
        assert!(seen.insert(r["id"].as_str().map(str::to_owned)));
    }
    for t in ["t0", "t1", "t2"] {
        let types: Vec<&str> = verified
            .iter()
            .filter(|r| r["task"] == t)
            .filter_map(|r| r["type"].as_str())
            .collect();
        assert_eq!(types, ["task.open", "task.claim", "task.settle"], "{t}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_receiver_verifies_every_delivery_with_the_standardwebhooks_package() {
    let Some(py) = tokio::task::spawn_blocking(python).await.expect("setup") else {
        return skip("python3");
    };
    let mut cmd = tokio::process::Command::new(py);
    cmd.arg(examples().join("receiver.py"));
    receiver_verifies(cmd).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_javascript_receiver_verifies_every_delivery_with_the_standardwebhooks_package() {
    let Some(dir) = tokio::task::spawn_blocking(node_dir).await.expect("setup") else {
        return skip("node");
    };
    // Node resolves an ES module's imports from the module's own directory
    // up, so the example runs from beside the installed package.
    std::fs::copy(examples().join("receiver.mjs"), dir.join("receiver.mjs"))
        .expect("the example is copied");
    let mut cmd = tokio::process::Command::new("node");
    cmd.arg(dir.join("receiver.mjs"));
    receiver_verifies(cmd).await;
}
