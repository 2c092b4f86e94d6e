//! `leasehold serve` and `leasehold token new`, run as the real binary:
//! tokens made by the CLI authenticate, the server refuses to start without
//! a credential source, SIGTERM lets requests in flight finish, a SIGKILL
//! under load loses no request that was answered 2xx, and schedules firing
//! across killed servers lose and double no occurrence (`schedules_crash`),
//! webhooks pushed across killed servers lose no change and keep each
//! task's order (`webhooks_crash`), and a bulk job whose server is killed
//! half-way finishes changing each task once (`jobs_crash`).

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

#[path = "support/postgres.rs"]
mod pg_support;
use pg_support::postgres;

#[path = "serve/fleet.rs"]
mod fleet;

#[path = "serve/schedules_crash.rs"]
mod schedules_crash;

#[path = "serve/webhooks_crash.rs"]
mod webhooks_crash;

#[path = "serve/jobs_crash.rs"]
mod jobs_crash;

const BIN: &str = env!("CARGO_BIN_EXE_leasehold");

fn leasehold(dir: &Path) -> Command {
    let mut c = Command::new(BIN);
    c.current_dir(dir).env_remove("LEASEHOLD_DB");
    c
}

/// Mints a token with `token new --json`; answers the token and its line.
fn mint(dir: &Path, tenant: &str, actor: &str, scope: &str, roles: &[&str]) -> (String, String) {
    let mut c = leasehold(dir);
    c.args([
        "--json", "--tenant", tenant, "token", "new", "--actor", actor, "--scope", scope,
    ]);
    if !roles.is_empty() {
        c.arg("--role").args(roles);
    }
    let out = c.output().expect("runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let token = v["token"].as_str().expect("token").to_owned();
    let line = v["line"].as_str().expect("line").to_owned();
    assert!(!line.contains(&token), "the file line keeps only a hash");
    (token, line)
}

/// A running `leasehold serve`, killed when dropped.
struct Served {
    child: Child,
    base: String,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `serve` on a free loopback port and waits for its address line.
fn serve(dir: &Path, db: &Path, extra: &[&str]) -> Served {
    serve_logged(dir, db, extra).0
}

/// [`serve`], with every later line of its log sent to the receiver.
fn serve_logged(
    dir: &Path,
    db: &Path,
    extra: &[&str],
) -> (Served, std::sync::mpsc::Receiver<String>) {
    let mut child = leasehold(dir)
        .arg("--db")
        .arg(db)
        .args(["serve", "--listen", "127.0.0.1:0"])
        // Its operators read /metrics, which the tests wait on.
        .args(["--admin-tenant", "acme"])
        .args(extra)
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .expect("spawns");
    let stderr = child.stderr.take().expect("stderr");
    let mut lines = BufReader::new(stderr).lines();
    let base = loop {
        let line = lines
            .next()
            .expect("serve printed its address before exiting")
            .expect("a line");
        if let Some(at) = line.split("listening on ").nth(1) {
            break at.trim().to_owned();
        }
    };
    // Keep draining the logs so the server never blocks on a full pipe.
    let (log, logged) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in lines.map_while(Result::ok) {
            let _ = log.send(line);
        }
    });
    (Served { child, base }, logged)
}

fn client() -> reqwest::blocking::Client {
    reqwest::blocking::Client::builder()
        .timeout(Duration::from_secs(60))
        .build()
        .expect("client")
}

struct Setup {
    dir: tempfile::TempDir,
    db: PathBuf,
    tokens: PathBuf,
    service: String,
    operator: String,
    alice: String,
    intruder: String,
}

fn setup() -> Setup {
    let dir = tempfile::tempdir().expect("temp dir");
    let p = dir.path();
    let (service, l1) = mint(p, "acme", "workflow", "service", &[]);
    let (operator, l2) = mint(p, "acme", "ops", "operator", &[]);
    let (alice, l3) = mint(p, "acme", "alice", "reviewer", &["finance"]);
    let (intruder, l4) = mint(p, "globex", "mallory", "operator", &[]);
    let tokens = p.join("tokens");
    std::fs::write(
        &tokens,
        format!("# acme and globex\n{l1}\n{l2}\n{l3}\n{l4}\n"),
    )
    .expect("write");
    Setup {
        db: p.join("serve.redb"),
        dir,
        tokens,
        service,
        operator,
        alice,
        intruder,
    }
}

fn task(id: &str) -> Value {
    json!({"id": id, "run": "r", "kind": "approve", "candidate_roles": ["finance"],
           "justification": {"amount": 5}})
}

#[test]
fn minted_tokens_authenticate_and_a_tenant_sees_only_its_own() {
    tokens_authenticate_and_tenants_stay_apart(&[]);
}

#[test]
fn with_fresh_instances_a_tenant_still_sees_only_its_own() {
    tokens_authenticate_and_tenants_stay_apart(&["--fresh-instances"]);
}

fn tokens_authenticate_and_tenants_stay_apart(extra: &[&str]) {
    let s = setup();
    let mut args = vec!["--tokens", s.tokens.to_str().expect("utf-8")];
    args.extend_from_slice(extra);
    let server = serve(s.dir.path(), &s.db, &args);
    let c = client();
    let open = c
        .post(format!("{}/v1/tasks", server.base))
        .bearer_auth(&s.service)
        .json(&task("t-1"))
        .send()
        .expect("answers");
    assert_eq!(open.status(), 200);
    let claim = c
        .post(format!("{}/v1/tasks/t-1/claim", server.base))
        .bearer_auth(&s.alice)
        .send()
        .expect("answers");
    assert_eq!(claim.status(), 200);
    let seen: Value = claim.json().expect("JSON");
    assert_eq!(seen["assignee"], "alice");
    let cross = c
        .get(format!("{}/v1/tasks/t-1", server.base))
        .bearer_auth(&s.intruder)
        .send()
        .expect("answers");
    assert_eq!(cross.status(), 404);
    // The intruder's own tenant, served right after acme's calls (on an
    // instance of its own when instances are kept), has no such task.
    for (token, open) in [(&s.operator, 1), (&s.intruder, 0), (&s.operator, 1)] {
        let count = c
            .get(format!("{}/v1/stats/open-count", server.base))
            .bearer_auth(token)
            .send()
            .expect("answers");
        assert_eq!(count.status(), 200);
        let count: Value = count.json().expect("JSON");
        assert_eq!(count["count"], open, "{count}");
    }
    let nobody = c
        .get(format!("{}/v1/tasks/t-1", server.base))
        .send()
        .expect("answers");
    assert_eq!(nobody.status(), 401);
}

#[test]
fn without_a_credential_source_serve_refuses_to_start_unless_dev() {
    let dir = tempfile::tempdir().expect("temp dir");
    let out = leasehold(dir.path())
        .args(["--db", "x.redb", "serve", "--listen", "127.0.0.1:0"])
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no credential source"));
    assert!(!dir.path().join("x.redb").exists(), "nothing was opened");

    let mut child = leasehold(dir.path())
        .args([
            "--db",
            "dev.redb",
            "serve",
            "--dev",
            "--listen",
            "127.0.0.1:0",
        ])
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawns");
    let mut lines = BufReader::new(child.stderr.take().expect("stderr")).lines();
    let (mut warned, mut token, mut base) = (false, None, None);
    while base.is_none() {
        let line = lines.next().expect("a line").expect("text");
        warned |= line.contains("WARNING");
        if let Some(t) = line.strip_prefix("dev operator token: ") {
            token = Some(t.trim().to_owned());
        }
        if let Some(at) = line.split("listening on ").nth(1) {
            base = Some(at.trim().to_owned());
        }
    }
    std::thread::spawn(move || for _ in lines {});
    let served = Served {
        child,
        base: base.unwrap_or_default(),
    };
    assert!(warned, "--dev warns");
    let r = client()
        .get(format!("{}/v1/check", served.base))
        .bearer_auth(token.expect("a token"))
        .send()
        .expect("answers");
    assert_eq!(r.status(), 200, "the dev token is an operator's");
}

fn signal(child: &Child, sig: &str) {
    let status = Command::new("kill")
        .args([sig, &child.id().to_string()])
        .status()
        .expect("kill runs");
    assert!(status.success());
}

/// Opens tasks from many threads until told to stop; answers the ids whose
/// open was answered 200.
fn open_until(base: &str, token: &str, prefix: &str, stop_after: usize) -> Vec<String> {
    let answered = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for t in 0..16 {
            let answered = &answered;
            s.spawn(move || {
                let c = client();
                for i in 0.. {
                    let id = format!("{prefix}-{t}-{i}");
                    match c
                        .post(format!("{base}/v1/tasks"))
                        .bearer_auth(token)
                        .json(&task(&id))
                        .send()
                    {
                        Ok(r) if r.status() == 200 => {
                            let body: Value = r.json().expect("a whole answer");
                            assert_eq!(body["id"], id.as_str());
                            let mut a = answered.lock().expect("lock");
                            a.push(id);
                            if a.len() >= stop_after {
                                return;
                            }
                        }
                        // Refused before it started, or cut by the kill.
                        Ok(r) => panic!("unexpected status {}", r.status()),
                        Err(_) => return,
                    }
                }
            });
        }
    });
    answered.into_inner().expect("lock")
}

#[test]
fn sigterm_finishes_requests_in_flight_then_exits() {
    let s = setup();
    let mut server = serve(
        s.dir.path(),
        &s.db,
        &["--tokens", s.tokens.to_str().expect("utf-8")],
    );
    let base = server.base.clone();
    let token = s.service.clone();
    let load = std::thread::spawn(move || open_until(&base, &token, "g", usize::MAX));
    // Terminate once the load is under way.
    let c = client();
    loop {
        let r = c
            .get(format!("{}/v1/stats/open-count", server.base))
            .bearer_auth(&s.operator)
            .send();
        let n = r
            .ok()
            .and_then(|r| r.json::<Value>().ok())
            .and_then(|v| v["count"].as_u64());
        if n.unwrap_or(0) >= 32 {
            break;
        }
    }
    signal(&server.child, "-TERM");
    let status = server.child.wait().expect("exits");
    assert!(status.success(), "serve exits 0 on SIGTERM: {status:?}");
    let answered = load.join().expect("load thread");
    assert!(answered.len() >= 32);
    let again = serve(
        s.dir.path(),
        &s.db,
        &["--tokens", s.tokens.to_str().expect("utf-8")],
    );
    for id in &answered {
        let r = c
            .get(format!("{}/v1/tasks/{id}", again.base))
            .bearer_auth(&s.service)
            .send()
            .expect("answers");
        assert_eq!(r.status(), 200, "{id} was answered 200 before SIGTERM");
    }
}

#[test]
fn a_sigkill_under_load_loses_nothing_that_was_answered() {
    let s = setup();
    let tokens = s.tokens.to_str().expect("utf-8").to_owned();
    let c = client();
    let mut total = 0;
    for round in 0..10 {
        let mut server = serve(s.dir.path(), &s.db, &["--tokens", &tokens]);
        let kill_after = fastrand::usize(1..=60);
        let base = server.base.clone();
        let token = s.service.clone();
        let prefix = format!("k{round}");
        let load = std::thread::spawn(move || open_until(&base, &token, &prefix, usize::MAX));
        // Kill at a random moment: once a random number of opens of this
        // round were answered.
        loop {
            let r = c
                .get(format!("{}/v1/stats/open-count", server.base))
                .bearer_auth(&s.operator)
                .send();
            let n = r
                .ok()
                .and_then(|r| r.json::<Value>().ok())
                .and_then(|v| v["count"].as_u64());
            if n.unwrap_or(0) >= (total + kill_after) as u64 {
                break;
            }
        }
        server.child.kill().expect("SIGKILL");
        server.child.wait().expect("reaped");
        let answered = load.join().expect("load thread");
        let again = serve(s.dir.path(), &s.db, &["--tokens", &tokens]);
        for id in &answered {
            let r = c
                .get(format!("{}/v1/tasks/{id}", again.base))
                .bearer_auth(&s.service)
                .send()
                .expect("answers");
            assert_eq!(
                r.status(),
                200,
                "round {round}: {id} was answered 200 before the kill"
            );
        }
        let check: Value = c
            .get(format!("{}/v1/check", again.base))
            .bearer_auth(&s.operator)
            .send()
            .expect("answers")
            .json()
            .expect("JSON");
        assert_eq!(check["discrepancies"], json!([]), "round {round}");
        let count: Value = c
            .get(format!("{}/v1/stats/open-count", again.base))
            .bearer_auth(&s.operator)
            .send()
            .expect("answers")
            .json()
            .expect("JSON");
        total = count["count"].as_u64().unwrap_or(0) as usize;
        assert!(total >= answered.len());
    }
}

/// Waits for the process to exit, at most `limit`.
fn exits_within(child: &mut Child, limit: Duration) -> Option<std::process::ExitStatus> {
    let until = std::time::Instant::now() + limit;
    while std::time::Instant::now() < until {
        if let Some(status) = child.try_wait().expect("try_wait") {
            return Some(status);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    None
}

/// Two hundred connections holding half a request, whose header timeout is
/// ten minutes off, do not hold SIGTERM up: past the shutdown grace they are
/// closed and the process exits 0.
#[test]
fn sigterm_exits_within_the_grace_while_half_sent_requests_hang() {
    use std::io::Write;
    let s = setup();
    let mut server = serve(
        s.dir.path(),
        &s.db,
        &[
            "--tokens",
            s.tokens.to_str().expect("utf-8"),
            "--header-timeout",
            "600s",
            "--shutdown-grace",
            "1s",
        ],
    );
    let addr = server.base.trim_start_matches("http://").to_owned();
    let half: Vec<std::net::TcpStream> = (0..200)
        .map(|_| {
            let mut tcp = std::net::TcpStream::connect(&addr).expect("connects");
            tcp.write_all(b"GET /healthz HTTP/1.1\r\nX: a")
                .expect("writes");
            tcp
        })
        .collect();
    let r = client()
        .get(format!("{}/v1/stats/open-count", server.base))
        .bearer_auth(&s.operator)
        .send()
        .expect("served beside them");
    assert_eq!(r.status(), 200);
    signal(&server.child, "-TERM");
    let status = exits_within(&mut server.child, Duration::from_secs(60))
        .expect("serve exits within the grace, not at the header timeout");
    assert!(status.success(), "{status:?}");
    drop(half);
}

/// SIGHUP reads the token file again: a token taken out of it is refused
/// from then on, one added is accepted, and the log says how many are live.
#[test]
fn sighup_reloads_the_token_file() {
    let s = setup();
    let (server, log) = serve_logged(
        s.dir.path(),
        &s.db,
        &["--tokens", s.tokens.to_str().expect("utf-8")],
    );
    let c = client();
    let status = |token: &str| {
        c.get(format!("{}/v1/queue", server.base))
            .bearer_auth(token)
            .send()
            .expect("answers")
            .status()
            .as_u16()
    };
    assert_eq!(status(&s.alice), 200);
    let (bob, bob_line) = mint(s.dir.path(), "acme", "bob", "reviewer", &["finance"]);
    assert_eq!(status(&bob), 401);
    // Alice's line goes; bob's comes; the others stay.
    let text = std::fs::read_to_string(&s.tokens).expect("read");
    let alice_hash = leasehold_serve::token_hash(&s.alice);
    let kept: Vec<&str> = text
        .lines()
        .filter(|l| !l.starts_with(&alice_hash))
        .collect();
    assert_eq!(kept.len(), text.lines().count() - 1);
    std::fs::write(&s.tokens, format!("{}\n{bob_line}\n", kept.join("\n"))).expect("write");
    signal(&server.child, "-HUP");
    let reloaded = loop {
        let line = log
            .recv_timeout(Duration::from_secs(60))
            .expect("the reload is logged");
        if line.contains("credentials reloaded") {
            break line;
        }
    };
    assert!(reloaded.contains("4 tokens"), "{reloaded}");
    assert_eq!(status(&s.alice), 401, "a revoked token");
    assert_eq!(status(&bob), 200, "an added token");
    assert_eq!(
        status(&s.service),
        403,
        "a service token, still live, may not read a queue"
    );
}

/// A `claim-next` waiting for work, by its own thread: the answer's status
/// and body.
fn wait_for_claim(base: &str, token: &str, wait_ms: u32) -> std::thread::JoinHandle<(u16, Value)> {
    let (base, token) = (base.to_owned(), token.to_owned());
    std::thread::spawn(move || {
        let r = client()
            .post(format!("{base}/v1/queue/claim-next"))
            .bearer_auth(&token)
            .json(&json!({ "wait_ms": wait_ms }))
            .send()
            .expect("answered, not cut");
        let status = r.status().as_u16();
        (status, r.json().unwrap_or(Value::Null))
    })
}

/// Waits until `n` requests wait on the server, by its own gauge.
fn until_waiting(base: &str, operator: &str, n: u64) {
    until_gauge(base, operator, "leasehold_requests_waiting", n);
}

/// Waits until the server's gauge `name` reaches `n`.
fn until_gauge(base: &str, operator: &str, name: &str, n: u64) {
    let c = client();
    let until = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let text = c
            .get(format!("{base}/metrics"))
            .bearer_auth(operator)
            .send()
            .expect("metrics")
            .text()
            .expect("text");
        let waiting = text
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().last())
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0);
        if waiting >= n as f64 {
            return;
        }
        assert!(
            std::time::Instant::now() < until,
            "{name} never reached {n}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A reviewer's token taken out of the file while its `claim-next` waits
/// and its event stream is open: SIGHUP ends the wait with 401 and the
/// stream with `dropped` `credential` (the heartbeat, when streams used to
/// look again, is ten minutes off), and a task opened afterwards is claimed
/// for nobody.
#[test]
fn a_revoked_credentials_waiting_claim_claims_nothing() {
    let s = setup();
    let (server, log) = serve_logged(
        s.dir.path(),
        &s.db,
        &[
            "--tokens",
            s.tokens.to_str().expect("utf-8"),
            "--heartbeat",
            "600s",
        ],
    );
    let stream = {
        let (base, token) = (server.base.clone(), s.alice.clone());
        std::thread::spawn(move || {
            let r = client()
                .get(format!("{base}/v1/events"))
                .bearer_auth(&token)
                .header("accept", "text/event-stream")
                .send()
                .expect("a stream");
            assert_eq!(r.status(), 200);
            let mut lines = BufReader::new(r).lines();
            let mut last = String::new();
            while let Some(Ok(line)) = lines.next() {
                if line.starts_with("data:") {
                    last = line;
                }
                if last.contains("\"reason\"") {
                    break;
                }
            }
            last
        })
    };
    until_gauge(&server.base, &s.operator, "leasehold_event_subscribers", 1);
    let waiting = wait_for_claim(&server.base, &s.alice, 30_000);
    until_waiting(&server.base, &s.operator, 1);
    let text = std::fs::read_to_string(&s.tokens).expect("read");
    let alice_hash = leasehold_serve::token_hash(&s.alice);
    let kept: Vec<&str> = text
        .lines()
        .filter(|l| !l.starts_with(&alice_hash))
        .collect();
    std::fs::write(&s.tokens, kept.join("\n")).expect("write");
    signal(&server.child, "-HUP");
    loop {
        let line = log
            .recv_timeout(Duration::from_secs(60))
            .expect("the reload is logged");
        if line.contains("credentials reloaded") {
            break;
        }
    }
    let c = client();
    let r = c
        .post(format!("{}/v1/tasks", server.base))
        .bearer_auth(&s.service)
        .json(&task("after-revoke"))
        .send()
        .expect("opens");
    assert!(r.status().is_success(), "{:?}", r.text());
    let (status, body) = waiting.join().expect("the waiting thread");
    assert_eq!(status, 401, "{body}");
    let ended = stream.join().expect("the stream's thread");
    assert!(ended.contains("\"credential\""), "{ended}");
    let t: Value = c
        .get(format!("{}/v1/tasks/after-revoke", server.base))
        .bearer_auth(&s.operator)
        .send()
        .expect("reads")
        .json()
        .expect("JSON");
    assert_eq!(t["state"], "open", "claimed for nobody: {t}");
    assert!(t["assignee"].is_null(), "{t}");
}

/// SIGTERM while long-polls wait, with a shutdown grace far longer than
/// the test: each is answered at once, empty (nothing claimed), and the
/// process exits long before the grace would end.
#[test]
fn sigterm_answers_waiting_long_polls_at_once() {
    let s = setup();
    let mut server = serve(
        s.dir.path(),
        &s.db,
        &[
            "--tokens",
            s.tokens.to_str().expect("utf-8"),
            "--shutdown-grace",
            "600s",
        ],
    );
    let waiting: Vec<_> = (0..3)
        .map(|_| wait_for_claim(&server.base, &s.alice, 30_000))
        .collect();
    until_waiting(&server.base, &s.operator, 3);
    signal(&server.child, "-TERM");
    // The waits end at once, not when their thirty seconds run out (nor
    // the grace): half of that is a bound on a failure, not a pace.
    let status = exits_within(&mut server.child, Duration::from_secs(15))
        .expect("serve exits long before the waits would end");
    assert!(status.success(), "{status:?}");
    for w in waiting {
        let (status, body) = w.join().expect("the waiting thread");
        assert_eq!(status, 200, "{body}");
        assert!(body["task"].is_null(), "nothing claimed: {body}");
    }
}

/// Log lines written into a pipe (a file, a log collector) are plain text:
/// colour codes there are noise that every reader has to strip.
#[test]
fn logs_into_a_pipe_carry_no_colour_codes() {
    let s = setup();
    let mut child = leasehold(s.dir.path())
        .env_remove("NO_COLOR")
        .env("RUST_LOG", "info")
        .arg("--db")
        .arg(&s.db)
        .args(["serve", "--listen", "127.0.0.1:0", "--tokens"])
        .arg(&s.tokens)
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .expect("spawns");
    let (log, logged) = std::sync::mpsc::channel();
    let stderr = child.stderr.take().expect("stderr");
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = log.send(line);
        }
    });
    let mut lines = Vec::new();
    let base = loop {
        let line = logged
            .recv_timeout(Duration::from_secs(60))
            .expect("serve printed its address");
        let at = line
            .split("listening on ")
            .nth(1)
            .map(|a| a.trim().to_owned());
        lines.push(line);
        if let Some(at) = at {
            break at;
        }
    };
    let served = Served { child, base };
    let r = client()
        .get(format!("{}/v1/whoami", served.base))
        .bearer_auth(&s.alice)
        .send()
        .expect("answers");
    assert_eq!(r.status(), 200);
    // The request's own log line, at info.
    loop {
        let line = logged
            .recv_timeout(Duration::from_secs(60))
            .expect("the request is logged");
        let done = line.contains("finished processing request");
        lines.push(line);
        if done {
            break;
        }
    }
    for line in &lines {
        assert!(!line.contains("\x1b["), "a colour code in {line:?}");
    }
}

/// What the help says of the per-tenant bound is what the server does: a
/// call past it waits its turn, it is not refused `overloaded`.
#[test]
fn the_help_says_a_tenant_past_its_bound_waits() {
    let dir = tempfile::tempdir().expect("temp dir");
    let out = leasehold(dir.path())
        .args(["serve", "--help"])
        .output()
        .expect("runs");
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout);
    let at = help
        .find("--max-in-flight-per-tenant")
        .expect("the flag is listed");
    let end = help[at..].find("[default:").map_or(help.len(), |i| at + i);
    let text = help[at..end]
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    assert!(!text.contains("overloaded"), "{text}");
    assert!(text.contains("waits"), "{text}");
    assert!(text.contains("`timeout`"), "{text}");
}

/// The webhook flags: by default only https endpoints at public addresses
/// are taken and the server delivers (it takes a subscription's lease);
/// `--webhooks-allow-http` and `--webhooks-allow-range` widen what is
/// taken; `--no-webhooks` serves the API but delivers nothing; a range
/// that is not CIDR is refused at start.
#[test]
fn the_webhook_flags_say_which_endpoints_are_taken_and_who_delivers() {
    let s = setup();
    let tokens = s.tokens.to_str().expect("utf-8");
    let c = client();
    let add = |base: &str, url: &str| {
        let r = c
            .post(format!("{base}/v1/subscriptions"))
            .bearer_auth(&s.operator)
            .json(&json!({"url": url, "filter": {"timers": false}}))
            .send()
            .expect("answers");
        let status = r.status().as_u16();
        (status, r.json::<Value>().expect("JSON"))
    };
    let local = "http://127.0.0.1:9/hooks";
    {
        let server = serve(s.dir.path(), &s.db, &["--tokens", tokens]);
        let (status, body) = add(&server.base, local);
        assert_eq!(status, 400, "{body}");
        assert_eq!(body["field"], "url");
        assert!(
            body["detail"]
                .as_str()
                .is_some_and(|d| d.contains("--webhooks-allow-http")),
            "{body}"
        );
    }
    let widened = [
        "--tokens",
        tokens,
        "--webhooks-allow-http",
        "--webhooks-allow-range",
        "127.0.0.0/8",
        "--webhooks-allow-range",
        "::1/128",
    ];
    let id = {
        let mut server = serve(s.dir.path(), &s.db, &widened);
        let (status, body) = add(&server.base, local);
        assert_eq!(status, 201, "{body}");
        assert!(
            body["secret"]
                .as_str()
                .is_some_and(|x| x.starts_with("whsec_"))
        );
        let id = body["subscription"]["id"].as_str().expect("id").to_owned();
        // This server delivers it: it holds the lease.
        let shown = c
            .get(format!("{}/v1/subscriptions/{id}", server.base))
            .bearer_auth(&s.operator)
            .send()
            .expect("answers")
            .json::<Value>()
            .expect("JSON");
        assert!(shown["lease"]["holder"].is_string(), "{shown}");
        // A graceful stop gives the lease up.
        signal(&server.child, "-TERM");
        let exited = exits_within(&mut server.child, Duration::from_secs(60));
        assert!(exited.is_some_and(|e| e.success()), "{exited:?}");
        id
    };
    let mut args = vec!["--no-webhooks"];
    args.extend(widened);
    let server = serve(s.dir.path(), &s.db, &args);
    let shown = c
        .get(format!("{}/v1/subscriptions/{id}", server.base))
        .bearer_auth(&s.operator)
        .send()
        .expect("answers")
        .json::<Value>()
        .expect("JSON");
    assert_eq!(shown["delivery"]["here"], false, "{shown}");
    assert_eq!(
        shown["lease"],
        Value::Null,
        "given up at the last stop: {shown}"
    );
    drop(server);
    let out = leasehold(s.dir.path())
        .arg("--db")
        .arg(&s.db)
        .args([
            "serve",
            "--tokens",
            tokens,
            "--webhooks-allow-range",
            "10.0.0.0",
        ])
        .output()
        .expect("runs");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("CIDR"), "{err}");
}
