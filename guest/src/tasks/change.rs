//! Changing a task after it opens: `update` (due time, priority, roles,
//! escalation roles, excluded actors, expiry rule, allowed outcomes, each by
//! `open`'s rules) and `note` (an append-only remark). Every index follows
//! through [`crate::store::write_task`]; what these verbs own is the edge
//! where a change removes the holder's right to hold the task.

#[allow(unused_imports)]
use crate::prelude::*;

use crate::kv::Kv;
use crate::model::{ClaimError, Guard, Task, TaskChanges, TaskState};
use crate::store::{self, Cause};
use crate::timeline;
use crate::validate::{self, invalid};

use super::claims::returned;
use super::lookup::{guarded, job_of, load_for_claim};

/// The changes under `open`'s input rules, lists deduplicated.
/// `update`'s checks of its changes, before any task is read; a bulk job
/// runs them when it starts.
pub(crate) fn checked(c: &TaskChanges) -> Result<TaskChanges, ClaimError> {
    if !c.names_a_field() {
        return Err(invalid("changes name no field: nothing to update").into());
    }
    if let Some(Some(due)) = c.due_at {
        validate::timestamp("changes.due-at", due)?;
    }
    let list = |field: &str, v: &Option<Vec<String>>| {
        v.as_deref().map(|l| validate::names(field, l)).transpose()
    };
    if let Some(o) = &c.outcomes {
        validate::outcome_rules("changes.outcomes", o)?;
    }
    Ok(TaskChanges {
        candidate_roles: list("changes.candidate-roles", &c.candidate_roles)?,
        escalate_to: list("changes.escalate-to", &c.escalate_to)?,
        excluded_actors: list("changes.excluded-actors", &c.excluded_actors)?,
        ..c.clone()
    })
}

pub fn update<K: Kv + ?Sized>(
    kv: &mut K,
    id: &str,
    by: Option<&str>,
    changes: &TaskChanges,
    guard: Option<&Guard>,
) -> Result<Task, ClaimError> {
    validate::name("id", id)?;
    if let Some(b) = by {
        validate::name("by", b)?;
    }
    let c = checked(changes)?;
    let row = guarded(load_for_claim(kv, id)?, guard)?;
    if !row.task.state.is_pending() {
        return Err(ClaimError::NotPending(row.task.state));
    }
    let mut next = row.clone();
    let t = &mut next.task;
    if let Some(due) = c.due_at {
        t.due_at = due;
    }
    if let Some(p) = c.priority {
        t.priority = p;
    }
    if let Some(r) = c.candidate_roles {
        t.candidate_roles = r;
    }
    if let Some(r) = c.escalate_to {
        t.escalate_to = r;
    }
    if let Some(r) = c.excluded_actors {
        t.excluded_actors = r;
    }
    if let Some(e) = c.on_expiry {
        t.on_expiry = e;
    }
    if let Some(o) = c.outcomes {
        t.outcomes = o;
    }
    if let Some(r) = c.remind_before {
        t.remind_before = r;
    }
    if let Some(e) = c.escalation {
        t.escalation = e;
    }
    // The timeline is checked as the change leaves it, so a due time
    // cleared under standing reminders is refused, as is one moved so
    // close to the creation that a reminder could not fit.
    timeline::tidy("changes.", t)?;
    t.steps_done = timeline::rearmed(&row.task, t);
    // An excluded actor never holds a task: the claim ends in this change,
    // and the task goes back to the queue it came from.
    if t.state == TaskState::Claimed
        && let Some(holder) = &t.assignee
        && t.excluded_actors.contains(holder)
    {
        next = returned(&next);
    }
    if next == row {
        return Ok(row.task);
    }
    let cause = Cause::of("update", by).in_job(job_of(guard));
    store::write_task(kv, cause, Some(&row), &mut next)?;
    Ok(next.task)
}

pub fn note<K: Kv + ?Sized>(
    kv: &mut K,
    id: &str,
    actor: &str,
    text: &str,
    guard: Option<&Guard>,
) -> Result<Task, ClaimError> {
    validate::name("id", id)?;
    validate::name("actor", actor)?;
    if text.is_empty() {
        return Err(invalid("text is empty").into());
    }
    validate::text("text", text)?;
    let row = guarded(load_for_claim(kv, id)?, guard)?;
    let mut next = row.clone();
    let cause = Cause {
        note: Some(text),
        ..Cause::by("note", actor).in_job(job_of(guard))
    };
    store::write_task(kv, cause, Some(&row), &mut next)?;
    Ok(next.task)
}
