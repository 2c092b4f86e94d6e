//! The feed: each slot holds every number from its floor to its head and
//! nothing else, each entry decodes and follows an earlier change of its own
//! task or timer, and a task's entry is the change its history records
//! (where the history keeps a key of its own), within what the task's log
//! says its history holds. Where history is kept in the feed (layout 9) it
//! counts the changes within the tasks' kept histories, for the walk of the
//! logs to reach as many.

use crate::changes::slots::Slots;
use crate::keys::Elem;
use crate::kv::Kv;
use crate::model::{Change, StoreError};
#[allow(unused_imports)]
use crate::prelude::*;
use crate::schema::{self, Shards};
use crate::store;

use super::record::{RECORD_WALK, at, feed_row, kept, past_head};
use super::walk::{Findings, decoded, read_ahead, text};

/// Walks the feed: each slot holds every number from its floor to its
/// head, each entry decodes, follows an earlier change of its own task or
/// timer, and (for a task) is the change its history entry records.
pub(super) fn check_feed<K: Kv + ?Sized>(
    kv: &mut K,
    f: &mut Findings,
    slots: &Slots,
    mut in_histories: Option<&mut u64>,
) -> Result<(), StoreError> {
    let prefix = schema::feed();
    // The next number each slot should hold.
    let mut next: [u64; schema::MAX_SHARDS as usize] = [0; schema::MAX_SHARDS as usize];
    for s in 0..slots.shards.count() {
        next[usize::from(s)] = slots.floor.get(s) + 1;
    }
    // Ahead of each chunk: the entries each follows and the logs of their
    // tasks, then the history entries of their changes.
    let ahead = |kv: &mut K, chunk: &[crate::kv::Entry]| {
        let mut keys = Vec::new();
        let mut changes = Vec::new();
        for (_, value) in chunk {
            let Ok(row) = store::decode_feed_row(value) else {
                continue;
            };
            if let Some(prev) = row.prev
                && kept(slots, prev)
            {
                keys.push(schema::feed_entry(prev.slot, prev.seq).into_bytes());
            }
            if let Change::Task(t) = row.change {
                keys.push(schema::task_log(slots.shards, &t.id).into_bytes());
                changes.push((t.id, t.entry.seq));
            }
        }
        read_ahead(kv, keys)?;
        let keys = changes
            .iter()
            .map(|(id, seq)| schema::history_entry(slots.shards, id, *seq).into_bytes())
            .collect();
        read_ahead(kv, keys)
    };
    store::walk_ahead(kv, &prefix, RECORD_WALK, ahead, |kv, key, value| {
        let Some(elems) = decoded(f, "feed", &key, &prefix) else {
            return Ok(!f.full());
        };
        let p = match elems.as_slice() {
            // A slot's head, beside its entries: read with the heads, so
            // only one of a slot the keyspace does not have is news here.
            [Elem::Int(s), Elem::Int(schema::FEED_HEAD_SEQ)] if slots.shards.beside() => {
                if !u8::try_from(*s).is_ok_and(|slot| slot < slots.shards.count()) {
                    f.add("feed", &text(&elems), "a head outside the feed's slots");
                }
                return Ok(!f.full());
            }
            [Elem::Int(s), Elem::Int(q)] => match (u8::try_from(*s), u64::try_from(*q)) {
                (Ok(slot), Ok(seq)) if slot < slots.shards.count() => store::Position { slot, seq },
                _ => {
                    f.add("feed", &text(&elems), "an entry outside the feed's slots");
                    return Ok(!f.full());
                }
            },
            other => {
                f.add("feed", &text(other), "a feed key has the wrong shape");
                return Ok(!f.full());
            }
        };
        let n = &mut next[usize::from(p.slot)];
        if p.seq < *n {
            f.add(
                "feed",
                &at(p),
                "an entry at or below its slot's floor was kept",
            );
            return Ok(!f.full());
        }
        if p.seq > slots.head.get(p.slot) {
            f.add("feed", &at(p), "an entry past its slot's head");
            return Ok(!f.full());
        }
        if p.seq > *n {
            f.add(
                "feed",
                &at(store::Position {
                    slot: p.slot,
                    seq: *n,
                }),
                format!("entries {} to {} of the slot are missing", *n, p.seq - 1),
            );
        }
        *n = p.seq + 1;
        let row = match store::decode_feed_row(&value) {
            Ok(row) => row,
            Err(e) => {
                f.add("feed", &at(p), format!("the entry does not decode: {e}"));
                return Ok(!f.full());
            }
        };
        check_prev(kv, f, slots, p, &row)?;
        if let Change::Task(t) = &row.change {
            check_feed_task(
                kv,
                f,
                slots.shards,
                p,
                &t.id,
                &t.entry,
                in_histories.as_deref_mut(),
            )?;
        }
        Ok(!f.full())
    })?;
    for s in 0..slots.shards.count() {
        let n = next[usize::from(s)];
        if n <= slots.head.get(s) {
            f.add(
                "feed",
                &at(store::Position { slot: s, seq: n }),
                format!(
                    "entries {n} to {} of the slot are missing",
                    slots.head.get(s)
                ),
            );
        }
    }
    Ok(())
}

/// The entry an entry follows: earlier, and a change of the same task or
/// timer (where it is still kept).
fn check_prev<K: Kv + ?Sized>(
    kv: &mut K,
    f: &mut Findings,
    slots: &Slots,
    p: store::Position,
    row: &store::FeedRow,
) -> Result<(), StoreError> {
    let Some(prev) = row.prev else {
        return Ok(());
    };
    if past_head(slots, prev) || (prev.slot == p.slot && prev.seq >= p.seq) {
        f.add(
            "feed",
            &at(p),
            format!("the entry follows {}, which is not before it", at(prev)),
        );
        return Ok(());
    }
    if !kept(slots, prev) {
        return Ok(());
    }
    let same = match (feed_row(kv, prev)?, &row.change) {
        (None, _) => false,
        (Some(earlier), Change::Task(t)) => {
            matches!(&earlier.change, Change::Task(e) if e.id == t.id && e.entry.seq < t.entry.seq)
        }
        (Some(earlier), Change::Timer(t)) => {
            matches!(&earlier.change, Change::Timer(e) if e.run == t.run && e.effect == t.effect)
        }
    };
    if !same {
        f.add(
            "feed",
            &at(p),
            format!(
                "the entry follows {}, which is no earlier change of the same task or timer",
                at(prev)
            ),
        );
    }
    Ok(())
}

/// A task's feed entry and its history entry (while kept) record one change
/// and name each other; where history is kept in the feed (`in_histories`
/// is given), a change need not have a history key of its own, and each
/// within its task's kept history is counted, to be reached from the task's
/// log.
fn check_feed_task<K: Kv + ?Sized>(
    kv: &mut K,
    f: &mut Findings,
    sh: Shards,
    p: store::Position,
    id: &str,
    entry: &crate::model::HistoryEntry,
    in_histories: Option<&mut u64>,
) -> Result<(), StoreError> {
    let in_feed = in_histories.is_some();
    let log = kv
        .get(schema::task_log(sh, id).as_bytes())?
        .and_then(|b| store::decode_task_log(&b).ok());
    let Some(log) = log else {
        f.add(
            "feed",
            &at(p),
            format!("a change of task {id}, which has no history"),
        );
        return Ok(());
    };
    if entry.seq > log.last {
        f.add(
            "feed",
            &at(p),
            format!(
                "change {} of task {id}, whose history ends at {}",
                entry.seq, log.last
            ),
        );
        return Ok(());
    }
    if entry.seq < log.first {
        return Ok(());
    }
    if let Some(n) = in_histories {
        *n += 1;
    }
    if in_feed && entry.seq == log.last && log.position != p {
        f.add(
            "feed",
            &at(p),
            format!(
                "change {} of task {id}, whose log says it is at {}",
                entry.seq,
                at(log.position)
            ),
        );
        return Ok(());
    }
    let history = kv
        .get(schema::history_entry(sh, id, entry.seq).as_bytes())?
        .and_then(|b| store::decode_history(&b).ok());
    match history {
        Some(h) if h.position == p && h.entry == *entry => {}
        Some(h) if h.position != p => f.add(
            "feed",
            &at(p),
            format!(
                "change {} of task {id}, whose history entry was recorded at {}",
                entry.seq,
                at(h.position)
            ),
        ),
        Some(_) => f.add(
            "feed",
            &at(p),
            format!(
                "change {} of task {id} differs from its history entry",
                entry.seq
            ),
        ),
        // Kept in the feed: the walk of the logs reaches it.
        None if in_feed => {}
        None => f.add(
            "feed",
            &at(p),
            format!(
                "change {} of task {id} is missing from its history",
                entry.seq
            ),
        ),
    }
    Ok(())
}
