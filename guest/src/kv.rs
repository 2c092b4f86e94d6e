//! The storage the rules run over: an ordered map of byte keys, as the host's
//! `kv` import supplies it inside one transaction.
//!
//! The domain modules see only this trait, so they compile and are tested
//! natively against [`MemKv`]; in the component the trait is the WIT import.

use std::collections::BTreeMap;
use std::fmt;
use std::ops::Bound;

/// Why a storage operation failed (mirrors the WIT `kv-error`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KvError {
    ReadOnly,
    TooLarge,
    Limit,
    Storage(String),
}

impl fmt::Display for KvError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KvError::ReadOnly => f.write_str("storage is read-only in this call"),
            KvError::TooLarge => f.write_str("key or value larger than the host allows"),
            KvError::Limit => f.write_str("scan asked for more entries than the host allows"),
            KvError::Storage(d) => write!(f, "storage failed: {d}"),
        }
    }
}

/// One entry returned by a scan.
pub type Entry = (Vec<u8>, Vec<u8>);

/// An ordered byte-key store, seen from inside one transaction.
pub trait Kv {
    fn get(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>, KvError>;
    fn set(&mut self, key: &[u8], value: &[u8]) -> Result<(), KvError>;
    fn delete(&mut self, key: &[u8]) -> Result<(), KvError>;
    /// Up to `limit` entries with `start <= key < end` (no `end`: unbounded),
    /// ascending, or descending when `reverse`.
    fn scan(
        &mut self,
        start: &[u8],
        end: Option<&[u8]>,
        limit: u32,
        reverse: bool,
    ) -> Result<Vec<Entry>, KvError>;
}

/// How many calls a [`MemKv`] has served, so tests can assert what a verb
/// costs in storage reads rather than timing it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Calls {
    pub gets: u64,
    pub sets: u64,
    pub deletes: u64,
    pub scans: u64,
    /// Entries returned by all scans together.
    pub scanned: u64,
}

impl Calls {
    /// Everything read: point reads plus scanned entries.
    pub fn reads(&self) -> u64 {
        self.gets + self.scanned
    }
}

/// An in-memory [`Kv`]: the reference the domain logic is tested against.
#[derive(Clone, Debug, Default)]
pub struct MemKv {
    pub map: BTreeMap<Vec<u8>, Vec<u8>>,
    pub calls: Calls,
}

impl MemKv {
    pub fn new() -> Self {
        Self::default()
    }
}

impl Kv for MemKv {
    fn get(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>, KvError> {
        self.calls.gets += 1;
        Ok(self.map.get(key).cloned())
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
        self.calls.scans += 1;
        if end.is_some_and(|e| e <= start) {
            return Ok(Vec::new());
        }
        let range = (
            Bound::Included(start),
            end.map_or(Bound::Unbounded, Bound::Excluded),
        );
        let iter = self.map.range::<[u8], _>(range);
        let take = |it: &mut dyn Iterator<Item = (&Vec<u8>, &Vec<u8>)>| {
            it.take(limit as usize)
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect::<Vec<_>>()
        };
        let out = if reverse {
            take(&mut iter.rev())
        } else {
            take(&mut { iter })
        };
        self.calls.scanned += out.len() as u64;
        Ok(out)
    }
}
