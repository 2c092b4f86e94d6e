//! The worklist's reads: one task (`get`), the counters (`open-count`,
//! `leased-count`), the lease index's head (`next-lease-end`), the overdue
//! tasks, a page of the caller's queue, a page of a case's tasks, and a
//! page of what an actor holds. Each
//! reads in few crossings, bounded by its page, whatever the backlog; none
//! writes.

#[allow(unused_imports)]
use crate::prelude::*;

use crate::keys::Elem;
use crate::kv::Kv;
use crate::model::{Page, QueueQuery, StoreError, Task, TaskState, Timestamp};
use crate::queue;
use crate::schema;
use crate::store::{self, bad_entry};
use crate::validate;

pub fn get<K: Kv + ?Sized>(kv: &mut K, id: &str) -> Result<Option<Task>, StoreError> {
    validate::name("id", id)?;
    kv.prefetch(&[schema::layout().into_bytes(), schema::task(id).into_bytes()])?;
    store::check_layout(kv, false)?;
    Ok(store::load_task(kv, id)?.map(|r| r.task))
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
    page_of(
        kv,
        &schema::case(case),
        after.as_deref(),
        limit,
        ('c', "case", "the case index"),
    )
}

/// `held`: the tasks `actor` holds, from its `held` entries (soonest lease
/// end first, unleased last, then id). O(limit) entries and one batch of
/// rows, however many tasks others hold.
pub fn held<K: Kv + ?Sized>(
    kv: &mut K,
    actor: &str,
    limit: u32,
    after: Option<&str>,
) -> Result<Page, StoreError> {
    validate::name("actor", actor)?;
    validate::limit("limit", limit)?;
    let after = match after {
        Some(text) => Some(queue::parse_cursor('h', text, |e| {
            matches!(e, [Elem::Int(at), Elem::Str(id)]
                if *at >= 0 && validate::name("", id).is_ok())
        })?),
        None => None,
    };
    store::check_layout(kv, false)?;
    let page = page_of(
        kv,
        &schema::held_by(actor),
        after.as_deref(),
        limit,
        ('h', "held", "the held index"),
    )?;
    if let Some(t) = page
        .tasks
        .iter()
        .find(|t| t.state != TaskState::Claimed || t.assignee.as_deref() != Some(actor))
    {
        return Err(StoreError::Corrupt(format!(
            "the held index lists task {} under {actor}; the row is {} held by {:?}",
            t.id, t.state, t.assignee
        )));
    }
    Ok(page)
}

/// One page of an index of `(instant, id)` positions under `prefix`, after
/// the position `after`, its cursor spelt for `verb`. The entry past the
/// limit only says that more follow; its row is not read.
fn page_of<K: Kv + ?Sized>(
    kv: &mut K,
    prefix: &crate::keys::Key,
    after: Option<&[u8]>,
    limit: u32,
    (verb, entry, index): (char, &str, &str),
) -> Result<Page, StoreError> {
    let start = match after {
        Some(pos) => prefix.clone().raw(pos).successor(),
        None => prefix.as_bytes().to_vec(),
    };
    let entries = kv.scan(&start, Some(&prefix.prefix_end()), limit + 1, false)?;
    let more = entries.len() > limit as usize;
    let mut positions = Vec::with_capacity(limit as usize);
    let mut ids = Vec::with_capacity(limit as usize);
    for (k, _) in entries.into_iter().take(limit as usize) {
        let pos = k
            .strip_prefix(prefix.as_bytes())
            .ok_or_else(|| bad_entry(entry))?
            .to_vec();
        match store::suffix(&k, prefix)?.as_slice() {
            [Elem::Int(_), Elem::Str(id)] => ids.push(id.clone()),
            _ => return Err(bad_entry(entry)),
        }
        positions.push(pos);
    }
    let tasks = store::indexed_tasks(kv, &ids, index)?;
    Ok(queue::page(
        positions.into_iter().zip(tasks).collect(),
        more,
        verb,
    ))
}
