//! Reading the due index: the shape of its entries and the check that an
//! entry and its timer's row agree. Shared by claiming and listing; it
//! writes nothing.

use crate::prelude::*;

use crate::keys::{Elem, Key};
use crate::model::{StoreError, Timestamp};
use crate::store::{self, TimerRow};

/// The `(claimable-at, run, effect)` of an entry of the due index under
/// `prefix`.
pub(super) fn due_entry(
    key: &[u8],
    prefix: &Key,
) -> Result<(Timestamp, String, String), StoreError> {
    let mut elems = store::suffix(key, prefix)?.into_iter();
    match (elems.next(), elems.next(), elems.next(), elems.next()) {
        (Some(Elem::Int(at)), Some(Elem::Str(run)), Some(Elem::Str(effect)), None) => {
            Ok((at, run, effect))
        }
        _ => Err(StoreError::Corrupt(
            "an entry of the due index has the wrong shape".into(),
        )),
    }
}

/// The row of a timer the due index lists at `at`: there, and claimable
/// then, or the index and the rows disagree.
pub(super) fn indexed_row(
    row: Option<TimerRow>,
    at: Timestamp,
    run: &str,
    effect: &str,
) -> Result<TimerRow, StoreError> {
    let row = row.ok_or_else(|| {
        StoreError::Corrupt(format!(
            "the due index lists timer {run}/{effect}, which has no row"
        ))
    })?;
    if row.claimable_at() != at {
        return Err(StoreError::Corrupt(format!(
            "the due index lists timer {run}/{effect} at {at}, its row at {}",
            row.claimable_at()
        )));
    }
    Ok(row)
}
