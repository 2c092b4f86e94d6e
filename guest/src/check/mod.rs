//! The consistency check: every row against its index entries and counters,
//! every index entry against the row it claims to come from, and the change
//! record against the rows and against itself.
//!
//! It streams (one row or entry at a time, point reads for the other side),
//! so memory stays flat however large the tenant is; the point reads of each
//! chunk of a walk are read ahead in a batch or two where the keyspace is a
//! database server's (`store::walk_ahead`), so there a check costs a few
//! round trips per chunk, not one per key. It never repairs anything, only
//! reports.
//!
//! The change record is checked against the rows and against itself: every
//! task's last history entry says what its row says; each history entry and
//! the feed entry of the same change name each other, so every change not
//! trimmed is in the feed exactly once; each slot of the feed holds every
//! number from its floor to its head and nothing else; each entry's
//! predecessor is an earlier change of the same task or timer. Where the
//! history is kept in the feed (layout 9), following each task's changes
//! back from its log must step one change of that task at a time, down to
//! its first kept entry or to entries under their own keys, all there; and
//! the changes so reached must number as many as the feed holds within the
//! tasks' kept histories, so none is in the feed twice or on no history. In
//! layouts 6 and 7, which have recorded every change, every task and timer
//! must have a record; in earlier layouts rows may predate it, and a task's
//! history start must agree with its history. The record's keys are read as
//! the keyspace's layout spells them (apart in 6, beside in 7).
//!
//! The files below check one structure each, as `store/` keeps one: the task
//! rows (`tasks`), the task indexes (`indexes`), the timers and their due
//! index (`timers`), the counters (`counters`), and of the record the feed
//! (`feed`), the task logs and the walks back from them (`logs`), the
//! history entries under their own keys (`histories`), the history starts
//! (`starts`) and the timer logs (`timer_logs`), the kind definitions
//! (`kinds`), the bulk jobs (`jobs`), the schedules (`schedules`) and the webhook subscriptions
//! (`subscriptions`); `walk` and `record` hold
//! what their walks share. This file runs them in order, and decides
//! nothing itself but the layout mark's readability.

mod counters;
mod feed;
mod histories;
mod indexes;
mod jobs;
mod kinds;
mod logs;
mod record;
mod schedules;
mod search;
mod starts;
mod subscriptions;
mod tasks;
mod timer_logs;
mod timers;
mod walk;

pub use walk::MAX_FINDINGS;

use crate::changes::slots::read_slots;
use crate::kv::Kv;
use crate::model::{Discrepancy, StoreError};
#[allow(unused_imports)]
use crate::prelude::*;
use crate::schema::{self, Shards};
use crate::store;

use counters::{Expected, check_counters};
use walk::Findings;

/// Every discrepancy the keyspace holds, up to [`MAX_FINDINGS`]; empty
/// means consistent.
pub fn check<K: Kv + ?Sized>(kv: &mut K) -> Result<Vec<Discrepancy>, StoreError> {
    let mut f = Findings::new();
    if let Err(StoreError::Corrupt(d)) = store::check_layout(kv, false) {
        f.add("layout", "meta/layout", d);
        return Ok(f.into_list());
    }
    let shards = store::shards(kv)?;
    let mark = kv.get(schema::layout().as_bytes())?;
    let every = store::records_from_the_start(mark.as_deref());
    let in_feed = store::history_in_feed(mark.as_deref());
    let (pending, leased) = tasks::check_tasks(kv, &mut f, shards, every, in_feed)?;
    indexes::check_task_indexes(kv, &mut f)?;
    search::check_search(kv, &mut f)?;
    kinds::check_kinds(kv, &mut f)?;
    jobs::check_jobs(kv, &mut f)?;
    schedules::check_schedules(kv, &mut f)?;
    let armed = timers::check_timers(kv, &mut f, shards, every)?;
    check_record(kv, &mut f, shards, every, in_feed)?;
    check_counters(
        kv,
        &mut f,
        shards,
        [
            Expected {
                name: schema::OPEN_TASKS,
                structure: "open-count",
                rows: "pending task rows",
                per_shard: pending,
            },
            Expected {
                name: schema::LEASED_CLAIMS,
                structure: "leased-count",
                rows: "task rows holding a leased claim",
                per_shard: leased,
            },
            Expected {
                name: schema::ARMED_TIMERS,
                structure: "pending-count",
                rows: "timer rows",
                per_shard: armed,
            },
        ],
    )?;
    Ok(f.into_list())
}

/// Checks the feed, the task logs, the histories, the history starts and
/// the timer logs against each other (the rows' side is checked with the
/// rows). `every`: the keyspace has recorded every change from the start.
fn check_record<K: Kv + ?Sized>(
    kv: &mut K,
    f: &mut Findings,
    shards: Shards,
    every: bool,
    in_feed: bool,
) -> Result<(), StoreError> {
    let slots = match read_slots(kv) {
        Ok(Some(slots)) => slots,
        Ok(None) => {
            subscriptions::check_subscriptions(kv, f, None)?;
            return starts::check_history_starts(kv, f, shards, every);
        }
        Err(StoreError::Corrupt(d)) => {
            f.add("feed", "heads", d);
            return Ok(());
        }
        Err(e) => return Err(e),
    };
    // Where history is kept in the feed, every change of a task the feed
    // holds at or past its history's first kept entry must be reached by
    // following that task's changes back from its log: the two counts below
    // are equal exactly when none is left out, since each change reached is
    // a distinct feed entry of its own task.
    subscriptions::check_subscriptions(kv, f, Some((&slots.head, &slots.floor)))?;
    let mut in_histories = 0u64;
    let mut reached = 0u64;
    feed::check_feed(kv, f, &slots, in_feed.then_some(&mut in_histories))?;
    logs::check_task_logs(kv, f, &slots, !every, in_feed.then_some(&mut reached))?;
    histories::check_histories(kv, f, &slots, in_feed)?;
    if in_feed && in_histories != reached && !f.full() {
        f.add(
            "feed",
            "tasks",
            format!(
                "the feed holds {in_histories} changes within their tasks' kept histories, \
                 and following each task's changes back from its log reaches {reached}"
            ),
        );
    }
    starts::check_history_starts(kv, f, shards, every)?;
    timer_logs::check_timer_logs(kv, f, &slots)
}
