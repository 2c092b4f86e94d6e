//! Changing a task after it opens, from the command line: `task update`,
//! `task assign`, `task unassign`, `task delegate` and `task note`, each
//! with its flags, its call and its sentence. Which change is allowed is
//! the rules' (each field by `open`'s rules, the claim ladder for a new
//! holder); this module only asks and reports.

use std::io::Write;

use clap::{Args, ValueEnum};
use leasehold_host::{OnExpiry, Priority, TaskChanges, TaskState, Timestamp};

use crate::commands::task::claim::LeaseArgs;
use crate::commands::task::guard::GuardArgs;
use crate::commands::task::shown::{Shown, holds};
use crate::commands::task::timeline::TimelineArgs;
use crate::context::Context;
use crate::error::CliError;
use crate::values::parse_time;

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum PriorityArg {
    Low,
    Normal,
    High,
    Urgent,
}

impl From<PriorityArg> for Priority {
    fn from(p: PriorityArg) -> Self {
        match p {
            PriorityArg::Low => Priority::Low,
            PriorityArg::Normal => Priority::Normal,
            PriorityArg::High => Priority::High,
            PriorityArg::Urgent => Priority::Urgent,
        }
    }
}

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum OnExpiryArg {
    Deny,
    Escalate,
    Proceed,
}

impl From<OnExpiryArg> for OnExpiry {
    fn from(o: OnExpiryArg) -> Self {
        match o {
            OnExpiryArg::Deny => OnExpiry::Deny,
            OnExpiryArg::Escalate => OnExpiry::Escalate,
            OnExpiryArg::Proceed => OnExpiry::Proceed,
        }
    }
}

fn strs(list: &[String]) -> Vec<&str> {
    list.iter().map(String::as_str).collect()
}

#[derive(Debug, Args)]
pub struct Update {
    id: String,
    /// Move the due time here (RFC 3339 or integer milliseconds)
    #[arg(long, value_name = "TIME", value_parser = parse_time, allow_negative_numbers = true, conflicts_with = "no_due")]
    due: Option<Timestamp>,
    /// Clear the due time
    #[arg(long)]
    no_due: bool,
    #[arg(long, value_enum, value_name = "P")]
    priority: Option<PriorityArg>,
    /// The candidate roles, replacing the old ones (given with no role: open
    /// to anyone); a flag left out changes nothing
    #[arg(long, value_name = "R", num_args = 0..)]
    roles: Option<Vec<String>>,
    /// The roles escalation adds, replacing the old ones
    #[arg(long, value_name = "R", num_args = 0..)]
    escalate_to: Option<Vec<String>>,
    /// The excluded actors, replacing the old ones; excluding the holder
    /// ends the claim
    #[arg(long, value_name = "A", num_args = 0..)]
    exclude: Option<Vec<String>>,
    #[arg(long, value_enum, value_name = "POLICY")]
    on_expiry: Option<OnExpiryArg>,
    /// Who makes the change, as the history records it [default: the
    /// service]
    #[arg(long, value_name = "A")]
    by: Option<String>,
    #[command(flatten)]
    timeline: TimelineArgs,
    #[command(flatten)]
    guard: GuardArgs,
}

impl Update {
    pub fn run(&self, cx: &Context, out: &mut dyn Write) -> Result<u8, CliError> {
        let due_at = match (self.due, self.no_due) {
            (Some(t), _) => Some(Some(t)),
            (None, true) => Some(None),
            (None, false) => None,
        };
        let changes = TaskChanges {
            due_at,
            priority: self.priority.map(Into::into),
            candidate_roles: self.roles.clone(),
            escalate_to: self.escalate_to.clone(),
            excluded_actors: self.exclude.clone(),
            on_expiry: self.on_expiry.map(Into::into),
            outcomes: None,
            remind_before: self.timeline.remind_before(),
            escalation: self.timeline.escalation(),
        };
        if !changes.names_a_field() {
            return Err(CliError::Input(
                "task update: name at least one field to change (--due, --no-due, --priority, --roles, --escalate-to, --exclude, --on-expiry, --remind-before, --no-reminders, --escalate-at, --expire-after, --no-escalation)".into(),
            ));
        }
        let task = self
            .guard
            .tenant(cx)?
            .update(&self.id, self.by.as_deref(), &changes)?;
        let headline = format!("Updated {}; it is at revision {}.", task.id, task.revision);
        cx.answer(&Shown { task, headline }, out)
    }
}

#[derive(Debug, Args)]
pub struct Assign {
    id: String,
    /// Who is to hold the task
    #[arg(long, value_name = "A")]
    to: String,
    /// The new holder's roles (repeat, or list several after one --role)
    #[arg(long = "role", visible_alias = "roles", value_name = "R", num_args = 1..)]
    roles: Vec<String>,
    /// Assign even though none of the roles is a candidate role (the
    /// history records that the rule was overridden); an excluded actor is
    /// refused all the same
    #[arg(long)]
    override_roles: bool,
    #[command(flatten)]
    lease: LeaseArgs,
    /// Who assigns, as the history records it [default: the service]
    #[arg(long, value_name = "A")]
    by: Option<String>,
    #[command(flatten)]
    guard: GuardArgs,
}

impl Assign {
    pub fn run(&self, cx: &Context, out: &mut dyn Write) -> Result<u8, CliError> {
        let task = self.guard.tenant(cx)?.assign(
            &self.id,
            &self.to,
            &strs(&self.roles),
            self.lease.lease(),
            self.override_roles,
            self.by.as_deref(),
        )?;
        let headline = format!("Assigned: {}", holds(&self.to, &task));
        cx.answer(&Shown { task, headline }, out)
    }
}

#[derive(Debug, Args)]
pub struct Unassign {
    id: String,
    /// Who takes it back, as the history records it [default: the service]
    #[arg(long, value_name = "A")]
    by: Option<String>,
    #[command(flatten)]
    guard: GuardArgs,
}

impl Unassign {
    pub fn run(&self, cx: &Context, out: &mut dyn Write) -> Result<u8, CliError> {
        let task = self
            .guard
            .tenant(cx)?
            .unassign(&self.id, self.by.as_deref())?;
        let headline = match task.state {
            TaskState::Open | TaskState::Escalated => {
                format!("{} is back in the queue; no one holds it.", task.id)
            }
            state => format!("{} is {state}.", task.id),
        };
        cx.answer(&Shown { task, headline }, out)
    }
}

#[derive(Debug, Args)]
pub struct Delegate {
    id: String,
    /// Who holds the task now (anyone else is refused)
    #[arg(long, value_name = "A")]
    from: String,
    /// Who is to hold it
    #[arg(long, value_name = "B")]
    to: String,
    /// The new holder's roles (repeat, or list several after one --role)
    #[arg(long = "role", visible_alias = "roles", value_name = "R", num_args = 1..)]
    roles: Vec<String>,
    #[command(flatten)]
    lease: LeaseArgs,
    #[command(flatten)]
    guard: GuardArgs,
}

impl Delegate {
    pub fn run(&self, cx: &Context, out: &mut dyn Write) -> Result<u8, CliError> {
        let task = self.guard.tenant(cx)?.delegate(
            &self.id,
            &self.from,
            &self.to,
            &strs(&self.roles),
            self.lease.lease(),
        )?;
        let headline = format!("{} handed it on: {}", self.from, holds(&self.to, &task));
        cx.answer(&Shown { task, headline }, out)
    }
}

#[derive(Debug, Args)]
pub struct Note {
    id: String,
    /// Who writes the note
    #[arg(long, value_name = "A")]
    actor: String,
    /// The note (at most 4 KiB)
    #[arg(long, value_name = "TEXT")]
    text: String,
    #[command(flatten)]
    guard: GuardArgs,
}

impl Note {
    pub fn run(&self, cx: &Context, out: &mut dyn Write) -> Result<u8, CliError> {
        let task = self
            .guard
            .tenant(cx)?
            .note(&self.id, &self.actor, &self.text)?;
        let headline = format!(
            "{} added a note to {}; it is at revision {}.",
            self.actor, task.id, task.revision
        );
        cx.answer(&Shown { task, headline }, out)
    }
}
