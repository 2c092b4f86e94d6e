//! Reminders and escalation chains firing: `expire-overdue`, whose second
//! half fires them over the `wake` index (its first half is `settle`'s),
//! and `next-wake`, what a sweeper sleeps until. A pending task is in the index at its next step's instant
//! ([`crate::timeline::next_step`]); firing a step counts it done, which
//! moves the entry to the step after (or out), so no step fires twice
//! however many sweepers run. The timeline's rules are `timeline`'s; this
//! file only acts on them.

#[allow(unused_imports)]
use crate::prelude::*;

use crate::keys::{Elem, Key};
use crate::kv::Kv;
use crate::model::{Settlement, StepAction, StoreError, Task, TaskStep, Timestamp};
use crate::schema;
use crate::store::{self, Cause, bad_entry};
use crate::timeline;

use super::lookup::listed_until;
use super::settle::{act_on_overdue, escalated_with};

/// `expire-overdue`: the overdue tasks by their `on-expiry` first, then,
/// with what is left of the call's limit, due reminders and chain steps.
pub fn expire_overdue<K: Kv + ?Sized>(
    kv: &mut K,
    now: Timestamp,
    limit: u32,
) -> Result<Vec<Task>, StoreError> {
    let mut moved = act_on_overdue(kv, now, limit)?;
    let left = limit.saturating_sub(u32::try_from(moved.len()).unwrap_or(u32::MAX));
    moved.extend(fire_due_steps(kv, now, left)?);
    Ok(moved)
}

/// Fires the next step of up to `limit` pending tasks whose step is due by
/// `now`, earliest first: one step per task per call, each its own change.
fn fire_due_steps<K: Kv + ?Sized>(
    kv: &mut K,
    now: Timestamp,
    limit: u32,
) -> Result<Vec<Task>, StoreError> {
    if limit == 0 {
        return Ok(Vec::new());
    }
    let listed = listed_until(kv, schema::wakes(), now, limit, ("wake", "the wake index"))?;
    let mut moved = Vec::with_capacity(listed.len());
    for (at, row) in listed {
        let Some((step_at, step)) = timeline::next_step(&row.task).filter(|(s, _)| *s == at) else {
            return Err(StoreError::Corrupt(format!(
                "the wake index lists task {} at {at}; the row is {} with {} of its steps fired",
                row.task.id, row.task.state, row.task.steps_done
            )));
        };
        debug_assert!(step_at <= now);
        let mut next = match &step {
            TaskStep::Reminder(_) => row.clone(),
            TaskStep::Escalation(s) => match &s.action {
                StepAction::Escalate(roles) => escalated_with(&row, roles),
                StepAction::Expire => {
                    let mut next = row.clone();
                    next.task.state = Settlement::Expired.state();
                    next.task.lease_until = None;
                    next
                }
            },
        };
        next.task.steps_done = row.task.steps_done.saturating_add(1);
        let cause = Cause {
            step: Some(&step),
            ..Cause::service("expire-overdue")
        };
        store::write_task(kv, cause, Some(&row), &mut next)?;
        moved.push(next.task);
    }
    Ok(moved)
}

/// The instant of an index's first entry, for one whose keys are
/// `(instant, id)` under `prefix`.
fn first_instant<K: Kv + ?Sized>(
    kv: &mut K,
    prefix: Key,
    entry: &'static str,
) -> Result<Option<Timestamp>, StoreError> {
    let first = kv.scan(prefix.as_bytes(), Some(&prefix.prefix_end()), 1, false)?;
    match first.first() {
        None => Ok(None),
        Some((k, _)) => match store::suffix(k, &prefix)?.as_slice() {
            [Elem::Int(at), Elem::Str(_)] => Ok(Some(*at)),
            _ => Err(bad_entry(entry)),
        },
    }
}

/// `next-wake`: the earlier of the overdue index's head and the wake
/// index's head.
pub fn next_wake<K: Kv + ?Sized>(kv: &mut K) -> Result<Option<Timestamp>, StoreError> {
    store::check_layout(kv, false)?;
    let overdue = first_instant(kv, schema::overdue(), "overdue")?;
    let wake = first_instant(kv, schema::wakes(), "wake")?;
    Ok(match (overdue, wake) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    })
}
