//! The storage the rules run over: an ordered map of byte keys, read from a
//! snapshot the host supplies, with this call's own writes kept in a buffer.
//!
//! The domain modules see only [`Kv`]. A host serves [`Snapshot`] (point
//! reads, batched point reads, ordered scans) and, once a call has answered
//! `ok`, applies the one batch of writes [`buffered`] hands back. The
//! [`Buffered`] layer answers the call's reads of its own writes, so no host
//! needs read-your-writes, an undo log or savepoints. Compiled natively the
//! same code runs against [`MemKv`] in unit tests.

#[allow(unused_imports)]
use crate::prelude::*;
use alloc::collections::BTreeMap;
use core::fmt;
use core::ops::Bound;

use crate::time::Timestamp;

/// Why a storage operation failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KvError {
    /// A key or value is larger than the host allows.
    TooLarge,
    /// A scan asked for more entries than the host allows per scan.
    Limit,
    /// The storage itself failed.
    Storage(String),
}

impl fmt::Display for KvError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KvError::TooLarge => f.write_str("key or value larger than the host allows"),
            KvError::Limit => f.write_str("scan asked for more entries than the host allows"),
            KvError::Storage(d) => write!(f, "storage failed: {d}"),
        }
    }
}

/// One entry returned by a scan.
pub type Entry = (Vec<u8>, Vec<u8>);

/// One write of a call's batch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Write {
    Put(Vec<u8>, Vec<u8>),
    Delete(Vec<u8>),
}

/// An ordered byte-key store, as the rules see it inside one call.
pub trait Kv {
    fn get(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>, KvError>;

    /// The values of `keys`, in order, in one round trip where the store can.
    fn get_many(&mut self, keys: &[Vec<u8>]) -> Result<Vec<Option<Vec<u8>>>, KvError> {
        keys.iter().map(|k| self.get(k)).collect()
    }

    /// [`Kv::get_many`] for values the call reads again: a store that keeps
    /// what it read answers those later reads from it.
    fn get_many_kept(&mut self, keys: &[Vec<u8>]) -> Result<Vec<Option<Vec<u8>>>, KvError> {
        self.get_many(keys)
    }

    /// Reads `keys` ahead of the [`Kv::get`]s that follow, in one round trip
    /// where the store can. A store without round trips may ignore it.
    fn prefetch(&mut self, _keys: &[Vec<u8>]) -> Result<(), KvError> {
        Ok(())
    }

    /// Lets go of what [`Kv::prefetch`] read, so a walk that reads ahead a
    /// chunk at a time holds one chunk's values, not the whole range's.
    /// Later reads of those keys go to the store again.
    fn forget_prefetched(&mut self) {}

    fn set(&mut self, key: &[u8], value: &[u8]) -> Result<(), KvError>;
    fn delete(&mut self, key: &[u8]) -> Result<(), KvError>;

    /// What the host says of the keyspace: whether other processes may write
    /// it at the same time (see [`Snapshot::concurrent_writers`]).
    fn concurrent_writers(&mut self) -> bool;

    /// This call's writer slot (see [`Snapshot::writer_slot`]), asked of the
    /// host at most once per call.
    fn writer_slot(&mut self) -> u32;

    /// The instant the host runs this call at (see [`Snapshot::call_time`]),
    /// asked of the host at most once per call.
    fn call_time(&mut self) -> Timestamp;

    /// Up to `limit` entries with `start <= key < end` (no `end`: unbounded),
    /// ascending, or descending when `reverse`. Fewer than `limit` means the
    /// range is exhausted.
    fn scan(
        &mut self,
        start: &[u8],
        end: Option<&[u8]>,
        limit: u32,
        reverse: bool,
    ) -> Result<Vec<Entry>, KvError>;
}

/// What a host serves: reads of the state as it was when the call began.
pub trait Snapshot {
    /// Whether other processes may write this keyspace while the call runs
    /// (a database server several hosts share), or this host is its only
    /// writer (an embedded store). Decides how a fresh keyspace is laid out;
    /// it affects how often writers contend, never what they compute.
    fn concurrent_writers(&mut self) -> bool;
    /// A number the host gives each call, different for calls it runs side
    /// by side where it can arrange that: a keyspace spread by writer counts
    /// a call's contributions in the shard it names. It decides contention,
    /// never what a call computes.
    fn writer_slot(&mut self) -> u32;
    /// The instant the host runs the call at, by its clock: recorded in the
    /// call's history and feed entries, never used to decide a rule.
    fn call_time(&mut self) -> Timestamp;
    fn get(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>, KvError>;
    fn get_many(&mut self, keys: &[Vec<u8>]) -> Result<Vec<Option<Vec<u8>>>, KvError>;
    fn scan(
        &mut self,
        start: &[u8],
        end: Option<&[u8]>,
        limit: u32,
        reverse: bool,
    ) -> Result<Vec<Entry>, KvError>;
}

impl<S: Snapshot + ?Sized> Snapshot for &mut S {
    fn concurrent_writers(&mut self) -> bool {
        (**self).concurrent_writers()
    }
    fn writer_slot(&mut self) -> u32 {
        (**self).writer_slot()
    }
    fn call_time(&mut self) -> Timestamp {
        (**self).call_time()
    }
    fn get(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>, KvError> {
        (**self).get(key)
    }
    fn get_many(&mut self, keys: &[Vec<u8>]) -> Result<Vec<Option<Vec<u8>>>, KvError> {
        (**self).get_many(keys)
    }
    fn scan(
        &mut self,
        start: &[u8],
        end: Option<&[u8]>,
        limit: u32,
        reverse: bool,
    ) -> Result<Vec<Entry>, KvError> {
        (**self).scan(start, end, limit, reverse)
    }
}

/// Runs one call over `source` with an empty buffer. Answers the call's
/// result and the batch to commit, which is empty unless the call answered
/// `ok`: a call that fails hands the host nothing to undo.
pub fn buffered<S: Snapshot, T, E>(
    source: S,
    f: impl FnOnce(&mut Buffered<S>) -> Result<T, E>,
) -> (Result<T, E>, Vec<Write>) {
    let mut kv = Buffered::new(source);
    let answer = f(&mut kv);
    let batch = if answer.is_ok() {
        kv.into_batch()
    } else {
        Vec::new()
    };
    (answer, batch)
}

/// A [`Snapshot`] with this call's writes on top: reads see the writes, and
/// the writes leave only as one batch.
pub struct Buffered<S> {
    source: S,
    /// Values read ahead by [`Kv::prefetch`]; `None` records an absent key.
    fetched: BTreeMap<Vec<u8>, Option<Vec<u8>>>,
    /// This call's writes, last one per key: `None` is a delete.
    writes: BTreeMap<Vec<u8>, Option<Vec<u8>>>,
    /// The host's writer slot, once asked.
    slot: Option<u32>,
    /// The host's call time, once asked.
    at: Option<Timestamp>,
}

impl<S: Snapshot> Buffered<S> {
    pub fn new(source: S) -> Self {
        Buffered {
            source,
            fetched: BTreeMap::new(),
            writes: BTreeMap::new(),
            slot: None,
            at: None,
        }
    }

    /// The call's writes, in key order.
    pub fn into_batch(self) -> Vec<Write> {
        self.writes
            .into_iter()
            .map(|(k, v)| match v {
                Some(v) => Write::Put(k, v),
                None => Write::Delete(k),
            })
            .collect()
    }

    /// One batched read of the snapshot, a value for every key.
    fn read_source(&mut self, keys: &[Vec<u8>]) -> Result<Vec<Option<Vec<u8>>>, KvError> {
        let values = self.source.get_many(keys)?;
        if values.len() != keys.len() {
            return Err(KvError::Storage(
                "get-many answered another number of values than keys".to_owned(),
            ));
        }
        Ok(values)
    }

    fn local(&self, key: &[u8]) -> Option<Option<Vec<u8>>> {
        self.writes
            .get(key)
            .or_else(|| self.fetched.get(key))
            .cloned()
    }

    /// The buffered writes within `lo..hi` (either end open), as `(key,
    /// value)` with `None` for a delete, in scan order.
    fn writes_in(
        &self,
        lo: Bound<&[u8]>,
        hi: Bound<&[u8]>,
        reverse: bool,
    ) -> Vec<(&[u8], Option<&[u8]>)> {
        let range = self
            .writes
            .range::<[u8], _>((lo, hi))
            .map(|(k, v)| (k.as_slice(), v.as_deref()));
        if reverse {
            range.rev().collect()
        } else {
            range.collect()
        }
    }
}

impl<S: Snapshot> Kv for Buffered<S> {
    fn get(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>, KvError> {
        match self.local(key) {
            Some(found) => Ok(found),
            None => self.source.get(key),
        }
    }

    fn get_many(&mut self, keys: &[Vec<u8>]) -> Result<Vec<Option<Vec<u8>>>, KvError> {
        // One batched read of what the call has neither written nor read.
        // Its answers are not kept: a value the call wants again comes
        // through `prefetch`, and keeping every answer of a wide read costs
        // more than the rare second read it would save.
        let mut out = Vec::with_capacity(keys.len());
        let mut missing = Vec::new();
        let mut slots = Vec::new();
        for (slot, key) in keys.iter().enumerate() {
            match self.local(key) {
                Some(found) => out.push(found),
                None => {
                    out.push(None);
                    missing.push(key.clone());
                    slots.push(slot);
                }
            }
        }
        if missing.is_empty() {
            return Ok(out);
        }
        for (slot, value) in slots.into_iter().zip(self.read_source(&missing)?) {
            out[slot] = value;
        }
        Ok(out)
    }

    fn get_many_kept(&mut self, keys: &[Vec<u8>]) -> Result<Vec<Option<Vec<u8>>>, KvError> {
        self.prefetch(keys)?;
        Ok(keys.iter().map(|k| self.local(k).flatten()).collect())
    }

    fn prefetch(&mut self, keys: &[Vec<u8>]) -> Result<(), KvError> {
        let missing: Vec<Vec<u8>> = keys
            .iter()
            .filter(|k| self.local(k).is_none())
            .cloned()
            .collect();
        if missing.is_empty() {
            return Ok(());
        }
        let values = self.read_source(&missing)?;
        self.fetched.extend(missing.into_iter().zip(values));
        Ok(())
    }

    fn forget_prefetched(&mut self) {
        self.fetched.clear();
    }

    fn set(&mut self, key: &[u8], value: &[u8]) -> Result<(), KvError> {
        self.writes.insert(key.to_vec(), Some(value.to_vec()));
        Ok(())
    }

    fn delete(&mut self, key: &[u8]) -> Result<(), KvError> {
        self.writes.insert(key.to_vec(), None);
        Ok(())
    }

    // Not kept here: the component's bindings keep the answer for the
    // instance's life, and the native snapshots hold it in a field.
    fn concurrent_writers(&mut self) -> bool {
        self.source.concurrent_writers()
    }

    // Kept for the call: every contribution of one call goes to one shard.
    fn writer_slot(&mut self) -> u32 {
        *self.slot.get_or_insert_with(|| self.source.writer_slot())
    }

    // Kept for the call: every entry a call records carries one instant.
    fn call_time(&mut self) -> Timestamp {
        *self.at.get_or_insert_with(|| self.source.call_time())
    }

    fn scan(
        &mut self,
        start: &[u8],
        end: Option<&[u8]>,
        limit: u32,
        reverse: bool,
    ) -> Result<Vec<Entry>, KvError> {
        if end.is_some_and(|e| e <= start) || limit == 0 {
            return Ok(Vec::new());
        }
        if self
            .writes_in(Bound::Included(start), upper(end), false)
            .is_empty()
        {
            return self.source.scan(start, end, limit, reverse);
        }
        // The snapshot is read a chunk at a time; each chunk covers a known
        // stretch of the range, within which it is merged with the buffered
        // writes. A delete can hide a stored key, so a short merge reads on.
        let mut out: Vec<Entry> = Vec::new();
        let mut lo = start.to_vec();
        let mut hi = end.map(<[u8]>::to_vec);
        loop {
            let need = limit - out.len() as u32;
            let chunk = self.source.scan(&lo, hi.as_deref(), need, reverse)?;
            let exhausted = chunk.len() < need as usize;
            let last = chunk.last().map(|(k, _)| k.clone());
            let (w_lo, w_hi) = match (&last, exhausted, reverse) {
                (Some(last), false, false) => (
                    Bound::Included(lo.as_slice()),
                    Bound::Included(last.as_slice()),
                ),
                (Some(last), false, true) => {
                    (Bound::Included(last.as_slice()), upper(hi.as_deref()))
                }
                _ => (Bound::Included(lo.as_slice()), upper(hi.as_deref())),
            };
            let writes = self.writes_in(w_lo, w_hi, reverse);
            let before = |a: &[u8], b: &[u8]| if reverse { a > b } else { a < b };
            let mut stored = chunk.into_iter().peekable();
            let mut written = writes.into_iter().peekable();
            while out.len() < limit as usize {
                let take_write = match (stored.peek(), written.peek()) {
                    (None, None) => break,
                    (Some(_), None) => false,
                    (None, Some(_)) => true,
                    (Some((sk, _)), Some((wk, _))) => {
                        if sk.as_slice() == *wk {
                            // The buffered write replaces the stored value.
                            stored.next();
                            true
                        } else {
                            before(wk, sk)
                        }
                    }
                };
                if take_write {
                    if let Some((k, Some(v))) = written.next() {
                        out.push((k.to_vec(), v.to_vec()));
                    }
                } else if let Some(e) = stored.next() {
                    out.push(e);
                }
            }
            if out.len() >= limit as usize || exhausted {
                return Ok(out);
            }
            let Some(mut last) = last else {
                return Ok(out);
            };
            if reverse {
                hi = Some(last);
            } else {
                last.push(0);
                lo = last;
            }
        }
    }
}

fn upper(end: Option<&[u8]>) -> Bound<&[u8]> {
    end.map_or(Bound::Unbounded, Bound::Excluded)
}

/// How many calls a [`MemKv`] has served, so tests can assert what a verb
/// costs in storage reads rather than timing it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Calls {
    pub gets: u64,
    /// Batched reads.
    pub get_manys: u64,
    /// Keys asked for by batched reads (counted in `gets` too).
    pub batched_keys: u64,
    pub sets: u64,
    pub deletes: u64,
    pub scans: u64,
    /// Entries returned by all scans together.
    pub scanned: u64,
    /// Times the host was asked [`Snapshot::concurrent_writers`].
    pub asks: u64,
    /// Times the host was asked [`Snapshot::writer_slot`].
    pub slot_asks: u64,
    /// Times the host was asked [`Snapshot::call_time`].
    pub time_asks: u64,
}

impl Calls {
    /// Everything read: point reads plus scanned entries.
    pub fn reads(&self) -> u64 {
        self.gets + self.scanned
    }

    /// Round trips a host on the network would make for these reads.
    pub fn round_trips(&self) -> u64 {
        self.gets - self.batched_keys + self.get_manys + self.scans
    }
}

/// An in-memory store: the reference the domain logic is tested against,
/// usable as a [`Kv`] directly or as the [`Snapshot`] under a [`Buffered`].
#[derive(Clone, Debug, Default)]
pub struct MemKv {
    pub map: BTreeMap<Vec<u8>, Vec<u8>>,
    pub calls: Calls,
    /// Says the host is the keyspace's only writer, as an embedded store's
    /// does; by default it says what a shared database's host says.
    pub sole_writer: bool,
    /// The writer slot it gives every call.
    pub slot: u32,
    /// The call time it gives every call.
    pub now: Timestamp,
}

impl MemKv {
    pub fn new() -> Self {
        Self::default()
    }

    /// Applies a call's batch, as a host does when the call commits.
    pub fn apply(&mut self, batch: Vec<Write>) {
        for w in batch {
            match w {
                Write::Put(k, v) => {
                    self.calls.sets += 1;
                    self.map.insert(k, v);
                }
                Write::Delete(k) => {
                    self.calls.deletes += 1;
                    self.map.remove(&k);
                }
            }
        }
    }

    /// Runs one call the way the component does: over a buffer, committing
    /// the batch only when the call answers `ok`.
    pub fn call<T, E>(
        &mut self,
        f: impl FnOnce(&mut Buffered<&mut MemKv>) -> Result<T, E>,
    ) -> Result<T, E> {
        let (answer, batch) = buffered(&mut *self, f);
        self.apply(batch);
        answer
    }

    fn range_scan(
        &self,
        start: &[u8],
        end: Option<&[u8]>,
        limit: u32,
        reverse: bool,
    ) -> Vec<Entry> {
        if end.is_some_and(|e| e <= start) {
            return Vec::new();
        }
        let range = (
            Bound::Included(start),
            end.map_or(Bound::Unbounded, Bound::Excluded),
        );
        let iter = self.map.range::<[u8], _>(range);
        let pick = |(k, v): (&Vec<u8>, &Vec<u8>)| (k.clone(), v.clone());
        if reverse {
            iter.rev().take(limit as usize).map(pick).collect()
        } else {
            iter.take(limit as usize).map(pick).collect()
        }
    }
}

impl Kv for MemKv {
    fn get(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>, KvError> {
        Snapshot::get(self, key)
    }

    fn get_many(&mut self, keys: &[Vec<u8>]) -> Result<Vec<Option<Vec<u8>>>, KvError> {
        Snapshot::get_many(self, keys)
    }

    fn concurrent_writers(&mut self) -> bool {
        Snapshot::concurrent_writers(self)
    }

    fn writer_slot(&mut self) -> u32 {
        Snapshot::writer_slot(self)
    }

    fn call_time(&mut self) -> Timestamp {
        Snapshot::call_time(self)
    }

    fn set(&mut self, key: &[u8], value: &[u8]) -> Result<(), KvError> {
        self.calls.sets += 1;
        self.map.insert(key.to_vec(), value.to_vec());
        Ok(())
    }

    fn delete(&mut self, key: &[u8]) -> Result<(), KvError> {
        self.calls.deletes += 1;
        self.map.remove(key);
        Ok(())
    }

    fn scan(
        &mut self,
        start: &[u8],
        end: Option<&[u8]>,
        limit: u32,
        reverse: bool,
    ) -> Result<Vec<Entry>, KvError> {
        Snapshot::scan(self, start, end, limit, reverse)
    }
}

impl Snapshot for MemKv {
    fn concurrent_writers(&mut self) -> bool {
        self.calls.asks += 1;
        !self.sole_writer
    }

    fn writer_slot(&mut self) -> u32 {
        self.calls.slot_asks += 1;
        self.slot
    }

    fn call_time(&mut self) -> Timestamp {
        self.calls.time_asks += 1;
        self.now
    }

    fn get(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>, KvError> {
        self.calls.gets += 1;
        Ok(self.map.get(key).cloned())
    }

    fn get_many(&mut self, keys: &[Vec<u8>]) -> Result<Vec<Option<Vec<u8>>>, KvError> {
        self.calls.get_manys += 1;
        self.calls.gets += keys.len() as u64;
        self.calls.batched_keys += keys.len() as u64;
        Ok(keys.iter().map(|k| self.map.get(k).cloned()).collect())
    }

    fn scan(
        &mut self,
        start: &[u8],
        end: Option<&[u8]>,
        limit: u32,
        reverse: bool,
    ) -> Result<Vec<Entry>, KvError> {
        self.calls.scans += 1;
        let out = self.range_scan(start, end, limit, reverse);
        self.calls.scanned += out.len() as u64;
        Ok(out)
    }
}
