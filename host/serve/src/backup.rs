//! Online backup: `GET /backup` streams the keys of every tenant (or of the
//! tenants named with `?tenant=`) while calls go on, and [`write_backup`]
//! writes the same stream anywhere (the CLI's offline `backup --db`). It
//! owns the backup format (see `docs/operations.md`, "Backup and restore"):
//! a first line saying when the backup began, then each tenant as a tenant
//! export (its own first line, its entries, its count and digest), then an
//! end line with the totals. Each tenant is read in one snapshot of its own,
//! begun after the backup's start was recorded, so every write answered
//! before that start is in it. It must never write, never read meaning into
//! a key, and never hold a snapshot past the stream's end: a client that
//! stops reading is cut off by the connection's write timeout, which drops
//! the stream and with it the snapshot.

use std::time::{Duration, Instant};

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use leasehold_host::storage::{Entry, Txn, check_tenant};
use leasehold_host::{Clock, Engine, Limits, SystemClock};
use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

use crate::problem::ApiError;
use crate::state::AppState;

/// The backup's `format` and `version`: a reader refuses any other.
pub const BACKUP_FORMAT: &str = "leasehold-backup";
/// See [`BACKUP_FORMAT`].
pub const BACKUP_VERSION: u32 = 1;
/// Each tenant's section is a tenant export of this format and version.
pub const TENANT_KEYS_FORMAT: &str = "leasehold-tenant-keys";
/// See [`TENANT_KEYS_FORMAT`].
pub const TENANT_KEYS_VERSION: u32 = 1;

/// How long one tenant's snapshot may last: a snapshot reads a whole
/// tenant, however large, at the pace its reader takes it.
const SNAPSHOT_DEADLINE: Duration = Duration::from_secs(24 * 3600);
/// Bytes gathered before a piece of the stream is handed to the connection.
const CHUNK: usize = 64 * 1024;
/// Pieces waiting for the connection: with [`CHUNK`], the memory one
/// backup holds beyond one scan.
const QUEUED: usize = 4;

pub use crate::principal::TenantName;

/// Why a backup did not finish.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BackupError {
    /// The storage could not list or read a tenant.
    #[error("cannot {what} tenant {tenant}")]
    Storage {
        /// What was being done.
        what: &'static str,
        /// The tenant.
        tenant: String,
        /// The engine's error.
        #[source]
        source: Box<leasehold_host::Error>,
    },
    /// The storage cannot list its tenants and none were named.
    #[error("this storage cannot list its tenants; name them with ?tenant=")]
    Unlisted,
    /// One entry is larger than a scan may give.
    #[error("tenant {0} holds an entry larger than one scan")]
    TooLarge(String),
    /// The output failed (for a stream: the client went away, or stopped
    /// reading past the write timeout, or the server is stopping).
    #[error("cannot write the backup")]
    Io(#[source] std::io::Error),
}

/// The backup's first line.
#[derive(Debug, Serialize, Deserialize)]
pub struct BackupHeader {
    /// [`BACKUP_FORMAT`].
    pub format: String,
    /// [`BACKUP_VERSION`].
    pub version: u32,
    /// When the backup began, in milliseconds since 1970 by the server's
    /// clock: every write answered before then is in it.
    pub began_at_ms: i64,
    /// How the tenants were read: `per-tenant`, one snapshot each.
    pub snapshot: String,
    /// The tenants that follow, in order.
    pub tenants: Vec<String>,
}

/// The backup's last line.
#[derive(Debug, Serialize, Deserialize)]
pub struct BackupEnd {
    /// The totals.
    pub backup_end: BackupTotals,
}

/// What a whole backup holds.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct BackupTotals {
    /// Tenants written.
    pub tenants: u64,
    /// Keys over all of them.
    pub keys: u64,
    /// Bytes of keys and values over all of them.
    pub bytes: u64,
    /// When the last tenant's snapshot was read through.
    pub finished_at_ms: i64,
}

/// A running digest, as the tenant export's (see the CLI's `keyspace`):
/// SHA-256 over each entry's key length (4 bytes, big-endian), key, value
/// length and value, in key order.
#[derive(Default)]
struct Digest {
    sha: Sha256,
    keys: u64,
    bytes: u64,
}

impl Digest {
    fn add(&mut self, (key, value): &Entry) {
        for part in [key, value] {
            // Keys and values are within the engine's limits, far below 4 GiB.
            self.sha.update((part.len() as u32).to_be_bytes());
            self.sha.update(part);
        }
        self.keys += 1;
        self.bytes += (key.len() + value.len()) as u64;
    }

    fn hex(&self) -> String {
        hex(&self.sha.clone().finalize())
    }
}

fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(s, "{b:02x}");
    }
    s
}

/// Begins one tenant's read snapshot.
pub type Snapshot<'a> = dyn Fn(&str) -> Result<Box<dyn Txn>, leasehold_host::Error> + 'a;

/// Writes a backup of `tenants` to `out`, each read through `snapshot`,
/// the first line recording `began_at_ms`, the last when it finished by
/// the system's clock; answers the totals.
pub fn write_backup(
    tenants: &[String],
    began_at_ms: i64,
    snapshot: &Snapshot<'_>,
    out: &mut dyn std::io::Write,
) -> Result<BackupTotals, BackupError> {
    write_backup_by(tenants, began_at_ms, &SystemClock, snapshot, out)
}

/// [`write_backup`], its end told by `clock` (a server's, which its
/// engine records changes by).
pub fn write_backup_by(
    tenants: &[String],
    began_at_ms: i64,
    clock: &dyn Clock,
    snapshot: &Snapshot<'_>,
    out: &mut dyn std::io::Write,
) -> Result<BackupTotals, BackupError> {
    let io = BackupError::Io;
    let line = |out: &mut dyn std::io::Write, v: &dyn erased::Line| -> Result<(), BackupError> {
        out.write_all(v.json().as_bytes()).map_err(io)?;
        out.write_all(b"\n").map_err(io)
    };
    line(
        out,
        &BackupHeader {
            format: BACKUP_FORMAT.into(),
            version: BACKUP_VERSION,
            began_at_ms,
            snapshot: "per-tenant".into(),
            tenants: tenants.to_vec(),
        },
    )?;
    let limits = Limits::default();
    let (limit, max_bytes) = (
        limits.scan_entries,
        limits.call_write_bytes.min(limits.scan_bytes),
    );
    let mut totals = BackupTotals::default();
    for tenant in tenants {
        let storage = |source| BackupError::Storage {
            what: "read",
            tenant: tenant.clone(),
            source: Box::new(source),
        };
        let mut txn = snapshot(tenant).map_err(storage)?;
        line(
            out,
            &serde_json::json!({
                "format": TENANT_KEYS_FORMAT,
                "version": TENANT_KEYS_VERSION,
                "tenant": tenant,
            }),
        )?;
        let mut digest = Digest::default();
        let mut start = Vec::new();
        loop {
            let (entries, more) = txn
                .scan(&start, None, limit, false, max_bytes)
                .map_err(|e| storage(e.into()))?;
            let Some((last, _)) = entries.last() else {
                if more {
                    return Err(BackupError::TooLarge(tenant.clone()));
                }
                break;
            };
            // The key right after the last one, bytewise.
            start = last.clone();
            start.push(0);
            for entry in &entries {
                digest.add(entry);
                // Two hex strings in a fixed frame: no escaping is needed.
                out.write_all(b"{\"key\":\"").map_err(io)?;
                out.write_all(hex(&entry.0).as_bytes()).map_err(io)?;
                out.write_all(b"\",\"value\":\"").map_err(io)?;
                out.write_all(hex(&entry.1).as_bytes()).map_err(io)?;
                out.write_all(b"\"}\n").map_err(io)?;
            }
        }
        drop(txn);
        line(
            out,
            &serde_json::json!({"end": {
                "keys": digest.keys,
                "bytes": digest.bytes,
                "sha256": digest.hex(),
            }}),
        )?;
        totals.tenants += 1;
        totals.keys += digest.keys;
        totals.bytes += digest.bytes;
    }
    totals.finished_at_ms = clock.now();
    line(
        out,
        &BackupEnd {
            backup_end: totals.clone(),
        },
    )?;
    out.flush().map_err(io)?;
    Ok(totals)
}

/// Serializing any line without a generic closure.
mod erased {
    pub trait Line {
        fn json(&self) -> String;
    }
    impl<T: serde::Serialize> Line for T {
        fn json(&self) -> String {
            serde_json::to_string(self).unwrap_or_default()
        }
    }
}

/// The tenants to back up: those named, else every tenant the storage
/// lists.
pub fn tenants_of(engine: &Engine, named: Vec<String>) -> Result<Vec<String>, BackupError> {
    if !named.is_empty() {
        return Ok(named);
    }
    engine
        .stored_tenants()
        .map_err(|source| BackupError::Storage {
            what: "list the tenants of",
            tenant: "(all)".into(),
            source: Box::new(source),
        })?
        .ok_or(BackupError::Unlisted)
}

/// Hands the stream to the connection a piece at a time; blocks while
/// [`QUEUED`] pieces wait, and fails once the connection is gone or the
/// server stops.
struct ToConnection {
    tx: tokio::sync::mpsc::Sender<Result<Bytes, std::io::Error>>,
    buf: Vec<u8>,
    stopping: tokio::sync::watch::Receiver<bool>,
}

impl ToConnection {
    fn send(&mut self) -> std::io::Result<()> {
        if *self.stopping.borrow() {
            return Err(std::io::Error::other("the server is shutting down"));
        }
        let piece = Bytes::from(std::mem::replace(&mut self.buf, Vec::with_capacity(CHUNK)));
        self.tx.blocking_send(Ok(piece)).map_err(|_| {
            std::io::Error::new(
                std::io::ErrorKind::BrokenPipe,
                "the client went away or stopped reading",
            )
        })
    }
}

impl std::io::Write for ToConnection {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        self.buf.extend_from_slice(data);
        if self.buf.len() >= CHUNK {
            self.send()?;
        }
        Ok(data.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        if !self.buf.is_empty() {
            self.send()?;
        }
        Ok(())
    }
}

/// `GET /backup`: for an operator's credential alone, as `/metrics` on
/// this listener. One backup runs at a time; another meanwhile is answered
/// 503 `busy`. The answer is 200 once the tenants are known; a failure
/// after that cuts the stream short, which a reader sees as a backup
/// without its end line.
pub async fn backup(State(state): State<AppState>, headers: HeaderMap, uri: Uri) -> Response {
    let auth = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    let principal = match state.credentials.current().authenticate(auth) {
        Ok(p) if p.scope == crate::auth::Scope::Operator => p,
        Ok(_) => {
            return ApiError::forbidden("only an operator credential may take a backup")
                .into_response();
        }
        Err(_) => {
            return ApiError::Unauthorized(
                "/backup takes an operator's bearer credential".to_owned(),
            )
            .into_response();
        }
    };
    let mut named = Vec::new();
    for (k, v) in form_urlencoded::parse(uri.query().unwrap_or_default().as_bytes()) {
        if k != "tenant" {
            return ApiError::invalid(&k, format!("/backup takes only tenant=, not {k}="))
                .into_response();
        }
        if let Err(e) = check_tenant(&v) {
            return ApiError::invalid("tenant", format!("tenant {v:?}: {e}")).into_response();
        }
        named.push(v.into_owned());
    }
    // A credential names one tenant: its operator backs up that tenant
    // alone. Every tenant (or another) takes an operator of the tenant the
    // server was told to trust with them all.
    let admin = state
        .options
        .admin_tenant
        .is_some_and(|a| a.as_str() == principal.tenant);
    if !admin {
        if let Some(other) = named.iter().find(|t| **t != principal.tenant) {
            return ApiError::forbidden(format!(
                "an operator of tenant {} may back up only that tenant, not {other}; \
                 other tenants take an operator of the tenant --admin-tenant names",
                principal.tenant
            ))
            .into_response();
        }
        named = vec![principal.tenant.clone()];
    }
    let Ok(permit) = state.backups.clone().try_acquire_owned() else {
        return ApiError::Unavailable {
            kind: "busy",
            detail: "a backup is running already; one runs at a time".to_owned(),
        }
        .into_response();
    };
    // Recorded before the tenants are listed and read: every write
    // answered before this instant is in every snapshot taken after it.
    let began_at_ms = state.now_ms();
    let engine = state.engine.clone();
    let listed = tokio::task::spawn_blocking(move || tenants_of(&engine, named)).await;
    let tenants = match listed {
        Ok(Ok(t)) => t,
        Ok(Err(BackupError::Unlisted)) => {
            return ApiError::invalid("tenant", BackupError::Unlisted.to_string()).into_response();
        }
        Ok(Err(e)) => {
            return ApiError::Unavailable {
                kind: "storage-unavailable",
                detail: chain(&e),
            }
            .into_response();
        }
        Err(e) => return ApiError::Internal(Box::new(e)).into_response(),
    };
    let (tx, mut rx) = tokio::sync::mpsc::channel(QUEUED);
    let mut sink = ToConnection {
        tx: tx.clone(),
        buf: Vec::with_capacity(CHUNK),
        stopping: state.stopping(),
    };
    let engine = state.engine.clone();
    let clock = engine.clock();
    let count = tenants.len();
    tracing::info!(tenants = count, began_at_ms, "backup began");
    tokio::task::spawn_blocking(move || {
        let started = Instant::now();
        let snapshot = |t: &str| engine.snapshot(t, SNAPSHOT_DEADLINE);
        let written = write_backup_by(&tenants, began_at_ms, &*clock, &snapshot, &mut sink);
        // The snapshot is gone with `write_backup`'s return: the next
        // backup may begin before this one is logged.
        drop(permit);
        match written {
            Ok(t) => tracing::info!(
                tenants = t.tenants,
                keys = t.keys,
                bytes = t.bytes,
                ms = started.elapsed().as_millis() as u64,
                "backup streamed"
            ),
            Err(e) => {
                tracing::warn!(error = %chain(&e), "backup cut short");
                let _ = tx.blocking_send(Err(std::io::Error::other(e.to_string())));
            }
        }
    });
    let stream = futures_util::stream::poll_fn(move |cx| rx.poll_recv(cx));
    (
        StatusCode::OK,
        [
            (header::CONTENT_TYPE, "application/x-ndjson".to_owned()),
            (
                header::HeaderName::from_static("x-leasehold-backup-began-at-ms"),
                began_at_ms.to_string(),
            ),
        ],
        Body::from_stream(stream),
    )
        .into_response()
}

/// An error with its sources, for the log and the problem's detail.
fn chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut next = e.source();
    while let Some(cause) = next {
        s.push_str(": ");
        s.push_str(&cause.to_string());
        next = cause.source();
    }
    s
}
