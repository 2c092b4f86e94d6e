//! The stored forms of a task and of a timer, and what each implies (a
//! task row's index keys, a timer row's due entry): plain values shared by
//! the files that write rows and the change record that describes them. A
//! leaf of the store: it must never read or write storage, nor import the
//! files that do.

#[allow(unused_imports)]
use crate::prelude::*;

use serde::{Deserialize, Serialize, Serializer};

use crate::keys::Key;
use crate::model::{
    DecisionRecord, EscalationStep, OnExpiry, OutcomeRule, Priority, Task, TaskState, Timer,
    Timestamp,
};
use crate::schema;

use super::codec::{RowError, decode_extended_tail};

/// A stored task: the task plus what the contract needs but the caller never
/// sets. Stored in the compact binary form of [`encode_row`](super::encode_row):
/// its layout-9 fields ([`TaskBase`]) in declaration order, then the
/// extension layout 10 added ([`TaskExt`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TaskRow {
    pub task: Task,
    /// Escalation has fired once: the task never returns to the overdue scan,
    /// and a release puts it back as `escalated`, audience still widened.
    pub ever_escalated: bool,
}

/// A task row as layout 9 stored it, field for field: the whole row an
/// earlier build wrote, and the base of every row since.
#[derive(Deserialize)]
struct TaskBase {
    id: String,
    run: String,
    case: Option<String>,
    kind: String,
    justification: String,
    candidate_roles: Vec<String>,
    assignee: Option<String>,
    lease_until: Option<Timestamp>,
    priority: Priority,
    state: TaskState,
    on_expiry: OnExpiry,
    escalate_to: Vec<String>,
    excluded_actors: Vec<String>,
    created_at: Timestamp,
    due_at: Option<Timestamp>,
    ever_escalated: bool,
}

/// [`TaskBase`], borrowed from a row to be written.
#[derive(Serialize)]
struct TaskBaseRef<'a> {
    id: &'a str,
    run: &'a str,
    case: &'a Option<String>,
    kind: &'a str,
    justification: &'a str,
    candidate_roles: &'a [String],
    assignee: &'a Option<String>,
    lease_until: Option<Timestamp>,
    priority: Priority,
    state: TaskState,
    on_expiry: OnExpiry,
    escalate_to: &'a [String],
    excluded_actors: &'a [String],
    created_at: Timestamp,
    due_at: Option<Timestamp>,
    ever_escalated: bool,
}

/// What layout 10 adds to a task row, after its base: each field defaults
/// to what a row an earlier build wrote means. A field is only ever added
/// at the end, with its default meaning "as before".
#[derive(Default, Deserialize)]
struct TaskExt {
    revision: u64,
    decision: Option<DecisionRecord>,
    outcomes: Vec<OutcomeRule>,
}

/// [`TaskExt`], borrowed from a row to be written.
#[derive(Serialize)]
struct TaskExtRef<'a> {
    revision: u64,
    decision: &'a Option<DecisionRecord>,
    outcomes: &'a [OutcomeRule],
}

/// What the layout added to a task row after [`TaskExt`] was first
/// written: its reminders and escalation chain. In the extension's tail,
/// written only when a field is set.
#[derive(Default, Deserialize)]
struct TaskTail {
    remind_before: Vec<u64>,
    escalation: Vec<EscalationStep>,
    steps_done: u32,
}

/// [`TaskTail`], borrowed from a row to be written.
#[derive(Serialize)]
struct TaskTailRef<'a> {
    remind_before: &'a [u64],
    escalation: &'a [EscalationStep],
    steps_done: u32,
}

/// Written as its base, then its extension, then the extension's tail.
impl Serialize for TaskRow {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let t = &self.task;
        let base = TaskBaseRef {
            id: &t.id,
            run: &t.run,
            case: &t.case,
            kind: &t.kind,
            justification: &t.justification,
            candidate_roles: &t.candidate_roles,
            assignee: &t.assignee,
            lease_until: t.lease_until,
            priority: t.priority,
            state: t.state,
            on_expiry: t.on_expiry,
            escalate_to: &t.escalate_to,
            excluded_actors: &t.excluded_actors,
            created_at: t.created_at,
            due_at: t.due_at,
            ever_escalated: self.ever_escalated,
        };
        let ext = TaskExtRef {
            revision: t.revision,
            decision: &t.decision,
            outcomes: &t.outcomes,
        };
        if !t.remind_before.is_empty() || !t.escalation.is_empty() || t.steps_done != 0 {
            let tail = TaskTailRef {
                remind_before: &t.remind_before,
                escalation: &t.escalation,
                steps_done: t.steps_done,
            };
            return (base, ext, tail).serialize(s);
        }
        // A row with nothing to extend is written as layout 9 wrote it.
        if t.revision == 0 && t.decision.is_none() && t.outcomes.is_empty() {
            return base.serialize(s);
        }
        (base, ext).serialize(s)
    }
}

/// Decodes a stored task row of any layout from 3 on.
pub fn decode_task_row(bytes: &[u8]) -> Result<TaskRow, RowError> {
    let (b, e, tail): (TaskBase, TaskExt, TaskTail) = decode_extended_tail(bytes)?;
    Ok(TaskRow {
        task: Task {
            id: b.id,
            run: b.run,
            case: b.case,
            kind: b.kind,
            justification: b.justification,
            candidate_roles: b.candidate_roles,
            assignee: b.assignee,
            lease_until: b.lease_until,
            priority: b.priority,
            state: b.state,
            on_expiry: b.on_expiry,
            escalate_to: b.escalate_to,
            excluded_actors: b.excluded_actors,
            created_at: b.created_at,
            due_at: b.due_at,
            revision: e.revision,
            decision: e.decision,
            outcomes: e.outcomes,
            remind_before: tail.remind_before,
            escalation: tail.escalation,
            steps_done: tail.steps_done,
        },
        ever_escalated: b.ever_escalated,
    })
}

impl TaskRow {
    /// Still owed to the expiry sweep: a task with an escalation chain is
    /// acted on by its chain instead.
    pub fn awaits_expiry(&self) -> bool {
        matches!(self.task.state, TaskState::Open | TaskState::Claimed)
            && !self.ever_escalated
            && self.task.escalation.is_empty()
    }

    /// Held under a lease: in the lease index, and counted as leased.
    pub fn is_leased(&self) -> bool {
        self.task.state == TaskState::Claimed && self.task.lease_until.is_some()
    }

    /// Every index key this row implies.
    pub fn index_keys(&self) -> Vec<Vec<u8>> {
        let t = &self.task;
        let mut out = Vec::new();
        if t.state.is_queued() {
            let pos = schema::queue_position(t.priority.rank(), t.created_at, &t.id);
            if t.candidate_roles.is_empty() {
                out.push(schema::queue_any().raw(pos.as_bytes()).into_bytes());
            }
            for role in &t.candidate_roles {
                out.push(schema::queue_role(role).raw(pos.as_bytes()).into_bytes());
            }
        }
        if let Some(due) = t.due_at.filter(|_| self.awaits_expiry()) {
            out.push(schema::overdue_entry(due, &t.id).into_bytes());
        }
        if let Some((at, _)) = crate::timeline::next_step(t) {
            out.push(schema::wake_entry(at, &t.id).into_bytes());
        }
        if let Some(until) = t.lease_until.filter(|_| self.is_leased()) {
            out.push(schema::lease_entry(until, &t.id).into_bytes());
        }
        if let Some(case) = &t.case {
            out.push(
                schema::case(case)
                    .raw(schema::case_position(t.created_at, &t.id).as_bytes())
                    .into_bytes(),
            );
        }
        if let Some(key) = self.held_key() {
            out.push(key);
        }
        out
    }

    /// The entries search finds the task by (in every state), each ending
    /// in its creation position so that ranges of one shape merge.
    pub fn search_keys(&self) -> Vec<Vec<u8>> {
        let t = &self.task;
        let state = t.state.as_str();
        let at = schema::created_position(t.created_at, &t.id);
        let at = at.as_bytes();
        let mut out = Vec::with_capacity(6);
        out.push(schema::by_state(state).raw(at).into_bytes());
        out.push(schema::by_kind(&t.kind, state).raw(at).into_bytes());
        if let Some(actor) = &t.assignee {
            out.push(schema::assigned(actor).raw(at).into_bytes());
        }
        let due = t.due_at.unwrap_or(schema::NEVER_DUE);
        out.push(schema::by_due().int(due).raw(at).into_bytes());
        out.push(schema::by_run(&t.run).raw(at).into_bytes());
        out.push(
            schema::by_priority()
                .int(t.priority.rank())
                .raw(at)
                .into_bytes(),
        );
        out
    }

    /// The entry `held` lists the task by while it is claimed: under its
    /// holder, at its lease end (unleased last).
    pub fn held_key(&self) -> Option<Vec<u8>> {
        let t = &self.task;
        match (&t.state, &t.assignee) {
            (TaskState::Claimed, Some(holder)) => Some(
                schema::held_entry(holder, t.lease_until.unwrap_or(schema::UNLEASED), &t.id)
                    .into_bytes(),
            ),
            _ => None,
        }
    }
}

/// A stored timer and its lease, stored like [`TaskRow`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TimerRow {
    pub timer: Timer,
    /// Held by a sweeper until this instant.
    pub lease_until: Option<Timestamp>,
}

impl TimerRow {
    /// The instant from which a sweep may claim this timer.
    pub fn claimable_at(&self) -> Timestamp {
        self.lease_until.unwrap_or(self.timer.fire_at)
    }

    pub fn due_key(&self) -> Key {
        schema::due_entry(self.claimable_at(), &self.timer.run, &self.timer.effect)
    }
}
