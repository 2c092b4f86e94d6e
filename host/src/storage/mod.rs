//! Storage behind the component's `kv` import, independent of the WIT
//! bindings: what a backend must do for one call, and the backends.
//!
//! A backend serves one tenant's keys inside one transaction: snapshot reads
//! (`get`, `get_many`, ordered `scan`), then, when the call committed, one
//! batch of writes applied atomically. The guest keeps its own writes until
//! then, so a backend needs no read-your-writes and no undo. Keys here are the
//! guest's keys; how a backend keeps tenants apart is its own business (a
//! key prefix in redb, a column in PostgreSQL), and no key the guest can
//! spell reaches another tenant.

pub mod file;
pub(crate) mod group;
pub mod postgres;
pub mod redb;

use std::time::Duration;

pub use group::{CommitHung, CommitStats, GroupFailure, Pending};
pub use leasehold_guest::kv::{Entry, Write};

use crate::error::Error;

/// Whether a call writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Runs on a snapshot; never waits for a writer, never writes.
    Read,
    /// Runs in the one write transaction of its call.
    Write,
}

/// The longest tenant name.
pub const MAX_TENANT_BYTES: usize = 64;

/// Checks a tenant name: 1–64 bytes of ASCII letters, digits, `-`, `_`, `.`.
pub fn check_tenant(name: &str) -> Result<(), Error> {
    let why = if name.is_empty() {
        Some("it is empty")
    } else if name.len() > MAX_TENANT_BYTES {
        Some("it is longer than 64 bytes")
    } else if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
    {
        Some("use only ASCII letters, digits, '-', '_' and '.'")
    } else {
        None
    };
    match why {
        Some(why) => Err(Error::Tenant {
            name: name.to_owned(),
            why,
        }),
        None => Ok(()),
    }
}

/// A store of many tenants' ordered keys.
pub trait Backend: Send + Sync + 'static {
    /// Whether every call must be a read: a writing verb is refused before
    /// it begins.
    fn read_only(&self) -> bool {
        false
    }

    /// Begins one call's transaction on `tenant`'s keys. A write transaction
    /// waits at most `lock_wait` for the writer before it answers
    /// [`Error::LockTimeout`].
    fn begin(&self, tenant: &str, mode: Mode, lock_wait: Duration) -> Result<Box<dyn Txn>, Error>;

    /// [`begin`](Self::begin) for a call that must be over within
    /// `deadline` of now: a backend that waits on a server gives up those
    /// waits past it (plus a grace it states). One in this process has no
    /// such waits and ignores it.
    fn begin_with_deadline(
        &self,
        tenant: &str,
        mode: Mode,
        lock_wait: Duration,
        deadline: Duration,
    ) -> Result<Box<dyn Txn>, Error> {
        let _ = deadline;
        self.begin(tenant, mode, lock_wait)
    }

    /// [`begin_with_deadline`](Self::begin_with_deadline) for a call that
    /// sweeps the head of one of the tenant's indexes (`claim-next`,
    /// `reclaim-lapsed`, `claim-due`). Every such call on one `line` reads
    /// what the others write, so calls that run side by side can only race,
    /// and all but one lose. A backend whose writers do run side by side may
    /// have them take turns instead, each waiting at most `lock_wait`; one
    /// with a single writer has turns already and need do nothing.
    fn begin_in_line(
        &self,
        tenant: &str,
        mode: Mode,
        lock_wait: Duration,
        deadline: Duration,
        line: &'static str,
    ) -> Result<Box<dyn Txn>, Error> {
        let _ = line;
        self.begin_with_deadline(tenant, mode, lock_wait, deadline)
    }

    /// Whether other processes may write the same tenants' keys while a call
    /// runs (a database server several hosts share), or this process is
    /// their only writer (an embedded file it holds locked). The component
    /// lays out a fresh keyspace by it: spread wide enough that concurrent
    /// writers seldom meet on a key, or narrow so that reads touch fewer
    /// keys. It decides contention, never correctness.
    fn concurrent_writers(&self) -> bool;

    /// How many times, so far, a call waited for a server's answer; `None`
    /// for a backend in this process.
    fn round_trips(&self) -> Option<u64> {
        None
    }

    /// What group commit has done so far; `None` for a backend that does
    /// not group commits itself.
    fn commit_stats(&self) -> Option<CommitStats> {
        None
    }
}

/// One call's transaction on one tenant's keys.
pub trait Txn: Send {
    fn get(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>, Error>;
    fn get_many(&mut self, keys: &[Vec<u8>]) -> Result<Vec<Option<Vec<u8>>>, Error>;
    /// Up to `limit` entries with `start <= key < end`, in key order or its
    /// reverse, stopping early (answering what it has and `true`) once the
    /// entries hold more than `max_bytes`.
    fn scan(
        &mut self,
        start: &[u8],
        end: Option<&[u8]>,
        limit: u32,
        reverse: bool,
        max_bytes: usize,
    ) -> Result<(Vec<Entry>, bool), Error>;
    /// Applies `batch` and commits; a read transaction accepts only an empty
    /// batch. The commit may still be becoming durable when this returns:
    /// the call is acknowledged only after [`Pending::wait`]. Dropping a
    /// transaction without committing adds nothing.
    fn commit(self: Box<Self>, batch: Vec<Write>) -> Result<Pending, Error>;

    /// The writer slot of this call (`kv.writer-slot`): different for calls
    /// that may run side by side, where the backend can arrange it, so that
    /// a keyspace spread by writer gives them different counter shards. A
    /// backend whose writers never overlap answers 0.
    fn writer_slot(&self) -> u32 {
        0
    }

    /// Ends a call that answered an error, writing nothing. Where the call
    /// may have read writes not yet committed (redb's group commit), the
    /// answer must wait for them: the returned [`Pending`] settles when
    /// they are. Dropping the transaction is enough elsewhere.
    fn finish_unwritten(self: Box<Self>) -> Pending {
        Pending::done()
    }
}
