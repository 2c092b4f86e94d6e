//! The claim ladder from the command line: `task claim`, `claim-next`,
//! `renew`, `release` and `take-over`, each with its flags, its call and
//! what it says. Who may claim is the rules' to decide; this module only
//! asks and reports, and reads the clock for a lease's start.

use std::io::Write;

use clap::Args;
use leasehold_host::{Lease, QueueQuery, Task, Timestamp};
use serde_json::json;

use crate::answer::Answer;
use crate::commands::task::guard::GuardArgs;
use crate::commands::task::shown::{Shown, block, holds};
use crate::context::Context;
use crate::error::CliError;
use crate::render::roles;
use crate::values::{self, format_time, parse_lease, parse_time};

/// A claim's optional lease.
#[derive(Clone, Copy, Debug, Args)]
pub struct LeaseArgs {
    /// Hold the task for this long, unless renewed (`task renew`); without
    /// it the claim holds until released
    #[arg(long, value_name = "DURATION", value_parser = parse_lease)]
    lease: Option<u32>,
    /// When the lease starts [default: the current clock]
    #[arg(
        long,
        value_name = "TIME",
        value_parser = parse_time,
        allow_negative_numbers = true,
        requires = "lease"
    )]
    now: Option<Timestamp>,
}

impl LeaseArgs {
    /// The lease, starting at `--now` or else at the clock.
    pub fn lease(self) -> Option<Lease> {
        self.lease.map(|lease_ms| Lease {
            now: self.now.unwrap_or_else(values::now),
            lease_ms,
        })
    }
}

fn strs(list: &[String]) -> Vec<&str> {
    list.iter().map(String::as_str).collect()
}

#[derive(Debug, Args)]
pub struct Claim {
    id: String,
    #[arg(long, value_name = "A")]
    actor: String,
    /// The actor's roles (repeat, or list several after one --role)
    #[arg(long = "role", value_name = "R", num_args = 1..)]
    roles: Vec<String>,
    #[command(flatten)]
    lease: LeaseArgs,
    #[command(flatten)]
    guard: GuardArgs,
}

impl Claim {
    pub fn run(&self, cx: &Context, out: &mut dyn Write) -> Result<u8, CliError> {
        let task = self.guard.tenant(cx)?.claim(
            &self.id,
            &self.actor,
            &strs(&self.roles),
            self.lease.lease(),
        )?;
        let shown = Shown {
            headline: holds(&self.actor, &task),
            task,
        };
        cx.answer(&shown, out)
    }
}

#[derive(Debug, Args)]
pub struct ClaimNext {
    #[arg(long, value_name = "A")]
    actor: String,
    /// The actor's roles (repeat, or list several after one --role)
    #[arg(long = "role", value_name = "R", num_args = 1..)]
    roles: Vec<String>,
    #[command(flatten)]
    lease: LeaseArgs,
}

impl ClaimNext {
    pub fn run(&self, cx: &Context, out: &mut dyn Write) -> Result<u8, CliError> {
        let query = QueueQuery {
            roles: self.roles.clone(),
            actor: Some(self.actor.clone()),
            limit: 1,
            after: None,
        };
        let task = cx.tenant()?.claim_next(&query, self.lease.lease())?;
        let answer = ClaimedNext {
            actor: &self.actor,
            roles: &self.roles,
            task,
        };
        cx.answer(&answer, out)
    }
}

/// What `claim-next` took for `actor`, if the queue held anything.
struct ClaimedNext<'a> {
    actor: &'a str,
    roles: &'a [String],
    task: Option<Task>,
}

impl Answer for ClaimedNext<'_> {
    fn json(&self) -> serde_json::Result<String> {
        serde_json::to_string(&self.task)
    }

    fn human(&self) -> String {
        let actor = self.actor;
        match &self.task {
            Some(task) => {
                let until = match task.lease_until {
                    Some(t) => format!("until {}", format_time(t)),
                    None => "until released".to_owned(),
                };
                format!(
                    "{actor} holds {}, the first task of the queue, {until}.\n{}",
                    task.id,
                    block(task)
                )
            }
            None => format!(
                "No queued tasks for {actor} with roles {}; nothing was claimed.\n",
                roles(self.roles)
            ),
        }
    }
}

#[derive(Debug, Args)]
pub struct Renew {
    id: String,
    #[arg(long, value_name = "A")]
    actor: String,
    /// How long from now the lease holds
    #[arg(long, value_name = "DURATION", value_parser = parse_lease)]
    lease: u32,
    /// When the new lease starts [default: the current clock]
    #[arg(long, value_name = "TIME", value_parser = parse_time, allow_negative_numbers = true)]
    now: Option<Timestamp>,
    #[command(flatten)]
    guard: GuardArgs,
}

impl Renew {
    pub fn run(&self, cx: &Context, out: &mut dyn Write) -> Result<u8, CliError> {
        let now = self.now.unwrap_or_else(values::now);
        let task = self
            .guard
            .tenant(cx)?
            .renew(&self.id, &self.actor, now, self.lease)?;
        let shown = Shown {
            headline: holds(&self.actor, &task),
            task,
        };
        cx.answer(&shown, out)
    }
}

#[derive(Debug, Args)]
pub struct Release {
    id: String,
    #[arg(long, value_name = "A")]
    actor: String,
    #[command(flatten)]
    guard: GuardArgs,
}

impl Release {
    pub fn run(&self, cx: &Context, out: &mut dyn Write) -> Result<u8, CliError> {
        self.guard.tenant(cx)?.release(&self.id, &self.actor)?;
        cx.answer(self, out)
    }
}

impl Answer for Release {
    fn json(&self) -> serde_json::Result<String> {
        serde_json::to_string(&json!({"id": self.id, "actor": self.actor, "released": true}))
    }

    fn human(&self) -> String {
        format!(
            "{} released {}; it is back in the queue.\n",
            self.actor, self.id
        )
    }
}

#[derive(Debug, Args)]
pub struct TakeOver {
    id: String,
    /// Who must hold the task now (compare-and-swap)
    #[arg(long, value_name = "B")]
    from: String,
    #[arg(long, value_name = "A")]
    actor: String,
    /// The new holder's roles (repeat, or list several after one --role)
    #[arg(long = "role", value_name = "R", num_args = 1..)]
    roles: Vec<String>,
    #[command(flatten)]
    lease: LeaseArgs,
    #[command(flatten)]
    guard: GuardArgs,
}

impl TakeOver {
    pub fn run(&self, cx: &Context, out: &mut dyn Write) -> Result<u8, CliError> {
        let task = self.guard.tenant(cx)?.take_over(
            &self.id,
            &self.from,
            &self.actor,
            &strs(&self.roles),
            self.lease.lease(),
        )?;
        let shown = Shown {
            headline: format!("{} took {} over from {}.", self.actor, self.id, self.from),
            task,
        };
        cx.answer(&shown, out)
    }
}
