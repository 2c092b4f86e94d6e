//! Online backup and restore, and serve's first sweep, run for real: a
//! `leasehold serve` process over a redb file, real HTTP, real CLI
//! processes. Four writers commit through serve while `leasehold backup
//! --server` takes a backup; `leasehold restore` writes it into a fresh
//! file (and PostgreSQL, when there is one), where every write answered
//! before the backup began is found and `check` is clean. A damaged or cut
//! backup is refused with nothing written; a target tenant holding keys is
//! refused; only operators back up, each its own tenant unless it is the
//! backup admin's; a client that stops reading does not keep the snapshot;
//! a backup through serve over PostgreSQL restores to a file. Serve logs what its first sweep will do and waits `--first-sweep-after`
//! before doing it.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use leasehold_host::{Engine, Lease, OnExpiry, Priority, Task, TaskState};
use serde_json::{Value, json};

#[path = "support/postgres.rs"]
mod pg_support;
use pg_support::postgres;

const BIN: &str = env!("CARGO_BIN_EXE_leasehold");
/// Bounds a hang only: nothing here waits this long when all is well.
const DEADLINE: Duration = Duration::from_secs(180);

fn leasehold(dir: &Path) -> Command {
    let mut c = Command::new(BIN);
    c.current_dir(dir)
        .env_remove("LEASEHOLD_DB")
        .env_remove("LEASEHOLD_COPY_STOP_AFTER_BATCHES");
    c
}

/// Runs the binary with `--json` and `args`.
fn run(dir: &Path, args: &[&str]) -> Output {
    leasehold(dir)
        .arg("--json")
        .args(args)
        .output()
        .expect("run leasehold")
}

fn ok(out: Output) -> Value {
    assert!(
        out.status.success(),
        "exit {:?}: {}{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("JSON answer")
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

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// A name no other run of the suite uses (the PostgreSQL database is
/// shared by the run).
fn unique(prefix: &str) -> String {
    format!("{prefix}-{}-{}", std::process::id(), now_ms())
}

/// Mints a token with `token new`; answers the token and its file line.
fn mint(dir: &Path, tenant: &str, actor: &str, scope: &str) -> (String, String) {
    let v = ok(leasehold(dir)
        .args([
            "--json", "--tenant", tenant, "token", "new", "--actor", actor, "--scope", scope,
            "--role", "finance",
        ])
        .output()
        .expect("runs"));
    (
        v["token"].as_str().expect("token").to_owned(),
        v["line"].as_str().expect("line").to_owned(),
    )
}

/// A running `leasehold serve`, killed when dropped.
struct Served {
    child: Child,
    base: String,
    log: std::sync::mpsc::Receiver<String>,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Served {
    /// Waits for a log line that `matches`, answering it.
    fn wait_for(&self, what: &str, matches: impl Fn(&str) -> bool) -> String {
        let until = Instant::now() + DEADLINE;
        loop {
            let left = until.saturating_duration_since(Instant::now());
            match self.log.recv_timeout(left) {
                Ok(line) if matches(&line) => return line,
                Ok(_) => {}
                Err(_) => panic!("serve never logged {what}"),
            }
        }
    }
}

/// Starts `serve` over `db` on a free loopback port; answers once it
/// listens, with its log lines (before and after) on a channel.
fn serve(dir: &Path, db: &Path, extra: &[&str]) -> Served {
    let mut child = leasehold(dir)
        .arg("--db")
        .arg(db)
        .args(["serve", "--listen", "127.0.0.1:0"])
        .args(extra)
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .expect("spawns");
    let stderr = child.stderr.take().expect("stderr");
    let (log, logged) = std::sync::mpsc::channel();
    let (addr, addr_rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if let Some(at) = line.split("listening on ").nth(1) {
                let _ = addr.send(at.trim().to_owned());
            }
            let _ = log.send(line);
        }
    });
    let base = addr_rx
        .recv_timeout(DEADLINE)
        .expect("serve printed its address");
    Served {
        child,
        base,
        log: logged,
    }
}

fn client() -> reqwest::blocking::Client {
    reqwest::blocking::Client::builder()
        .timeout(Duration::from_secs(60))
        .build()
        .expect("client")
}

/// Two tenants, an operator of each (the first the backup admin's), a
/// service and a reviewer of the first; the token file and one file per
/// token.
struct Setup {
    dir: tempfile::TempDir,
    tenants: [String; 2],
    tokens: PathBuf,
    operators: [String; 2],
    service: String,
    reviewer: String,
}

impl Setup {
    fn new() -> Setup {
        let dir = tempfile::tempdir().expect("temp dir");
        let p = dir.path();
        let tenants = [unique("bka"), unique("bkb")];
        let (op_a, l1) = mint(p, &tenants[0], "ops", "operator");
        let (op_b, l2) = mint(p, &tenants[1], "ops", "operator");
        let (service, l3) = mint(p, &tenants[0], "flow", "service");
        let (reviewer, l4) = mint(p, &tenants[0], "alice", "reviewer");
        let tokens = p.join("tokens");
        std::fs::write(&tokens, format!("{l1}\n{l2}\n{l3}\n{l4}\n")).expect("write");
        Setup {
            dir,
            tenants,
            tokens,
            operators: [op_a, op_b],
            service,
            reviewer,
        }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// A file holding `token`, for `backup --token-file`.
    fn token_file(&self, token: &str) -> PathBuf {
        let f = self.path(&format!("token-{}", &token[token.len() - 8..]));
        std::fs::write(&f, format!("{token}\n")).expect("write");
        f
    }

    fn serve(&self, db: &Path, extra: &[&str]) -> Served {
        let mut args = vec![
            "--tokens",
            self.tokens.to_str().expect("utf-8"),
            "--admin-tenant",
            &self.tenants[0],
        ];
        args.extend(extra);
        serve(self.dir.path(), db, &args)
    }

    fn backup(&self, served: &Served, token: &str, out: &Path) -> Output {
        let file = self.token_file(token);
        run(
            self.dir.path(),
            &[
                "backup",
                "--server",
                &served.base,
                "--token-file",
                file.to_str().expect("utf-8"),
                "--out",
                out.to_str().expect("utf-8"),
            ],
        )
    }
}

fn arg(p: &Path) -> &str {
    p.to_str().expect("utf-8")
}

fn task_body(id: &str, justification: Value) -> Value {
    json!({"id": id, "run": "r", "kind": "approve", "candidate_roles": ["finance"],
           "justification": justification})
}

/// What a writer was told: the step of the task answered 200, and when
/// the answer arrived (this machine's clock, the server's too).
#[derive(Clone, Debug)]
struct Ack {
    tenant: String,
    id: String,
    step: &'static str,
    at_ms: i64,
}

/// Opens, claims and settles tasks until told to stop, recording each
/// answer.
fn writer(
    base: &str,
    token: &str,
    tenant: &str,
    w: usize,
    stop: &AtomicBool,
    acks: &Mutex<Vec<Ack>>,
    count: &AtomicUsize,
) {
    let c = client();
    let record = |id: &str, step: &'static str| {
        acks.lock().expect("lock").push(Ack {
            tenant: tenant.to_owned(),
            id: id.to_owned(),
            step,
            at_ms: now_ms(),
        });
        count.fetch_add(1, Ordering::SeqCst);
    };
    let mut i = 0;
    while !stop.load(Ordering::SeqCst) {
        let id = format!("w{w}-{i}");
        i += 1;
        let steps: [(&'static str, String, Value); 3] = [
            (
                "open",
                format!("{base}/v1/tasks"),
                task_body(&id, json!({"writer": w})),
            ),
            (
                "claim",
                format!("{base}/v1/tasks/{id}/claim"),
                json!({"lease_ms": 3_600_000}),
            ),
            (
                "settle",
                format!("{base}/v1/tasks/{id}/settle"),
                json!({"settlement": "completed"}),
            ),
        ];
        for (step, url, body) in steps {
            let r = c
                .post(url)
                .bearer_auth(token)
                .json(&body)
                .send()
                .expect("serve answers");
            assert_eq!(r.status(), 200, "{step} {id}: {:?}", r.text());
            record(&id, step);
        }
    }
}

/// Waits until `count` reaches `n`.
fn until_count(count: &AtomicUsize, n: usize) {
    let until = Instant::now() + DEADLINE;
    while count.load(Ordering::SeqCst) < n {
        assert!(Instant::now() < until, "the writers stalled");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Every write answered before `began_at_ms` is in the database at `db`,
/// as far as it got: opened, claimed by `ops`, or completed.
fn every_acknowledged_write_is_there(db: &str, acks: &[Ack], began_at_ms: i64) -> usize {
    let engine = if db.starts_with("postgres") {
        Engine::builder().postgres(db).expect("open PostgreSQL")
    } else {
        Engine::open(db).expect("open the restored file")
    };
    let mut checked = 0;
    for ack in acks.iter().filter(|a| a.at_ms < began_at_ms) {
        let t = engine.tenant(&ack.tenant).expect("tenant");
        let task = t.get(&ack.id).expect("get").unwrap_or_else(|| {
            panic!(
                "{} {}: opened before the backup, missing",
                ack.tenant, ack.id
            )
        });
        match ack.step {
            "open" => {}
            "claim" => assert!(
                matches!(task.state, TaskState::Claimed | TaskState::Completed),
                "{}: claimed before the backup, restored {:?}",
                ack.id,
                task.state
            ),
            _ => assert_eq!(
                task.state,
                TaskState::Completed,
                "{}: settled before the backup",
                ack.id
            ),
        }
        if task.state == TaskState::Claimed {
            assert_eq!(task.assignee.as_deref(), Some("ops"), "{}", ack.id);
            assert!(task.lease_until.is_some(), "{}: a claim is whole", ack.id);
        }
        checked += 1;
    }
    for tenant in acks.iter().map(|a| a.tenant.as_str()) {
        let found = engine
            .tenant(tenant)
            .expect("tenant")
            .check()
            .expect("check");
        assert!(found.is_empty(), "{tenant}: {found:?}");
    }
    checked
}

#[test]
fn a_backup_taken_while_four_writers_commit_restores_every_write_answered_before_it_began() {
    let s = Setup::new();
    let db = s.path("serve.redb");
    let served = s.serve(&db, &[]);
    let stop = AtomicBool::new(false);
    let acks = Mutex::new(Vec::new());
    let count = AtomicUsize::new(0);
    let out = s.path("online.backup");
    let answer = std::thread::scope(|scope| {
        for w in 0..4 {
            let (stop, acks, count, base) = (&stop, &acks, &count, served.base.as_str());
            let (token, tenant) = (&s.operators[w % 2], &s.tenants[w % 2]);
            scope.spawn(move || writer(base, token, tenant, w, stop, acks, count));
        }
        // Writes before the backup, during it, and after it.
        until_count(&count, 40);
        let answer = ok(s.backup(&served, &s.operators[0], &out));
        let after = count.load(Ordering::SeqCst);
        until_count(&count, after + 40);
        stop.store(true, Ordering::SeqCst);
        answer
    });
    let acks = acks.into_inner().expect("lock");
    let began = answer["began_at_ms"].as_i64().expect("began_at_ms");
    let before = acks.iter().filter(|a| a.at_ms < began).count();
    assert!(before >= 40, "{before} writes answered before the backup");
    assert!(
        acks.iter().any(|a| a.at_ms > began),
        "writes went on after the backup began"
    );
    let names: Vec<&str> = answer["tenants"]
        .as_array()
        .expect("tenants")
        .iter()
        .map(|t| t["tenant"].as_str().expect("name"))
        .collect();
    for t in &s.tenants {
        assert!(
            names.contains(&t.as_str()),
            "{t} is in the backup: {names:?}"
        );
    }

    let restored = s.path("restored.redb");
    let r = ok(run(
        s.dir.path(),
        &["restore", "--in", arg(&out), "--to", arg(&restored)],
    ));
    assert_eq!(r["ok"], true, "{r}");
    for t in r["tenants"].as_array().expect("tenants") {
        assert_eq!(t["digests_match"], true, "{t}");
        assert_eq!(t["discrepancies"], json!([]), "{t}");
    }
    let checked = every_acknowledged_write_is_there(arg(&restored), &acks, began);
    assert_eq!(checked, before);
    drop(served);

    // The same backup into PostgreSQL, when there is one.
    if let Some(url) = postgres() {
        let mut args = vec!["restore", "--in", arg(&out), "--to", &url];
        for t in &s.tenants {
            args.extend(["--tenant", t.as_str()]);
        }
        let r = ok(run(s.dir.path(), &args));
        assert_eq!(r["ok"], true, "{r}");
        every_acknowledged_write_is_there(&url, &acks, began);
        for t in &s.tenants {
            ok(run(
                s.dir.path(),
                &["--db", &url, "--tenant", t, "tenant", "delete", "--yes"],
            ));
        }
    }
}

/// A redb file with a few tasks in each of two tenants, and its offline
/// backup (`backup --db`).
fn offline_backup(s: &Setup) -> (PathBuf, PathBuf) {
    let db = s.path("offline.redb");
    let engine = Engine::open(&db).expect("open");
    for tenant in &s.tenants {
        let t = engine.tenant(tenant).expect("tenant");
        for i in 0..30 {
            t.open(&Task {
                id: format!("t{i}"),
                run: "r".into(),
                case: None,
                kind: "approve".into(),
                justification: format!("{{\"n\":{i}}}"),
                candidate_roles: vec!["finance".into()],
                assignee: None,
                lease_until: None,
                priority: Priority::Normal,
                state: TaskState::Open,
                on_expiry: OnExpiry::Deny,
                escalate_to: vec![],
                excluded_actors: vec![],
                created_at: now_ms(),
                due_at: None,
                revision: 0,
                decision: None,
                outcomes: Vec::new(),
                remind_before: Vec::new(),
                escalation: Vec::new(),
                steps_done: 0,
            })
            .expect("open");
        }
    }
    drop(engine);
    let out = s.path("offline.backup");
    let v = ok(run(
        s.dir.path(),
        &["--db", arg(&db), "backup", "--out", arg(&out)],
    ));
    assert_eq!(v["tenants"].as_array().map(Vec::len), Some(2), "{v}");
    (db, out)
}

#[test]
fn a_damaged_or_cut_backup_is_refused_and_nothing_is_written() {
    let s = Setup::new();
    let (_, backup) = offline_backup(&s);
    let text = std::fs::read_to_string(&backup).expect("read");
    let lines: Vec<&str> = text.lines().collect();
    // One value changed by a digit; the end line gone; the file cut in the
    // middle of the second tenant; a line after the end.
    let changed = {
        let mut l: Vec<String> = lines.iter().map(|x| (*x).to_owned()).collect();
        let i = l
            .iter()
            .position(|x| x.contains("\"value\""))
            .expect("an entry");
        // The value's last hex digit, just before `"}`.
        let at = l[i].len() - 3;
        let digit = if &l[i][at..at + 1] == "0" { "1" } else { "0" };
        l[i].replace_range(at..at + 1, digit);
        l.join("\n") + "\n"
    };
    let no_end = lines[..lines.len() - 1].join("\n") + "\n";
    let cut = lines[..lines.len() * 3 / 4].join("\n") + "\n";
    let trailing = text.clone() + "{\"key\":\"00\",\"value\":\"00\"}\n";
    for (name, damaged) in [
        ("changed", changed),
        ("no-end", no_end),
        ("cut", cut),
        ("trailing", trailing),
    ] {
        let f = s.path(name);
        std::fs::write(&f, damaged).expect("write");
        let target = s.path(&format!("{name}.redb"));
        let e = error(
            &run(
                s.dir.path(),
                &["restore", "--in", arg(&f), "--to", arg(&target)],
            ),
            2,
        );
        assert_eq!(e["error"], "bad_file", "{name}: {e}");
        assert!(!target.exists(), "{name}: the target was not even created");
    }
}

#[test]
fn a_target_tenant_that_holds_keys_is_refused_and_nothing_is_written() {
    let s = Setup::new();
    let (_, backup) = offline_backup(&s);
    let target = s.path("target.redb");
    // The second tenant is there already; the first is not.
    let only_b = ok(run(
        s.dir.path(),
        &[
            "restore",
            "--in",
            arg(&backup),
            "--to",
            arg(&target),
            "--tenant",
            &s.tenants[1],
        ],
    ));
    assert_eq!(only_b["tenants"].as_array().map(Vec::len), Some(1));
    let e = error(
        &run(
            s.dir.path(),
            &["restore", "--in", arg(&backup), "--to", arg(&target)],
        ),
        1,
    );
    assert_eq!(e["error"], "not_empty", "{e}");
    assert_eq!(e["detail"], s.tenants[1].as_str());
    // The first tenant, looked at before any was written, is still empty.
    let engine = Engine::open(&target).expect("open");
    let a = engine.tenant(&s.tenants[0]).expect("tenant");
    assert_eq!(a.get("t0").expect("get"), None);
    assert_eq!(a.open_count().expect("count"), 0);
}

#[test]
fn only_operators_back_up_and_each_its_own_tenant_unless_the_admins() {
    let s = Setup::new();
    let db = s.path("serve.redb");
    let served = s.serve(&db, &[]);
    let c = client();
    for (token, tenant) in s.operators.iter().zip(&s.tenants) {
        let r = c
            .post(format!("{}/v1/tasks", served.base))
            .bearer_auth(token)
            .json(&task_body("x", json!({})))
            .send()
            .expect("open");
        assert_eq!(r.status(), 200, "{tenant}");
    }
    let get = |token: Option<&str>, query: &str| {
        let mut r = c.get(format!("{}/backup{query}", served.base));
        if let Some(t) = token {
            r = r.bearer_auth(t);
        }
        r.send().expect("answer")
    };
    assert_eq!(get(None, "").status(), 401);
    assert_eq!(get(Some("lh_not-a-token"), "").status(), 401);
    assert_eq!(get(Some(&s.service), "").status(), 403);
    assert_eq!(get(Some(&s.reviewer), "").status(), 403);
    let other = format!("?tenant={}", s.tenants[0]);
    assert_eq!(get(Some(&s.operators[1]), &other).status(), 403);

    // The second tenant's operator: its own tenant alone.
    let own = s.path("own.backup");
    let v = ok(s.backup(&served, &s.operators[1], &own));
    let names: Vec<&str> = v["tenants"]
        .as_array()
        .expect("tenants")
        .iter()
        .map(|t| t["tenant"].as_str().expect("name"))
        .collect();
    assert_eq!(names, [s.tenants[1].as_str()]);
    // Through the CLI, a refusal is exit 1 and leaves no file.
    let refused = s.path("refused.backup");
    let file = s.token_file(&s.service);
    let e = error(
        &run(
            s.dir.path(),
            &[
                "backup",
                "--server",
                &served.base,
                "--token-file",
                arg(&file),
                "--out",
                arg(&refused),
            ],
        ),
        1,
    );
    assert_eq!(e["error"], "server", "{e}");
    assert!(!refused.exists());
    // The admin's operator: every tenant.
    let all = s.path("all.backup");
    let v = ok(s.backup(&served, &s.operators[0], &all));
    let names: Vec<&str> = v["tenants"]
        .as_array()
        .expect("tenants")
        .iter()
        .map(|t| t["tenant"].as_str().expect("name"))
        .collect();
    for t in &s.tenants {
        assert!(names.contains(&t.as_str()), "{names:?}");
    }
}

/// Sends `GET /backup` on a raw connection and reads only the start of the
/// answer.
fn stalled_backup(base: &str, token: &str) -> std::net::TcpStream {
    let addr = base.trim_start_matches("http://");
    let mut conn = std::net::TcpStream::connect(addr).expect("connect");
    write!(
        conn,
        "GET /backup HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {token}\r\n\r\n"
    )
    .expect("send");
    let mut start = [0u8; 12];
    conn.read_exact(&mut start).expect("the answer begins");
    assert_eq!(&start, b"HTTP/1.1 200");
    conn
}

#[test]
fn a_client_that_stops_reading_does_not_keep_the_snapshot() {
    let s = Setup::new();
    let db = s.path("serve.redb");
    // Long enough that the second request below surely comes before the
    // stalled client is cut off, however busy the machine.
    let served = s.serve(&db, &["--write-timeout", "15s"]);
    let c = client();
    // Far more than the socket buffers and the server's queue hold.
    let filler = "x".repeat(200 * 1024);
    for i in 0..12 {
        let r = c
            .post(format!("{}/v1/tasks", served.base))
            .bearer_auth(&s.operators[0])
            .json(&task_body(&format!("big{i}"), json!({ "filler": filler })))
            .send()
            .expect("open");
        assert_eq!(r.status(), 200);
    }
    let conn = stalled_backup(&served.base, &s.operators[0]);
    // While the stalled stream holds its snapshot, another backup waits
    // its turn (503 busy); once the write timeout has cut the stalled
    // client off, the next one runs.
    let busy = c
        .get(format!("{}/backup", served.base))
        .bearer_auth(&s.operators[0])
        .send()
        .expect("answer");
    assert_eq!(busy.status(), 503, "the stalled backup still runs");
    let problem: Value = busy.json().expect("a problem");
    assert!(
        problem["type"].as_str().expect("type").ends_with("busy"),
        "{problem}"
    );
    served.wait_for("the stalled backup cut short", |l| {
        l.contains("backup cut short")
    });
    let out = s.path("after.backup");
    ok(s.backup(&served, &s.operators[0], &out));
    drop(conn);
}

#[test]
fn serve_logs_its_first_sweep_and_waits_before_acting() {
    let s = Setup::new();
    let db = s.path("old.redb");
    // A database last served long ago: a lease that lapsed, a task past
    // its due time that escalates, one that expires.
    let long_ago = now_ms() - 86_400_000;
    {
        let engine = Engine::open(&db).expect("open");
        let t = engine.tenant(&s.tenants[0]).expect("tenant");
        for (id, on_expiry, due) in [
            ("leased", OnExpiry::Deny, None),
            (
                "late-escalates",
                OnExpiry::Escalate,
                Some(long_ago + 60_000),
            ),
            ("late-expires", OnExpiry::Deny, Some(long_ago + 60_000)),
        ] {
            t.open(&Task {
                id: id.into(),
                run: "r".into(),
                case: None,
                kind: "approve".into(),
                justification: "{}".into(),
                candidate_roles: vec!["finance".into()],
                assignee: None,
                lease_until: None,
                priority: Priority::Normal,
                state: TaskState::Open,
                on_expiry,
                escalate_to: vec!["lead".into()],
                excluded_actors: vec![],
                created_at: long_ago,
                due_at: due,
                revision: 0,
                decision: None,
                outcomes: Vec::new(),
                remind_before: Vec::new(),
                escalation: Vec::new(),
                steps_done: 0,
            })
            .expect("open");
        }
        t.claim(
            "leased",
            "bob",
            &["finance"],
            Some(Lease {
                now: long_ago,
                lease_ms: 60_000,
            }),
        )
        .expect("claim");
    }
    let state = |base: &str, id: &str| -> Value {
        let r = client()
            .get(format!("{base}/v1/tasks/{id}"))
            .bearer_auth(&s.operators[0])
            .send()
            .expect("get");
        assert_eq!(r.status(), 200);
        r.json().expect("task")
    };
    // A delay no run of this test outlasts: the plan is logged, and
    // nothing moves while the server serves.
    let waiting = s.serve(&db, &["--first-sweep-after", "1h"]);
    let plan = waiting.wait_for("the first sweep's plan", |l| {
        l.contains("first sweep plan") && l.contains(s.tenants[0].as_str())
    });
    assert!(plan.contains("lapsed=true"), "{plan}");
    assert!(plan.contains("to_escalate=1"), "{plan}");
    assert!(plan.contains("to_expire=1"), "{plan}");
    let summary = waiting.wait_for("the plan's summary", |l| l.contains("of 2 tenants"));
    assert!(summary.contains("acting=1"), "{summary}");
    assert!(summary.contains("runs in 3600s"), "{summary}");
    assert_eq!(state(&waiting.base, "leased")["state"], "claimed");
    assert_eq!(state(&waiting.base, "late-escalates")["state"], "open");
    assert_eq!(state(&waiting.base, "late-expires")["state"], "open");
    drop(waiting);
    // A short delay: the sweep acts once it is over, and no sooner.
    let delay = Duration::from_secs(2);
    let started = Instant::now();
    let served = s.serve(&db, &["--first-sweep-after", "2s"]);
    served.wait_for("the first sweep", |l| {
        l.contains("swept") && l.contains("expired=1")
    });
    assert!(started.elapsed() >= delay, "the first sweep waited");
    assert_eq!(state(&served.base, "leased")["state"], "open");
    assert_eq!(state(&served.base, "late-escalates")["state"], "escalated");
    assert_eq!(state(&served.base, "late-expires")["state"], "expired");
}

#[test]
fn a_backup_through_serve_over_postgres_restores_to_a_file() {
    let Some(url) = postgres() else { return };
    let s = Setup::new();
    let served = serve(
        s.dir.path(),
        Path::new(&url),
        &["--tokens", arg(&s.tokens), "--admin-tenant", &s.tenants[0]],
    );
    let c = client();
    for (token, tenant) in s.operators.iter().zip(&s.tenants) {
        for i in 0..5 {
            let r = c
                .post(format!("{}/v1/tasks", served.base))
                .bearer_auth(token)
                .json(&task_body(&format!("pg{i}"), json!({"i": i})))
                .send()
                .expect("open");
            assert_eq!(r.status(), 200, "{tenant}");
        }
    }
    let out = s.path("pg.backup");
    let mut args = vec![
        "backup".to_owned(),
        "--server".to_owned(),
        served.base.clone(),
        "--token-file".to_owned(),
        arg(&s.token_file(&s.operators[0])).to_owned(),
        "--out".to_owned(),
        arg(&out).to_owned(),
    ];
    // The shared database holds other runs' tenants: this run's alone.
    for t in &s.tenants {
        args.extend(["--tenant".to_owned(), t.clone()]);
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let answer = ok(run(s.dir.path(), &args));
    assert_eq!(
        answer["tenants"].as_array().map(Vec::len),
        Some(2),
        "{answer}"
    );
    drop(served);
    let restored = s.path("from-pg.redb");
    let r = ok(run(
        s.dir.path(),
        &["restore", "--in", arg(&out), "--to", arg(&restored)],
    ));
    assert_eq!(r["ok"], true, "{r}");
    let engine = Engine::open(&restored).expect("open");
    for tenant in &s.tenants {
        let t = engine.tenant(tenant).expect("tenant");
        assert_eq!(t.open_count().expect("count"), 5, "{tenant}");
        assert!(t.get("pg4").expect("get").is_some());
    }
    for t in &s.tenants {
        ok(run(
            s.dir.path(),
            &["--db", &url, "--tenant", t, "tenant", "delete", "--yes"],
        ));
    }
}
