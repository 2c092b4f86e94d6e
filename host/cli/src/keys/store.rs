//! A database opened as a bare storage backend (no engine, no component),
//! and writes of keys onto one in batches that survive lost races: it owns
//! how a move opens a database, how a batch is committed and retried, and a
//! tenant's digest read from one. It must never read meaning into a key.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use leasehold_host::storage::file::Access;
use leasehold_host::storage::postgres::PgBackend;
use leasehold_host::storage::redb::{GroupCommit, RedbBackend};
use leasehold_host::storage::{Backend, Mode, StorageError, Write};
use leasehold_host::tenant_keys::Digest;
use leasehold_host::{Durability, Limits};

use crate::keys::entries::{Entries, TenantWalk};
use crate::keys::error::MoveError;

/// A database opened as a bare backend.
pub type Store = Arc<dyn Backend>;

/// How long one batch's write transaction may last.
const WRITE_DEADLINE: Duration = Duration::from_secs(120);
/// How many tenants are verified (digest, then `check`) at once: a check
/// is a long chain of reads, each waiting on the target (a round trip to
/// PostgreSQL), so a few at once overlap their waits.
pub const VERIFY_AT_ONCE: usize = 4;
/// How many times a batch that lost a race or found the store busy is tried.
const WRITE_TRIES: u32 = 8;

/// Opens `db` (a redb file or a PostgreSQL URL) as a bare backend. A
/// read-only one is never created or written.
pub fn open(db: &str, read_only: bool, wait: Duration) -> Result<Store, MoveError> {
    let opened: Result<Store, leasehold_host::Error> = if leasehold_host::is_url(db) {
        // A walk and a batch, or a digest's walk and a check in each of
        // the tenants verified at once, at most.
        PgBackend::connect(db, 2 * VERIFY_AT_ONCE, read_only)
            .map(|pg| Arc::new(pg) as Store)
            .map_err(leasehold_host::Error::from)
    } else {
        let access = if read_only {
            Access::ReadOnly
        } else {
            Access::Write
        };
        // No group commit: one writer, one batch at a time.
        RedbBackend::open(
            Path::new(db),
            Durability::Immediate,
            access,
            wait,
            GroupCommit::new(false, &Limits::default()),
        )
        .map(|redb| Arc::new(redb) as Store)
        .map_err(leasehold_host::Error::Open)
    };
    opened.map_err(|source| MoveError::Open {
        db: db.to_owned(),
        source: Box::new(source),
    })
}

/// The digest of a tenant's whole keyspace, in one snapshot.
pub fn digest(store: &dyn Backend, tenant: &str) -> Result<Digest, MoveError> {
    let mut walk = TenantWalk::new(store, tenant)?;
    let mut digest = Digest::default();
    loop {
        let batch = walk.batch()?;
        if batch.is_empty() {
            return Ok(digest);
        }
        batch.iter().for_each(|(k, v)| digest.add(k, v));
    }
}

/// A batch that loses every try is split in two, each half a transaction
/// of its own, down to halves of this many writes: a smaller transaction
/// meets fewer others (on PostgreSQL, fewer of the hash index's buckets).
const SMALLEST_HALF: usize = 64;

/// Commits one batch of writes on `tenant`, trying again while it loses
/// races or finds the store busy (nothing was written then), and in two
/// halves, the first first, if it still loses: a copy's target then still
/// holds exactly the source's first keys wherever it stops.
pub fn commit(store: &dyn Backend, tenant: &str, batch: Vec<Write>) -> Result<(), MoveError> {
    match commit_tried(store, tenant, &batch) {
        Ok(()) => Ok(()),
        Err(e) if e.is_retryable() && batch.len() >= 2 * SMALLEST_HALF => {
            let mut first = batch;
            let second = first.split_off(first.len() / 2);
            commit(store, tenant, first)?;
            commit(store, tenant, second)
        }
        Err(e) => Err(MoveError::storage("write", tenant)(e)),
    }
}

/// One batch, tried up to [`WRITE_TRIES`] times.
fn commit_tried(store: &dyn Backend, tenant: &str, batch: &[Write]) -> Result<(), StorageError> {
    let mut tries = 0;
    loop {
        tries += 1;
        let attempt = store
            .begin_with_deadline(
                tenant,
                Mode::Write,
                Limits::default().lock_wait,
                WRITE_DEADLINE,
            )
            .and_then(|txn| txn.commit(batch.to_vec()))
            .and_then(|pending| pending.wait());
        match attempt {
            Ok(()) => {
                // Other hosts sharing the store hear of it, as of a call.
                store.announce(tenant);
                return Ok(());
            }
            Err(e) if e.is_retryable() && tries < WRITE_TRIES => {
                std::thread::sleep(Duration::from_millis(20 * u64::from(tries)));
            }
            Err(e) => return Err(e),
        }
    }
}
