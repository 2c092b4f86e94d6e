//! A server that stops answering, and a connection cut while a `COMMIT` is
//! in flight, made on purpose by a loopback TCP proxy the test controls.
//! The proxy acts on bytes it sees, never on a timer, so each fault lands at
//! the same point of the call on every run.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use leasehold_host::{Engine, Error, Limits, PgError, WAIT_GRACE};
use leasehold_tests::pg::Schema;
use leasehold_tests::*;

/// What the proxy does to the connection on which its trigger fires.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Fault {
    /// Forwards nothing more either way, and keeps both sockets open: a
    /// server that stopped answering, or a half-open connection.
    Freeze,
    /// Forwards what the client sent, lets the server answer it, then closes
    /// the client's socket without passing the answer on.
    CutBeforeAnswer,
}

const NORMAL: u8 = 0;
const FROZEN: u8 = 1;
const CUT: u8 = 2;

struct Trigger {
    /// Fires on the first bytes from a client that contain this.
    pattern: Vec<u8>,
    fault: Fault,
}

/// One proxied connection: the client's socket, the server's, its state.
type Piped = (TcpStream, TcpStream, Arc<AtomicU8>);

/// A loopback proxy in front of the test database's server.
struct Proxy {
    addr: SocketAddr,
    trigger: Arc<Mutex<Option<Trigger>>>,
    connections: Arc<AtomicUsize>,
    fired: Arc<AtomicUsize>,
    /// Each connection's two sockets and state, to end frozen ones.
    open: Arc<Mutex<Vec<Piped>>>,
}

impl Proxy {
    fn start(upstream: SocketAddr) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the proxy");
        let addr = listener.local_addr().expect("proxy address");
        let trigger: Arc<Mutex<Option<Trigger>>> = Arc::new(Mutex::new(None));
        let connections = Arc::new(AtomicUsize::new(0));
        let fired = Arc::new(AtomicUsize::new(0));
        let open = Arc::new(Mutex::new(Vec::new()));
        let (t, c, f, o) = (
            trigger.clone(),
            connections.clone(),
            fired.clone(),
            open.clone(),
        );
        std::thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(client) = client else { break };
                let Ok(server) = TcpStream::connect(upstream) else {
                    continue;
                };
                c.fetch_add(1, Ordering::SeqCst);
                let state = Arc::new(AtomicU8::new(NORMAL));
                if let (Ok(a), Ok(b)) = (client.try_clone(), server.try_clone()) {
                    o.lock().expect("open").push((a, b, state.clone()));
                }
                let pump = |from: &TcpStream, to: &TcpStream| {
                    (
                        from.try_clone().expect("clone"),
                        to.try_clone().expect("clone"),
                    )
                };
                let (mut from, mut to) = pump(&client, &server);
                let (trigger, fired, st) = (t.clone(), f.clone(), state.clone());
                std::thread::spawn(move || {
                    let mut buf = vec![0u8; 1 << 16];
                    while let Ok(n) = from.read(&mut buf) {
                        if n == 0 {
                            break;
                        }
                        if st.load(Ordering::SeqCst) == FROZEN {
                            continue;
                        }
                        let fault = {
                            let mut armed = trigger.lock().expect("trigger");
                            let hit = armed.as_ref().is_some_and(|a| {
                                a.pattern.is_empty()
                                    || buf[..n].windows(a.pattern.len()).any(|w| w == a.pattern)
                            });
                            if hit {
                                armed.take().map(|a| a.fault)
                            } else {
                                None
                            }
                        };
                        match fault {
                            Some(Fault::Freeze) => {
                                st.store(FROZEN, Ordering::SeqCst);
                                fired.fetch_add(1, Ordering::SeqCst);
                                continue;
                            }
                            Some(Fault::CutBeforeAnswer) => {
                                st.store(CUT, Ordering::SeqCst);
                                fired.fetch_add(1, Ordering::SeqCst);
                            }
                            None => {}
                        }
                        if to.write_all(&buf[..n]).is_err() {
                            break;
                        }
                    }
                });
                let (mut from, mut to) = pump(&server, &client);
                std::thread::spawn(move || {
                    let mut buf = vec![0u8; 1 << 16];
                    while let Ok(n) = from.read(&mut buf) {
                        if n == 0 {
                            break;
                        }
                        match state.load(Ordering::SeqCst) {
                            FROZEN => continue,
                            // The server answered; the client never hears it.
                            // The server's side stays open, so it is not
                            // told either.
                            CUT => {
                                let _ = to.shutdown(Shutdown::Both);
                                continue;
                            }
                            _ => {}
                        }
                        if to.write_all(&buf[..n]).is_err() {
                            break;
                        }
                    }
                });
            }
        });
        Proxy {
            addr,
            trigger,
            connections,
            fired,
            open,
        }
    }

    /// Ends the frozen connections at both ends, as a server's TCP keepalive
    /// or timeout would in the end: the server then ends the session and
    /// any transaction it had open. Until then, that open transaction is
    /// one every `READ ONLY DEFERRABLE` snapshot on the cluster waits for
    /// (a read-only call only briefly, then it reads without one).
    fn release_frozen(&self) {
        for (client, server, state) in self.open.lock().expect("open").iter() {
            if state.load(Ordering::SeqCst) == FROZEN {
                let _ = client.shutdown(Shutdown::Both);
                let _ = server.shutdown(Shutdown::Both);
            }
        }
    }

    fn arm(&self, pattern: &[u8], fault: Fault) {
        *self.trigger.lock().expect("trigger") = Some(Trigger {
            pattern: pattern.to_vec(),
            fault,
        });
    }

    /// `url` with its host and port replaced by the proxy's, in plaintext
    /// so the proxy can read what goes by.
    fn url(&self, url: &str) -> String {
        let (scheme, rest) = url.split_once("://").expect("a postgres:// URL");
        let (auth, rest) = rest.rsplit_once('@').expect("user@host");
        let path = &rest[rest.find('/').expect("a database")..];
        let sep = if path.contains('?') { '&' } else { '?' };
        format!("{scheme}://{auth}@{}{path}{sep}sslmode=disable", self.addr)
    }
}

/// The server's address in a `postgres://user:pw@host:port/db` URL.
fn upstream(url: &str) -> SocketAddr {
    let rest = url.split_once("://").expect("scheme").1;
    let host_port = rest.rsplit_once('@').expect("user@host").1;
    let host_port = &host_port[..host_port.find('/').unwrap_or(host_port.len())];
    use std::net::ToSocketAddrs;
    host_port
        .to_socket_addrs()
        .expect("the server's address")
        .next()
        .expect("an address")
}

fn engine(url: &str, deadline: Duration) -> Engine {
    Engine::builder()
        .limits(Limits {
            deadline,
            ..Limits::default()
        })
        .postgres(url)
        .expect("the engine connects")
}

fn pg_error(e: &Error) -> Option<&PgError> {
    match e {
        Error::Storage(source) | Error::OutcomeUnknown { source } => source.downcast_ref(),
        _ => None,
    }
}

/// A server that stops answering in the middle of a call: the call ends
/// within its deadline plus the stated grace with a typed timeout, its
/// connection is dropped rather than handed out again, and the engine
/// carries on. All of it from the blocking threads of a tokio application,
/// as the HTTP service calls the engine.
#[test]
fn a_call_on_a_server_that_stops_answering_ends_in_time_with_a_typed_error() {
    let Some(schema) = Schema::fresh() else {
        return;
    };
    let proxy = Proxy::start(upstream(&schema.url));
    let deadline = Duration::from_secs(1);
    let e = Arc::new(engine(&proxy.url(&schema.url), deadline));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime");
    rt.block_on(async {
        let setup = e.clone();
        tokio::task::spawn_blocking(move || {
            let t = setup.tenant("acme").expect("tenant");
            t.open(&task("t1", 1).roles(&["r"])).expect("open");
        })
        .await
        .expect("setup");
        let opened = proxy.connections.load(Ordering::SeqCst);

        // The next transaction any client begins is never answered. Not
        // just the next bytes: the backend's notice connection sends its
        // own after the setup's commit, at a moment of its choosing.
        proxy.arm(b"BEGIN ISOLATION LEVEL SERIALIZABLE", Fault::Freeze);
        let frozen = e.clone();
        let (out, took) = tokio::task::spawn_blocking(move || {
            let t = frozen.tenant("acme").expect("tenant");
            let started = Instant::now();
            let out = t.claim("t1", "alice", &["r"], None);
            (out, started.elapsed())
        })
        .await
        .expect("the frozen call returns");
        assert_eq!(proxy.fired.load(Ordering::SeqCst), 1);
        let err = out.expect_err("a call on a frozen server fails");
        assert!(
            pg_error(&err).is_some_and(PgError::is_timeout),
            "not a typed timeout: {err:?}"
        );
        assert!(
            took >= deadline + WAIT_GRACE,
            "gave up early, after {took:?}"
        );
        // Generous: the bound is deadline + grace; the rest is for a busy
        // machine, never for the server.
        assert!(
            took < deadline + WAIT_GRACE + Duration::from_secs(20),
            "took {took:?}"
        );

        // The engine carries on, on a new connection: the frozen one was
        // dropped, not handed out again.
        let after = e.clone();
        let results = futures_join(
            (0..4)
                .map(|i| {
                    let e = after.clone();
                    tokio::task::spawn_blocking(move || {
                        let t = e.tenant("acme").expect("tenant");
                        let id = format!("n{i}");
                        t.open(&task(&id, i).roles(&["r"]))?;
                        t.claim(&id, "bob", &["r"], None).map(drop)
                    })
                })
                .collect(),
        )
        .await;
        for r in results {
            r.expect("a call after the freeze");
        }
        assert!(proxy.connections.load(Ordering::SeqCst) > opened);
    });
    proxy.release_frozen();
    let t = e.tenant("acme").expect("tenant");
    // A read waits only briefly for a safe snapshot, which the frozen
    // session (until the server ends it) keeps from coming, then reads
    // without one; on a busy server that may still pass one call's
    // deadline: ask again, within a bound.
    let started = std::time::Instant::now();
    let got = loop {
        match t.get("t1") {
            Err(leasehold_host::Error::Sandbox(leasehold_host::SandboxError::Deadline(_)))
                if started.elapsed() < std::time::Duration::from_secs(60) =>
            {
                std::thread::sleep(std::time::Duration::from_millis(100));
            }
            other => break other,
        }
    };
    assert_eq!(
        got.expect("get").expect("t1").assignee,
        None,
        "the frozen claim did not land"
    );
    assert_consistent(&t);
}

async fn futures_join<T>(handles: Vec<tokio::task::JoinHandle<T>>) -> Vec<T> {
    let mut out = Vec::new();
    for h in handles {
        out.push(h.await.expect("a blocking task"));
    }
    out
}

/// A connection lost after the `COMMIT` was sent answers `OutcomeUnknown`,
/// not retryable as it is; here the commit did land, and re-reading is how
/// the caller finds out.
#[test]
fn a_connection_cut_while_the_commit_is_in_flight_answers_outcome_unknown() {
    let Some(schema) = Schema::fresh() else {
        return;
    };
    let proxy = Proxy::start(upstream(&schema.url));
    let e = engine(&proxy.url(&schema.url), Duration::from_secs(5));
    let t = e.tenant("acme").expect("tenant");
    t.open(&task("t1", 1).roles(&["r"])).expect("open");
    // The claim's writes and its COMMIT go out together; the server commits
    // and answers, and the answer is lost.
    proxy.arm(b"COMMIT\0", Fault::CutBeforeAnswer);
    let err = t
        .claim("t1", "alice", &["r"], None)
        .expect_err("the answer was lost");
    assert_eq!(proxy.fired.load(Ordering::SeqCst), 1);
    assert!(
        matches!(err, Error::OutcomeUnknown { .. }),
        "expected OutcomeUnknown, got {err:?}"
    );
    assert!(!err.is_retryable());
    // Re-read: the claim landed. A repeat of the same claim by its holder
    // is answered with the task, as the verb is idempotent.
    let seen = (0..300)
        .find_map(|_| {
            let got = t.get("t1").expect("re-read").expect("t1");
            if got.assignee.is_some() {
                return Some(got);
            }
            std::thread::sleep(Duration::from_millis(100));
            None
        })
        .expect("the commit the server answered is there");
    assert_eq!(seen.assignee.as_deref(), Some("alice"));
    let again = t.claim("t1", "alice", &["r"], None).expect("claim again");
    assert_eq!(again.assignee.as_deref(), Some("alice"));
    assert_consistent(&t);
}

/// A server that stops answering while the `COMMIT` is in flight: the
/// outcome is unknown too, and the call still ends within its bound.
#[test]
fn a_server_that_stops_answering_the_commit_answers_outcome_unknown() {
    let Some(schema) = Schema::fresh() else {
        return;
    };
    let proxy = Proxy::start(upstream(&schema.url));
    let deadline = Duration::from_secs(1);
    let e = engine(&proxy.url(&schema.url), deadline);
    let t = e.tenant("acme").expect("tenant");
    t.open(&task("t1", 1).roles(&["r"])).expect("open");
    proxy.arm(b"COMMIT\0", Fault::Freeze);
    let started = Instant::now();
    let err = t
        .claim("t1", "alice", &["r"], None)
        .expect_err("no answer to the commit");
    let took = started.elapsed();
    assert!(
        matches!(&err, Error::OutcomeUnknown { .. })
            && pg_error(&err).is_some_and(PgError::is_timeout),
        "expected OutcomeUnknown from a timeout, got {err:?}"
    );
    assert!(took < deadline + WAIT_GRACE + Duration::from_secs(20));
    proxy.release_frozen();
    // Here nothing reached the server, so the claim did not land.
    assert_eq!(t.get("t1").expect("re-read").expect("t1").assignee, None);
}

/// Logging in to a server that accepts the connection but never answers
/// ends at the connect timeout, typed.
#[test]
fn logging_in_to_a_server_that_never_answers_ends_at_the_connect_timeout() {
    let Some(schema) = Schema::fresh() else {
        return;
    };
    let proxy = Proxy::start(upstream(&schema.url));
    proxy.arm(b"", Fault::Freeze);
    let url = format!("{}&connect_timeout=1", proxy.url(&schema.url));
    let started = Instant::now();
    let err = Engine::builder()
        .postgres(&url)
        .expect_err("nobody answers");
    let took = started.elapsed();
    assert!(
        pg_error(&err).is_some_and(PgError::is_timeout),
        "not a typed timeout: {err:?}"
    );
    assert!(took >= Duration::from_secs(1), "gave up early: {took:?}");
    assert!(took < Duration::from_secs(20), "took {took:?}");
}
