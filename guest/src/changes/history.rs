//! A task's history, read: its entries after a number, oldest first,
//! followed back through the feed from its log (or from the nearest entry
//! kept under its key) and, below the changes the feed holds, read under
//! their own keys; the entry numbered 0 of a task that predates its
//! history; and `entry-place`, where one entry sits in the feed. It reads
//! only.

#[allow(unused_imports)]
use crate::prelude::*;
use alloc::collections::VecDeque;

use crate::keys::Elem;
use crate::kv::Kv;
use crate::model::{FeedPlace, HistoryEntry, StoreError};
use crate::schema::{self, Shards};
use crate::store;
use crate::validate;

use super::slots::{READ_BUDGET, RECORD_CHUNK};

/// `history`: a task's entries after `after`, oldest first.
pub fn history<K: Kv + ?Sized>(
    kv: &mut K,
    id: &str,
    after: Option<u64>,
    limit: u32,
) -> Result<Vec<HistoryEntry>, StoreError> {
    validate::name("id", id)?;
    validate::limit("limit", limit)?;
    let expected = store::expected_shards(kv);
    kv.prefetch(&[
        schema::layout().into_bytes(),
        schema::task(id).into_bytes(),
        schema::history_start(id).into_bytes(),
        schema::task_log(expected, id).into_bytes(),
    ])?;
    store::check_layout(kv, false)?;
    let Some(row) = store::load_task(kv, id)? else {
        return Err(StoreError::NotFound(id.to_owned()));
    };
    let sh = store::shards(kv)?;
    let mut out: Vec<HistoryEntry> = Vec::new();
    if after.is_none()
        && let Some(first) = before_history(kv, sh, &row)?
    {
        out.push(first);
    }
    let mark = kv.get(schema::layout().as_bytes())?;
    let from = after.map_or(1, |a| a.saturating_add(1));
    if !store::history_in_feed(mark.as_deref()) {
        let (keyed, _) = keyed_history(kv, sh, id, from, None, limit, out.len())?;
        out.extend(keyed);
        return Ok(out);
    }
    let Some(log) = store::load_task_log(kv, sh, id)? else {
        return Ok(out);
    };
    let from = from.max(log.first);
    // Followed back from the newest change, keeping only the oldest that
    // fit: memory holds one page, however long the history.
    let room = (limit as usize).saturating_sub(out.len());
    // From the nearest kept entry at or past the page's end: a page costs
    // its length and a few steps, wherever it lies in a long history.
    let upto = from.saturating_add(room as u64).saturating_sub(1);
    let start = store::walk_start(kv, sh, id, &log, upto)?;
    let mut newest_first: VecDeque<HistoryEntry> = VecDeque::new();
    let lowest = store::walk_chain(kv, id, &start, from, |row| {
        newest_first.push_back(row.entry);
        if newest_first.len() > room {
            newest_first.pop_front();
        }
        true
    })?;
    // What lies below the changes the feed still holds: entries kept under
    // their own keys (a last entry trimmed from the feed, or written by an
    // earlier layout).
    let (keyed, bytes) = keyed_history(kv, sh, id, from, Some(lowest), limit, out.len())?;
    out.extend(keyed);
    let mut bytes = bytes;
    for entry in newest_first.into_iter().rev() {
        if out.len() >= limit as usize || (!out.is_empty() && bytes >= READ_BUDGET) {
            break;
        }
        bytes += entry_bytes(&entry);
        out.push(entry);
    }
    Ok(out)
}

/// About how many bytes an entry takes, for the read budget.
fn entry_bytes(e: &HistoryEntry) -> usize {
    64 + e.verb.len()
        + e.actor.as_ref().map_or(0, String::len)
        + e.assignee.as_ref().map_or(0, String::len)
        + e.candidate_roles.iter().map(String::len).sum::<usize>()
        + e.excluded_actors.iter().map(String::len).sum::<usize>()
}

/// The entries of task `id`'s history kept under their own keys, numbered
/// `from` up to `below` (no bound without it), oldest first, as many as fit
/// beside `out` in `limit` and the read budget; answers them and the bytes
/// read.
fn keyed_history<K: Kv + ?Sized>(
    kv: &mut K,
    sh: Shards,
    id: &str,
    from: u64,
    below: Option<u64>,
    limit: u32,
    already: usize,
) -> Result<(Vec<HistoryEntry>, usize), StoreError> {
    let prefix = schema::history(sh, id);
    let clamp = |n: u64| i64::try_from(n).map_or(i64::MAX as u64, |_| n);
    let mut start = schema::history_entry(sh, id, clamp(from.max(1))).into_bytes();
    let end = match below {
        Some(b) => schema::history_entry(sh, id, clamp(b)).into_bytes(),
        None => prefix.prefix_end(),
    };
    let mut found: Vec<HistoryEntry> = Vec::new();
    let mut bytes = 0usize;
    let taken = |found: &Vec<HistoryEntry>| already + found.len();
    while taken(&found) < limit as usize && (taken(&found) == 0 || bytes < READ_BUDGET) {
        if start >= end {
            break;
        }
        let want = (limit - taken(&found) as u32).min(RECORD_CHUNK);
        let entries = kv.scan(&start, Some(&end), want, false)?;
        let done = entries.len() < want as usize;
        for (k, v) in entries {
            bytes += k.len() + v.len();
            let seq = match store::suffix(&k, &prefix)?.as_slice() {
                [Elem::Int(q)] if *q > 0 => *q as u64,
                _ => return Err(store::bad_entry("history")),
            };
            let row = store::decode_history(&v)
                .map_err(|e| StoreError::Corrupt(format!("history {id}/{seq}: {e}")))?;
            if row.entry.seq != seq {
                return Err(StoreError::Corrupt(format!(
                    "history {id}/{seq}: the entry says it is {}",
                    row.entry.seq
                )));
            }
            start = k;
            start.push(0);
            found.push(row.entry);
        }
        if done {
            break;
        }
    }
    Ok((found, bytes))
}

/// `entry-place`: where entry `seq` of task `id`'s history sits in the
/// feed, as its history row recorded it; none when the entry is not kept.
pub fn entry_place<K: Kv + ?Sized>(
    kv: &mut K,
    id: &str,
    seq: u64,
) -> Result<Option<FeedPlace>, StoreError> {
    validate::name("id", id)?;
    // Sequence numbers start at 1, and a key holds at most `i64::MAX`.
    let kept = seq != 0 && seq <= i64::MAX as u64;
    let expected = store::expected_shards(kv);
    let mut first = vec![
        schema::layout().into_bytes(),
        schema::task(id).into_bytes(),
        schema::task_log(expected, id).into_bytes(),
    ];
    if kept {
        first.push(schema::history_entry(expected, id, seq).into_bytes());
    }
    kv.prefetch(&first)?;
    store::check_layout(kv, false)?;
    if kv.get(schema::task(id).as_bytes())?.is_none() {
        return Err(StoreError::NotFound(id.to_owned()));
    }
    if !kept {
        return Ok(None);
    }
    let sh = store::shards(kv)?;
    let Some(log) = store::load_task_log(kv, sh, id)? else {
        return Ok(None);
    };
    let mark = kv.get(schema::layout().as_bytes())?;
    let in_feed = store::history_in_feed(mark.as_deref());
    Ok(
        store::load_history_entry(kv, sh, id, &log, seq, in_feed)?.map(|row| FeedPlace {
            slot: u32::from(row.position.slot),
            seq: row.position.seq,
        }),
    )
}

/// The entry numbered 0 that opens the history of a task written before
/// history was kept, in a keyspace laid out before the record (layouts 3 to
/// 5): what the task held when this component first changed it, kept then,
/// or as it stands now, at its creation, if it never has. A task whose first
/// change an earlier component recorded without keeping the rest answers
/// the state that entry records it had, with the assignee, lease and
/// candidates that entry records after it (nothing earlier was kept), at
/// that change's time. None for a task opened with its history, or whose
/// entry 1 was trimmed.
fn before_history<K: Kv + ?Sized>(
    kv: &mut K,
    sh: Shards,
    row: &store::TaskRow,
) -> Result<Option<HistoryEntry>, StoreError> {
    let id = &row.task.id;
    let mark = kv.get(schema::layout().as_bytes())?;
    if store::records_from_the_start(mark.as_deref()) {
        return Ok(None);
    }
    let Some(log) = store::load_task_log(kv, sh, id)? else {
        return Ok(Some(store::before_history(&row.task, row.task.created_at)));
    };
    if log.first > 1 {
        // Trimmed with the entries after it: the record starts later now.
        return Ok(None);
    }
    if let Some(start) = store::load_history_start(kv, id)? {
        return Ok(Some(start));
    }
    let in_feed = store::history_in_feed(mark.as_deref());
    let Some(first) = store::load_history_entry(kv, sh, id, &log, 1, in_feed)? else {
        return Err(StoreError::Corrupt(format!(
            "the history of task {id} starts at 1, which is missing"
        )));
    };
    let first = first.entry;
    Ok(first.before.map(|state| HistoryEntry {
        seq: 0,
        verb: store::BEFORE_HISTORY.to_owned(),
        actor: None,
        before: None,
        after: state,
        ..first
    }))
}
