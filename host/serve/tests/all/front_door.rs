//! The front door against hostile clients, over real sockets: silent and
//! half-sent connections (who may hold connections is `crowd`'s), shutdown
//! with a grace, honest timeouts over a storage that stalls, fairness
//! between tenants, sealed cursors and hidden tasks, clock overrides, HEAD
//! and made-up methods, readiness that notices failed writes, and the
//! problem types of storage failures.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use leasehold_host::Engine;
use leasehold_host::storage::{
    Backend, Entry, GroupFailure, Mode, Pending, StorageError, Txn, Write as KvWrite,
};
use leasehold_memory_backend::MemoryBackend;
use leasehold_serve::{Config, ConnectionLimits, Credentials, Options, Server};
use serde_json::{Value, json};

use crate::harness::{
    Service, Tokens, each_backend, new_task, reply, stores, test_options, tokens,
};

// ---- a storage that stalls or fails on demand ---------------------------------------

/// What the faulty store does to the next reads and commits.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum Fault {
    #[default]
    None,
    /// Reads wait until the fault is lifted.
    StallReads,
    /// Commits wait until the fault is lifted, then commit.
    StallCommits,
    /// Commits fail as an aborted group commit: nothing written.
    GroupAborted,
    /// Commits fail with an unknown outcome (nothing is written here).
    OutcomeUnknown,
}

#[derive(Default)]
struct Gate {
    fault: Mutex<Fault>,
    changed: Condvar,
    /// Calls now waiting at the gate.
    waiting: Mutex<usize>,
    /// Write transactions begun on the readiness probe's tenant.
    probes: std::sync::atomic::AtomicU64,
    arrived: Condvar,
}

impl Gate {
    fn set(&self, f: Fault) {
        *self.fault.lock().expect("gate") = f;
        self.changed.notify_all();
    }

    fn current(&self) -> Fault {
        *self.fault.lock().expect("gate")
    }

    /// Waits while `stalls` holds of the fault, at most a minute.
    fn pass(&self, stalls: Fault) {
        let mut f = self.fault.lock().expect("gate");
        if *f != stalls {
            return;
        }
        *self.waiting.lock().expect("gate") += 1;
        self.arrived.notify_all();
        let (g, _) = self
            .changed
            .wait_timeout_while(f, Duration::from_secs(60), |f| *f == stalls)
            .expect("gate");
        f = g;
        drop(f);
        *self.waiting.lock().expect("gate") -= 1;
    }

    /// Waits until a call is held at the gate.
    fn wait_for_a_stalled_call(&self) {
        let w = self.waiting.lock().expect("gate");
        let (w, timed_out) = self
            .arrived
            .wait_timeout_while(w, Duration::from_secs(60), |w| *w == 0)
            .expect("gate");
        assert!(!timed_out.timed_out() && *w > 0, "no call reached the gate");
    }
}

#[derive(Clone)]
struct Faulty {
    inner: MemoryBackend,
    gate: Arc<Gate>,
}

struct FaultyTxn {
    inner: Box<dyn Txn>,
    gate: Arc<Gate>,
}

impl Backend for Faulty {
    fn begin(
        &self,
        tenant: &str,
        mode: Mode,
        lock_wait: Duration,
    ) -> Result<Box<dyn Txn>, StorageError> {
        if tenant == "_readyz" && mode == Mode::Write {
            self.gate
                .probes
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        Ok(Box::new(FaultyTxn {
            inner: self.inner.begin(tenant, mode, lock_wait)?,
            gate: self.gate.clone(),
        }))
    }

    fn concurrent_writers(&self) -> bool {
        false
    }
}

impl Txn for FaultyTxn {
    fn get(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>, StorageError> {
        self.gate.pass(Fault::StallReads);
        self.inner.get(key)
    }

    fn get_many(&mut self, keys: &[Vec<u8>]) -> Result<Vec<Option<Vec<u8>>>, StorageError> {
        self.gate.pass(Fault::StallReads);
        self.inner.get_many(keys)
    }

    fn scan(
        &mut self,
        start: &[u8],
        end: Option<&[u8]>,
        limit: u32,
        reverse: bool,
        max_bytes: usize,
    ) -> Result<(Vec<Entry>, bool), StorageError> {
        self.gate.pass(Fault::StallReads);
        self.inner.scan(start, end, limit, reverse, max_bytes)
    }

    fn commit(self: Box<Self>, batch: Vec<KvWrite>) -> Result<Pending, StorageError> {
        if batch.is_empty() {
            return self.inner.commit(batch);
        }
        self.gate.pass(Fault::StallCommits);
        match self.gate.current() {
            Fault::GroupAborted => Err(StorageError::GroupFailed(GroupFailure::Abandoned)),
            Fault::OutcomeUnknown => Err(StorageError::OutcomeUnknown(
                "the answer to COMMIT never came".into(),
            )),
            _ => self.inner.commit(batch),
        }
    }
}

/// A server over the faulty store, with the harness's tokens.
struct Faulted {
    server: Option<Server>,
    base: String,
    tokens: Tokens,
    gate: Arc<Gate>,
    client: reqwest::blocking::Client,
}

impl Faulted {
    fn start(options: Options) -> Faulted {
        let gate = Arc::new(Gate::default());
        let backend = Faulty {
            inner: MemoryBackend::new(),
            gate: gate.clone(),
        };
        let engine = Engine::builder().backend(backend).expect("an engine");
        let (tokens, table) = tokens();
        let server = Server::start_on(
            engine,
            Config {
                db: "memory".to_owned(),
                listen: "127.0.0.1:0".parse().expect("addr"),
                credentials: Credentials {
                    tokens: table,
                    jwt: None,
                },
                reload: None,
                options,
                engine: Engine::builder(),
                tls: None,
                cursor_key: None,
                handle_signals: false,
            },
        )
        .expect("serves");
        let base = format!("http://{}", server.addr());
        Faulted {
            server: Some(server),
            base,
            tokens,
            gate,
            client: reqwest::blocking::Client::builder()
                .timeout(Duration::from_secs(120))
                .build()
                .expect("client"),
        }
    }

    fn call(
        &self,
        method: &str,
        path: &str,
        who: &str,
        body: Option<Value>,
    ) -> crate::harness::Reply {
        let method = reqwest::Method::from_bytes(method.as_bytes()).expect("method");
        let mut req = self
            .client
            .request(method, format!("{}{path}", self.base))
            .bearer_auth(self.tokens.get(who));
        if let Some(b) = body {
            req = req.json(&b);
        }
        reply(req.send().expect("an answer"))
    }
}

impl Drop for Faulted {
    fn drop(&mut self) {
        self.gate.set(Fault::None);
        if let Some(s) = self.server.take() {
            let _ = s.shutdown();
        }
    }
}

/// Tasks alice (finance) may take, by id.
fn finance_tasks(f: &Faulted, ids: &[&str]) {
    for id in ids {
        let mut t = new_task(id);
        t["candidate_roles"] = json!(["finance"]);
        f.call("POST", "/v1/tasks", "sam", Some(t)).expect_ok();
    }
}

fn held_by(f: &Faulted, ids: &[&str], who: &str) -> usize {
    ids.iter()
        .filter(|id| {
            let t = f.call("GET", &format!("/v1/tasks/{id}"), "olga", None);
            t.body["assignee"] == who
        })
        .count()
}

/// A claim-next stalled in its reads past the request's deadline commits
/// nothing and is answered `timeout`, 503 with Retry-After: the retry the
/// answer invites leaves the reviewer holding one task, never two.
#[test]
fn a_call_stalled_before_its_commit_is_answered_timeout_and_a_retry_claims_once() {
    let f = Faulted::start(Options {
        request_timeout: Duration::from_millis(300),
        // Long enough that the call, released past its deadline, is always
        // waited for: its answer must be the true one.
        commit_grace: Duration::from_secs(60),
        ..test_options()
    });
    let ids = ["t-1", "t-2"];
    finance_tasks(&f, &ids);
    f.gate.set(Fault::StallReads);
    let answer = std::thread::scope(|s| {
        let call = s.spawn(|| {
            f.call(
                "POST",
                "/v1/queue/claim-next",
                "alice",
                Some(json!({"lease_ms": 600_000})),
            )
        });
        f.gate.wait_for_a_stalled_call();
        // Past the request's deadline for certain, then released.
        std::thread::sleep(Duration::from_millis(400));
        f.gate.set(Fault::None);
        call.join().expect("client")
    });
    answer.expect_problem(503, "timeout");
    assert_eq!(answer.headers["retry-after"], "1");
    assert_eq!(held_by(&f, &ids, "alice"), 0, "the timed-out call claimed");
    let retry = f.call(
        "POST",
        "/v1/queue/claim-next",
        "alice",
        Some(json!({"lease_ms": 600_000})),
    );
    assert_eq!(retry.expect_ok()["task"]["assignee"], "alice");
    assert_eq!(held_by(&f, &ids, "alice"), 1);
}

/// A claim-next stalled inside its commit cannot be called off: past its
/// deadline and the grace it is answered `outcome-unknown` (500, no
/// Retry-After), its slot stays taken until the call ends, and what it did
/// is what a read then shows.
#[test]
fn a_call_stalled_in_its_commit_is_answered_outcome_unknown_and_keeps_its_slot() {
    let f = Faulted::start(Options {
        request_timeout: Duration::from_millis(200),
        commit_grace: Duration::from_millis(200),
        max_in_flight: 1,
        ..test_options()
    });
    let ids = ["t-1", "t-2"];
    finance_tasks(&f, &ids);
    f.gate.set(Fault::StallCommits);
    let r = f.call(
        "POST",
        "/v1/queue/claim-next",
        "alice",
        Some(json!({"lease_ms": 600_000})),
    );
    r.expect_problem(500, "outcome-unknown");
    assert!(!r.headers.contains_key("retry-after"), "{r:#?}");
    f.gate.wait_for_a_stalled_call();
    // The stalled call still holds the only slot: another tenant's call is
    // refused for want of it.
    f.call("GET", "/v1/tasks/t-1", "gina", None)
        .expect_problem(503, "overloaded");
    f.gate.set(Fault::None);
    // Once it ends, the slot is free again and its claim is there.
    let mut held = None;
    for _ in 0..600 {
        let r = f.call("GET", "/v1/tasks/t-1", "olga", None);
        if r.status == 200 {
            held = Some(held_by(&f, &ids, "alice"));
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(held, Some(1), "the stalled claim committed once");
}

/// Storage failures say whether to retry: an aborted group commit wrote
/// nothing (503 `commit-failed`, Retry-After); a commit whose answer was
/// lost may have landed (500 `outcome-unknown`). The metrics label the
/// call by the same names.
#[test]
fn storage_failures_have_their_own_problem_types_and_metric_labels() {
    let f = Faulted::start(test_options());
    f.gate.set(Fault::GroupAborted);
    let r = f.call("POST", "/v1/tasks", "sam", Some(new_task("t-1")));
    r.expect_problem(503, "commit-failed");
    assert_eq!(r.headers["retry-after"], "1");
    f.gate.set(Fault::OutcomeUnknown);
    let r = f.call("POST", "/v1/tasks", "sam", Some(new_task("t-1")));
    r.expect_problem(500, "outcome-unknown");
    assert!(!r.headers.contains_key("retry-after"));
    f.gate.set(Fault::None);
    let metrics = f
        .client
        .get(format!("{}/metrics", f.base))
        .bearer_auth(f.tokens.get("olga"))
        .send()
        .expect("metrics")
        .text()
        .expect("text");
    for label in ["commit-failed", "outcome-unknown"] {
        assert!(
            metrics.contains(&format!("outcome=\"{label}\"")),
            "{label} not in the metrics"
        );
    }
}

/// Readiness writes: a store that refuses commits is not ready, though it
/// still answers reads, and is ready again once it takes them.
#[test]
fn readiness_reports_a_store_that_fails_writes() {
    let f = Faulted::start(test_options());
    let ready = || {
        f.client
            .get(format!("{}/readyz", f.base))
            .send()
            .expect("answers")
            .status()
            .as_u16()
    };
    assert_eq!(ready(), 200);
    f.gate.set(Fault::GroupAborted);
    // The answer is reused for a second; within a bounded wait it changes.
    let mut seen = Vec::new();
    for _ in 0..100 {
        seen.push(ready());
        if seen.last() == Some(&503) {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(seen.last(), Some(&503), "{seen:?}");
    f.call("GET", "/v1/tasks/x", "olga", None)
        .expect_problem(404, "not-found");
    f.gate.set(Fault::None);
    let mut back = false;
    for _ in 0..100 {
        if ready() == 200 {
            back = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(back, "ready again once writes succeed");
}

// ---- connections --------------------------------------------------------------------

fn connect(addr: &str) -> TcpStream {
    let tcp = TcpStream::connect(addr).expect("connects");
    tcp.set_read_timeout(Some(Duration::from_secs(60)))
        .expect("timeout");
    tcp
}

/// Reads until the server closes the connection; what it sent first.
fn until_closed(tcp: &mut TcpStream) -> Result<Vec<u8>, std::io::Error> {
    let mut got = Vec::new();
    let mut buf = [0u8; 1024];
    loop {
        match tcp.read(&mut buf) {
            Ok(0) => return Ok(got),
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return Ok(got),
            Err(e) => return Err(e),
        }
    }
}

fn addr_of(svc: &Service) -> String {
    svc.url("").trim_start_matches("http://").to_owned()
}

/// Clients that connect to the HTTPS port and send nothing take no one
/// else's turn: each handshake waits in its own task, so a fourth client is
/// served while they still hang (their handshake timeout is a minute).
#[test]
fn silent_connections_to_the_https_port_block_no_other_client() {
    let dir = tempfile::tempdir().expect("dir");
    let (cert, key, pem) = crate::harness::tls_certificate(dir.path());
    let (tokens, table) = tokens();
    let server = Server::start(Config {
        db: dir.path().join("tls.redb").to_string_lossy().into_owned(),
        listen: "127.0.0.1:0".parse().expect("addr"),
        credentials: Credentials {
            tokens: table,
            jwt: None,
        },
        reload: None,
        options: Options {
            connections: ConnectionLimits {
                handshake_timeout: Duration::from_secs(60),
                ..ConnectionLimits::default()
            },
            ..test_options()
        },
        engine: Engine::builder(),
        tls: Some((cert, key)),
        cursor_key: None,
        handle_signals: false,
    })
    .expect("starts");
    let addr = server.addr().to_string();
    let silent: Vec<TcpStream> = (0..3).map(|_| connect(&addr)).collect();
    let client = reqwest::blocking::Client::builder()
        .add_root_certificate(reqwest::Certificate::from_pem(&pem).expect("a certificate"))
        .timeout(Duration::from_secs(10))
        .build()
        .expect("client");
    let r = client
        .get(format!(
            "https://127.0.0.1:{}/v1/stats/open-count",
            server.addr().port()
        ))
        .bearer_auth(tokens.get("olga"))
        .send()
        .expect("served while three handshakes hang");
    assert_eq!(r.status(), 200);
    drop(silent);
    server.shutdown().expect("stops");
}

/// Two hundred connections that each send half a request: others are still
/// served, and each half-open one is closed by the server once its header
/// timeout passes.
#[test]
fn half_sent_requests_are_closed_at_the_header_timeout_while_others_are_served() {
    for store in stores() {
        let svc = Service::start(
            store,
            Options {
                connections: ConnectionLimits {
                    header_timeout: Duration::from_secs(2),
                    ..ConnectionLimits::default()
                },
                ..test_options()
            },
        );
        let addr = addr_of(&svc);
        let mut half: Vec<TcpStream> = (0..200)
            .map(|_| {
                let mut tcp = connect(&addr);
                tcp.write_all(b"GET /healthz HTTP/1.1\r\nX: a")
                    .expect("writes");
                tcp
            })
            .collect();
        assert_eq!(svc.call("GET", "/healthz", None, None).status, 200);
        svc.call("GET", "/v1/stats/open-count", Some("olga"), None)
            .expect_ok();
        for tcp in &mut half {
            // A minute's read timeout: the server closes first, or this fails.
            until_closed(tcp).expect("closed by the server");
        }
    }
}

/// A kept-alive connection that sends nothing after its answer is closed
/// once the header timeout passes.
#[test]
fn an_idle_kept_alive_connection_is_closed() {
    let svc = Service::start(
        stores().remove(0),
        Options {
            connections: ConnectionLimits {
                header_timeout: Duration::from_secs(1),
                ..ConnectionLimits::default()
            },
            ..test_options()
        },
    );
    let mut tcp = connect(&addr_of(&svc));
    tcp.write_all(b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n")
        .expect("writes");
    let got = until_closed(&mut tcp).expect("closed by the server");
    let text = String::from_utf8_lossy(&got);
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
}

/// Shutdown waits for open connections at most the grace: half-sent
/// requests whose header timeout is far off do not hold it up.
#[test]
fn shutdown_closes_what_is_left_after_the_grace() {
    let mut svc = Service::start(
        stores().remove(0),
        Options {
            connections: ConnectionLimits {
                header_timeout: Duration::from_secs(600),
                shutdown_grace: Duration::from_millis(500),
                ..ConnectionLimits::default()
            },
            ..test_options()
        },
    );
    let addr = addr_of(&svc);
    let mut half: Vec<TcpStream> = (0..20)
        .map(|_| {
            let mut tcp = connect(&addr);
            tcp.write_all(b"GET /healthz HTTP/1.1\r\nX: a")
                .expect("writes");
            tcp
        })
        .collect();
    assert_eq!(svc.call("GET", "/healthz", None, None).status, 200);
    let (done, stopped) = std::sync::mpsc::channel();
    std::thread::scope(|s| {
        s.spawn(|| {
            svc.stop();
            let _ = done.send(());
        });
        // Without the grace this would wait ten minutes.
        stopped
            .recv_timeout(Duration::from_secs(60))
            .expect("the server stops within the grace");
    });
    for tcp in &mut half {
        until_closed(tcp).expect("closed at shutdown");
    }
}

// ---- fairness --------------------------------------------------------------------

/// One tenant's 64 clients looping the consistency check and claim-next
/// take neither every slot nor every turn: another tenant's calls all
/// succeed meanwhile.
#[test]
fn one_tenant_looping_check_and_claim_next_does_not_starve_another() {
    each_backend(|svc| {
        for i in 0..100 {
            let mut t = new_task(&format!("t-{i}"));
            t["candidate_roles"] = json!(["finance"]);
            svc.call("POST", "/v1/tasks", Some("sam"), Some(t))
                .expect_ok();
        }
        let stop = std::sync::atomic::AtomicBool::new(false);
        let (ok, refused) = (
            std::sync::atomic::AtomicUsize::new(0),
            std::sync::atomic::AtomicUsize::new(0),
        );
        std::thread::scope(|s| {
            for i in 0..64 {
                let (svc, stop, ok, refused) = (&*svc, &stop, &ok, &refused);
                s.spawn(move || {
                    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                        let r = if i % 2 == 0 {
                            svc.call("GET", "/v1/check", Some("olga"), None)
                        } else {
                            svc.call(
                                "POST",
                                "/v1/queue/claim-next",
                                Some("alice"),
                                Some(json!({"lease_ms": 1000})),
                            )
                        };
                        let counter = if r.status == 200 { ok } else { refused };
                        counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        assert!(r.status == 200 || r.status == 503, "{r:#?}");
                    }
                });
            }
            // Meanwhile, globex works, and every one of its calls succeeds.
            for i in 0..30 {
                let id = format!("g-{i}");
                svc.call("POST", "/v1/tasks", Some("gina"), Some(new_task(&id)))
                    .expect_ok();
                svc.call("GET", &format!("/v1/tasks/{id}"), Some("gina"), None)
                    .expect_ok();
                svc.call("GET", "/v1/queue", Some("gus"), None).expect_ok();
            }
            stop.store(true, std::sync::atomic::Ordering::Relaxed);
        });
        eprintln!(
            "acme: {} answered, {} refused as overloaded",
            ok.into_inner(),
            refused.into_inner()
        );
    });
}

// ---- what a reviewer may learn ---------------------------------------------------------

/// A reviewer pages a case of 50 tasks, 40 of which it may not see (other
/// roles, four eyes, held by someone else): no cursor carries anything of a
/// hidden task, and every verb on a hidden task answers 404, as `get` does.
#[test]
fn a_reviewer_learns_nothing_of_tasks_it_may_not_see() {
    each_backend(|svc| {
        let mut hidden = Vec::new();
        for i in 0..50 {
            let id = format!("task-{i:02}-{}", if i % 5 == 0 { "open" } else { "secret" });
            let mut t = new_task(&id);
            t["case"] = json!("c1");
            t["created_at"] = json!(1_000 + i);
            match i % 5 {
                0 => t["candidate_roles"] = json!(["finance"]),
                1 | 2 => t["candidate_roles"] = json!(["legal"]),
                3 => {
                    t["candidate_roles"] = json!(["finance"]);
                    t["excluded_actors"] = json!(["alice"]);
                }
                _ => t["candidate_roles"] = json!(["legal", "audit"]),
            }
            svc.call("POST", "/v1/tasks", Some("sam"), Some(t))
                .expect_ok();
            if i % 5 != 0 {
                hidden.push(id);
            }
        }
        assert_eq!(hidden.len(), 40);
        let mut seen = Vec::new();
        let mut after: Option<String> = None;
        let mut pages = 0;
        loop {
            let q = match &after {
                Some(a) => format!("/v1/cases/c1/tasks?limit=3&after={a}"),
                None => "/v1/cases/c1/tasks?limit=3".to_owned(),
            };
            let page = svc.call("GET", &q, Some("alice"), None);
            let body = page.expect_ok().clone();
            svc.conforms("GET", "/v1/cases/{case}/tasks", &page);
            for t in body["tasks"].as_array().expect("tasks") {
                seen.push(t["id"].as_str().expect("id").to_owned());
            }
            pages += 1;
            match body["next"].as_str() {
                Some(next) => {
                    let bytes = base64_bytes(next);
                    for id in &hidden {
                        assert!(!next.contains(id.as_str()), "{next} names {id}");
                        assert!(!next.contains(&hex(id)), "{next} carries {id} in hex");
                        assert!(
                            !bytes.windows(id.len()).any(|w| w == id.as_bytes()),
                            "{next} carries {id}"
                        );
                        assert!(!next.contains("secret") && !next.contains(&hex("secret")));
                    }
                    after = Some(next.to_owned());
                }
                None => break,
            }
        }
        assert_eq!(pages, 17, "50 tasks, 3 a page");
        assert_eq!(seen.len(), 10, "{seen:?}");
        assert!(seen.iter().all(|id| id.ends_with("-open")));
        // Bob holds one hidden from alice (legal is not hers, nor bob's:
        // the operator claims it for bob).
        svc.call(
            "POST",
            &format!("/v1/tasks/{}/claim", hidden[0]),
            Some("olga"),
            Some(json!({"actor": "bob", "roles": ["legal"], "lease_ms": 600_000})),
        )
        .expect_ok();
        for id in &hidden {
            let not_found = |method: &str, verb: &str, body: Option<Value>| {
                let path = if verb.is_empty() {
                    format!("/v1/tasks/{id}")
                } else {
                    format!("/v1/tasks/{id}/{verb}")
                };
                svc.call(method, &path, Some("alice"), body)
                    .expect_problem(404, "not-found");
            };
            not_found("GET", "", None);
            not_found("POST", "claim", None);
            not_found("POST", "claim", Some(json!({"lease_ms": 1000})));
            not_found("POST", "release", None);
            not_found("POST", "renew", Some(json!({"lease_ms": 1000})));
            not_found("POST", "settle", Some(json!({"settlement": "completed"})));
        }
        // A cursor from one case does not open for another, nor a forged one.
        let first = svc.call("GET", "/v1/cases/c1/tasks?limit=1", Some("alice"), None);
        let next = first.body["next"].as_str().expect("a next").to_owned();
        svc.call(
            "GET",
            &format!("/v1/cases/c2/tasks?after={next}"),
            Some("alice"),
            None,
        )
        .expect_problem(400, "invalid");
        svc.call(
            "GET",
            &format!("/v1/queue?after={next}"),
            Some("alice"),
            None,
        )
        .expect_problem(400, "invalid");
    });
}

fn hex(s: &str) -> String {
    s.bytes().map(|b| format!("{b:02x}")).collect()
}

/// The bytes of URL-safe base64 text, as far as it decodes.
fn base64_bytes(s: &str) -> Vec<u8> {
    let val = |c: u8| match c {
        b'A'..=b'Z' => Some(c - b'A'),
        b'a'..=b'z' => Some(c - b'a' + 26),
        b'0'..=b'9' => Some(c - b'0' + 52),
        b'-' => Some(62),
        b'_' => Some(63),
        _ => None,
    };
    let mut out = Vec::new();
    let (mut acc, mut bits) = (0u32, 0);
    for v in s.bytes().filter_map(val) {
        acc = (acc << 6) | u32::from(v);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
        }
    }
    out
}

// ---- input bounds ---------------------------------------------------------------------

/// A justification nested 10,000 deep is refused by the rules, naming the
/// field, and nothing is stored.
#[test]
fn a_deeply_nested_justification_is_invalid_and_stores_nothing() {
    each_backend(|svc| {
        let deep = format!("{}1{}", "[".repeat(10_000), "]".repeat(10_000));
        let body = format!(r#"{{"id": "deep", "run": "r", "kind": "k", "justification": {deep}}}"#);
        let r = svc.raw_call(
            "POST",
            "/v1/tasks",
            "sam",
            "application/json",
            body.into_bytes(),
        );
        r.expect_problem(400, "invalid");
        assert_eq!(r.body["field"], "justification", "{r:#?}");
        svc.call("GET", "/v1/tasks/deep", Some("sam"), None)
            .expect_problem(404, "not-found");
        let count = svc.call("GET", "/v1/stats/open-count", Some("olga"), None);
        assert_eq!(count.expect_ok()["count"], 0);
    });
}

// ---- the clock -----------------------------------------------------------------------

/// Without `--allow-clock-override`, a `now` (or `created_at`) from any
/// credential is refused, 403, and changes nothing; with it, a service or
/// operator credential may give one.
#[test]
fn now_is_refused_unless_clock_overrides_are_allowed() {
    for allow in [false, true] {
        for store in stores() {
            let svc = Service::start(
                store,
                Options {
                    allow_clock_override: allow,
                    ..Options::default()
                },
            );
            svc.call(
                "POST",
                "/v1/timers",
                Some("sam"),
                Some(crate::harness::new_timer("r", "e", 10)),
            )
            .expect_ok();
            let cases: [(&str, &str, Option<Value>); 5] = [
                (
                    "POST",
                    "/v1/timers/claim-due",
                    Some(json!({"lease_ms": 1000, "now": 253402300799999i64})),
                ),
                (
                    "POST",
                    "/v1/reclaim-lapsed",
                    Some(json!({"now": 253402300799999i64})),
                ),
                ("GET", "/v1/overdue?now=253402300799999", None),
                (
                    "POST",
                    "/v1/tasks",
                    Some({
                        let mut t = new_task("early");
                        t["created_at"] = json!(0);
                        t
                    }),
                ),
                (
                    "POST",
                    "/v1/tasks/x/claim",
                    Some(json!({"actor": "bob", "now": 5, "lease_ms": 10})),
                ),
            ];
            for (who, (method, path, body)) in
                ["sam", "sam", "sam", "sam", "olga"].into_iter().zip(cases)
            {
                let r = svc.call(method, path, Some(who), body);
                if allow {
                    assert!(r.status == 200 || r.status == 404, "{path}: {r:#?}");
                } else {
                    r.expect_problem(403, "forbidden");
                    assert!(
                        r.body["detail"]
                            .as_str()
                            .is_some_and(|d| d.contains("--allow-clock-override"))
                    );
                }
            }
            // The timer was never claimed by a refused override.
            let pending = svc.call("GET", "/v1/stats/next-due", Some("olga"), None);
            if allow {
                assert_ne!(pending.expect_ok()["at"], 10, "claimed with the far clock");
            } else {
                assert_eq!(pending.expect_ok()["at"], 10);
            }
            // A reviewer never may.
            svc.call(
                "POST",
                "/v1/queue/claim-next",
                Some("alice"),
                Some(json!({"now": 5})),
            )
            .expect_problem(403, "forbidden");
        }
    }
}

// ---- methods ---------------------------------------------------------------------------

/// `HEAD` on every GET route answers as `GET` would, without a body.
#[test]
fn head_answers_every_get_route_as_get_does_without_a_body() {
    each_backend(|svc| {
        svc.call("POST", "/v1/tasks", Some("sam"), Some(new_task("t-1")))
            .expect_ok();
        for r in leasehold_serve::routes()
            .iter()
            .filter(|r| r.method == "GET")
        {
            let path = r
                .path
                .replace("{id}", "t-1")
                .replace("{case}", "c")
                .replace("{run}", "r");
            let get = svc.call("GET", &path, Some("olga"), None);
            let head = svc
                .client
                .head(svc.url(&path))
                .bearer_auth(svc.tokens.get("olga"))
                .send()
                .expect("answers");
            assert_eq!(head.status().as_u16(), get.status, "HEAD {path}");
            assert!(get.status < 500, "GET {path}: {get:#?}");
            assert_eq!(
                head.bytes().expect("body").len(),
                0,
                "HEAD {path} has a body"
            );
            // Without a credential, as GET: 401.
            let anon = svc.client.head(svc.url(&path)).send().expect("answers");
            assert_eq!(anon.status().as_u16(), 401, "HEAD {path}");
        }
        for path in ["/healthz", "/readyz", "/v1/openapi.json"] {
            let head = svc.client.head(svc.url(path)).send().expect("answers");
            assert_eq!(head.status().as_u16(), 200, "HEAD {path}");
        }
        let head = svc
            .client
            .head(svc.url("/metrics"))
            .bearer_auth(svc.tokens.get("olga"))
            .send()
            .expect("answers");
        assert_eq!(head.status().as_u16(), 200, "HEAD /metrics");
    });
}

/// Made-up methods, however many, add no metric series: they share one
/// `other` label.
#[test]
fn made_up_methods_add_no_metric_series() {
    let svc = Service::start(stores().remove(0), test_options());
    let series = || -> std::collections::BTreeSet<String> {
        let text = svc
            .client
            .get(svc.url("/metrics"))
            .bearer_auth(svc.tokens.get("olga"))
            .send()
            .expect("metrics")
            .text()
            .expect("text");
        // The recorder is the process's, shared with tests running beside
        // this one: only the series of this test's requests are compared.
        let known = [
            "GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "CONNECT", "TRACE", "other",
        ];
        for l in text
            .lines()
            .filter(|l| l.starts_with("leasehold_http_requests_total"))
        {
            let m = l
                .split("method=\"")
                .nth(1)
                .and_then(|r| r.split('"').next())
                .unwrap_or("");
            assert!(
                known.contains(&m),
                "a method label outside the fixed set: {l}"
            );
        }
        text.lines()
            .filter(|l| l.contains("method=\"other\""))
            .filter_map(|l| l.rsplit_once(' ').map(|(k, _)| k.to_owned()))
            .collect()
    };
    let send = |m: &str, path: &str| {
        let method = reqwest::Method::from_bytes(m.as_bytes()).expect("a method");
        svc.client
            .request(method, svc.url(path))
            .send()
            .expect("answers")
            .status()
            .as_u16()
    };
    // One of each kind first, so every series the rest could touch exists.
    assert_eq!(send("BREW", "/v1/queue"), 405);
    assert_eq!(send("BREW", "/nowhere"), 404);
    assert_eq!(send("BREW", "/healthz"), 405);
    let before = series();
    let mut rng = fastrand::Rng::with_seed(7);
    for i in 0..100 {
        let m: String = (0..8).map(|_| rng.uppercase()).collect();
        let path = ["/v1/queue", "/nowhere", "/healthz"][i % 3];
        let status = send(&m, path);
        assert!(status == 405 || status == 404, "{m} {path}: {status}");
    }
    assert_eq!(series(), before);
    let r = svc
        .client
        .request(
            reqwest::Method::from_bytes(b"BREW").expect("m"),
            svc.url("/v1/queue"),
        )
        .send()
        .expect("answers");
    let allow = r
        .headers()
        .get("allow")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    assert!(allow.contains("GET"), "405 names the methods: {allow:?}");
}

/// Readiness costs the storage at most one probe a second, however often
/// it is asked.
#[test]
fn readiness_probes_the_storage_at_most_once_a_second() {
    let f = Faulted::start(test_options());
    let started = std::time::Instant::now();
    for _ in 0..200 {
        let r = f
            .client
            .get(format!("{}/readyz", f.base))
            .send()
            .expect("answers");
        assert_eq!(r.status(), 200);
    }
    let secs = started.elapsed().as_secs();
    let probes = f.gate.probes.load(std::sync::atomic::Ordering::Relaxed);
    assert!(
        probes >= 1 && probes <= secs + 1,
        "{probes} probes in {secs} s"
    );
}
