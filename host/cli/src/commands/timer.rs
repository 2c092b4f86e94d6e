//! `leasehold timer …`: durable timers, each command named as the verb it
//! calls (`timer claim-due`, `timer next-due`; `sweep` and `next` are
//! aliases for a release), with its flags, its call and what it says, and
//! the JSON `timer arm` reads. When a timer fires is the rules'; this
//! module only asks and reports. Moving and listing timers are
//! `timer_moves`'.

use std::fmt::Write as _;
use std::io::Write;
use std::path::PathBuf;

use clap::{Args, Subcommand};
use leasehold_host::new_task::time_by_hand;
use leasehold_host::{ArmOutcome, Phase, Timer, Timestamp};
use serde::Deserialize;
use serde_json::json;

use crate::answer::Answer;
use crate::commands::timer_moves::{DueBetween, Reschedule, TimersOf};
use crate::context::Context;
use crate::error::CliError;
use crate::input::{invalid_document, parse, read_source};
use crate::render::{count, table, timer_cells, when};
use crate::values::{self, format_time, parse_lease, parse_limit, parse_time};

#[derive(Debug, Subcommand)]
pub enum TimerCommand {
    /// Arm a timer from JSON (a file, or standard input for - or nothing)
    ///
    /// Required fields: run, effect, fire_at (RFC 3339 or integer
    /// milliseconds). Optional: case, step (default 0), phase
    /// (forward|compensating, default forward). Re-arming an existing
    /// (run, effect) changes nothing.
    Arm(Arm),
    /// Claim the timers due now, each under a lease
    #[command(visible_alias = "sweep")]
    ClaimDue(ClaimDue),
    /// Retire one timer
    Disarm(Disarm),
    /// Retire every timer of a run
    DisarmRun(DisarmRun),
    /// When the next timer becomes claimable
    #[command(visible_alias = "next")]
    NextDue,
    /// Move an armed timer to a new fire time, keeping its identity
    Reschedule(Reschedule),
    /// The timers armed for a run, by effect
    #[command(visible_alias = "list")]
    TimersOf(TimersOf),
    /// The timers that fall due in a window, in the order sweeps take them
    #[command(visible_alias = "due")]
    DueBetween(DueBetween),
}

impl TimerCommand {
    /// The verbs the command calls, by their WIT names.
    pub fn verbs(&self) -> &'static [&'static str] {
        match self {
            TimerCommand::Arm(_) => &["arm"],
            TimerCommand::ClaimDue(_) => &["claim-due"],
            TimerCommand::Disarm(_) => &["disarm"],
            TimerCommand::DisarmRun(_) => &["disarm-run"],
            TimerCommand::NextDue => &["next-due"],
            TimerCommand::Reschedule(_) => &["reschedule"],
            TimerCommand::TimersOf(_) => &["timers-of"],
            TimerCommand::DueBetween(_) => &["due-between"],
        }
    }

    pub fn run(&self, cx: &Context, out: &mut dyn Write) -> Result<u8, CliError> {
        match self {
            TimerCommand::Arm(c) => c.run(cx, out),
            TimerCommand::ClaimDue(c) => c.run(cx, out),
            TimerCommand::Disarm(c) => c.run(cx, out),
            TimerCommand::DisarmRun(c) => c.run(cx, out),
            TimerCommand::Reschedule(c) => c.run(cx, out),
            TimerCommand::TimersOf(c) => c.run(cx, out),
            TimerCommand::DueBetween(c) => c.run(cx, out),
            TimerCommand::NextDue => {
                let answer = NextDue {
                    next_due: cx.tenant()?.next_due()?,
                    now: values::now(),
                };
                cx.answer(&answer, out)
            }
        }
    }
}

/// A timer as `timer arm` reads it: the model's shape (`Timer`), with the
/// obvious defaults left out and times as RFC 3339 text or milliseconds.
/// Unknown fields are refused, so a typo is an error rather than a
/// silently dropped value.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TimerInput {
    run: String,
    #[serde(default)]
    case: Option<String>,
    effect: String,
    #[serde(default)]
    step: u32,
    #[serde(default = "forward")]
    phase: Phase,
    #[serde(deserialize_with = "time_by_hand")]
    fire_at: Timestamp,
}

fn forward() -> Phase {
    Phase::Forward
}

impl From<TimerInput> for Timer {
    fn from(t: TimerInput) -> Self {
        Timer {
            run: t.run,
            case: t.case,
            effect: t.effect,
            step: t.step,
            phase: t.phase,
            fire_at: t.fire_at,
        }
    }
}

#[derive(Debug, Args)]
pub struct Arm {
    /// JSON file holding the timer; - or nothing reads standard input
    #[arg(value_name = "FILE|-")]
    file: Option<PathBuf>,
}

impl Arm {
    pub fn run(&self, cx: &Context, out: &mut dyn Write) -> Result<u8, CliError> {
        let source = read_source(self.file.as_deref(), "a timer")?;
        let timer = Timer::from(parse::<TimerInput>(&source, "a timer")?);
        let outcome = cx
            .tenant()?
            .arm(&timer)
            .map_err(|e| invalid_document(&source, "the timer", e))?;
        cx.answer(&Armed { timer, outcome }, out)
    }
}

struct Armed {
    timer: Timer,
    outcome: ArmOutcome,
}

impl Answer for Armed {
    fn json(&self) -> serde_json::Result<String> {
        let t = &self.timer;
        serde_json::to_string(&json!({"run": t.run, "effect": t.effect, "outcome": self.outcome}))
    }

    fn human(&self) -> String {
        let timer = &self.timer;
        let name = format!("{}/{}", timer.run, timer.effect);
        match self.outcome {
            ArmOutcome::Armed => {
                format!("Armed {name} to fire at {}.\n", format_time(timer.fire_at))
            }
            ArmOutcome::AlreadyArmed => {
                format!("{name} was already armed; the first arming stands unchanged.\n")
            }
            ArmOutcome::RunSealed => {
                format!("Run {} is sealed; {name} was not armed.\n", timer.run)
            }
        }
    }
}

#[derive(Debug, Args)]
pub struct ClaimDue {
    /// The sweep's instant [default: the current clock]
    #[arg(long, value_name = "TIME", value_parser = parse_time, allow_negative_numbers = true)]
    now: Option<Timestamp>,
    /// Most timers to claim (1-1000)
    #[arg(
        long,
        default_value_t = 100,
        value_name = "N",
        value_parser = parse_limit,
        allow_negative_numbers = true
    )]
    limit: u32,
    /// How long the claim holds before another sweep may take the timer
    #[arg(long, default_value = "30s", value_name = "DURATION", value_parser = parse_lease)]
    lease: u32,
}

impl ClaimDue {
    pub fn run(&self, cx: &Context, out: &mut dyn Write) -> Result<u8, CliError> {
        let now = self.now.unwrap_or_else(values::now);
        let timers = cx.tenant()?.claim_due(now, self.limit, self.lease)?;
        let answer = Claimed {
            timers,
            now,
            lease_ms: self.lease,
        };
        cx.answer(&answer, out)
    }
}

struct Claimed {
    timers: Vec<Timer>,
    now: Timestamp,
    lease_ms: u32,
}

impl Answer for Claimed {
    fn json(&self) -> serde_json::Result<String> {
        serde_json::to_string(&self.timers)
    }

    fn human(&self) -> String {
        let (timers, now) = (&self.timers, self.now);
        if timers.is_empty() {
            return format!("No timers due at {}.\n", format_time(now));
        }
        let rows = timers.iter().map(timer_cells).collect();
        let mut out = table(&["RUN", "EFFECT", "STEP", "PHASE", "FIRE AT"], rows);
        let _ = writeln!(
            out,
            "Claimed {}, leased until {}; disarm each once its effect is done.",
            count(timers.len() as u64, "timer", "timers"),
            format_time(now.saturating_add(i64::from(self.lease_ms)))
        );
        out
    }
}

#[derive(Debug, Args)]
pub struct Disarm {
    run: String,
    effect: String,
}

impl Disarm {
    pub fn run(&self, cx: &Context, out: &mut dyn Write) -> Result<u8, CliError> {
        let existed = cx.tenant()?.disarm(&self.run, &self.effect)?;
        let answer = Disarmed {
            run: &self.run,
            effect: &self.effect,
            existed,
        };
        cx.answer(&answer, out)
    }
}

struct Disarmed<'a> {
    run: &'a str,
    effect: &'a str,
    existed: bool,
}

impl Answer for Disarmed<'_> {
    fn json(&self) -> serde_json::Result<String> {
        serde_json::to_string(
            &json!({"run": self.run, "effect": self.effect, "disarmed": self.existed}),
        )
    }

    fn human(&self) -> String {
        let (run, effect) = (self.run, self.effect);
        if self.existed {
            format!("Disarmed {run}/{effect}.\n")
        } else {
            format!("No timer {run}/{effect} was armed; nothing changed.\n")
        }
    }
}

#[derive(Debug, Args)]
pub struct DisarmRun {
    run: String,
}

impl DisarmRun {
    pub fn run(&self, cx: &Context, out: &mut dyn Write) -> Result<u8, CliError> {
        let disarmed = cx.tenant()?.disarm_run(&self.run)?;
        let answer = DisarmedRun {
            run: &self.run,
            disarmed,
        };
        cx.answer(&answer, out)
    }
}

struct DisarmedRun<'a> {
    run: &'a str,
    disarmed: u32,
}

impl Answer for DisarmedRun<'_> {
    fn json(&self) -> serde_json::Result<String> {
        serde_json::to_string(&json!({"run": self.run, "disarmed": self.disarmed}))
    }

    fn human(&self) -> String {
        format!(
            "Disarmed {} of run {}.\n",
            count(u64::from(self.disarmed), "timer", "timers"),
            self.run
        )
    }
}

struct NextDue {
    next_due: Option<Timestamp>,
    now: Timestamp,
}

impl Answer for NextDue {
    fn json(&self) -> serde_json::Result<String> {
        serde_json::to_string(&json!({"next_due": self.next_due}))
    }

    fn human(&self) -> String {
        match self.next_due {
            Some(t) => format!("Next timer due at {}.\n", when(t, self.now)),
            None => "No timers are armed.\n".to_owned(),
        }
    }
}
