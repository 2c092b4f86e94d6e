//! The stored form of a row, and how damage is named.
//!
//! Rows are postcard, decoded whole: bytes that do not decode, or bytes left
//! over after the row, make the row `corrupt`, never a default or a partial
//! value. From layout 10 a row that gained fields is its layout-9 encoding
//! (its *base*) followed by an *extension*: a postcard struct of the fields
//! the layout adds ([`encode_extended`], [`decode_extended_tail`]). Nothing after
//! the base is a row an earlier build wrote, read with the extension's
//! defaults; bytes after the extension are damage. A later layout appends
//! an extension of its own after this one, the same way, so no earlier row
//! is ever rewritten to be read. This module knows no key and no kind of
//! row, and never reads or writes the store; the row modules call it on
//! their way in and out.

#[allow(unused_imports)]
use crate::prelude::*;

use serde::{Deserialize, Serialize};

use crate::model::StoreError;

pub(super) fn corrupt(what: impl core::fmt::Display) -> StoreError {
    StoreError::Corrupt(what.to_string())
}

/// Why a stored row does not decode.
#[derive(Debug)]
pub struct RowError(String);

impl core::fmt::Display for RowError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Rows are postcard: each field in declaration order, integers as varints,
/// strings and lists length-prefixed, enums by variant index. So a field is
/// only ever added at the end of a row, a variant only after the others, and
/// either means a new layout version.
pub fn encode_row(row: &impl Serialize) -> Result<Vec<u8>, StoreError> {
    postcard::to_allocvec(row).map_err(|e| StoreError::Storage(format!("cannot encode a row: {e}")))
}

/// Decodes a whole row: bytes left over mean the row is not what it seems.
pub(super) fn decode_row<T: for<'de> Deserialize<'de>>(bytes: &[u8]) -> Result<T, RowError> {
    match postcard::take_from_bytes::<T>(bytes) {
        Ok((row, [])) => Ok(row),
        Ok((_, rest)) => Err(RowError(format!(
            "{} bytes left over after the row",
            rest.len()
        ))),
        Err(e) => Err(RowError(e.to_string())),
    }
}

/// Decodes a base, its extension and the extension's tail: a field added
/// to the layout after its extension was first written goes in the tail,
/// so that each part absent reads with its defaults (a row written before
/// it), and bytes left after the tail are damage.
pub(super) fn decode_extended_tail<B, E, T>(bytes: &[u8]) -> Result<(B, E, T), RowError>
where
    B: for<'de> Deserialize<'de>,
    E: for<'de> Deserialize<'de> + Default,
    T: for<'de> Deserialize<'de> + Default,
{
    let (base, rest) =
        postcard::take_from_bytes::<B>(bytes).map_err(|e| RowError(e.to_string()))?;
    if rest.is_empty() {
        return Ok((base, E::default(), T::default()));
    }
    let (ext, rest) = postcard::take_from_bytes::<E>(rest)
        .map_err(|e| RowError(format!("the row's extension: {e}")))?;
    if rest.is_empty() {
        return Ok((base, ext, T::default()));
    }
    match postcard::take_from_bytes::<T>(rest) {
        Ok((tail, [])) => Ok((base, ext, tail)),
        Ok((_, left)) => Err(RowError(format!(
            "{} bytes left over after the row's extension",
            left.len()
        ))),
        Err(e) => Err(RowError(format!("the row's extension's tail: {e}"))),
    }
}
