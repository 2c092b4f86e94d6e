//! `leasehold stats`: the tenant's counts and next times together, or one
//! of them by its verb's name (`stats open-count`, `leased-count`,
//! `next-lease-end`, `next-wake`, `pending-count`, as the service's
//! `/v1/stats/…`).
//! This module only asks and reports.

use std::io::Write;

use clap::{Args, Subcommand};
use leasehold_host::Timestamp;
use serde_json::json;

use crate::answer::Answer;
use crate::context::Context;
use crate::error::CliError;
use crate::render::{count, when};
use crate::values;

/// Pending and leased tasks, armed timers, and the next due timer and
/// lease end; or one of them.
#[derive(Debug, Args)]
pub struct Stats {
    #[command(subcommand)]
    one: Option<StatsCommand>,
}

#[derive(Clone, Copy, Debug, Subcommand)]
pub enum StatsCommand {
    /// Pending tasks (claimed ones count)
    OpenCount,
    /// Tasks claimed under a lease, lapsed or not
    LeasedCount,
    /// When the earliest lease of a claimed task ends
    NextLeaseEnd,
    /// When a sweep next has a task's expiry, reminder or escalation step
    /// to act on
    NextWake,
    /// Armed timers
    PendingCount,
}

impl Stats {
    /// The verbs the command calls, by their WIT names.
    pub fn verbs(&self) -> &'static [&'static str] {
        match self.one {
            None => &[
                "open-count",
                "leased-count",
                "next-lease-end",
                "next-wake",
                "pending-count",
                "next-due",
            ],
            Some(StatsCommand::OpenCount) => &["open-count"],
            Some(StatsCommand::LeasedCount) => &["leased-count"],
            Some(StatsCommand::NextLeaseEnd) => &["next-lease-end"],
            Some(StatsCommand::NextWake) => &["next-wake"],
            Some(StatsCommand::PendingCount) => &["pending-count"],
        }
    }

    pub fn run(&self, cx: &Context, out: &mut dyn Write) -> Result<u8, CliError> {
        let t = cx.tenant()?;
        let now = values::now();
        match self.one {
            None => {
                let answer = All {
                    tenant: cx.tenant_name(),
                    open_count: t.open_count()?,
                    leased_count: t.leased_count()?,
                    next_lease_end: t.next_lease_end()?,
                    next_wake: t.next_wake()?,
                    pending_count: t.pending_count()?,
                    next_due: t.next_due()?,
                    now,
                };
                cx.answer(&answer, out)
            }
            Some(StatsCommand::OpenCount) => {
                let n = t.open_count()?;
                cx.answer(&Count(n, "pending task", "pending tasks"), out)
            }
            Some(StatsCommand::LeasedCount) => {
                let n = t.leased_count()?;
                let (one, many) = ("leased claim", "leased claims");
                cx.answer(&Count(n, one, many), out)
            }
            Some(StatsCommand::PendingCount) => {
                let n = t.pending_count()?;
                cx.answer(&Count(n, "armed timer", "armed timers"), out)
            }
            Some(StatsCommand::NextLeaseEnd) => {
                let at = t.next_lease_end()?;
                cx.answer(&NextLeaseEnd { at, now }, out)
            }
            Some(StatsCommand::NextWake) => {
                let at = t.next_wake()?;
                cx.answer(&NextWake { at, now }, out)
            }
        }
    }
}

struct All<'a> {
    tenant: &'a str,
    open_count: u64,
    leased_count: u64,
    next_lease_end: Option<Timestamp>,
    next_wake: Option<Timestamp>,
    pending_count: u64,
    next_due: Option<Timestamp>,
    now: Timestamp,
}

impl Answer for All<'_> {
    fn json(&self) -> serde_json::Result<String> {
        serde_json::to_string(&json!({
            "tenant": self.tenant,
            "open_count": self.open_count,
            "leased_count": self.leased_count,
            "next_lease_end": self.next_lease_end,
            "next_wake": self.next_wake,
            "pending_count": self.pending_count,
            "next_due": self.next_due,
        }))
    }

    fn human(&self) -> String {
        let at = |t: Option<Timestamp>| t.map_or_else(|| "none".to_owned(), |t| when(t, self.now));
        format!(
            "tenant          {}\npending tasks   {}\nleased claims   {}\nnext lease end  {}\nnext wake       {}\narmed timers    {}\nnext due        {}\n",
            self.tenant,
            self.open_count,
            self.leased_count,
            at(self.next_lease_end),
            at(self.next_wake),
            self.pending_count,
            at(self.next_due)
        )
    }
}

/// One count, `{"count": n}` as the service answers it, and what it counts.
struct Count(u64, &'static str, &'static str);

impl Answer for Count {
    fn json(&self) -> serde_json::Result<String> {
        serde_json::to_string(&json!({"count": self.0}))
    }

    fn human(&self) -> String {
        format!("{}.\n", count(self.0, self.1, self.2))
    }
}

/// `{"at": …}` as the service answers it.
struct NextLeaseEnd {
    at: Option<Timestamp>,
    now: Timestamp,
}

impl Answer for NextLeaseEnd {
    fn json(&self) -> serde_json::Result<String> {
        serde_json::to_string(&json!({"at": self.at}))
    }

    fn human(&self) -> String {
        match self.at {
            Some(t) => format!("The next lease ends at {}.\n", when(t, self.now)),
            None => "No task is claimed under a lease.\n".to_owned(),
        }
    }
}

/// `{"at": …}` as the service answers it.
struct NextWake {
    at: Option<Timestamp>,
    now: Timestamp,
}

impl Answer for NextWake {
    fn json(&self) -> serde_json::Result<String> {
        serde_json::to_string(&json!({"at": self.at}))
    }

    fn human(&self) -> String {
        match self.at {
            Some(t) => format!(
                "A sweep next has a task's expiry or step to act on at {}.\n",
                when(t, self.now)
            ),
            None => "No task waits for an expiry, reminder or escalation step.\n".to_owned(),
        }
    }
}
