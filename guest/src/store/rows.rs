//! The stored forms of a task and of a timer, and what each implies (a
//! task row's index keys, a timer row's due entry): plain values shared by
//! the files that write rows and the change record that describes them. A
//! leaf of the store: it must never read or write storage, nor import the
//! files that do.

#[allow(unused_imports)]
use crate::prelude::*;

use serde::{Deserialize, Serialize};

use crate::keys::Key;
use crate::model::{Task, TaskState, Timer, Timestamp};
use crate::schema;

/// A stored task: the task plus what the contract needs but the caller never
/// sets. Stored in the compact binary form of [`encode_row`]: the fields in
/// declaration order, so the field list lives only in the struct.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskRow {
    pub task: Task,
    /// Escalation has fired once: the task never returns to the overdue scan,
    /// and a release puts it back as `escalated`, audience still widened.
    pub ever_escalated: bool,
}

impl TaskRow {
    /// Still owed to the expiry sweep.
    pub fn awaits_expiry(&self) -> bool {
        matches!(self.task.state, TaskState::Open | TaskState::Claimed) && !self.ever_escalated
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
        out
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
