//! The sweeps over every task, by hand: `task reclaim-lapsed` (leases that
//! ended go back to the queue) and `task expire-overdue` (tasks past due
//! acted on by their policy), at `--now` or the clock. A running `serve`
//! sweeps by itself; these are for an embedder or an operator who sweeps
//! elsewhere. This module only asks and reports.

use std::fmt::Write as _;
use std::io::Write;

use clap::Args;
use leasehold_host::{Task, Timestamp};

use crate::answer::Answer;
use crate::context::Context;
use crate::error::CliError;
use crate::render::{count, priority, roles, table};
use crate::values::{self, format_time, parse_limit, parse_time};

/// When a sweep acts, and on how many tasks at most.
#[derive(Debug, Args)]
pub struct SweepArgs {
    /// The sweep's instant [default: the current clock]
    #[arg(long, value_name = "TIME", value_parser = parse_time, allow_negative_numbers = true)]
    now: Option<Timestamp>,
    /// Most tasks to act on (1-1000)
    #[arg(
        long,
        default_value_t = 100,
        value_name = "N",
        value_parser = parse_limit,
        allow_negative_numbers = true
    )]
    limit: u32,
}

#[derive(Debug, Args)]
pub struct ReclaimLapsed {
    #[command(flatten)]
    sweep: SweepArgs,
}

impl ReclaimLapsed {
    pub fn run(&self, cx: &Context, out: &mut dyn Write) -> Result<u8, CliError> {
        let now = self.sweep.now.unwrap_or_else(values::now);
        let tasks = cx.tenant()?.reclaim_lapsed(now, self.sweep.limit)?;
        cx.answer(&Reclaimed { tasks, now }, out)
    }
}

struct Reclaimed {
    tasks: Vec<Task>,
    now: Timestamp,
}

impl Answer for Reclaimed {
    fn json(&self) -> serde_json::Result<String> {
        serde_json::to_string(&self.tasks)
    }

    fn human(&self) -> String {
        let (tasks, now) = (&self.tasks, self.now);
        if tasks.is_empty() {
            return format!("No leases had lapsed at {}.\n", format_time(now));
        }
        let rows = tasks
            .iter()
            .map(|t| {
                vec![
                    t.id.clone(),
                    t.state.to_string(),
                    priority(t.priority).to_owned(),
                    roles(&t.candidate_roles),
                ]
            })
            .collect();
        let mut out = table(&["ID", "STATE", "PRIORITY", "ROLES"], rows);
        let _ = writeln!(
            out,
            "Returned {} to the queue: their leases ended at or before {}.",
            count(tasks.len() as u64, "task", "tasks"),
            format_time(now)
        );
        out
    }
}

#[derive(Debug, Args)]
pub struct ExpireOverdue {
    #[command(flatten)]
    sweep: SweepArgs,
}

impl ExpireOverdue {
    pub fn run(&self, cx: &Context, out: &mut dyn Write) -> Result<u8, CliError> {
        let now = self.sweep.now.unwrap_or_else(values::now);
        let tasks = cx.tenant()?.expire_overdue(now, self.sweep.limit)?;
        cx.answer(&Expired { tasks, now }, out)
    }
}

/// What `expire-overdue` acted on.
struct Expired {
    tasks: Vec<Task>,
    now: Timestamp,
}

impl Answer for Expired {
    fn json(&self) -> serde_json::Result<String> {
        serde_json::to_string(&self.tasks)
    }

    fn human(&self) -> String {
        let (tasks, now) = (&self.tasks, self.now);
        if tasks.is_empty() {
            return format!("No task was overdue at {}.\n", format_time(now));
        }
        let rows = tasks
            .iter()
            .map(|t| {
                vec![
                    t.id.clone(),
                    t.state.to_string(),
                    format!("{:?}", t.on_expiry).to_lowercase(),
                    roles(&t.candidate_roles),
                ]
            })
            .collect();
        let mut out = table(&["ID", "STATE", "ON EXPIRY", "ROLES"], rows);
        let _ = writeln!(
            out,
            "Acted on {}: each was due at or before {}.",
            count(tasks.len() as u64, "overdue task", "overdue tasks"),
            format_time(now)
        );
        out
    }
}
