//! The timers: each row decodes, is stored under its identity, has its entry
//! in the due index (and, where every change is recorded, a record), and
//! every due entry names a timer claimable at its instant. It counts the
//! rows for the counters' check.

use crate::keys::Elem;
use crate::kv::Kv;
use crate::model::StoreError;
#[allow(unused_imports)]
use crate::prelude::*;
use crate::schema::{self, Shards};
use crate::store;

use super::counters::{PerShard, tally};
use super::walk::{Findings, decoded, read_ahead, text};

/// Checks every timer row and due entry, answering how many timer rows count
/// in each shard.
pub(super) fn check_timers<K: Kv + ?Sized>(
    kv: &mut K,
    f: &mut Findings,
    shards: Shards,
    every: bool,
) -> Result<PerShard, StoreError> {
    let mut armed: PerShard = [0; schema::MAX_SHARDS as usize];
    let prefix = schema::timers();
    let ahead = |kv: &mut K, chunk: &[crate::kv::Entry]| {
        let mut keys = Vec::new();
        for (_, value) in chunk {
            if let Ok(row) = store::decode_timer(value) {
                keys.push(row.due_key().into_bytes());
                if every {
                    keys.push(schema::timer_log(&row.timer.run, &row.timer.effect).into_bytes());
                }
            }
        }
        read_ahead(kv, keys)
    };
    store::walk_ahead(kv, &prefix, store::SCAN_CHUNK, ahead, |kv, key, value| {
        let Some(elems) = decoded(f, "timer", &key, &prefix) else {
            return Ok(!f.full());
        };
        let subject = text(&elems);
        let [Elem::Str(run), Elem::Str(effect)] = elems.as_slice() else {
            f.add("timer", &subject, "a timer key has the wrong shape");
            return Ok(!f.full());
        };
        armed[tally(shards, || shards.timer(run, effect))] += 1;
        match store::decode_timer(&value) {
            Err(e) => f.add("timer", &subject, format!("the row does not decode: {e}")),
            Ok(row) => {
                if schema::timer(&row.timer.run, &row.timer.effect).as_bytes() != key.as_slice() {
                    f.add("timer", &subject, "the row names another identity");
                }
                if kv.get(row.due_key().as_bytes())?.is_none() {
                    f.add(
                        "due-index",
                        &subject,
                        format!("no entry at {} for this timer", row.claimable_at()),
                    );
                }
                if every && kv.get(schema::timer_log(run, effect).as_bytes())?.is_none() {
                    f.add(
                        "timer-log",
                        &subject,
                        "the timer has no record in a keyspace that records every change",
                    );
                }
            }
        }
        Ok(!f.full())
    })?;
    let due = schema::due();
    let ahead = |kv: &mut K, chunk: &[crate::kv::Entry]| {
        let keys = chunk
            .iter()
            .filter_map(|(key, _)| match store::suffix(key, &due).ok()?.as_slice() {
                [Elem::Int(_), Elem::Str(run), Elem::Str(effect)] => {
                    Some(schema::timer(run, effect).into_bytes())
                }
                _ => None,
            })
            .collect();
        read_ahead(kv, keys)
    };
    store::walk_ahead(kv, &due, store::SCAN_CHUNK, ahead, |kv, key, _| {
        let Some(elems) = decoded(f, "due-index", &key, &due) else {
            return Ok(!f.full());
        };
        let [Elem::Int(_), Elem::Str(run), Elem::Str(effect)] = elems.as_slice() else {
            f.add("due-index", &text(&elems), "an entry has the wrong shape");
            return Ok(!f.full());
        };
        match kv.get(schema::timer(run, effect).as_bytes())? {
            None => f.add(
                "due-index",
                &text(&elems),
                "an entry for a timer with no row",
            ),
            Some(bytes) => {
                if let Ok(row) = store::decode_timer(&bytes)
                    && row.due_key().as_bytes() != key.as_slice()
                {
                    f.add(
                        "due-index",
                        &text(&elems),
                        format!("the row is claimable at {}, not here", row.claimable_at()),
                    );
                }
            }
        }
        Ok(!f.full())
    })?;
    Ok(armed)
}
