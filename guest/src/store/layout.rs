//! The layout mark: which layout a keyspace is in, and how many shards its
//! counters have.
//!
//! Every verb checks the mark before it trusts a row or a shard, and only a
//! writing verb marks a fresh keyspace; a mark already there is never
//! rewritten, so hosts with an earlier component keep working beside this
//! one. A mark this component does not read is refused by name, never read
//! as another layout.

#[allow(unused_imports)]
use crate::prelude::*;

use crate::kv::Kv;
use crate::model::StoreError;
use crate::schema::{self, Shards};

use super::codec::corrupt;

/// Refuses a keyspace written in a layout this component does not read, and
/// marks a fresh one when `writing`, with the shards its host asks for. The
/// mark stays in the call's buffer, where [`shards`] finds it again. A
/// writing call reads its slot's feed head in the same batch, since it
/// records what it changes.
pub fn check_layout<K: Kv + ?Sized>(kv: &mut K, writing: bool) -> Result<(), StoreError> {
    let key = schema::layout().into_bytes();
    if writing {
        let head = expected_feed_head(kv);
        kv.prefetch(&[key.clone(), head])?;
    } else {
        kv.prefetch(core::slice::from_ref(&key))?;
    }
    let mark = kv.get(&key)?;
    known_layout(mark.as_deref())?;
    if mark.is_none() && writing {
        let shards = expected_shards(kv);
        kv.set(&key, schema::layout_mark(shards).as_bytes())?;
    }
    Ok(())
}

/// The shards of the keyspace's counters: what its mark says or, for a
/// keyspace not laid out yet, what its host asks for. A writing verb has read
/// or written the mark before it writes, so the buffer answers this.
pub fn shards<K: Kv + ?Sized>(kv: &mut K) -> Result<Shards, StoreError> {
    let mark = kv.get(schema::layout().as_bytes())?;
    layout_shards(kv, mark.as_deref())
}

/// [`shards`], given the mark as read in a batch.
pub(super) fn layout_shards<K: Kv + ?Sized>(
    kv: &mut K,
    mark: Option<&[u8]>,
) -> Result<Shards, StoreError> {
    Ok(match known_layout(mark)? {
        Some(shards) => shards,
        None => expected_shards(kv),
    })
}

/// The shards a verb reads ahead for before it has read the mark: those of
/// every keyspace its host laid out. Where the mark says otherwise, the verb
/// follows the mark and reads what it then needs.
pub fn expected_shards<K: Kv + ?Sized>(kv: &mut K) -> Shards {
    Shards::for_host(kv.concurrent_writers())
}

/// The key of the feed head a writing call of this host appends after, in a
/// keyspace laid out as its host would lay it out: read ahead with a verb's
/// first batch. Where the mark says otherwise the call reads the head it
/// then needs.
pub fn expected_feed_head<K: Kv + ?Sized>(kv: &mut K) -> Vec<u8> {
    let shards = expected_shards(kv);
    schema::feed_head(shards, feed_slot_of(kv, shards)).into_bytes()
}

/// The feed slot this call appends to, among `shards`: its writer slot,
/// folded to the keyspace's count, asked of the host only where there is
/// more than one.
pub fn feed_slot_of<K: Kv + ?Sized>(kv: &mut K, shards: Shards) -> u8 {
    if shards.count() == 1 {
        0
    } else {
        shards.writer(kv.writer_slot())
    }
}

/// Whether a keyspace with this mark has recorded every change since it was
/// laid out (layouts 6 and 7), so that every row must have a history.
pub fn records_from_the_start(mark: Option<&[u8]>) -> bool {
    mark.is_some_and(|m| m.starts_with(b"6/") || m.starts_with(b"7/"))
}

/// The shards the stored layout mark records, if it is one this component
/// reads, or `None` for a fresh keyspace. Split from [`check_layout`] so the
/// mark can ride in a batch a verb reads anyway.
pub fn known_layout(mark: Option<&[u8]>) -> Result<Option<Shards>, StoreError> {
    let Some(v) = mark else {
        return Ok(None);
    };
    if v == b"3" {
        return Ok(Some(
            Shards::by_row(schema::MAX_SHARDS).expect("64 is a shard count"),
        ));
    }
    let counted = match v {
        [b'4', b'/', n @ ..] => Some((n, Shards::by_row as fn(u8) -> Option<Shards>)),
        [b'5' | b'6', b'/', n @ ..] => Some((n, Shards::record_apart as fn(u8) -> Option<Shards>)),
        [b'7', b'/', n @ ..] => Some((n, Shards::new as fn(u8) -> Option<Shards>)),
        _ => None,
    };
    if let Some((n, shards)) = counted {
        // Only the canonical spelling of a count is read as it: no sign, no
        // leading zero, nothing after it.
        let shards = core::str::from_utf8(n)
            .ok()
            .filter(|n| !n.starts_with(['0', '+']))
            .and_then(|n| n.parse::<u8>().ok())
            .and_then(shards);
        return shards.map(Some).ok_or_else(|| {
            corrupt(format!(
                "the layout mark {:?} does not name a shard count from 1 to {}",
                String::from_utf8_lossy(v),
                schema::MAX_SHARDS
            ))
        });
    }
    Err(match v {
        b"1" => corrupt(format!(
            "the keyspace has layout 1 (JSON rows, written by Leasehold 0.1); this component \
             reads only layouts 3 to {}: export the data with the 0.1 component and open it \
             again",
            schema::LAYOUT_VERSION
        )),
        b"2" => corrupt(format!(
            "the keyspace has layout 2 (single-key counters, written by an earlier Leasehold \
             0.2 build); this component reads only layouts 3 to {} (sharded counters): export \
             the data with that build and open it again",
            schema::LAYOUT_VERSION
        )),
        _ => corrupt(format!(
            "the keyspace has layout {:?}; this component knows layouts 3 to {}",
            String::from_utf8_lossy(v),
            schema::LAYOUT_VERSION
        )),
    })
}
