//! How a bulk job is shown: as JSON (one object a job, the shape every
//! `jobs` command and each progress line prints) and as text (a job's
//! counts and last reasons, or a table of jobs), and what its end means
//! to a script's exit code. It renders only; it must never make a call.

use leasehold_host::{Job, JobAction, JobFailure, JobState, TaskChanges};
use serde_json::{Value, json};

use crate::answer::Answer;
use crate::commands::search::{filter_json, filter_text};
use crate::exit;
use crate::render::{count, table};
use crate::values::format_time;

/// An action as the command line's JSON spells it: `"release"`,
/// `"escalate"`, `"withdraw"`, `{"assign": {...}}` or `{"update": {...}}`.
fn action_json(a: &JobAction) -> Value {
    match a {
        JobAction::Release => json!("release"),
        JobAction::Escalate => json!("escalate"),
        JobAction::Withdraw => json!("withdraw"),
        JobAction::Assign(a) => json!({"assign": {
            "to": a.to, "roles": a.roles, "override_roles": a.override_roles,
        }}),
        JobAction::Update(c) => json!({"update": changes_json(c)}),
    }
}

/// An update's changes: only the fields it changes (`"due_at": null`
/// clears the due time).
fn changes_json(c: &TaskChanges) -> Value {
    let mut fields = match serde_json::to_value(c) {
        Ok(Value::Object(m)) => m,
        _ => serde_json::Map::new(),
    };
    fields.retain(|_, v| !v.is_null());
    if c.due_at == Some(None) {
        fields.insert("due_at".into(), Value::Null);
    }
    Value::Object(fields)
}

/// An action in a few words, as the flags that would give it.
fn action_text(a: &JobAction) -> String {
    match a {
        JobAction::Release => "--release".into(),
        JobAction::Escalate => "--escalate".into(),
        JobAction::Withdraw => "--withdraw".into(),
        JobAction::Assign(a) => {
            let mut s = format!("--assign-to {}", a.to);
            if !a.roles.is_empty() {
                s.push_str(&format!(" --roles {}", a.roles.join(" ")));
            }
            if a.override_roles {
                s.push_str(" --override-roles");
            }
            s
        }
        JobAction::Update(c) => {
            let mut parts = Vec::new();
            if let Some(p) = c.priority {
                parts.push(format!("--priority {}", crate::render::priority(p)));
            }
            match c.due_at {
                Some(Some(t)) => parts.push(format!("--due {}", format_time(t))),
                Some(None) => parts.push("--no-due".into()),
                None => {}
            }
            parts.join(" ")
        }
    }
}

fn misses(list: &[JobFailure]) -> Value {
    Value::Array(
        list.iter()
            .map(|f| json!({"id": f.id, "reason": f.reason}))
            .collect(),
    )
}

/// One job as JSON.
pub fn job_json(j: &Job) -> Value {
    json!({
        "id": j.id,
        "filter": filter_json(&j.filter),
        "action": action_json(&j.action),
        "by": j.by,
        "state": j.state.name(),
        "total": j.total,
        "done": j.done,
        "skipped": j.skipped,
        "failed": j.failed,
        "last_failures": misses(&j.last_failures),
        "last_skipped": misses(&j.last_skipped),
        "created_at": j.created_at,
    })
}

/// One job's counts in a line: "12 done of 40, 1 skipped, 0 failed".
pub fn counts_text(j: &Job) -> String {
    let done = if j.state == JobState::Counting {
        format!("{} found so far, {} done", j.total, j.done)
    } else {
        format!("{} done of {}", j.done, j.total)
    };
    format!("{done}, {} skipped, {} failed", j.skipped, j.failed)
}

/// Jobs: one (start, run, get, cancel: an object under --json) or a page
/// (list: an array).
pub struct Jobs {
    pub list: Vec<Job>,
    pub one: bool,
    /// Whether this command stepped the job to its end (`start`, `run`).
    pub ran: bool,
}

impl Answer for Jobs {
    fn json(&self) -> serde_json::Result<String> {
        match (self.one, self.list.as_slice()) {
            (true, [one]) => serde_json::to_string(&job_json(one)),
            (_, all) => serde_json::to_string(&all.iter().map(job_json).collect::<Vec<_>>()),
        }
    }

    fn human(&self) -> String {
        match (self.one, self.list.as_slice()) {
            (true, [j]) => one_text(j),
            (_, []) => "No jobs.\n".to_owned(),
            (_, all) => {
                let rows = all
                    .iter()
                    .map(|j| {
                        vec![
                            j.id.clone(),
                            j.state.name().to_owned(),
                            j.action.name().to_owned(),
                            j.total.to_string(),
                            j.done.to_string(),
                            j.skipped.to_string(),
                            j.failed.to_string(),
                            format_time(j.created_at),
                        ]
                    })
                    .collect();
                let mut out = table(
                    &[
                        "ID", "STATE", "ACTION", "TOTAL", "DONE", "SKIPPED", "FAILED", "STARTED",
                    ],
                    rows,
                );
                out.push_str(&format!("{}.\n", count(all.len() as u64, "job", "jobs")));
                out
            }
        }
    }

    /// A job this command ran that ended with failures, or was cancelled
    /// under it, is a finding a script must notice.
    fn exit_code(&self) -> u8 {
        match (self.ran, self.list.as_slice()) {
            (true, [j]) if j.failed > 0 || j.state == JobState::Cancelled => exit::REFUSED,
            _ => 0,
        }
    }
}

fn one_text(j: &Job) -> String {
    let mut out = format!(
        "Job {} ({}): {} over {}{}.\n{}, started {}.\n",
        j.id,
        j.state.name(),
        action_text(&j.action),
        filter_text(&j.filter),
        j.by.as_ref().map_or(String::new(), |b| format!(", by {b}")),
        counts_text(j),
        format_time(j.created_at),
    );
    for (what, list) in [("skipped", &j.last_skipped), ("failed", &j.last_failures)] {
        for f in list {
            out.push_str(&format!("  {what} {}: {}\n", f.id, f.reason));
        }
    }
    match j.state {
        JobState::Counting | JobState::Running => out.push_str(&format!(
            "It has work left: `leasehold jobs run {}` steps it to its end.\n",
            j.id
        )),
        JobState::Cancelled | JobState::Done => {}
    }
    out
}
