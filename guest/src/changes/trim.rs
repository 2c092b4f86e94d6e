//! `trim`: removes the oldest feed entries a retention rule names, slot by
//! slot in the order they were recorded, and with each task entry the
//! history it covers (never a task's last entry, which goes under the
//! task's history key when its change leaves the feed), within a call's
//! budgets, saying whether there is more. An entry a live webhook
//! subscription is still owed stays while the feed holds at most
//! [`HELD_FOR_SUBSCRIPTIONS`] entries; past that the subscriptions in the
//! way are marked `gone`. It writes only the record and those marks.

#[allow(unused_imports)]
use crate::prelude::*;

use crate::kv::Kv;
use crate::model::{Change, HistoryEntry, StoreError, Timestamp, TrimOutcome};
use crate::schema::{self, Shards};
use crate::store::{self, FeedRow, Position};
use crate::validate;

use crate::subscriptions::{self, Subscription};

use super::cursor::Cursor;
use super::slots::{READ_BUDGET, first_chunk, read_slots, streams};

/// Most history entries one `trim` call removes along with the feed
/// entries it removes: a task with a long history loses it over several
/// calls rather than past a host's write budget in one.
const HISTORY_BUDGET: u64 = 4 * validate::MAX_LIMIT as u64;

/// The most entries the feed keeps for live subscriptions that have not
/// been given them: beyond this, trimming goes on and marks them `gone`.
pub const HELD_FOR_SUBSCRIPTIONS: u64 = 1_000_000;

/// What trimming removes: entries recorded before `before`, and the oldest
/// while more than `keep` are kept.
#[derive(Clone, Copy, Debug)]
struct Rule {
    before: Option<Timestamp>,
    keep: Option<u64>,
}

impl Rule {
    /// Whether the oldest remaining entry, recorded at `at`, goes, with
    /// `kept` entries in the feed.
    fn removes(&self, at: Timestamp, kept: u64) -> bool {
        self.before.is_some_and(|b| at < b) || self.keep.is_some_and(|k| kept > k)
    }
}

/// `trim`: removes the oldest feed entries the rule names, and with each
/// task entry the history it covers, up to `limit` feed entries.
pub fn trim<K: Kv + ?Sized>(
    kv: &mut K,
    before: Option<Timestamp>,
    keep: Option<u64>,
    limit: u32,
) -> Result<TrimOutcome, StoreError> {
    trim_holding(kv, before, keep, limit, HELD_FOR_SUBSCRIPTIONS)
}

/// [`trim`], keeping what live subscriptions are owed while the feed holds
/// at most `held` entries.
pub fn trim_holding<K: Kv + ?Sized>(
    kv: &mut K,
    before: Option<Timestamp>,
    keep: Option<u64>,
    limit: u32,
    held: u64,
) -> Result<TrimOutcome, StoreError> {
    if let Some(b) = before {
        validate::timestamp("before", b)?;
    }
    validate::limit("limit", limit)?;
    if before.is_none() && keep.is_none() {
        return Err(validate::invalid(
            "before and keep are both missing: give at least one",
        ));
    }
    let rule = Rule { before, keep };
    let Some(slots) = read_slots(kv)? else {
        return Ok(TrimOutcome::default());
    };
    let mut kept: u64 = (0..slots.shards.count())
        .map(|s| slots.head.get(s) - slots.floor.get(s))
        .sum();
    let mut floor = slots.floor;
    let mut streams = streams(&slots, &slots.floor);
    // Live subscriptions, and the positions they have been given: an entry
    // after one of them is owed to it.
    let mut owed: Vec<(Subscription, Cursor)> = subscriptions::owed(kv)?
        .into_iter()
        .map(|s| s.cursor().map(|c| (s, c)))
        .collect::<Result<_, _>>()?;
    let mut gone: Vec<(Subscription, u8, u64, usize)> = Vec::new();
    // Slots whose oldest entry is owed: nothing after it in the slot goes.
    let mut blocked: Vec<u8> = Vec::new();
    let chunk = first_chunk(limit, streams.len());
    let mut removed: Vec<(Position, FeedRow)> = Vec::new();
    // Whether the rule would remove one more, once `limit` are taken.
    let mut more = false;
    let mut bytes = 0usize;
    loop {
        // Past the read budget the call stops where it is, and says to call
        // again, rather than read on past a host's per-call budget.
        if bytes >= READ_BUDGET && !removed.is_empty() {
            more = streams
                .iter()
                .filter(|s| !blocked.contains(&s.slot))
                .any(|s| match s.buffered.front() {
                    Some((_, r)) => rule.removes(r.at(), kept),
                    None => s.more(),
                });
            break;
        }
        for s in streams.iter_mut() {
            if s.buffered.is_empty() && s.more() {
                let chunk = if bytes < READ_BUDGET { chunk } else { 1 };
                bytes += s.fill(kv, chunk)?;
            }
        }
        let oldest = streams
            .iter()
            .enumerate()
            .filter(|(_, s)| !blocked.contains(&s.slot))
            .filter_map(|(i, s)| s.buffered.front().map(|(seq, r)| (r.at(), s.slot, i, *seq)))
            .min();
        let Some((at, slot, i, seq)) = oldest else {
            break;
        };
        if !rule.removes(at, kept) {
            break;
        }
        if owed.iter().any(|(_, c)| c.get(slot) < seq) && kept <= held {
            blocked.push(slot);
            continue;
        }
        if removed.len() >= limit as usize {
            more = true;
            break;
        }
        if owed.iter().any(|(_, c)| c.get(slot) < seq) {
            // Past the bound: the subscriptions in the way lose it, and
            // say so, rather than the feed growing without end.
            let (lost, live): (Vec<_>, Vec<_>) =
                owed.into_iter().partition(|(_, c)| c.get(slot) < seq);
            owed = live;
            let at = removed.len();
            gone.extend(lost.into_iter().map(|(s, _)| (s, slot, seq, at)));
        }
        let s = &mut streams[i];
        let Some((seq, row)) = s.buffered.pop_front() else {
            break;
        };
        removed.push((Position { slot: s.slot, seq }, row));
        kept -= 1;
    }
    if !removed.is_empty() {
        // A trim is a write: an earlier build must not trim beside it.
        store::claim_layout(kv)?;
    }

    // The logs of what goes, in batches, before any of it is written.
    let mut ahead: Vec<Vec<u8>> = Vec::new();
    for (_, row) in &removed {
        match &row.change {
            Change::Task(t) => ahead.push(schema::task_log(slots.shards, &t.id).into_bytes()),
            Change::Timer(t) => {
                ahead.push(schema::timer_log(&t.run, &t.effect).into_bytes());
                ahead.push(schema::timer(&t.run, &t.effect).into_bytes());
            }
        }
    }
    ahead.sort_unstable();
    ahead.dedup();
    for batch in ahead.chunks(1024) {
        kv.prefetch(batch)?;
    }
    let mut out = TrimOutcome::default();
    let mut history_left = HISTORY_BUDGET;
    for (position, row) in removed {
        if let Change::Task(t) = &row.change {
            let (gone, whole) = trim_history(
                kv,
                slots.shards,
                &t.id,
                &t.entry,
                position,
                &mut history_left,
            )?;
            out.history_removed += gone;
            if !whole {
                // The rest of that history goes in a later call, with this
                // entry.
                more = true;
                break;
            }
        }
        if let Change::Timer(t) = &row.change {
            let log_key = schema::timer_log(&t.run, &t.effect);
            let last = kv
                .get(log_key.as_bytes())?
                .map(|b| store::decode_position(&b))
                .transpose()
                .map_err(|e| {
                    StoreError::Corrupt(format!("the log of timer {}/{}: {e}", t.run, t.effect))
                })?;
            // A retired timer's log is needed only while its last entry is
            // in the feed, for a re-armed timer to follow it.
            if last == Some(position)
                && kv
                    .get(schema::timer(&t.run, &t.effect).as_bytes())?
                    .is_none()
            {
                kv.delete(log_key.as_bytes())?;
            }
        }
        kv.delete(schema::feed_entry(position.slot, position.seq).as_bytes())?;
        floor.set(position.slot, position.seq);
        out.feed_removed += 1;
    }
    for s in 0..slots.shards.count() {
        if floor.get(s) != slots.floor.get(s) {
            kv.set(
                schema::feed_floor(s).as_bytes(),
                &floor.get(s).to_be_bytes(),
            )?;
        }
    }
    // Marked gone only for the entries this call did remove.
    for (sub, slot, seq, at) in gone {
        if at < out.feed_removed as usize {
            subscriptions::mark_gone(kv, sub, slot, seq)?;
        }
    }
    out.more = more;
    Ok(out)
}

/// Removes task `id`'s history up to `entry`, recorded at `position`,
/// never its last entry, spending at most `left` removals; answers how many
/// went, and whether everything up to `entry` did. When `entry` is the
/// task's last, it is kept under its own history key, since its feed entry,
/// where the history kept it, is going.
fn trim_history<K: Kv + ?Sized>(
    kv: &mut K,
    sh: Shards,
    id: &str,
    entry: &HistoryEntry,
    position: Position,
    left: &mut u64,
) -> Result<(u32, bool), StoreError> {
    let Some(mut log) = store::load_task_log(kv, sh, id)? else {
        return Ok((0, true));
    };
    let seq = entry.seq;
    if seq == log.last && log.position == position {
        kv.set(
            schema::history_entry(sh, id, seq).as_bytes(),
            &store::encode_row(&store::HistoryRow {
                entry: entry.clone(),
                position,
            })?,
        )?;
    }
    let target = seq.min(log.last.saturating_sub(1)) + 1;
    if target <= log.first {
        return Ok((0, true));
    }
    let reach = log.first.saturating_add(*left).min(target);
    let mut gone = 0u32;
    for k in log.first..reach {
        kv.delete(schema::history_entry(sh, id, k).as_bytes())?;
        gone += 1;
    }
    *left -= reach - log.first;
    log.first = reach;
    kv.set(
        schema::task_log(sh, id).as_bytes(),
        &store::encode_row(&log)?,
    )?;
    Ok((gone, reach == target))
}
