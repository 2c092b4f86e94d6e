//! Values written as JSON text for the change record: each changed field's
//! before and after, as a reader of the history or the feed sees them. It
//! only formats; it never parses or decides anything.

#[allow(unused_imports)]
use crate::prelude::*;

use serde_json::{Value, json};

use crate::model::{EscalationStep, OutcomeRule, StepAction, Timestamp};

/// A value as JSON text. Serializing a `Value` cannot fail.
fn text(v: &Value) -> String {
    serde_json::to_string(v).unwrap_or_default()
}

/// A string as a JSON string.
pub fn to_json(s: &str) -> String {
    text(&Value::String(s.to_owned()))
}

pub fn opt_str(s: &Option<String>) -> String {
    s.as_deref().map_or_else(|| "null".to_owned(), to_json)
}

pub fn opt_int(n: Option<Timestamp>) -> String {
    n.map_or_else(|| "null".to_owned(), |n| n.to_string())
}

pub fn strs(list: &[String]) -> String {
    text(&Value::Array(
        list.iter().map(|s| Value::String(s.clone())).collect(),
    ))
}

/// Outcome rules as the WIT names their fields; a schema as its text.
pub fn outcomes(list: &[OutcomeRule]) -> String {
    text(&Value::Array(
        list.iter()
            .map(|o| {
                json!({
                    "name": o.name,
                    "needs-reason": o.needs_reason,
                    "output-schema": o.output_schema,
                })
            })
            .collect(),
    ))
}

/// Numbers as a JSON array.
pub fn ints(list: &[u64]) -> String {
    text(&Value::Array(list.iter().map(|&n| json!(n)).collect()))
}

/// An escalation chain as the WIT names its fields: each step's action
/// `{"escalate": [roles]}` or `"expire"`.
pub fn escalation(list: &[EscalationStep]) -> String {
    text(&Value::Array(
        list.iter()
            .map(|s| {
                let action = match &s.action {
                    StepAction::Escalate(roles) => json!({ "escalate": roles }),
                    StepAction::Expire => json!("expire"),
                };
                json!({ "after-due-ms": s.after_due_ms, "action": action })
            })
            .collect(),
    ))
}
