//! What a change looks like on the wire: one type, [`Event`], for an entry
//! of a JSON read of the feed (`GET /v1/events`), the `data` of a `task` or
//! `timer` server-sent event, and any later push of a change, each fully
//! described in the OpenAPI document (`Event` in its components). It owns
//! the shape and its spelling; it must never decide who may see a change
//! (that is `crate::access`) or which position a caller is shown (that is
//! `crate::feed_pager`): it is handed the position to show.

use leasehold_host as host;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use leasehold_guest::model as host_model;
use serde_json::value::RawValue;

use crate::timeline::TaskStep;
use crate::wire::{DecisionRecord, TaskState, document, mirror_enum};

mirror_enum!(
    /// What a change did to a timer.
    TimerEvent => TimerEvent { Armed, Claimed, Retired, Rescheduled });

/// One change of a task (WIT `history-entry`).
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct HistoryEntry {
    /// 1 for the change that opened the task, one more for each change after
    /// it; 0 for the `before-history` entry of a task written before history
    /// was kept.
    pub seq: u64,
    /// Milliseconds since 1970 when the service made the call (for
    /// `before-history`: when history began, or the task's creation if it
    /// has not).
    pub at: i64,
    /// The verb that made the change; `before-history` for entry 0, which
    /// says what the task held when its history began.
    pub verb: String,
    /// Who made it; null for the service.
    pub actor: Option<String>,
    /// The state before; null for the change that opened the task.
    pub before: Option<TaskState>,
    pub after: TaskState,
    pub assignee: Option<String>,
    pub lease_until: Option<i64>,
    pub candidate_roles: Vec<String>,
    pub excluded_actors: Vec<String>,
    /// The task's revision this change produced (0 for entries written by
    /// older builds).
    #[serde(default)]
    #[schema(schema_with = crate::schema::seq)]
    pub revision: u64,
    /// Each field the change changed, before and after.
    #[serde(default)]
    pub changes: Vec<FieldChange>,
    /// The decision a `settle` carried.
    #[serde(default)]
    pub decision: Option<DecisionRecord>,
    /// The remark a `note` added.
    #[serde(default)]
    pub note: Option<String>,
    /// The bulk job that made the change.
    #[serde(default)]
    pub job: Option<String>,
    /// The reminder or chain step the change fired (`expire-overdue`, by
    /// the sweeper).
    #[serde(default)]
    pub step: Option<TaskStep>,
}

/// One field a change changed.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct FieldChange {
    /// As the WIT names it: `assignee`, `lease-until`, `due-at`,
    /// `priority`, `candidate-roles`, `escalate-to`, `excluded-actors`,
    /// `on-expiry`, `outcomes`, `remind-before`, `escalation`,
    /// `steps-done`, or `override-roles` when an assignment overrode the
    /// roles rule.
    pub field: String,
    /// Its value before, as JSON.
    #[schema(schema_with = crate::schema::stored_justification)]
    pub before: Box<RawValue>,
    /// Its value after, as JSON.
    #[schema(schema_with = crate::schema::stored_justification)]
    pub after: Box<RawValue>,
}

impl From<host_model::FieldChange> for FieldChange {
    fn from(c: host_model::FieldChange) -> Self {
        FieldChange {
            field: c.field,
            before: document(c.before),
            after: document(c.after),
        }
    }
}

impl From<host::HistoryEntry> for HistoryEntry {
    fn from(e: host::HistoryEntry) -> Self {
        HistoryEntry {
            seq: e.seq,
            at: e.at,
            verb: e.verb,
            actor: e.actor,
            before: e.before.map(Into::into),
            after: e.after.into(),
            assignee: e.assignee,
            lease_until: e.lease_until,
            candidate_roles: e.candidate_roles,
            excluded_actors: e.excluded_actors,
            revision: e.revision,
            changes: e.changes.into_iter().map(Into::into).collect(),
            decision: e.decision.map(Into::into),
            note: e.note,
            job: e.job,
            step: e.step.map(Into::into),
        }
    }
}

/// One change of a task, in the feed.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct TaskChange {
    pub id: String,
    pub entry: HistoryEntry,
    /// The task's run (null for entries written by older builds).
    #[serde(default)]
    pub run: Option<String>,
    /// The task's kind (null for entries written by older builds).
    #[serde(default)]
    pub kind: Option<String>,
}

/// One change of a timer, in the feed.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct TimerChange {
    pub run: String,
    pub effect: String,
    pub at: i64,
    pub verb: String,
    pub what: TimerEvent,
    pub fire_at: i64,
    pub lease_until: Option<i64>,
}

/// What one event records.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Change {
    /// Boxed: a task's change is several times a timer's.
    Task(Box<TaskChange>),
    Timer(TimerChange),
}

impl Change {
    /// What the change is of, `task` or `timer`: the name of its server-sent
    /// event, as its one key names it in JSON.
    pub fn kind(&self) -> &'static str {
        match self {
            Change::Task(_) => "task",
            Change::Timer(_) => "timer",
        }
    }
}

impl From<host::Change> for Change {
    fn from(c: host::Change) -> Self {
        match c {
            host::Change::Task(t) => Change::Task(Box::new(TaskChange {
                id: t.id,
                entry: t.entry.into(),
                run: t.run,
                kind: t.kind,
            })),
            host::Change::Timer(t) => Change::Timer(TimerChange {
                run: t.run,
                effect: t.effect,
                at: t.at,
                verb: t.verb,
                what: t.what.into(),
                fire_at: t.fire_at,
                lease_until: t.lease_until,
            }),
        }
    }
}

/// One committed change, with the position to resume after it.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct Event {
    pub position: String,
    pub change: Change,
}

impl From<host::FeedEntry> for Event {
    /// The entry at the feed's own position, as a service or operator is
    /// shown it.
    fn from(e: host::FeedEntry) -> Self {
        Event {
            position: e.position,
            change: e.change.into(),
        }
    }
}

impl Event {
    /// The feed entry `entry` as a caller is shown it: at `position`, the
    /// spelling of the entry's own position that caller is given.
    pub fn shown(entry: &host::FeedEntry, position: String) -> Event {
        Event {
            position,
            change: entry.change.clone().into(),
        }
    }

    /// The event as JSON text: an entry of a JSON read, or a server-sent
    /// event's `data`.
    pub fn to_json(&self) -> String {
        // Strings, integers and enums of fixed names: nothing here can fail
        // to serialize.
        serde_json::to_string(self).unwrap_or_default()
    }
}

/// What a webhook delivers for one change: the body of each `POST` to a
/// subscription's endpoint, in the payload structure of Standard Webhooks
/// (`type`, `timestamp`, `data`). The `webhook-id`, `webhook-timestamp`
/// and `webhook-signature` headers carry the message's id and signature.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct WebhookPayload {
    /// `task.` or `timer.` and the verb that made the change, its `-`
    /// spelt `_` (`task.settle`, `task.take_over`, `timer.claim_due`).
    #[serde(rename = "type")]
    pub kind: String,
    /// When the change was made, as RFC 3339 in UTC with milliseconds.
    pub timestamp: String,
    /// The subscription it was delivered to.
    pub subscription: String,
    /// The change, as a read of the feed gives it. Its `position` is where
    /// a reader resumes after it; a change sent again (a retry, a replay)
    /// keeps its `webhook-id`, not necessarily this position.
    pub data: Event,
}

impl WebhookPayload {
    /// The payload of `entry` for `subscription`.
    pub fn of(subscription: &str, entry: &host::FeedEntry) -> WebhookPayload {
        let (family, verb, at) = match &entry.change {
            host::Change::Task(t) => ("task", t.entry.verb.as_str(), t.entry.at),
            host::Change::Timer(t) => ("timer", t.verb.as_str(), t.at),
        };
        let timestamp = jiff::Timestamp::from_millisecond(at)
            .map_or_else(|_| at.to_string(), |t| format!("{t:.3}"));
        WebhookPayload {
            kind: format!("{family}.{}", verb.replace('-', "_")),
            timestamp,
            subscription: subscription.to_owned(),
            data: entry.clone().into(),
        }
    }
}
