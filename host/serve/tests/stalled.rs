//! A thousand event-stream readers that never read, over real sockets,
//! while ten thousand changes are made: each stream is dropped as too slow,
//! the server closes every one of their connections within its write
//! timeout, and its memory stays within a stated bound throughout. A binary
//! of its own: it measures the process's resident memory, which other
//! tests running beside it would move.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use leasehold_host::Engine;
use leasehold_serve::{
    Config, Credentials, Options, Principal, Scope, Server, TokenTable, new_token,
};
use serde_json::json;

/// Streams held open, and changes made while they are.
const READERS: usize = 1000;
const CHANGES: usize = 10_000;
const TENANTS: usize = 4;

/// What the server may grow by while the readers stall, beyond what it held
/// with them connected: the tenants' event budgets (four of 16 MiB), each
/// connection's own buffers (hyper's 64 KiB), and room for the allocator's
/// slack. Without the bounds each stalled reader held about a megabyte.
const BOUND: u64 = 200 << 20;

/// A bound on a failure, never a pace the test relies on.
const PATIENCE: Duration = Duration::from_secs(120);

fn rss() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
        .expect("VmRSS")
        * 1024
}

/// A stream's request on a socket with a small receive buffer; answers once
/// the stream has begun (its head and `ready` read), and is never read again.
fn stalled(addr: std::net::SocketAddr, token: &str) -> TcpStream {
    let socket =
        socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).expect("a socket");
    socket.set_recv_buffer_size(4096).expect("a receive buffer");
    socket.connect(&addr.into()).expect("connects");
    let mut s: TcpStream = socket.into();
    s.set_read_timeout(Some(PATIENCE)).expect("timeout");
    write!(
        s,
        "GET /v1/events HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n\
         Accept: text/event-stream\r\n\r\n"
    )
    .expect("sends");
    let mut seen = Vec::new();
    let mut buf = [0u8; 1024];
    while !String::from_utf8_lossy(&seen).contains("event: ready") {
        let n = s.read(&mut buf).expect("the stream begins");
        assert!(
            n > 0,
            "closed before it began: {}",
            String::from_utf8_lossy(&seen)
        );
        seen.extend_from_slice(&buf[..n]);
    }
    assert!(
        seen.starts_with(b"HTTP/1.1 200"),
        "{}",
        String::from_utf8_lossy(&seen)
    );
    s
}

/// One gauge of the server's, as its operations listener shows it.
fn gauge(client: &reqwest::blocking::Client, ops: std::net::SocketAddr, name: &str) -> f64 {
    let text = client
        .get(format!("http://{ops}/metrics"))
        .send()
        .expect("metrics")
        .text()
        .expect("text");
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0.0)
}

#[test]
fn stalled_readers_are_dropped_and_give_back_their_connections_and_memory() {
    let mut table = TokenTable::default();
    let mut tokens = Vec::new();
    for t in 0..TENANTS {
        let token = new_token().expect("random");
        table.insert(
            &token,
            Principal {
                tenant: format!("t{t}"),
                actor: "svc".into(),
                roles: vec![],
                scope: Scope::Service,
            },
        );
        tokens.push(token);
    }
    let dir = tempfile::tempdir().expect("a directory");
    let mut options = Options {
        sweep: false,
        ..Options::default()
    };
    options.connections.max_connections = 1400;
    // Each tenant's readers are one caller's: its share is all of them.
    options.connections.max_connections_per_tenant = 1400;
    options.connections.max_connections_per_caller = 1400;
    options.connections.write_timeout = Duration::from_secs(2);
    options.events.max_subscribers = READERS;
    options.events.max_subscribers_per_tenant = READERS / TENANTS;
    options.events.max_subscribers_per_caller = READERS / TENANTS;
    options.long_polls.all = 16;
    options.ops_listen = Some("127.0.0.1:0".parse().expect("an address"));
    let server = Server::start(Config {
        db: dir.path().join("db").to_string_lossy().into_owned(),
        listen: "127.0.0.1:0".parse().expect("an address"),
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
    })
    .expect("a server");
    let addr = server.addr();
    let base = format!("http://{addr}");
    // One change of each tenant first, so that every tenant's engine, feed
    // and pages are in memory before the baseline.
    let client = reqwest::blocking::Client::builder()
        .timeout(PATIENCE)
        .build()
        .expect("a client");
    let open = |client: &reqwest::blocking::Client, t: usize, i: usize| {
        let id = format!("{i:06}-{}", "x".repeat(100));
        let r = client
            .post(format!("{base}/v1/tasks"))
            .bearer_auth(&tokens[t])
            .json(&json!({"id": id, "run": "r", "kind": "k", "candidate_roles": ["finance"]}))
            .send()
            .expect("opens");
        assert!(r.status().is_success(), "{:?}", r.text());
    };
    for t in 0..TENANTS {
        open(&client, t, 999_999);
    }
    let readers: Vec<TcpStream> = (0..READERS)
        .map(|i| stalled(addr, &tokens[i % TENANTS]))
        .collect();
    let before = rss();
    std::thread::scope(|scope| {
        for w in 0..8 {
            let open = &open;
            scope.spawn(move || {
                let client = reqwest::blocking::Client::builder()
                    .timeout(PATIENCE)
                    .build()
                    .expect("a client");
                for i in (w..CHANGES).step_by(8) {
                    open(&client, i % TENANTS, i);
                }
            });
        }
    });
    let during = rss();
    // The server lets go of every stalled reader's connection: only the
    // scrape's own stays open (the gauges are this process's, and this
    // binary runs this test alone).
    let ops = server.ops_addr().expect("an operations listener");
    let until = Instant::now() + PATIENCE;
    let open = || gauge(&client, ops, "leasehold_connections_open");
    while open() > 1.0 && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(50));
    }
    let after = rss();
    eprintln!(
        "RSS with {READERS} stalled readers: {} MiB; after {CHANGES} changes: {} MiB; \
         once they were closed: {} MiB",
        before >> 20,
        during >> 20,
        after >> 20
    );
    assert_eq!(open(), 1.0, "connections the server never closed");
    assert_eq!(gauge(&client, ops, "leasehold_event_subscribers"), 0.0);
    assert!(
        gauge(&client, ops, "leasehold_write_timeouts_total") >= READERS as f64,
        "every stalled reader's connection was closed at its write timeout"
    );
    let grown = during.max(after).saturating_sub(before);
    assert!(
        grown < BOUND,
        "the server grew by {} MiB with stalled readers (bound {} MiB)",
        grown >> 20,
        BOUND >> 20
    );
    drop(readers);
    drop(server);
}
