//! Task rows and what a task row implies: its index entries (queue, overdue,
//! lease and case, derived by [`TaskRow::index_keys`]) and its counts of open
//! tasks and leased claims.
//!
//! [`write_task`] is the only way a task row is written: it writes the row,
//! moves the entries and counts from what the old row implied to what the
//! new one implies, and records the change in the task's history and the
//! feed. A row stored under another id, or an index entry
//! whose row is missing, is damage. This module keeps a row and what derives
//! from it in step, and never judges a verb's rules.

#[allow(unused_imports)]
use crate::prelude::*;

use crate::kv::Kv;
use crate::model::{StoreError, Task};
use crate::schema;

use super::batch::{get_each, get_kept};
use super::codec::{RowError, corrupt, encode_row};
use super::counters::{add_to_counter, task_counter_keys, task_shard};
use super::layout::{check_layout, expected_shards, feed_slot_of, known_layout, shards};
use super::record::{Cause, record_task};
use super::rows::{TaskRow, decode_task_row};
use super::search_entries::{move_search, search_count_keys};

/// Reads ahead, in one round trip, what a verb on one task may need: the
/// layout mark, the task's row, the counter shards [`write_task`] may
/// move (this writer's, so calls the host runs side by side never share a
/// key), the task's log, the feed head its change would follow and the
/// search count shards its state may move between.
pub fn prefetch_task<K: Kv + ?Sized>(kv: &mut K, id: &str) -> Result<(), StoreError> {
    prefetch_tasks(kv, &[id])
}

/// What a change to each of `ids` may read, in one batched read: the rows,
/// their counter shards and logs, the writer's feed head and the layout mark.
pub fn prefetch_tasks<K: Kv + ?Sized>(kv: &mut K, ids: &[&str]) -> Result<(), StoreError> {
    let shards = expected_shards(kv);
    let head = schema::feed_head(shards, feed_slot_of(kv, shards)).into_bytes();
    let mut keys = vec![schema::layout().into_bytes(), head];
    for id in ids {
        let [open, leased] = task_counter_keys(kv, id, shards);
        keys.extend([
            schema::task(id).into_bytes(),
            open,
            leased,
            schema::task_log(shards, id).into_bytes(),
        ]);
        keys.extend(search_count_keys(kv, shards, id));
    }
    if ids.len() > 1 {
        // Spread by writer, tasks share counter shards.
        keys.sort_unstable();
        keys.dedup();
    }
    Ok(kv.prefetch(&keys)?)
}

pub fn load_task<K: Kv + ?Sized>(kv: &mut K, id: &str) -> Result<Option<TaskRow>, StoreError> {
    match kv.get(schema::task(id).as_bytes())? {
        Some(bytes) => task_from(id, &bytes).map(Some),
        None => Ok(None),
    }
}

/// Decodes the row stored under `id`, which must be that task's.
fn task_from(id: &str, bytes: &[u8]) -> Result<TaskRow, StoreError> {
    let row = decode_task(bytes).map_err(|e| corrupt(format!("task {id}: {e}")))?;
    if row.task.id != id {
        return Err(corrupt(format!(
            "task {id}: the row is stored under another id ({})",
            row.task.id
        )));
    }
    Ok(row)
}

pub fn decode_task(bytes: &[u8]) -> Result<TaskRow, RowError> {
    decode_task_row(bytes)
}

/// Loads, in one batched read, the tasks an index lists; a missing row is
/// damage.
pub fn indexed_tasks<K: Kv + ?Sized>(
    kv: &mut K,
    ids: &[String],
    index: &str,
) -> Result<Vec<Task>, StoreError> {
    Ok(indexed_rows(kv, ids, index, Along::default())?
        .into_iter()
        .map(|r| r.task)
        .collect())
}

/// What [`indexed_rows`] reads in the same batch as the rows, so that a verb
/// pays for them no round trip of their own.
#[derive(Clone, Copy, Debug, Default)]
pub struct Along {
    /// The layout mark, checked before any row is decoded (with no row to
    /// read, it is read alone).
    pub layout: bool,
    /// Each task's leased-claims shard, its log and the feed head, for a
    /// verb about to take or end a claim (which leaves the open count as it
    /// is) and record it. Such a verb writes the rows it reads, so the store
    /// keeps them, the shards, the logs and the head for its writes.
    pub leased_shards: bool,
}

/// [`indexed_tasks`], answering the whole rows, with what `along` asks for.
pub fn indexed_rows<K: Kv + ?Sized>(
    kv: &mut K,
    ids: &[String],
    index: &str,
    along: Along,
) -> Result<Vec<TaskRow>, StoreError> {
    if ids.is_empty() {
        if along.layout {
            check_layout(kv, false)?;
        }
        return Ok(Vec::new());
    }
    let mut keys: Vec<Vec<u8>> = Vec::new();
    if along.layout {
        keys.push(schema::layout().into_bytes());
    }
    keys.extend(ids.iter().map(|id| schema::task(id).into_bytes()));
    if along.leased_shards {
        // Tasks share shards; each shard is asked for once.
        let expected = expected_shards(kv);
        let mut shards: Vec<u8> = ids.iter().map(|id| task_shard(kv, expected, id)).collect();
        shards.sort_unstable();
        shards.dedup();
        keys.extend(
            shards
                .into_iter()
                .map(|s| schema::counter_shard(schema::LEASED_CLAIMS, s).into_bytes()),
        );
        keys.extend(
            ids.iter()
                .map(|id| schema::task_log(expected, id).into_bytes()),
        );
        let mut counts: Vec<Vec<u8>> = ids
            .iter()
            .flat_map(|id| search_count_keys(kv, expected, id))
            .collect();
        counts.sort_unstable();
        counts.dedup();
        keys.extend(counts);
        keys.push(schema::feed_head(expected, feed_slot_of(kv, expected)).into_bytes());
    }
    let values = if along.leased_shards {
        get_kept(kv, &keys)?
    } else {
        get_each(kv, &keys)?
    };
    let mut values = values.into_iter();
    if along.layout {
        known_layout(values.next().flatten().as_deref())?;
    }
    // The counter shards, logs and head, last in the batch, are left for the
    // writes to read.
    ids.iter()
        .zip(values)
        .map(|(id, v)| match v {
            Some(bytes) => task_from(id, &bytes),
            None => Err(corrupt(format!(
                "{index} lists task {id}, which has no row"
            ))),
        })
        .collect()
}

/// Writes a task row, moves its index entries and counters from what `old`
/// implied to what `new` implies, and records the change as `cause` made
/// it. The row's revision is set here, one past `old`'s (1 for a new
/// task): every recorded change is a revision.
pub fn write_task<K: Kv + ?Sized>(
    kv: &mut K,
    cause: Cause<'_>,
    old: Option<&TaskRow>,
    new: &mut TaskRow,
) -> Result<(), StoreError> {
    new.task.revision = old.map_or(0, |r| r.task.revision).saturating_add(1);
    let new = &*new;
    kv.set(schema::task(&new.task.id).as_bytes(), &encode_row(new)?)?;
    let mut before = old.map(TaskRow::index_keys).unwrap_or_default();
    // A row no layout-10 build has changed (revision 0) was written without
    // its `held` entry: its first change writes it, whatever it was.
    if let Some(key) = old
        .filter(|r| r.task.revision == 0)
        .and_then(TaskRow::held_key)
    {
        before.retain(|k| *k != key);
    }
    let after = new.index_keys();
    for k in before.iter().filter(|k| !after.contains(k)) {
        kv.delete(k)?;
    }
    for k in after.iter().filter(|k| !before.contains(k)) {
        kv.set(k, &[])?;
    }
    // Spread by row, a row keeps its id, so old and new count in one shard.
    let shards = shards(kv)?;
    let shard = task_shard(kv, shards, &new.task.id);
    let was = old.is_some_and(|r| r.task.state.is_pending());
    let is = new.task.state.is_pending();
    add_to_counter(
        kv,
        schema::OPEN_TASKS,
        shard,
        shards,
        i64::from(is) - i64::from(was),
    )?;
    let was = old.is_some_and(TaskRow::is_leased);
    add_to_counter(
        kv,
        schema::LEASED_CLAIMS,
        shard,
        shards,
        i64::from(new.is_leased()) - i64::from(was),
    )?;
    move_search(kv, old, new)?;
    record_task(kv, cause, old, new)
}
