//! `leasehold timer reschedule`, `timer timers-of` (`timer list`) and
//! `timer due-between` (`timer due`): moving a timer and listing timers.
//! Whether a move is allowed is the rules'; this module asks, reports, and
//! turns a refused move into a refusal's exit code.

use std::fmt::Write as _;
use std::io::Write;

use clap::Args;
use leasehold_host::{Rescheduled, TimerInfo, TimerPage, Timestamp};
use serde_json::json;

use crate::answer::Answer;
use crate::commands::queue::PageArgs;
use crate::context::Context;
use crate::error::CliError;
use crate::render::{table, timer_cells};
use crate::values::{format_time, parse_time};

#[derive(Debug, Args)]
pub struct Reschedule {
    run: String,
    effect: String,
    /// The new fire time (RFC 3339, or milliseconds since the epoch)
    #[arg(long, value_name = "TIME", value_parser = parse_time, allow_negative_numbers = true)]
    at: Timestamp,
    /// Move it even while a sweeper holds it, ending that lease
    #[arg(long)]
    take_back: bool,
}

impl Reschedule {
    pub fn run(&self, cx: &Context, out: &mut dyn Write) -> Result<u8, CliError> {
        let (run, effect) = (&self.run, &self.effect);
        let refused = |error: &'static str, message: String| CliError::Refused {
            error,
            message,
            detail: Some(format!("{run}/{effect}")),
        };
        match cx
            .tenant()?
            .reschedule(run, effect, self.at, self.take_back)?
        {
            Rescheduled::Moved(info) => cx.answer(&Moved(info), out),
            Rescheduled::NotFound => Err(refused(
                "not_found",
                format!("no timer {run}/{effect} is armed; nothing changed"),
            )),
            Rescheduled::Held(until) => Err(refused(
                "timer_held",
                format!(
                    "a sweeper holds {run}/{effect} until {}; --take-back moves it anyway",
                    format_time(until)
                ),
            )),
            Rescheduled::RunSealed => Err(refused(
                "run_sealed",
                format!("run {run} is sealed; {run}/{effect} was not moved"),
            )),
            other => Err(CliError::Failed(format!(
                "reschedule answered what this build does not know: {other:?}"
            ))),
        }
    }
}

struct Moved(TimerInfo);

impl Answer for Moved {
    fn json(&self) -> serde_json::Result<String> {
        serde_json::to_string(&self.0)
    }

    fn human(&self) -> String {
        let t = &self.0.timer;
        format!(
            "Moved {}/{} to fire at {}.\n",
            t.run,
            t.effect,
            format_time(t.fire_at)
        )
    }
}

#[derive(Debug, Args)]
pub struct TimersOf {
    /// The run whose timers to list
    run: String,
    #[command(flatten)]
    page: PageArgs,
}

impl TimersOf {
    pub fn run(&self, cx: &Context, out: &mut dyn Write) -> Result<u8, CliError> {
        let page =
            cx.tenant()?
                .timers_of(&self.run, self.page.limit, self.page.after.as_deref())?;
        let empty = format!("Run {} has no timers armed.", self.run);
        cx.answer(&Listed { page, empty }, out)
    }
}

#[derive(Debug, Args)]
pub struct DueBetween {
    /// The window's start, in it (RFC 3339, or milliseconds since the epoch)
    #[arg(long, value_name = "TIME", value_parser = parse_time, allow_negative_numbers = true)]
    from: Timestamp,
    /// The window's end, not in it
    #[arg(long, value_name = "TIME", value_parser = parse_time, allow_negative_numbers = true)]
    to: Timestamp,
    #[command(flatten)]
    page: PageArgs,
}

impl DueBetween {
    pub fn run(&self, cx: &Context, out: &mut dyn Write) -> Result<u8, CliError> {
        let page = cx.tenant()?.due_between(
            self.from,
            self.to,
            self.page.limit,
            self.page.after.as_deref(),
        )?;
        let empty = format!(
            "No timers fall due from {} to {}.",
            format_time(self.from),
            format_time(self.to)
        );
        cx.answer(&Listed { page, empty }, out)
    }
}

struct Listed {
    page: TimerPage,
    empty: String,
}

impl Answer for Listed {
    fn json(&self) -> serde_json::Result<String> {
        serde_json::to_string(&json!({"timers": self.page.timers, "next": self.page.next}))
    }

    fn human(&self) -> String {
        if self.page.timers.is_empty() {
            return format!("{}\n", self.empty);
        }
        let rows = self
            .page
            .timers
            .iter()
            .map(|i| {
                let mut cells = timer_cells(&i.timer);
                cells.push(i.lease_until.map_or_else(|| "-".to_owned(), format_time));
                cells
            })
            .collect();
        let mut out = table(
            &["RUN", "EFFECT", "STEP", "PHASE", "FIRE AT", "HELD UNTIL"],
            rows,
        );
        if let Some(next) = &self.page.next {
            let _ = writeln!(out, "More follow: --after {next}");
        }
        out
    }
}
