//! How the verbs that change tasks reach them: one task by id, read with
//! what its change may need in one batch (never laying out the keyspace:
//! `open` wrote the mark); whether an actor holds it; and the tasks an index
//! of instants lists up to now, which the sweeping verbs move. It reads
//! only, and decides no verb's rules.

#[allow(unused_imports)]
use crate::prelude::*;

use crate::keys::{Elem, Key};
use crate::kv::Kv;
use crate::model::{ClaimError, Guard, StoreError, TaskState, Timestamp};
use crate::store::{self, TaskRow, bad_entry};
use crate::validate;

/// Only checks the layout mark, never writes it: these verbs change an
/// existing row, whose `open` wrote the mark.
pub(super) fn load_for_claim<K: Kv + ?Sized>(kv: &mut K, id: &str) -> Result<TaskRow, ClaimError> {
    store::prefetch_task(kv, id)?;
    store::check_layout(kv, false)?;
    store::load_task(kv, id)?.ok_or_else(|| ClaimError::NotFound(id.to_owned()))
}

/// The row, if the guard allows a change to it: a guard naming another
/// revision is refused with the current one (after `not-found`, before the
/// verb's own rules). A job's name is checked as a name.
pub(super) fn guarded(row: TaskRow, guard: Option<&Guard>) -> Result<TaskRow, ClaimError> {
    let Some(g) = guard else {
        return Ok(row);
    };
    if let Some(job) = &g.job {
        validate::name("guard.job", job)?;
    }
    match g.revision {
        Some(r) if r != row.task.revision => Err(ClaimError::Stale(row.task.revision)),
        _ => Ok(row),
    }
}

/// The bulk job a guard names, for the record.
pub(super) fn job_of(guard: Option<&Guard>) -> Option<&str> {
    guard.and_then(|g| g.job.as_deref())
}

/// Whether `actor` holds the task now.
pub(super) fn held_by(row: &TaskRow, actor: &str) -> bool {
    row.task.state == TaskState::Claimed && row.task.assignee.as_deref() == Some(actor)
}

/// The tasks an index of instants lists at or before `now`, at most
/// `limit`, each with the instant it is listed at: `reclaim-lapsed` and
/// `expire-overdue` read what they move this way, and nothing else.
pub(super) fn listed_until<K: Kv + ?Sized>(
    kv: &mut K,
    prefix: Key,
    now: Timestamp,
    limit: u32,
    (entry, index): (&'static str, &'static str),
) -> Result<Vec<(Timestamp, TaskRow)>, StoreError> {
    validate::timestamp("now", now)?;
    validate::limit("limit", limit)?;
    store::check_layout(kv, false)?;
    let end = prefix.clone().int(now).prefix_end();
    let entries = kv.scan(prefix.as_bytes(), Some(&end), limit, false)?;
    let mut instants = Vec::with_capacity(entries.len());
    let mut ids = Vec::with_capacity(entries.len());
    for (k, _) in entries {
        match store::suffix(&k, &prefix)?.as_slice() {
            [Elem::Int(at), Elem::Str(id)] => {
                instants.push(*at);
                ids.push(id.clone());
            }
            _ => return Err(bad_entry(entry)),
        }
    }
    let along = store::Along {
        layout: false,
        leased_shards: true,
    };
    let rows = store::indexed_rows(kv, &ids, index, along)?;
    Ok(instants.into_iter().zip(rows).collect())
}
