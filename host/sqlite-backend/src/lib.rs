//! A storage backend for Leasehold on SQLite: one file, written against the
//! public storage trait alone (`leasehold_host::storage`), the store the
//! JavaScript and Python hosts also run on. It passes the conformance kit
//! (`tests/conformance.rs`).
//!
//! It owns one table, `leasehold_kv (tenant, key, value)`, and the
//! connections to the file; it must never let a reader see a write committed
//! after the reader began, never let two writers run at once, and never
//! answer a commit before SQLite has it on disk.
//!
//! How the promises are kept:
//! - readers run in a deferred transaction in WAL mode, whose snapshot is
//!   taken by a read at `begin`, so a reader never waits for a writer;
//! - writers take SQLite's one write lock with `BEGIN IMMEDIATE` before
//!   they read anything, so they run one at a time and each reads what the
//!   one before it committed; waiting longer than the call's lock wait
//!   answers `Busy`;
//! - `tenant` is its own column of the primary key and `key` a BLOB, which
//!   SQLite compares bytewise, so scans are in the component's order and
//!   never cross a tenant;
//! - `synchronous = FULL`: a commit is durable when it returns.
//!
//! ```
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use leasehold_host::Engine;
//! use leasehold_sqlite_backend::SqliteBackend;
//!
//! let dir = tempfile::tempdir()?;
//! let engine = Engine::builder().backend(SqliteBackend::open(dir.path().join("work.sqlite"))?)?;
//! assert_eq!(engine.tenant("acme")?.open_count()?, 0);
//! # Ok(())
//! # }
//! ```

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use leasehold_host::storage::{
    Backend, Entry, Mode, Pending, StorageError, Txn, Write, take_within,
};
use rusqlite::{Connection, ErrorCode, OptionalExtension, params};

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS leasehold_kv (
    tenant TEXT NOT NULL,
    key BLOB NOT NULL,
    value BLOB NOT NULL,
    PRIMARY KEY (tenant, key)
) WITHOUT ROWID;
";

/// Forward and reverse, with and without an upper bound, as PostgreSQL's.
const SCAN_SQL: [&str; 4] = [
    "SELECT key, value FROM leasehold_kv WHERE tenant = ?1 AND key >= ?2 AND key < ?3 ORDER BY key LIMIT ?4",
    "SELECT key, value FROM leasehold_kv WHERE tenant = ?1 AND key >= ?2 AND ?3 IS NULL ORDER BY key LIMIT ?4",
    "SELECT key, value FROM leasehold_kv WHERE tenant = ?1 AND key >= ?2 AND key < ?3 ORDER BY key DESC LIMIT ?4",
    "SELECT key, value FROM leasehold_kv WHERE tenant = ?1 AND key >= ?2 AND ?3 IS NULL ORDER BY key DESC LIMIT ?4",
];

/// A SQLite database file serving Leasehold calls.
#[derive(Clone)]
pub struct SqliteBackend {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for SqliteBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteBackend")
            .field("path", &self.inner.path)
            .finish_non_exhaustive()
    }
}

struct Inner {
    path: PathBuf,
    /// Connections not in use. A call takes one for its transaction.
    idle: Mutex<Vec<Connection>>,
}

/// A poisoned lock only means a panic elsewhere; the list under it is whole.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// SQLite's error in the storage boundary's words.
fn storage(e: rusqlite::Error) -> StorageError {
    let code = match &e {
        rusqlite::Error::SqliteFailure(f, _) => Some(f.code),
        _ => None,
    };
    match code {
        Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked) => {
            StorageError::Unavailable(Box::new(e))
        }
        Some(ErrorCode::DatabaseCorrupt | ErrorCode::NotADatabase) => {
            StorageError::Corrupt(Box::new(e))
        }
        Some(ErrorCode::CannotOpen | ErrorCode::SystemIoFailure | ErrorCode::DiskFull) => {
            StorageError::Unavailable(Box::new(e))
        }
        _ => StorageError::Other(Box::new(e)),
    }
}

fn is_busy(e: &rusqlite::Error) -> bool {
    matches!(e, rusqlite::Error::SqliteFailure(f, _)
        if matches!(f.code, ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked))
}

impl SqliteBackend {
    /// Opens the database file at `path`, creating it and Leasehold's table
    /// if they do not exist, in WAL mode.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, StorageError> {
        let inner = Inner {
            path: path.as_ref().to_path_buf(),
            idle: Mutex::new(Vec::new()),
        };
        let conn = inner.connect()?;
        conn.execute_batch(SCHEMA).map_err(storage)?;
        lock(&inner.idle).push(conn);
        Ok(SqliteBackend {
            inner: Arc::new(inner),
        })
    }
}

impl Inner {
    fn connect(&self) -> Result<Connection, StorageError> {
        let conn = Connection::open(&self.path).map_err(storage)?;
        // WAL gives readers a snapshot without blocking the writer;
        // FULL syncs every commit.
        conn.pragma_update(None, "journal_mode", "WAL")
            .map_err(storage)?;
        conn.pragma_update(None, "synchronous", "FULL")
            .map_err(storage)?;
        Ok(conn)
    }

    fn take(&self) -> Result<Connection, StorageError> {
        match lock(&self.idle).pop() {
            Some(conn) => Ok(conn),
            None => self.connect(),
        }
    }
}

impl Backend for SqliteBackend {
    fn begin(
        &self,
        tenant: &str,
        mode: Mode,
        lock_wait: Duration,
    ) -> Result<Box<dyn Txn>, StorageError> {
        let conn = self.inner.take()?;
        conn.busy_timeout(lock_wait).map_err(storage)?;
        let begun = match mode {
            // The read takes the snapshot now, not at the call's first read.
            Mode::Read => conn.execute_batch("BEGIN DEFERRED").and_then(|()| {
                conn.query_row(
                    "SELECT count(*) FROM leasehold_kv WHERE tenant = ''",
                    [],
                    |_| Ok(()),
                )
            }),
            Mode::Write => conn.execute_batch("BEGIN IMMEDIATE"),
        };
        let mut txn = SqliteTxn {
            inner: self.inner.clone(),
            conn: Some(conn),
            tenant: tenant.to_owned(),
            mode,
            open: false,
        };
        match begun {
            Ok(()) => {
                txn.open = true;
                Ok(Box::new(txn))
            }
            Err(e) if is_busy(&e) => Err(StorageError::Busy(lock_wait)),
            Err(e) => Err(storage(e)),
        }
    }

    /// Writers take turns at SQLite's one write lock, in this process or
    /// any other: a counter kept in one key never makes one retry.
    fn concurrent_writers(&self) -> bool {
        false
    }
}

struct SqliteTxn {
    inner: Arc<Inner>,
    conn: Option<Connection>,
    tenant: String,
    mode: Mode,
    /// A transaction is open on the connection.
    open: bool,
}

impl SqliteTxn {
    fn conn(&self) -> Result<&Connection, StorageError> {
        self.conn
            .as_ref()
            .ok_or_else(|| StorageError::other("the transaction's connection is gone"))
    }
}

impl Txn for SqliteTxn {
    fn get(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>, StorageError> {
        self.conn()?
            .prepare_cached("SELECT value FROM leasehold_kv WHERE tenant = ?1 AND key = ?2")
            .and_then(|mut s| {
                s.query_row(params![self.tenant, key], |r| r.get(0))
                    .optional()
            })
            .map_err(storage)
    }

    fn scan(
        &mut self,
        start: &[u8],
        end: Option<&[u8]>,
        limit: u32,
        reverse: bool,
        max_bytes: usize,
    ) -> Result<(Vec<Entry>, bool), StorageError> {
        if limit == 0 || end.is_some_and(|e| e <= start) {
            return Ok((Vec::new(), false));
        }
        let which = usize::from(end.is_none()) + 2 * usize::from(reverse);
        let conn = self.conn()?;
        let mut stmt = conn.prepare_cached(SCAN_SQL[which]).map_err(storage)?;
        let rows = stmt
            .query_map(params![self.tenant, start, end, i64::from(limit)], |row| {
                Ok((row.get(0)?, row.get(1)?))
            })
            .map_err(storage)?;
        take_within(rows, max_bytes).map_err(storage)
    }

    fn commit(mut self: Box<Self>, batch: Vec<Write>) -> Result<Pending, StorageError> {
        if self.mode == Mode::Read && !batch.is_empty() {
            return Err(StorageError::ReadOnly);
        }
        let conn = self.conn()?;
        let applied = (|| {
            let mut put = conn.prepare_cached(
                "INSERT INTO leasehold_kv (tenant, key, value) VALUES (?1, ?2, ?3) \
                 ON CONFLICT (tenant, key) DO UPDATE SET value = excluded.value",
            )?;
            let mut delete =
                conn.prepare_cached("DELETE FROM leasehold_kv WHERE tenant = ?1 AND key = ?2")?;
            for w in &batch {
                match w {
                    Write::Put(k, v) => put.execute(params![self.tenant, k, v])?,
                    Write::Delete(k) => delete.execute(params![self.tenant, k])?,
                };
            }
            conn.execute_batch("COMMIT")
        })();
        match applied {
            Ok(()) => {
                self.open = false;
                Ok(Pending::done())
            }
            // Drop rolls back what the batch applied before it failed.
            Err(e) => Err(storage(e)),
        }
    }
}

impl Drop for SqliteTxn {
    fn drop(&mut self) {
        let Some(conn) = self.conn.take() else {
            return;
        };
        // A connection whose transaction cannot be ended is not given back.
        if self.open && conn.execute_batch("ROLLBACK").is_err() {
            return;
        }
        lock(&self.inner.idle).push(conn);
    }
}
