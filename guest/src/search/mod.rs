//! Finding tasks: `search`, `count`, building a keyspace's search entries,
//! and saved views.
//!
//! A search is answered from the search entries every task row implies
//! (kept by `store::write_task` in the change's own transaction): a plan
//! picks the index ([`plan`]), a walk merges its ranges in the sort's order
//! and checks the rest of the filter on the rows ([`walk`]), and no call
//! examines more than its budget of entries. Counts of states alone come
//! from counters kept the same way; any other count walks an index within
//! its budget. This module only reads, except to build the entries of a
//! keyspace laid out before search and to keep views; it never changes a
//! task.

#[allow(unused_imports)]
use crate::prelude::*;

mod input;
pub mod model;
mod plan;
pub mod views;
mod walk;
mod wire;

use crate::kv::Kv;
use crate::model::{StoreError, TaskState};
use crate::schema;
use crate::store::{self, Built};
use crate::validate;

pub use input::MAX_KINDS;
/// A filter as `search` checks it (a bulk job's filter is checked the same way).
pub use input::filter as checked_filter;
pub use model::{
    AssigneeFilter, CountAnswer, IndexProgress, SavedView, SearchPage, SearchQuery, SortKey,
    TaskFilter, TaskSort, Viewer, order_key,
};

/// The most index entries one search examines.
pub const SEARCH_BUDGET: usize = 2_000;
/// The most index entries one count examines when no counter answers it.
pub const COUNT_BUDGET: usize = 10_000;
/// The most tasks one `build-search-index` call goes through.
pub const MAX_BUILD: u32 = 10_000;

/// Refuses a search of a keyspace whose entries are still being built:
/// its answers would leave out the tasks not yet reached.
fn built<K: Kv + ?Sized>(kv: &mut K) -> Result<(), StoreError> {
    store::check_layout(kv, false)?;
    if kv.get(schema::layout().as_bytes())?.is_none() {
        return Ok(());
    }
    match store::search_built(kv)? {
        Built::All => Ok(()),
        Built::Nothing => Err(StoreError::Storage(
            "search: this tenant's search index is being built (no task is indexed yet); \
             build-search-index finishes it, and a host's sweeper calls it"
                .into(),
        )),
        Built::UpTo(last) => Err(StoreError::Storage(format!(
            "search: this tenant's search index is being built (up to task {last:?}); \
             build-search-index finishes it, and a host's sweeper calls it"
        ))),
    }
}

/// `search`: one page of the matching tasks, in the sort's order.
pub fn search<K: Kv + ?Sized>(kv: &mut K, q: &SearchQuery) -> Result<SearchPage, StoreError> {
    let filter = input::filter(&q.filter)?;
    validate::limit("limit", q.limit)?;
    let viewer = input::viewer(q.viewer.as_ref())?;
    let digest = input::digest(b's', &filter, Some(q.sort), viewer.as_ref());
    let plan = plan::plan(&filter, q.sort);
    let after = q
        .after
        .as_deref()
        .map(|c| input::parse_cursor(c, digest, |p| plan.shape.fits(p)))
        .transpose()?;
    built(kv)?;
    let keep =
        |t: &crate::model::Task| filter.matches(t) && viewer.as_ref().is_none_or(|v| v.sees(t));
    let limit = q.limit as usize;
    let walked = walk::walk(
        kv,
        &plan,
        after.as_deref(),
        &keep,
        limit + 1,
        SEARCH_BUDGET,
        true,
    )?;
    let mut found = walked.found;
    let (next, budget_spent) = if found.len() > limit {
        found.truncate(limit);
        (found.last().map(|(p, _)| input::cursor(digest, p)), false)
    } else {
        match walked.stopped_at {
            Some(p) => (Some(input::cursor(digest, &p)), true),
            None => (None, false),
        }
    };
    Ok(SearchPage {
        tasks: found.into_iter().filter_map(|(_, t)| t).collect(),
        next,
        budget_spent,
        index: plan.index.into(),
    })
}

/// `count`: how many tasks match, from the counters when states alone are
/// asked, otherwise counted along the most selective index within the
/// budget (on the index entries alone when they decide the whole filter).
pub fn count<K: Kv + ?Sized>(
    kv: &mut K,
    filter: &TaskFilter,
    viewer: Option<&Viewer>,
    after: Option<&str>,
) -> Result<CountAnswer, StoreError> {
    let filter = input::filter(filter)?;
    let viewer = input::viewer(viewer)?;
    let digest = input::digest(b'c', &filter, None, viewer.as_ref());
    let plan = plan::created(&filter);
    let after = after
        .map(|c| input::parse_cursor(c, digest, |p| plan.shape.fits(p)))
        .transpose()?;
    built(kv)?;
    if viewer.is_none() && after.is_none() && filter.states_only() {
        return Ok(CountAnswer {
            count: counted(kv, &filter.states)?,
            exact: true,
            next: None,
            index: "counters".into(),
        });
    }
    let keep =
        |t: &crate::model::Task| filter.matches(t) && viewer.as_ref().is_none_or(|v| v.sees(t));
    let rows = !(plan.decides_all && viewer.is_none());
    let walked = walk::walk(
        kv,
        &plan,
        after.as_deref(),
        &keep,
        usize::MAX,
        COUNT_BUDGET,
        rows,
    )?;
    Ok(CountAnswer {
        count: walked.found.len() as u64,
        exact: walked.stopped_at.is_none(),
        next: walked.stopped_at.map(|p| input::cursor(digest, &p)),
        index: plan.index.into(),
    })
}

/// The sum of the counters of `states` (every state when empty).
fn counted<K: Kv + ?Sized>(kv: &mut K, states: &[TaskState]) -> Result<u64, StoreError> {
    let states = if states.is_empty() {
        &crate::model::ALL_STATES[..]
    } else {
        states
    };
    let mut total = 0i64;
    for s in states {
        total = total
            .checked_add(store::sum_counts(
                kv,
                &schema::search_count_state(s.as_str()),
            )?)
            .ok_or_else(|| StoreError::Corrupt("the search counts overflow when summed".into()))?;
    }
    u64::try_from(total)
        .map_err(|_| StoreError::Corrupt(format!("the search counts sum to {total}, below zero")))
}

/// `build-search-index`.
pub fn build_index<K: Kv + ?Sized>(kv: &mut K, limit: u32) -> Result<IndexProgress, StoreError> {
    if !(1..=MAX_BUILD).contains(&limit) {
        return Err(validate::invalid(format!(
            "limit is {limit}, outside 1..={MAX_BUILD}"
        )));
    }
    let (built, indexed) = store::build_search(kv, limit)?;
    Ok(IndexProgress { built, indexed })
}
