//! `leasehold run …`: a workflow run's end, each command named as the verb
//! it calls (`run seal`, `run is-sealed`; `sealed` is an alias for a
//! release). This module only asks and reports.

use std::io::Write;

use clap::{Args, Subcommand};
use leasehold_host::SealOutcome;
use serde_json::json;

use crate::answer::Answer;
use crate::context::Context;
use crate::error::CliError;
use crate::render::count;

#[derive(Debug, Subcommand)]
pub enum RunCommand {
    /// Seal a run: retire its timers and withdraw its pending awaited tasks
    Seal(Seal),
    /// Whether a run is sealed
    #[command(visible_alias = "sealed")]
    IsSealed(IsSealed),
}

impl RunCommand {
    /// The verbs the command calls, by their WIT names.
    pub fn verbs(&self) -> &'static [&'static str] {
        match self {
            RunCommand::Seal(_) => &["seal"],
            RunCommand::IsSealed(_) => &["is-sealed"],
        }
    }

    pub fn run(&self, cx: &Context, out: &mut dyn Write) -> Result<u8, CliError> {
        match self {
            RunCommand::Seal(c) => c.run(cx, out),
            RunCommand::IsSealed(c) => c.run(cx, out),
        }
    }
}

#[derive(Debug, Args)]
pub struct Seal {
    run: String,
    /// Tasks the run awaits, withdrawn if still pending
    #[arg(long = "awaited", value_name = "ID", num_args = 1..)]
    awaited: Vec<String>,
}

impl Seal {
    pub fn run(&self, cx: &Context, out: &mut dyn Write) -> Result<u8, CliError> {
        let awaited: Vec<&str> = self.awaited.iter().map(String::as_str).collect();
        let outcome = cx.tenant()?.seal(&self.run, &awaited)?;
        let answer = Sealed {
            run: &self.run,
            outcome,
        };
        cx.answer(&answer, out)
    }
}

struct Sealed<'a> {
    run: &'a str,
    outcome: SealOutcome,
}

impl Answer for Sealed<'_> {
    fn json(&self) -> serde_json::Result<String> {
        serde_json::to_string(&json!({
            "run": self.run,
            "timers_disarmed": self.outcome.timers_disarmed,
            "tasks_withdrawn": self.outcome.tasks_withdrawn,
        }))
    }

    fn human(&self) -> String {
        format!(
            "Sealed run {}: {} retired, {} withdrawn.\n",
            self.run,
            count(u64::from(self.outcome.timers_disarmed), "timer", "timers"),
            count(u64::from(self.outcome.tasks_withdrawn), "task", "tasks"),
        )
    }
}

#[derive(Debug, Args)]
pub struct IsSealed {
    run: String,
}

impl IsSealed {
    pub fn run(&self, cx: &Context, out: &mut dyn Write) -> Result<u8, CliError> {
        let sealed = cx.tenant()?.is_sealed(&self.run)?;
        cx.answer(
            &RunSealed {
                run: &self.run,
                sealed,
            },
            out,
        )
    }
}

struct RunSealed<'a> {
    run: &'a str,
    sealed: bool,
}

impl Answer for RunSealed<'_> {
    fn json(&self) -> serde_json::Result<String> {
        serde_json::to_string(&json!({"run": self.run, "sealed": self.sealed}))
    }

    fn human(&self) -> String {
        if self.sealed {
            format!("Run {} is sealed.\n", self.run)
        } else {
            format!("Run {} is not sealed.\n", self.run)
        }
    }
}
