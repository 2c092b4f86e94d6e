//! The pieces of text every command's rendering for a person is made of:
//! tables, counts, times with their distance from now, and how a priority,
//! a policy, an audience, a state change, or a task's reminders, chain and
//! fired steps read. It owns how these look;
//! what a command says with them is the command's.

use std::fmt::Write as _;

use leasehold_guest::model::{EscalationStep, StepAction, TaskStep};
use leasehold_host::{OnExpiry, Phase, Priority, Task, TaskState, Timer, Timestamp};

use crate::values::{format_time, relative};

/// A timer's cells in a table of timers: run, effect, step, phase, fire
/// time.
pub fn timer_cells(t: &Timer) -> Vec<String> {
    vec![
        t.run.clone(),
        t.effect.clone(),
        t.step.to_string(),
        match t.phase {
            Phase::Forward => "forward".to_owned(),
            Phase::Compensating => "compensating".to_owned(),
        },
        format_time(t.fire_at),
    ]
}

pub fn count(n: u64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// A time with its distance from now, e.g. `2026-05-04T09:30:00Z (+25m)`.
pub fn when(t: Timestamp, now: Timestamp) -> String {
    format!("{} ({})", format_time(t), relative(t, now))
}

pub fn priority(p: Priority) -> &'static str {
    match p {
        Priority::Low => "low",
        Priority::Normal => "normal",
        Priority::High => "high",
        Priority::Urgent => "urgent",
    }
}

pub fn on_expiry(o: OnExpiry) -> &'static str {
    match o {
        OnExpiry::Deny => "deny",
        OnExpiry::Escalate => "escalate",
        OnExpiry::Proceed => "proceed",
    }
}

/// An audience as a person reads it: no roles means anyone may take it.
pub fn roles(list: &[String]) -> String {
    if list.is_empty() {
        "anyone".to_owned()
    } else {
        list.join(", ")
    }
}

/// A list, or `-` for none.
pub fn or_dash(list: &[String]) -> String {
    if list.is_empty() {
        "-".to_owned()
    } else {
        list.join(", ")
    }
}

/// What a change did to a task's state: `open -> claimed`, or the state
/// alone when it stayed, or `opened open` for the first entry.
pub fn state_change(before: Option<TaskState>, after: TaskState) -> String {
    match before {
        Some(b) if b != after => format!("{b} -> {after}"),
        Some(_) => after.to_string(),
        None => format!("opened {after}"),
    }
}

/// Left-aligned columns, two spaces apart, widths in characters.
pub fn table(headers: &[&str], rows: Vec<Vec<String>>) -> String {
    let mut widths: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    let header: Vec<String> = headers.iter().map(|h| (*h).to_owned()).collect();
    for row in std::iter::once(&header).chain(&rows) {
        let mut line = String::new();
        for (i, (cell, w)) in row.iter().zip(&widths).enumerate() {
            if i + 1 == row.len() {
                line.push_str(cell);
            } else {
                let _ = write!(line, "{cell:<w$}  ");
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// A length of time as a person reads it: `1h`, `4h 30m`, `1d`, `1500ms`.
pub fn span(ms: u64) -> String {
    const UNITS: [(u64, &str); 5] = [
        (86_400_000, "d"),
        (3_600_000, "h"),
        (60_000, "m"),
        (1_000, "s"),
        (1, "ms"),
    ];
    if ms == 0 {
        return "0s".to_owned();
    }
    let mut left = ms;
    let mut parts = Vec::new();
    for (unit, name) in UNITS {
        if left >= unit {
            parts.push(format!("{}{name}", left / unit));
            left %= unit;
        }
    }
    parts.join(" ")
}

/// When a chain step fires, relative to the due time.
fn at_due(after: u64) -> String {
    if after == 0 {
        "at due".to_owned()
    } else {
        format!("at due + {}", span(after))
    }
}

/// A task's reminders and chain in one line, as `task get` shows it: "1h
/// before due; at due escalates to leads; at due + 1d expires (1 of 3
/// steps fired)". None when it has neither.
pub fn timeline(t: &Task) -> Option<String> {
    if t.remind_before.is_empty() && t.escalation.is_empty() {
        return None;
    }
    let mut said = Vec::new();
    if !t.remind_before.is_empty() {
        let offsets: Vec<String> = t.remind_before.iter().map(|&ms| span(ms)).collect();
        said.push(format!("reminds {} before due", offsets.join(", ")));
    }
    for s in &t.escalation {
        said.push(step_words(s));
    }
    let total = t.remind_before.len() + t.escalation.len();
    Some(format!(
        "{} ({} of {total} steps fired)",
        said.join("; "),
        t.steps_done
    ))
}

fn step_words(s: &EscalationStep) -> String {
    match &s.action {
        StepAction::Escalate(roles) => {
            format!(
                "{} escalates to {}",
                at_due(s.after_due_ms),
                roles.join(", ")
            )
        }
        StepAction::Expire => format!("{} expires", at_due(s.after_due_ms)),
    }
}

/// A fired step as a task's history says it: "reminder: due in 1h",
/// "chain step: at due + 4h escalates to directors".
pub fn fired(step: &TaskStep) -> String {
    match step {
        TaskStep::Reminder(ms) => format!("reminder: due in {}", span(*ms)),
        TaskStep::Escalation(s) => format!("chain step: {}", step_words(s)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_read_as_a_person_writes_them() {
        assert_eq!(span(3_600_000), "1h");
        assert_eq!(span(86_400_000 + 1_800_000), "1d 30m");
        assert_eq!(span(1_500), "1s 500ms");
        assert_eq!(span(0), "0s");
    }

    #[test]
    fn a_table_pads_every_column_but_the_last() {
        let t = table(
            &["ID", "STATE"],
            vec![
                vec!["pay-1".into(), "open".into()],
                vec!["x".into(), "claimed".into()],
            ],
        );
        assert_eq!(t, "ID     STATE\npay-1  open\nx      claimed\n");
    }

    #[test]
    fn counts_agree_in_number() {
        assert_eq!(count(1, "task", "tasks"), "1 task");
        assert_eq!(count(0, "task", "tasks"), "0 tasks");
    }
}
