//! Moving a claim by someone's say: `assign` (a manager claims the task for
//! someone, taking it from whoever holds it), `unassign` (back to the
//! queue), `delegate` (the holder hands it on). Each keeps the claim
//! ladder's rules for whoever ends up holding it: an excluded actor never
//! does, and the roles rule is skipped only where the call says so, on the
//! record.

#[allow(unused_imports)]
use crate::prelude::*;

use crate::kv::Kv;
use crate::model::{ClaimError, Guard, Lease, Task, TaskState};
use crate::store::{self, Cause, TaskRow};
use crate::validate;

use super::claims::{hand_to, ladder, reclaim_by_holder, returned};
use super::lookup::{guarded, held_by, job_of, load_for_claim};

/// The ladder for `to`, with the roles rung skipped when `override_roles`.
fn ladder_for(
    row: &TaskRow,
    to: &str,
    roles: &[String],
    override_roles: bool,
) -> Result<(), ClaimError> {
    if override_roles {
        // Every role the task names admits `to`: the rung passes, the other
        // rungs stand.
        let all: Vec<String> = row.task.candidate_roles.clone();
        ladder(row, to, &all)
    } else {
        ladder(row, to, roles)
    }
}

#[allow(clippy::too_many_arguments)]
pub fn assign<K: Kv + ?Sized>(
    kv: &mut K,
    id: &str,
    to: &str,
    roles: &[String],
    lease: Option<&Lease>,
    override_roles: bool,
    by: Option<&str>,
    guard: Option<&Guard>,
) -> Result<Task, ClaimError> {
    validate::name("id", id)?;
    validate::name("to", to)?;
    let roles = validate::names("roles", roles)?;
    validate::claim_lease(lease)?;
    if let Some(b) = by {
        validate::name("by", b)?;
    }
    let row = guarded(load_for_claim(kv, id)?, guard)?;
    ladder_for(&row, to, &roles, override_roles)?;
    // Recorded only when the override made the difference.
    let overrode = override_roles && !row.task.admits_roles(&roles);
    let cause = Cause {
        override_roles: overrode,
        ..Cause::of("assign", by).in_job(job_of(guard))
    };
    if held_by(&row, to) {
        return Ok(reclaim_by_holder(kv, cause, &row, lease)?);
    }
    Ok(hand_to(kv, cause, &row, to, lease)?)
}

pub fn unassign<K: Kv + ?Sized>(
    kv: &mut K,
    id: &str,
    by: Option<&str>,
    guard: Option<&Guard>,
) -> Result<Task, ClaimError> {
    validate::name("id", id)?;
    if let Some(b) = by {
        validate::name("by", b)?;
    }
    let row = guarded(load_for_claim(kv, id)?, guard)?;
    if !row.task.state.is_pending() {
        return Err(ClaimError::NotPending(row.task.state));
    }
    if row.task.state != TaskState::Claimed {
        return Ok(row.task);
    }
    let mut next = returned(&row);
    let cause = Cause::of("unassign", by).in_job(job_of(guard));
    store::write_task(kv, cause, Some(&row), &mut next)?;
    Ok(next.task)
}

#[allow(clippy::too_many_arguments)]
pub fn delegate<K: Kv + ?Sized>(
    kv: &mut K,
    id: &str,
    from: &str,
    to: &str,
    roles: &[String],
    lease: Option<&Lease>,
    guard: Option<&Guard>,
) -> Result<Task, ClaimError> {
    validate::name("id", id)?;
    validate::name("from", from)?;
    validate::name("to", to)?;
    let roles = validate::names("roles", roles)?;
    validate::claim_lease(lease)?;
    let row = guarded(load_for_claim(kv, id)?, guard)?;
    // Only the holder learns whether the rules would take `to`: anyone
    // else is told only that they do not hold the task.
    if !held_by(&row, from) {
        return Err(ClaimError::NotHeld(from.to_owned()));
    }
    ladder(&row, to, &roles)?;
    let cause = Cause::by("delegate", from).in_job(job_of(guard));
    if from == to {
        return Ok(reclaim_by_holder(kv, cause, &row, lease)?);
    }
    Ok(hand_to(kv, cause, &row, to, lease)?)
}
