//! A call's own writes, kept over a host's [`Snapshot`]: [`Buffered`]
//! answers the call's reads of what it wrote (point reads, batched reads and
//! scans merged with the snapshot), keeps what was read ahead, and hands the
//! host the writes as one batch, only when the call answered `ok`
//! ([`buffered`]). So no host needs read-your-writes, an undo log or
//! savepoints. It must never write through to the snapshot.

#[allow(unused_imports)]
use crate::prelude::*;
use alloc::collections::BTreeMap;
use core::ops::Bound;

use crate::time::Timestamp;

use super::contract::{Entry, Kv, KvError, ScanRequest, Snapshot, Write};

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

    /// The call's writes, in key order. A write that leaves a key as the
    /// call read it (a counter moved up and down, a row put back) is
    /// dropped: it would cost the store a write, and on a shared store a
    /// conflict, for nothing.
    pub fn into_batch(self) -> Vec<Write> {
        let fetched = self.fetched;
        self.writes
            .into_iter()
            .filter(|(k, v)| fetched.get(k) != Some(v))
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

    /// Whether the call has written or read `key` ahead, without copying
    /// its value.
    fn known(&self, key: &[u8]) -> bool {
        self.writes.contains_key(key) || self.fetched.contains_key(key)
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
        if !keys.iter().any(|k| self.known(k)) {
            return self.read_source(keys);
        }
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
        let missing: Vec<Vec<u8>> = keys.iter().filter(|k| !self.known(k)).cloned().collect();
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

    fn put(&mut self, key: Vec<u8>, value: Vec<u8>) -> Result<(), KvError> {
        self.writes.insert(key, Some(value));
        Ok(())
    }

    fn remove(&mut self, key: Vec<u8>) -> Result<(), KvError> {
        self.writes.insert(key, None);
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

    fn scan_many(&mut self, requests: &[ScanRequest]) -> Result<Vec<Vec<Entry>>, KvError> {
        // The ranges the call has not written in go to the snapshot together;
        // each of the others is merged with the call's writes as `scan` does.
        let untouched = |b: &Self, r: &ScanRequest| {
            r.limit > 0
                && r.end.as_deref().is_none_or(|e| e > r.start.as_slice())
                && b.writes_in(Bound::Included(&r.start), upper(r.end.as_deref()), false)
                    .is_empty()
        };
        let plain: Vec<ScanRequest> = requests
            .iter()
            .filter(|r| untouched(self, r))
            .cloned()
            .collect();
        let mut answered = match plain.len() {
            0 => Vec::new(),
            1 => {
                let r = &plain[0];
                vec![
                    self.source
                        .scan(&r.start, r.end.as_deref(), r.limit, r.reverse)?,
                ]
            }
            _ => self.source.scan_many(&plain)?,
        }
        .into_iter();
        let mut out = Vec::with_capacity(requests.len());
        for r in requests {
            if untouched(self, r) {
                out.push(answered.next().ok_or_else(|| {
                    KvError::Storage("the host answered fewer scans than it was asked".into())
                })?);
            } else {
                out.push(self.scan(&r.start, r.end.as_deref(), r.limit, r.reverse)?);
            }
        }
        Ok(out)
    }
}

fn upper(end: Option<&[u8]>) -> Bound<&[u8]> {
    end.map_or(Bound::Unbounded, Bound::Excluded)
}
