//! The wire types more than one resource speaks: a task and its enums, a
//! page of tasks, and integers as JSON Schema counts them. Each resource's
//! own request and answer bodies sit with its handlers (`crate::api::*`);
//! a change on the wire is `crate::change`'s. Field names are the WIT's
//! (with underscores, as the CLI and the stored rows spell them). It must
//! never carry a tenant, a scope or, for a reviewer, anyone else's
//! identity: those come from the credential.

use leasehold_host as host;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use utoipa::ToSchema;

use leasehold_guest::model as host_model;

use crate::problem::ApiError;
use crate::timeline::EscalationStep;

/// What a handler answers: a JSON body, or a problem.
pub type Answer<T> = Result<axum::Json<T>, ApiError>;

/// Items per page when a read names no `limit`.
pub const DEFAULT_PAGE: u32 = 20;

/// The query of a paged list: its size, and where the previous page ended.
#[derive(Debug, Deserialize, ToSchema, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct PageParams {
    /// Items per page (default 20).
    #[param(schema_with = crate::schema::limit)]
    #[serde(default)]
    #[serde(deserialize_with = "whole::opt_u32")]
    pub limit: Option<u32>,
    /// The `next` of the previous page.
    #[param(schema_with = crate::schema::cursor)]
    pub after: Option<String>,
}

/// Integers as JSON Schema counts them (`738`, `738.0`, `"738"`): the host
/// library's reading, so the service and the CLI read numbers alike.
pub use leasehold_host::whole;

/// An enum of the wire that mirrors one of the host's, variant for
/// variant, with the conversions both ways.
macro_rules! mirror_enum {
    ($(#[$doc:meta])* $name:ident => $host:ident { $($variant:ident),+ }) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
        #[serde(rename_all = "snake_case")]
        pub enum $name {
            $($variant,)+
        }

        impl From<host::$host> for $name {
            fn from(v: host::$host) -> Self {
                match v {
                    $(host::$host::$variant => $name::$variant,)+
                }
            }
        }

        impl From<$name> for host::$host {
            fn from(v: $name) -> Self {
                match v {
                    $($name::$variant => host::$host::$variant,)+
                }
            }
        }
    };
}

pub(crate) use mirror_enum;

mirror_enum!(
    /// Queue order: `urgent` tasks are offered first.
    Priority => Priority { Low, Normal, High, Urgent });
mirror_enum!(
    /// Where a task is in its life; `open`, `claimed` and `escalated` are pending.
    TaskState => TaskState { Open, Claimed, Escalated, Completed, Expired, Withdrawn });
mirror_enum!(
    /// What the task's owner wants done when `due_at` passes.
    OnExpiry => OnExpiry { Deny, Escalate, Proceed });

/// A human task (WIT `task`).
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct Task {
    pub id: String,
    pub run: String,
    pub case: Option<String>,
    pub kind: String,
    /// The JSON document explaining the request, as stored.
    #[schema(schema_with = crate::schema::stored_justification)]
    pub justification: Box<RawValue>,
    pub candidate_roles: Vec<String>,
    pub assignee: Option<String>,
    /// Milliseconds since 1970 when the holder's lease ends.
    #[serde(default)]
    #[serde(deserialize_with = "whole::opt_i64")]
    pub lease_until: Option<i64>,
    pub priority: Priority,
    pub state: TaskState,
    pub on_expiry: OnExpiry,
    pub escalate_to: Vec<String>,
    pub excluded_actors: Vec<String>,
    #[serde(deserialize_with = "whole::i64")]
    pub created_at: i64,
    #[serde(default)]
    #[serde(deserialize_with = "whole::opt_i64")]
    pub due_at: Option<i64>,
    /// 1 when opened, one more with every change; 0 for a task written by
    /// an older build. Also the answer's `ETag` (`"<revision>"`), which a
    /// change sends back as `If-Match`.
    #[serde(default)]
    #[schema(schema_with = crate::schema::seq)]
    pub revision: u64,
    /// The decision the task was settled with, if one was given.
    #[serde(default)]
    pub decision: Option<DecisionRecord>,
    /// The outcomes a decision on the task may have; none: its kind's (see
    /// `/v1/kinds/{kind}`), or any when the kind declares none.
    #[serde(default)]
    pub outcomes: Vec<OutcomeRule>,
    /// Reminders, each milliseconds before `due_at`, largest first (the
    /// earliest reminder first).
    #[serde(default)]
    #[schema(schema_with = crate::timeline::stored_remind_before)]
    pub remind_before: Vec<u64>,
    /// The escalation chain after `due_at`, in firing order.
    #[serde(default)]
    #[schema(schema_with = crate::timeline::stored_escalation)]
    pub escalation: Vec<EscalationStep>,
    /// How many of the task's steps have fired: its reminders, earliest
    /// first, then its chain. The sweeper fires the next when its instant
    /// comes.
    #[serde(default)]
    pub steps_done: u32,
}

impl From<host::Task> for Task {
    fn from(t: host::Task) -> Self {
        // The rules accept only JSON documents; a row written otherwise is
        // shown as the string it holds rather than refused.
        let justification = RawValue::from_string(t.justification.clone()).unwrap_or_else(|_| {
            RawValue::from_string(serde_json::Value::String(t.justification).to_string())
                .unwrap_or_else(|_| empty_object())
        });
        Task {
            id: t.id,
            run: t.run,
            case: t.case,
            kind: t.kind,
            justification,
            candidate_roles: t.candidate_roles,
            assignee: t.assignee,
            lease_until: t.lease_until,
            priority: t.priority.into(),
            state: t.state.into(),
            on_expiry: t.on_expiry.into(),
            escalate_to: t.escalate_to,
            excluded_actors: t.excluded_actors,
            created_at: t.created_at,
            due_at: t.due_at,
            revision: t.revision,
            decision: t.decision.map(Into::into),
            outcomes: t.outcomes.into_iter().map(Into::into).collect(),
            remind_before: t.remind_before,
            escalation: t.escalation.into_iter().map(Into::into).collect(),
            steps_done: t.steps_done,
        }
    }
}

fn empty_object() -> Box<RawValue> {
    RawValue::from_string("{}".to_owned()).unwrap_or_default()
}

/// Stored JSON text as a document; text that is not JSON (which the rules
/// never store) as the string it holds.
pub fn document(text: String) -> Box<RawValue> {
    RawValue::from_string(text.clone()).unwrap_or_else(|_| {
        RawValue::from_string(serde_json::Value::String(text).to_string())
            .unwrap_or_else(|_| empty_object())
    })
}

/// One outcome a decision may have (WIT `outcome-rule`).
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct OutcomeRule {
    /// Such as `approved`, `rejected`, `returned`: 1–64 characters, no
    /// control characters; unique in its list.
    #[schema(schema_with = crate::schema::outcome)]
    pub name: String,
    /// A decision with this outcome must carry a non-empty reason.
    #[serde(default)]
    pub needs_reason: bool,
    /// A JSON Schema the decision's output must satisfy (checked as `null`
    /// when there is none).
    #[serde(default)]
    #[schema(schema_with = crate::schema::output_schema)]
    pub output_schema: Option<Box<RawValue>>,
}

impl From<host_model::OutcomeRule> for OutcomeRule {
    fn from(r: host_model::OutcomeRule) -> Self {
        OutcomeRule {
            name: r.name,
            needs_reason: r.needs_reason,
            output_schema: r.output_schema.map(document),
        }
    }
}

impl From<OutcomeRule> for host_model::OutcomeRule {
    fn from(r: OutcomeRule) -> Self {
        host_model::OutcomeRule {
            name: r.name,
            needs_reason: r.needs_reason,
            output_schema: r.output_schema.map(|s| s.get().to_owned()),
        }
    }
}

/// A decision as the task keeps it (WIT `decision-record`).
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct DecisionRecord {
    pub outcome: String,
    pub reason: Option<String>,
    /// The decision's output, the JSON document as it was given; null when
    /// it had none.
    #[schema(schema_with = crate::schema::stored_output)]
    pub output: Option<Box<RawValue>>,
    /// Who decided: the holder it was settled as; null for the service.
    pub by: Option<String>,
    /// Milliseconds since 1970 when it was settled.
    #[serde(deserialize_with = "whole::i64")]
    pub at: i64,
}

impl From<host_model::DecisionRecord> for DecisionRecord {
    fn from(d: host_model::DecisionRecord) -> Self {
        DecisionRecord {
            outcome: d.outcome,
            reason: d.reason,
            output: d.output.map(document),
            by: d.by,
            at: d.at,
        }
    }
}

/// A page of tasks; pass `next` back as `after` to read on.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct Page {
    pub tasks: Vec<Task>,
    pub next: Option<String>,
}

/// A lease of `lease_ms` from `now`, when one is asked for.
pub fn lease(now: i64, lease_ms: Option<u32>) -> Option<host::Lease> {
    lease_ms.map(|lease_ms| host::Lease { now, lease_ms })
}

/// Names as the engine's verbs take them.
pub fn refs(list: &[String]) -> Vec<&str> {
    list.iter().map(String::as_str).collect()
}

/// The run a path names (its runs' routes, and its timers').
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Path)]
pub struct RunPath {
    /// The run.
    #[param(schema_with = crate::schema::name)]
    pub run: String,
}
