//! Settling: `settle` (compare-and-set from pending, or only by the holder),
//! `withdraw-run` (and the withdrawal `seal` shares), `escalate`, and
//! the first half of `expire-overdue` (each overdue task by its
//! `on-expiry`, once; `steps` adds the reminders and chain steps). A settled
//! task stays as it stands: the decision that won a race is the outcome.

#[allow(unused_imports)]
use crate::prelude::*;

use crate::kv::Kv;
use crate::model::{
    ClaimError, Decision, DecisionRecord, Guard, OnExpiry, Settlement, StoreError, Task, TaskState,
    Timestamp,
};
use crate::schema;
use crate::store::{self, Cause, TaskRow};
use crate::validate;

use super::decide::{check_decision, check_decision_input};
use super::lookup::{guarded, held_by, job_of, listed_until, load_for_claim};

/// Moves a pending task to `state`, keeping its assignee; its lease, if
/// any, ends. Answers whether it moved; a settled task stays as it stands.
fn settle_row<K: Kv + ?Sized>(
    kv: &mut K,
    cause: Cause<'_>,
    row: &TaskRow,
    settlement: Settlement,
    decision: Option<DecisionRecord>,
) -> Result<bool, StoreError> {
    if !row.task.state.is_pending() {
        return Ok(false);
    }
    let mut next = row.clone();
    next.task.state = settlement.state();
    next.task.lease_until = None;
    next.task.decision = decision;
    store::write_task(kv, cause, Some(row), &mut next)?;
    Ok(true)
}

pub fn settle<K: Kv + ?Sized>(
    kv: &mut K,
    id: &str,
    settlement: Settlement,
    holder: Option<&str>,
    decision: Option<&Decision>,
    guard: Option<&Guard>,
) -> Result<bool, ClaimError> {
    validate::name("id", id)?;
    if let Some(h) = holder {
        validate::name("holder", h)?;
    }
    if let Some(d) = decision {
        check_decision_input(d)?;
    }
    let row = guarded(load_for_claim(kv, id)?, guard)?;
    // A decision made under a claim counts only while that claim stands: a
    // holder whose lease lapsed and was reclaimed must not settle a task
    // someone else now holds.
    if let Some(h) = holder
        && !held_by(&row, h)
    {
        return Err(ClaimError::NotHeld(h.to_owned()));
    }
    // A settled task stays as it stands, and its decision is not checked:
    // the answer is `false`, as without one.
    if !row.task.state.is_pending() {
        return Ok(false);
    }
    let record = match decision {
        Some(d) => {
            check_decision(kv, &row.task, d)?;
            Some(DecisionRecord {
                outcome: d.outcome.clone(),
                reason: d.reason.clone(),
                output: d.output.clone(),
                by: holder.map(str::to_owned),
                at: kv.call_time(),
            })
        }
        None => None,
    };
    let cause = Cause::of("settle", holder).in_job(job_of(guard));
    Ok(settle_row(kv, cause, &row, settlement, record)?)
}

pub fn withdraw_run<K: Kv + ?Sized>(
    kv: &mut K,
    run: &str,
    awaited: &[String],
) -> Result<u32, StoreError> {
    validate::name("run", run)?;
    let awaited = validate::names("awaited", awaited)?;
    store::check_layout(kv, true)?;
    withdraw_awaited(kv, "withdraw-run", run, &awaited)
}

/// Withdraws the still-pending tasks of `run` among `awaited` (already
/// validated and deduplicated), as `verb` does. Shared with `seal`.
pub(crate) fn withdraw_awaited<K: Kv + ?Sized>(
    kv: &mut K,
    verb: &'static str,
    run: &str,
    awaited: &[String],
) -> Result<u32, StoreError> {
    let shards = store::shards(kv)?;
    let mut keys: Vec<Vec<u8>> = Vec::with_capacity(awaited.len() * 4 + 1);
    for id in awaited {
        let [open, leased] = store::task_counter_keys(kv, id, shards);
        keys.extend([
            schema::task(id).into_bytes(),
            open,
            leased,
            schema::task_log(shards, id).into_bytes(),
        ]);
    }
    keys.push(schema::feed_head(shards, store::feed_slot_of(kv, shards)).into_bytes());
    // Spread by writer, every task names the same two shards.
    keys.sort_unstable();
    keys.dedup();
    kv.prefetch(&keys)?;
    let mut moved = 0;
    for id in awaited {
        if let Some(row) = store::load_task(kv, id)?
            && row.task.run == run
            && settle_row(kv, Cause::service(verb), &row, Settlement::Withdrawn, None)?
        {
            moved += 1;
        }
    }
    Ok(moved)
}

pub fn escalate<K: Kv + ?Sized>(
    kv: &mut K,
    id: &str,
    guard: Option<&Guard>,
) -> Result<Task, ClaimError> {
    validate::name("id", id)?;
    let row = guarded(load_for_claim(kv, id)?, guard)?;
    // A decided task stays decided: the decision that won the race against
    // the escalation sweep is the outcome everybody wanted.
    if !row.task.state.is_pending() {
        return Ok(row.task);
    }
    let mut next = escalated(&row);
    // Escalating an escalated task nobody holds changes nothing: no
    // revision, no record.
    if next == row {
        return Ok(row.task);
    }
    let cause = Cause::service("escalate").in_job(job_of(guard));
    store::write_task(kv, cause, Some(&row), &mut next)?;
    Ok(next.task)
}

/// A pending row as escalation leaves it: `escalated`, unheld, its audience
/// widened by `escalate-to` (an empty audience already means anyone).
fn escalated(row: &TaskRow) -> TaskRow {
    escalated_with(row, &row.task.escalate_to)
}

/// [`escalated`], its audience widened by `roles`: a chain step's.
pub(super) fn escalated_with(row: &TaskRow, roles: &[String]) -> TaskRow {
    let mut next = row.clone();
    next.ever_escalated = true;
    next.task.state = TaskState::Escalated;
    next.task.assignee = None;
    next.task.lease_until = None;
    if !next.task.candidate_roles.is_empty() {
        for role in roles {
            if !next.task.candidate_roles.contains(role) {
                next.task.candidate_roles.push(role.clone());
            }
        }
    }
    next
}

/// `expire-overdue`'s first half: the overdue index up to `now` is exactly
/// the set of tasks owed their expiry, and acting on one takes it out of
/// the index (escalated once, or settled), so no task is acted on twice,
/// and the scan reads only what it moves.
pub(super) fn act_on_overdue<K: Kv + ?Sized>(
    kv: &mut K,
    now: Timestamp,
    limit: u32,
) -> Result<Vec<Task>, StoreError> {
    let listed = listed_until(
        kv,
        schema::overdue(),
        now,
        limit,
        ("overdue", "the overdue index"),
    )?;
    let mut moved = Vec::with_capacity(listed.len());
    for (at, row) in listed {
        if !row.awaits_expiry() || row.task.due_at != Some(at) {
            return Err(StoreError::Corrupt(format!(
                "the overdue index lists task {} at {at}; the row is {} due {:?}",
                row.task.id, row.task.state, row.task.due_at
            )));
        }
        let cause = Cause::service("expire-overdue");
        let mut next = match row.task.on_expiry {
            OnExpiry::Escalate => escalated(&row),
            OnExpiry::Deny | OnExpiry::Proceed => {
                let mut next = row.clone();
                next.task.state = Settlement::Expired.state();
                next.task.lease_until = None;
                next
            }
        };
        store::write_task(kv, cause, Some(&row), &mut next)?;
        moved.push(next.task);
    }
    Ok(moved)
}
