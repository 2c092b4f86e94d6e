//! The history entries kept under their own keys: each sits within its
//! task's kept history, says its own number, and was recorded at a feed
//! position that holds the same change or was trimmed; where history has a
//! key per change (before layout 9), none is missing.

use crate::changes::slots::Slots;
use crate::keys::Elem;
use crate::kv::Kv;
use crate::model::{Change, StoreError};
#[allow(unused_imports)]
use crate::prelude::*;
use crate::schema;
use crate::store;

use super::record::{RECORD_WALK, at, feed_row, kept, past_head};
use super::tasks::{TaskKey, task_key};
use super::walk::{Findings, decoded, read_ahead, text};

/// Each task's history holds every entry from its log's first to its last,
/// each recorded at a feed position that holds the same change or was
/// trimmed.
pub(super) fn check_histories<K: Kv + ?Sized>(
    kv: &mut K,
    f: &mut Findings,
    slots: &Slots,
    in_feed: bool,
) -> Result<(), StoreError> {
    let sh = slots.shards;
    let prefix = if sh.beside() {
        schema::tasks()
    } else {
        schema::histories()
    };
    // The task being walked, its log, and the next entry it should hold.
    let mut current: Option<(String, Option<store::TaskLog>, u64)> = None;
    let end_of = |f: &mut Findings, current: &Option<(String, Option<store::TaskLog>, u64)>| {
        if let Some((id, Some(log), next)) = current
            && *next <= log.last
            && !in_feed
        {
            f.add(
                "history",
                id,
                format!("entries {next} to {} are missing", log.last),
            );
        }
    };
    let ahead = |kv: &mut K, chunk: &[crate::kv::Entry]| {
        let mut keys = Vec::new();
        for (key, value) in chunk {
            let Ok(elems) = store::suffix(key, &prefix) else {
                continue;
            };
            let id = match (sh.beside(), task_key(&elems), elems.as_slice()) {
                (true, Some(TaskKey::History(id, _)), _) => id,
                (false, _, [Elem::Str(id), Elem::Int(q)]) if *q > 0 => id.as_str(),
                _ => continue,
            };
            keys.push(schema::task_log(sh, id).into_bytes());
            if let Ok(row) = store::decode_history(value)
                && kept(slots, row.position)
            {
                keys.push(schema::feed_entry(row.position.slot, row.position.seq).into_bytes());
            }
        }
        read_ahead(kv, keys)
    };
    store::walk_ahead(kv, &prefix, RECORD_WALK, ahead, |kv, key, value| {
        let Some(elems) = decoded(f, "history", &key, &prefix) else {
            return Ok(!f.full());
        };
        let (id, seq) = if sh.beside() {
            match task_key(&elems) {
                Some(TaskKey::History(id, seq)) => (id.to_owned(), seq),
                // Rows, logs and keys of no shape are the row walk's.
                _ => return Ok(!f.full()),
            }
        } else {
            match elems.as_slice() {
                [Elem::Str(id), Elem::Int(q)] if *q > 0 => (id.clone(), *q as u64),
                _ => {
                    f.add(
                        "history",
                        &text(&elems),
                        "a history key has the wrong shape",
                    );
                    return Ok(!f.full());
                }
            }
        };
        if current.as_ref().is_none_or(|(c, _, _)| *c != id) {
            end_of(f, &current);
            let log = kv
                .get(schema::task_log(sh, &id).as_bytes())?
                .and_then(|b| store::decode_task_log(&b).ok());
            if log.is_none() {
                f.add("history", &id, "a history with no log");
            }
            let first = log.map_or(seq, |l| l.first);
            current = Some((id.clone(), log, first));
        }
        let Some((_, log, next)) = current.as_mut() else {
            return Ok(!f.full());
        };
        let subject = format!("{id}/{seq}");
        if let Some(log) = log {
            if seq < log.first || seq > log.last {
                f.add(
                    "history",
                    &subject,
                    format!("an entry outside the kept {} to {}", log.first, log.last),
                );
            } else if seq > *next && !in_feed {
                f.add(
                    "history",
                    &id,
                    format!("entries {} to {} are missing", *next, seq - 1),
                );
            }
        }
        *next = seq + 1;
        let row = match store::decode_history(&value) {
            Ok(row) => row,
            Err(e) => {
                f.add(
                    "history",
                    &subject,
                    format!("the entry does not decode: {e}"),
                );
                return Ok(!f.full());
            }
        };
        if row.entry.seq != seq {
            f.add(
                "history",
                &subject,
                format!("the entry says it is {}", row.entry.seq),
            );
        }
        if past_head(slots, row.position) {
            f.add(
                "history",
                &subject,
                format!("recorded at {}, past the feed's head", at(row.position)),
            );
        } else if kept(slots, row.position) {
            let right = matches!(
                feed_row(kv, row.position)?.map(|r| r.change),
                Some(Change::Task(t)) if t.id == id && t.entry.seq == seq
            );
            if !right {
                f.add(
                    "history",
                    &subject,
                    format!("the feed holds another change at {}", at(row.position)),
                );
            }
        }
        Ok(!f.full())
    })?;
    end_of(f, &current);
    Ok(())
}
