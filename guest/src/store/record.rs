//! The change record, written with every change: a task's change appended to
//! its history and to the feed, a timer's change to the feed, in the call
//! that makes it, so a change and its record commit together or not at all.
//! A task's history entry is its feed entry (layout 9): the call writes the
//! feed entry, the slot's head and the task's log, and no key of the
//! history's own (but every [`HISTORY_CHECKPOINT`]th), since each key
//! inserted in a writer's turn costs every writer; [`walk_chain`] reads the
//! history back from the log, or from the nearest kept entry ([`walk_start`]).
//!
//! The feed is kept per writer slot (see [`crate::schema`]): a call appends
//! to its own slot, after the head its slot's last call wrote, and each entry
//! names the position of the previous entry of the same task or timer, so
//! that a reader can put one task's changes in the order they committed even
//! when they sit in different slots. This module only appends and decodes;
//! reading the feed, trimming it and checking it are for the `changes` and
//! `check` modules, and it must never decide whether a change happens.

#[allow(unused_imports)]
use crate::prelude::*;

use serde::{Deserialize, Serialize};

use crate::kv::Kv;
use crate::model::{
    Change, HistoryEntry, StoreError, TaskChange, TimerChange, TimerEvent, Timestamp,
};
use crate::schema::{self, Shards};

use super::codec::{RowError, corrupt, decode_row, encode_row};
use super::layout::{claim_layout, feed_slot_of, records_from_the_start, shards};
use super::rows::{TaskRow, TimerRow};

/// Where an entry sits in the feed: its writer slot and its sequence number
/// in that slot. Within a slot, a higher number committed later.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Position {
    pub slot: u8,
    pub seq: u64,
}

/// Where a task's history stands: the sequence numbers of its last entry and
/// of its first kept one (trimming moves it on), and the feed position of
/// its last change, which the next change names as its predecessor.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskLog {
    pub last: u64,
    pub first: u64,
    pub position: Position,
}

/// One stored history entry, with the feed position the same change was
/// recorded at, so `check` can hold each to the other.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HistoryRow {
    pub entry: HistoryEntry,
    pub position: Position,
}

/// One stored feed entry: the change, and the position of the previous
/// change of the same task or timer (none for its first, or when that one's
/// record was trimmed before it was written).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FeedRow {
    pub prev: Option<Position>,
    pub change: Change,
}

impl FeedRow {
    /// When the change was made.
    pub fn at(&self) -> Timestamp {
        match &self.change {
            Change::Task(t) => t.entry.at,
            Change::Timer(t) => t.at,
        }
    }
}

/// Why a call changes what it changes: the verb, and the actor it acts for
/// (`None` for the service).
#[derive(Clone, Copy, Debug)]
pub struct Cause<'a> {
    pub verb: &'static str,
    pub actor: Option<&'a str>,
}

impl<'a> Cause<'a> {
    /// A change the service makes: a sweep, an escalation, a withdrawal.
    pub fn service(verb: &'static str) -> Cause<'static> {
        Cause { verb, actor: None }
    }

    /// A change `actor` makes.
    pub fn by(verb: &'static str, actor: &'a str) -> Cause<'a> {
        Cause {
            verb,
            actor: Some(actor),
        }
    }
}

pub fn decode_task_log(bytes: &[u8]) -> Result<TaskLog, RowError> {
    decode_row(bytes)
}

pub fn decode_history(bytes: &[u8]) -> Result<HistoryRow, RowError> {
    decode_row(bytes)
}

pub fn decode_feed_row(bytes: &[u8]) -> Result<FeedRow, RowError> {
    decode_row(bytes)
}

pub fn decode_position(bytes: &[u8]) -> Result<Position, RowError> {
    decode_row(bytes)
}

/// A stored feed head or floor: absent is zero, anything but eight bytes is
/// damage.
pub fn decode_seq(what: &str, value: Option<&[u8]>) -> Result<u64, StoreError> {
    let Some(v) = value else {
        return Ok(0);
    };
    let raw: [u8; 8] = v
        .try_into()
        .map_err(|_| corrupt(format!("{what} holds {} bytes, not 8", v.len())))?;
    Ok(u64::from_be_bytes(raw))
}

/// The task's log, if its history has begun, in a keyspace laid out with
/// `sh`.
pub fn load_task_log<K: Kv + ?Sized>(
    kv: &mut K,
    sh: Shards,
    id: &str,
) -> Result<Option<TaskLog>, StoreError> {
    kv.get(schema::task_log(sh, id).as_bytes())?
        .map(|b| decode_task_log(&b).map_err(|e| corrupt(format!("the log of task {id}: {e}"))))
        .transpose()
}

/// Appends `change` to the feed in this call's slot, after `prev`, and
/// answers its position.
fn append<K: Kv + ?Sized>(
    kv: &mut K,
    sh: Shards,
    change: Change,
    prev: Option<Position>,
) -> Result<Position, StoreError> {
    claim_layout(kv)?;
    let slot = feed_slot_of(kv, sh);
    let head_key = schema::feed_head(sh, slot);
    let head = decode_seq(
        &format!("the feed head of slot {slot}"),
        kv.get(head_key.as_bytes())?.as_deref(),
    )?;
    let seq = head
        .checked_add(1)
        .filter(|&s| s < schema::FEED_END)
        .ok_or_else(|| corrupt(format!("the feed head of slot {slot} is at its end")))?;
    let position = Position { slot, seq };
    kv.set(
        schema::feed_entry(slot, seq).as_bytes(),
        &encode_row(&FeedRow { prev, change })?,
    )?;
    kv.set(head_key.as_bytes(), &seq.to_be_bytes())?;
    Ok(position)
}

/// Records a change of a task from `old` (none: it was opened) to `new`:
/// the next entry of its history, and the same change in the feed.
pub fn record_task<K: Kv + ?Sized>(
    kv: &mut K,
    cause: Cause<'_>,
    old: Option<&TaskRow>,
    new: &TaskRow,
) -> Result<(), StoreError> {
    let t = &new.task;
    let sh = shards(kv)?;
    let log = load_task_log(kv, sh, &t.id)?;
    let seq = match log {
        Some(l) => l
            .last
            .checked_add(1)
            .ok_or_else(|| corrupt(format!("the history of task {} is at its end", t.id)))?,
        None => 1,
    };
    let entry = HistoryEntry {
        seq,
        at: kv.call_time(),
        verb: cause.verb.to_owned(),
        actor: cause.actor.map(str::to_owned),
        before: old.map(|r| r.task.state),
        after: t.state,
        assignee: t.assignee.clone(),
        lease_until: t.lease_until,
        candidate_roles: t.candidate_roles.clone(),
        excluded_actors: t.excluded_actors.clone(),
    };
    let checkpoint = seq
        .is_multiple_of(HISTORY_CHECKPOINT)
        .then(|| entry.clone());
    let change = Change::Task(TaskChange {
        id: t.id.clone(),
        entry,
    });
    if let (None, Some(was)) = (log, old) {
        // The task predates its history: keep what it held as the history
        // begins, which its first entry alone would not say.
        let mark = kv.get(schema::layout().as_bytes())?;
        if !records_from_the_start(mark.as_deref()) {
            let start = before_history(&was.task, kv.call_time());
            kv.set(
                schema::history_start(&t.id).as_bytes(),
                &encode_row(&start)?,
            )?;
        }
    }
    // The change is the task's history entry too: in the feed only (the
    // append moves the mark to this component's layout, which keeps its
    // history there), found again by following the task's changes back
    // from its log. A key of its own beside the row would be one more
    // insert in every writing call.
    let position = append(kv, sh, change, log.map(|l| l.position))?;
    if let Some(entry) = checkpoint {
        kv.set(
            schema::history_entry(sh, &t.id, seq).as_bytes(),
            &encode_row(&HistoryRow { entry, position })?,
        )?;
    }
    let log = TaskLog {
        last: seq,
        first: log.map_or(1, |l| l.first),
        position,
    };
    kv.set(schema::task_log(sh, &t.id).as_bytes(), &encode_row(&log)?)?;
    Ok(())
}

/// The verb of the entry, numbered 0, that opens the history of a task
/// written before history was kept.
pub const BEFORE_HISTORY: &str = "before-history";

/// The entry that says a task existed before its history: what `task` held,
/// at `at`.
pub fn before_history(task: &crate::model::Task, at: Timestamp) -> HistoryEntry {
    HistoryEntry {
        seq: 0,
        at,
        verb: BEFORE_HISTORY.to_owned(),
        actor: None,
        before: None,
        after: task.state,
        assignee: task.assignee.clone(),
        lease_until: task.lease_until,
        candidate_roles: task.candidate_roles.clone(),
        excluded_actors: task.excluded_actors.clone(),
    }
}

/// The entry kept by [`record_task`] when the history of task `id` began, if
/// it was.
pub fn load_history_start<K: Kv + ?Sized>(
    kv: &mut K,
    id: &str,
) -> Result<Option<HistoryEntry>, StoreError> {
    kv.get(schema::history_start(id).as_bytes())?
        .map(|b| {
            decode_history_start(&b)
                .map_err(|e| corrupt(format!("the history start of task {id}: {e}")))
        })
        .transpose()
}

/// A stored history start (see [`load_history_start`]).
pub fn decode_history_start(bytes: &[u8]) -> Result<HistoryEntry, RowError> {
    decode_row(bytes)
}

/// Records what `verb` did to a timer, as `row` now stands (or stood, when
/// it was retired).
pub fn record_timer<K: Kv + ?Sized>(
    kv: &mut K,
    verb: &'static str,
    row: &TimerRow,
    what: TimerEvent,
) -> Result<(), StoreError> {
    let t = &row.timer;
    let log_key = schema::timer_log(&t.run, &t.effect);
    let prev = kv
        .get(log_key.as_bytes())?
        .map(|b| {
            decode_position(&b)
                .map_err(|e| corrupt(format!("the log of timer {}/{}: {e}", t.run, t.effect)))
        })
        .transpose()?;
    let change = Change::Timer(TimerChange {
        run: t.run.clone(),
        effect: t.effect.clone(),
        at: kv.call_time(),
        verb: verb.to_owned(),
        what,
        fire_at: t.fire_at,
        lease_until: match what {
            TimerEvent::Claimed => row.lease_until,
            TimerEvent::Armed | TimerEvent::Retired => None,
        },
    });
    let sh = shards(kv)?;
    let position = append(kv, sh, change, prev)?;
    kv.set(log_key.as_bytes(), &encode_row(&position)?)?;
    Ok(())
}

/// Every this many changes of a task, its entry is also kept under its own
/// history key: a place a read of the history can start following the
/// task's changes back from, so that a page costs its length and at most
/// this many steps more, however long the history, for one insert in this
/// many changes.
pub const HISTORY_CHECKPOINT: u64 = 64;

/// Where to start following task `id`'s changes back to reach entry `upto`
/// and those below it: the first entry at or past `upto` kept under its
/// own key while the feed still holds its change, or else the last change,
/// as `log` names it. Answered as a log whose last entry is that one.
///
/// Of the keys at or past the history's first entry, only that first one
/// can name a change the feed no longer holds (a last entry kept when its
/// change was trimmed, see `changes::trim`): the next key, a checkpoint at
/// most [`HISTORY_CHECKPOINT`] entries on, is the place then, never the
/// log, which may lie any number of changes further.
pub fn walk_start<K: Kv + ?Sized>(
    kv: &mut K,
    sh: Shards,
    id: &str,
    log: &TaskLog,
    upto: u64,
) -> Result<TaskLog, StoreError> {
    if upto >= log.last {
        return Ok(*log);
    }
    let start = schema::history_entry(sh, id, upto.max(1));
    let end = schema::history_entry(sh, id, log.last);
    for (_, bytes) in kv.scan(start.as_bytes(), Some(end.as_bytes()), 2, false)? {
        let row = decode_history(&bytes).map_err(|e| corrupt(format!("history {id}: {e}")))?;
        let p = row.position;
        // Kept for the walk that starts here, so it is read once.
        let entry = schema::feed_entry(p.slot, p.seq).into_bytes();
        kv.prefetch(core::slice::from_ref(&entry))?;
        if kv.get(&entry)?.is_some() {
            return Ok(TaskLog {
                last: row.entry.seq,
                first: log.first,
                position: p,
            });
        }
    }
    Ok(*log)
}

/// Follows task `id`'s changes back through the feed from the last one its
/// `log` names, newest first, handing each to `visit` while the feed still
/// holds it and its number is at least `down_to` (and `visit` answers
/// true). Answers the lowest number handed over, or `log.last + 1` when
/// none was. Each step must be a change of this task numbered one below the
/// one before: anything else is damage, answered as `corrupt`.
///
/// In a keyspace that keeps history in its feed ([`super::history_in_feed`])
/// this is where a task's history entries are; the entries below the
/// lowest one reached are under the task's history keys.
pub fn walk_chain<K: Kv + ?Sized>(
    kv: &mut K,
    id: &str,
    log: &TaskLog,
    down_to: u64,
    mut visit: impl FnMut(HistoryRow) -> bool,
) -> Result<u64, StoreError> {
    let mut lowest = log.last.saturating_add(1);
    let mut at = Some(log.position);
    let mut want = log.last;
    while let Some(p) = at {
        if want < down_to.max(1) {
            break;
        }
        let Some(bytes) = kv.get(schema::feed_entry(p.slot, p.seq).as_bytes())? else {
            break;
        };
        let row = decode_feed_row(&bytes)
            .map_err(|e| corrupt(format!("feed entry {}.{}: {e}", p.slot, p.seq)))?;
        let entry = match row.change {
            Change::Task(t) if t.id == id && t.entry.seq == want => t.entry,
            _ => {
                return Err(corrupt(format!(
                    "the changes of task {id} lead to feed entry {}.{}, which is not its change {want}",
                    p.slot, p.seq
                )));
            }
        };
        lowest = want;
        at = row.prev;
        want -= 1;
        if !visit(HistoryRow { entry, position: p }) {
            break;
        }
    }
    Ok(lowest)
}

/// Entry `seq` of task `id`'s history, as stored under its history key or,
/// in a keyspace that keeps history in its feed (`in_feed`, as
/// [`super::history_in_feed`] says of its mark), as the feed holds it; none
/// when it is not kept.
pub fn load_history_entry<K: Kv + ?Sized>(
    kv: &mut K,
    sh: Shards,
    id: &str,
    log: &TaskLog,
    seq: u64,
    in_feed: bool,
) -> Result<Option<HistoryRow>, StoreError> {
    if let Some(bytes) = kv.get(schema::history_entry(sh, id, seq).as_bytes())? {
        let row =
            decode_history(&bytes).map_err(|e| corrupt(format!("history {id}/{seq}: {e}")))?;
        if row.entry.seq != seq {
            return Err(corrupt(format!(
                "history {id}/{seq}: the entry says it is {}",
                row.entry.seq
            )));
        }
        return Ok(Some(row));
    }
    if !in_feed || seq > log.last || seq < log.first {
        return Ok(None);
    }
    let start = walk_start(kv, sh, id, log, seq)?;
    let mut found = None;
    walk_chain(kv, id, &start, seq, |row| {
        if row.entry.seq == seq {
            found = Some(row);
            false
        } else {
            true
        }
    })?;
    Ok(found)
}
