//! A task's reminders and escalation chain on the wire: the chain's step
//! and its action, the step a history entry says fired, and the schema of
//! the offsets. Their rules (a due time needed, offsets that fit between
//! creation and due, a strictly increasing chain, `expire` last) are the
//! component's (`leasehold_guest::timeline`): the document states what a
//! schema can, and says the rest in words; it must never decide a rule.

use std::borrow::Cow;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use utoipa::openapi::schema::{
    AdditionalProperties, ArrayBuilder, ObjectBuilder, OneOfBuilder, Schema, Type,
};
use utoipa::openapi::{Ref, RefOr};

use leasehold_guest::model as host_model;
use leasehold_guest::timeline::MAX_STEPS;
use leasehold_guest::validate::MAX_TIMESTAMP;

/// The most roles one escalation step names.
const MAX_STEP_ROLES: usize = 64;

/// What the rules check that a schema cannot say: refused with 400
/// (`invalid`, `field` naming the list).
pub const TIMELINE_CHECKED: &str = "Needs a `due_at`; each reminder at or after the task's \
    `created_at`, each chain step at or before the year 9999: otherwise refused with 400 \
    (`invalid`, `field` naming `remind_before` or `escalation`), nothing written.";

/// What a chain step does when its instant comes (WIT `step-action`):
/// `{"escalate": [roles]}` or `"expire"`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StepAction {
    /// Escalate the task (unheld, `escalated`), its candidate roles
    /// widened by these.
    Escalate(Vec<String>),
    /// Settle it `expired`; only as the last step.
    Expire,
}

impl utoipa::PartialSchema for StepAction {
    fn schema() -> RefOr<Schema> {
        let expire = ObjectBuilder::new()
            .schema_type(Type::String)
            .enum_values(Some(["expire"]))
            .description(Some(
                "Settle the task `expired` (its `on_expiry` tells the workflow what that \
                 means); only as the chain's last step",
            ));
        let roles = ArrayBuilder::new()
            .items(crate::schema::name())
            .min_items(Some(1))
            .max_items(Some(MAX_STEP_ROLES));
        let escalate = ObjectBuilder::new()
            .schema_type(Type::Object)
            .property("escalate", roles)
            .required("escalate")
            .additional_properties(Some(AdditionalProperties::FreeForm(false)))
            .description(Some(
                "Escalate the task (unheld, `escalated`), its candidate roles widened by \
                 these (a task open to anyone stays open to anyone)",
            ));
        OneOfBuilder::new()
            .item(expire)
            .item(escalate)
            .description(Some("What a chain step does when its instant comes"))
            .into()
    }
}

impl ToSchema for StepAction {
    fn name() -> Cow<'static, str> {
        Cow::Borrowed("StepAction")
    }
}

/// One step of an escalation chain (WIT `escalation-step`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct EscalationStep {
    /// The step fires at `due_at` plus this many milliseconds (0: at the
    /// due time); each step after the one before it.
    #[schema(schema_with = after_due_ms)]
    #[serde(deserialize_with = "crate::wire::whole::u64")]
    pub after_due_ms: u64,
    pub action: StepAction,
}

/// A reminder or chain step as it fired (WIT `task-step`), in the history
/// entry of the sweep that fired it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum TaskStep {
    /// A reminder this many milliseconds before the due time.
    Reminder(u64),
    /// A step of the chain, as the task held it when it fired.
    Escalation(EscalationStep),
}

impl From<host_model::StepAction> for StepAction {
    fn from(a: host_model::StepAction) -> Self {
        match a {
            host_model::StepAction::Escalate(roles) => StepAction::Escalate(roles),
            host_model::StepAction::Expire => StepAction::Expire,
        }
    }
}

impl From<StepAction> for host_model::StepAction {
    fn from(a: StepAction) -> Self {
        match a {
            StepAction::Escalate(roles) => host_model::StepAction::Escalate(roles),
            StepAction::Expire => host_model::StepAction::Expire,
        }
    }
}

impl From<host_model::EscalationStep> for EscalationStep {
    fn from(s: host_model::EscalationStep) -> Self {
        EscalationStep {
            after_due_ms: s.after_due_ms,
            action: s.action.into(),
        }
    }
}

impl From<EscalationStep> for host_model::EscalationStep {
    fn from(s: EscalationStep) -> Self {
        host_model::EscalationStep {
            after_due_ms: s.after_due_ms,
            action: s.action.into(),
        }
    }
}

impl From<host_model::TaskStep> for TaskStep {
    fn from(s: host_model::TaskStep) -> Self {
        match s {
            host_model::TaskStep::Reminder(ms) => TaskStep::Reminder(ms),
            host_model::TaskStep::Escalation(step) => TaskStep::Escalation(step.into()),
        }
    }
}

/// A count of milliseconds, read as JSON Schema counts integers.
#[derive(Deserialize)]
struct Ms(#[serde(deserialize_with = "crate::wire::whole::u64")] u64);

/// A list of reminders when present (never `null`), each read as [`Ms`].
pub fn present_offsets<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Option<Vec<u64>>, D::Error> {
    let list = Vec::<Ms>::deserialize(d)?;
    Ok(Some(list.into_iter().map(|m| m.0).collect()))
}

fn ms(min: i64) -> ObjectBuilder {
    ObjectBuilder::new()
        .schema_type(Type::Integer)
        .format(Some(utoipa::openapi::SchemaFormat::KnownFormat(
            utoipa::openapi::KnownFormat::Int64,
        )))
        .minimum(Some(min as f64))
        .maximum(Some(MAX_TIMESTAMP as f64))
}

/// A chain step's offset after the due time.
fn after_due_ms() -> utoipa::openapi::schema::Object {
    ms(0).build()
}

/// A task's reminders: offsets in milliseconds before the due time, each
/// 1 or more, at most 8 (duplicates count once, kept largest first).
pub fn remind_before() -> ArrayBuilder {
    ArrayBuilder::new()
        .items(ms(1))
        .max_items(Some(MAX_STEPS))
        .description(Some(format!(
            "Reminders, each an offset in milliseconds before `due_at`: a reminder fires at \
             `due_at` minus it. At most {MAX_STEPS}; kept largest first (the earliest reminder \
             first), duplicates dropped. {TIMELINE_CHECKED}"
        )))
}

/// A task's escalation chain: at most 8 steps.
pub fn escalation() -> ArrayBuilder {
    ArrayBuilder::new()
        .items(Ref::from_schema_name("EscalationStep"))
        .max_items(Some(MAX_STEPS))
        .description(Some(format!(
            "The escalation chain after `due_at`, in firing order: each step at `due_at` plus \
             its `after_due_ms`, strictly increasing; `expire` only as the last step; at most \
             {MAX_STEPS}. While it is empty the due time leads to `on_expiry`; a task with a \
             chain is acted on by its chain instead. {TIMELINE_CHECKED}"
        )))
}

/// The same, as a task answers it.
pub fn stored_remind_before() -> utoipa::openapi::schema::Array {
    ArrayBuilder::new()
        .items(ms(1))
        .description(Some(
            "Reminders, milliseconds before `due_at`, largest first (the earliest reminder first)",
        ))
        .build()
}

pub fn stored_escalation() -> utoipa::openapi::schema::Array {
    ArrayBuilder::new()
        .items(Ref::from_schema_name("EscalationStep"))
        .description(Some("The escalation chain after `due_at`, in firing order"))
        .build()
}

pub fn new_remind_before() -> utoipa::openapi::schema::Array {
    remind_before().build()
}

pub fn new_escalation() -> utoipa::openapi::schema::Array {
    escalation().build()
}
