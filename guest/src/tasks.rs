//! The worklist verbs: the claim ladder, take-over as compare-and-swap,
//! settlement as compare-and-set, escalation, leased claims, and the indexed
//! reads. The queue's merge and its cursors live in the `queue` module; the
//! verbs here own what a page is for, and all the writing.
//!
//! A leased claim's row carries its lease end, and the row implies an entry
//! in the lease index at that instant (see [`TaskRow::index_keys`]), so
//! whatever ends or moves a lease (renew, release, settle, escalate, a new
//! claim) moves the entry with it: `reclaim-lapsed` reads only entries at or
//! before `now`, and never sees a lease that no longer holds.
//!
//! Each verb checks its inputs, then existence, then its own rules, and only
//! then writes; and since every write goes to the call's buffer, a call that
//! returns an error hands the host nothing to commit. Every write goes through
//! [`store::write_task`], which keeps the indexes and the open counter in step
//! with the row. Each verb asks for the rows it will need in one batched read
//! first, so a host on the network pays one round trip, not one per key.

#[allow(unused_imports)]
use crate::prelude::*;

use crate::keys::{Elem, Key};
use crate::kv::Kv;
use crate::model::{
    ClaimError, Lease, OnExpiry, Page, QueueQuery, Settlement, StoreError, Task, TaskState,
    Timestamp,
};
use crate::queue;
use crate::schema;
use crate::store::{self, Cause, TaskRow, bad_entry};
use crate::validate;

/// `open`: first open wins.
pub fn open<K: Kv + ?Sized>(kv: &mut K, task: &Task) -> Result<Task, StoreError> {
    let task = validate::task_input(task)?;
    store::prefetch_task(kv, &task.id)?;
    store::check_layout(kv, false)?;
    if let Some(found) = store::load_task(kv, &task.id)? {
        return Ok(found.task);
    }
    // Only a new task must be open and unheld: a repeat of an existing id
    // answers the stored task whatever this copy says.
    validate::new_task(&task)?;
    store::check_layout(kv, true)?;
    let row = TaskRow {
        task,
        ever_escalated: false,
    };
    store::write_task(kv, Cause::service("open"), None, &row)?;
    Ok(row.task)
}

pub fn get<K: Kv + ?Sized>(kv: &mut K, id: &str) -> Result<Option<Task>, StoreError> {
    validate::name("id", id)?;
    kv.prefetch(&[schema::layout().into_bytes(), schema::task(id).into_bytes()])?;
    store::check_layout(kv, false)?;
    Ok(store::load_task(kv, id)?.map(|r| r.task))
}

/// The rungs shared by `claim` and `take-over`, in their contractual order.
/// Eligibility outranks availability: a barred reviewer is told so, not who
/// holds the task.
fn ladder(row: &TaskRow, actor: &str, roles: &[String]) -> Result<(), ClaimError> {
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

/// Only checks the layout mark, never writes it: these verbs change an
/// existing row, whose `open` wrote the mark.
fn load_for_claim<K: Kv + ?Sized>(kv: &mut K, id: &str) -> Result<TaskRow, ClaimError> {
    store::prefetch_task(kv, id)?;
    store::check_layout(kv, false)?;
    store::load_task(kv, id)?.ok_or_else(|| ClaimError::NotFound(id.to_owned()))
}

/// Gives the task to `actor`, held under `lease` or, without one, until
/// released; `verb` is the one that hands it over.
fn hand_to<K: Kv + ?Sized>(
    kv: &mut K,
    verb: &'static str,
    row: &TaskRow,
    actor: &str,
    lease: Option<&Lease>,
) -> Result<Task, StoreError> {
    let mut next = row.clone();
    next.task.state = TaskState::Claimed;
    next.task.assignee = Some(actor.to_owned());
    next.task.lease_until = lease.map(|l| l.end());
    store::write_task(kv, Cause::by(verb, actor), Some(row), &next)?;
    Ok(next.task)
}

/// A repeat claim by the holder: a lease sets the new end; without one
/// nothing changes, so a retried unleased claim never cuts a lease short or
/// makes it endless.
fn reclaim_by_holder<K: Kv + ?Sized>(
    kv: &mut K,
    cause: Cause<'_>,
    row: &TaskRow,
    lease: Option<&Lease>,
) -> Result<Task, StoreError> {
    match lease {
        Some(l) if row.task.lease_until != Some(l.end()) => {
            let mut next = row.clone();
            next.task.lease_until = Some(l.end());
            store::write_task(kv, cause, Some(row), &next)?;
            Ok(next.task)
        }
        _ => Ok(row.task.clone()),
    }
}

/// Whether `actor` holds the task now.
fn held_by(row: &TaskRow, actor: &str) -> bool {
    row.task.state == TaskState::Claimed && row.task.assignee.as_deref() == Some(actor)
}

pub fn claim<K: Kv + ?Sized>(
    kv: &mut K,
    id: &str,
    actor: &str,
    roles: &[String],
    lease: Option<&Lease>,
) -> Result<Task, ClaimError> {
    validate::name("id", id)?;
    validate::name("actor", actor)?;
    let roles = validate::names("roles", roles)?;
    validate::claim_lease(lease)?;
    let row = load_for_claim(kv, id)?;
    ladder(&row, actor, &roles)?;
    match (&row.task.state, &row.task.assignee) {
        (TaskState::Claimed, Some(holder)) if holder == actor => Ok(reclaim_by_holder(
            kv,
            Cause::by("claim", actor),
            &row,
            lease,
        )?),
        (TaskState::Claimed, Some(holder)) => Err(ClaimError::AlreadyClaimed(holder.clone())),
        (TaskState::Claimed, None) => Err(ClaimError::Store(StoreError::Corrupt(format!(
            "task {id} is claimed by nobody"
        )))),
        _ => Ok(hand_to(kv, "claim", &row, actor, lease)?),
    }
}

pub fn take_over<K: Kv + ?Sized>(
    kv: &mut K,
    id: &str,
    from: &str,
    actor: &str,
    roles: &[String],
    lease: Option<&Lease>,
) -> Result<Task, ClaimError> {
    validate::name("id", id)?;
    validate::name("from", from)?;
    validate::name("actor", actor)?;
    let roles = validate::names("roles", roles)?;
    validate::claim_lease(lease)?;
    let row = load_for_claim(kv, id)?;
    // A take-over is a claim: the ladder does not thin because the previous
    // holder left.
    ladder(&row, actor, &roles)?;
    // The compare-and-swap: a take-over decided from a stale view must not
    // displace whoever holds the task now, and an unheld task takes `claim`.
    if !held_by(&row, from) {
        return Err(ClaimError::NotHeld(from.to_owned()));
    }
    if from == actor {
        return Ok(reclaim_by_holder(
            kv,
            Cause::by("take-over", actor),
            &row,
            lease,
        )?);
    }
    Ok(hand_to(kv, "take-over", &row, actor, lease)?)
}

/// The row put back in the queue it came from, unheld: what `release` and
/// `reclaim-lapsed` both do.
fn returned(row: &TaskRow) -> TaskRow {
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

pub fn release<K: Kv + ?Sized>(kv: &mut K, id: &str, actor: &str) -> Result<(), ClaimError> {
    validate::name("id", id)?;
    validate::name("actor", actor)?;
    let row = load_for_claim(kv, id)?;
    if !held_by(&row, actor) {
        return Err(ClaimError::NotHeld(actor.to_owned()));
    }
    store::write_task(kv, Cause::by("release", actor), Some(&row), &returned(&row))?;
    Ok(())
}

pub fn renew<K: Kv + ?Sized>(
    kv: &mut K,
    id: &str,
    actor: &str,
    now: Timestamp,
    lease_ms: u32,
) -> Result<Task, ClaimError> {
    validate::name("id", id)?;
    validate::name("actor", actor)?;
    let lease = Lease { now, lease_ms };
    validate::claim_lease(Some(&lease))?;
    let row = load_for_claim(kv, id)?;
    // A claim without a lease cannot be renewed into one: how a task is held
    // is decided when it is claimed.
    if !held_by(&row, actor) || row.task.lease_until.is_none() {
        return Err(ClaimError::NotHeld(actor.to_owned()));
    }
    Ok(reclaim_by_holder(
        kv,
        Cause::by("renew", actor),
        &row,
        Some(&lease),
    )?)
}

/// The tasks an index of instants lists at or before `now`, at most
/// `limit`, each with the instant it is listed at: `reclaim-lapsed` and
/// `expire-overdue` read what they move this way, and nothing else.
fn listed_until<K: Kv + ?Sized>(
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
        let next = returned(&row);
        store::write_task(kv, Cause::service("reclaim-lapsed"), Some(&row), &next)?;
        moved.push(next.task);
    }
    Ok(moved)
}

/// Moves a pending task to `state`, keeping its assignee; its lease, if
/// any, ends. Answers whether it moved; a settled task stays as it stands.
fn settle_row<K: Kv + ?Sized>(
    kv: &mut K,
    cause: Cause<'_>,
    row: &TaskRow,
    settlement: Settlement,
) -> Result<bool, StoreError> {
    if !row.task.state.is_pending() {
        return Ok(false);
    }
    let mut next = row.clone();
    next.task.state = settlement.state();
    next.task.lease_until = None;
    store::write_task(kv, cause, Some(row), &next)?;
    Ok(true)
}

pub fn settle<K: Kv + ?Sized>(
    kv: &mut K,
    id: &str,
    settlement: Settlement,
    holder: Option<&str>,
) -> Result<bool, ClaimError> {
    validate::name("id", id)?;
    if let Some(h) = holder {
        validate::name("holder", h)?;
    }
    let row = load_for_claim(kv, id)?;
    // A decision made under a claim counts only while that claim stands: a
    // holder whose lease lapsed and was reclaimed must not settle a task
    // someone else now holds.
    if let Some(h) = holder
        && !held_by(&row, h)
    {
        return Err(ClaimError::NotHeld(h.to_owned()));
    }
    let cause = match holder {
        Some(h) => Cause::by("settle", h),
        None => Cause::service("settle"),
    };
    Ok(settle_row(kv, cause, &row, settlement)?)
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
            && settle_row(kv, Cause::service(verb), &row, Settlement::Withdrawn)?
        {
            moved += 1;
        }
    }
    Ok(moved)
}

pub fn escalate<K: Kv + ?Sized>(kv: &mut K, id: &str) -> Result<Task, StoreError> {
    validate::name("id", id)?;
    store::prefetch_task(kv, id)?;
    store::check_layout(kv, false)?;
    let row = store::load_task(kv, id)?.ok_or_else(|| StoreError::NotFound(id.to_owned()))?;
    // A decided task stays decided: the decision that won the race against
    // the escalation sweep is the outcome everybody wanted.
    if !row.task.state.is_pending() {
        return Ok(row.task);
    }
    let next = escalated(&row);
    store::write_task(kv, Cause::service("escalate"), Some(&row), &next)?;
    Ok(next.task)
}

/// A pending row as escalation leaves it: `escalated`, unheld, its audience
/// widened by `escalate-to` (an empty audience already means anyone).
fn escalated(row: &TaskRow) -> TaskRow {
    let mut next = row.clone();
    next.ever_escalated = true;
    next.task.state = TaskState::Escalated;
    next.task.assignee = None;
    next.task.lease_until = None;
    if !next.task.candidate_roles.is_empty() {
        for role in &row.task.escalate_to {
            if !next.task.candidate_roles.contains(role) {
                next.task.candidate_roles.push(role.clone());
            }
        }
    }
    next
}

/// `expire-overdue`: the overdue index up to `now` is exactly the set of
/// tasks owed their expiry, and acting on one takes it out of the index
/// (escalated once, or settled), so no task is acted on twice, and the scan
/// reads only what it moves.
pub fn expire_overdue<K: Kv + ?Sized>(
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
        let next = match row.task.on_expiry {
            OnExpiry::Escalate => escalated(&row),
            OnExpiry::Deny | OnExpiry::Proceed => {
                let mut next = row.clone();
                next.task.state = Settlement::Expired.state();
                next.task.lease_until = None;
                next
            }
        };
        store::write_task(kv, cause, Some(&row), &next)?;
        moved.push(next.task);
    }
    Ok(moved)
}

/// Checks the layout too: the mark rides in the batch of shards.
pub fn open_count<K: Kv + ?Sized>(kv: &mut K) -> Result<u64, StoreError> {
    store::read_counter(kv, schema::OPEN_TASKS)
}

/// Checks the layout too: the mark rides in the batch of shards.
pub fn leased_count<K: Kv + ?Sized>(kv: &mut K) -> Result<u64, StoreError> {
    store::read_counter(kv, schema::LEASED_CLAIMS)
}

pub fn next_lease_end<K: Kv + ?Sized>(kv: &mut K) -> Result<Option<Timestamp>, StoreError> {
    store::check_layout(kv, false)?;
    let prefix = schema::leases();
    let first = kv.scan(prefix.as_bytes(), Some(&prefix.prefix_end()), 1, false)?;
    match first.first() {
        None => Ok(None),
        Some((k, _)) => match store::suffix(k, &prefix)?.as_slice() {
            [Elem::Int(at), Elem::Str(_)] => Ok(Some(*at)),
            _ => Err(bad_entry("lease")),
        },
    }
}

pub fn overdue<K: Kv + ?Sized>(
    kv: &mut K,
    now: Timestamp,
    limit: u32,
) -> Result<Vec<Task>, StoreError> {
    validate::timestamp("now", now)?;
    validate::limit("limit", limit)?;
    store::check_layout(kv, false)?;
    let prefix = schema::overdue();
    let end = prefix.clone().int(now).prefix_end();
    let entries = kv.scan(prefix.as_bytes(), Some(&end), limit, false)?;
    let mut ids = Vec::with_capacity(entries.len());
    for (k, _) in entries {
        match store::suffix(&k, &prefix)?.as_slice() {
            [Elem::Int(_), Elem::Str(id)] => ids.push(id.clone()),
            _ => return Err(bad_entry("overdue")),
        }
    }
    store::indexed_tasks(kv, &ids, "overdue")
}

/// `queue`: a k-way merge of the caller's per-role indexes and the index of
/// tasks open to anyone. All of them are ordered by the same position
/// (rank, created-at, id), so the merge reads each only as far as the page
/// needs: O(limit × roles) entries however large the backlog. The layout
/// mark is read with the page's rows (see [`queue::walk_queue`]).
pub fn queue<K: Kv + ?Sized>(kv: &mut K, query: &QueueQuery) -> Result<Page, StoreError> {
    let (roles, after) = queue::queue_input(query)?;
    let limit = query.limit as usize;
    let (mut found, more) = queue::walk_queue(
        kv,
        &roles,
        query.actor.as_deref(),
        after.as_deref(),
        limit,
        false,
    )?;
    found.truncate(limit);
    let tasks = found
        .into_iter()
        .map(|(pos, row)| (pos, row.task))
        .collect();
    Ok(queue::page(tasks, more, 'q'))
}

/// `claim-next`: the head of the caller's queue, claimed in the same call.
/// The call reads the queue inside its own transaction, so the head it sees
/// is free, and it never has a stale head to be refused over. It reads what
/// a one-task page reads, and so shares the page's bound: the counter shards
/// the claim moves come in the batch of rows.
pub fn claim_next<K: Kv + ?Sized>(
    kv: &mut K,
    query: &QueueQuery,
    lease: Option<&Lease>,
) -> Result<Option<Task>, StoreError> {
    let (roles, after) = queue::queue_input(query)?;
    let actor = query
        .actor
        .as_deref()
        .ok_or_else(|| validate::invalid("actor is required: claim-next claims for it"))?;
    validate::claim_lease(lease)?;
    let (found, _) = queue::walk_queue(kv, &roles, Some(actor), after.as_deref(), 1, true)?;
    let Some((_, row)) = found.into_iter().next() else {
        return Ok(None);
    };
    if !row.task.state.is_queued() {
        return Err(StoreError::Corrupt(format!(
            "the queue index lists task {}, which is {}",
            row.task.id, row.task.state
        )));
    }
    hand_to(kv, "claim-next", &row, actor, lease).map(Some)
}

pub fn for_case<K: Kv + ?Sized>(
    kv: &mut K,
    case: &str,
    limit: u32,
    after: Option<&str>,
) -> Result<Page, StoreError> {
    validate::name("case", case)?;
    validate::limit("limit", limit)?;
    let after = match after {
        Some(text) => Some(queue::parse_cursor(
            'c',
            text,
            |e| matches!(e, [Elem::Int(c), Elem::Str(id)] if queue::is_position(None, *c, id)),
        )?),
        None => None,
    };
    store::check_layout(kv, false)?;
    let prefix = schema::case(case);
    let start = match &after {
        Some(pos) => prefix.clone().raw(pos).successor(),
        None => prefix.as_bytes().to_vec(),
    };
    let entries = kv.scan(&start, Some(&prefix.prefix_end()), limit + 1, false)?;
    // The entry past the limit only says that more follow; its row is not read.
    let more = entries.len() > limit as usize;
    let mut positions = Vec::with_capacity(limit as usize);
    let mut ids = Vec::with_capacity(limit as usize);
    for (k, _) in entries.into_iter().take(limit as usize) {
        let pos = k
            .strip_prefix(prefix.as_bytes())
            .ok_or_else(|| bad_entry("case"))?
            .to_vec();
        match store::suffix(&k, &prefix)?.as_slice() {
            [Elem::Int(_), Elem::Str(id)] => ids.push(id.clone()),
            _ => return Err(bad_entry("case")),
        };
        positions.push(pos);
    }
    let tasks = store::indexed_tasks(kv, &ids, "the case index")?;
    Ok(queue::page(
        positions.into_iter().zip(tasks).collect(),
        more,
        'c',
    ))
}
