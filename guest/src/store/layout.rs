//! The layout mark: which layout a keyspace is in, and how many shards its
//! counters have.
//!
//! Every verb checks the mark before it trusts a row or a shard. A writing
//! verb marks a fresh keyspace, and the first change this component records
//! in a keyspace of an earlier layout moves its mark to this component's
//! version in the same transaction ([`claim_layout`]), keeping the keys'
//! spelling and recording where it came from, so a build that knows only
//! the earlier layout refuses to write it rather than diverge. Reads never
//! move a mark. A mark of a newer version is refused as `newer-layout`,
//! naming both; one this component does not read otherwise is refused by
//! name as corrupt, never read as another layout.

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
        // Nothing in it predates search: its search entries are built.
        kv.set(schema::search_built().as_bytes(), schema::SEARCH_BUILT)?;
    }
    Ok(())
}

/// Moves the mark of a keyspace of an earlier layout to this component's
/// version, in the call that records a change: from then on a build that
/// knows only the earlier layout refuses the keyspace instead of writing
/// changes the record never sees. The mark was read by the verb's first
/// batch, so this reads the call's buffer; it writes only when the mark
/// moves.
pub fn claim_layout<K: Kv + ?Sized>(kv: &mut K) -> Result<(), StoreError> {
    let key = schema::layout().into_bytes();
    let mark = kv.get(&key)?;
    if let Some(mark) = mark.as_deref().map(parse_mark).transpose()?
        && mark.version < schema::LAYOUT_VERSION
    {
        kv.set(&key, mark.moved().as_bytes())?;
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
/// laid out (layout 6 and later, or a keyspace moved from one), so that every
/// row must have a history. A mark that does not parse records nothing.
pub fn records_from_the_start(mark: Option<&[u8]>) -> bool {
    mark.and_then(|m| parse_mark(m).ok())
        .is_some_and(|m| m.records_every_change())
}

/// Whether a keyspace with this mark keeps its tasks' history in its feed
/// (layout 9 and later): a change's history entry is its feed entry, found
/// by following the task's changes back from its log, and a history key is
/// written only for an entry that leaves the feed while it is its task's
/// last, or that an earlier layout wrote. Earlier marks keep a history key
/// per change. A mark that does not parse keeps nothing in the feed.
pub fn history_in_feed(mark: Option<&[u8]>) -> bool {
    mark.and_then(|m| parse_mark(m).ok())
        .is_some_and(|m| m.version >= 9)
}

/// The shards the stored layout mark records, if it is one this component
/// reads, or `None` for a fresh keyspace. Split from [`check_layout`] so the
/// mark can ride in a batch a verb reads anyway.
pub fn known_layout(mark: Option<&[u8]>) -> Result<Option<Shards>, StoreError> {
    mark.map(|v| parse_mark(v).map(|m| m.shards)).transpose()
}

/// A layout mark this component reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Mark {
    /// The version it names: 3 to [`schema::LAYOUT_VERSION`].
    version: u32,
    shards: Shards,
    /// For a mark of layout 8 or later, the earlier layout the keyspace was
    /// laid out in, whose spelling it keeps (3 to 6); `None` for one laid
    /// out as layout 7 or later.
    origin: Option<u32>,
}

impl Mark {
    /// The layout whose shape the keyspace has: its origin, or its version.
    fn shape(self) -> u32 {
        self.origin.unwrap_or(self.version)
    }

    fn records_every_change(self) -> bool {
        self.shape() >= 6
    }

    /// This mark moved to this component's version, keeping the shape.
    fn moved(self) -> String {
        let origin = self.origin.or((self.version < 7).then_some(self.version));
        schema::layout_mark_from(self.shards, origin)
    }
}

/// The number a mark's version is spelt as: ASCII digits, no leading zero.
fn version_of(v: &[u8]) -> Option<u32> {
    let digits = v.split(|&b| b == b'/').next()?;
    let text = core::str::from_utf8(digits).ok()?;
    if text.is_empty() || text.starts_with('0') || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

/// Only the canonical spelling of a count is read as it: no sign, no
/// leading zero, nothing after it.
fn count_of(n: &[u8]) -> Option<u8> {
    core::str::from_utf8(n)
        .ok()
        .filter(|n| !n.starts_with(['0', '+']))
        .and_then(|n| n.parse::<u8>().ok())
        .filter(|n| (1..=schema::MAX_SHARDS).contains(n))
}

fn parse_mark(v: &[u8]) -> Result<Mark, StoreError> {
    let newest = schema::LAYOUT_VERSION;
    let named = String::from_utf8_lossy(v);
    let no_count = || {
        corrupt(format!(
            "the layout mark {named:?} does not name a shard count from 1 to {}",
            schema::MAX_SHARDS
        ))
    };
    let version = version_of(v);
    if let Some(found) = version.filter(|&n| n > newest) {
        return Err(StoreError::NewerLayout(format!(
            "the keyspace has layout {found} (mark {named:?}), written by a newer Leasehold build; \
             this component writes layout {newest} and reads only layouts 3 to {newest}: \
             upgrade this host to the build that wrote it, or a later one"
        )));
    }
    let shape = |origin: u32, n: u8| match origin {
        3 | 4 => Shards::by_row(n),
        5 | 6 => Shards::record_apart(n),
        _ => Shards::new(n),
    };
    match (version, v) {
        (Some(3), b"3") => Ok(Mark {
            version: 3,
            shards: Shards::by_row(schema::MAX_SHARDS).expect("64 is a shard count"),
            origin: None,
        }),
        (Some(version @ 4..=7), _) => {
            let n = match v {
                [_, b'/', n @ ..] => count_of(n),
                _ => None,
            };
            let n = n.ok_or_else(no_count)?;
            let shards = shape(version, n).ok_or_else(no_count)?;
            Ok(Mark {
                version,
                shards,
                origin: None,
            })
        }
        (Some(version @ 8..), _) => {
            // `9/64`, or `9/64/from-5` for a keyspace moved from layout 5.
            let text = core::str::from_utf8(v).map_err(|_| no_count())?;
            let mut parts = text.split('/').skip(1);
            let n = parts.next().and_then(|n| count_of(n.as_bytes()));
            let n = n.ok_or_else(no_count)?;
            let origin = match parts.next() {
                None => None,
                Some(from) => Some(
                    from.strip_prefix("from-")
                        .and_then(|o| o.parse::<u32>().ok())
                        .filter(|o| (3..=6).contains(o) && from.len() == 6)
                        .ok_or_else(|| {
                            corrupt(format!(
                                "the layout mark {named:?} names no earlier layout from 3 to 6"
                            ))
                        })?,
                ),
            };
            if parts.next().is_some() {
                return Err(corrupt(format!(
                    "the layout mark {named:?} has more parts than a version, a count and an origin"
                )));
            }
            let shards = shape(origin.unwrap_or(version), n).ok_or_else(no_count)?;
            Ok(Mark {
                version,
                shards,
                origin,
            })
        }
        _ => Err(match v {
            b"1" => corrupt(format!(
                "the keyspace has layout 1 (JSON rows, written by Leasehold 0.1); this component \
                 reads only layouts 3 to {newest}: export the data with the 0.1 component and \
                 open it again"
            )),
            b"2" => corrupt(format!(
                "the keyspace has layout 2 (single-key counters, written by an earlier Leasehold \
                 0.2 build); this component reads only layouts 3 to {newest} (sharded counters): \
                 export the data with that build and open it again"
            )),
            _ => corrupt(format!(
                "the keyspace has layout {named:?}; this component knows layouts 3 to {newest}"
            )),
        }),
    }
}
