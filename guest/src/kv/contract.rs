//! What the rules ask of storage, and what a host serves: the [`Kv`] the
//! domain modules see inside one call, the [`Snapshot`] a host supplies
//! (point reads, batched point reads and ordered scans of the state as the
//! call began, and three facts about itself), one entry of a scan, one write
//! of a call's batch, and why a storage operation failed. Types only; it
//! must never hold state of a call.

#[allow(unused_imports)]
use crate::prelude::*;
use core::fmt;

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

/// One scan of [`Kv::scan_many`]: [`Kv::scan`]'s arguments.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScanRequest {
    pub start: Vec<u8>,
    pub end: Option<Vec<u8>>,
    pub limit: u32,
    pub reverse: bool,
}

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

    /// [`Kv::set`] of a key and value the caller has built and no longer
    /// needs: a store that keeps its writes keeps these, uncopied.
    fn put(&mut self, key: Vec<u8>, value: Vec<u8>) -> Result<(), KvError> {
        self.set(&key, &value)
    }

    /// [`Kv::delete`] of a key the caller no longer needs.
    fn remove(&mut self, key: Vec<u8>) -> Result<(), KvError> {
        self.delete(&key)
    }

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

    /// Several [`Kv::scan`]s, answered in order, in one round trip where the
    /// store can: for a walk that needs the head of several ranges before it
    /// knows which one it takes from.
    fn scan_many(&mut self, requests: &[ScanRequest]) -> Result<Vec<Vec<Entry>>, KvError> {
        requests
            .iter()
            .map(|r| self.scan(&r.start, r.end.as_deref(), r.limit, r.reverse))
            .collect()
    }
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
    /// Several scans in one round trip where the host can (see
    /// [`Kv::scan_many`]).
    fn scan_many(&mut self, requests: &[ScanRequest]) -> Result<Vec<Vec<Entry>>, KvError> {
        requests
            .iter()
            .map(|r| self.scan(&r.start, r.end.as_deref(), r.limit, r.reverse))
            .collect()
    }
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
    fn scan_many(&mut self, requests: &[ScanRequest]) -> Result<Vec<Vec<Entry>>, KvError> {
        (**self).scan_many(requests)
    }
}
