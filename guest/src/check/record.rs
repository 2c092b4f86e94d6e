//! What the walks of the change record share: where a position lies in the
//! feed as it stands (kept, trimmed, past its slot's head), how findings
//! name one, reading the entry at one, and how many entries a walk of the
//! record asks for at a time. It decides no finding of its own.

use crate::changes::slots::Slots;
use crate::kv::Kv;
use crate::model::StoreError;
#[allow(unused_imports)]
use crate::prelude::*;
use crate::schema;
use crate::store;

/// A feed position as findings name it.
pub(super) fn at(p: store::Position) -> String {
    format!("{}.{}", p.slot, p.seq)
}

/// Whether a position lies in the feed as it stands (past its slot's floor,
/// at or below its head); one at or below the floor was trimmed.
pub(super) fn kept(slots: &Slots, p: store::Position) -> bool {
    p.slot < slots.shards.count()
        && p.seq > slots.floor.get(p.slot)
        && p.seq <= slots.head.get(p.slot)
}

/// Whether a position lies past the feed as it stands: it was never given.
pub(super) fn past_head(slots: &Slots, p: store::Position) -> bool {
    p.slot >= slots.shards.count() || p.seq > slots.head.get(p.slot)
}

/// The feed entry at `p`, if it is there and decodes.
pub(super) fn feed_row<K: Kv + ?Sized>(
    kv: &mut K,
    p: store::Position,
) -> Result<Option<store::FeedRow>, StoreError> {
    Ok(kv
        .get(schema::feed_entry(p.slot, p.seq).as_bytes())?
        .and_then(|b| store::decode_feed_row(&b).ok()))
}

/// Entries per scan when walking the record: its entries may be far larger
/// than index entries.
pub(super) const RECORD_WALK: u32 = 32;
