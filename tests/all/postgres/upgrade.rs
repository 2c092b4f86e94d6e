//! A rolling upgrade on one PostgreSQL database: two host processes, one
//! running this build's component and one running the same rules built one
//! layout later (`next-layout`, the next release), interleaving writes on
//! one tenant. Until the newer build writes a tenant, this build writes it
//! and both read it (a tenant the newer build only reads stays this
//! build's); the newer build's first write moves the tenant's mark
//! in the same transaction, and from then on every call of this build is
//! refused as `newer-layout`, naming both layouts, and changes nothing; the
//! newer build's check is clean at every step.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use leasehold_guest::schema;
use leasehold_tests::NEXT_LAYOUT_COMPONENT_FILE;
use leasehold_tests::pg::Schema;
use serde_json::Value;

/// Bounds a hang only: compiling a component in a debug build on a busy
/// machine is slow.
const PATIENCE: Duration = Duration::from_secs(900);

/// One `upgrade-host` process of one build.
struct Host {
    child: Child,
    stdin: ChildStdin,
    lines: mpsc::Receiver<String>,
}

impl Host {
    fn start(url: &str, tenant: &str, component: Option<&str>) -> Host {
        let mut child = Command::new(env!("CARGO_BIN_EXE_upgrade-host"))
            .args([url, tenant])
            .args(component)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("the host starts");
        let stdin = child.stdin.take().expect("stdin");
        let out = child.stdout.take().expect("stdout");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let first = lines.recv_timeout(PATIENCE).expect("the host connects");
        assert_eq!(first, "ready");
        Host {
            child,
            stdin,
            lines,
        }
    }

    fn ask(&mut self, command: &str) -> Value {
        writeln!(self.stdin, "{command}").expect("the host reads");
        let line = self
            .lines
            .recv_timeout(PATIENCE)
            .unwrap_or_else(|e| panic!("{command}: no answer: {e}"));
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("{command}: {line}: {e}"))
    }

    /// `command`, which must succeed.
    fn ok(&mut self, command: &str) -> Value {
        let a = self.ask(command);
        a.get("ok")
            .cloned()
            .unwrap_or_else(|| panic!("{command}: {a}"))
    }

    /// The check finds nothing.
    fn clean(&mut self, when: &str) {
        let found = self.ok("check");
        assert_eq!(found, serde_json::json!([]), "{when}");
    }
}

impl Drop for Host {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Every key and value of `tenant`, in key order.
fn rows(schema: &Schema, tenant: &str) -> Vec<(Vec<u8>, Vec<u8>)> {
    schema
        .client()
        .query(
            "SELECT key, value FROM leasehold_kv WHERE tenant = $1 ORDER BY key",
            &[&tenant],
        )
        .expect("raw read")
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect()
}

fn mark(schema: &Schema, tenant: &str) -> Option<String> {
    let key = schema::layout().into_bytes();
    rows(schema, tenant)
        .into_iter()
        .find(|(k, _)| *k == key)
        .map(|(_, v)| String::from_utf8(v).expect("an ASCII mark"))
}

#[test]
fn two_builds_on_one_database_never_leave_the_check_failing() {
    let Some(schema) = Schema::fresh() else {
        return;
    };
    let tenant = "acme";
    let this = schema::LAYOUT_VERSION;
    let next = this + 1;
    let mut older = Host::start(&schema.url, tenant, None);
    let mut newer = Host::start(&schema.url, tenant, Some(NEXT_LAYOUT_COMPONENT_FILE));

    // Before the newer build writes: the older one writes, both read, and
    // the newer one's reads leave the mark where it is.
    older.ok("open a");
    older.ok("open b");
    older.ok("claim a ann");
    older.ok("arm r1 wake 50");
    older.clean("the older build's own check");
    newer.clean("the newer build's check, before it writes");
    assert_eq!(
        newer.ok("history a"),
        serde_json::json!([[1, "open"], [2, "claim"]])
    );
    assert_eq!(mark(&schema, tenant), Some(format!("{this}/64")));
    older.ok("release a ann");
    newer.clean("after the older build's release");

    // The newer build's first write moves the mark, in its own call.
    newer.ok("claim b bob");
    assert_eq!(mark(&schema, tenant), Some(format!("{next}/64")));
    newer.clean("after the newer build's first write");

    // From now on every call of the older build is refused by name, naming
    // both layouts, and changes nothing.
    let before = rows(&schema, tenant);
    for command in [
        "claim a ann",
        "settle b",
        "release b bob",
        "open c",
        "arm r2 wake 60",
        "history a",
        "check",
    ] {
        let a = older.ask(command);
        assert_eq!(a["error"], "newer_layout", "{command}: {a}");
        let detail = a["detail"].as_str().expect("a detail");
        assert!(
            detail.contains(&format!("layout {next}"))
                && detail.contains(&format!("writes layout {this}"))
                && detail.contains("upgrade"),
            "{command}: {detail}"
        );
        assert!(
            rows(&schema, tenant) == before,
            "{command} changed the tenant"
        );
        newer.clean(&format!("after the older build's refused {command}"));
    }

    // Another tenant the newer build has only read stays the older build's.
    let mut older_globex = Host::start(&schema.url, "globex", None);
    let mut newer_globex = Host::start(&schema.url, "globex", Some(NEXT_LAYOUT_COMPONENT_FILE));
    older_globex.ok("open g");
    newer_globex.clean("another tenant, read by the newer build");
    older_globex.ok("claim g gus");
    older_globex.clean("the older build writes a tenant the newer one only read");
    assert_eq!(mark(&schema, "globex"), Some(format!("{this}/64")));

    // The newer build carries on, and its check stays clean.
    newer.ok("settle b");
    newer.ok("claim a carol");
    newer.ok("open c");
    newer.clean("after the newer build's writes");
    assert_eq!(
        newer.ok("history b"),
        serde_json::json!([[1, "open"], [2, "claim"], [3, "settle"]])
    );
}
