//! A task as the task commands answer it: the stored task as JSON, or for
//! a person the sentence saying what just happened above the task's fields.
//! It owns how one task reads; it must never make a call.

use std::fmt::Write as _;

use leasehold_host::Task;

use crate::answer::Answer;
use crate::render::{on_expiry, or_dash, priority, roles};
use crate::values::format_time;

/// A task, with the sentence that says what just happened to it.
pub struct Shown {
    pub task: Task,
    pub headline: String,
}

impl Answer for Shown {
    fn json(&self) -> serde_json::Result<String> {
        serde_json::to_string(&self.task)
    }

    fn human(&self) -> String {
        format!("{}\n{}", self.headline, block(&self.task))
    }
}

/// Who holds the task now, and until when.
pub fn holds(actor: &str, task: &Task) -> String {
    match task.lease_until {
        Some(until) => format!(
            "{actor} holds {} until {}; renew the lease to keep it.",
            task.id,
            format_time(until)
        ),
        None => format!("{actor} holds {} until released.", task.id),
    }
}

/// The task's fields, a line each.
pub fn block(t: &Task) -> String {
    let mut lines = vec![
        ("task", t.id.clone()),
        ("state", t.state.to_string()),
        ("priority", priority(t.priority).to_owned()),
        ("run", t.run.clone()),
    ];
    if let Some(case) = &t.case {
        lines.push(("case", case.clone()));
    }
    lines.push(("kind", t.kind.clone()));
    lines.push(("roles", roles(&t.candidate_roles)));
    lines.push(("holder", t.assignee.clone().unwrap_or_else(|| "-".into())));
    if let Some(until) = t.lease_until {
        lines.push(("lease until", format_time(until)));
    }
    lines.push(("excluded", or_dash(&t.excluded_actors)));
    lines.push(("escalate to", or_dash(&t.escalate_to)));
    lines.push(("on expiry", on_expiry(t.on_expiry).to_owned()));
    lines.push(("created", format_time(t.created_at)));
    lines.push(("due", t.due_at.map_or_else(|| "-".into(), format_time)));
    if let Some(steps) = crate::render::timeline(t) {
        lines.push(("reminders", steps));
    }
    lines.push(("justification", t.justification.clone()));
    lines.push(("revision", t.revision.to_string()));
    if !t.outcomes.is_empty() {
        let names: Vec<String> = t.outcomes.iter().map(|o| o.name.clone()).collect();
        lines.push(("outcomes", names.join(", ")));
    }
    if let Some(d) = &t.decision {
        let by = d.by.as_deref().unwrap_or("(service)");
        lines.push((
            "decision",
            format!("{} by {by} at {}", d.outcome, format_time(d.at)),
        ));
        if let Some(reason) = &d.reason {
            lines.push(("reason", reason.clone()));
        }
        if let Some(output) = &d.output {
            lines.push(("output", output.clone()));
        }
    }
    let mut out = String::new();
    for (k, v) in lines {
        let _ = writeln!(out, "  {k:<14}{v}");
    }
    out
}
