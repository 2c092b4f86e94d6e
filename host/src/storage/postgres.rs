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
//! speak: one table, a composite primary key, `unnest`, `ANY`, `ON CONFLICT`.

use std::collections::HashMap;
use std::future::{Future, poll_fn};
use std::pin::{Pin, pin};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::task::Poll;
use std::time::{Duration, Instant};

use futures_util::future::{join, join3, try_join_all};
use tokio_postgres::error::SqlState;
use tokio_postgres::{Client, Config, NoTls, Statement};

use super::{Backend, Entry, Mode, Pending, Txn, Write, check_tenant};
use crate::error::Error;

/// The version of the tables below. Another version is refused, never
/// misread or migrated behind the caller's back.
pub const SCHEMA_VERSION: &str = "1";

/// The table of every tenant's keys: `(tenant, key, value)`.
pub const PG_TABLE: &str = "leasehold_kv";

/// Tables are created on first use, in the connection's `search_path`.
/// `COLLATE "C"` keeps tenant comparison bytewise; `bytea` compares as bytes,
/// which is the order the guest's keys are built for.
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

const BEGIN_WRITE: &str = "BEGIN ISOLATION LEVEL SERIALIZABLE";
const BEGIN_READ: &str = "BEGIN ISOLATION LEVEL SERIALIZABLE READ ONLY DEFERRABLE";

/// Connections one engine keeps open at most, unless told otherwise.
pub const DEFAULT_POOL_SIZE: usize = 16;

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
}

/// Runs `fut` to completion while driving the connection: one wait for the
/// server, counted as one round trip.
fn drive<T>(
    rt: &tokio::runtime::Runtime,
    connection: &mut Connection,
    trips: &AtomicU64,
    fut: impl Future<Output = Result<T, tokio_postgres::Error>>,
) -> Result<T, DriveError> {
    trips.fetch_add(1, Ordering::Relaxed);
    let mut fut = pin!(fut);
    rt.block_on(poll_fn(|cx| {
        if let Poll::Ready(out) = fut.as_mut().poll(cx) {
            return Poll::Ready(out.map_err(DriveError::Query));
        }
        match connection.as_mut().poll(cx) {
            Poll::Ready(Ok(())) => Poll::Ready(Err(DriveError::Closed(None))),
            Poll::Ready(Err(e)) => Poll::Ready(Err(DriveError::Closed(Some(e)))),
            Poll::Pending => Poll::Pending,
        }
    }))
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
}

impl DriveError {
    fn into_error(self, what: &'static str) -> Error {
        match self {
            DriveError::Query(e) => failed(what)(e),
            DriveError::Closed(source) => {
                Error::Storage(Box::new(PgError::Closed { what, source }))
            }
        }
    }
}

/// Logs in, on a runtime of the connection's own.
fn login(config: &Config) -> Result<(tokio::runtime::Runtime, Client, Connection), Error> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Error::setup_from("cannot start the PostgreSQL connection's runtime", e))?;
    let (client, connection) = rt.block_on(config.connect(NoTls)).map_err(|source| {
        Error::Storage(Box::new(PgError::Connect {
            target: target(config),
            source,
        }))
    })?;
    Ok((rt, client, Box::pin(connection)))
}

impl Conn {
    fn open(config: &Config, trips: &AtomicU64) -> Result<Conn, Error> {
        let (rt, client, mut connection) = login(config)?;
        let sql = [
            "SELECT value FROM leasehold_kv WHERE tenant = $1 AND key = $2",
            "SELECT key, value FROM leasehold_kv WHERE tenant = $1 AND key = ANY($2)",
            SCAN_SQL[0],
            SCAN_SQL[1],
            SCAN_SQL[2],
            SCAN_SQL[3],
            "INSERT INTO leasehold_kv (tenant, key, value) \
             SELECT $1, k, v FROM unnest($2::bytea[], $3::bytea[]) AS w(k, v) \
             ON CONFLICT (tenant, key) DO UPDATE SET value = EXCLUDED.value",
            "DELETE FROM leasehold_kv WHERE tenant = $1 AND key = ANY($2)",
        ];
        let prepared = drive(
            &rt,
            &mut connection,
            trips,
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
        Ok(Conn {
            rt,
            client,
            connection,
            stmts,
            broken: false,
        })
    }
}

/// Creates the tables if they are missing and checks their version.
fn prepare_schema(config: &Config, trips: &AtomicU64) -> Result<(), Error> {
    let (rt, client, mut connection) = login(config)?;
    // Two hosts starting at once may both try to create the tables; the
    // loser's error is a duplicate, and the tables are there on its retry.
    let mut tries = 0;
    loop {
        tries += 1;
        let made = drive(
            &rt,
            &mut connection,
            trips,
            client.batch_execute(SCHEMA_SQL),
        );
        match made {
            Ok(()) => break,
            Err(DriveError::Query(e))
                if tries < 5
                    && matches!(e.code(), Some(c) if *c == SqlState::UNIQUE_VIOLATION
                        || *c == SqlState::DUPLICATE_TABLE
                        || *c == SqlState::DUPLICATE_OBJECT) =>
            {
                continue;
            }
            Err(e) => return Err(e.into_error("create Leasehold's tables")),
        }
    }
    let row = drive(
        &rt,
        &mut connection,
        trips,
        client.query_opt(
            "SELECT value FROM leasehold_meta WHERE name = 'schema-version'",
            &[],
        ),
    )
    .map_err(|e| e.into_error("read the schema version"))?;
    let found: Option<String> = row.map(|r| r.get(0));
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
    config: Config,
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
                return Conn::open(&self.config, &self.trips).inspect_err(|_| {
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
        let config: Config = url
            .parse()
            .map_err(|e| Error::Storage(Box::new(PgError::Url(e))))?;
        let trips = AtomicU64::new(0);
        prepare_schema(&config, &trips)?;
        Ok(PgBackend {
            pool: Arc::new(Pool {
                config,
                state: Mutex::new(PoolState::default()),
                freed: Condvar::new(),
                max: pool_size.max(1),
                trips,
            }),
            read_only,
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

    fn begin(&self, tenant: &str, mode: Mode, lock_wait: Duration) -> Result<Box<dyn Txn>, Error> {
        check_tenant(tenant)?;
        let conn = self.pool.take(lock_wait)?;
        Ok(Box::new(PgTxn {
            pool: self.pool.clone(),
            conn: Some(conn),
            tenant: tenant.to_owned(),
            mode,
            begun: false,
        }))
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
        Ok(Parts {
            rt: &conn.rt,
            client: &conn.client,
            connection: &mut conn.connection,
            stmts: &conn.stmts,
            broken: &mut conn.broken,
            trips: &self.pool.trips,
            tenant: &self.tenant,
            begin,
        })
    }
}

impl Parts<'_> {
    /// Runs one request in one round trip, `BEGIN` ahead of it if this is the
    /// transaction's first.
    fn run<T>(
        self,
        what: &'static str,
        request: impl Future<Output = Result<T, tokio_postgres::Error>>,
    ) -> Result<T, Error> {
        let out = match self.begin {
            Some(sql) => drive(self.rt, self.connection, self.trips, async {
                let (began, out) = join(self.client.batch_execute(sql), request).await;
                began?;
                out
            }),
            None => drive(self.rt, self.connection, self.trips, request),
        };
        out.map_err(|e| {
            if matches!(e, DriveError::Closed(_)) {
                *self.broken = true;
            }
            e.into_error(what)
        })
    }
}

impl Txn for PgTxn {
    fn get(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>, Error> {
        let p = self.parts()?;
        let (c, s, t) = (p.client, p.stmts, p.tenant);
        let row = p.run("read a key", c.query_opt(&s.get, &[&t, &key]))?;
        Ok(row.map(|r| r.get::<_, Vec<u8>>(0)))
    }

    fn get_many(&mut self, keys: &[Vec<u8>]) -> Result<Vec<Option<Vec<u8>>>, Error> {
        if keys.is_empty() {
            return Ok(Vec::new());
        }
        let p = self.parts()?;
        let (c, s, t) = (p.client, p.stmts, p.tenant);
        let rows = p.run("read keys", c.query(&s.get_many, &[&t, &keys]))?;
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
        let rows = p.run(
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
                    deletes.push(k.as_slice());
                }
                _ => {}
            }
        }
        let p = self.parts()?;
        let (c, s, t) = (p.client, p.stmts, p.tenant);
        // The writes and COMMIT (and BEGIN, if no read began the
        // transaction) in one round trip. A write that fails aborts the
        // transaction, and the COMMIT behind it then rolls back.
        let deleted = async {
            if deletes.is_empty() {
                Ok(0)
            } else {
                c.execute(&s.delete, &[&t, &deletes]).await
            }
        };
        let put = async {
            if put_keys.is_empty() {
                Ok(0)
            } else {
                c.execute(&s.upsert, &[&t, &put_keys, &put_values]).await
            }
        };
        let committed = p.run("commit", async {
            let (deleted, put, committed) = join3(deleted, put, c.batch_execute("COMMIT")).await;
            deleted?;
            put?;
            committed
        });
        // Whatever the outcome, COMMIT ended the transaction on the server.
        self.begun = false;
        committed.map(|()| Pending::done())
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
        self.pool.give_back(conn);
    }
}
