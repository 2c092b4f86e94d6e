//! Batched point reads that answer exactly one value per key.
//!
//! A caller matches the values of a batched read to its keys by position, so
//! a store that answers another number of values is refused here, as a
//! storage fault, before any value is decoded against the wrong key. These
//! reads never decode or write anything.

#[allow(unused_imports)]
use crate::prelude::*;

use crate::kv::Kv;
use crate::model::StoreError;

/// One batched read answering exactly one value per key, since values are
/// matched to their keys by position.
pub(super) fn get_each<K: Kv + ?Sized>(
    kv: &mut K,
    keys: &[Vec<u8>],
) -> Result<Vec<Option<Vec<u8>>>, StoreError> {
    checked_len(keys, kv.get_many(keys)?)
}

/// [`get_each`] for values the call reads again (the rows its writes replace,
/// the shards they move): kept by the store for the reads that follow.
pub(super) fn get_kept<K: Kv + ?Sized>(
    kv: &mut K,
    keys: &[Vec<u8>],
) -> Result<Vec<Option<Vec<u8>>>, StoreError> {
    checked_len(keys, kv.get_many_kept(keys)?)
}

fn checked_len(
    keys: &[Vec<u8>],
    values: Vec<Option<Vec<u8>>>,
) -> Result<Vec<Option<Vec<u8>>>, StoreError> {
    if values.len() != keys.len() {
        return Err(StoreError::Storage(
            "get-many answered another number of values than keys".to_owned(),
        ));
    }
    Ok(values)
}
