//! Backups cannot be held hostage, over real sockets on each backend: a
//! tenant's backup that its reader takes slowly (a trickle, or nothing)
//! never makes the admin's or another tenant's backup answer busy; a reader
//! behind the minimum rate is cut off, its stream ending without its end
//! line and its place freed for the tenant's next backup; and a backup
//! whose credential a reload revokes ends the same way. The bounds are
//! small in these servers' options so the cut comes soon; every wait is for
//! a condition, with a generous bound.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use leasehold_host::Engine;
use leasehold_serve::{
    BackupLimits, Config, ConnectionLimits, Credentials, Options, Principal, Scope, Server,
    TokenTable, new_token,
};
use serde_json::{Value, json};

use crate::harness::{Store, new_task, stores};

/// Bounds a hang only: nothing here waits this long when all is well.
const DEADLINE: Duration = Duration::from_secs(180);

/// Who may back up: the admin tenant's operator, two of tenant A's, and
/// one of tenant B's.
const OPERATORS: &[(&str, &str)] = &[
    ("olga", "acme"),
    ("gina", "globex"),
    ("gia", "globex"),
    ("ian", "initech"),
];

/// A server over `store` whose token table a test can change and reload.
struct Served {
    server: Option<Server>,
    base: String,
    tokens: std::collections::BTreeMap<&'static str, String>,
    table: Arc<Mutex<TokenTable>>,
    client: reqwest::blocking::Client,
}

impl Drop for Served {
    fn drop(&mut self) {
        if let Some(s) = self.server.take() {
            let _ = s.shutdown();
        }
    }
}

impl Served {
    fn start(store: &Store, backups: BackupLimits) -> Served {
        let mut table = TokenTable::default();
        let mut tokens = std::collections::BTreeMap::new();
        for (name, tenant) in OPERATORS {
            let token = new_token().expect("random");
            table.insert(
                &token,
                Principal {
                    tenant: (*tenant).to_owned(),
                    actor: (*name).to_owned(),
                    roles: vec!["finance".to_owned()],
                    scope: Scope::Operator,
                },
            );
            tokens.insert(*name, token);
        }
        let table = Arc::new(Mutex::new(table));
        let source = table.clone();
        let options = Options {
            sweep: false,
            admin_tenant: Some(leasehold_serve::backup::TenantName::new("acme").expect("name")),
            connections: ConnectionLimits {
                // Small, so a reader that takes little holds little, and a
                // write timeout no test reaches: only the backup's own
                // bounds may end its stream.
                send_buffer: Some(64 * 1024),
                write_timeout: Duration::from_secs(3600),
                ..ConnectionLimits::default()
            },
            backups,
            ..Options::default()
        };
        let reload: leasehold_serve::Reload = Arc::new(move || {
            Ok(Credentials {
                tokens: source.lock().expect("table").clone(),
                jwt: None,
            })
        });
        let server = Server::start(Config {
            db: store.db(),
            listen: "127.0.0.1:0".parse().expect("addr"),
            credentials: Credentials {
                tokens: table.lock().expect("table").clone(),
                jwt: None,
            },
            reload: Some(reload),
            options,
            engine: Engine::builder(),
            tls: None,
            cursor_key: None,
            handle_signals: false,
        })
        .expect("the server starts");
        Served {
            base: format!("http://{}", server.addr()),
            server: Some(server),
            tokens,
            table,
            client: reqwest::blocking::Client::builder()
                .timeout(Duration::from_secs(120))
                .build()
                .expect("client"),
        }
    }

    fn token(&self, who: &str) -> &str {
        &self.tokens[who]
    }

    /// Opens `n` tasks of `who`'s tenant, each with `filler` bytes of
    /// justification.
    fn fill(&self, who: &str, n: usize, filler: usize) {
        let pad = "x".repeat(filler);
        for i in 0..n {
            let r = self
                .client
                .post(format!("{}/v1/tasks", self.base))
                .bearer_auth(self.token(who))
                .json(&{
                    let mut task = new_task(&format!("t{i}"));
                    task["justification"] = json!({ "pad": pad });
                    // The server keeps the time.
                    task.as_object_mut().map(|t| t.remove("created_at"));
                    task
                })
                .send()
                .expect("open");
            assert_eq!(r.status(), 200, "{who}: {}", r.text().unwrap_or_default());
        }
    }

    /// A whole backup by `who`: its status and, for a 200, its lines.
    fn backup(&self, who: &str) -> (u16, Vec<Value>) {
        let r = self
            .client
            .get(format!("{}/backup", self.base))
            .bearer_auth(self.token(who))
            .send()
            .expect("an answer");
        let status = r.status().as_u16();
        let text = r.text().expect("the whole body");
        let lines = if status == 200 {
            text.lines()
                .map(|l| serde_json::from_str(l).expect("a JSON line"))
                .collect()
        } else {
            vec![serde_json::from_str(&text).expect("a problem")]
        };
        (status, lines)
    }

    /// A backup by `who` that answers 200 and holds its end line, naming
    /// the tenants it holds.
    #[track_caller]
    fn whole_backup(&self, who: &str) -> Vec<String> {
        let (status, lines) = self.backup(who);
        assert_eq!(status, 200, "{who}: {lines:?}");
        let last = lines.last().expect("lines");
        assert!(last["backup_end"].is_object(), "{who}: ends {last}");
        lines[0]["tenants"]
            .as_array()
            .expect("tenants")
            .iter()
            .map(|t| t.as_str().expect("a name").to_owned())
            .collect()
    }

    /// Waits until a backup by `who` answers 200 whole, retrying while it
    /// is answered `busy`.
    fn backup_once_free(&self, who: &str) -> Vec<String> {
        let until = Instant::now() + DEADLINE;
        loop {
            let (status, lines) = self.backup(who);
            if status == 200 {
                let last = lines.last().expect("lines");
                assert!(last["backup_end"].is_object(), "{who}: ends {last}");
                return lines[0]["tenants"]
                    .as_array()
                    .expect("tenants")
                    .iter()
                    .map(|t| t.as_str().expect("a name").to_owned())
                    .collect();
            }
            assert_eq!(status, 503, "{lines:?}");
            assert!(
                lines[0]["type"]
                    .as_str()
                    .is_some_and(|t| t.ends_with("busy")),
                "{lines:?}"
            );
            assert!(
                Instant::now() < until,
                "{who}'s backup was still answered busy after {DEADLINE:?}"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// Sends `GET /backup` for `who` on a raw connection and reads the
    /// answer's head (asserting 200) and nothing more.
    fn raw_backup(&self, who: &str) -> (TcpStream, Vec<u8>) {
        let addr = self.base.trim_start_matches("http://");
        let mut conn = TcpStream::connect(addr).expect("connect");
        conn.set_read_timeout(Some(DEADLINE)).expect("timeout");
        write!(
            conn,
            "GET /backup HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {}\r\n\r\n",
            self.token(who)
        )
        .expect("send");
        let mut got = Vec::new();
        let mut byte = [0u8; 1];
        while !got.ends_with(b"\r\n\r\n") {
            conn.read_exact(&mut byte).expect("the answer's head");
            got.push(byte[0]);
        }
        let head = String::from_utf8_lossy(&got).into_owned();
        assert!(head.starts_with("HTTP/1.1 200"), "{head}");
        assert!(head.contains("transfer-encoding: chunked"), "{head}");
        (conn, Vec::new())
    }
}

/// Reads everything left on `conn` as fast as it comes, until the server
/// closes it (or resets it); answers what was read.
fn drain(conn: &mut TcpStream, mut got: Vec<u8>) -> Vec<u8> {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match conn.read(&mut buf) {
            Ok(0) => return got,
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                panic!("the stream did not end within {DEADLINE:?}")
            }
            Err(e) if e.kind() == std::io::ErrorKind::TimedOut => {
                panic!("the stream did not end within {DEADLINE:?}")
            }
            // A reset also ends it.
            Err(_) => return got,
        }
    }
}

/// A chunked body's bytes, and whether its last chunk came.
fn dechunk(mut raw: &[u8]) -> (Vec<u8>, bool) {
    let mut body = Vec::new();
    loop {
        let Some(eol) = raw.windows(2).position(|w| w == b"\r\n") else {
            return (body, false);
        };
        let size = std::str::from_utf8(&raw[..eol])
            .ok()
            .and_then(|s| usize::from_str_radix(s.trim(), 16).ok())
            .expect("a chunk size");
        raw = &raw[eol + 2..];
        if size == 0 {
            return (body, true);
        }
        if raw.len() < size + 2 {
            body.extend_from_slice(&raw[..raw.len().min(size)]);
            return (body, false);
        }
        body.extend_from_slice(&raw[..size]);
        raw = &raw[size + 2..];
    }
}

/// Asserts a raw backup stream was cut short: no last chunk, no end line.
#[track_caller]
fn cut_short(raw: &[u8]) {
    let (body, complete) = dechunk(raw);
    assert!(!complete, "the stream ended as a whole answer");
    let text = String::from_utf8_lossy(&body);
    assert!(
        text.starts_with("{\"format\":\"leasehold-backup\""),
        "{}",
        &text[..text.len().min(200)]
    );
    assert!(!text.contains("backup_end"), "the backup was written whole");
}

/// Tenant A's data: far more than the socket buffers and the server's
/// queue hold, so a reader that takes little cannot take it all.
fn fill_tenants(s: &Served) {
    s.fill("gina", 16, 200 * 1024);
    s.fill("ian", 1, 10);
    s.fill("olga", 1, 10);
}

/// With no rate asked, tenant A's stalled backup runs on: the admin's and
/// tenant B's backups are not busy, A's second is; a reload that revokes
/// the stalled backup's credential ends its stream short and frees A's
/// place for its other operator.
#[test]
fn a_stalled_tenant_backup_blocks_nobody_else_and_ends_when_its_credential_is_revoked() {
    for store in stores() {
        eprintln!("-- on {}", store.name());
        let s = Served::start(
            &store,
            BackupLimits {
                min_rate: 0,
                ..BackupLimits::default()
            },
        );
        fill_tenants(&s);
        let (mut stalled, got) = s.raw_backup("gina");

        let all = s.whole_backup("olga");
        for t in ["acme", "globex", "initech"] {
            assert!(all.iter().any(|n| n == t), "{all:?}");
        }
        assert_eq!(s.whole_backup("ian"), ["initech"]);
        let (status, problem) = s.backup("gia");
        assert_eq!(status, 503, "{problem:?}");
        assert!(
            problem[0]["type"]
                .as_str()
                .is_some_and(|t| t.ends_with("busy")),
            "{problem:?}"
        );

        // Revoke gina's token: its stream ends short, and A's place is free.
        {
            let mut table = s.table.lock().expect("table");
            let mut kept = TokenTable::default();
            for (name, tenant) in OPERATORS.iter().filter(|(n, _)| *n != "gina") {
                kept.insert(
                    s.token(name),
                    Principal {
                        tenant: (*tenant).to_owned(),
                        actor: (*name).to_owned(),
                        roles: vec!["finance".to_owned()],
                        scope: Scope::Operator,
                    },
                );
            }
            *table = kept;
        }
        s.server
            .as_ref()
            .expect("running")
            .reload_credentials()
            .expect("reloads");
        let raw = drain(&mut stalled, got);
        cut_short(&raw);
        assert_eq!(s.backup_once_free("gia"), ["globex"]);
    }
}

/// With a small minimum rate, tenant A's reader that takes a trickle is cut
/// off: its stream ends short, and A's next backup runs. Meanwhile the
/// admin's and tenant B's backups are never busy.
#[test]
fn a_trickling_backup_reader_is_cut_off_and_its_place_freed() {
    for store in stores() {
        eprintln!("-- on {}", store.name());
        let s = Served::start(
            &store,
            BackupLimits {
                grace: Duration::from_secs(1),
                min_rate: 128 * 1024,
                ..BackupLimits::default()
            },
        );
        fill_tenants(&s);
        let (mut conn, mut got) = s.raw_backup("gina");
        let stop = Arc::new(AtomicBool::new(false));
        let trickling = {
            let stop = stop.clone();
            std::thread::spawn(move || {
                // A few dozen bytes a tenth of a second: far below the
                // server's minimum rate, and never a stall.
                let mut buf = [0u8; 64];
                while !stop.load(Ordering::Relaxed) {
                    match conn.read(&mut buf) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => got.extend_from_slice(&buf[..n]),
                    }
                    std::thread::sleep(Duration::from_millis(100));
                }
                (conn, got)
            })
        };
        let all = s.whole_backup("olga");
        assert!(all.iter().any(|n| n == "globex"), "{all:?}");
        assert_eq!(s.whole_backup("ian"), ["initech"]);
        // A's next backup waits (busy) until the trickle is cut off.
        assert_eq!(s.backup_once_free("gia"), ["globex"]);
        stop.store(true, Ordering::Relaxed);
        let (mut conn, got) = trickling.join().expect("the reader");
        let raw = drain(&mut conn, got);
        cut_short(&raw);
    }
}
