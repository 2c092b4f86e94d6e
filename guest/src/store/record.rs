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
    Change, DecisionRecord, FieldChange, HistoryEntry, StoreError, TaskChange, TaskState, TaskStep,
    TimerChange, Timestamp,
};
use crate::schema::{self, Shards};

use super::codec::{RowError, corrupt, decode_extended_tail, decode_row, encode_row};
use super::layout::{claim_layout, feed_slot_of, records_from_the_start, shards};
use super::rows::TaskRow;

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
/// recorded at, so `check` can hold each to the other. Stored as its
/// layout-9 encoding followed by the entry's extension ([`EntryExt`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HistoryRow {
    pub entry: HistoryEntry,
    pub position: Position,
}

/// One stored feed entry: the change, and the position of the previous
/// change of the same task or timer (none for its first, or when that one's
/// record was trimmed before it was written). Stored as its layout-9
/// encoding followed, for a task's change, by the entry's extension.
#[derive(Clone, Debug, PartialEq, Eq)]
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

/// Why a call changes what it changes: the verb, the actor it acts for
/// (`None` for the service), and what the record says beyond the rows'
/// difference: a note's remark, the bulk job making the change, and
/// whether an assignment overrode the roles rule.
#[derive(Clone, Copy, Debug)]
pub struct Cause<'a> {
    pub verb: &'static str,
    pub actor: Option<&'a str>,
    pub note: Option<&'a str>,
    pub job: Option<&'a str>,
    pub override_roles: bool,
    /// The reminder or chain step the change fires.
    pub step: Option<&'a TaskStep>,
}

impl<'a> Cause<'a> {
    /// A change the service makes: a sweep, an escalation, a withdrawal.
    pub fn service(verb: &'static str) -> Cause<'static> {
        Cause {
            verb,
            actor: None,
            note: None,
            job: None,
            override_roles: false,
            step: None,
        }
    }

    /// A change `actor` makes.
    pub fn by(verb: &'static str, actor: &'a str) -> Cause<'a> {
        Cause {
            actor: Some(actor),
            ..Cause::service(verb)
        }
    }

    /// A change `actor` makes, or the service when none.
    pub fn of(verb: &'static str, actor: Option<&'a str>) -> Cause<'a> {
        Cause {
            actor,
            ..Cause::service(verb)
        }
    }

    /// This cause, recorded as part of bulk job `job`.
    pub fn in_job(self, job: Option<&'a str>) -> Cause<'a> {
        Cause { job, ..self }
    }
}

/// A history entry as layout 9 stored it: the whole entry an earlier build
/// wrote, and the base of every entry since.
#[derive(Serialize, Deserialize)]
struct EntryBase {
    seq: u64,
    at: Timestamp,
    verb: String,
    actor: Option<String>,
    before: Option<TaskState>,
    after: TaskState,
    assignee: Option<String>,
    lease_until: Option<Timestamp>,
    candidate_roles: Vec<String>,
    excluded_actors: Vec<String>,
}

/// What layout 10 adds to a task's history or feed entry, after its base;
/// each field defaults to what an entry an earlier build wrote means. A
/// later layout adds fields only at the end.
#[derive(Default, Serialize, Deserialize)]
struct EntryExt {
    revision: u64,
    changes: Vec<FieldChange>,
    decision: Option<DecisionRecord>,
    note: Option<String>,
    job: Option<String>,
    run: Option<String>,
    kind: Option<String>,
}

/// What the layout added to an entry after [`EntryExt`] and [`HistoryExt`]
/// were first written: the step a change fired. In the extension's tail,
/// written only when set.
#[derive(Default, Serialize, Deserialize)]
struct EntryTail {
    step: Option<TaskStep>,
}

fn split_entry(
    e: &HistoryEntry,
    run: &Option<String>,
    kind: &Option<String>,
) -> (EntryBase, EntryExt, EntryTail) {
    (
        EntryBase {
            seq: e.seq,
            at: e.at,
            verb: e.verb.clone(),
            actor: e.actor.clone(),
            before: e.before,
            after: e.after,
            assignee: e.assignee.clone(),
            lease_until: e.lease_until,
            candidate_roles: e.candidate_roles.clone(),
            excluded_actors: e.excluded_actors.clone(),
        },
        EntryExt {
            revision: e.revision,
            changes: e.changes.clone(),
            decision: e.decision.clone(),
            note: e.note.clone(),
            job: e.job.clone(),
            run: run.clone(),
            kind: kind.clone(),
        },
        EntryTail {
            step: e.step.clone(),
        },
    )
}

/// The entry of `base` and `ext`, and the run and kind `ext` names.
fn join_entry(
    b: EntryBase,
    e: EntryExt,
    tail: EntryTail,
) -> (HistoryEntry, Option<String>, Option<String>) {
    (
        HistoryEntry {
            seq: b.seq,
            at: b.at,
            verb: b.verb,
            actor: b.actor,
            before: b.before,
            after: b.after,
            assignee: b.assignee,
            lease_until: b.lease_until,
            candidate_roles: b.candidate_roles,
            excluded_actors: b.excluded_actors,
            revision: e.revision,
            changes: e.changes,
            decision: e.decision,
            note: e.note,
            job: e.job,
            step: tail.step,
        },
        e.run,
        e.kind,
    )
}

/// What layout 10 adds to a history entry kept under its own key (a
/// checkpoint, a history start): [`EntryExt`] without the run and kind,
/// which only the feed carries. An entry encoded whole (the model's own
/// field order) is its base and this.
#[derive(Default, Serialize, Deserialize)]
struct HistoryExt {
    revision: u64,
    changes: Vec<FieldChange>,
    decision: Option<DecisionRecord>,
    note: Option<String>,
    job: Option<String>,
}

impl From<EntryExt> for HistoryExt {
    fn from(e: EntryExt) -> Self {
        HistoryExt {
            revision: e.revision,
            changes: e.changes,
            decision: e.decision,
            note: e.note,
            job: e.job,
        }
    }
}

impl From<HistoryExt> for EntryExt {
    fn from(e: HistoryExt) -> Self {
        EntryExt {
            revision: e.revision,
            changes: e.changes,
            decision: e.decision,
            note: e.note,
            job: e.job,
            run: None,
            kind: None,
        }
    }
}

/// A task change in the feed as layout 9 stored it.
#[derive(Serialize, Deserialize)]
struct TaskChangeBase {
    id: String,
    entry: EntryBase,
}

/// [`Change`] as layout 9 stored it (variants in the same order).
#[derive(Serialize, Deserialize)]
enum ChangeBase {
    Task(TaskChangeBase),
    Timer(TimerChange),
}

/// A timer's [`FeedRow`] as stored, borrowing its change: the bytes of the
/// [`FeedBase`] of a [`ChangeBase::Timer`], written without copying the
/// change first.
pub(super) struct TimerFeedRow<'a> {
    pub(super) prev: Option<Position>,
    pub(super) change: &'a TimerChange,
}

impl Serialize for TimerFeedRow<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        /// [`ChangeBase`]'s variants in its order, the timer's borrowed.
        #[derive(Serialize)]
        enum ChangeRef<'a> {
            #[allow(dead_code)]
            Task(()),
            Timer(&'a TimerChange),
        }
        #[derive(Serialize)]
        struct Base<'a> {
            prev: Option<Position>,
            change: ChangeRef<'a>,
        }
        Base {
            prev: self.prev,
            change: ChangeRef::Timer(self.change),
        }
        .serialize(s)
    }
}

#[derive(Serialize, Deserialize)]
struct FeedBase {
    prev: Option<Position>,
    change: ChangeBase,
}

/// Written as its base, then (for a task's change) its extension.
impl Serialize for FeedRow {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match &self.change {
            Change::Task(t) => {
                let (entry, ext, tail) = split_entry(&t.entry, &t.run, &t.kind);
                let base = FeedBase {
                    prev: self.prev,
                    change: ChangeBase::Task(TaskChangeBase {
                        id: t.id.clone(),
                        entry,
                    }),
                };
                if tail.step.is_some() {
                    return (base, ext, tail).serialize(s);
                }
                (base, ext).serialize(s)
            }
            Change::Timer(t) => TimerFeedRow {
                prev: self.prev,
                change: t,
            }
            .serialize(s),
        }
    }
}

/// Written as its base, then its extension.
impl Serialize for HistoryRow {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let (entry, ext, tail) = split_entry(&self.entry, &None, &None);
        let head = ((entry, self.position), HistoryExt::from(ext));
        if tail.step.is_some() {
            return (head.0, head.1, tail).serialize(s);
        }
        head.serialize(s)
    }
}

/// A history start, stored as an entry's base and extension.
struct StoredEntry<'a>(&'a HistoryEntry);

impl Serialize for StoredEntry<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let (base, ext, tail) = split_entry(self.0, &None, &None);
        if tail.step.is_some() {
            return (base, HistoryExt::from(ext), tail).serialize(s);
        }
        (base, HistoryExt::from(ext)).serialize(s)
    }
}

pub fn decode_task_log(bytes: &[u8]) -> Result<TaskLog, RowError> {
    decode_row(bytes)
}

pub fn decode_history(bytes: &[u8]) -> Result<HistoryRow, RowError> {
    let ((base, position), ext, tail): ((EntryBase, Position), HistoryExt, EntryTail) =
        decode_extended_tail(bytes)?;
    let (entry, _, _) = join_entry(base, ext.into(), tail);
    Ok(HistoryRow { entry, position })
}

pub fn decode_feed_row(bytes: &[u8]) -> Result<FeedRow, RowError> {
    let (base, ext, tail): (FeedBase, EntryExt, EntryTail) = decode_extended_tail(bytes)?;
    let change = match base.change {
        ChangeBase::Task(t) => {
            let (entry, run, kind) = join_entry(t.entry, ext, tail);
            Change::Task(TaskChange {
                id: t.id,
                entry,
                run,
                kind,
            })
        }
        ChangeBase::Timer(t) => Change::Timer(t),
    };
    Ok(FeedRow {
        prev: base.prev,
        change,
    })
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

/// Where this call's next feed entry goes: its slot, the slot's head key and
/// the last sequence number written there. A call recording many changes
/// opens it once, pushes each entry and closes it once, so the head is read
/// and written once however many entries follow it; the entries and the
/// head it leaves are those one append per change would leave.
pub(super) struct FeedTail {
    slot: u8,
    head_key: Vec<u8>,
    head: u64,
}

impl FeedTail {
    /// Reads the slot's head, moving an earlier layout's mark first (see
    /// [`claim_layout`]).
    pub(super) fn open<K: Kv + ?Sized>(kv: &mut K, sh: Shards) -> Result<FeedTail, StoreError> {
        claim_layout(kv)?;
        let slot = feed_slot_of(kv, sh);
        let head_key = schema::feed_head(sh, slot).into_bytes();
        let head = match kv.get(&head_key)? {
            Some(v) if v.len() == 8 => decode_seq("", Some(&v))?,
            // Named only when it is damaged or absent, so the name is
            // built only then.
            v => decode_seq(&format!("the feed head of slot {slot}"), v.as_deref())?,
        };
        Ok(FeedTail {
            slot,
            head_key,
            head,
        })
    }

    /// Writes `row` (an encoded [`FeedRow`]) as the next entry.
    pub(super) fn push_encoded<K: Kv + ?Sized>(
        &mut self,
        kv: &mut K,
        row: Vec<u8>,
    ) -> Result<Position, StoreError> {
        let slot = self.slot;
        let seq = self
            .head
            .checked_add(1)
            .filter(|&s| s < schema::FEED_END)
            .ok_or_else(|| corrupt(format!("the feed head of slot {slot} is at its end")))?;
        kv.put(schema::feed_entry(slot, seq).into_bytes(), row)?;
        self.head = seq;
        Ok(Position { slot, seq })
    }

    /// Writes the head after the last entry pushed.
    pub(super) fn close<K: Kv + ?Sized>(self, kv: &mut K) -> Result<(), StoreError> {
        kv.put(self.head_key, self.head.to_be_bytes().to_vec())?;
        Ok(())
    }
}

/// Appends `change` to the feed in this call's slot, after `prev`, and
/// answers its position.
fn append<K: Kv + ?Sized>(
    kv: &mut K,
    sh: Shards,
    change: Change,
    prev: Option<Position>,
) -> Result<Position, StoreError> {
    let mut tail = FeedTail::open(kv, sh)?;
    let position = tail.push_encoded(kv, encode_row(&FeedRow { prev, change })?)?;
    tail.close(kv)?;
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
        revision: t.revision,
        changes: old
            .map(|was| field_changes(was, new, cause))
            .unwrap_or_default(),
        decision: (old.map(|r| &r.task.decision) != Some(&t.decision))
            .then(|| t.decision.clone())
            .flatten(),
        note: cause.note.map(str::to_owned),
        job: cause.job.map(str::to_owned),
        step: cause.step.cloned(),
    };
    let checkpoint = seq
        .is_multiple_of(HISTORY_CHECKPOINT)
        .then(|| entry.clone());
    let change = Change::Task(TaskChange {
        id: t.id.clone(),
        entry,
        run: Some(t.run.clone()),
        kind: Some(t.kind.clone()),
    });
    if let (None, Some(was)) = (log, old) {
        // The task predates its history: keep what it held as the history
        // begins, which its first entry alone would not say.
        let mark = kv.get(schema::layout().as_bytes())?;
        if !records_from_the_start(mark.as_deref()) {
            let start = before_history(&was.task, kv.call_time());
            kv.set(
                schema::history_start(&t.id).as_bytes(),
                &encode_row(&StoredEntry(&start))?,
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
        revision: task.revision,
        changes: Vec::new(),
        decision: None,
        note: None,
        job: None,
        step: None,
    }
}

/// Each field but the state that differs between `was` and `now`, as WIT
/// names it, with its JSON before and after; `override-roles` when the
/// cause says an assignment overrode the roles rule.
fn field_changes(was: &TaskRow, now: &TaskRow, cause: Cause<'_>) -> Vec<FieldChange> {
    use crate::json::{opt_int, opt_str, strs, to_json};
    let (a, b) = (&was.task, &now.task);
    let mut out = Vec::new();
    let mut push = |field: &str, before: String, after: String| {
        if before != after {
            out.push(FieldChange {
                field: field.to_owned(),
                before,
                after,
            });
        }
    };
    push("assignee", opt_str(&a.assignee), opt_str(&b.assignee));
    push(
        "lease-until",
        opt_int(a.lease_until),
        opt_int(b.lease_until),
    );
    push("due-at", opt_int(a.due_at), opt_int(b.due_at));
    push(
        "priority",
        to_json(a.priority.name()),
        to_json(b.priority.name()),
    );
    push(
        "candidate-roles",
        strs(&a.candidate_roles),
        strs(&b.candidate_roles),
    );
    push("escalate-to", strs(&a.escalate_to), strs(&b.escalate_to));
    push(
        "excluded-actors",
        strs(&a.excluded_actors),
        strs(&b.excluded_actors),
    );
    push(
        "on-expiry",
        to_json(a.on_expiry.name()),
        to_json(b.on_expiry.name()),
    );
    push(
        "outcomes",
        crate::json::outcomes(&a.outcomes),
        crate::json::outcomes(&b.outcomes),
    );
    push(
        "remind-before",
        crate::json::ints(&a.remind_before),
        crate::json::ints(&b.remind_before),
    );
    push(
        "escalation",
        crate::json::escalation(&a.escalation),
        crate::json::escalation(&b.escalation),
    );
    push(
        "steps-done",
        a.steps_done.to_string(),
        b.steps_done.to_string(),
    );
    if cause.override_roles {
        push("override-roles", "false".to_owned(), "true".to_owned());
    }
    out
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
    let (base, ext, tail): (EntryBase, HistoryExt, EntryTail) = decode_extended_tail(bytes)?;
    Ok(join_entry(base, ext.into(), tail).0)
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
