//! Reading ordered ranges of keys: walking a prefix a chunk at a time,
//! reading several ranges' heads in one crossing, and decoding the tuple an index entry's key holds past its index's prefix.
//!
//! An index entry is its key and holds nothing. An entry that lies outside
//! its range, does not decode, or has the wrong shape is damage, never
//! skipped. This module only reads: entries are derived from rows and
//! written with them, by the row modules.

#[allow(unused_imports)]
use crate::prelude::*;

use crate::keys::{self, Elem, Key};
use crate::kv::{Entry, Kv, ScanRequest};
use crate::model::StoreError;

use super::codec::corrupt;

/// How many entries a verb asks for per scan while it walks a range.
pub const SCAN_CHUNK: u32 = 256;

/// Answers `requests` in order in one crossing: none for none, a plain scan
/// for one, a `scan-many` for more. For a merge that needs the head of
/// every range it merges before it knows which comes first.
pub fn scan_all<K: Kv + ?Sized>(
    kv: &mut K,
    requests: &[ScanRequest],
) -> Result<Vec<Vec<Entry>>, StoreError> {
    Ok(match requests {
        [] => Vec::new(),
        [one] => vec![kv.scan(&one.start, one.end.as_deref(), one.limit, one.reverse)?],
        _ => kv.scan_many(requests)?,
    })
}

/// Decodes the tuple that follows `prefix` in `key`.
pub fn suffix(key: &[u8], prefix: &Key) -> Result<Vec<Elem>, StoreError> {
    let rest = key
        .strip_prefix(prefix.as_bytes())
        .ok_or_else(|| corrupt("an index entry lies outside its range"))?;
    keys::decode(rest).map_err(|e| corrupt(format!("an index key does not decode: {e}")))
}

/// Walks every key of `prefix` in order, in chunks, calling `f` with each
/// entry; `f` answers whether to go on.
pub fn walk<K: Kv + ?Sized>(
    kv: &mut K,
    prefix: &Key,
    f: impl FnMut(&mut K, Vec<u8>, Vec<u8>) -> Result<bool, StoreError>,
) -> Result<(), StoreError> {
    walk_chunked(kv, prefix, SCAN_CHUNK, f)
}

/// [`walk`], `per_scan` entries at a time.
pub fn walk_chunked<K: Kv + ?Sized>(
    kv: &mut K,
    prefix: &Key,
    per_scan: u32,
    mut f: impl FnMut(&mut K, Vec<u8>, Vec<u8>) -> Result<bool, StoreError>,
) -> Result<(), StoreError> {
    let end = prefix.prefix_end();
    let mut start = prefix.as_bytes().to_vec();
    loop {
        let chunk = kv.scan(&start, Some(&end), per_scan, false)?;
        let full = chunk.len() == per_scan as usize;
        let Some(last) = chunk.last().map(|(k, _)| k.clone()) else {
            return Ok(());
        };
        for (k, v) in chunk {
            if !f(kv, k, v)? {
                return Ok(());
            }
        }
        if !full {
            return Ok(());
        }
        start = last;
        start.push(0);
    }
}

/// [`walk_chunked`], reading ahead: `ahead` sees each chunk before `f`
/// sees its entries, and may [`Kv::prefetch`] the keys `f` will read for
/// them, so a store with round trips answers a chunk's point reads in a
/// batch or two rather than one trip each. What was read ahead is let go
/// after each chunk, so memory holds one chunk's worth. `ahead` only
/// speeds reads up: `f` reads every key itself, and a key `ahead` missed
/// is read on its own.
///
/// `ahead` runs only over a keyspace other processes write too (a database
/// server, where every read is a round trip). An embedded store, the
/// keyspace's only writer, answers a point read in place, and there
/// reading ahead costs more than the reads it batches.
pub fn walk_ahead<K: Kv + ?Sized>(
    kv: &mut K,
    prefix: &Key,
    per_scan: u32,
    mut ahead: impl FnMut(&mut K, &[(Vec<u8>, Vec<u8>)]) -> Result<(), StoreError>,
    mut f: impl FnMut(&mut K, Vec<u8>, Vec<u8>) -> Result<bool, StoreError>,
) -> Result<(), StoreError> {
    let shared = kv.concurrent_writers();
    let end = prefix.prefix_end();
    let mut start = prefix.as_bytes().to_vec();
    loop {
        let chunk = kv.scan(&start, Some(&end), per_scan, false)?;
        let full = chunk.len() == per_scan as usize;
        let Some(last) = chunk.last().map(|(k, _)| k.clone()) else {
            return Ok(());
        };
        if shared {
            ahead(kv, &chunk)?;
        }
        for (k, v) in chunk {
            if !f(kv, k, v)? {
                kv.forget_prefetched();
                return Ok(());
            }
        }
        kv.forget_prefetched();
        if !full {
            return Ok(());
        }
        start = last;
        start.push(0);
    }
}

/// An index entry whose key holds a tuple of the wrong shape for `index`.
pub(crate) fn bad_entry(index: &str) -> StoreError {
    StoreError::Corrupt(format!("an entry of the {index} index has the wrong shape"))
}
