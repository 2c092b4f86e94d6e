//! A decision's checks: its own shape (outcome, reason, output), before the
//! task is read, and then against the outcome rules its task or its kind
//! declares, in the settling call. It reads a kind's definition and never
//! writes.

#[allow(unused_imports)]
use crate::prelude::*;

use crate::jsonschema::Schema;
use crate::kinds;
use crate::kv::Kv;
use crate::model::{ClaimError, Decision, Task};
use crate::validate::{self, invalid};

/// What a decision must be whatever its task: an outcome name, a reason of
/// at most 4 KiB, an output that is a JSON document like a justification.
pub(super) fn check_decision_input(d: &Decision) -> Result<(), ClaimError> {
    validate::outcome("decision.outcome", &d.outcome)?;
    if let Some(r) = &d.reason {
        validate::text("decision.reason", r)?;
    }
    if let Some(o) = &d.output {
        validate::json_document("decision.output", o)?;
    }
    Ok(())
}

/// The decision against the rules that apply to `task`: its outcome
/// declared (when any are), a reason where the outcome needs one, and the
/// output (JSON `null` when there is none) valid under the outcome's
/// schema, else the path of the first violation.
pub(super) fn check_decision<K: Kv + ?Sized>(
    kv: &mut K,
    task: &Task,
    d: &Decision,
) -> Result<(), ClaimError> {
    let rules = kinds::rules_for(kv, task)?;
    if rules.is_empty() {
        return Ok(());
    }
    let Some(rule) = rules.iter().find(|r| r.name == d.outcome) else {
        let names: Vec<&str> = rules.iter().map(|r| r.name.as_str()).collect();
        return Err(invalid(format!(
            "decision.outcome: {:?} is not an outcome task {} allows ({})",
            d.outcome,
            task.id,
            names.join(", ")
        ))
        .into());
    };
    if rule.needs_reason && d.reason.as_deref().is_none_or(|r| r.trim().is_empty()) {
        return Err(invalid(format!(
            "decision.reason: the outcome {:?} needs a reason",
            d.outcome
        ))
        .into());
    }
    if let Some(text) = &rule.output_schema {
        // Compiled when declared; a stored schema that no longer compiles
        // is damage, not the decider's fault.
        let schema = Schema::compile_str(text).map_err(|e| {
            crate::model::StoreError::Corrupt(format!(
                "the output schema of outcome {:?} for task {}: {e}",
                rule.name, task.id
            ))
        })?;
        let output: serde_json::Value = match &d.output {
            Some(o) => serde_json::from_str(o)
                .map_err(|e| invalid(format!("decision.output is not a JSON document: {e}")))?,
            None => serde_json::Value::Null,
        };
        if let Err(v) = schema.validate(&output) {
            return Err(invalid(format!("decision.output: {v}")).into());
        }
    }
    Ok(())
}
