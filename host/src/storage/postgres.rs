//! The PostgreSQL backend: many host processes, on many machines, sharing
//! one worklist through one table.
//!
//! Every call is one transaction at SERIALIZABLE. Its reads run as they come;
//! its batch of writes, which the guest hands over only once it has answered
//! `ok`, goes to the server together with the `COMMIT`. Serialization
//! failures and deadlocks answer [`Error::Conflict`], and the engine runs the
//! whole call again from a fresh instance: the rules are deterministic (time
//! is always an argument), so a call that lost a race is simply made again.
//!
//! Round trips are what a call costs here, so requests are pipelined: `BEGIN`
//! travels with the call's first read, and the writes with the `COMMIT`. A
//! read-only call runs `SERIALIZABLE READ ONLY DEFERRABLE`: its snapshot is
//! one in which no serialization anomaly can be seen, so what it read is valid
//! as soon as it is read, it can neither fail nor make a writer fail, and its
//! `COMMIT` is sent without waiting for the answer.
//!
//! The SQL is the common subset that PostgreSQL-compatible engines also
//! speak: one table, a composite primary key, `unnest`, `ANY`, `ON CONFLICT`,
//! and one hash index on an expression.
//!
//! Every wait for the server is bounded: logging in by the connect timeout,
//! a call's requests by its deadline plus [`WAIT_GRACE`]. A connection that
//! timed out or closed is dropped, never handed out again. A call whose
//! connection was lost while its `COMMIT` was in flight answers
//! [`Error::OutcomeUnknown`]: the server may have committed it.

mod settings;
mod tls;

use settings::DEFAULT_STATEMENT_TIMEOUT;
pub use tls::{SslMode, TlsError};

use std::collections::HashMap;
use std::future::{Future, poll_fn};
use std::pin::{Pin, pin};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::task::Poll;
use std::time::{Duration, Instant};

use futures_util::future::{join, join3, join4, try_join_all};
use tokio_postgres::error::SqlState;
use tokio_postgres::{Client, Config, Statement};

use settings::Settings;
use tls::MakeRustls;

use super::{Backend, Entry, Mode, Pending, Txn, Write, check_tenant};
use crate::error::Error;

/// The version of the tables below. Another version is refused, never
/// misread or migrated behind the caller's back.
pub const SCHEMA_VERSION: &str = "2";

/// The table of every tenant's keys: `(tenant, key, value)`.
pub const PG_TABLE: &str = "leasehold_kv";

/// Tables are created on first use, in the connection's `search_path`.
/// `COLLATE "C"` keeps tenant comparison bytewise; `bytea` compares as bytes,
/// which is the order the guest's keys are built for.
///
/// Point reads and deletes go through `leasehold_kv_point`, a hash index,
/// never the primary key's B-tree: SERIALIZABLE reads lock what they visit,
/// and a B-tree visit locks a whole leaf page of neighbouring keys, while a
/// hash visit locks one bucket of keys whose hashes meet. Range scans still
/// use the B-tree and lock the pages they cover, as they must.
const SCHEMA_SQL: &str = "
CREATE TABLE IF NOT EXISTS leasehold_meta (
    name text COLLATE \"C\" PRIMARY KEY,
    value text NOT NULL
);
CREATE TABLE IF NOT EXISTS leasehold_kv (
    tenant text COLLATE \"C\" NOT NULL,
    key bytea NOT NULL,
    value bytea NOT NULL,
    PRIMARY KEY (tenant, key)
);
INSERT INTO leasehold_meta (name, value) VALUES ('schema-version', '1')
    ON CONFLICT (name) DO NOTHING;
";

/// Version 2 is version 1 with the hash index: a version-1 database (or a
/// fresh one) gets the index and its new mark in one transaction.
///
/// A hash index starts with buckets for the rows its table has when it is
/// built, and a serializable read locks the whole bucket it visits: on a
/// young table a few dozen buckets would make unrelated keys meet there. So
/// the index is built over 30,000 placeholder rows (some hundreds of
/// buckets, a few megabytes of index), under the empty tenant name (which no
/// caller can use), that the same transaction then deletes: the index keeps
/// their buckets, since a hash index never shrinks, and nobody ever sees the
/// rows.
const MIGRATE_FROM_1: &str = "
INSERT INTO leasehold_kv (tenant, key, value)
    SELECT '', int8send(g), '' FROM generate_series(1, 30000) AS g;
CREATE INDEX IF NOT EXISTS leasehold_kv_point ON leasehold_kv
    USING hash ((tenant || ':' || encode(key, 'hex'))) WITH (fillfactor = 10);
DELETE FROM leasehold_kv WHERE tenant = '';
UPDATE leasehold_meta SET value = '2' WHERE name = 'schema-version' AND value = '1';
";

/// The hash index's key of `key` in `tenant`: the tenant, a `:`, and the key
/// in hex. Tenant names hold no `:`, so no two (tenant, key) pairs share
/// one, and rows found by it need no second check. The SQL spells the same
/// expression as the index, or the planner would not use the index.
fn point(tenant: &str, key: &[u8]) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(tenant.len() + 1 + 2 * key.len());
    s.push_str(tenant);
    s.push(':');
    for b in key {
        s.push(char::from(HEX[usize::from(b >> 4)]));
        s.push(char::from(HEX[usize::from(b & 15)]));
    }
    s
}

const BEGIN_WRITE: &str = "BEGIN ISOLATION LEVEL SERIALIZABLE";
const BEGIN_READ: &str = "BEGIN ISOLATION LEVEL SERIALIZABLE READ ONLY DEFERRABLE";

/// Connections one engine keeps open at most, unless told otherwise.
pub const DEFAULT_POOL_SIZE: usize = 16;

/// How long past its deadline a call still waits for the server: enough for
/// a `COMMIT` sent just before the deadline to be answered, rather than
/// reported as an unknown outcome.
pub const WAIT_GRACE: Duration = Duration::from_secs(2);

/// What went wrong talking to PostgreSQL.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PgError {
    /// The server could not be reached or refused the login.
    #[error("cannot connect to PostgreSQL at {target}")]
    Connect {
        target: String,
        #[source]
        source: tokio_postgres::Error,
    },
    /// The tables exist but were made by another version of Leasehold.
    #[error(
        "the database holds Leasehold schema version {found:?}; this host knows version {SCHEMA_VERSION}"
    )]
    Schema { found: Option<String> },
    /// The TLS handshake failed: the server refused TLS that `sslmode`
    /// requires, or its certificate is not trusted or names another host.
    #[error("TLS with PostgreSQL at {target} failed (sslmode={})", .mode.name())]
    Tls {
        target: String,
        mode: SslMode,
        #[source]
        source: tokio_postgres::Error,
    },
    /// TLS could not be set up from the connection string.
    #[error("cannot set up TLS for PostgreSQL")]
    TlsSetup(#[source] TlsError),
    /// The server did not answer within the bound on this wait; the
    /// connection was dropped.
    #[error("PostgreSQL did not answer within {waited:?} when asked to {what}")]
    Timeout {
        what: &'static str,
        waited: Duration,
    },
    /// The server cancelled the statement: its `statement_timeout` (or an
    /// operator) ended it.
    #[error("PostgreSQL cancelled the statement that was to {what}")]
    Canceled {
        what: &'static str,
        #[source]
        source: tokio_postgres::Error,
    },
    /// A statement failed.
    #[error("PostgreSQL failed to {what}")]
    Query {
        what: &'static str,
        #[source]
        source: tokio_postgres::Error,
    },
    /// The connection closed under the call.
    #[error("the connection to PostgreSQL closed before it could {what}")]
    Closed {
        what: &'static str,
        #[source]
        source: Option<tokio_postgres::Error>,
    },
    /// A connection string that does not parse.
    #[error("invalid PostgreSQL connection string")]
    Url(#[source] tokio_postgres::Error),
    /// A parameter of the connection string with a value it cannot have.
    #[error("invalid {name} {value:?} in the PostgreSQL connection string: expected {expected}")]
    Param {
        name: &'static str,
        value: String,
        expected: &'static str,
    },
}

impl PgError {
    /// Whether the server did not answer in time, or cancelled the
    /// statement for taking too long.
    pub fn is_timeout(&self) -> bool {
        matches!(self, PgError::Timeout { .. } | PgError::Canceled { .. })
    }
}

/// Whether the server said the transaction lost a race that running it again
/// can win.
fn is_conflict(e: &tokio_postgres::Error) -> bool {
    matches!(
        e.code(),
        Some(c) if *c == SqlState::T_R_SERIALIZATION_FAILURE || *c == SqlState::T_R_DEADLOCK_DETECTED
    )
}

fn failed(what: &'static str) -> impl FnOnce(tokio_postgres::Error) -> Error {
    move |source| {
        if is_conflict(&source) {
            Error::Conflict {
                attempts: 1,
                source: Box::new(source),
            }
        } else if source.code() == Some(&SqlState::QUERY_CANCELED) {
            Error::Storage(Box::new(PgError::Canceled { what, source }))
        } else if source.is_closed() {
            Error::Storage(Box::new(PgError::Closed {
                what,
                source: Some(source),
            }))
        } else {
            Error::Storage(Box::new(PgError::Query { what, source }))
        }
    }
}

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

/// Whether `text` names a PostgreSQL database rather than a file.
pub fn is_url(text: &str) -> bool {
    text.starts_with("postgres://") || text.starts_with("postgresql://")
}

/// The statements every call uses, prepared once per connection.
struct Statements {
    get: Statement,
    get_many: Statement,
    /// Forward and reverse, with and without an upper bound.
    scan: [Statement; 4],
    upsert: Statement,
    delete: Statement,
}

const SCAN_SQL: [&str; 4] = [
    "SELECT key, value FROM leasehold_kv WHERE tenant = $1 AND key >= $2 AND key < $3 ORDER BY key LIMIT $4",
    "SELECT key, value FROM leasehold_kv WHERE tenant = $1 AND key >= $2 AND $3::bytea IS NULL ORDER BY key LIMIT $4",
    "SELECT key, value FROM leasehold_kv WHERE tenant = $1 AND key >= $2 AND key < $3 ORDER BY key DESC LIMIT $4",
    "SELECT key, value FROM leasehold_kv WHERE tenant = $1 AND key >= $2 AND $3::bytea IS NULL ORDER BY key DESC LIMIT $4",
];

type Connection = Pin<Box<dyn Future<Output = Result<(), tokio_postgres::Error>> + Send>>;

/// One connection, driven on the calling thread: a call's requests and the
/// connection's I/O are polled together, so no thread hop sits between the
/// engine and the socket.
struct Conn {
    rt: tokio::runtime::Runtime,
    client: Client,
    connection: Connection,
    stmts: Statements,
    broken: bool,
    /// The writer slot of every call on this connection (see [`SLOT_SQL`]).
    slot: u32,
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
fn drive<T>(
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
fn send_only<T>(
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

enum DriveError {
    Query(tokio_postgres::Error),
    Closed(Option<tokio_postgres::Error>),
    /// No answer within the bound; the connection is unusable.
    Timeout(Duration),
    /// The call's turn on its line did not come within its lock wait.
    NoTurn(Duration),
}

impl DriveError {
    /// Whether the connection itself failed, rather than the request.
    fn lost_connection(&self) -> bool {
        match self {
            DriveError::Query(e) => e.is_closed(),
            DriveError::Closed(_) | DriveError::Timeout(_) => true,
            DriveError::NoTurn(_) => false,
        }
    }

    fn into_error(self, what: &'static str) -> Error {
        match self {
            DriveError::Query(e) => failed(what)(e),
            DriveError::Closed(source) => {
                Error::Storage(Box::new(PgError::Closed { what, source }))
            }
            DriveError::Timeout(waited) => {
                Error::Storage(Box::new(PgError::Timeout { what, waited }))
            }
            DriveError::NoTurn(waited) => Error::LockTimeout(waited),
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
fn login(
    settings: &Settings,
    tls: &MakeRustls,
    trips: &AtomicU64,
) -> Result<(tokio::runtime::Runtime, Client, Connection), Error> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Error::setup_from("cannot start the PostgreSQL connection's runtime", e))?;
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
            return Err(Error::Storage(Box::new(PgError::Tls {
                target: target(config),
                mode: settings.ssl_mode,
                source,
            })));
        }
        Ok(Err(source)) => {
            return Err(Error::Storage(Box::new(PgError::Connect {
                target: target(config),
                source,
            })));
        }
        Err(_) => {
            return Err(Error::Storage(Box::new(PgError::Timeout {
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
    fn open(settings: &Settings, tls: &MakeRustls, trips: &AtomicU64) -> Result<Conn, Error> {
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
            "INSERT INTO leasehold_kv (tenant, key, value) \
             SELECT $1, k, v FROM unnest($2::bytea[], $3::bytea[]) AS w(k, v) \
             ON CONFLICT (tenant, key) DO UPDATE SET value = EXCLUDED.value",
            "DELETE FROM leasehold_kv \
             WHERE (tenant || ':' || encode(key, 'hex')) = ANY($1::text[])",
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
                .ok_or_else(|| Error::setup("a statement was not prepared"))
        };
        let stmts = Statements {
            get: next()?,
            get_many: next()?,
            scan: [next()?, next()?, next()?, next()?],
            upsert: next()?,
            delete: next()?,
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

/// Creates the tables if they are missing and checks their version.
fn prepare_schema(settings: &Settings, tls: &MakeRustls, trips: &AtomicU64) -> Result<(), Error> {
    let (rt, client, mut connection) = login(settings, tls, trips)?;
    // Creating the index on a large version-1 table takes as long as it
    // takes; only the server's statement timeout bounds it.
    let until = Instant::now() + settings.connect_timeout + DEFAULT_STATEMENT_TIMEOUT;
    // Two hosts starting at once may both try to create the tables; the
    // loser's error is a duplicate, and the tables are there on its retry.
    let setup = |sql: &'static str, what: &'static str, connection: &mut Connection| {
        let mut tries = 0;
        loop {
            tries += 1;
            match drive(&rt, connection, trips, until, client.batch_execute(sql)) {
                Ok(()) => return Ok(()),
                Err(DriveError::Query(e))
                    if tries < 5
                        && matches!(e.code(), Some(c) if *c == SqlState::UNIQUE_VIOLATION
                            || *c == SqlState::DUPLICATE_TABLE
                            || *c == SqlState::DUPLICATE_OBJECT) =>
                {
                    continue;
                }
                Err(e) => return Err(e.into_error(what)),
            }
        }
    };
    setup(SCHEMA_SQL, "create Leasehold's tables", &mut connection)?;
    let version = |connection: &mut Connection| {
        drive(
            &rt,
            connection,
            trips,
            until,
            client.query_opt(
                "SELECT value FROM leasehold_meta WHERE name = 'schema-version'",
                &[],
            ),
        )
        .map(|row| row.map(|r| r.get::<_, String>(0)))
        .map_err(|e| e.into_error("read the schema version"))
    };
    let mut found = version(&mut connection)?;
    if found.as_deref() == Some("1") {
        setup(
            MIGRATE_FROM_1,
            "add the point index (schema version 1 to 2)",
            &mut connection,
        )?;
        found = version(&mut connection)?;
    }
    if found.as_deref() != Some(SCHEMA_VERSION) {
        return Err(Error::Storage(Box::new(PgError::Schema { found })));
    }
    Ok(())
}

#[derive(Default)]
struct PoolState {
    idle: Vec<Conn>,
    open: usize,
}

/// The connections of one engine: made when needed, kept while they work.
struct Pool {
    settings: Settings,
    tls: MakeRustls,
    state: Mutex<PoolState>,
    freed: Condvar,
    max: usize,
    trips: AtomicU64,
}

impl Pool {
    fn lock(&self) -> MutexGuard<'_, PoolState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A connection, waiting at most `wait` for one to be free.
    fn take(&self, wait: Duration) -> Result<Conn, Error> {
        let deadline = Instant::now() + wait;
        let mut s = self.lock();
        loop {
            if let Some(conn) = s.idle.pop() {
                if conn.client.is_closed() {
                    s.open -= 1;
                    continue;
                }
                return Ok(conn);
            }
            if s.open < self.max {
                s.open += 1;
                drop(s);
                return Conn::open(&self.settings, &self.tls, &self.trips).inspect_err(|_| {
                    self.lock().open -= 1;
                    self.freed.notify_one();
                });
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(Error::LockTimeout(wait));
            }
            s = self
                .freed
                .wait_timeout(s, left)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }

    fn give_back(&self, conn: Conn) {
        let mut s = self.lock();
        if conn.broken || conn.client.is_closed() {
            s.open -= 1;
        } else {
            s.idle.push(conn);
        }
        drop(s);
        self.freed.notify_one();
    }
}

/// A PostgreSQL database serving Leasehold calls.
pub struct PgBackend {
    pool: Arc<Pool>,
    read_only: bool,
}

impl PgBackend {
    /// Connects to the database `url` names (a `postgres://` URL or a
    /// key=value connection string), creating Leasehold's tables if they are
    /// missing and refusing tables of another schema version.
    pub fn connect(url: &str, pool_size: usize, read_only: bool) -> Result<Self, Error> {
        let settings = Settings::parse(url).map_err(|e| Error::Storage(Box::new(e)))?;
        let tls = MakeRustls::new(settings.ssl_mode, settings.root_cert.as_deref())
            .map_err(|e| Error::Storage(Box::new(PgError::TlsSetup(e))))?;
        let trips = AtomicU64::new(0);
        prepare_schema(&settings, &tls, &trips)?;
        Ok(PgBackend {
            pool: Arc::new(Pool {
                settings,
                tls,
                state: Mutex::new(PoolState::default()),
                freed: Condvar::new(),
                max: pool_size.max(1),
                trips,
            }),
            read_only,
        })
    }
}

impl PgBackend {
    /// A transaction on a pooled connection, waiting at most `lock_wait`
    /// for one; its waits for the server end `deadline` (plus
    /// [`WAIT_GRACE`]) after it has one.
    fn txn(
        &self,
        tenant: &str,
        mode: Mode,
        lock_wait: Duration,
        deadline: Duration,
    ) -> Result<PgTxn, Error> {
        check_tenant(tenant)?;
        let conn = self.pool.take(lock_wait)?;
        Ok(PgTxn {
            pool: self.pool.clone(),
            conn: Some(conn),
            tenant: tenant.to_owned(),
            mode,
            begun: false,
            until: Instant::now() + deadline + WAIT_GRACE,
            turn: None,
        })
    }
}

impl Backend for PgBackend {
    fn read_only(&self) -> bool {
        self.read_only
    }

    /// Every host pointed at the database writes the same tenants.
    fn concurrent_writers(&self) -> bool {
        true
    }

    /// A transaction with no deadline of its own waits for the server for
    /// as long as [`Limits::default`](crate::Limits)'s deadline allows.
    fn begin(&self, tenant: &str, mode: Mode, lock_wait: Duration) -> Result<Box<dyn Txn>, Error> {
        self.begin_with_deadline(tenant, mode, lock_wait, crate::Limits::default().deadline)
    }

    fn begin_with_deadline(
        &self,
        tenant: &str,
        mode: Mode,
        lock_wait: Duration,
        deadline: Duration,
    ) -> Result<Box<dyn Txn>, Error> {
        Ok(Box::new(self.txn(tenant, mode, lock_wait, deadline)?))
    }

    /// Calls on one line take turns through a session advisory lock on
    /// (schema, tenant, line), taken before `BEGIN` in the same round trip
    /// as the call's first read and given back with its `COMMIT`: the next
    /// call's snapshot then already holds this one's writes, so the two
    /// never race. Calls on other tasks, other tenants and other lines do
    /// not wait. A wait past `lock_wait` answers [`Error::LockTimeout`].
    fn begin_in_line(
        &self,
        tenant: &str,
        mode: Mode,
        lock_wait: Duration,
        deadline: Duration,
        line: &'static str,
    ) -> Result<Box<dyn Txn>, Error> {
        let started = Instant::now();
        let mut txn = self.txn(tenant, mode, lock_wait, deadline)?;
        if mode == Mode::Write {
            // Tenant names are letters, digits, '-', '_' and '.', so the
            // key needs no quoting.
            let key = format!("{tenant}/{line}");
            let wait = lock_wait
                .saturating_sub(started.elapsed())
                .max(Duration::from_millis(1));
            txn.turn = Some(Turn {
                take: format!(
                    "SET LOCAL lock_timeout = '{}ms'; SELECT pg_advisory_lock({LINE_LOCKS}, \
                     hashtext(current_schema() || '/{key}'))",
                    wait.as_millis()
                ),
                give_back: format!(
                    "SELECT pg_advisory_unlock({LINE_LOCKS}, hashtext(current_schema() || '/{key}'))"
                ),
                lock_wait,
                held: false,
            });
        }
        Ok(Box::new(txn))
    }

    fn round_trips(&self) -> Option<u64> {
        Some(self.pool.trips.load(Ordering::Relaxed))
    }
}

/// One call's transaction on one connection. `BEGIN` is sent with the first
/// request; a transaction dropped without committing is rolled back.
struct PgTxn {
    pool: Arc<Pool>,
    conn: Option<Conn>,
    tenant: String,
    mode: Mode,
    begun: bool,
    /// When every wait of this call for the server gives up.
    until: Instant,
    /// The call's turn on its line, if it sweeps one.
    turn: Option<Turn>,
}

/// The advisory-lock class of lines' turns (`LI`), apart from writer slots'.
const LINE_LOCKS: u32 = 19529;

/// A call's turn on a line: the SQL that takes it (before `BEGIN`, with the
/// wait bounded) and gives it back (after `COMMIT` or `ROLLBACK`).
struct Turn {
    take: String,
    give_back: String,
    lock_wait: Duration,
    /// Taken and not yet given back.
    held: bool,
}

/// What one request needs of its transaction, borrowed apart so that the
/// request's future can borrow the client while the connection is driven.
struct Parts<'a> {
    rt: &'a tokio::runtime::Runtime,
    client: &'a Client,
    connection: &'a mut Connection,
    stmts: &'a Statements,
    broken: &'a mut bool,
    trips: &'a AtomicU64,
    tenant: &'a str,
    /// `BEGIN`, when this request is the transaction's first.
    begin: Option<&'static str>,
    /// The call's turn on its line, taken ahead of `BEGIN`.
    turn: Option<&'a mut Turn>,
    until: Instant,
}

impl PgTxn {
    fn parts(&mut self) -> Result<Parts<'_>, Error> {
        let begin = (!self.begun).then_some(match self.mode {
            Mode::Read => BEGIN_READ,
            Mode::Write => BEGIN_WRITE,
        });
        self.begun = true;
        let conn = self
            .conn
            .as_mut()
            .ok_or_else(|| Error::setup("the transaction's connection is gone"))?;
        let turn = match (begin, self.turn.as_mut()) {
            (Some(_), Some(turn)) if !turn.held => Some(turn),
            _ => None,
        };
        Ok(Parts {
            rt: &conn.rt,
            client: &conn.client,
            connection: &mut conn.connection,
            stmts: &conn.stmts,
            broken: &mut conn.broken,
            trips: &self.pool.trips,
            tenant: &self.tenant,
            begin,
            turn,
            until: self.until,
        })
    }
}

impl Parts<'_> {
    /// Runs one request in one round trip, `BEGIN` ahead of it if this is the
    /// transaction's first.
    fn run<T>(
        self,
        request: impl Future<Output = Result<T, tokio_postgres::Error>>,
    ) -> Result<T, DriveError> {
        let (rt, connection, trips, until) = (self.rt, self.connection, self.trips, self.until);
        let out = match (self.begin, self.turn) {
            (Some(sql), Some(turn)) => {
                // Three requests, answered in order, in one round trip.
                let mut took = None;
                let out = drive(rt, connection, trips, until, async {
                    let (t, began, out) = join3(
                        self.client.batch_execute(&turn.take),
                        self.client.batch_execute(sql),
                        request,
                    )
                    .await;
                    took = Some(t);
                    began?;
                    out
                });
                match took {
                    Some(Ok(())) => {
                        turn.held = true;
                        out
                    }
                    Some(Err(e)) if e.code() == Some(&SqlState::LOCK_NOT_AVAILABLE) => {
                        Err(DriveError::NoTurn(turn.lock_wait))
                    }
                    Some(Err(e)) => Err(DriveError::Query(e)),
                    None => out,
                }
            }
            (Some(sql), None) => drive(rt, connection, trips, until, async {
                let (began, out) = join(self.client.batch_execute(sql), request).await;
                began?;
                out
            }),
            (None, _) => drive(rt, connection, trips, until, request),
        };
        out.inspect_err(|e| {
            if e.lost_connection() {
                *self.broken = true;
            }
        })
    }

    /// [`run`](Self::run) for a read: every failure is a plain one.
    fn read<T>(
        self,
        what: &'static str,
        request: impl Future<Output = Result<T, tokio_postgres::Error>>,
    ) -> Result<T, Error> {
        self.run(request).map_err(|e| e.into_error(what))
    }
}

impl Txn for PgTxn {
    fn writer_slot(&self) -> u32 {
        self.conn.as_ref().map_or(0, |c| c.slot)
    }

    fn get(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>, Error> {
        let p = self.parts()?;
        let (c, s, t) = (p.client, p.stmts, p.tenant);
        let at = point(t, key);
        let row = p.read("read a key", c.query_opt(&s.get, &[&at]))?;
        Ok(row.map(|r| r.get::<_, Vec<u8>>(0)))
    }

    fn get_many(&mut self, keys: &[Vec<u8>]) -> Result<Vec<Option<Vec<u8>>>, Error> {
        if keys.is_empty() {
            return Ok(Vec::new());
        }
        let p = self.parts()?;
        let (c, s, t) = (p.client, p.stmts, p.tenant);
        let at: Vec<String> = keys.iter().map(|k| point(t, k)).collect();
        let rows = p.read("read keys", c.query(&s.get_many, &[&at]))?;
        let found: HashMap<Vec<u8>, Vec<u8>> = rows
            .into_iter()
            .map(|r| (r.get::<_, Vec<u8>>(0), r.get::<_, Vec<u8>>(1)))
            .collect();
        Ok(keys.iter().map(|k| found.get(k).cloned()).collect())
    }

    fn scan(
        &mut self,
        start: &[u8],
        end: Option<&[u8]>,
        limit: u32,
        reverse: bool,
        max_bytes: usize,
    ) -> Result<(Vec<Entry>, bool), Error> {
        if limit == 0 || end.is_some_and(|e| e <= start) {
            return Ok((Vec::new(), false));
        }
        let which = usize::from(end.is_none()) + 2 * usize::from(reverse);
        let limit = i64::from(limit);
        let p = self.parts()?;
        let (c, s, t) = (p.client, p.stmts, p.tenant);
        let rows = p.read(
            "scan keys",
            c.query(&s.scan[which], &[&t, &start, &end, &limit]),
        )?;
        let mut bytes = 0usize;
        let mut out = Vec::with_capacity(rows.len());
        for r in rows {
            let (k, v): (Vec<u8>, Vec<u8>) = (r.get(0), r.get(1));
            bytes = bytes.saturating_add(k.len() + v.len());
            if bytes > max_bytes {
                return Ok((out, true));
            }
            out.push((k, v));
        }
        Ok((out, false))
    }

    fn commit(mut self: Box<Self>, batch: Vec<Write>) -> Result<Pending, Error> {
        if self.mode == Mode::Read {
            if !batch.is_empty() {
                return Err(Error::ReadOnly { verb: "this call" });
            }
            // Finished in Drop: a deferrable read-only transaction's reads
            // are valid as they are read, so its COMMIT need not be awaited.
            return Ok(Pending::done());
        }
        if !self.begun && batch.is_empty() {
            return Ok(Pending::done());
        }
        // The last write of a key is the one that counts, as if the batch were
        // applied in order; one statement may touch a row only once.
        let mut last: HashMap<&[u8], usize> = HashMap::new();
        for (i, w) in batch.iter().enumerate() {
            let (Write::Put(k, _) | Write::Delete(k)) = w;
            last.insert(k.as_slice(), i);
        }
        let (mut put_keys, mut put_values, mut deletes) = (Vec::new(), Vec::new(), Vec::new());
        for (i, w) in batch.iter().enumerate() {
            match w {
                Write::Put(k, v) if last.get(k.as_slice()) == Some(&i) => {
                    put_keys.push(k.as_slice());
                    put_values.push(v.as_slice());
                }
                Write::Delete(k) if last.get(k.as_slice()) == Some(&i) => {
                    deletes.push(point(&self.tenant, k));
                }
                _ => {}
            }
        }
        // The turn on the line goes back behind the COMMIT, in its round trip.
        let give_back = self.turn.as_ref().map(|turn| turn.give_back.clone());
        let p = self.parts()?;
        let (c, s, t) = (p.client, p.stmts, p.tenant);
        // The writes and COMMIT (and BEGIN, if no read began the
        // transaction) in one round trip. A write that fails aborts the
        // transaction, and the COMMIT behind it then rolls back.
        let deleted = async {
            if deletes.is_empty() {
                Ok(0)
            } else {
                c.execute(&s.delete, &[&deletes]).await
            }
        };
        let put = async {
            if put_keys.is_empty() {
                Ok(0)
            } else {
                c.execute(&s.upsert, &[&t, &put_keys, &put_values]).await
            }
        };
        let given_back = async {
            match &give_back {
                Some(sql) => c.batch_execute(sql).await,
                None => Ok(()),
            }
        };
        let committed = p.run(async {
            let (deleted, put, committed, given_back) =
                join4(deleted, put, c.batch_execute("COMMIT"), given_back).await;
            deleted?;
            put?;
            committed?;
            given_back
        });
        // Whatever the outcome, COMMIT ended the transaction on the server,
        // and the turn was given back after it (or the session is gone).
        self.begun = false;
        if let Some(turn) = self.turn.as_mut() {
            turn.held = false;
        }
        match committed {
            Ok(()) => Ok(Pending::done()),
            // The COMMIT went out with the writes; with the connection gone
            // before its answer, the server may have committed or not.
            Err(e) if e.lost_connection() => {
                let source: Box<dyn std::error::Error + Send + Sync> = match e.into_error("commit")
                {
                    Error::Storage(source) => source,
                    other => Box::new(other),
                };
                Err(Error::OutcomeUnknown { source })
            }
            Err(e) => Err(e.into_error("commit")),
        }
    }
}

impl Drop for PgTxn {
    fn drop(&mut self) {
        let Some(mut conn) = self.conn.take() else {
            return;
        };
        if self.begun && !conn.broken {
            // A read-only call ends with COMMIT, a failed write call with
            // ROLLBACK; neither answer changes anything the caller was told.
            let sql = match self.mode {
                Mode::Read => "COMMIT",
                Mode::Write => "ROLLBACK",
            };
            let Conn {
                rt,
                client,
                connection,
                broken,
                ..
            } = &mut conn;
            if !send_only(rt, connection, client.batch_execute(sql)) {
                *broken = true;
            }
        }
        if let Some(turn) = self.turn.as_ref().filter(|t| t.held)
            && !conn.broken
        {
            let Conn {
                rt,
                client,
                connection,
                broken,
                ..
            } = &mut conn;
            if !send_only(rt, connection, client.batch_execute(&turn.give_back)) {
                *broken = true;
            }
        }
        self.pool.give_back(conn);
    }
}
