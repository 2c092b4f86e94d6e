//! A worker's verbs: `claim-batch` (up to a count of the caller's queue
//! heads, claimed in one call) and `settle-and-claim` (what the worker
//! finished, settled each on its own, then the next heads claimed, in one
//! call). `claim-next` is `claim-batch` with a count of one. They decide no
//! rule of their own: eligibility and order are the queue's, a settle's
//! checks are `settle`'s, and every change goes through the same writes as
//! a single verb's, so each task keeps its own history and feed entry.

#[allow(unused_imports)]
use crate::prelude::*;

use crate::kv::Kv;
use crate::model::{
    ClaimError, DecisionRecord, Finished, Lease, QueueQuery, SettleAnswer, SettledAndClaimed,
    StoreError, Task, TaskState,
};
use crate::queue;
use crate::store::{self, Cause};
use crate::validate;

use super::claims::hand_to;
use super::decide::{check_decision, check_decision_input};
use super::lookup::held_by;

/// The most tasks one call claims, and the most finished tasks one call
/// settles: a batch stays one short transaction, and its answer small.
pub const MAX_BATCH: u32 = 100;

/// `claim-batch`: up to `count` heads of the caller's queue, claimed in
/// queue order in this call. The queue is read inside the call's own
/// transaction, so every head it sees is free: concurrent callers never
/// receive one task, and none is refused over a head another took.
pub fn claim_batch<K: Kv + ?Sized>(
    kv: &mut K,
    query: &QueueQuery,
    lease: Option<&Lease>,
    count: u32,
) -> Result<Vec<Task>, StoreError> {
    if !(1..=MAX_BATCH).contains(&count) {
        return Err(validate::invalid(format!(
            "count is {count}, outside 1..={MAX_BATCH}"
        )));
    }
    let (roles, after, actor) = worker_input(query, lease)?;
    claim_heads(
        kv,
        "claim-batch",
        &roles,
        after.as_deref(),
        &actor,
        lease,
        count,
    )
}

/// `claim-next`: the head of the caller's queue, claimed in the same call.
/// It reads what a one-task page reads, and so shares the page's bound: the
/// counter shards the claim moves come in the batch of rows.
pub fn claim_next<K: Kv + ?Sized>(
    kv: &mut K,
    query: &QueueQuery,
    lease: Option<&Lease>,
) -> Result<Option<Task>, StoreError> {
    let (roles, after, actor) = worker_input(query, lease)?;
    let claimed = claim_heads(kv, "claim-next", &roles, after.as_deref(), &actor, lease, 1)?;
    Ok(claimed.into_iter().next())
}

/// `settle-and-claim`: each of `done` settled if the caller holds it, each
/// answered on its own, then up to `count` heads claimed. Every input is
/// checked before anything is read; an entry's own fault (a malformed id, a
/// decision its task refuses) is that entry's answer, never the call's.
pub fn settle_and_claim<K: Kv + ?Sized>(
    kv: &mut K,
    done: &[Finished],
    query: &QueueQuery,
    lease: Option<&Lease>,
    count: u32,
) -> Result<SettledAndClaimed, StoreError> {
    if count > MAX_BATCH {
        return Err(validate::invalid(format!(
            "count is {count}, outside 0..={MAX_BATCH}"
        )));
    }
    if done.len() > MAX_BATCH as usize {
        return Err(validate::invalid(format!(
            "done has {} entries, more than {MAX_BATCH}",
            done.len()
        )));
    }
    let (roles, after, actor) = worker_input(query, lease)?;
    let mut answers = Vec::with_capacity(done.len());
    if !done.is_empty() {
        let ids: Vec<&str> = done
            .iter()
            .filter(|f| validate::name("id", &f.id).is_ok())
            .map(|f| f.id.as_str())
            .collect();
        store::prefetch_tasks(kv, &ids)?;
        store::check_layout(kv, false)?;
        for f in done {
            answers.push(settle_one(kv, f, &actor)?);
        }
    }
    let claimed = if count == 0 {
        Vec::new()
    } else {
        claim_heads(
            kv,
            "settle-and-claim",
            &roles,
            after.as_deref(),
            &actor,
            lease,
            count,
        )?
    };
    Ok(SettledAndClaimed {
        settled: answers,
        claimed,
    })
}

type WorkerInput = (Vec<String>, Option<Vec<u8>>, String);

/// The query's roles and position, and its actor, which a claim needs: it
/// becomes the holder.
fn worker_input(query: &QueueQuery, lease: Option<&Lease>) -> Result<WorkerInput, StoreError> {
    let (roles, after) = queue::queue_input(query)?;
    let actor = query
        .actor
        .clone()
        .ok_or_else(|| validate::invalid("actor is required: the claims are made for it"))?;
    validate::claim_lease(lease)?;
    Ok((roles, after, actor))
}

/// Claims up to `count` heads of the queue for `actor`, as `verb`.
fn claim_heads<K: Kv + ?Sized>(
    kv: &mut K,
    verb: &'static str,
    roles: &[String],
    after: Option<&[u8]>,
    actor: &str,
    lease: Option<&Lease>,
    count: u32,
) -> Result<Vec<Task>, StoreError> {
    let (found, _) = queue::walk_queue(kv, roles, Some(actor), after, count as usize, true)?;
    let mut claimed = Vec::with_capacity(found.len());
    for (_, row) in found.into_iter().take(count as usize) {
        if !row.task.state.is_queued() {
            return Err(StoreError::Corrupt(format!(
                "the queue index lists task {}, which is {}",
                row.task.id, row.task.state
            )));
        }
        claimed.push(hand_to(kv, Cause::by(verb, actor), &row, actor, lease)?);
    }
    Ok(claimed)
}

/// One finished task, settled as `settle` with `holder` would settle it,
/// answered rather than refused: a batch goes on past an entry it cannot
/// settle. Only the store failing fails the call.
fn settle_one<K: Kv + ?Sized>(
    kv: &mut K,
    f: &Finished,
    actor: &str,
) -> Result<SettleAnswer, StoreError> {
    let refused = |e: ClaimError| match e {
        ClaimError::Store(StoreError::Invalid(m)) => Ok(SettleAnswer::Refused(m)),
        ClaimError::Store(e) => Err(e),
        other => Ok(SettleAnswer::Refused(other.to_string())),
    };
    if let Err(e) = validate::name("id", &f.id) {
        return refused(e.into());
    }
    if let Some(d) = &f.decision
        && let Err(e) = check_decision_input(d)
    {
        return refused(e);
    }
    let Some(row) = store::load_task(kv, &f.id)? else {
        return Ok(SettleAnswer::NotFound);
    };
    if !row.task.state.is_pending() {
        return Ok(SettleAnswer::Already(row.task.state));
    }
    if !held_by(&row, actor) {
        let holder = (row.task.state == TaskState::Claimed)
            .then(|| row.task.assignee.clone())
            .flatten();
        return Ok(SettleAnswer::NotHeld(holder));
    }
    let record = match &f.decision {
        Some(d) => {
            if let Err(e) = check_decision(kv, &row.task, d) {
                return refused(e);
            }
            Some(DecisionRecord {
                outcome: d.outcome.clone(),
                reason: d.reason.clone(),
                output: d.output.clone(),
                by: Some(actor.to_owned()),
                at: kv.call_time(),
            })
        }
        None => None,
    };
    let mut next = row.clone();
    next.task.state = f.settlement.state();
    next.task.lease_until = None;
    next.task.decision = record;
    store::write_task(
        kv,
        Cause::by("settle-and-claim", actor),
        Some(&row),
        &mut next,
    )?;
    Ok(SettleAnswer::Settled)
}
