//! A transaction with writes on top that it has not yet been handed: what
//! the second and later calls of a group see when the group's calls share
//! one transaction whose store cannot read its own writes before the
//! commit (PostgreSQL, where a call's batch goes to the server only with
//! the `COMMIT`). It owns merging those writes into every read; it must
//! never send a write to the store before [`Overlay::into_parts`], and
//! never answer a read otherwise than the store would once the writes
//! were applied in order.

use std::collections::BTreeMap;
use std::ops::Bound;

use crate::storage::backend::{Entry, ScanRange, Txn, Write, entries_bytes, take_within};
use crate::storage::error::StorageError;

/// A transaction and the writes laid over it, last one per key (`None` is
/// a delete).
pub(crate) struct Overlay {
    txn: Box<dyn Txn>,
    writes: BTreeMap<Vec<u8>, Option<Vec<u8>>>,
}

impl Overlay {
    pub(crate) fn new(txn: Box<dyn Txn>) -> Self {
        Overlay {
            txn,
            writes: BTreeMap::new(),
        }
    }

    /// Lays `batch` over what is there, in order.
    pub(crate) fn apply(&mut self, batch: Vec<Write>) {
        for w in batch {
            match w {
                Write::Put(k, v) => self.writes.insert(k, Some(v)),
                Write::Delete(k) => self.writes.insert(k, None),
            };
        }
    }

    pub(crate) fn txn(&self) -> &dyn Txn {
        &*self.txn
    }

    /// The transaction and every write laid over it, as one batch in key
    /// order.
    pub(crate) fn into_parts(self) -> (Box<dyn Txn>, Vec<Write>) {
        let batch = self
            .writes
            .into_iter()
            .map(|(k, v)| match v {
                Some(v) => Write::Put(k, v),
                None => Write::Delete(k),
            })
            .collect();
        (self.txn, batch)
    }

    pub(crate) fn get(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>, StorageError> {
        match self.writes.get(key) {
            Some(v) => Ok(v.clone()),
            None => self.txn.get(key),
        }
    }

    pub(crate) fn get_many(
        &mut self,
        keys: &[Vec<u8>],
    ) -> Result<Vec<Option<Vec<u8>>>, StorageError> {
        let mut out = Vec::with_capacity(keys.len());
        let (mut missing, mut slots) = (Vec::new(), Vec::new());
        for (slot, key) in keys.iter().enumerate() {
            match self.writes.get(key) {
                Some(v) => out.push(v.clone()),
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
        let found = self.txn.get_many(&missing)?;
        if found.len() != missing.len() {
            return Err(StorageError::other(
                "get-many answered another number of values than keys",
            ));
        }
        for (slot, value) in slots.into_iter().zip(found) {
            out[slot] = value;
        }
        Ok(out)
    }

    /// The store's entries with the writes laid over them. The store is
    /// asked for as many more entries as there are deletes in the range, so
    /// that what the deletes hide still leaves `limit` entries.
    pub(crate) fn scan(
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
        let range = (
            Bound::Included(start),
            end.map_or(Bound::Unbounded, Bound::Excluded),
        );
        let mut laid = self.writes.range::<[u8], _>(range).peekable();
        if laid.peek().is_none() {
            return self.txn.scan(start, end, limit, reverse, max_bytes);
        }
        let deletes = laid.filter(|(_, v)| v.is_none()).count();
        let want = (limit as usize).saturating_add(deletes);
        let asked = u32::try_from(want).unwrap_or(u32::MAX);
        // The byte cap applies to the answer, not to the entries a delete
        // hides: the count above bounds what is read.
        let (stored, _) = self.txn.scan(start, end, asked, reverse, usize::MAX)?;
        // Unless the store ran out, at least `limit` of its entries survive
        // the deletes, so a put past the last of them falls beyond `limit`.
        let mut merged: BTreeMap<Vec<u8>, Vec<u8>> = stored.into_iter().collect();
        for (k, v) in self.writes.range::<[u8], _>(range) {
            match v {
                None => merged.remove(k),
                Some(v) => merged.insert(k.clone(), v.clone()),
            };
        }
        let entries: Box<dyn Iterator<Item = (Vec<u8>, Vec<u8>)>> = if reverse {
            Box::new(merged.into_iter().rev())
        } else {
            Box::new(merged.into_iter())
        };
        take_within(
            entries.take(limit as usize).map(Ok::<_, StorageError>),
            max_bytes,
        )
    }

    /// [`Txn::scan_many`] with the writes laid over: the ranges no write
    /// falls in go to the store together, each of the others as
    /// [`Overlay::scan`] reads it.
    pub(crate) fn scan_many(
        &mut self,
        ranges: &[ScanRange<'_>],
        max_bytes: usize,
    ) -> Result<(Vec<Vec<Entry>>, bool), StorageError> {
        let laid_in = |r: &ScanRange<'_>| {
            let range = (
                Bound::Included(r.start),
                r.end.map_or(Bound::Unbounded, Bound::Excluded),
            );
            r.end.is_none_or(|e| e > r.start)
                && self.writes.range::<[u8], _>(range).next().is_some()
        };
        let (laid, clean): (Vec<usize>, Vec<usize>) =
            (0..ranges.len()).partition(|&i| laid_in(&ranges[i]));
        let asked: Vec<ScanRange<'_>> = clean.iter().map(|&i| ranges[i]).collect();
        let mut out: Vec<Vec<Entry>> = vec![Vec::new(); ranges.len()];
        let (read, over) = self.txn.scan_many(&asked, max_bytes)?;
        if read.len() != asked.len() {
            return Err(StorageError::other(
                "scan-many answered another number of ranges than asked",
            ));
        }
        let mut left = max_bytes;
        for (i, entries) in clean.into_iter().zip(read) {
            left -= entries_bytes(&entries).min(left);
            out[i] = entries;
        }
        if over {
            return Ok((out, true));
        }
        for i in laid {
            let r = ranges[i];
            let (entries, over) = self.scan(r.start, r.end, r.limit, r.reverse, left)?;
            left -= entries_bytes(&entries).min(left);
            out[i] = entries;
            if over {
                return Ok((out, true));
            }
        }
        Ok((out, false))
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::config::{Durability, Limits};
    use crate::storage::backend::{Backend, Mode};
    use crate::storage::redb::{GroupCommit, RedbBackend};

    type Model = BTreeMap<Vec<u8>, Vec<u8>>;

    /// What a scan of `model` answers.
    fn scan_of(
        model: &Model,
        start: &[u8],
        end: Option<&[u8]>,
        limit: u32,
        reverse: bool,
        cap: usize,
    ) -> (Vec<Entry>, bool) {
        if end.is_some_and(|e| e <= start) {
            return (Vec::new(), false);
        }
        let range = (
            Bound::Included(start),
            end.map_or(Bound::Unbounded, Bound::Excluded),
        );
        let entries: Vec<Entry> = model
            .range::<[u8], _>(range)
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let entries: Box<dyn Iterator<Item = Entry>> = if reverse {
            Box::new(entries.into_iter().rev())
        } else {
            Box::new(entries.into_iter())
        };
        take_within(entries.take(limit as usize).map(Ok::<_, ()>), cap).expect("infallible")
    }

    /// Every read of an overlay answers what the same read answers of the
    /// store with the writes applied in order: random stores, random
    /// batches of puts and deletes laid over them, random gets, batched
    /// gets and scans (both ways, bounded or not, short limits, byte caps),
    /// and the batch it hands over is the writes' net effect.
    #[test]
    fn reads_through_an_overlay_answer_what_the_written_store_answers() {
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = move |n: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % n
        };
        let key = |i: u64| vec![b'k', (i / 10) as u8, (i % 10) as u8];
        let lock = Duration::from_secs(1);
        for round in 0..100 {
            let backend = RedbBackend::in_memory(
                Durability::None,
                GroupCommit::new(false, &Limits::default()),
            )
            .expect("in memory");
            let mut model = Model::new();
            let base: Vec<Write> = (0..next(60))
                .map(|_| {
                    let (k, v) = (key(next(80)), vec![b'v'; next(5) as usize]);
                    model.insert(k.clone(), v.clone());
                    Write::Put(k, v)
                })
                .collect();
            let mut last = BTreeMap::new();
            for w in base {
                let (Write::Put(k, _) | Write::Delete(k)) = &w;
                last.insert(k.clone(), w);
            }
            let txn = backend.begin("t", Mode::Write, lock).expect("begin");
            txn.commit(last.into_values().collect())
                .expect("commit")
                .wait()
                .expect("durable");
            let stored = model.clone();
            let mut overlay = Overlay::new(backend.begin("t", Mode::Read, lock).expect("read"));
            for _ in 0..1 + next(3) {
                let batch: Vec<Write> = (0..next(30))
                    .map(|_| {
                        let k = key(next(80));
                        if next(2) == 0 {
                            model.remove(&k);
                            Write::Delete(k)
                        } else {
                            let v = vec![b'w'; 1 + next(4) as usize];
                            model.insert(k.clone(), v.clone());
                            Write::Put(k, v)
                        }
                    })
                    .collect();
                overlay.apply(batch);
            }
            for probe in 0..40 {
                let a = next(90);
                let (start, end) = (key(a), (next(4) != 0).then(|| key(a + next(40))));
                let limit = next(12) as u32;
                let reverse = next(2) == 0;
                let cap = if next(5) == 0 { 8 } else { usize::MAX };
                assert_eq!(
                    overlay
                        .scan(&start, end.as_deref(), limit, reverse, cap)
                        .expect("scan"),
                    scan_of(&model, &start, end.as_deref(), limit, reverse, cap),
                    "round {round}, probe {probe}: scan {start:?}..{end:?}, limit {limit}, reverse {reverse}"
                );
                let keys: Vec<Vec<u8>> = (0..next(6)).map(|_| key(next(90))).collect();
                let expected: Vec<Option<Vec<u8>>> =
                    keys.iter().map(|k| model.get(k).cloned()).collect();
                assert_eq!(overlay.get_many(&keys).expect("get-many"), expected);
                assert_eq!(
                    overlay.get(&key(a)).expect("get"),
                    model.get(&key(a)).cloned()
                );
            }
            // The batch handed over turns the stored keys into the model.
            let (_, batch) = overlay.into_parts();
            let mut after = stored;
            for w in batch {
                match w {
                    Write::Put(k, v) => after.insert(k, v),
                    Write::Delete(k) => after.remove(&k),
                };
            }
            assert_eq!(after, model, "round {round}");
        }
    }
}
