//! Timer rows, their entries in the due index and their count of armed
//! timers.
//!
//! A timer row implies one due entry, at the instant the timer becomes
//! claimable, and every write moves that entry with the row, so the due
//! index never lists a timer at an instant its row no longer says. This
//! module stores what it is given: when a timer fires and who holds it are
//! for the timer verbs to decide, never this module.

#[allow(unused_imports)]
use crate::prelude::*;

use crate::keys::Key;
use crate::kv::Kv;
use crate::model::{StoreError, TimerEvent};
use crate::schema;

use super::codec::{RowError, corrupt, decode_row, encode_row};
use super::counters::{add_to_counter, timer_shard};
use super::layout::shards;
use super::rows::TimerRow;
use super::timer_record::record_timer;

pub fn load_timer<K: Kv + ?Sized>(
    kv: &mut K,
    run: &str,
    effect: &str,
) -> Result<Option<TimerRow>, StoreError> {
    kv.get(schema::timer(run, effect).as_bytes())?
        .map(|bytes| timer_from(run, effect, &bytes))
        .transpose()
}

/// Loads, in one batched read, the timers `(run, effect)` names, each
/// checked to be stored under its own identity.
pub fn load_timers<'a, K: Kv + ?Sized>(
    kv: &mut K,
    ids: impl Iterator<Item = (&'a str, &'a str)> + Clone,
) -> Result<Vec<Option<TimerRow>>, StoreError> {
    let keys: Vec<Vec<u8>> = ids
        .clone()
        .map(|(run, effect)| schema::timer(run, effect).into_bytes())
        .collect();
    if keys.is_empty() {
        return Ok(Vec::new());
    }
    let values = kv.get_many(&keys)?;
    ids.zip(values)
        .map(|((run, effect), v)| v.map(|bytes| timer_from(run, effect, &bytes)).transpose())
        .collect()
}

/// Decodes timer `(run, effect)`'s row, checked to be stored under its own
/// identity.
pub fn timer_from(run: &str, effect: &str, bytes: &[u8]) -> Result<TimerRow, StoreError> {
    let row = decode_timer(bytes).map_err(|e| corrupt(format!("timer {run}/{effect}: {e}")))?;
    if row.timer.run != run || row.timer.effect != effect {
        return Err(corrupt(format!(
            "timer {run}/{effect}: the row is stored under another identity"
        )));
    }
    Ok(row)
}

pub fn decode_timer(bytes: &[u8]) -> Result<TimerRow, RowError> {
    decode_row(bytes)
}

/// Writes a timer row, moving its due entry; `old` is what was stored (none
/// for a new timer, which is counted). Recorded as `what`, by `verb`.
pub fn write_timer<K: Kv + ?Sized>(
    kv: &mut K,
    verb: &'static str,
    what: TimerEvent,
    old: Option<&TimerRow>,
    new: &TimerRow,
) -> Result<(), StoreError> {
    write_timer_row(kv, old, new)?;
    record_timer(kv, verb, new, what)
}

/// [`write_timer`] without the record.
fn write_timer_row<K: Kv + ?Sized>(
    kv: &mut K,
    old: Option<&TimerRow>,
    new: &TimerRow,
) -> Result<(), StoreError> {
    let Some(o) = old else {
        let t = &new.timer;
        kv.put(
            schema::timer(&t.run, &t.effect).into_bytes(),
            encode_row(new)?,
        )?;
        kv.put(new.due_key().into_bytes(), Vec::new())?;
        let shards = shards(kv)?;
        let shard = timer_shard(kv, shards, &t.run, &t.effect);
        return add_to_counter(kv, schema::ARMED_TIMERS, shard, shards, 1);
    };
    rewrite_timer_row(kv, o.due_key(), new)
}

/// Rewrites a stored timer's row as `new`, moving its due entry from
/// `old_due` (the stored row's [`TimerRow::due_key`]), unrecorded: for a
/// caller that records the change itself in this call, with
/// [`record_timers`](super::timer_record::record_timers), before any other
/// change of the same timer.
pub fn rewrite_timer_row<K: Kv + ?Sized>(
    kv: &mut K,
    old_due: Key,
    new: &TimerRow,
) -> Result<(), StoreError> {
    let t = &new.timer;
    kv.put(
        schema::timer(&t.run, &t.effect).into_bytes(),
        encode_row(new)?,
    )?;
    let due = new.due_key();
    if old_due != due {
        kv.remove(old_due.into_bytes())?;
        kv.put(due.into_bytes(), Vec::new())?;
    }
    Ok(())
}

/// Removes a timer with its due entry and its count, recording that `verb`
/// retired it.
pub fn retire_timer<K: Kv + ?Sized>(
    kv: &mut K,
    verb: &'static str,
    row: &TimerRow,
) -> Result<(), StoreError> {
    remove_timer(kv, verb, row)?;
    let t = &row.timer;
    let shards = shards(kv)?;
    let shard = timer_shard(kv, shards, &t.run, &t.effect);
    add_to_counter(kv, schema::ARMED_TIMERS, shard, shards, -1)
}

/// Removes a timer with its due entry, recording that `verb` retired it,
/// and leaves its count to the caller, who moves many timers' shards at
/// once with [`add_to_shards`](super::counters::add_to_shards).
pub fn remove_timer<K: Kv + ?Sized>(
    kv: &mut K,
    verb: &'static str,
    row: &TimerRow,
) -> Result<(), StoreError> {
    let t = &row.timer;
    kv.delete(schema::timer(&t.run, &t.effect).as_bytes())?;
    kv.delete(row.due_key().as_bytes())?;
    record_timer(kv, verb, row, TimerEvent::Retired)
}
