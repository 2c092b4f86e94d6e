//! The search entries and counts a task row implies, and building them for
//! the tasks of a keyspace laid out before search.
//!
//! A task row implies its [`TaskRow::search_keys`] and one count in a
//! `search-count` shard of its state. A keyspace this component
//! lays out is built from the start (`("meta", "search")` is `built`). In
//! one laid out earlier, a task written before (revision 0) has neither
//! until [`build`] reaches it, in id order, or until its next change: that
//! change counts it as not counted before when the build has not reached
//! it, so no task is ever counted twice or subtracted without having been
//! added. This module writes only search entries, search counts and the
//! build mark; it never judges a verb's rules.

#[allow(unused_imports)]
use crate::prelude::*;

use crate::keys::{Elem, Key};
use crate::kv::Kv;
use crate::model::{StoreError, TaskState};
use crate::schema::{self, Shards};

use super::codec::corrupt;
use super::counters::task_shard;
use super::layout::{check_layout, claim_layout, shards};
use super::rows::{TaskRow, decode_task_row};

/// How far a keyspace's search entries are built.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Built {
    /// No task laid out before search has its entries yet.
    Nothing,
    /// The tasks up to this id (bytewise) have theirs.
    UpTo(String),
    /// Every task has its entries.
    All,
}

impl Built {
    /// Whether a task with this id, written before search, was given its
    /// entries and counted.
    pub fn covers(&self, id: &str) -> bool {
        match self {
            Built::Nothing => false,
            Built::UpTo(last) => id.as_bytes() <= last.as_bytes(),
            Built::All => true,
        }
    }
}

/// Reads the build mark.
pub fn search_built<K: Kv + ?Sized>(kv: &mut K) -> Result<Built, StoreError> {
    Ok(match kv.get(schema::search_built().as_bytes())? {
        None => Built::Nothing,
        Some(v) if v == schema::SEARCH_BUILT => Built::All,
        Some(v) => Built::UpTo(
            String::from_utf8(v)
                .map_err(|_| corrupt("the search build mark is neither `built` nor a task id"))?,
        ),
    })
}

/// Marks a fresh keyspace built: it holds no task written before search.
pub fn mark_built<K: Kv + ?Sized>(kv: &mut K) -> Result<(), StoreError> {
    Ok(kv.set(schema::search_built().as_bytes(), schema::SEARCH_BUILT)?)
}

/// Whether `row`, as stored, has its search entries and count: every row a
/// layout-10 build changed, and the older ones the build has reached.
pub fn has_search_entries<K: Kv + ?Sized>(kv: &mut K, row: &TaskRow) -> Result<bool, StoreError> {
    if row.task.revision > 0 {
        return Ok(true);
    }
    Ok(search_built(kv)?.covers(&row.task.id))
}

/// Moves the search entries and count from what `old` implied (when it had
/// them) to what `new` implies.
pub fn move_search<K: Kv + ?Sized>(
    kv: &mut K,
    old: Option<&TaskRow>,
    new: &TaskRow,
) -> Result<(), StoreError> {
    let old = match old {
        Some(row) if has_search_entries(kv, row)? => Some(row),
        _ => None,
    };
    let before = old.map(TaskRow::search_keys).unwrap_or_default();
    let after = new.search_keys();
    for k in before.iter().filter(|k| !after.contains(k)) {
        kv.delete(k)?;
    }
    for k in after.iter().filter(|k| !before.contains(k)) {
        kv.set(k, &[])?;
    }
    let t = &new.task;
    if old.is_none_or(|o| o.task.state != t.state) {
        let sh = shards(kv)?;
        let shard = task_shard(kv, sh, &t.id);
        if let Some(o) = old {
            add_to_count(kv, o.task.state, shard, -1)?;
        }
        if !add_to_count(kv, t.state, shard, 1)? {
            keep_every_state(kv, shard)?;
        }
    }
    Ok(())
}

/// Writes a zero into each state's shard `shard` that has no key yet, so a
/// writer's shards are written together once and only change after (a
/// shard found, then, means all six are there). Under
/// PostgreSQL's serializable isolation a key read and not found locks its
/// whole index page, and every verb reads all six of its writer's shards
/// ahead: a shard inserted beside them (a first count, or one that came
/// back from zero) would make unrelated writers' calls conflict.
fn keep_every_state<K: Kv + ?Sized>(kv: &mut K, shard: u8) -> Result<(), StoreError> {
    for s in crate::model::ALL_STATES {
        let key = schema::search_count(s.as_str(), shard).into_bytes();
        if kv.get(&key)?.is_none() {
            kv.set(&key, &0i64.to_be_bytes())?;
        }
    }
    Ok(())
}

/// Moves one shard; answers whether it was there before.
fn add_to_count<K: Kv + ?Sized>(
    kv: &mut K,
    state: TaskState,
    shard: u8,
    delta: i64,
) -> Result<bool, StoreError> {
    let key = schema::search_count(state.as_str(), shard).into_bytes();
    let (found, now) = match kv.get(&key)? {
        None => (false, 0),
        Some(v) => (true, count_value(&v)?),
    };
    let next = now
        .checked_add(delta)
        .ok_or_else(|| corrupt(format!("search count {}: it overflows", state.as_str())))?;
    // Kept at zero, never deleted (see `keep_every_state`).
    kv.set(&key, &next.to_be_bytes())?;
    Ok(found)
}

/// A search count shard's value: a big-endian `i64` (a shard may go below
/// zero where writers spread counts by slot; only sums are counts).
pub fn count_value(v: &[u8]) -> Result<i64, StoreError> {
    let raw: [u8; 8] = v.try_into().map_err(|_| {
        corrupt(format!(
            "a search count shard holds {} bytes, not 8",
            v.len()
        ))
    })?;
    Ok(i64::from_be_bytes(raw))
}

/// The sum of the search count shards under `prefix` (a state).
pub fn sum_counts<K: Kv + ?Sized>(kv: &mut K, prefix: &Key) -> Result<i64, StoreError> {
    let mut total = 0i64;
    super::ranges::walk(kv, prefix, |_, _, v| {
        total = total
            .checked_add(count_value(&v)?)
            .ok_or_else(|| corrupt("the search counts overflow when summed"))?;
        Ok(true)
    })?;
    Ok(total)
}

/// Gives the next `limit` tasks written before search their entries and
/// counts, in id order, and moves the build mark past them; answers whether
/// every task now has them, and how many were given them. A keyspace built
/// already is left as it is.
pub fn build<K: Kv + ?Sized>(kv: &mut K, limit: u32) -> Result<(bool, u32), StoreError> {
    check_layout(kv, false)?;
    let built = search_built(kv)?;
    if built == Built::All || kv.get(schema::layout().as_bytes())?.is_none() {
        // A fresh keyspace is marked built by its first write.
        return Ok((true, 0));
    }
    claim_layout(kv)?;
    let sh: Shards = shards(kv)?;
    let prefix = schema::tasks();
    let end = prefix.prefix_end();
    let mut start = match &built {
        Built::UpTo(last) => schema::task(last).successor(),
        _ => prefix.as_bytes().to_vec(),
    };
    let mut seen = 0u32;
    let mut indexed = 0u32;
    let mut last: Option<String> = None;
    let done = 'walk: loop {
        let chunk = kv.scan(&start, Some(&end), super::ranges::SCAN_CHUNK, false)?;
        let full = chunk.len() == super::ranges::SCAN_CHUNK as usize;
        if let Some((k, _)) = chunk.last() {
            start = k.clone();
            start.push(0);
        }
        for (key, value) in chunk {
            let elems = super::ranges::suffix(&key, &prefix)?;
            let [Elem::Str(id)] = elems.as_slice() else {
                // A task's log or history key, beside its row.
                continue;
            };
            if seen == limit {
                break 'walk false;
            }
            seen += 1;
            let row = decode_task_row(&value).map_err(|e| corrupt(format!("task {id}: {e}")))?;
            if row.task.revision == 0 {
                for k in row.search_keys() {
                    kv.set(&k, &[])?;
                }
                let shard = task_shard(kv, sh, id);
                if !add_to_count(kv, row.task.state, shard, 1)? {
                    keep_every_state(kv, shard)?;
                }
                indexed += 1;
            }
            last = Some(id.clone());
        }
        if !full {
            break true;
        }
    };
    if done {
        mark_built(kv)?;
    } else if let Some(last) = last {
        kv.set(schema::search_built().as_bytes(), last.as_bytes())?;
    }
    Ok((done, indexed))
}

/// The search count shards a write to task `id` may move (one per state),
/// read ahead with its row.
pub fn search_count_keys<K: Kv + ?Sized>(kv: &mut K, shards: Shards, id: &str) -> Vec<Vec<u8>> {
    let shard = task_shard(kv, shards, id);
    crate::model::ALL_STATES
        .iter()
        .map(|s| schema::search_count(s.as_str(), shard).into_bytes())
        .collect()
}
