//! An in-memory store, [`MemKv`]: the reference the rules are tested
//! against, a [`Kv`] itself or the [`Snapshot`] under a [`Buffered`], that
//! counts the calls it serves ([`Calls`]) so tests assert what a verb costs
//! in storage reads rather than timing it. No host serves calls from it.

#[allow(unused_imports)]
use crate::prelude::*;
use alloc::collections::BTreeMap;
use core::ops::Bound;

use crate::time::Timestamp;

use super::buffer::{Buffered, buffered};
use super::contract::{Entry, Kv, KvError, ScanRequest, Snapshot, Write};

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
    /// Batched scans ([`Kv::scan_many`]).
    pub scan_manys: u64,
    /// Ranges asked for by batched scans (counted in `scans` too).
    pub batched_ranges: u64,
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
        self.gets - self.batched_keys + self.get_manys + self.scans - self.batched_ranges
            + self.scan_manys
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

    fn scan_many(&mut self, requests: &[ScanRequest]) -> Result<Vec<Vec<Entry>>, KvError> {
        Snapshot::scan_many(self, requests)
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

    fn scan_many(&mut self, requests: &[ScanRequest]) -> Result<Vec<Vec<Entry>>, KvError> {
        self.calls.scan_manys += 1;
        self.calls.batched_ranges += requests.len() as u64;
        requests
            .iter()
            .map(|r| Snapshot::scan(self, &r.start, r.end.as_deref(), r.limit, r.reverse))
            .collect()
    }
}
