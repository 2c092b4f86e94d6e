//! The task logs: each belongs to a task, keeps a sane range of entries,
//! and names the task's last change where the feed still holds it. Where
//! history is kept in the feed (layout 9), following each task's changes
//! back from its log must step one change of that task at a time, down to
//! its first kept entry or to entries kept under their own keys, all there;
//! it counts the changes so reached. Where tasks may predate their history,
//! it holds each task's history start to the entry 1 it meets.

use crate::changes::slots::Slots;
use crate::keys::Elem;
use crate::kv::Kv;
use crate::model::{Change, HistoryEntry, StoreError};
#[allow(unused_imports)]
use crate::prelude::*;
use crate::schema::{self, Shards};
use crate::store;

use super::record::{RECORD_WALK, at, feed_row, kept, past_head};
use super::starts::check_start_agrees;
use super::tasks::{TaskKey, task_key};
use super::walk::{Findings, decoded, read_ahead, text};

/// Each task log belongs to a task, and names its last change where the
/// feed still holds it. Where history is kept in the feed (`reached` is
/// given), following the task's changes back from its log must step one
/// change of the task at a time, down to its first kept entry or to entries
/// kept under their own keys, each of which must be there; `reached`
/// counts the changes so found. Where tasks may predate their history
/// (`starts`), each task's history start is held to its entry 1.
pub(super) fn check_task_logs<K: Kv + ?Sized>(
    kv: &mut K,
    f: &mut Findings,
    slots: &Slots,
    starts: bool,
    mut reached: Option<&mut u64>,
) -> Result<(), StoreError> {
    let chains = reached.is_some();
    let sh = slots.shards;
    let prefix = if sh.beside() {
        schema::tasks()
    } else {
        schema::task_logs()
    };
    let ahead = |kv: &mut K, chunk: &[crate::kv::Entry]| {
        let mut keys = Vec::new();
        let mut logs = Vec::new();
        for (key, value) in chunk {
            let Ok(elems) = store::suffix(key, &prefix) else {
                continue;
            };
            let id = match (sh.beside(), task_key(&elems), elems.as_slice()) {
                (true, Some(TaskKey::Log(id)), _) => id,
                (false, _, [Elem::Str(id)]) => id.as_str(),
                _ => continue,
            };
            keys.push(schema::task(id).into_bytes());
            if starts {
                keys.push(schema::history_start(id).into_bytes());
            }
            if let Ok(log) = store::decode_task_log(value) {
                if starts && log.first == 1 && !chains {
                    keys.push(schema::history_entry(sh, id, 1).into_bytes());
                }
                if kept(slots, log.position) {
                    keys.push(schema::feed_entry(log.position.slot, log.position.seq).into_bytes());
                }
                if chains {
                    logs.push((id.to_owned(), log));
                }
            }
        }
        read_ahead(kv, keys)?;
        if chains {
            chains_ahead(kv, slots, &logs)?;
        }
        Ok(())
    };
    store::walk_ahead(kv, &prefix, RECORD_WALK, ahead, |kv, key, value| {
        let Some(elems) = decoded(f, "task-log", &key, &prefix) else {
            return Ok(!f.full());
        };
        let id = if sh.beside() {
            match task_key(&elems) {
                Some(TaskKey::Log(id)) => id.to_owned(),
                // Rows, histories and keys of no shape are the row walk's.
                _ => return Ok(!f.full()),
            }
        } else {
            match elems.as_slice() {
                [Elem::Str(id)] => id.clone(),
                _ => {
                    f.add("task-log", &text(&elems), "a log key has the wrong shape");
                    return Ok(!f.full());
                }
            }
        };
        let id = &id;
        let log = match store::decode_task_log(&value) {
            Ok(log) => log,
            Err(e) => {
                f.add("task-log", id, format!("the log does not decode: {e}"));
                return Ok(!f.full());
            }
        };
        if kv.get(schema::task(id).as_bytes())?.is_none() {
            f.add("task-log", id, "a log for a task with no row");
        }
        if log.first == 0 || log.first > log.last {
            f.add(
                "task-log",
                id,
                format!("the log keeps entries {} to {}", log.first, log.last),
            );
        }
        if past_head(slots, log.position) {
            f.add(
                "task-log",
                id,
                format!(
                    "the last change is at {}, past the feed's head",
                    at(log.position)
                ),
            );
        } else if kept(slots, log.position) {
            let right = matches!(
                feed_row(kv, log.position)?.map(|r| r.change),
                Some(Change::Task(t)) if t.id == *id && t.entry.seq == log.last
            );
            if !right {
                f.add(
                    "task-log",
                    id,
                    format!(
                        "the feed entry at {} is not the task's last change",
                        at(log.position)
                    ),
                );
            }
        }
        let mut one = None;
        if let Some(reached) = reached.as_deref_mut()
            && log.first >= 1
            && log.first <= log.last
        {
            one = check_chain(kv, f, sh, id, &log, reached)?;
        }
        if starts {
            check_start_agrees(kv, f, sh, id, &log, one)?;
        }
        Ok(!f.full())
    })
}

/// How many changes back the walk of the logs reads ahead, over a shared
/// keyspace, for every task of a chunk at once: most tasks have few.
const CHAIN_AHEAD: usize = 8;

/// Keyed history entries asked for per scan below a task's changes in the
/// feed.
const KEYED_CHUNK: u32 = 64;

/// Reads ahead the first [`CHAIN_AHEAD`] steps back from each of `logs`,
/// every task's step in one batch, and the keyed entries below the last
/// step where there are a few; on an embedded store it reads nothing.
fn chains_ahead<K: Kv + ?Sized>(
    kv: &mut K,
    slots: &Slots,
    logs: &[(String, store::TaskLog)],
) -> Result<(), StoreError> {
    if !kv.concurrent_writers() {
        return Ok(());
    }
    let mut frontier: Vec<(&str, store::Position, u64, u64)> = logs
        .iter()
        .map(|(id, log)| (id.as_str(), log.position, log.last, log.first))
        .collect();
    let mut keyed = Vec::new();
    for _ in 0..CHAIN_AHEAD {
        frontier.retain(|(id, p, want, first)| {
            let go = kept(slots, *p) && *want >= (*first).max(1);
            if !go && *want >= *first && *want - *first < 4 {
                keyed.extend(
                    (*first..=*want)
                        .map(|q| schema::history_entry(slots.shards, id, q).into_bytes()),
                );
            }
            go
        });
        if frontier.is_empty() {
            break;
        }
        read_ahead(
            kv,
            frontier
                .iter()
                .map(|(_, p, _, _)| schema::feed_entry(p.slot, p.seq).into_bytes())
                .collect(),
        )?;
        let mut next = Vec::new();
        for (id, p, want, first) in frontier {
            if let Some(bytes) = kv.get(schema::feed_entry(p.slot, p.seq).as_bytes())?
                && let Ok(row) = store::decode_feed_row(&bytes)
                && let Some(prev) = row.prev
            {
                next.push((id, prev, want - 1, first));
            }
        }
        frontier = next;
    }
    read_ahead(kv, keyed)
}

/// Follows task `id`'s changes back from its `log` (see
/// [`check_task_logs`]), counting them in `reached`; answers entry 1 where
/// the walk met it in the feed.
fn check_chain<K: Kv + ?Sized>(
    kv: &mut K,
    f: &mut Findings,
    sh: Shards,
    id: &str,
    log: &store::TaskLog,
    reached: &mut u64,
) -> Result<Option<HistoryEntry>, StoreError> {
    let mut n = 0u64;
    let mut one = None;
    let lowest = match store::walk_chain(kv, id, log, log.first, |row| {
        n += 1;
        if row.entry.seq == 1 {
            one = Some(row.entry);
        }
        true
    }) {
        Ok(lowest) => lowest,
        Err(StoreError::Corrupt(d)) => {
            *reached += n;
            f.add("history", id, d);
            return Ok(one);
        }
        Err(e) => return Err(e),
    };
    *reached += n;
    // Below the changes the feed holds: entries under their own keys, every
    // one of them, which the walk of the histories reads.
    if lowest <= log.first {
        return Ok(one);
    }
    let prefix = schema::history(sh, id);
    let mut start = schema::history_entry(sh, id, log.first).into_bytes();
    let end = schema::history_entry(sh, id, lowest).into_bytes();
    let mut next = log.first;
    loop {
        let entries = kv.scan(&start, Some(&end), KEYED_CHUNK, false)?;
        let done = entries.len() < KEYED_CHUNK as usize;
        for (k, _) in entries {
            let seq = match store::suffix(&k, &prefix).ok().as_deref() {
                Some([Elem::Int(q)]) if *q > 0 => *q as u64,
                // Keys of no shape are the walk of the histories' to name.
                _ => continue,
            };
            if seq > next {
                f.add(
                    "history",
                    id,
                    format!("entries {next} to {} are missing", seq - 1),
                );
            }
            next = seq + 1;
            start = k;
            start.push(0);
        }
        if done || f.full() {
            break;
        }
    }
    if next < lowest {
        f.add(
            "history",
            id,
            format!("entries {next} to {} are missing", lowest - 1),
        );
    }
    Ok(one)
}
