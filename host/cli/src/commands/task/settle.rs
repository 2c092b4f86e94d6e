//! Deciding a task from the command line: `task settle`, `task escalate`
//! and `task withdraw-run`, each with its call and what it says. Whether a
//! settlement wins is the rules'; this module only asks and reports.

use std::io::Write;
use std::path::PathBuf;

use clap::{Args, ValueEnum};
use leasehold_host::{Decision, Settlement, TaskState};
use serde_json::json;

use crate::answer::Answer;
use crate::commands::task::guard::GuardArgs;
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
    /// nothing changes); recorded as who decided
    #[arg(long, value_name = "A")]
    holder: Option<String>,
    /// The decision's outcome (approved, rejected, ...): checked against
    /// the outcomes the task, or its kind, allows
    #[arg(long, value_name = "NAME")]
    outcome: Option<String>,
    /// Why, in the decider's words (at most 4 KiB)
    #[arg(long, value_name = "TEXT", requires = "outcome")]
    reason: Option<String>,
    /// A JSON file holding the decision's output, checked against the
    /// outcome's schema
    #[arg(long, value_name = "FILE", requires = "outcome")]
    output_file: Option<PathBuf>,
    #[command(flatten)]
    guard: GuardArgs,
}

impl Settle {
    pub fn run(&self, cx: &Context, out: &mut dyn Write) -> Result<u8, CliError> {
        let settlement = self.settlement.into();
        let decision = match &self.outcome {
            Some(outcome) => Some(Decision {
                outcome: outcome.clone(),
                reason: self.reason.clone(),
                output: self.output()?,
            }),
            None => None,
        };
        let settled = self.guard.tenant(cx)?.decide(
            &self.id,
            settlement,
            self.holder.as_deref(),
            decision.as_ref(),
        )?;
        let answer = Settled {
            id: &self.id,
            settlement,
            settled,
            decision: decision.as_ref(),
        };
        cx.answer(&answer, out)
    }

    /// The output file's text, checked to be one JSON document here so a
    /// typo is named by line and column; the engine checks its schema.
    fn output(&self) -> Result<Option<String>, CliError> {
        let Some(path) = &self.output_file else {
            return Ok(None);
        };
        let text = std::fs::read_to_string(path).map_err(|e| {
            CliError::Input(format!("cannot read --output-file {}: {e}", path.display()))
        })?;
        serde_json::from_str::<serde::de::IgnoredAny>(&text).map_err(|e| {
            CliError::Input(format!(
                "--output-file {}: not one JSON document: {e}",
                path.display()
            ))
        })?;
        Ok(Some(text))
    }
}

struct Settled<'a> {
    id: &'a str,
    settlement: Settlement,
    settled: bool,
    decision: Option<&'a Decision>,
}

impl Answer for Settled<'_> {
    fn json(&self) -> serde_json::Result<String> {
        let mut answer =
            json!({"id": self.id, "settlement": self.settlement, "settled": self.settled});
        if let Some(d) = self.decision {
            answer["outcome"] = json!(d.outcome);
        }
        serde_json::to_string(&answer)
    }

    fn human(&self) -> String {
        let id = self.id;
        if self.settled {
            let outcome = self
                .decision
                .map_or_else(String::new, |d| format!(", {}", d.outcome));
            format!("Settled {id} as {}{outcome}.\n", self.settlement.state())
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
    #[command(flatten)]
    guard: GuardArgs,
}

impl Escalate {
    pub fn run(&self, cx: &Context, out: &mut dyn Write) -> Result<u8, CliError> {
        let id = &self.id;
        let task = self.guard.tenant(cx)?.escalate(id)?;
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
