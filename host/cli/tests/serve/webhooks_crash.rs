//! Webhooks while servers are killed with SIGKILL: on redb (one server,
//! killed and started again on its file) and on PostgreSQL (two servers on
//! one database, either killed while the other delivers), thousands of
//! changes are made under load and pushed to a receiver that verifies
//! every request with the `standardwebhooks` package from PyPI, fails a
//! third of them and sometimes hangs past the sender's timeout. Every
//! change the filter names arrives at least once, each task's changes in
//! feed order, duplicates only ever under the same `webhook-id`, and
//! nothing outside the filter or of another tenant.
//!
//! Chance (the receiver's answers, the moments of the kills) comes from a
//! seed, printed; the assertions depend on none of it.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};

use super::fleet::Fleet;
use super::{client, mint};

/// Tasks of each writer's pair (two writers for acme, one for globex, each
/// making `TASKS / 2`); each task makes three changes (open, claim,
/// settle): 3,600 changes in all, 3,000 of them matching a filter.
const TASKS: usize = 800;
/// How long a test waits for what must happen.
const BOUND: Duration = Duration::from_secs(300);
/// The tuned delivery flags: quick retries, a short timeout the receiver's
/// hangs outlast, a lease that lapses soon after a kill.
const FLAGS: [&str; 12] = [
    "--webhooks-allow-http",
    "--webhooks-allow-range",
    "127.0.0.0/8",
    "--webhooks-timeout",
    "1s",
    "--webhooks-first-retry",
    "50ms",
    "--webhooks-lease",
    "3s",
    "--webhooks-parallelism",
    "32",
    "--no-sweep",
];

fn seed() -> u64 {
    let seed = std::env::var("LEASEHOLD_TEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(1)
        });
    eprintln!("webhooks_crash: LEASEHOLD_TEST_SEED={seed}");
    seed
}

/// A Python with `standardwebhooks` (the version the crate's receiver
/// examples are tested with), made once under the target's tmp directory;
/// `None` (the test skipped) where there is no Python, unless CI requires
/// it.
fn python() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("LEASEHOLD_WEBHOOKS_PYTHON") {
        return Some(p.into());
    }
    let ok = |c: &mut Command| {
        c.stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .status()
            .is_ok_and(|s| s.success())
    };
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("webhooks-python");
    let py = dir.join("bin/python");
    if ok(Command::new(&py).args(["-c", "import standardwebhooks"])) {
        return Some(py);
    }
    if !ok(Command::new("python3").arg("--version")) {
        assert!(
            std::env::var_os("LEASEHOLD_REQUIRE_RECEIVERS").is_none(),
            "python3 is required here (LEASEHOLD_REQUIRE_RECEIVERS)"
        );
        eprintln!("skipped: no python3");
        return None;
    }
    assert!(ok(Command::new("python3").args(["-m", "venv"]).arg(&dir)));
    assert!(ok(Command::new(&py).args([
        "-m",
        "pip",
        "install",
        "--quiet",
        "--disable-pip-version-check",
        "standardwebhooks==1.3.0",
    ])));
    Some(py)
}

/// The receiver (`chaos_receiver.py`): its port, its reports, and its
/// standard input for secrets.
struct Chaos {
    child: Child,
    port: u16,
    reports: Arc<Mutex<Vec<Value>>>,
}

impl Chaos {
    fn start(py: &Path, seed: u64) -> Chaos {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/serve/chaos_receiver.py");
        let mut child = Command::new(py)
            .arg(script)
            .env("SEED", seed.to_string())
            .env("HANG_SECONDS", "2")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("the receiver starts");
        let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
        let first: Value =
            serde_json::from_str(&lines.next().expect("a line").expect("read")).expect("JSON");
        let port = first["listening"].as_u64().expect("a port") as u16;
        let reports = Arc::new(Mutex::new(Vec::new()));
        let keep = reports.clone();
        std::thread::spawn(move || {
            for line in lines.map_while(Result::ok) {
                if let Ok(v) = serde_json::from_str::<Value>(&line) {
                    keep.lock().expect("reports").push(v);
                }
            }
        });
        Chaos {
            child,
            port,
            reports,
        }
    }

    /// Tells the receiver the secret of requests to `path`, and waits
    /// until it has it.
    fn secret(&mut self, path: &str, secret: &str) {
        let stdin = self.child.stdin.as_mut().expect("stdin");
        writeln!(stdin, "{path} {secret}").expect("write");
        stdin.flush().expect("flush");
        wait("the receiver to take the secret", || {
            self.reports().iter().any(|r| r["secret_for"] == path)
        });
    }

    fn reports(&self) -> Vec<Value> {
        self.reports.lock().expect("reports").clone()
    }
}

impl Drop for Chaos {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn wait(what: &str, mut cond: impl FnMut() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(start.elapsed() < BOUND, "waited {BOUND:?} for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// One call, sent again to a live server until one answers: a kill may
/// leave a call unanswered, committed or not, and each call here is one a
/// repeat of leaves as it was (or refuses, which is fine).
fn call(
    fleet: &Fleet,
    token: &str,
    method: &str,
    path: &str,
    body: Option<&Value>,
) -> (u16, Value) {
    let http = client();
    let start = Instant::now();
    for n in 0.. {
        assert!(
            start.elapsed() < BOUND,
            "{method} {path}: no server answered within {BOUND:?}"
        );
        let base = fleet.base(n);
        let mut req = http
            .request(method.parse().expect("a method"), format!("{base}{path}"))
            .bearer_auth(token);
        if let Some(b) = body {
            req = req.json(b);
        }
        match req.send() {
            Ok(r) if r.status().is_server_error() || r.status() == 429 => {}
            Ok(r) => {
                let status = r.status().as_u16();
                return (status, r.json().unwrap_or(Value::Null));
            }
            Err(_) => {}
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    unreachable!()
}

/// Opens, claims and settles `id` of `kind`; a repeat after a lost answer
/// is refused as already done, which is as good.
fn life(fleet: &Fleet, service: &str, reviewer: &str, id: &str, kind: &str) {
    let task = json!({"id": id, "run": "r", "kind": kind, "candidate_roles": ["finance"],
                      "justification": {"n": id}});
    let (s, b) = call(fleet, service, "POST", "/v1/tasks", Some(&task));
    assert!(s == 200 || s == 409, "open {id}: {s} {b}");
    let (s, b) = call(
        fleet,
        reviewer,
        "POST",
        &format!("/v1/tasks/{id}/claim"),
        None,
    );
    assert!(s == 200 || s == 409, "claim {id}: {s} {b}");
    let settle = json!({"settlement": "completed"});
    let (s, _) = call(
        fleet,
        reviewer,
        "POST",
        &format!("/v1/tasks/{id}/settle"),
        Some(&settle),
    );
    assert!(s == 200 || s == 409, "settle {id}: {s}");
}

fn webhooks_survive_kills(db: &Path, dir: &Path, servers: usize, label: &str) {
    let Some(py) = python() else { return };
    let seed = seed();
    let mut rng = fastrand::Rng::with_seed(seed);
    // Tenants of their own, so a shared database's earlier runs are apart.
    let stamp = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let (acme, globex) = (format!("acme{stamp}"), format!("globex{stamp}"));
    let mut lines = Vec::new();
    let mut tokens = BTreeMap::new();
    for (tenant, actor, scope, roles) in [
        (&acme, "ops", "operator", &[][..]),
        (&acme, "wf", "service", &[][..]),
        (&acme, "alice", "reviewer", &["finance"][..]),
        (&globex, "ops", "operator", &[][..]),
        (&globex, "wf", "service", &[][..]),
        (&globex, "alice", "reviewer", &["finance"][..]),
    ] {
        let (token, line) = mint(dir, tenant, actor, scope, roles);
        tokens.insert((tenant.clone(), scope), token);
        lines.push(line);
    }
    let tokens_file = dir.join("tokens");
    std::fs::write(&tokens_file, lines.join("\n") + "\n").expect("tokens");
    let fleet = Fleet::new(
        dir,
        db,
        tokens_file.to_str().expect("utf-8"),
        &FLAGS,
        servers,
    );
    for i in 0..servers {
        fleet.start(i);
    }
    let mut chaos = Chaos::start(&py, seed);
    // acme's subscription: only tasks of kind `approve`; globex's: all.
    let mut subs = BTreeMap::new();
    for (tenant, path, filter) in [
        (
            &acme,
            "/acme",
            json!({"tasks": true, "timers": false, "kinds": ["approve"]}),
        ),
        (&globex, "/globex", json!({})),
    ] {
        let url = format!("http://127.0.0.1:{}{path}", chaos.port);
        let (s, body) = call(
            &fleet,
            &tokens[&(tenant.clone(), "operator")],
            "POST",
            "/v1/subscriptions",
            Some(&json!({"url": url, "filter": filter})),
        );
        assert_eq!(s, 201, "{label}: add a subscription: {body}");
        let secret = body["secret"].as_str().expect("a secret").to_owned();
        let id = body["subscription"]["id"]
            .as_str()
            .expect("an id")
            .to_owned();
        chaos.secret(path, &secret);
        subs.insert(tenant.clone(), id);
    }

    // The load: both tenants' tasks, acme's of two kinds, from threads.
    let done = AtomicBool::new(false);
    std::thread::scope(|s| {
        // The killer: while the load runs, kills a server now and then and
        // starts it again (on PostgreSQL the other delivers meanwhile).
        let (fleet, done) = (&fleet, &done);
        s.spawn(move || {
            let mut kills = 0;
            while kills < 3 && !done.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(rng.u64(1500..4000)));
                let i = rng.usize(..servers);
                fleet.kill(i);
                std::thread::sleep(Duration::from_millis(rng.u64(100..600)));
                fleet.start(i);
                kills += 1;
            }
        });
        let writers: Vec<_> = [(0, &acme), (1, &acme), (2, &globex)]
            .into_iter()
            .map(|(w, tenant)| {
                let service = tokens[&(tenant.clone(), "service")].clone();
                let reviewer = tokens[&(tenant.clone(), "reviewer")].clone();
                s.spawn(move || {
                    for i in 0..TASKS / 2 {
                        let kind = if tenant.starts_with("acme") && i % 4 == 3 {
                            "other"
                        } else {
                            "approve"
                        };
                        life(fleet, &service, &reviewer, &format!("w{w}-{i}"), kind);
                    }
                })
            })
            .collect();
        for w in writers {
            w.join().expect("a writer");
        }
        done.store(true, Ordering::Relaxed);
    });

    // What must arrive: (task, seq) of every change the filters name.
    let mut owed: BTreeMap<String, BTreeSet<(String, u64)>> = BTreeMap::new();
    for (w, tenant) in [(0, &acme), (1, &acme), (2, &globex)] {
        for i in 0..TASKS / 2 {
            if tenant.starts_with("acme") && i % 4 == 3 {
                continue;
            }
            for seq in 1..=3 {
                owed.entry(tenant.clone())
                    .or_default()
                    .insert((format!("w{w}-{i}"), seq));
            }
        }
    }
    let path_of = |tenant: &str| {
        if tenant.starts_with("acme") {
            "/acme"
        } else {
            "/globex"
        }
    };
    wait("every owed change acknowledged", || {
        let reports = chaos.reports();
        owed.iter().all(|(tenant, want)| {
            let got: BTreeSet<(String, u64)> = reports
                .iter()
                .filter(|r| r["path"] == path_of(tenant) && r["status"] == 204)
                .filter_map(|r| Some((r["task"].as_str()?.to_owned(), r["seq"].as_u64()?)))
                .collect();
            want.is_subset(&got)
        })
    });

    let reports: Vec<Value> = chaos
        .reports()
        .into_iter()
        .filter(|r| r.get("verified").is_some())
        .collect();
    assert!(
        reports.iter().all(|r| r["verified"] == true),
        "{label}: a request failed verification: {:?}",
        reports.iter().find(|r| r["verified"] != true)
    );
    for (tenant, want) in &owed {
        let path = path_of(tenant);
        let mine: Vec<&Value> = reports.iter().filter(|r| r["path"] == path).collect();
        // Nothing of another tenant's subscription, nothing the filter
        // leaves out.
        assert!(
            mine.iter()
                .all(|r| r["subscription"] == subs[tenant].as_str()),
            "{label}: {path} heard another subscription"
        );
        let heard: BTreeSet<(String, u64)> = mine
            .iter()
            .filter_map(|r| Some((r["task"].as_str()?.to_owned(), r["seq"].as_u64()?)))
            .collect();
        assert_eq!(
            &heard, want,
            "{label}: {path} heard what the filter leaves out"
        );
        // A duplicate carries the id it had, and an id names one change.
        let mut ids: BTreeMap<&str, (String, u64)> = BTreeMap::new();
        for r in &mine {
            let place = (
                r["task"].as_str().expect("task").to_owned(),
                r["seq"].as_u64().expect("seq"),
            );
            let id = r["id"].as_str().expect("an id");
            let before = ids.insert(id, place.clone());
            assert!(
                before.is_none_or(|b| b == place),
                "{label}: webhook-id {id} named two changes"
            );
        }
        assert_eq!(ids.len(), want.len(), "{label}: one id per change");
        // Each task's changes were first acknowledged in feed order.
        let mut firsts: BTreeMap<String, Vec<u64>> = BTreeMap::new();
        let mut seen = BTreeSet::new();
        for r in mine.iter().filter(|r| r["status"] == 204) {
            let (task, seq) = (
                r["task"].as_str().expect("task").to_owned(),
                r["seq"].as_u64().expect("seq"),
            );
            if seen.insert((task.clone(), seq)) {
                firsts.entry(task).or_default().push(seq);
            }
        }
        for (task, seqs) in &firsts {
            assert_eq!(seqs, &[1, 2, 3], "{label}: {path} {task}");
        }
    }
    let failed = reports.iter().filter(|r| r["status"] != 204).count();
    assert!(
        failed > 0,
        "{label}: the receiver failed none: the test tested nothing"
    );
    eprintln!(
        "webhooks_crash {label}: {} requests, {failed} failed or hung, {} changes owed",
        reports.len(),
        owed.values().map(BTreeSet::len).sum::<usize>()
    );
}

#[test]
fn on_redb_a_killed_server_loses_no_webhook_and_keeps_each_tasks_order() {
    let dir = tempfile::tempdir().expect("dir");
    let db = dir.path().join("hooks.redb");
    webhooks_survive_kills(&db, dir.path(), 1, "redb");
}

#[test]
fn on_postgres_two_servers_killed_in_turn_lose_no_webhook_and_keep_each_tasks_order() {
    let Some(url) = super::postgres() else { return };
    let dir = tempfile::tempdir().expect("dir");
    webhooks_survive_kills(Path::new(&url), dir.path(), 2, "postgres");
}
