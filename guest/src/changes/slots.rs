//! The feed's slots as a read finds them: each slot's head and floor, read
//! in one batch with the layout mark, and a stream per slot that reads its
//! entries a chunk at a time, in order, refusing a gap as damage. What the
//! reads of the record take in at a time is decided here too. It reads
//! only, and never judges which entry a reader is given.

#[allow(unused_imports)]
use crate::prelude::*;
use alloc::collections::VecDeque;

use crate::keys::Elem;
use crate::kv::Kv;
use crate::model::StoreError;
use crate::schema::{self, Shards};
use crate::store::{self, FeedRow, decode_seq};

use super::cursor::Cursor;

/// Entries asked for per scan of the record: small enough that a scan of
/// the largest entries the input rules allow stays far inside a host's
/// per-scan byte cap.
pub(super) const RECORD_CHUNK: u32 = 64;

/// Bytes of entries a read takes in before it stops short of its limit
/// (always after at least one entry), so that a page of large entries
/// stays far inside a host's per-call read budget.
pub(super) const READ_BUDGET: usize = 8 << 20;

/// The heads and floors of every slot of the keyspace, read in one batch
/// with the layout mark; `None` for a keyspace not laid out yet.
pub(crate) struct Slots {
    pub(crate) shards: Shards,
    pub(crate) head: Cursor,
    pub(crate) floor: Cursor,
}

pub(crate) fn read_slots<K: Kv + ?Sized>(kv: &mut K) -> Result<Option<Slots>, StoreError> {
    let expected = store::expected_shards(kv);
    let mut keys = vec![schema::layout().into_bytes()];
    keys.extend((0..expected.count()).map(|s| schema::feed_head(expected, s).into_bytes()));
    keys.extend((0..expected.count()).map(|s| schema::feed_floor(s).into_bytes()));
    let values = kv.get_many(&keys)?;
    if values.len() != keys.len() {
        return Err(StoreError::Storage(
            "get-many answered another number of values than keys".to_owned(),
        ));
    }
    let Some(shards) = store::known_layout(values[0].as_deref())? else {
        return Ok(None);
    };
    let n = usize::from(expected.count());
    let mut heads: Vec<Option<Vec<u8>>> = values[1..=n].to_vec();
    let mut floors: Vec<Option<Vec<u8>>> = values[n + 1..].to_vec();
    // A keyspace laid out otherwise than its host would lay one out: its
    // heads are spelt as its mark says, and it may have more slots.
    let from = if shards.beside() == expected.beside() {
        expected.count().min(shards.count())
    } else {
        heads.clear();
        floors.clear();
        0
    };
    if shards.count() > from {
        let rest: Vec<Vec<u8>> = (from..shards.count())
            .flat_map(|s| {
                [
                    schema::feed_head(shards, s).into_bytes(),
                    schema::feed_floor(s).into_bytes(),
                ]
            })
            .collect();
        let more = kv.get_many(&rest)?;
        if more.len() != rest.len() {
            return Err(StoreError::Storage(
                "get-many answered another number of values than keys".to_owned(),
            ));
        }
        for pair in more.chunks(2) {
            heads.push(pair[0].clone());
            floors.push(pair[1].clone());
        }
    }
    let mut slots = Slots {
        shards,
        head: Cursor::START,
        floor: Cursor::START,
    };
    for s in 0..shards.count() {
        let i = usize::from(s);
        let head = decode_seq(&format!("the feed head of slot {s}"), heads[i].as_deref())?;
        let floor = decode_seq(&format!("the feed floor of slot {s}"), floors[i].as_deref())?;
        if floor > head {
            return Err(StoreError::Corrupt(format!(
                "slot {s} of the feed is trimmed to {floor}, past its head {head}"
            )));
        }
        slots.head.set(s, head);
        slots.floor.set(s, floor);
    }
    Ok(Some(slots))
}

/// One slot's entries, read a chunk at a time from just after `next`.
pub(super) struct Stream {
    pub(super) slot: u8,
    /// The last sequence number read from storage.
    read: u64,
    head: u64,
    pub(super) buffered: VecDeque<(u64, FeedRow)>,
}

impl Stream {
    pub(super) fn more(&self) -> bool {
        self.read < self.head
    }

    /// Reads up to `chunk` more entries; answers the bytes read.
    pub(super) fn fill<K: Kv + ?Sized>(
        &mut self,
        kv: &mut K,
        chunk: u32,
    ) -> Result<usize, StoreError> {
        let want = chunk.min(u32::try_from(self.head - self.read).unwrap_or(u32::MAX));
        let start = schema::feed_entry(self.slot, self.read + 1);
        // Up to the head, never past it: with the record beside, the head's
        // own key follows the slot's entries.
        let end = schema::feed_entry(self.slot, self.head + 1).into_bytes();
        let prefix = schema::feed_slot(self.slot);
        let entries = kv.scan(start.as_bytes(), Some(&end), want, false)?;
        let mut bytes = 0;
        for (k, v) in entries {
            bytes += k.len() + v.len();
            let seq = match store::suffix(&k, &prefix)?.as_slice() {
                [Elem::Int(q)] if *q > 0 => *q as u64,
                _ => return Err(store::bad_entry("feed")),
            };
            if seq != self.read + 1 {
                return Err(StoreError::Corrupt(format!(
                    "slot {} of the feed has no entry {} below its head {}",
                    self.slot,
                    self.read + 1,
                    self.head
                )));
            }
            let row = store::decode_feed_row(&v)
                .map_err(|e| StoreError::Corrupt(format!("feed entry {}.{seq}: {e}", self.slot)))?;
            self.read = seq;
            self.buffered.push_back((seq, row));
        }
        if self.buffered.is_empty() && self.more() {
            return Err(StoreError::Corrupt(format!(
                "slot {} of the feed has no entry {} below its head {}",
                self.slot,
                self.read + 1,
                self.head
            )));
        }
        Ok(bytes)
    }
}

/// The streams of every slot with entries after `from`.
pub(super) fn streams(slots: &Slots, from: &Cursor) -> Vec<Stream> {
    (0..slots.shards.count())
        .filter(|&s| slots.head.get(s) > from.get(s))
        .map(|s| Stream {
            slot: s,
            read: from.get(s),
            head: slots.head.get(s),
            buffered: VecDeque::new(),
        })
        .collect()
}

/// How many entries to read per slot at first, for a read of `limit`
/// entries over `active` slots.
pub(super) fn first_chunk(limit: u32, active: usize) -> u32 {
    let per = limit / u32::try_from(active.max(1)).unwrap_or(u32::MAX) + 1;
    per.clamp(1, RECORD_CHUNK)
}
