//! The redb backend: one table of byte keys, every guest key behind its
//! tenant's prefix. It owns how keys are laid out in the file; it must never
//! let a key or a scan reach past its tenant's prefix.
//!
//! The prefix is the tenant name's length, then the name, so tenant `a` can
//! never alias tenant `ab`, and every scan is clamped to the prefix. Writers
//! take turns at a writer of our own (`group.rs`) before redb's write lock: a call
//! waits for its turn a bounded time and says so, instead of blocking inside
//! redb, and calls that queue while a commit is flushing share the next one.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use redb::{ReadableDatabase, ReadableTable};

use crate::config::{Durability, Limits};
use crate::storage::backend::{Backend, Entry, Load, Mode, Txn, Write, take_within};
use crate::storage::commit::{CommitStats, Pending};
use crate::storage::error::StorageError;
use crate::storage::file::{self, Access, Db, KV_TABLE, OpenError, redb_error as storage};
use crate::storage::group::{Bounds, Turn, Writer};
use crate::storage::tenant_name::{InvalidTenant, check_tenant};

/// Answers the key prefix of a tenant: every key of the tenant starts with it.
pub fn tenant_prefix(name: &str) -> Result<Vec<u8>, InvalidTenant> {
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
    writer: Arc<Writer<redb::WriteTransaction>>,
}

impl RedbBackend {
    /// Opens a database file: created when the path
    /// does not exist and `access` allows it, refused when it is empty or
    /// not Leasehold's; waits up to `file_wait` while another process holds
    /// it.
    pub fn open(
        path: &Path,
        durability: Durability,
        access: Access,
        file_wait: Duration,
        group: GroupCommit,
    ) -> Result<Self, OpenError> {
        Ok(Self::new(
            file::open(path, access, file_wait)?,
            durability,
            group,
        ))
    }

    /// A database that lives in memory and is gone with the backend.
    pub fn in_memory(durability: Durability, group: GroupCommit) -> Result<Self, StorageError> {
        Ok(Self::new(file::in_memory()?, durability, group))
    }

    /// A database on a storage backend of the caller's: created there when
    /// it holds nothing yet, opened (and repaired, if a writer stopped
    /// without closing it) otherwise.
    pub fn on_storage(
        storage: impl redb::StorageBackend,
        durability: Durability,
        group: GroupCommit,
    ) -> Result<Self, StorageError> {
        Ok(Self::new(file::on_storage(storage)?, durability, group))
    }

    fn new(db: Db, durability: Durability, group: GroupCommit) -> Self {
        RedbBackend {
            db,
            durability,
            writer: Writer::new(group.on, group.bounds),
        }
    }
}

impl RedbBackend {
    /// The key table as the last commit left it, for a reader.
    fn snapshot(&self) -> Result<redb::ReadOnlyTable<&'static [u8], &'static [u8]>, StorageError> {
        let snapshot = match &self.db {
            Db::Write(db) => db.begin_read(),
            Db::ReadOnly(db) => db.begin_read(),
        };
        snapshot
            .map_err(storage)?
            .open_table(KV_TABLE)
            .map_err(storage)
    }
}

impl Backend for RedbBackend {
    fn read_only(&self) -> bool {
        self.db.is_read_only()
    }

    /// redb holds its file locked: this process is its only writer.
    fn concurrent_writers(&self) -> bool {
        false
    }

    fn commit_stats(&self) -> Option<CommitStats> {
        Some(self.writer.stats())
    }

    /// Walks the file from tenant to tenant: the first key at or past where
    /// the last tenant's prefix ends names the next one, so it reads one
    /// key per tenant, whatever each holds, then sorts the names.
    fn tenants(&self) -> Result<Option<Vec<String>>, StorageError> {
        let table = self.snapshot()?;
        let mut names = Vec::new();
        let mut from: Vec<u8> = Vec::new();
        loop {
            let mut range = table.range(from.as_slice()..).map_err(storage)?;
            let Some((key, _)) = range.next().transpose().map_err(storage)? else {
                break;
            };
            let key = key.value();
            let prefix = key
                .first()
                .and_then(|&len| key.get(..1 + usize::from(len)))
                .filter(|p| p.len() > 1)
                .ok_or_else(|| {
                    StorageError::Corrupt(
                        format!("a key of {} bytes has no tenant prefix", key.len()).into(),
                    )
                })?;
            let name = std::str::from_utf8(&prefix[1..])
                .ok()
                .filter(|n| check_tenant(n).is_ok())
                .ok_or_else(|| {
                    StorageError::Corrupt(
                        format!("a key's tenant prefix {:?} is no tenant name", &prefix[1..])
                            .into(),
                    )
                })?;
            names.push(name.to_owned());
            from = prefix_end(prefix);
        }
        // Prefixes start with the name's length, so the walk meets shorter
        // names first; the listing promises bytewise order.
        names.sort_unstable();
        Ok(Some(names))
    }

    fn begin(
        &self,
        tenant: &str,
        mode: Mode,
        lock_wait: Duration,
    ) -> Result<Box<dyn Txn>, StorageError> {
        let keys = Keys::of(tenant)?;
        match mode {
            Mode::Read => {
                let table = self.snapshot()?;
                Ok(Box::new(ReadTxn { table, keys }))
            }
            Mode::Write => Ok(Box::new(WriteTxn {
                turn: self.write_turn(lock_wait)?,
                keys,
            })),
        }
    }

    /// One write transaction for whole tenants, on the writer's turn like
    /// a call's: no other writer of this file runs until it ends.
    fn begin_load(
        &self,
        lock_wait: Duration,
        _deadline: Duration,
    ) -> Result<Option<Box<dyn Load>>, StorageError> {
        Ok(Some(Box::new(RedbLoad {
            turn: self.write_turn(lock_wait)?,
            wrote: false,
        })))
    }
}

impl RedbBackend {
    /// The writer's turn, waiting at most `lock_wait` for it.
    fn write_turn(
        &self,
        lock_wait: Duration,
    ) -> Result<Turn<redb::WriteTransaction>, StorageError> {
        let Db::Write(db) = &self.db else {
            return Err(StorageError::ReadOnly);
        };
        Writer::enter(&self.writer, lock_wait, || {
            let mut txn = db.begin_write().map_err(storage)?;
            if self.durability == Durability::None {
                txn.set_durability(redb::Durability::None)
                    .map_err(storage)?;
            }
            Ok(txn)
        })
    }
}

/// Whether write calls share commits, and how far a group may grow.
#[derive(Clone, Copy, Debug)]
pub struct GroupCommit {
    pub(crate) on: bool,
    pub(crate) bounds: Bounds,
}

impl GroupCommit {
    /// Group commit as `limits` bound it, or every call committing alone.
    pub fn new(on: bool, limits: &Limits) -> Self {
        GroupCommit {
            on,
            bounds: Bounds::of(limits),
        }
    }
}

/// One tenant's slice of the key space.
struct Keys {
    prefix: Vec<u8>,
    end: Vec<u8>,
}

impl Keys {
    fn of(tenant: &str) -> Result<Keys, StorageError> {
        let prefix = tenant_prefix(tenant).map_err(|e| StorageError::Other(Box::new(e)))?;
        let end = prefix_end(&prefix);
        Ok(Keys { prefix, end })
    }

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
) -> Result<Option<Vec<u8>>, StorageError> {
    Ok(table
        .get(keys.full(key).as_slice())
        .map_err(storage)?
        .map(|v| v.value().to_vec()))
}

/// How many unwanted entries a batched read steps over before it looks its
/// next key up afresh.
const MAX_SKIP: usize = 4;

/// Fewer keys than this are looked up one by one: sorting them and setting
/// up a cursor costs more than it can save on a handful (a write verb's
/// read-ahead of its row, its index entries and a shard).
const CURSOR_FROM: usize = 8;

/// Reads `wanted` in key order with one cursor, stepping along the table
/// while the keys lie close together (a counter's shards, rows opened one
/// after another) and looking a key up afresh once the next one is further
/// off. Answers in the order asked, a repeated key in each place.
fn get_many_in(
    table: &impl ReadableTable<&'static [u8], &'static [u8]>,
    keys: &Keys,
    wanted: &[Vec<u8>],
) -> Result<Vec<Option<Vec<u8>>>, StorageError> {
    if wanted.len() < CURSOR_FROM {
        return wanted.iter().map(|k| get_in(table, keys, k)).collect();
    }
    let full: Vec<Vec<u8>> = wanted.iter().map(|k| keys.full(k)).collect();
    let mut order: Vec<usize> = (0..full.len()).collect();
    order.sort_unstable_by(|&a, &b| full[a].cmp(&full[b]));
    let last = full[order[order.len() - 1]].as_slice();
    let mut out: Vec<Option<Vec<u8>>> = vec![None; wanted.len()];
    let mut range = table
        .range(full[order[0]].as_slice()..=last)
        .map_err(storage)?;
    let mut current = range.next().transpose().map_err(storage)?;
    let mut previous: Option<usize> = None;
    for &slot in &order {
        let key = full[slot].as_slice();
        if let Some(p) = previous.filter(|&p| full[p] == full[slot]) {
            out[slot] = out[p].clone();
            continue;
        }
        previous = Some(slot);
        let mut skipped = 0;
        while let Some((k, v)) = &current {
            match k.value().cmp(key) {
                std::cmp::Ordering::Less if skipped == MAX_SKIP => {
                    range = table.range(key..=last).map_err(storage)?;
                    current = range.next().transpose().map_err(storage)?;
                    skipped = 0;
                }
                std::cmp::Ordering::Less => {
                    current = range.next().transpose().map_err(storage)?;
                    skipped += 1;
                }
                std::cmp::Ordering::Equal => {
                    out[slot] = Some(v.value().to_vec());
                    current = range.next().transpose().map_err(storage)?;
                    break;
                }
                std::cmp::Ordering::Greater => break,
            }
        }
    }
    Ok(out)
}

fn scan_in(
    table: &impl ReadableTable<&'static [u8], &'static [u8]>,
    keys: &Keys,
    start: &[u8],
    end: Option<&[u8]>,
    limit: u32,
    reverse: bool,
    max_bytes: usize,
) -> Result<(Vec<Entry>, bool), StorageError> {
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
    if reverse {
        collect(range.rev(), strip, limit, max_bytes)
    } else {
        collect(range, strip, limit, max_bytes)
    }
}

type Guard<'a> = redb::AccessGuard<'a, &'static [u8]>;

/// Up to `limit` entries within `max_bytes`, without the tenant prefix.
fn collect<'a>(
    it: impl Iterator<Item = Result<(Guard<'a>, Guard<'a>), redb::StorageError>>,
    strip: usize,
    limit: u32,
    max_bytes: usize,
) -> Result<(Vec<Entry>, bool), StorageError> {
    let entries = it
        .take(limit as usize)
        .map(|item| item.map(|(k, v)| (k.value()[strip..].to_vec(), v.value().to_vec())));
    take_within(entries, max_bytes).map_err(storage)
}

struct ReadTxn {
    table: redb::ReadOnlyTable<&'static [u8], &'static [u8]>,
    keys: Keys,
}

impl Txn for ReadTxn {
    fn get(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>, StorageError> {
        get_in(&self.table, &self.keys, key)
    }

    fn get_many(&mut self, keys: &[Vec<u8>]) -> Result<Vec<Option<Vec<u8>>>, StorageError> {
        get_many_in(&self.table, &self.keys, keys)
    }

    fn scan(
        &mut self,
        start: &[u8],
        end: Option<&[u8]>,
        limit: u32,
        reverse: bool,
        max_bytes: usize,
    ) -> Result<(Vec<Entry>, bool), StorageError> {
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

    fn commit(self: Box<Self>, batch: Vec<Write>) -> Result<Pending, StorageError> {
        if batch.is_empty() {
            Ok(Pending::done())
        } else {
            Err(StorageError::ReadOnly)
        }
    }
}

struct WriteTxn {
    turn: Turn<redb::WriteTransaction>,
    keys: Keys,
}

impl Txn for WriteTxn {
    fn get(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>, StorageError> {
        let table = self.turn.txn().open_table(KV_TABLE).map_err(storage)?;
        get_in(&table, &self.keys, key)
    }

    fn get_many(&mut self, keys: &[Vec<u8>]) -> Result<Vec<Option<Vec<u8>>>, StorageError> {
        let table = self.turn.txn().open_table(KV_TABLE).map_err(storage)?;
        get_many_in(&table, &self.keys, keys)
    }

    fn scan(
        &mut self,
        start: &[u8],
        end: Option<&[u8]>,
        limit: u32,
        reverse: bool,
        max_bytes: usize,
    ) -> Result<(Vec<Entry>, bool), StorageError> {
        let table = self.turn.txn().open_table(KV_TABLE).map_err(storage)?;
        scan_in(&table, &self.keys, start, end, limit, reverse, max_bytes)
    }

    fn commit(self: Box<Self>, batch: Vec<Write>) -> Result<Pending, StorageError> {
        let WriteTxn { turn, keys } = *self;
        let wrote = !batch.is_empty();
        Ok(turn.commit(
            |txn| {
                let mut table = txn.open_table(KV_TABLE)?;
                for w in &batch {
                    match w {
                        Write::Put(k, v) => {
                            table.insert(keys.full(k).as_slice(), v.as_slice())?;
                        }
                        Write::Delete(k) => {
                            table.remove(keys.full(k).as_slice())?;
                        }
                    }
                }
                Ok(())
            },
            wrote,
        ))
    }

    fn finish_unwritten(self: Box<Self>) -> Pending {
        self.turn.commit(|_| Ok(()), false)
    }
}

/// Whole tenants written in one redb write transaction (see [`Load`]).
/// redb spills a large transaction's pages to the file as it goes, so the
/// memory it takes is its cache's, whatever the tenants hold.
struct RedbLoad {
    turn: Turn<redb::WriteTransaction>,
    wrote: bool,
}

impl Load for RedbLoad {
    fn scan(
        &mut self,
        tenant: &str,
        start: &[u8],
        limit: u32,
        max_bytes: usize,
    ) -> Result<(Vec<Entry>, bool), StorageError> {
        let keys = Keys::of(tenant)?;
        let table = self.turn.txn().open_table(KV_TABLE).map_err(storage)?;
        scan_in(&table, &keys, start, None, limit, false, max_bytes)
    }

    fn put(&mut self, tenant: &str, entries: &[Entry]) -> Result<(), StorageError> {
        let keys = Keys::of(tenant)?;
        self.wrote = true;
        let mut table = self.turn.writing().open_table(KV_TABLE).map_err(storage)?;
        for (k, v) in entries {
            table
                .insert(keys.full(k).as_slice(), v.as_slice())
                .map_err(storage)?;
        }
        Ok(())
    }

    fn commit(self: Box<Self>) -> Result<(), StorageError> {
        let RedbLoad { turn, wrote } = *self;
        turn.commit(|_| Ok(()), wrote).wait()
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

    /// A batched read answers what point reads answer, in the order asked:
    /// keys together and far apart, absent ones, repeats, keys past the last
    /// stored one, and another tenant's keys beside this one's.
    #[test]
    fn a_batched_read_answers_as_point_reads_do() {
        let group = GroupCommit::new(true, &Limits::default());
        let backend = RedbBackend::in_memory(Durability::None, group).expect("in memory");
        let put = |tenant: &str, keys: &mut dyn Iterator<Item = u32>| {
            let txn = backend
                .begin(tenant, Mode::Write, Duration::from_secs(1))
                .expect("write");
            let batch = keys
                .map(|i| Write::Put(format!("k{i:05}").into_bytes(), i.to_be_bytes().to_vec()))
                .collect();
            txn.commit(batch).expect("commit").wait().expect("durable");
        };
        // Every third key up to 3000, so runs of neighbours and gaps alike.
        put("a", &mut (0..3000).filter(|i| i % 3 != 1));
        put("b", &mut (0..3000));
        let mut x: u32 = 12345;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x
        };
        for round in 0..200 {
            let len = (next() % 80) as usize;
            let spread = [10, 100, 4000][round % 3];
            let wanted: Vec<Vec<u8>> = (0..len)
                .map(|_| format!("k{:05}", next() % spread).into_bytes())
                .chain((round % 7 == 0).then(|| b"k99999".to_vec()))
                .collect();
            for mode in [Mode::Read, Mode::Write] {
                let mut txn = backend
                    .begin("a", mode, Duration::from_secs(1))
                    .expect("begin");
                let batched = txn.get_many(&wanted).expect("get-many");
                let single: Vec<Option<Vec<u8>>> =
                    wanted.iter().map(|k| txn.get(k).expect("get")).collect();
                assert_eq!(batched, single, "round {round}, {mode:?}");
            }
        }
    }

    #[test]
    fn tenant_names_are_checked() {
        for bad in ["", "has space", "slash/", "é", &"x".repeat(65)] {
            assert!(
                matches!(tenant_prefix(bad), Err(InvalidTenant { .. })),
                "{bad:?} accepted"
            );
        }
        for good in ["acme", "a.b-c_d", &"x".repeat(64)] {
            assert!(tenant_prefix(good).is_ok(), "{good:?} refused");
        }
    }
}

#[cfg(test)]
#[path = "redb_load_tests.rs"]
mod load_tests;
