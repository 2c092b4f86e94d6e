//! The front door under a crowd, over raw sockets: a thousand strangers
//! sending bodies slowly, a caller trickling its body, one tenant's floods
//! of connections, queued calls and consistency checks, each beside
//! another tenant whose calls must all succeed. Slow clients are held by
//! not sending; every assertion is on what the server answered, never on
//! how long it took.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::{Arc, Condvar, Mutex, mpsc};
use std::time::Duration;

use leasehold_host::Engine;
use leasehold_host::storage::{Backend, Entry, Mode, Pending, StorageError, Txn, Write as KvWrite};
use leasehold_memory_backend::MemoryBackend;
use leasehold_serve::{BodyRate, Config, ConnectionLimits, Credentials, Options, Server};
use serde_json::Value;

use crate::harness::{Reply, Service, Tokens, new_task, reply, stores, test_options, tokens};

/// Sockets this module holds at once, client and server ends together,
/// with room to spare: the soft limit is raised to the hard one if it is
/// lower.
fn enough_files(needed: u64) {
    use rustix::process::{Resource, getrlimit, setrlimit};
    let limit = getrlimit(Resource::Nofile);
    if limit.current.is_some_and(|c| c < needed) {
        let raised = rustix::process::Rlimit {
            current: limit.maximum,
            maximum: limit.maximum,
        };
        setrlimit(Resource::Nofile, raised).expect("the open-file limit raised");
    }
    let now = getrlimit(Resource::Nofile).current;
    assert!(
        now.is_none_or(|c| c >= needed),
        "this test holds {needed} sockets; the open-file limit is {now:?}"
    );
}

fn addr_of(svc: &Service) -> String {
    svc.url("").trim_start_matches("http://").to_owned()
}

fn connect(addr: &str) -> TcpStream {
    let tcp = TcpStream::connect(addr).expect("connects");
    tcp.set_read_timeout(Some(Duration::from_secs(120)))
        .expect("timeout");
    tcp
}

/// The head of a `POST /v1/tasks` whose body is `length` bytes long.
fn post_head(authorization: Option<&str>, length: usize) -> String {
    let auth = authorization.map_or_else(String::new, |a| format!("authorization: {a}\r\n"));
    format!(
        "POST /v1/tasks HTTP/1.1\r\nhost: x\r\n{auth}content-type: application/json\r\n\
         content-length: {length}\r\n\r\n"
    )
}

/// Reads until the server closes the connection; what it sent. A read
/// that times out (the server kept the connection) fails the test.
fn until_closed(tcp: &mut TcpStream) -> String {
    let mut got = Vec::new();
    let mut buf = [0u8; 1024];
    loop {
        match tcp.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => break,
            Err(e) => panic!("the server kept the connection: {e}"),
        }
    }
    String::from_utf8_lossy(&got).to_ascii_lowercase()
}

/// Globex's work, every call of which must succeed.
fn globex_works(svc: &Service, round: usize) {
    for i in 0..10 {
        let id = format!("g-{round}-{i}");
        svc.call("POST", "/v1/tasks", Some("gina"), Some(new_task(&id)))
            .expect_ok();
        svc.call("GET", &format!("/v1/tasks/{id}"), Some("gina"), None)
            .expect_ok();
    }
    svc.call("GET", "/v1/queue", Some("gus"), None).expect_ok();
}

/// A thousand requests with no credential or a bad one, each sending its
/// head and the first bytes of a body, then nothing: each is answered 401
/// and closed without its body being read (neither the body's time nor the
/// slow-body guard is what ends them: both are ten minutes off here), and
/// another tenant's calls all succeed beside them.
#[test]
fn a_thousand_slow_unauthenticated_bodies_are_refused_unread_beside_another_tenants_calls() {
    const STRANGERS: usize = 1000;
    enough_files(4 * STRANGERS as u64);
    let svc = Service::start(
        stores().remove(0),
        Options {
            request_timeout: Duration::from_secs(600),
            body_rate: BodyRate {
                min_bytes_per_sec: 1,
                grace: Duration::from_secs(600),
            },
            ..test_options()
        },
    );
    let addr = addr_of(&svc);
    globex_works(&svc, 0);
    let mut strangers: Vec<TcpStream> = (0..STRANGERS)
        .map(|i| {
            let mut tcp = connect(&addr);
            let auth = (i % 2 == 0).then_some("Bearer lh_not-a-token");
            let mut sent = post_head(auth, 64 * 1024).into_bytes();
            sent.extend_from_slice(b"{\"id\": \"slow");
            tcp.write_all(&sent).expect("writes");
            tcp
        })
        .collect();
    globex_works(&svc, 1);
    for tcp in &mut strangers {
        let got = until_closed(tcp);
        // A reset may come before the answer is read; an answer that came
        // is the refusal.
        assert!(got.is_empty() || got.starts_with("http/1.1 401"), "{got}");
        if !got.is_empty() {
            assert!(got.contains("connection: close"), "{got}");
        }
    }
    globex_works(&svc, 2);
}

/// An authenticated caller that sends a body's first bytes and then
/// nothing is answered 408 `body-timeout` once the slow-body guard's grace
/// has passed, and its connection is closed, long before the request's
/// own time (ten minutes here) would end it; nothing is written.
#[test]
fn a_body_below_the_minimum_rate_is_answered_408_and_closed() {
    let svc = Service::start(
        stores().remove(0),
        Options {
            request_timeout: Duration::from_secs(600),
            body_rate: BodyRate {
                min_bytes_per_sec: 1000,
                grace: Duration::from_millis(500),
            },
            ..test_options()
        },
    );
    let mut tcp = connect(&addr_of(&svc));
    let token = format!("Bearer {}", svc.tokens.get("sam"));
    let mut sent = post_head(Some(&token), 10_000).into_bytes();
    sent.extend_from_slice(b"{\"id\": \"trickled\", ");
    tcp.write_all(&sent).expect("writes");
    let got = until_closed(&mut tcp);
    assert!(got.starts_with("http/1.1 408"), "{got}");
    assert!(got.contains("urn:leasehold:problem:body-timeout"), "{got}");
    assert!(got.contains("connection: close"), "{got}");
    svc.call("GET", "/v1/tasks/trickled", Some("sam"), None)
        .expect_problem(404, "not-found");
    svc.call("POST", "/v1/tasks", Some("sam"), Some(new_task("whole")))
        .expect_ok();
}

// ---- one tenant's burst of calls and checks ---------------------------------------

/// A store whose reads of one tenant wait while its gate is closed.
#[derive(Clone)]
struct Stalling {
    inner: MemoryBackend,
    gate: Arc<Gate>,
}

struct Gate {
    tenant: &'static str,
    closed: Mutex<bool>,
    opened: Condvar,
    /// Reads now held at the gate.
    held: Mutex<usize>,
    arrived: Condvar,
}

impl Gate {
    fn set(&self, closed: bool) {
        *self.closed.lock().expect("gate") = closed;
        self.opened.notify_all();
    }

    /// Waits while the gate is closed, if `tenant` is the one it holds.
    fn pass(&self, tenant: &str) {
        if tenant != self.tenant {
            return;
        }
        let closed = self.closed.lock().expect("gate");
        if !*closed {
            return;
        }
        *self.held.lock().expect("gate") += 1;
        self.arrived.notify_all();
        let (closed, _) = self
            .opened
            .wait_timeout_while(closed, Duration::from_secs(120), |c| *c)
            .expect("gate");
        drop(closed);
        *self.held.lock().expect("gate") -= 1;
    }

    /// Waits until `n` reads are held at the gate.
    fn wait_for(&self, n: usize) {
        let held = self.held.lock().expect("gate");
        let (held, _) = self
            .arrived
            .wait_timeout_while(held, Duration::from_secs(60), |h| *h < n)
            .expect("gate");
        assert!(*held >= n, "{} reads reached the gate, not {n}", *held);
    }
}

struct StallingTxn {
    inner: Box<dyn Txn>,
    tenant: String,
    gate: Arc<Gate>,
}

impl Backend for Stalling {
    fn begin(
        &self,
        tenant: &str,
        mode: Mode,
        lock_wait: Duration,
    ) -> Result<Box<dyn Txn>, StorageError> {
        Ok(Box::new(StallingTxn {
            inner: self.inner.begin(tenant, mode, lock_wait)?,
            tenant: tenant.to_owned(),
            gate: self.gate.clone(),
        }))
    }

    fn concurrent_writers(&self) -> bool {
        false
    }
}

impl Txn for StallingTxn {
    fn get(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>, StorageError> {
        self.gate.pass(&self.tenant);
        self.inner.get(key)
    }

    fn get_many(&mut self, keys: &[Vec<u8>]) -> Result<Vec<Option<Vec<u8>>>, StorageError> {
        self.gate.pass(&self.tenant);
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
        self.gate.pass(&self.tenant);
        self.inner.scan(start, end, limit, reverse, max_bytes)
    }

    fn commit(self: Box<Self>, batch: Vec<KvWrite>) -> Result<Pending, StorageError> {
        self.inner.commit(batch)
    }
}

/// A server over a store that can hold acme's reads, with the harness's
/// people, and a client that waits long.
struct Held {
    server: Option<Server>,
    base: String,
    tokens: Tokens,
    gate: Arc<Gate>,
}

impl Held {
    fn start(options: Options) -> Held {
        let gate = Arc::new(Gate {
            tenant: "acme",
            closed: Mutex::new(false),
            opened: Condvar::new(),
            held: Mutex::new(0),
            arrived: Condvar::new(),
        });
        let backend = Stalling {
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
        Held {
            base: format!("http://{}", server.addr()),
            server: Some(server),
            tokens,
            gate,
        }
    }

    /// One call on a connection of its own, answered within a minute (or
    /// the test fails).
    fn call(&self, method: &str, path: &str, who: &str, body: Option<Value>) -> Reply {
        let client = reqwest::blocking::Client::builder()
            .timeout(Duration::from_secs(60))
            .build()
            .expect("a client");
        let method = reqwest::Method::from_bytes(method.as_bytes()).expect("a method");
        let mut req = client
            .request(method, format!("{}{path}", self.base))
            .bearer_auth(self.tokens.get(who));
        if let Some(b) = body {
            req = req.json(&b);
        }
        reply(req.send().expect("an answer within a minute"))
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        self.gate.set(false);
        if let Some(s) = self.server.take() {
            let _ = s.shutdown();
        }
    }
}

/// Acme sends ten reads while its store holds them: two run (its slots),
/// three wait in its line, and the other five are answered 429
/// `too-many-requests` with `Retry-After` at once, while the first five
/// are still held; globex's calls all succeed meanwhile, and once acme's
/// store answers, the five that ran or waited succeed.
#[test]
fn a_tenants_burst_past_its_line_is_turned_away_at_once_while_another_tenant_calls() {
    let h = Held::start(Options {
        max_in_flight_per_tenant: 2,
        max_waiting_per_tenant: 3,
        request_timeout: Duration::from_secs(600),
        ..test_options()
    });
    h.call("POST", "/v1/tasks", "sam", Some(new_task("a-1")))
        .expect_ok();
    h.gate.set(true);
    let (tx, answers) = mpsc::channel();
    std::thread::scope(|s| {
        for _ in 0..10 {
            let (h, tx) = (&h, tx.clone());
            s.spawn(move || {
                let _ = tx.send(h.call("GET", "/v1/tasks/a-1", "olga", None));
            });
        }
        h.gate.wait_for(2);
        for _ in 0..5 {
            let r = answers
                .recv_timeout(Duration::from_secs(60))
                .expect("a burst past the line is answered while the store still holds acme");
            r.expect_problem(429, "too-many-requests");
            assert_eq!(r.headers["retry-after"], "1", "{r:#?}");
        }
        for i in 0..5 {
            let id = format!("g-{i}");
            h.call("POST", "/v1/tasks", "gina", Some(new_task(&id)))
                .expect_ok();
            h.call("GET", &format!("/v1/tasks/{id}"), "gus", None)
                .expect_ok();
        }
        h.gate.set(false);
        for _ in 0..5 {
            let r = answers
                .recv_timeout(Duration::from_secs(60))
                .expect("an answer");
            assert_eq!(r.status, 200, "{r:#?}");
        }
    });
}

/// Acme runs six consistency checks at once while its store holds them:
/// it takes one of the server's two check slots, never both, so globex's
/// check runs and answers meanwhile; acme's then all answer, each 200 or
/// turned away as 429 if its line was full.
#[test]
fn a_tenants_check_burst_does_not_hold_back_another_tenants_check() {
    let h = Held::start(Options {
        max_checks: 2,
        max_waiting_per_tenant: 8,
        check_timeout: Duration::from_secs(600),
        ..test_options()
    });
    h.call("POST", "/v1/tasks", "sam", Some(new_task("a-1")))
        .expect_ok();
    h.call("POST", "/v1/tasks", "gina", Some(new_task("g-1")))
        .expect_ok();
    h.gate.set(true);
    let (tx, answers) = mpsc::channel();
    std::thread::scope(|s| {
        for _ in 0..6 {
            let (h, tx) = (&h, tx.clone());
            s.spawn(move || {
                let _ = tx.send(h.call("GET", "/v1/check", "olga", None));
            });
        }
        h.gate.wait_for(1);
        let r = h.call("GET", "/v1/check", "gina", None);
        assert_eq!(
            r.expect_ok()["discrepancies"],
            serde_json::json!([]),
            "{r:#?}"
        );
        h.gate.set(false);
        for _ in 0..6 {
            let r = answers
                .recv_timeout(Duration::from_secs(120))
                .expect("an answer");
            assert!(r.status == 200 || r.status == 429, "{r:#?}");
        }
    });
}

// ---- who holds the connections ------------------------------------------------------

/// A thousand connections that send half a head and then nothing, against
/// a server whose strangers' pool is 16 and whose callers may hold 64
/// connections (both scaled down from the defaults, 64 and 1024, so that
/// the thousand outnumber them): all but the pool's 16 are closed to make
/// room, and another tenant connects and every one of its calls succeeds,
/// while the header timeout (ten minutes here) has closed none of them.
#[test]
fn a_thousand_silent_strangers_leave_room_for_another_tenant() {
    const STRANGERS: usize = 1000;
    const POOL: usize = 16;
    enough_files(4 * STRANGERS as u64);
    let svc = Service::start(
        stores().remove(0),
        Options {
            connections: ConnectionLimits {
                max_connections: 64,
                max_unauthenticated: POOL,
                // Scaled down from a second, so that the thousand go by soon.
                unauthenticated_grace: Duration::from_millis(20),
                header_timeout: Duration::from_secs(600),
                ..ConnectionLimits::default()
            },
            ..test_options()
        },
    );
    let addr = addr_of(&svc);
    // The harness's own client's connection shows a credential first.
    globex_works(&svc, 0);
    let mut strangers: Vec<(TcpStream, bool)> = (0..STRANGERS)
        .map(|_| {
            let mut tcp = connect(&addr);
            tcp.write_all(b"POST /v1/tasks HTTP/1.1\r\nhost: x\r\n")
                .expect("writes");
            tcp.set_nonblocking(true).expect("nonblocking");
            (tcp, false)
        })
        .collect();
    // Wait (two minutes at most) until the server has closed all but the
    // pool.
    let mut closed = 0;
    for _ in 0..6000 {
        for (tcp, seen) in strangers.iter_mut().filter(|(_, seen)| !*seen) {
            let mut buf = [0u8; 256];
            match tcp.read(&mut buf) {
                Ok(0) => *seen = true,
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => *seen = true,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                other => panic!("a stranger was sent something: {other:?}"),
            }
        }
        closed = strangers.iter().filter(|(_, seen)| *seen).count();
        if closed >= STRANGERS - POOL {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(
        closed,
        STRANGERS - POOL,
        "all but the strangers' pool closed"
    );
    // On new connections, which must find room.
    let fresh = reqwest::blocking::Client::builder()
        .timeout(Duration::from_secs(60))
        .build()
        .expect("a client");
    for i in 0..10 {
        let id = format!("g-{i}");
        let call = |method: reqwest::Method, path: &str, body: Option<Value>| {
            let mut req = fresh
                .request(method, svc.url(path))
                .bearer_auth(svc.tokens.get("gina"));
            if let Some(b) = body {
                req = req.json(&b);
            }
            reply(req.send().expect("an answer"))
        };
        call(reqwest::Method::POST, "/v1/tasks", Some(new_task(&id))).expect_ok();
        call(reqwest::Method::GET, &format!("/v1/tasks/{id}"), None).expect_ok();
    }
    drop(strangers);
}

/// One raw connection that sends `who`'s request and keeps the connection;
/// the answer's head, lower-cased, and the connection.
fn kept(addr: &str, token: &str) -> (String, TcpStream) {
    let mut tcp = connect(addr);
    write!(
        tcp,
        "GET /v1/whoami HTTP/1.1\r\nhost: x\r\nauthorization: Bearer {token}\r\n\r\n"
    )
    .expect("writes");
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    // The whole answer: its head and its body, as long as it says.
    while !answer_complete(&got) {
        match tcp.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => break,
            Err(e) => panic!("no answer: {e}"),
        }
    }
    (String::from_utf8_lossy(&got).to_ascii_lowercase(), tcp)
}

fn answer_complete(got: &[u8]) -> bool {
    let text = String::from_utf8_lossy(got).to_ascii_lowercase();
    let Some((head, body)) = text.split_once("\r\n\r\n") else {
        return false;
    };
    let length = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse::<usize>().ok())
        .unwrap_or(0);
    body.len() >= length
}

/// Each caller, and each tenant, holds its share of connections and no
/// more: past a caller's share (8) or its tenant's (16), a request is
/// answered 503 `overloaded` with `Retry-After` and its connection closed;
/// another tenant still connects, and every one of its calls succeeds.
#[test]
fn one_tenants_flood_of_connections_leaves_another_tenant_its_own() {
    let svc = Service::start(
        stores().remove(0),
        Options {
            connections: ConnectionLimits {
                max_connections: 64,
                max_connections_per_tenant: 16,
                max_connections_per_caller: 8,
                header_timeout: Duration::from_secs(600),
                ..ConnectionLimits::default()
            },
            ..test_options()
        },
    );
    let addr = addr_of(&svc);
    let mut held = Vec::new();
    let mut flood = |who: &str, n: usize| -> (usize, usize) {
        let token = svc.tokens.get(who).to_owned();
        let (mut ok, mut refused) = (0, 0);
        for _ in 0..n {
            let (got, tcp) = kept(&addr, &token);
            if got.starts_with("http/1.1 200") {
                ok += 1;
                held.push(tcp);
            } else {
                assert!(got.starts_with("http/1.1 503"), "{got}");
                assert!(got.contains("urn:leasehold:problem:overloaded"), "{got}");
                assert!(got.contains("retry-after: 1"), "{got}");
                assert!(got.contains("connection: close"), "{got}");
                assert!(!got.contains("tenant"), "a refusal names no bound: {got}");
                refused += 1;
            }
        }
        (ok, refused)
    };
    assert_eq!(flood("sam", 20), (8, 12), "sam's share");
    assert_eq!(
        flood("olga", 20),
        (8, 12),
        "olga's share, the rest of acme's"
    );
    assert_eq!(flood("alice", 4), (0, 4), "acme's share is taken");
    assert_eq!(flood("gina", 4), (4, 0), "globex has its own");
    globex_works(&svc, 0);
    drop(held);
}
