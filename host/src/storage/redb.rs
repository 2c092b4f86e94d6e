//! The redb backend: one table of byte keys, every guest key behind its
//! tenant's prefix.
//!
//! The prefix is the tenant name's length, then the name, so tenant `a` can
//! never alias tenant `ab`, and every scan is clamped to the prefix. Writers
//! queue at a gate of our own before redb's write lock, so that a call waits
//! for the writer a bounded time and says so, instead of blocking inside
//! redb for as long as the writers ahead of it take.

use std::path::Path;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use redb::{ReadableDatabase, ReadableTable, TableDefinition};

use super::file::{self, Access, Db};
use super::{Backend, Entry, Mode, Txn, Write, check_tenant};
use crate::engine::Durability;
use crate::error::Error;

/// The name of the one redb table: tenant-prefixed guest keys to guest values.
pub const KV_TABLE_NAME: &str = "leasehold-kv";

pub(crate) const KV_TABLE: TableDefinition<&[u8], &[u8]> = TableDefinition::new(KV_TABLE_NAME);

/// Answers the key prefix of a tenant: every key of the tenant starts with it.
pub fn tenant_prefix(name: &str) -> Result<Vec<u8>, Error> {
    check_tenant(name)?;
    let mut prefix = Vec::with_capacity(name.len() + 1);
    prefix.push(name.len() as u8);
    prefix.extend_from_slice(name.as_bytes());
    Ok(prefix)
}

/// The exclusive end of every key that starts with `prefix`. Tenant names are
/// ASCII, so the last byte can always be incremented.
fn prefix_end(prefix: &[u8]) -> Vec<u8> {
    let mut end = prefix.to_vec();
    if let Some(last) = end.last_mut() {
        *last += 1;
    }
    end
}

/// A redb database serving Leasehold calls.
pub struct RedbBackend {
    db: Db,
    durability: Durability,
    gate: Arc<Gate>,
}

impl RedbBackend {
    /// Opens a database file (see [`file::open`]): created when the path
    /// does not exist and `access` allows it, refused when it is empty or
    /// not Leasehold's; waits up to `file_wait` while another process holds
    /// it.
    pub fn open(
        path: &Path,
        durability: Durability,
        access: Access,
        file_wait: Duration,
    ) -> Result<Self, Error> {
        Ok(Self::new(file::open(path, access, file_wait)?, durability))
    }

    /// A database that lives in memory and is gone with the backend.
    pub fn in_memory(durability: Durability) -> Result<Self, Error> {
        Ok(Self::new(file::in_memory()?, durability))
    }

    fn new(db: Db, durability: Durability) -> Self {
        RedbBackend {
            db,
            durability,
            gate: Arc::new(Gate::default()),
        }
    }
}

fn storage(e: impl Into<redb::Error>) -> Error {
    Error::from(e.into())
}

impl Backend for RedbBackend {
    fn read_only(&self) -> bool {
        self.db.is_read_only()
    }

    fn begin(&self, tenant: &str, mode: Mode, lock_wait: Duration) -> Result<Box<dyn Txn>, Error> {
        let prefix = tenant_prefix(tenant)?;
        let end = prefix_end(&prefix);
        let keys = Keys { prefix, end };
        match mode {
            Mode::Read => {
                let snapshot = match &self.db {
                    Db::Write(db) => db.begin_read(),
                    Db::ReadOnly(db) => db.begin_read(),
                };
                let table = snapshot
                    .map_err(storage)?
                    .open_table(KV_TABLE)
                    .map_err(storage)?;
                Ok(Box::new(ReadTxn { table, keys }))
            }
            Mode::Write => {
                let Db::Write(db) = &self.db else {
                    return Err(Error::ReadOnly { verb: "this call" });
                };
                let permit = Gate::enter(&self.gate, lock_wait)?;
                let mut txn = db.begin_write().map_err(storage)?;
                if self.durability == Durability::None {
                    txn.set_durability(redb::Durability::None)
                        .map_err(storage)?;
                }
                Ok(Box::new(WriteTxn {
                    txn,
                    keys,
                    _permit: permit,
                }))
            }
        }
    }
}

/// One tenant's slice of the key space.
struct Keys {
    prefix: Vec<u8>,
    end: Vec<u8>,
}

impl Keys {
    fn full(&self, key: &[u8]) -> Vec<u8> {
        let mut full = Vec::with_capacity(self.prefix.len() + key.len());
        full.extend_from_slice(&self.prefix);
        full.extend_from_slice(key);
        full
    }

    /// The full-key bounds of a guest range, clamped to the tenant.
    fn range(&self, start: &[u8], end: Option<&[u8]>) -> Option<(Vec<u8>, Vec<u8>)> {
        let start = self.full(start);
        let end = match end {
            Some(e) => self.full(e).min(self.end.clone()),
            None => self.end.clone(),
        };
        (start < end).then_some((start, end))
    }
}

fn get_in(
    table: &impl ReadableTable<&'static [u8], &'static [u8]>,
    keys: &Keys,
    key: &[u8],
) -> Result<Option<Vec<u8>>, Error> {
    Ok(table
        .get(keys.full(key).as_slice())
        .map_err(storage)?
        .map(|v| v.value().to_vec()))
}

fn scan_in(
    table: &impl ReadableTable<&'static [u8], &'static [u8]>,
    keys: &Keys,
    start: &[u8],
    end: Option<&[u8]>,
    limit: u32,
    reverse: bool,
    max_bytes: usize,
) -> Result<(Vec<Entry>, bool), Error> {
    let Some((start, end)) = keys.range(start, end) else {
        return Ok((Vec::new(), false));
    };
    if limit == 0 {
        return Ok((Vec::new(), false));
    }
    let range = table
        .range(start.as_slice()..end.as_slice())
        .map_err(storage)?;
    let strip = keys.prefix.len();
    let mut out = Vec::new();
    let over = if reverse {
        collect(range.rev(), strip, limit, max_bytes, &mut out)?
    } else {
        collect(range, strip, limit, max_bytes, &mut out)?
    };
    Ok((out, over))
}

type Guard<'a> = redb::AccessGuard<'a, &'static [u8]>;

/// Takes up to `limit` entries, without the tenant prefix; answers `true`
/// when it stopped because the entries would hold more than `max_bytes`.
fn collect<'a>(
    it: impl Iterator<Item = Result<(Guard<'a>, Guard<'a>), redb::StorageError>>,
    strip: usize,
    limit: u32,
    max_bytes: usize,
    out: &mut Vec<Entry>,
) -> Result<bool, Error> {
    let mut bytes = 0usize;
    for item in it.take(limit as usize) {
        let (k, v) = item.map_err(storage)?;
        let (k, v) = (k.value(), v.value());
        bytes = bytes.saturating_add(k.len() - strip + v.len());
        if bytes > max_bytes {
            return Ok(true);
        }
        out.push((k[strip..].to_vec(), v.to_vec()));
    }
    Ok(false)
}

struct ReadTxn {
    table: redb::ReadOnlyTable<&'static [u8], &'static [u8]>,
    keys: Keys,
}

impl Txn for ReadTxn {
    fn get(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>, Error> {
        get_in(&self.table, &self.keys, key)
    }

    fn get_many(&mut self, keys: &[Vec<u8>]) -> Result<Vec<Option<Vec<u8>>>, Error> {
        keys.iter()
            .map(|k| get_in(&self.table, &self.keys, k))
            .collect()
    }

    fn scan(
        &mut self,
        start: &[u8],
        end: Option<&[u8]>,
        limit: u32,
        reverse: bool,
        max_bytes: usize,
    ) -> Result<(Vec<Entry>, bool), Error> {
        scan_in(
            &self.table,
            &self.keys,
            start,
            end,
            limit,
            reverse,
            max_bytes,
        )
    }

    fn commit(self: Box<Self>, batch: Vec<Write>) -> Result<(), Error> {
        if batch.is_empty() {
            Ok(())
        } else {
            Err(Error::ReadOnly { verb: "this call" })
        }
    }
}

struct WriteTxn {
    // Dropped before the permit: the next writer finds redb's lock free.
    txn: redb::WriteTransaction,
    keys: Keys,
    _permit: Permit,
}

impl Txn for WriteTxn {
    fn get(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>, Error> {
        let table = self.txn.open_table(KV_TABLE).map_err(storage)?;
        get_in(&table, &self.keys, key)
    }

    fn get_many(&mut self, keys: &[Vec<u8>]) -> Result<Vec<Option<Vec<u8>>>, Error> {
        let table = self.txn.open_table(KV_TABLE).map_err(storage)?;
        keys.iter().map(|k| get_in(&table, &self.keys, k)).collect()
    }

    fn scan(
        &mut self,
        start: &[u8],
        end: Option<&[u8]>,
        limit: u32,
        reverse: bool,
        max_bytes: usize,
    ) -> Result<(Vec<Entry>, bool), Error> {
        let table = self.txn.open_table(KV_TABLE).map_err(storage)?;
        scan_in(&table, &self.keys, start, end, limit, reverse, max_bytes)
    }

    fn commit(self: Box<Self>, batch: Vec<Write>) -> Result<(), Error> {
        let WriteTxn { txn, keys, _permit } = *self;
        // A call that changed nothing has nothing to make durable.
        if batch.is_empty() {
            return txn.abort().map_err(storage);
        }
        {
            let mut table = txn.open_table(KV_TABLE).map_err(storage)?;
            for w in &batch {
                match w {
                    Write::Put(k, v) => {
                        table
                            .insert(keys.full(k).as_slice(), v.as_slice())
                            .map_err(storage)?;
                    }
                    Write::Delete(k) => {
                        table.remove(keys.full(k).as_slice()).map_err(storage)?;
                    }
                }
            }
        }
        txn.commit().map_err(storage)
    }
}

/// The writer's turn: one holder at a time, waited for a bounded time.
#[derive(Default)]
struct Gate {
    busy: Mutex<bool>,
    freed: Condvar,
}

struct Permit(Arc<Gate>);

impl Gate {
    fn enter(gate: &Arc<Gate>, wait: Duration) -> Result<Permit, Error> {
        let deadline = Instant::now() + wait;
        let mut busy = gate.busy.lock().unwrap_or_else(|p| p.into_inner());
        while *busy {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(Error::LockTimeout(wait));
            }
            busy = gate
                .freed
                .wait_timeout(busy, left)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
        *busy = true;
        Ok(Permit(gate.clone()))
    }
}

impl Drop for Permit {
    fn drop(&mut self) {
        let mut busy = self.0.busy.lock().unwrap_or_else(|p| p.into_inner());
        *busy = false;
        self.0.freed.notify_one();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tenant_prefixes_never_alias() {
        let a = tenant_prefix("a").expect("valid");
        let ab = tenant_prefix("ab").expect("valid");
        assert!(
            !ab.starts_with(&a),
            "tenant ab's keys would fall in tenant a's range"
        );
        let end = prefix_end(&a);
        assert!(ab.as_slice() >= end.as_slice() || ab.as_slice() < a.as_slice());
    }

    #[test]
    fn tenant_names_are_checked() {
        for bad in ["", "has space", "slash/", "é", &"x".repeat(65)] {
            assert!(
                matches!(tenant_prefix(bad), Err(Error::Tenant { .. })),
                "{bad:?} accepted"
            );
        }
        for good in ["acme", "a.b-c_d", &"x".repeat(64)] {
            assert!(tenant_prefix(good).is_ok(), "{good:?} refused");
        }
    }

    #[test]
    fn a_writer_waits_for_the_gate_a_bounded_time() {
        let gate = Arc::new(Gate::default());
        let held = Gate::enter(&gate, Duration::ZERO).expect("free");
        let started = Instant::now();
        let again = Gate::enter(&gate, Duration::from_millis(30));
        assert!(matches!(again, Err(Error::LockTimeout(_))));
        assert!(started.elapsed() >= Duration::from_millis(30));
        drop(held);
        assert!(Gate::enter(&gate, Duration::ZERO).is_ok());
    }
}
