//! The lists of tasks: `queue` (what an actor with these roles may claim,
//! urgent first), `held` (what an actor holds, soonest lease end first),
//! `overdue` (past due, awaiting expiry) and `for-case`
//! (`case` until the next release: every task of a case), each with its
//! flags, its call and its table. Who may see what is the rules'; this
//! module only asks and lays the answers out.

use std::fmt::Write as _;
use std::io::Write;

use clap::Args;
use leasehold_host::{Page, QueueQuery, Task, Timestamp};

use crate::answer::Answer;
use crate::context::Context;
use crate::error::CliError;
use crate::render::{count, on_expiry, priority, roles, table};
use crate::values::{self, format_time, parse_limit, parse_time, relative};

/// A page size, 20 unless given.
#[derive(Debug, Args)]
pub struct PageArgs {
    /// Most tasks on this page (1-1000)
    #[arg(
        long,
        default_value_t = 20,
        value_name = "N",
        value_parser = parse_limit,
        allow_negative_numbers = true
    )]
    pub limit: u32,
    /// Continue after this cursor, as printed by the previous page
    #[arg(long, value_name = "CURSOR")]
    pub after: Option<String>,
}

#[derive(Debug, Args)]
pub struct Queue {
    /// The caller's roles (repeat, or list several after one --role); with
    /// none, only tasks open to anyone are shown
    #[arg(long = "role", value_name = "R", num_args = 1..)]
    roles: Vec<String>,
    /// Hide tasks that exclude this actor
    #[arg(long, value_name = "A")]
    actor: Option<String>,
    #[command(flatten)]
    page: PageArgs,
}

impl Queue {
    pub fn run(&self, cx: &Context, out: &mut dyn Write) -> Result<u8, CliError> {
        let query = QueueQuery {
            roles: self.roles.clone(),
            actor: self.actor.clone(),
            limit: self.page.limit,
            after: self.page.after.clone(),
        };
        let page = cx.tenant()?.queue(&query)?;
        let who = match &self.actor {
            Some(a) => format!("{a} with roles {}", roles(&self.roles)),
            None => format!("roles {}", roles(&self.roles)),
        };
        let more = if self.page.after.is_some() {
            " more"
        } else {
            ""
        };
        let answer = Tasks {
            page,
            empty: format!("No{more} queued tasks for {who}."),
        };
        cx.answer(&answer, out)
    }
}

#[derive(Debug, Args)]
pub struct Held {
    /// The actor whose tasks to list
    actor: String,
    #[command(flatten)]
    page: PageArgs,
}

impl Held {
    pub fn run(&self, cx: &Context, out: &mut dyn Write) -> Result<u8, CliError> {
        let actor = &self.actor;
        let page = cx
            .tenant()?
            .held(actor, self.page.limit, self.page.after.as_deref())?;
        let empty = match self.page.after {
            Some(_) => format!("{actor} holds no more tasks after that cursor."),
            None => format!("{actor} holds no tasks."),
        };
        cx.answer(&Tasks { page, empty }, out)
    }
}

#[derive(Debug, Args)]
pub struct ForCase {
    case: String,
    #[command(flatten)]
    page: PageArgs,
}

impl ForCase {
    pub fn run(&self, cx: &Context, out: &mut dyn Write) -> Result<u8, CliError> {
        let case = &self.case;
        let page = cx
            .tenant()?
            .for_case(case, self.page.limit, self.page.after.as_deref())?;
        let empty = match self.page.after {
            Some(_) => format!("Case {case} has no more tasks after that cursor."),
            None => format!("Case {case} has no tasks."),
        };
        cx.answer(&Tasks { page, empty }, out)
    }
}

/// A page of tasks, with the sentence to print when it is empty.
struct Tasks {
    page: Page,
    empty: String,
}

const TASK_COLUMNS: [&str; 8] = [
    "ID",
    "PRIORITY",
    "STATE",
    "KIND",
    "ROLES",
    "HOLDER",
    "LEASE UNTIL",
    "DUE",
];

impl Answer for Tasks {
    fn json(&self) -> serde_json::Result<String> {
        serde_json::to_string(&self.page)
    }

    fn human(&self) -> String {
        let page = &self.page;
        if page.tasks.is_empty() {
            return format!("{}\n", self.empty);
        }
        let rows = page
            .tasks
            .iter()
            .map(|t| {
                vec![
                    t.id.clone(),
                    priority(t.priority).to_owned(),
                    t.state.to_string(),
                    t.kind.clone(),
                    roles(&t.candidate_roles),
                    t.assignee.clone().unwrap_or_else(|| "-".into()),
                    t.lease_until.map_or_else(|| "-".into(), format_time),
                    t.due_at.map_or_else(|| "-".into(), format_time),
                ]
            })
            .collect();
        let mut out = table(&TASK_COLUMNS, rows);
        match &page.next {
            Some(cursor) => {
                let _ = writeln!(out, "More follow: --after {cursor}");
            }
            None => {
                let _ = writeln!(out, "{}.", count(page.tasks.len() as u64, "task", "tasks"));
            }
        }
        out
    }
}

#[derive(Debug, Args)]
pub struct Overdue {
    /// The instant to compare due times with [default: the current clock]
    #[arg(long, value_name = "TIME", value_parser = parse_time, allow_negative_numbers = true)]
    now: Option<Timestamp>,
    /// Most tasks to list (1-1000)
    #[arg(
        long,
        default_value_t = 20,
        value_name = "N",
        value_parser = parse_limit,
        allow_negative_numbers = true
    )]
    limit: u32,
}

impl Overdue {
    pub fn run(&self, cx: &Context, out: &mut dyn Write) -> Result<u8, CliError> {
        let now = self.now.unwrap_or_else(values::now);
        let tasks = cx.tenant()?.overdue(now, self.limit)?;
        cx.answer(&OverdueTasks { tasks, now }, out)
    }
}

struct OverdueTasks {
    tasks: Vec<Task>,
    now: Timestamp,
}

impl Answer for OverdueTasks {
    fn json(&self) -> serde_json::Result<String> {
        serde_json::to_string(&self.tasks)
    }

    fn human(&self) -> String {
        let (tasks, now) = (&self.tasks, self.now);
        if tasks.is_empty() {
            return format!("Nothing is overdue at {}.\n", format_time(now));
        }
        let rows = tasks
            .iter()
            .map(|t| {
                let due = t.due_at.unwrap_or(now);
                vec![
                    t.id.clone(),
                    t.state.to_string(),
                    t.assignee.clone().unwrap_or_else(|| "-".into()),
                    format_time(due),
                    relative(due, now),
                    on_expiry(t.on_expiry).to_owned(),
                ]
            })
            .collect();
        let mut out = table(&["ID", "STATE", "HOLDER", "DUE", "", "ON EXPIRY"], rows);
        let _ = writeln!(
            out,
            "{} overdue at {}.",
            count(tasks.len() as u64, "task", "tasks"),
            format_time(now)
        );
        out
    }
}
