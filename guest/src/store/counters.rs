//! The sharded counters (open tasks, leased claims, armed timers): a
//! counter's value is the sum of its shards, and a call moves only the shard
//! its writer slot or its row names.
//!
//! This module moves a shard by the delta it is given and never decides
//! one: which rows count is for the row modules to say. A shard that is not
//! eight bytes, or that goes below zero where shards are spread by row, is
//! damage, never zero.

#[allow(unused_imports)]
use crate::prelude::*;

use crate::kv::Kv;
use crate::model::StoreError;
use crate::schema::{self, Shards};

use super::batch::get_each;
use super::codec::corrupt;
use super::layout::{expected_shards, layout_shards};

/// A stored shard: absent is zero, anything but eight bytes is damage, and
/// so is a shard below zero where shards are spread by row (there every
/// shard counts rows of its own).
fn shard_value(
    name: &str,
    shard: u8,
    value: Option<&[u8]>,
    shards: Shards,
) -> Result<i64, StoreError> {
    let Some(v) = value else {
        return Ok(0);
    };
    let raw: [u8; 8] = v.try_into().map_err(|_| {
        corrupt(format!(
            "counter {name}, shard {shard}, holds {} bytes, not 8",
            v.len()
        ))
    })?;
    let n = i64::from_be_bytes(raw);
    if n < 0 && !shards.by_writer() {
        return Err(corrupt(format!(
            "counter {name}, shard {shard}, is {n}, in a layout whose shards never go below zero"
        )));
    }
    Ok(n)
}

/// The value of counter `name`: the sum of its shards. The layout mark and
/// the shards the host's keyspaces have come in one batched read, and the
/// mark is checked before any shard is decoded; a keyspace whose mark names
/// more shards has the rest read after it.
pub fn read_counter<K: Kv + ?Sized>(kv: &mut K, name: &str) -> Result<u64, StoreError> {
    let expected = expected_shards(kv);
    let mut keys = Vec::with_capacity(usize::from(expected.count()) + 1);
    keys.push(schema::layout().into_bytes());
    keys.extend(expected.keys(name));
    let values = get_each(kv, &keys)?;
    let mut values = values.into_iter();
    let shards = layout_shards(kv, values.next().flatten().as_deref())?;
    let mut found: Vec<Option<Vec<u8>>> = values.take(usize::from(shards.count())).collect();
    if shards.count() > expected.count() {
        let rest = &shards.keys(name)[usize::from(expected.count())..];
        found.extend(get_each(kv, rest)?);
    }
    let mut total = 0i64;
    for (shard, v) in (0..shards.count()).zip(found) {
        total = total
            .checked_add(shard_value(name, shard, v.as_deref(), shards)?)
            .ok_or_else(|| corrupt(format!("counter {name}: its shards overflow when summed")))?;
    }
    u64::try_from(total).map_err(|_| {
        corrupt(format!(
            "counter {name}: its shards sum to {total}, below zero"
        ))
    })
}

/// One shard of counter `name`, among `shards`.
pub fn read_shard<K: Kv + ?Sized>(
    kv: &mut K,
    name: &str,
    shard: u8,
    shards: Shards,
) -> Result<i64, StoreError> {
    let v = kv.get(schema::counter_shard(name, shard).as_bytes())?;
    shard_value(name, shard, v.as_deref(), shards)
}

/// Moves one shard of counter `name`, among `shards`, by `delta`. Where
/// shards are spread by row a shard may never go below zero, so one that
/// would is damage.
pub fn add_to_counter<K: Kv + ?Sized>(
    kv: &mut K,
    name: &str,
    shard: u8,
    shards: Shards,
    delta: i64,
) -> Result<(), StoreError> {
    if delta == 0 {
        return Ok(());
    }
    let now = read_shard(kv, name, shard, shards)?;
    set_shard(kv, name, shard, shards, now, delta)
}

fn set_shard<K: Kv + ?Sized>(
    kv: &mut K,
    name: &str,
    shard: u8,
    shards: Shards,
    now: i64,
    delta: i64,
) -> Result<(), StoreError> {
    let next = now
        .checked_add(delta)
        .filter(|&n| n >= 0 || shards.by_writer())
        .ok_or_else(|| {
            corrupt(format!(
                "counter {name}, shard {shard}, is {now} and cannot move by {delta}"
            ))
        })?;
    Ok(kv.set(
        schema::counter_shard(name, shard).as_bytes(),
        &next.to_be_bytes(),
    )?)
}

/// Moves many shards of counter `name` at once, `deltas[s]` for shard `s`,
/// reading the shards that move in one batch: for a verb that moves rows of
/// many shards and learns which only as it walks them.
pub fn add_to_shards<K: Kv + ?Sized>(
    kv: &mut K,
    name: &str,
    shards: Shards,
    deltas: &[i64; schema::MAX_SHARDS as usize],
) -> Result<(), StoreError> {
    let moving: Vec<(u8, i64)> = (0..schema::MAX_SHARDS)
        .zip(deltas.iter().copied())
        .filter(|&(_, d)| d != 0)
        .collect();
    if moving.is_empty() {
        return Ok(());
    }
    let keys: Vec<Vec<u8>> = moving
        .iter()
        .map(|&(s, _)| schema::counter_shard(name, s).into_bytes())
        .collect();
    let values = get_each(kv, &keys)?;
    for (&(shard, delta), v) in moving.iter().zip(values) {
        let now = shard_value(name, shard, v.as_deref(), shards)?;
        set_shard(kv, name, shard, shards, now, delta)?;
    }
    Ok(())
}

/// The writer slot this call's contributions go by, among `shards`: a
/// keyspace of one shard needs no crossing to ask.
fn writer_slot<K: Kv + ?Sized>(kv: &mut K, shards: Shards) -> u32 {
    if shards.count() == 1 {
        0
    } else {
        kv.writer_slot()
    }
}

/// The shard this call moves for task `id`, among `shards`.
pub fn task_shard<K: Kv + ?Sized>(kv: &mut K, shards: Shards, id: &str) -> u8 {
    if shards.by_writer() {
        shards.writer(writer_slot(kv, shards))
    } else {
        shards.task(id)
    }
}

/// The shard this call moves for timer `(run, effect)`, among `shards`.
pub fn timer_shard<K: Kv + ?Sized>(kv: &mut K, shards: Shards, run: &str, effect: &str) -> u8 {
    if shards.by_writer() {
        shards.writer(writer_slot(kv, shards))
    } else {
        shards.timer(run, effect)
    }
}

/// The counter shards [`write_task`](super::tasks::write_task) may move for
/// task `id`, among `shards`.
pub fn task_counter_keys<K: Kv + ?Sized>(kv: &mut K, id: &str, shards: Shards) -> [Vec<u8>; 2] {
    let shard = task_shard(kv, shards, id);
    [
        schema::counter_shard(schema::OPEN_TASKS, shard).into_bytes(),
        schema::counter_shard(schema::LEASED_CLAIMS, shard).into_bytes(),
    ]
}

/// The counter shard that arming or retiring timer `(run, effect)` moves,
/// among `shards`.
pub fn timer_counter_key<K: Kv + ?Sized>(
    kv: &mut K,
    run: &str,
    effect: &str,
    shards: Shards,
) -> Vec<u8> {
    schema::counter_shard(schema::ARMED_TIMERS, timer_shard(kv, shards, run, effect)).into_bytes()
}
