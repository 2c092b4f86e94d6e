//! The jobs verbs: `start-job`, `step-job`, `cancel-job` and the reads. A
//! step is bounded: one counting stretch (one search page, within search's
//! scan budget), one task, or a few chunks dropped. Each verb checks its
//! input, then the job, then writes; a call that answers an error writes
//! nothing. This module never changes a task but through `apply`.

#[allow(unused_imports)]
use crate::prelude::*;

use crate::kv::Kv;
use crate::model::{ClaimError, StoreError, Timestamp};
use crate::search::{self, SearchQuery, SortKey, TaskFilter, TaskSort};
use crate::store;
use crate::tasks;
use crate::validate::{self, MAX_TIMESTAMP, invalid};

use super::apply::apply;
use super::model::{Job, JobAction, JobRow, JobState, Outcome};
use super::rows;

/// The most ids one counting step records (one chunk).
pub const CHUNK: u32 = 256;
/// The most chunks one call drops from a cancelled job.
pub const DROP_PER_CALL: u32 = 16;

/// An action's arguments as their verb would check them, before any task
/// is read.
fn checked_action(action: &JobAction) -> Result<JobAction, StoreError> {
    Ok(match action {
        JobAction::Assign(a) => {
            validate::name("action.assign.to", &a.to)?;
            let mut a = a.clone();
            a.roles = validate::names("action.assign.roles", &a.roles)?;
            JobAction::Assign(a)
        }
        JobAction::Update(c) => {
            JobAction::Update(tasks::checked_changes(c).map_err(|e| match e {
                ClaimError::Store(e) => e,
                other => invalid(format!("action.update: {other}")),
            })?)
        }
        other => other.clone(),
    })
}

/// The filter a job's set is found by: its own, and created at or before
/// `now`. `None` when no instant is left (the set is empty).
fn frozen(filter: &TaskFilter, now: Timestamp) -> Option<TaskFilter> {
    let mut f = filter.clone();
    if now < MAX_TIMESTAMP {
        let bound = now + 1;
        f.created_before = Some(f.created_before.map_or(bound, |b| b.min(bound)));
    }
    match (f.created_after, f.created_before) {
        (Some(a), Some(b)) if a >= b => None,
        _ => Some(f),
    }
}

/// `start-job`.
pub fn start<K: Kv + ?Sized>(
    kv: &mut K,
    id: &str,
    filter: &TaskFilter,
    action: &JobAction,
    by: Option<&str>,
    now: Timestamp,
) -> Result<Job, StoreError> {
    validate::name("id", id)?;
    let filter = search::checked_filter(filter)?;
    let action = checked_action(action)?;
    if let Some(b) = by {
        validate::name("by", b)?;
    }
    validate::timestamp("now", now)?;
    store::check_layout(kv, true)?;
    if rows::load(kv, id)?.is_some() {
        return Err(invalid(format!(
            "id: a job {id:?} exists (a finished job keeps its id)"
        )));
    }
    let job = Job {
        id: id.to_owned(),
        filter: filter.clone(),
        action,
        by: by.map(str::to_owned),
        state: JobState::Counting,
        total: 0,
        done: 0,
        skipped: 0,
        failed: 0,
        last_failures: Vec::new(),
        last_skipped: Vec::new(),
        created_at: now,
    };
    let mut row = JobRow::new(job, filter.clone());
    match frozen(&filter, now) {
        Some(f) => row.frozen = f,
        None => row.counted(0, None),
    }
    // A row only a layout-10 build reads: the mark moves with it.
    store::claim_layout(kv)?;
    rows::save(kv, &row, false)?;
    Ok(row.job)
}

fn existing<K: Kv + ?Sized>(kv: &mut K, id: &str) -> Result<JobRow, StoreError> {
    rows::load(kv, id)?.ok_or_else(|| StoreError::NotFound(id.to_owned()))
}

/// Drops up to [`DROP_PER_CALL`] of a cancelled job's chunks.
fn drop_chunks<K: Kv + ?Sized>(kv: &mut K, row: &mut JobRow) -> Result<(), StoreError> {
    for _ in 0..DROP_PER_CALL {
        if !row.chunks_left() {
            break;
        }
        rows::drop_chunk(kv, &row.job.id, row.taken)?;
        row.dropped_chunk();
    }
    Ok(())
}

/// One counting stretch: the next page of the set, recorded as a chunk.
fn count_stretch<K: Kv + ?Sized>(kv: &mut K, row: &mut JobRow) -> Result<(), StoreError> {
    let page = search::search(
        kv,
        &SearchQuery {
            filter: row.frozen.clone(),
            sort: TaskSort {
                key: SortKey::CreatedAt,
                descending: false,
            },
            limit: CHUNK,
            after: row.cursor.clone(),
            viewer: None,
        },
    )?;
    let ids: Vec<String> = page.tasks.into_iter().map(|t| t.id).collect();
    if !ids.is_empty() {
        rows::put_chunk(kv, &row.job.id, row.written, &ids)?;
    }
    row.counted(ids.len(), page.next);
    Ok(())
}

/// One task of a running job.
fn run_one<K: Kv + ?Sized>(kv: &mut K, row: &mut JobRow) -> Result<(), StoreError> {
    let seq = row.taken;
    let ids = rows::chunk(kv, &row.job.id, seq)?;
    let task = ids.get(row.index as usize).ok_or_else(|| {
        StoreError::Corrupt(format!(
            "job {}: its place {} lies past chunk {seq}'s {} ids",
            row.job.id,
            row.index,
            ids.len()
        ))
    })?;
    let outcome: Outcome = apply(
        kv,
        &row.job.id,
        &row.frozen,
        &row.job.action,
        row.job.by.as_deref(),
        task,
    )?;
    row.took(ids.len(), task, outcome);
    if row.taken != seq {
        rows::drop_chunk(kv, &row.job.id, seq)?;
    }
    Ok(())
}

/// `step-job`.
pub fn step<K: Kv + ?Sized>(kv: &mut K, id: &str) -> Result<Job, StoreError> {
    validate::name("id", id)?;
    store::check_layout(kv, true)?;
    let mut row = existing(kv, id)?;
    let was = row.runnable();
    if !was {
        return Ok(row.job);
    }
    match row.job.state {
        JobState::Counting => count_stretch(kv, &mut row)?,
        JobState::Running => run_one(kv, &mut row)?,
        JobState::Cancelled => drop_chunks(kv, &mut row)?,
        JobState::Done => {}
    }
    rows::save(kv, &row, was)?;
    Ok(row.job)
}

/// `cancel-job`.
pub fn cancel<K: Kv + ?Sized>(kv: &mut K, id: &str) -> Result<Job, StoreError> {
    validate::name("id", id)?;
    store::check_layout(kv, true)?;
    let mut row = existing(kv, id)?;
    let was = row.runnable();
    if !was {
        return Ok(row.job);
    }
    row.cancel();
    drop_chunks(kv, &mut row)?;
    rows::save(kv, &row, was)?;
    Ok(row.job)
}

/// `get-job`.
pub fn get<K: Kv + ?Sized>(kv: &mut K, id: &str) -> Result<Option<Job>, StoreError> {
    validate::name("id", id)?;
    store::check_layout(kv, false)?;
    Ok(rows::load(kv, id)?.map(|r| r.job))
}

/// `list-jobs`.
pub fn list<K: Kv + ?Sized>(
    kv: &mut K,
    limit: u32,
    after: Option<&str>,
) -> Result<Vec<Job>, StoreError> {
    validate::limit("limit", limit)?;
    if let Some(a) = after {
        validate::name("after", a)?;
    }
    store::check_layout(kv, false)?;
    Ok(rows::list(kv, limit, after)?
        .into_iter()
        .map(|r| r.job)
        .collect())
}

/// `runnable-jobs`.
pub fn runnable<K: Kv + ?Sized>(kv: &mut K, limit: u32) -> Result<Vec<String>, StoreError> {
    validate::limit("limit", limit)?;
    store::check_layout(kv, false)?;
    rows::runnable(kv, limit)
}
