//! Online backup: `GET /backup` streams the keys of every tenant (or of the
//! tenants named with `?tenant=`) while calls go on, in the backup format
//! the host library's `tenant_keys` owns and writes (see
//! `docs/operations.md`, "Backup and restore"): this module only admits the
//! request, hands the library a snapshot of each tenant and the connection
//! to write to, and maps the library's errors to problems. Each tenant is
//! read in one snapshot of its own, begun after the backup's start was
//! recorded, so every write answered before that start is in it. It must
//! never write, never read meaning into a key, and never hold a snapshot
//! past the bounds `backup_bounds` enforces: a reader behind the minimum
//! rate, a backup past its lifetime, a revoked credential or a stopping
//! server ends the stream, and with it the snapshot and the backup's place.

use std::sync::Arc;
use std::time::Instant;

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use leasehold_host::Engine;
use leasehold_host::storage::{BoxError, check_tenant};
use leasehold_host::tenant_keys::{self, BackupTotals, KeysError};
use tokio::sync::mpsc;

use crate::backup_bounds::{BackupLimits, BackupPermit, End, Pace, watch_backup};
use crate::problem::ApiError;
use crate::state::AppState;

/// Bytes gathered before a piece of the stream is handed to the connection.
const CHUNK: usize = 64 * 1024;
/// Pieces waiting for the connection: with [`CHUNK`], the memory one
/// backup holds beyond one scan.
const QUEUED: usize = 4;

pub use crate::principal::TenantName;

/// The tenants to back up: those named, else every tenant the storage
/// lists.
fn tenants_of(engine: &Engine, named: Vec<String>) -> Result<Vec<String>, ApiError> {
    if !named.is_empty() {
        return Ok(named);
    }
    engine
        .stored_tenants()
        .map_err(ApiError::from)?
        .ok_or_else(|| {
            ApiError::invalid(
                "tenant",
                "this storage cannot list its tenants; name them with ?tenant=",
            )
        })
}

/// The problem a backup that failed before its first byte answers.
fn problem(e: KeysError) -> ApiError {
    match e {
        KeysError::Storage(source) => ApiError::from(leasehold_host::Error::from(source)),
        KeysError::Snapshot { source, .. } => match source.downcast::<leasehold_host::Error>() {
            Ok(e) => ApiError::from(*e),
            Err(other) => ApiError::Unavailable {
                kind: "storage-unavailable",
                detail: format!("cannot begin a snapshot: {other}"),
            },
        },
        // A tenant named twice, or a name that is none.
        KeysError::Refused(why) => ApiError::invalid("tenant", why),
        // The store holds what no call could have written.
        e @ (KeysError::TooLarge { .. } | KeysError::OverLimit(_)) => ApiError::Corrupt(chain(&e)),
        other => ApiError::Internal(Box::new(other)),
    }
}

/// Hands the stream to the connection a piece at a time; blocks while
/// [`QUEUED`] pieces wait, and fails once the connection is gone or the
/// backup was ended.
struct ToConnection {
    tx: mpsc::Sender<Bytes>,
    buf: Vec<u8>,
    pace: Arc<Pace>,
    runtime: tokio::runtime::Handle,
}

impl ToConnection {
    fn send(&mut self) -> std::io::Result<()> {
        let ended = |e: End| std::io::Error::other(e.to_string());
        if let Some(e) = self.pace.ended() {
            return Err(ended(e));
        }
        let piece = Bytes::from(std::mem::replace(&mut self.buf, Vec::with_capacity(CHUNK)));
        let (tx, pace) = (&self.tx, &self.pace);
        // The writer runs on the blocking pool, where waiting on the
        // runtime is allowed; an end wakes a writer whose reader stopped.
        self.runtime.block_on(async {
            tokio::select! {
                sent = tx.send(piece) => sent.map_err(|_| {
                    std::io::Error::new(
                        std::io::ErrorKind::BrokenPipe,
                        "the client went away or stopped reading",
                    )
                }),
                e = pace.until_ended() => Err(ended(e)),
            }
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

/// Writes the backup of `tenants` to `sink` in the library's format, then
/// gives back its place; answers how it went.
fn write(
    engine: &Engine,
    tenants: &[String],
    began_at_ms: i64,
    limits: BackupLimits,
    mut sink: ToConnection,
    permit: BackupPermit,
) -> Result<BackupTotals, KeysError> {
    let started = Instant::now();
    let pace = sink.pace.clone();
    let snapshot = |t: &str| {
        engine
            .snapshot(t, limits.max_lifetime)
            .map_err(|e| Box::new(e) as BoxError)
    };
    // The end is told by the engine's clock, which the server's every
    // other time comes from.
    let clock = engine.clock();
    let finished_at = || clock.now();
    let written = tenant_keys::write_backup(
        tenants,
        began_at_ms,
        &snapshot,
        &mut sink,
        None,
        &finished_at,
    );
    // Every snapshot is gone with `write_backup`'s return: the next backup
    // may begin before this one is logged.
    drop(permit);
    match &written {
        Ok(t) => {
            pace.end(End::Finished);
            tracing::info!(
                tenants = t.tenants,
                keys = t.keys,
                bytes = t.bytes,
                ms = started.elapsed().as_millis() as u64,
                "backup streamed"
            );
        }
        Err(e) => {
            let why = pace.end(End::Failed);
            tracing::warn!(error = %chain(e), ended = %why, "backup cut short");
        }
    }
    // The stream ends once the last piece is taken.
    drop(sink);
    written
}

/// `GET /backup`: for an operator's credential alone, as `/metrics` on
/// this listener. An operator backs up its own tenant, one backup at a
/// time; the admin tenant's operators back up any tenants, one admin's
/// backup at a time, in a place of their own. Another meanwhile is
/// answered 503 `busy` (`overloaded` at the server's bound). The answer is
/// 200 once the first piece is written; a failure or an end (see
/// `backup_bounds`) after that cuts the stream short, which a reader sees
/// as a backup without its end line.
pub async fn backup(State(state): State<AppState>, headers: HeaderMap, uri: Uri) -> Response {
    match begin(state, headers, uri).await {
        Ok(r) => r,
        Err(e) => e.into_response(),
    }
}

async fn begin(state: AppState, headers: HeaderMap, uri: Uri) -> Result<Response, ApiError> {
    let auth = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let principal = match state.credentials.current().authenticate(auth.as_deref()) {
        Ok(p) if p.scope == crate::auth::Scope::Operator => p,
        Ok(_) => {
            return Err(ApiError::forbidden(
                "only an operator credential may take a backup",
            ));
        }
        Err(_) => {
            return Err(ApiError::Unauthorized(
                "/backup takes an operator's bearer credential".to_owned(),
            ));
        }
    };
    let mut named = Vec::new();
    for (k, v) in form_urlencoded::parse(uri.query().unwrap_or_default().as_bytes()) {
        if k != "tenant" {
            return Err(ApiError::invalid(
                &k,
                format!("/backup takes only tenant=, not {k}="),
            ));
        }
        if let Err(e) = check_tenant(&v) {
            return Err(ApiError::invalid("tenant", format!("tenant {v:?}: {e}")));
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
            return Err(ApiError::forbidden(format!(
                "an operator of tenant {} may back up only that tenant, not {other}; \
                 other tenants take an operator of the tenant --admin-tenant names",
                principal.tenant
            )));
        }
        named = vec![principal.tenant.clone()];
    }
    let permit = state.backups.take(admin, &principal.tenant)?;
    // Recorded before the tenants are listed and read: every write
    // answered before this instant is in every snapshot taken after it.
    let began_at_ms = state.now_ms();
    let engine = state.engine.clone();
    let tenants = tokio::task::spawn_blocking(move || tenants_of(&engine, named))
        .await
        .map_err(|e| ApiError::Internal(Box::new(e)))??;
    let limits = state.options.backups;
    let pace = Pace::new();
    let (tx, mut rx) = mpsc::channel(QUEUED);
    let sink = ToConnection {
        tx,
        buf: Vec::with_capacity(CHUNK),
        pace: pace.clone(),
        runtime: tokio::runtime::Handle::current(),
    };
    tokio::spawn(watch_backup(
        pace.clone(),
        limits,
        state.credentials.hold(auth.clone(), principal.clone()),
        state.stopping(),
    ));
    let count = tenants.len();
    tracing::info!(tenants = count, began_at_ms, "backup began");
    let engine = state.engine.clone();
    let writer = tokio::task::spawn_blocking(move || {
        write(&engine, &tenants, began_at_ms, limits, sink, permit)
    });
    // A backup that fails before its first piece is answered a problem.
    let Some(first) = rx.recv().await else {
        return match writer.await {
            Ok(Err(e)) => Err(problem(e)),
            Ok(Ok(_)) => Err(ApiError::Internal("the backup wrote nothing".into())),
            Err(e) => Err(ApiError::Internal(Box::new(e))),
        };
    };
    let mut credential = state.credentials.hold(auth, principal);
    let mut first = Some(first);
    let stream = futures_util::stream::poll_fn(move |cx| {
        // Looked at before each piece, so a piece asked for after a
        // revoking reload has returned is never given.
        if credential.revoked_now() {
            pace.end(End::Revoked);
        }
        if let Some(e) = pace.ended().filter(|e| *e != End::Finished) {
            return std::task::Poll::Ready(Some(Err(std::io::Error::other(e.to_string()))));
        }
        let next = match first.take() {
            Some(piece) => Some(piece),
            None => std::task::ready!(rx.poll_recv(cx)),
        };
        std::task::Poll::Ready(match next {
            Some(piece) => {
                pace.took(piece.len());
                Some(Ok(piece))
            }
            // The writer has gone: finished, or ended short.
            None => match pace.ended() {
                Some(End::Finished) => None,
                e => Some(Err(std::io::Error::other(
                    e.unwrap_or(End::Failed).to_string(),
                ))),
            },
        })
    });
    Ok((
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
        .into_response())
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
