//! A job's action as the API spells it (WIT `job-action`): an object
//! tagged by `kind`, whose `update` takes the changes `PATCH
//! /v1/tasks/{id}` takes, and the conversions to and from the rules'. It
//! owns the shape and the body's names of its fields in a refusal
//! (`action.to`, `action.changes.priority`); whether an action is valid is
//! the rules', and it must never decide what a job does.

use leasehold_guest::jobs as rules;
use leasehold_guest::model::TaskChanges;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use utoipa::ToSchema;

use super::task_life::TaskPatch;
use crate::extract::decode;
use crate::problem::ApiError;
use crate::wire::{OnExpiry, OutcomeRule, Priority};

/// What a job does to each task, through the task verb of that name:
/// `release` (unassign: back to its queue), `assign` (to `to`, by the
/// claim ladder for `to` with `roles`, without a lease), `update` (the
/// fields `changes` names, as `PATCH /v1/tasks/{id}` takes them),
/// `escalate`, `withdraw` (settled as withdrawn).
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum JobAction {
    Release,
    Assign {
        /// Who will hold each task.
        #[schema(schema_with = crate::schema::name)]
        to: String,
        /// `to`'s roles, as the claim ladder's roles rung reads them
        /// (default: none).
        #[serde(default)]
        #[schema(schema_with = crate::schema::names)]
        roles: Vec<String>,
        /// Skip the roles rung; each task's record says it was skipped.
        #[serde(default)]
        override_roles: bool,
    },
    Update {
        /// The change, as `PATCH /v1/tasks/{id}` takes it.
        #[schema(value_type = TaskPatch)]
        changes: Map<String, Value>,
    },
    Escalate,
    Withdraw,
}

/// The fields of an `assign` action.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AssignFields {
    to: String,
    #[serde(default)]
    roles: Vec<String>,
    #[serde(default)]
    override_roles: bool,
}

/// The fields of an `update` action.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct UpdateFields {
    changes: Map<String, Value>,
}

/// Nothing but `kind`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct NoFields {}

/// The action a body asks for, read by hand so that a refusal names the
/// field inside it (`action.to`), which a tagged enum's derive loses.
pub(super) fn read_action(v: Value) -> Result<rules::JobAction, ApiError> {
    let Value::Object(mut fields) = v else {
        return Err(ApiError::invalid(
            "action",
            "action: an object whose `kind` is release, assign, update, escalate or withdraw",
        ));
    };
    let kind = match fields.remove("kind") {
        Some(Value::String(k)) => k,
        _ => {
            return Err(ApiError::invalid(
                "action.kind",
                "action.kind: one of release, assign, update, escalate, withdraw",
            ));
        }
    };
    let rest = serde_json::to_vec(&fields).map_err(|e| ApiError::Internal(Box::new(e)))?;
    let inner = |e: ApiError| within("action.", e);
    Ok(match kind.as_str() {
        "release" | "escalate" | "withdraw" => {
            decode::<NoFields>(&rest).map_err(inner)?;
            match kind.as_str() {
                "release" => rules::JobAction::Release,
                "escalate" => rules::JobAction::Escalate,
                _ => rules::JobAction::Withdraw,
            }
        }
        "assign" => {
            let a: AssignFields = decode(&rest).map_err(inner)?;
            rules::JobAction::Assign(rules::JobAssign {
                to: a.to,
                roles: a.roles,
                override_roles: a.override_roles,
            })
        }
        "update" => {
            let u: UpdateFields = decode(&rest).map_err(inner)?;
            let changes = TaskPatch::read(u.changes).map_err(|e| match e {
                ApiError::Invalid {
                    field: None,
                    detail,
                } => ApiError::Invalid {
                    field: Some("action.changes".to_owned()),
                    detail: format!("action.changes: {detail}"),
                },
                e => within("action.changes.", e),
            })?;
            rules::JobAction::Update(changes)
        }
        other => {
            return Err(ApiError::invalid(
                "action.kind",
                format!(
                    "action.kind: {other:?} is not one of release, assign, update, escalate, \
                     withdraw"
                ),
            ));
        }
    })
}

/// A refusal of a part of the body, its field named from the body's top.
fn within(prefix: &str, e: ApiError) -> ApiError {
    match e {
        ApiError::Invalid {
            field: Some(f),
            detail,
        } => ApiError::Invalid {
            field: Some(format!("{prefix}{f}")),
            detail: format!("{prefix}{detail}"),
        },
        // A missing or unknown field is named only in serde's words.
        ApiError::Invalid {
            field: None,
            detail,
        } => {
            let named = detail
                .split_once("field `")
                .and_then(|(_, rest)| rest.split_once('`'))
                .map(|(f, _)| f.to_owned());
            ApiError::Invalid {
                field: Some(match named {
                    Some(f) => format!("{prefix}{f}"),
                    None => prefix.trim_end_matches('.').to_owned(),
                }),
                detail: format!("{prefix}{detail}"),
            }
        }
        e => e,
    }
}

/// The rules name an action's fields by the WIT (`action.assign.to`,
/// `changes.due_at`, `action.update`); the body names them `action.to`,
/// `action.changes.due_at`, `action.changes`.
pub(super) fn body_field(e: ApiError) -> ApiError {
    match e {
        ApiError::Invalid {
            field: Some(f),
            detail,
        } => {
            let field = if let Some(rest) = f.strip_prefix("action.assign.") {
                format!("action.{rest}")
            } else if let Some(rest) = f.strip_prefix("changes.") {
                format!("action.changes.{rest}")
            } else if f == "action.update" {
                "action.changes".to_owned()
            } else {
                f
            };
            ApiError::Invalid {
                field: Some(field),
                detail,
            }
        }
        other => other,
    }
}

/// A job's action as the body spells it.
pub(super) fn action_json(a: rules::JobAction) -> JobAction {
    match a {
        rules::JobAction::Release => JobAction::Release,
        rules::JobAction::Assign(a) => JobAction::Assign {
            to: a.to,
            roles: a.roles,
            override_roles: a.override_roles,
        },
        rules::JobAction::Update(c) => JobAction::Update {
            changes: changes_json(c),
        },
        rules::JobAction::Escalate => JobAction::Escalate,
        rules::JobAction::Withdraw => JobAction::Withdraw,
    }
}

/// A change as `PATCH /v1/tasks/{id}` takes it: only the fields it names.
fn changes_json(c: TaskChanges) -> Map<String, Value> {
    fn put<T: Serialize>(m: &mut Map<String, Value>, k: &str, v: Option<T>) {
        if let Some(v) = v {
            m.insert(k.to_owned(), serde_json::to_value(v).unwrap_or(Value::Null));
        }
    }
    let mut m = Map::new();
    put(&mut m, "due_at", c.due_at);
    put(&mut m, "priority", c.priority.map(Priority::from));
    put(&mut m, "candidate_roles", c.candidate_roles);
    put(&mut m, "escalate_to", c.escalate_to);
    put(&mut m, "excluded_actors", c.excluded_actors);
    put(&mut m, "on_expiry", c.on_expiry.map(OnExpiry::from));
    put(
        &mut m,
        "outcomes",
        c.outcomes
            .map(|o| o.into_iter().map(OutcomeRule::from).collect::<Vec<_>>()),
    );
    put(&mut m, "remind_before", c.remind_before);
    put(
        &mut m,
        "escalation",
        c.escalation.map(|s| {
            s.into_iter()
                .map(crate::timeline::EscalationStep::from)
                .collect::<Vec<_>>()
        }),
    );
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_action_refusal_names_the_body_field() {
        let field = |v: Value| match read_action(v) {
            Err(ApiError::Invalid { field, .. }) => field,
            other => panic!("{other:?}"),
        };
        assert_eq!(
            field(serde_json::json!({"kind": "assign"})).as_deref(),
            Some("action.to")
        );
        assert_eq!(
            field(serde_json::json!({"kind": "assign", "to": 3})).as_deref(),
            Some("action.to")
        );
        assert_eq!(
            field(serde_json::json!({"kind": "release", "to": "x"})).as_deref(),
            Some("action.to")
        );
        assert_eq!(
            field(serde_json::json!({"kind": "update", "changes": {"priority": "x"}})).as_deref(),
            Some("action.changes.priority")
        );
        assert_eq!(
            field(serde_json::json!({"kind": "update", "changes": {}})).as_deref(),
            Some("action.changes")
        );
        assert_eq!(
            field(serde_json::json!({"kind": "nap"})).as_deref(),
            Some("action.kind")
        );
    }

    #[test]
    fn an_update_action_reads_back_as_it_was_given() {
        let given =
            serde_json::json!({"due_at": null, "priority": "high", "candidate_roles": ["a"]});
        let Value::Object(m) = given.clone() else {
            unreachable!()
        };
        let c = TaskPatch::read(m).expect("a change");
        assert_eq!(Value::Object(changes_json(c)), given);
    }
}
