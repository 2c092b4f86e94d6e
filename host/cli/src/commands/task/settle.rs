//! Deciding a task from the command line: `task settle`, `task escalate`
//! and `task withdraw-run`, each with its call and what it says. Whether a
//! settlement wins is the rules'; this module only asks and reports.

use std::io::Write;

use clap::{Args, ValueEnum};
use leasehold_host::{Settlement, TaskState};
use serde_json::json;

use crate::answer::Answer;
use crate::commands::task::shown::Shown;
use crate::context::Context;
use crate::error::CliError;
use crate::render::{count, roles};

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum SettlementArg {
    Completed,
    Expired,
    Withdrawn,
}

impl From<SettlementArg> for Settlement {
    fn from(s: SettlementArg) -> Self {
        match s {
            SettlementArg::Completed => Settlement::Completed,
            SettlementArg::Expired => Settlement::Expired,
            SettlementArg::Withdrawn => Settlement::Withdrawn,
        }
    }
}

#[derive(Debug, Args)]
pub struct Settle {
    id: String,
    #[arg(value_enum)]
    settlement: SettlementArg,
    /// Settle only if this actor holds the task now (else refused, and
    /// nothing changes)
    #[arg(long, value_name = "A")]
    holder: Option<String>,
}

impl Settle {
    pub fn run(&self, cx: &Context, out: &mut dyn Write) -> Result<u8, CliError> {
        let settlement = self.settlement.into();
        let settled = cx
            .tenant()?
            .settle(&self.id, settlement, self.holder.as_deref())?;
        let answer = Settled {
            id: &self.id,
            settlement,
            settled,
        };
        cx.answer(&answer, out)
    }
}

struct Settled<'a> {
    id: &'a str,
    settlement: Settlement,
    settled: bool,
}

impl Answer for Settled<'_> {
    fn json(&self) -> serde_json::Result<String> {
        serde_json::to_string(
            &json!({"id": self.id, "settlement": self.settlement, "settled": self.settled}),
        )
    }

    fn human(&self) -> String {
        let id = self.id;
        if self.settled {
            format!("Settled {id} as {}.\n", self.settlement.state())
        } else {
            format!(
                "{id} was already settled; it is left as it stands (the first settlement wins).\n"
            )
        }
    }
}

#[derive(Debug, Args)]
pub struct Escalate {
    id: String,
}

impl Escalate {
    pub fn run(&self, cx: &Context, out: &mut dyn Write) -> Result<u8, CliError> {
        let id = &self.id;
        let task = cx.tenant()?.escalate(id)?;
        let headline = if task.state == TaskState::Escalated {
            format!(
                "Escalated {id}: no one holds it, and it is offered to {}.",
                roles(&task.candidate_roles)
            )
        } else {
            format!(
                "{id} is already {}; escalation left it as it stands.",
                task.state
            )
        };
        cx.answer(&Shown { task, headline }, out)
    }
}

#[derive(Debug, Args)]
pub struct WithdrawRun {
    run: String,
    #[arg(required = true, value_name = "ID")]
    ids: Vec<String>,
}

impl WithdrawRun {
    pub fn run(&self, cx: &Context, out: &mut dyn Write) -> Result<u8, CliError> {
        let ids: Vec<&str> = self.ids.iter().map(String::as_str).collect();
        let withdrawn = cx.tenant()?.withdraw_run(&self.run, &ids)?;
        let answer = Withdrawn {
            run: &self.run,
            withdrawn,
        };
        cx.answer(&answer, out)
    }
}

struct Withdrawn<'a> {
    run: &'a str,
    withdrawn: u32,
}

impl Answer for Withdrawn<'_> {
    fn json(&self) -> serde_json::Result<String> {
        serde_json::to_string(&json!({"run": self.run, "withdrawn": self.withdrawn}))
    }

    fn human(&self) -> String {
        format!(
            "Withdrew {} of run {}.\n",
            count(u64::from(self.withdrawn), "pending task", "pending tasks"),
            self.run
        )
    }
}
