//! Bulk jobs as the scenarios spell them (the WIT's `job-action` and `job`
//! in JSON, kebab-case; an action as `"release"`, `"escalate"`,
//! `"withdraw"`, `{"assign": {"to": A, "roles": [...], "override-roles":
//! B}}` or `{"update": CHANGES}`), to and from the host's types. It
//! converts only.

use serde_json::{Value, json};

use leasehold_guest::jobs::{Job, JobAction, JobAssign, JobFailure};
use leasehold_guest::model::TaskChanges;

use super::search_values::filter_value;

/// A `job-action` argument; `changes` reads an `update`'s changes as
/// `update` itself takes them.
pub(super) fn action_arg(v: &Value, changes: impl Fn(&Value) -> TaskChanges) -> JobAction {
    if let Some(name) = v.as_str() {
        return match name {
            "release" => JobAction::Release,
            "escalate" => JobAction::Escalate,
            "withdraw" => JobAction::Withdraw,
            other => panic!("no job-action {other}"),
        };
    }
    if let Some(a) = v.get("assign") {
        return JobAction::Assign(JobAssign {
            to: a["to"].as_str().expect("assign.to").to_owned(),
            roles: serde_json::from_value(a.get("roles").cloned().unwrap_or(json!([])))
                .expect("assign.roles"),
            override_roles: a
                .get("override-roles")
                .and_then(Value::as_bool)
                .unwrap_or(false),
        });
    }
    if let Some(c) = v.get("update") {
        return JobAction::Update(changes(c));
    }
    panic!("no job-action {v}")
}

fn action_value(a: &JobAction) -> Value {
    match a {
        JobAction::Release => json!("release"),
        JobAction::Escalate => json!("escalate"),
        JobAction::Withdraw => json!("withdraw"),
        JobAction::Assign(a) => json!({"assign": {
            "to": a.to, "roles": a.roles, "override-roles": a.override_roles,
        }}),
        // The changes as given back are the scenario's concern only by
        // their presence: the task's own answers show what they did.
        JobAction::Update(_) => json!({"update": {}}),
    }
}

fn misses(list: &[JobFailure]) -> Value {
    Value::Array(
        list.iter()
            .map(|f| json!({"id": f.id, "reason": f.reason}))
            .collect(),
    )
}

/// A `job` answer.
pub(super) fn job_value(j: &Job) -> Value {
    json!({
        "id": j.id,
        "filter": filter_value(&j.filter),
        "action": action_value(&j.action),
        "by": j.by,
        "state": j.state.name(),
        "total": j.total,
        "done": j.done,
        "skipped": j.skipped,
        "failed": j.failed,
        "last-failures": misses(&j.last_failures),
        "last-skipped": misses(&j.last_skipped),
        "created-at": j.created_at,
    })
}
