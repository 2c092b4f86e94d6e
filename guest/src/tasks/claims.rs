//! The claim ladder: `claim`, `take-over` (a claim as compare-and-swap on
//! the holder), `release`, `renew` and `reclaim-lapsed` (leases that ended,
//! back to the queue); a worker's claims of the queue's heads are `batch`'s. Each checks its inputs, then existence, then the
//! rungs in their contractual order, and only then writes; a repeat by the
//! holder changes nothing but a lease's end.

#[allow(unused_imports)]
use crate::prelude::*;

use crate::kv::Kv;
use crate::model::{ClaimError, Guard, Lease, StoreError, Task, TaskState, Timestamp};
use crate::schema;
use crate::store::{self, Cause, TaskRow};
use crate::validate;

use super::lookup::{guarded, held_by, job_of, listed_until, load_for_claim};

/// The rungs shared by `claim` and `take-over`, in their contractual order.
/// Eligibility outranks availability: a barred reviewer is told so, not who
/// holds the task.
pub(super) fn ladder(row: &TaskRow, actor: &str, roles: &[String]) -> Result<(), ClaimError> {
    let t = &row.task;
    if t.excluded_actors.iter().any(|a| a == actor) {
        return Err(ClaimError::Excluded(actor.to_owned()));
    }
    if !t.admits_roles(roles) {
        return Err(ClaimError::WrongRole(actor.to_owned()));
    }
    if !t.state.is_pending() {
        return Err(ClaimError::NotPending(t.state));
    }
    Ok(())
}

/// Gives the task to `actor`, held under `lease` or, without one, until
/// released; `verb` is the one that hands it over.
pub(super) fn hand_to<K: Kv + ?Sized>(
    kv: &mut K,
    cause: Cause<'_>,
    row: &TaskRow,
    actor: &str,
    lease: Option<&Lease>,
) -> Result<Task, StoreError> {
    let mut next = row.clone();
    next.task.state = TaskState::Claimed;
    next.task.assignee = Some(actor.to_owned());
    next.task.lease_until = lease.map(|l| l.end());
    store::write_task(kv, cause, Some(row), &mut next)?;
    Ok(next.task)
}

/// A repeat claim by the holder: a lease sets the new end; without one
/// nothing changes, so a retried unleased claim never cuts a lease short or
/// makes it endless.
pub(super) fn reclaim_by_holder<K: Kv + ?Sized>(
    kv: &mut K,
    cause: Cause<'_>,
    row: &TaskRow,
    lease: Option<&Lease>,
) -> Result<Task, StoreError> {
    match lease {
        Some(l) if row.task.lease_until != Some(l.end()) => {
            let mut next = row.clone();
            next.task.lease_until = Some(l.end());
            store::write_task(kv, cause, Some(row), &mut next)?;
            Ok(next.task)
        }
        _ => Ok(row.task.clone()),
    }
}

/// The row put back in the queue it came from, unheld: what `release` and
/// `reclaim-lapsed` both do.
pub(super) fn returned(row: &TaskRow) -> TaskRow {
    let mut next = row.clone();
    next.task.assignee = None;
    next.task.lease_until = None;
    next.task.state = if row.ever_escalated {
        TaskState::Escalated
    } else {
        TaskState::Open
    };
    next
}

pub fn claim<K: Kv + ?Sized>(
    kv: &mut K,
    id: &str,
    actor: &str,
    roles: &[String],
    lease: Option<&Lease>,
    guard: Option<&Guard>,
) -> Result<Task, ClaimError> {
    validate::name("id", id)?;
    validate::name("actor", actor)?;
    let roles = validate::names("roles", roles)?;
    validate::claim_lease(lease)?;
    let row = guarded(load_for_claim(kv, id)?, guard)?;
    ladder(&row, actor, &roles)?;
    let cause = Cause::by("claim", actor).in_job(job_of(guard));
    match (&row.task.state, &row.task.assignee) {
        (TaskState::Claimed, Some(holder)) if holder == actor => {
            Ok(reclaim_by_holder(kv, cause, &row, lease)?)
        }
        (TaskState::Claimed, Some(holder)) => Err(ClaimError::AlreadyClaimed(holder.clone())),
        (TaskState::Claimed, None) => Err(ClaimError::Store(StoreError::Corrupt(format!(
            "task {id} is claimed by nobody"
        )))),
        _ => Ok(hand_to(kv, cause, &row, actor, lease)?),
    }
}

pub fn take_over<K: Kv + ?Sized>(
    kv: &mut K,
    id: &str,
    from: &str,
    actor: &str,
    roles: &[String],
    lease: Option<&Lease>,
    guard: Option<&Guard>,
) -> Result<Task, ClaimError> {
    validate::name("id", id)?;
    validate::name("from", from)?;
    validate::name("actor", actor)?;
    let roles = validate::names("roles", roles)?;
    validate::claim_lease(lease)?;
    let row = guarded(load_for_claim(kv, id)?, guard)?;
    let cause = Cause::by("take-over", actor).in_job(job_of(guard));
    // A take-over is a claim: the ladder does not thin because the previous
    // holder left.
    ladder(&row, actor, &roles)?;
    // The compare-and-swap: a take-over decided from a stale view must not
    // displace whoever holds the task now, and an unheld task takes `claim`.
    if !held_by(&row, from) {
        return Err(ClaimError::NotHeld(from.to_owned()));
    }
    if from == actor {
        return Ok(reclaim_by_holder(kv, cause, &row, lease)?);
    }
    Ok(hand_to(kv, cause, &row, actor, lease)?)
}

pub fn release<K: Kv + ?Sized>(
    kv: &mut K,
    id: &str,
    actor: &str,
    guard: Option<&Guard>,
) -> Result<(), ClaimError> {
    validate::name("id", id)?;
    validate::name("actor", actor)?;
    let row = guarded(load_for_claim(kv, id)?, guard)?;
    if !held_by(&row, actor) {
        return Err(ClaimError::NotHeld(actor.to_owned()));
    }
    let cause = Cause::by("release", actor).in_job(job_of(guard));
    store::write_task(kv, cause, Some(&row), &mut returned(&row))?;
    Ok(())
}

pub fn renew<K: Kv + ?Sized>(
    kv: &mut K,
    id: &str,
    actor: &str,
    now: Timestamp,
    lease_ms: u32,
    guard: Option<&Guard>,
) -> Result<Task, ClaimError> {
    validate::name("id", id)?;
    validate::name("actor", actor)?;
    let lease = Lease { now, lease_ms };
    validate::claim_lease(Some(&lease))?;
    let row = guarded(load_for_claim(kv, id)?, guard)?;
    // A claim without a lease cannot be renewed into one: how a task is held
    // is decided when it is claimed.
    if !held_by(&row, actor) || row.task.lease_until.is_none() {
        return Err(ClaimError::NotHeld(actor.to_owned()));
    }
    let cause = Cause::by("renew", actor).in_job(job_of(guard));
    Ok(reclaim_by_holder(kv, cause, &row, Some(&lease))?)
}

/// `reclaim-lapsed`: the lease index up to `now` is exactly the set of
/// lapsed leases, so the scan reads only what it moves.
pub fn reclaim_lapsed<K: Kv + ?Sized>(
    kv: &mut K,
    now: Timestamp,
    limit: u32,
) -> Result<Vec<Task>, StoreError> {
    let listed = listed_until(
        kv,
        schema::leases(),
        now,
        limit,
        ("lease", "the lease index"),
    )?;
    let mut moved = Vec::with_capacity(listed.len());
    for (at, row) in listed {
        if !row.is_leased() || row.task.lease_until != Some(at) {
            return Err(StoreError::Corrupt(format!(
                "the lease index lists task {} at {at}; the row is {} with lease until {:?}",
                row.task.id, row.task.state, row.task.lease_until
            )));
        }
        let mut next = returned(&row);
        store::write_task(kv, Cause::service("reclaim-lapsed"), Some(&row), &mut next)?;
        moved.push(next.task);
    }
    Ok(moved)
}
