//! The history starts (`("history-start", id)`, see "Where history starts"
//! in docs/architecture.md): what a task written before its keyspace
//! recorded changes held when its history began, kept by the call that
//! recorded its first change. Each must decode as a `before-history` entry,
//! sit in a keyspace whose tasks may predate their history (one that
//! spells the record apart and did not record every change from the
//! start), and belong to a task that has a row and a history; and while the
//! task's entry 1 is kept, the two must say the same: the state entry 1
//! says the task left, at entry 1's time. The walk of the logs, which meets
//! entry 1, asks for that agreement here. It never reads another task's
//! keys than the start's.

use crate::keys::Elem;
use crate::kv::Kv;
use crate::model::{HistoryEntry, StoreError};
#[allow(unused_imports)]
use crate::prelude::*;
use crate::schema::{self, Shards};
use crate::store;

use super::walk::{Findings, decoded, read_ahead, text};

/// Entries per scan of the starts: each is a history entry.
const STARTS_WALK: u32 = 32;

/// Walks every history start. `every`: the keyspace has recorded every
/// change from the start, so no task of it predates its history.
pub(super) fn check_history_starts<K: Kv + ?Sized>(
    kv: &mut K,
    f: &mut Findings,
    sh: Shards,
    every: bool,
) -> Result<(), StoreError> {
    let prefix = schema::history_starts();
    let ahead = |kv: &mut K, chunk: &[crate::kv::Entry]| {
        let mut keys = Vec::new();
        for (key, _) in chunk {
            if let Ok(elems) = store::suffix(key, &prefix)
                && let [Elem::Str(id)] = elems.as_slice()
            {
                keys.push(schema::task(id).into_bytes());
                keys.push(schema::task_log(sh, id).into_bytes());
            }
        }
        read_ahead(kv, keys)
    };
    store::walk_ahead(kv, &prefix, STARTS_WALK, ahead, |kv, key, value| {
        let Some(elems) = decoded(f, "history-start", &key, &prefix) else {
            return Ok(!f.full());
        };
        let [Elem::Str(id)] = elems.as_slice() else {
            f.add(
                "history-start",
                &text(&elems),
                "a history-start key has the wrong shape",
            );
            return Ok(!f.full());
        };
        if every {
            f.add(
                "history-start",
                id,
                "a history start in a keyspace that has recorded every change from the start",
            );
        }
        if kv.get(schema::task(id).as_bytes())?.is_none() {
            f.add(
                "history-start",
                id,
                "a history start for a task with no row",
            );
        } else if kv.get(schema::task_log(sh, id).as_bytes())?.is_none() {
            f.add(
                "history-start",
                id,
                "a history start for a task whose history has not begun",
            );
        }
        match store::decode_history_start(&value) {
            Err(e) => f.add(
                "history-start",
                id,
                format!("the entry does not decode: {e}"),
            ),
            Ok(start) => {
                let opening = start.seq == 0
                    && start.verb == store::BEFORE_HISTORY
                    && start.actor.is_none()
                    && start.before.is_none();
                if !opening {
                    f.add(
                        "history-start",
                        id,
                        format!(
                            "the entry is {} {:?}, not a {} entry numbered 0",
                            start.seq,
                            start.verb,
                            store::BEFORE_HISTORY
                        ),
                    );
                }
            }
        }
        Ok(!f.full())
    })
}

/// Holds task `id`'s history start, if it has one, to its entry 1 while its
/// `log` keeps that: one call wrote both, so the start holds the state entry
/// 1 says the task left, at entry 1's time. `one` is entry 1 where the walk
/// of the task's changes met it; else it is read under its own key. A start
/// or an entry 1 that cannot be read is for the other walks to name.
pub(super) fn check_start_agrees<K: Kv + ?Sized>(
    kv: &mut K,
    f: &mut Findings,
    sh: Shards,
    id: &str,
    log: &store::TaskLog,
    one: Option<HistoryEntry>,
) -> Result<(), StoreError> {
    // Trimmed past entry 1, the start stays with nothing left to hold it to.
    if log.first != 1 {
        return Ok(());
    }
    let start = match store::load_history_start(kv, id) {
        Ok(Some(start)) => start,
        Ok(None) | Err(StoreError::Corrupt(_)) => return Ok(()),
        Err(e) => return Err(e),
    };
    let one = match one {
        Some(one) => one,
        None => match kv
            .get(schema::history_entry(sh, id, 1).as_bytes())?
            .and_then(|b| store::decode_history(&b).ok())
        {
            Some(row) => row.entry,
            None => return Ok(()),
        },
    };
    if one.before != Some(start.after) {
        f.add(
            "history-start",
            id,
            format!(
                "the history start says the task was {} when its history began; entry 1 says {}",
                start.after,
                one.before
                    .map_or_else(|| "it was opened".to_owned(), |s| format!("it was {s}")),
            ),
        );
    }
    if one.at != start.at {
        f.add(
            "history-start",
            id,
            format!(
                "the history start was kept at {}, and entry 1 recorded at {}",
                start.at, one.at
            ),
        );
    }
    Ok(())
}
