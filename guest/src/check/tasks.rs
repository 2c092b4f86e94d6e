//! The task rows: each decodes, is stored under its own id, carries a lease
//! only while claimed, has every index entry it implies, and says what its
//! history's last entry says (where it has a history), and keeps its
//! reminders and chain to their rules. It counts the rows
//! for the counters' check, and names the shapes of the keys in the tasks'
//! range (a row, and the record beside it in layout 7 on), which the walks
//! of the record share.

use crate::keys::{Elem, Key};
use crate::kv::Kv;
use crate::model::StoreError;
#[allow(unused_imports)]
use crate::prelude::*;
use crate::schema::{self, Shards};
use crate::store;

use super::counters::{PerShard, tally};
use super::indexes::index_name;
use super::walk::{Findings, decoded, read_ahead, text};

/// The task id of a row's key in the tasks' range, `None` for any other key
/// there (the record beside its row, or a key of no known shape).
fn row_id(shards: Shards, key: &[u8], prefix: &Key) -> Option<String> {
    let elems = store::suffix(key, prefix).ok()?;
    if shards.beside() {
        match task_key(&elems) {
            Some(TaskKey::Row(id)) => Some(id.to_owned()),
            _ => None,
        }
    } else {
        match elems.as_slice() {
            [Elem::Str(id)] => Some(id.clone()),
            _ => None,
        }
    }
}

/// Checks every task row, answering how many pending and leased rows count
/// in each shard.
pub(super) fn check_tasks<K: Kv + ?Sized>(
    kv: &mut K,
    f: &mut Findings,
    shards: Shards,
    every: bool,
    in_feed: bool,
) -> Result<(PerShard, PerShard), StoreError> {
    let mut pending: PerShard = [0; schema::MAX_SHARDS as usize];
    let mut leased: PerShard = [0; schema::MAX_SHARDS as usize];
    let prefix = schema::tasks();
    // Ahead of each chunk's rows: their index entries and logs, then the
    // history entries the logs name.
    let ahead = |kv: &mut K, chunk: &[crate::kv::Entry]| {
        let mut keys = Vec::new();
        let mut ids = Vec::new();
        for (key, value) in chunk {
            let Some(id) = row_id(shards, key, &prefix) else {
                continue;
            };
            if let Ok(row) = store::decode_task(value) {
                keys.extend(row.index_keys());
            }
            keys.push(schema::task_log(shards, &id).into_bytes());
            ids.push(id);
        }
        read_ahead(kv, keys)?;
        let mut keys = Vec::new();
        for id in ids {
            if let Some(bytes) = kv.get(schema::task_log(shards, &id).as_bytes())?
                && let Ok(log) = store::decode_task_log(&bytes)
            {
                keys.push(schema::history_entry(shards, &id, log.last).into_bytes());
                keys.push(schema::feed_entry(log.position.slot, log.position.seq).into_bytes());
            }
        }
        read_ahead(kv, keys)
    };
    store::walk_ahead(kv, &prefix, store::SCAN_CHUNK, ahead, |kv, key, value| {
        let Some(elems) = decoded(f, "task", &key, &prefix) else {
            return Ok(!f.full());
        };
        let key = if shards.beside() {
            task_key(&elems)
        } else {
            match elems.as_slice() {
                [Elem::Str(id)] => Some(TaskKey::Row(id)),
                _ => None,
            }
        };
        let id = match key {
            Some(TaskKey::Row(id)) => id.to_owned(),
            // The record beside the row: the walks of the record check it.
            Some(TaskKey::Log(_) | TaskKey::History(..)) => return Ok(!f.full()),
            None => {
                f.add("task", &text(&elems), "a task key has the wrong shape");
                return Ok(!f.full());
            }
        };
        let row = match store::decode_task(&value) {
            Ok(row) => row,
            Err(e) => {
                f.add("task", &id, format!("the row does not decode: {e}"));
                return Ok(!f.full());
            }
        };
        if row.task.id != id {
            f.add(
                "task",
                &id,
                format!("the row says its id is {}", row.task.id),
            );
        }
        // Where the row's writes counted it: by the id it is stored under.
        let shard = tally(shards, || shards.task(&id));
        pending[shard] += u64::from(row.task.state.is_pending());
        leased[shard] += u64::from(row.is_leased());
        // Only a claim is held: a lease on anything else would be a lease
        // no index entry stands for.
        if row.task.lease_until.is_some() && !row.is_leased() {
            f.add(
                "task",
                &id,
                format!("a {} task carries a lease", row.task.state),
            );
        }
        // Its reminders and chain hold to `open`'s rules, and it cannot
        // have fired more steps than it has.
        let t = &row.task;
        if let Err(e) =
            crate::timeline::checked("", t.due_at, t.created_at, &t.remind_before, &t.escalation)
        {
            f.add(
                "task",
                &id,
                format!("its reminders or chain break the rules: {e}"),
            );
        }
        let steps = t.remind_before.len() + t.escalation.len();
        if t.steps_done as usize > steps {
            f.add(
                "task",
                &id,
                format!("{} steps fired of the {steps} it has", t.steps_done),
            );
        }
        // A row no layout-10 build has changed (revision 0) was written
        // before the `held` index: its entry comes with its next change.
        let unheld = row.held_key().filter(|_| row.task.revision == 0);
        for k in row.index_keys() {
            if Some(&k) != unheld.as_ref() && kv.get(&k)?.is_none() {
                f.add(
                    index_name(&k),
                    &id,
                    "the row implies this entry; it is missing",
                );
            }
        }
        check_last_change(kv, f, shards, &id, &row, every, in_feed)?;
        Ok(!f.full())
    })?;
    Ok((pending, leased))
}

/// What a key of a task's range is, in a keyspace with the record beside
/// its rows, by its elements after `("task")`.
pub(super) enum TaskKey<'a> {
    Row(&'a str),
    Log(&'a str),
    History(&'a str, u64),
}

/// `None` for a key of no known shape.
pub(super) fn task_key(elems: &[Elem]) -> Option<TaskKey<'_>> {
    match elems {
        [Elem::Str(id)] => Some(TaskKey::Row(id)),
        [Elem::Str(id), Elem::Str(log)] if log == "log" => Some(TaskKey::Log(id)),
        [Elem::Str(id), Elem::Str(h), Elem::Int(q)] if h == "history" && *q > 0 => {
            Some(TaskKey::History(id, *q as u64))
        }
        _ => None,
    }
}

/// The task's last history entry must say what its row says.
fn check_last_change<K: Kv + ?Sized>(
    kv: &mut K,
    f: &mut Findings,
    sh: Shards,
    id: &str,
    row: &store::TaskRow,
    every: bool,
    in_feed: bool,
) -> Result<(), StoreError> {
    let Some(bytes) = kv.get(schema::task_log(sh, id).as_bytes())? else {
        if every {
            f.add(
                "history",
                id,
                "the task has no history in a keyspace that records every change",
            );
        }
        return Ok(());
    };
    // A log that does not decode is reported by the walk of the logs.
    let Ok(log) = store::decode_task_log(&bytes) else {
        return Ok(());
    };
    let last = match store::load_history_entry(kv, sh, id, &log, log.last, in_feed) {
        Ok(Some(last)) => last,
        Ok(None) => {
            f.add(
                "history",
                id,
                format!("the log's last entry, {}, is missing", log.last),
            );
            return Ok(());
        }
        // An entry that does not decode, or a change in the feed that is
        // not the task's: the walks of the record name it.
        Err(StoreError::Corrupt(_)) => return Ok(()),
        Err(e) => return Err(e),
    };
    let (e, t) = (&last.entry, &row.task);
    let differs = [
        ("state", e.after != t.state),
        ("assignee", e.assignee != t.assignee),
        ("lease end", e.lease_until != t.lease_until),
        ("candidate roles", e.candidate_roles != t.candidate_roles),
        ("excluded actors", e.excluded_actors != t.excluded_actors),
    ];
    for (what, wrong) in differs {
        if wrong {
            f.add(
                "history",
                id,
                format!(
                    "the last entry, {}, and the row disagree on the {what}",
                    log.last
                ),
            );
        }
    }
    Ok(())
}
