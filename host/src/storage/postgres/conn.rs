//! One connection to PostgreSQL, driven on the calling thread: logging in
//! within the connect timeout, preparing Leasehold's statements, taking a
//! writer slot, and waiting for the server with a bound on every wait. It
//! owns the socket and nothing of a call: it must never begin, commit or
//! retry a transaction, and never hand out a connection it saw fail.

use std::future::{Future, poll_fn};
use std::pin::{Pin, pin};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::task::Poll;
use std::time::{Duration, Instant};

use futures_util::future::try_join_all;
use tokio_postgres::{Client, Config, Statement};

use crate::storage::error::StorageError;
use crate::storage::postgres::error::{PgError, failed};
use crate::storage::postgres::settings::Settings;
use crate::storage::postgres::tls::{MakeRustls, TlsError};

/// The server a configuration names, without its password.
fn target(config: &Config) -> String {
    use tokio_postgres::config::Host;
    let host = match config.get_hosts().first() {
        Some(Host::Tcp(h)) => h.clone(),
        Some(Host::Unix(p)) => p.display().to_string(),
        None => "localhost".to_owned(),
    };
    let port = config.get_ports().first().copied().unwrap_or(5432);
    format!(
        "{host}:{port}, database {:?} as {:?}",
        config.get_dbname().unwrap_or("(default)"),
        config.get_user().unwrap_or("(default)")
    )
}

/// The statements every call uses, prepared once per connection.
pub(crate) struct Statements {
    pub(crate) get: Statement,
    pub(crate) get_many: Statement,
    /// Forward and reverse, with and without an upper bound.
    pub(crate) scan: [Statement; 4],
    /// Several forward ranges with ends in one statement: `$2` their
    /// starts, `$3` their ends, `$4` their limits.
    pub(crate) scan_many: Statement,
    /// Puts rows (`$1` the tenant, `$2` the keys, `$3` the values); a
    /// load's batches use it alone.
    pub(crate) upsert: Statement,
    /// A call's whole batch in one statement: the puts of `upsert` and the
    /// deletes of `$4`, points as `schema::point` spells them.
    pub(crate) write: Statement,
    /// Takes a line's turn (see `txn::Turn`): `$1` the key, `$2` the wait.
    pub(crate) take_turn: Statement,
    /// Gives a line's turn back: `$1` the key.
    pub(crate) give_turn: Statement,
}

const SCAN_SQL: [&str; 4] = [
    "SELECT key, value FROM leasehold_kv WHERE tenant = $1 AND key >= $2 AND key < $3 ORDER BY key LIMIT $4",
    "SELECT key, value FROM leasehold_kv WHERE tenant = $1 AND key >= $2 AND $3::bytea IS NULL ORDER BY key LIMIT $4",
    "SELECT key, value FROM leasehold_kv WHERE tenant = $1 AND key >= $2 AND key < $3 ORDER BY key DESC LIMIT $4",
    "SELECT key, value FROM leasehold_kv WHERE tenant = $1 AND key >= $2 AND $3::bytea IS NULL ORDER BY key DESC LIMIT $4",
];

pub(crate) type Connection =
    Pin<Box<dyn Future<Output = Result<(), tokio_postgres::Error>> + Send>>;

/// One connection, driven on the calling thread: a call's requests and the
/// connection's I/O are polled together, so no thread hop sits between the
/// engine and the socket.
pub(crate) struct Conn {
    pub(crate) rt: tokio::runtime::Runtime,
    pub(crate) client: Client,
    pub(crate) connection: Connection,
    pub(crate) stmts: Statements,
    pub(crate) broken: bool,
    /// The writer slot of every call on this connection (see [`SLOT_SQL`]).
    pub(crate) slot: u32,
}

/// Writer slots handed out through the database: the first of them that no
/// other session holds, taken with a session-level advisory lock that lives
/// as long as the connection. So connections open at once, from any number
/// of hosts, have different slots, and calls on them move different counter
/// shards. `LH` keys the locks apart from any the application takes.
const SLOT_SQL: &str = "SELECT s FROM generate_series(0, 63) AS s \
     WHERE pg_try_advisory_lock(19528, s) LIMIT 1";

/// A writer slot from this process's own sequence, for a connection the
/// database gave none (all 64 taken, or a PostgreSQL-compatible server
/// without advisory locks): another process's may then meet it.
fn local_slot() -> u32 {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    // The process id spreads processes that all start their sequence at 0.
    std::process::id()
        .wrapping_mul(0x9e37_79b9)
        .wrapping_add(NEXT.fetch_add(1, Ordering::Relaxed))
}

/// Runs `fut` to completion while driving the connection: one wait for the
/// server, counted as one round trip, given up at `until`.
pub(crate) fn drive<T>(
    rt: &tokio::runtime::Runtime,
    connection: &mut Connection,
    trips: &AtomicU64,
    until: Instant,
    fut: impl Future<Output = Result<T, tokio_postgres::Error>>,
) -> Result<T, DriveError> {
    trips.fetch_add(1, Ordering::Relaxed);
    let started = Instant::now();
    let mut fut = pin!(fut);
    let answer = poll_fn(|cx| {
        if let Poll::Ready(out) = fut.as_mut().poll(cx) {
            return Poll::Ready(out.map_err(DriveError::Query));
        }
        match connection.as_mut().poll(cx) {
            Poll::Ready(Ok(())) => Poll::Ready(Err(DriveError::Closed(None))),
            Poll::Ready(Err(e)) => Poll::Ready(Err(DriveError::Closed(Some(e)))),
            Poll::Pending => Poll::Pending,
        }
    });
    rt.block_on(async {
        tokio::time::timeout_at(tokio::time::Instant::from_std(until), answer)
            .await
            .unwrap_or_else(|_| Err(DriveError::Timeout(started.elapsed())))
    })
}

/// Sends `fut`'s request and writes it to the socket without waiting for the
/// answer, which the connection reads and drops before its next answer.
pub(crate) fn send_only<T>(
    rt: &tokio::runtime::Runtime,
    connection: &mut Connection,
    fut: impl Future<Output = Result<T, tokio_postgres::Error>>,
) -> bool {
    let mut fut = pin!(fut);
    rt.block_on(poll_fn(|cx| {
        let _ = fut.as_mut().poll(cx);
        Poll::Ready(connection.as_mut().poll(cx).is_pending())
    }))
}

pub(crate) enum DriveError {
    Query(tokio_postgres::Error),
    Closed(Option<tokio_postgres::Error>),
    /// No answer within the bound; the connection is unusable.
    Timeout(Duration),
    /// The call's turn on its line did not come within its lock wait.
    NoTurn(Duration),
}

impl DriveError {
    /// Whether the connection itself failed, rather than the request.
    pub(crate) fn lost_connection(&self) -> bool {
        match self {
            DriveError::Query(e) => e.is_closed(),
            DriveError::Closed(_) | DriveError::Timeout(_) => true,
            DriveError::NoTurn(_) => false,
        }
    }

    pub(crate) fn into_error(self, what: &'static str) -> StorageError {
        match self {
            DriveError::Query(e) => failed(what)(e),
            DriveError::Closed(source) => {
                StorageError::Unavailable(Box::new(PgError::Closed { what, source }))
            }
            DriveError::Timeout(waited) => {
                StorageError::Unavailable(Box::new(PgError::Timeout { what, waited }))
            }
            DriveError::NoTurn(waited) => StorageError::Busy(waited),
        }
    }
}

/// Whether `e` came from the TLS layer.
fn is_tls(e: &tokio_postgres::Error) -> bool {
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(c) = cause {
        if c.is::<rustls::Error>() || c.is::<TlsError>() {
            return true;
        }
        if let Some(io) = c.downcast_ref::<std::io::Error>()
            && io
                .get_ref()
                .is_some_and(|inner| inner.is::<rustls::Error>())
        {
            return true;
        }
        cause = c.source();
    }
    false
}

/// Logs in, on a runtime of the connection's own, and sets the session's
/// timeouts; all of it within the connect timeout.
pub(crate) fn login(
    settings: &Settings,
    tls: &MakeRustls,
    trips: &AtomicU64,
) -> Result<(tokio::runtime::Runtime, Client, Connection), StorageError> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| StorageError::Other(Box::new(e)))?;
    let until = Instant::now() + settings.connect_timeout;
    let config = &settings.config;
    let connected = rt.block_on(async {
        tokio::time::timeout_at(
            tokio::time::Instant::from_std(until),
            config.connect(tls.clone()),
        )
        .await
    });
    let (client, connection) = match connected {
        Ok(Ok(pair)) => pair,
        Ok(Err(source)) if is_tls(&source) => {
            return Err(StorageError::Other(Box::new(PgError::Tls {
                target: target(config),
                mode: settings.ssl_mode,
                source,
            })));
        }
        Ok(Err(source)) => {
            return Err(StorageError::Unavailable(Box::new(PgError::Connect {
                target: target(config),
                source,
            })));
        }
        Err(_) => {
            return Err(StorageError::Unavailable(Box::new(PgError::Timeout {
                what: "log in",
                waited: settings.connect_timeout,
            })));
        }
    };
    let mut connection: Connection = Box::pin(connection);
    if !settings.session_sql.is_empty() {
        drive(
            &rt,
            &mut connection,
            trips,
            until,
            client.batch_execute(&settings.session_sql),
        )
        .map_err(|e| e.into_error("set the session's timeouts"))?;
    }
    Ok((rt, client, connection))
}

impl Conn {
    pub(crate) fn open(
        settings: &Settings,
        tls: &MakeRustls,
        trips: &AtomicU64,
    ) -> Result<Conn, StorageError> {
        let (rt, client, mut connection) = login(settings, tls, trips)?;
        let until = Instant::now() + settings.connect_timeout;
        let sql = [
            "SELECT value FROM leasehold_kv \
             WHERE (tenant || ':' || encode(key, 'hex')) = $1",
            "SELECT key, value FROM leasehold_kv \
             WHERE (tenant || ':' || encode(key, 'hex')) = ANY($1::text[])",
            SCAN_SQL[0],
            SCAN_SQL[1],
            SCAN_SQL[2],
            SCAN_SQL[3],
            // One index scan per range, each stopped at its own limit; a row
            // says which range it answers (numbered from 1).
            "SELECT q.i, kv.key, kv.value \
             FROM unnest($2::bytea[], $3::bytea[], $4::int8[]) WITH ORDINALITY AS q(s, e, l, i) \
             CROSS JOIN LATERAL (SELECT key, value FROM leasehold_kv \
             WHERE tenant = $1 AND key >= q.s AND key < q.e ORDER BY key LIMIT q.l) AS kv",
            "INSERT INTO leasehold_kv (tenant, key, value) \
             SELECT $1, k, v FROM unnest($2::bytea[], $3::bytea[]) AS w(k, v) \
             ON CONFLICT (tenant, key) DO UPDATE SET value = EXCLUDED.value",
            // The deletes ride in a CTE of the upsert: a batch names each key
            // once, so the two never touch the same row, and the batch costs
            // one statement however it mixes puts and deletes.
            "WITH gone AS (DELETE FROM leasehold_kv \
             WHERE (tenant || ':' || encode(key, 'hex')) = ANY($4::text[])) \
             INSERT INTO leasehold_kv (tenant, key, value) \
             SELECT $1, k, v FROM unnest($2::bytea[], $3::bytea[]) AS w(k, v) \
             ON CONFLICT (tenant, key) DO UPDATE SET value = EXCLUDED.value",
            // Lines' turns: advisory locks of class 19529 (`LI`), apart
            // from writer slots' (19528). The wait's bound is local to the
            // statement's own implicit transaction, and set (in the
            // materialized CTE) before the lock is asked for.
            "WITH bound AS MATERIALIZED (SELECT set_config('lock_timeout', $2, true)) \
             SELECT pg_advisory_lock(19529, hashtext(current_schema() || $1)) FROM bound",
            "SELECT pg_advisory_unlock(19529, hashtext(current_schema() || $1))",
        ];
        let prepared = drive(
            &rt,
            &mut connection,
            trips,
            until,
            try_join_all(sql.iter().map(|s| client.prepare(s))),
        )
        .map_err(|e| e.into_error("prepare Leasehold's statements"))?;
        let mut it = prepared.into_iter();
        let mut next = || {
            it.next()
                .ok_or_else(|| StorageError::other("a statement was not prepared"))
        };
        let stmts = Statements {
            get: next()?,
            get_many: next()?,
            scan: [next()?, next()?, next()?, next()?],
            scan_many: next()?,
            upsert: next()?,
            write: next()?,
            take_turn: next()?,
            give_turn: next()?,
        };
        let slot = match drive(
            &rt,
            &mut connection,
            trips,
            until,
            client.query_opt(SLOT_SQL, &[]),
        ) {
            Ok(Some(row)) => row
                .try_get::<_, i32>(0)
                .ok()
                .and_then(|s| u32::try_from(s).ok())
                .unwrap_or_else(local_slot),
            Ok(None) | Err(DriveError::Query(_)) => local_slot(),
            Err(e) => return Err(e.into_error("take a writer slot")),
        };
        Ok(Conn {
            rt,
            client,
            connection,
            stmts,
            broken: false,
            slot,
        })
    }
}
