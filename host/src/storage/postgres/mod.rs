//! The PostgreSQL backend: many host processes, on many machines, sharing
//! one worklist through one table. This file owns the backend's face (the
//! pool it opens and the turns of lines); the connection, the pool, the
//! transaction, the schema and its migration each live in a module of
//! their own, and none of them imports this file.
//!
//! Every call is one transaction at SERIALIZABLE. Its reads run as they come;
//! its batch of writes, which the guest hands over only once it has answered
//! `ok`, goes to the server together with the `COMMIT`. Serialization
//! failures and deadlocks answer [`StorageError::Conflict`], and the engine runs the
//! whole call again from a fresh instance: the rules are deterministic (time
//! is always an argument), so a call that lost a race is simply made again.
//!
//! Round trips are what a call costs here, so requests are pipelined: `BEGIN`
//! travels with the call's first read, and the writes with the `COMMIT`. A
//! read-only call runs `SERIALIZABLE READ ONLY DEFERRABLE`: its snapshot is
//! one in which no serialization anomaly can be seen, so what it read is valid
//! as soon as it is read, it can neither fail nor make a writer fail, and its
//! `COMMIT` is sent without waiting for the answer. Such a snapshot waits
//! until every serializable writer running when it began has ended, on the
//! whole server (every database), so the call waits for one only briefly
//! (`txn::SAFE_SNAPSHOT_WAIT`): past that, one more round trip begins it
//! again as plain `SERIALIZABLE READ ONLY`, whose reads run at once but are
//! valid only once its `COMMIT` succeeds. That `COMMIT` is awaited, and a
//! serialization failure there or in a read answers
//! [`StorageError::Conflict`], as a writer's does.
//!
//! The SQL is the common subset that PostgreSQL-compatible engines also
//! speak: one table, a composite primary key, `unnest`, `ANY`, `ON CONFLICT`,
//! and one hash index on an expression.
//!
//! Every wait for the server is bounded: logging in by the connect timeout,
//! a call's requests by its deadline plus [`WAIT_GRACE`]. A connection that
//! timed out or closed is dropped, never handed out again. A call whose
//! connection was lost while its `COMMIT` was in flight answers
//! [`StorageError::OutcomeUnknown`]: the server may have committed it.

mod conn;
mod error;
mod line;
mod load;
mod migrate;
mod pool;
mod reads;
mod schema;
mod settings;
mod signals;
mod tls;
mod txn;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

pub use error::PgError;
pub use schema::{PG_TABLE, SCHEMA_VERSION};
pub use settings::is_url;
pub use tls::{SslMode, TlsError};

use crate::config::Limits;
use crate::storage::backend::{Backend, HeardHook, Load, Mode, Txn};
use crate::storage::commit::CommitStats;
use crate::storage::error::StorageError;
use crate::storage::group::Bounds;
use crate::storage::tenant_name::check_tenant;
use line::Lines;
use load::PgLoad;
use migrate::prepare_schema;
use pool::{Pool, PoolState};
use settings::Settings;
use signals::Signals;
use tls::MakeRustls;
use txn::{PgTxn, Turn};

/// Connections one engine keeps open at most, unless told otherwise.
pub const DEFAULT_POOL_SIZE: usize = 16;

/// How long past its deadline a call still waits for the server: enough for
/// a `COMMIT` sent just before the deadline to be answered, rather than
/// reported as an unknown outcome.
pub const WAIT_GRACE: Duration = Duration::from_secs(2);

/// A PostgreSQL database serving Leasehold calls.
pub struct PgBackend {
    pool: Arc<Pool>,
    read_only: bool,
    /// Notices of commits, to and from other host processes.
    signals: Signals,
    /// This process's calls on each line, which share turns and commits.
    lines: Lines,
}

impl Drop for PgBackend {
    fn drop(&mut self) {
        self.signals.stop();
    }
}

impl PgBackend {
    /// Connects to the database `url` names (a `postgres://` URL or a
    /// key=value connection string), creating Leasehold's tables if they are
    /// missing and refusing tables of another schema version.
    pub fn connect(url: &str, pool_size: usize, read_only: bool) -> Result<Self, StorageError> {
        let settings = Settings::parse(url).map_err(|e| StorageError::Other(Box::new(e)))?;
        let tls = MakeRustls::new(settings.ssl_mode, settings.root_cert.as_deref())
            .map_err(|e| StorageError::Other(Box::new(PgError::TlsSetup(e))))?;
        let trips = AtomicU64::new(0);
        prepare_schema(&settings, &tls, &trips)?;
        Ok(PgBackend {
            signals: Signals::new(settings.clone(), tls.clone()),
            pool: Arc::new(Pool {
                settings,
                tls,
                state: Mutex::new(PoolState::default()),
                freed: Condvar::new(),
                max: pool_size.max(1),
                trips,
            }),
            read_only,
            lines: Lines::new(true, Bounds::of(&Limits::default())),
        })
    }

    /// Whether calls of one line that meet in this process share a turn
    /// and a commit (on unless told otherwise), and how far such a group
    /// may grow (`limits`' `group_calls` and `group_age`). An engine built
    /// with `EngineBuilder::postgres` sets it from the builder's
    /// `group_commit` and `limits`.
    pub fn with_groups(mut self, on: bool, limits: &Limits) -> Self {
        self.lines = Lines::new(on, Bounds::of(limits));
        self
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
    ) -> Result<PgTxn, StorageError> {
        check_tenant(tenant).map_err(|e| StorageError::Other(Box::new(e)))?;
        let conn = self.pool.take(lock_wait)?;
        Ok(PgTxn {
            pool: self.pool.clone(),
            conn: Some(conn),
            tenant: tenant.to_owned(),
            mode,
            begun: false,
            check_at_commit: false,
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
    /// as long as [`Limits::default`](crate::config::Limits)'s deadline allows.
    fn begin(
        &self,
        tenant: &str,
        mode: Mode,
        lock_wait: Duration,
    ) -> Result<Box<dyn Txn>, StorageError> {
        self.begin_with_deadline(tenant, mode, lock_wait, Limits::default().deadline)
    }

    fn begin_with_deadline(
        &self,
        tenant: &str,
        mode: Mode,
        lock_wait: Duration,
        deadline: Duration,
    ) -> Result<Box<dyn Txn>, StorageError> {
        Ok(Box::new(self.txn(tenant, mode, lock_wait, deadline)?))
    }

    /// Calls on one line take turns through a session advisory lock on
    /// (schema, tenant, line), taken before `BEGIN` in the same round trip
    /// as the call's first read and given back with its `COMMIT`: the next
    /// call's snapshot then already holds this one's writes, so the two
    /// never race. Calls on other tasks, other tenants and other lines do
    /// not wait. A wait past `lock_wait` answers [`StorageError::Busy`].
    ///
    /// Calls of the same line that meet in this process first take turns
    /// among themselves, and share the turn on the server and its commit
    /// (see [`line`]): a call that finishes while others wait hands them
    /// its transaction instead of committing it.
    fn begin_in_line(
        &self,
        tenant: &str,
        mode: Mode,
        lock_wait: Duration,
        deadline: Duration,
        line: &'static str,
    ) -> Result<Box<dyn Txn>, StorageError> {
        if mode != Mode::Write {
            return self.begin_with_deadline(tenant, mode, lock_wait, deadline);
        }
        check_tenant(tenant).map_err(|e| StorageError::Other(Box::new(e)))?;
        let started = Instant::now();
        self.lines.enter(tenant, line, lock_wait, || {
            let left = lock_wait.saturating_sub(started.elapsed());
            let mut txn = self.txn(tenant, mode, left, deadline)?;
            let wait = lock_wait
                .saturating_sub(started.elapsed())
                .max(Duration::from_millis(1));
            txn.turn = Some(Turn {
                key: format!("/{tenant}/{line}"),
                wait: format!("{}ms", wait.as_millis()),
                lock_wait,
                held: false,
            });
            Ok(Box::new(txn) as Box<dyn Txn>)
        })
    }

    /// What the groups of lines' calls have done: commits, the calls they
    /// covered, the largest group, and calls waiting for a line's turn in
    /// this process now. Calls on no line commit alone and are not counted.
    fn commit_stats(&self) -> Option<CommitStats> {
        Some(self.lines.stats())
    }

    fn round_trips(&self) -> Option<u64> {
        Some(self.pool.trips.load(Ordering::Relaxed))
    }

    /// Sends a `NOTIFY` on channel `leasehold`, payload `schema/tenant`,
    /// from a connection of its own, after the commit (see `signals`).
    fn announce(&self, tenant: &str) {
        self.signals.announce(tenant);
    }

    /// `LISTEN`s on channel `leasehold` on that connection, reconnecting
    /// when it drops.
    fn listen(&self, heard: HeardHook) -> bool {
        self.signals.listen(heard)
    }

    /// One `SERIALIZABLE` transaction on a connection of the pool (see
    /// `load`): its read of a tenant holds the tenant against writers.
    fn begin_load(
        &self,
        lock_wait: Duration,
        deadline: Duration,
    ) -> Result<Option<Box<dyn Load>>, StorageError> {
        if self.read_only {
            return Err(StorageError::ReadOnly);
        }
        let conn = self.pool.take(lock_wait)?;
        Ok(Some(Box::new(PgLoad {
            pool: self.pool.clone(),
            conn: Some(conn),
            begun: false,
            until: Instant::now() + deadline + WAIT_GRACE,
        })))
    }

    /// A loose scan of the primary key: one index probe per tenant, past
    /// the last one found, however many keys each holds. Placeholder rows
    /// under the empty name (see `schema`) are never listed.
    fn tenants(&self) -> Result<Option<Vec<String>>, StorageError> {
        const TENANTS_SQL: &str = "WITH RECURSIVE t(name) AS ( \
                 (SELECT tenant FROM leasehold_kv WHERE tenant > '' ORDER BY tenant LIMIT 1) \
                 UNION ALL \
                 SELECT (SELECT tenant FROM leasehold_kv WHERE tenant > t.name \
                         ORDER BY tenant LIMIT 1) \
                 FROM t WHERE t.name IS NOT NULL) \
             SELECT name FROM t WHERE name IS NOT NULL";
        let mut conn = self.pool.take(self.pool.settings.connect_timeout)?;
        let until = Instant::now() + settings::DEFAULT_STATEMENT_TIMEOUT + WAIT_GRACE;
        let conn::Conn {
            rt,
            client,
            connection,
            ..
        } = &mut conn;
        let out = conn::drive(
            rt,
            connection,
            &self.pool.trips,
            until,
            client.query(TENANTS_SQL, &[]),
        );
        if out.as_ref().is_err_and(conn::DriveError::lost_connection) {
            conn.broken = true;
        }
        self.pool.give_back(conn);
        let rows = out.map_err(|e| e.into_error("list the tenants"))?;
        Ok(Some(rows.iter().map(|r| r.get::<_, String>(0)).collect()))
    }
}
