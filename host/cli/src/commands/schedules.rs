//! `leasehold schedule …`: recurring schedules, whose occurrences are
//! timers of one run (`add-schedule` from flags, `remove-schedule`,
//! `pause-schedule`, `resume-schedule`, `trigger-schedule`,
//! `next-occurrences`, `get-schedule`, `list-schedules`, `tz-version`; `add`,
//! `remove`, `pause`, `resume`, `trigger`, `next`, `get` and `list` for
//! short). Whether a spec is valid and when it fires are the rules'; this
//! module reads the flags, asks with the clock's `now`, and reports: under
//! `--json` a schedule as the HTTP API spells it, for a person its instants
//! in UTC and in the schedule's zone (`schedule_answers`).

use std::io::Write;

use clap::{Args, Subcommand, ValueEnum};
use leasehold_host::{
    CatchUp, Error, GapPolicy, Overlap, Phase, RepeatPolicy, Rule, ScheduleDef, ScheduleSpec,
    StoreError, Timestamp,
};

use crate::commands::queue::PageArgs;
use crate::commands::schedule_answers::{Listed, One, Removed, Triggered, TzVersion, Upcoming};
use crate::context::Context;
use crate::error::CliError;
use crate::values::{self, parse_time};

#[derive(Debug, Subcommand)]
pub enum ScheduleCommand {
    /// Add a schedule and arm its first occurrence from now: a cron
    /// expression (--cron) or an interval (--every-ms) read in --zone
    #[command(name = "add-schedule", visible_alias = "add")]
    AddSchedule(Box<AddSchedule>),
    /// Remove a schedule with its armed and waiting occurrences
    #[command(name = "remove-schedule", visible_alias = "remove")]
    RemoveSchedule(Named),
    /// Pause a schedule with a note: nothing fires until it is resumed
    #[command(name = "pause-schedule", visible_alias = "pause")]
    PauseSchedule(Pause),
    /// Resume a paused schedule from now; what fell in the pause does not
    /// fire
    #[command(name = "resume-schedule", visible_alias = "resume")]
    ResumeSchedule(Named),
    /// Arm an extra occurrence now, beside the schedule's own, and show its
    /// timer
    #[command(name = "trigger-schedule", visible_alias = "trigger")]
    TriggerSchedule(Named),
    /// A schedule's next occurrences (before jitter), in UTC and its zone
    #[command(name = "next-occurrences", visible_alias = "next")]
    NextOccurrences(Next),
    /// Show a schedule
    #[command(name = "get-schedule", visible_alias = "get")]
    GetSchedule(Named),
    /// The tenant's schedules, by id
    #[command(name = "list-schedules", visible_alias = "list")]
    ListSchedules(PageArgs),
    /// The IANA time-zone database every schedule's instants come from
    #[command(name = "tz-version")]
    TzVersion,
}

impl ScheduleCommand {
    /// The verbs the command calls, by their WIT names.
    pub fn verbs(&self) -> &'static [&'static str] {
        match self {
            ScheduleCommand::AddSchedule(_) => &["add-schedule"],
            ScheduleCommand::RemoveSchedule(_) => &["remove-schedule"],
            ScheduleCommand::PauseSchedule(_) => &["pause-schedule"],
            ScheduleCommand::ResumeSchedule(_) => &["resume-schedule"],
            ScheduleCommand::TriggerSchedule(_) => &["trigger-schedule"],
            ScheduleCommand::NextOccurrences(_) => &["next-occurrences", "get-schedule"],
            ScheduleCommand::GetSchedule(_) => &["get-schedule"],
            ScheduleCommand::ListSchedules(_) => &["list-schedules"],
            ScheduleCommand::TzVersion => &["tz-version"],
        }
    }

    pub fn run(&self, cx: &Context, out: &mut dyn Write) -> Result<u8, CliError> {
        match self {
            ScheduleCommand::AddSchedule(c) => {
                let def = c.def()?;
                let added = cx.tenant()?.add_schedule(&def, values::now())?;
                cx.answer(&One(added), out)
            }
            ScheduleCommand::RemoveSchedule(c) => {
                let removed = cx.tenant()?.remove_schedule(&c.id)?;
                cx.answer(&Removed { id: &c.id, removed }, out)
            }
            ScheduleCommand::PauseSchedule(c) => {
                let paused = cx
                    .tenant()?
                    .pause_schedule(&c.id, &c.note)
                    .map_err(|e| absent(e, &c.id))?;
                cx.answer(&One(paused), out)
            }
            ScheduleCommand::ResumeSchedule(c) => {
                let resumed = cx
                    .tenant()?
                    .resume_schedule(&c.id, values::now())
                    .map_err(|e| absent(e, &c.id))?;
                cx.answer(&One(resumed), out)
            }
            ScheduleCommand::TriggerSchedule(c) => {
                let timer = cx
                    .tenant()?
                    .trigger_schedule(&c.id, values::now())
                    .map_err(|e| absent(e, &c.id))?;
                cx.answer(&Triggered { id: &c.id, timer }, out)
            }
            ScheduleCommand::NextOccurrences(c) => {
                let tenant = cx.tenant()?;
                let after = c.after.unwrap_or_else(values::now);
                let occurrences = tenant
                    .next_occurrences(&c.id, after, c.n)
                    .map_err(|e| absent(e, &c.id))?;
                // The zone, for a person's reading of each instant.
                let zone = tenant.get_schedule(&c.id)?.map(|s| s.def.spec);
                cx.answer(
                    &Upcoming {
                        id: &c.id,
                        zone,
                        occurrences,
                    },
                    out,
                )
            }
            ScheduleCommand::GetSchedule(c) => match cx.tenant()?.get_schedule(&c.id)? {
                Some(s) => cx.answer(&One(s), out),
                None => Err(missing(&c.id)),
            },
            ScheduleCommand::ListSchedules(p) => {
                let page = cx.tenant()?.list_schedules(p.limit, p.after.as_deref())?;
                cx.answer(&Listed(page), out)
            }
            ScheduleCommand::TzVersion => {
                let version = cx.tenant()?.tz_version()?;
                cx.answer(&TzVersion(version), out)
            }
        }
    }
}

/// No such schedule: a refusal naming it, nothing written.
fn missing(id: &str) -> CliError {
    CliError::Refused {
        error: "not_found",
        message: format!("no schedule {id}; nothing changed"),
        detail: Some(id.to_owned()),
    }
}

/// The engine's not-found, said as a schedule's.
fn absent(e: Error, id: &str) -> CliError {
    match e {
        Error::Store(StoreError::NotFound(_)) => missing(id),
        e => CliError::Engine(e),
    }
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum GapFlag {
    ShiftForward,
    Skip,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum RepeatFlag {
    First,
    Both,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum OverlapFlag {
    Skip,
    BufferOne,
    BufferAll,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum PhaseFlag {
    Forward,
    Compensating,
}

/// `all-within:MS`, `latest-within:MS` or `none`.
fn parse_catch_up(text: &str) -> Result<CatchUp, String> {
    let forms = "all-within:MS, latest-within:MS or none";
    if text == "none" {
        return Ok(CatchUp::None);
    }
    let (kind, ms) = text
        .split_once(':')
        .ok_or_else(|| format!("{text:?} is not {forms}"))?;
    let window_ms: u64 = ms
        .trim()
        .parse()
        .map_err(|_| format!("{ms:?} is not a whole number of milliseconds"))?;
    match kind {
        "all-within" => Ok(CatchUp::AllWithinWindow { window_ms }),
        "latest-within" => Ok(CatchUp::Latest { window_ms }),
        _ => Err(format!("{text:?} is not {forms}")),
    }
}

#[derive(Debug, Args)]
#[command(group = clap::ArgGroup::new("recurrence").required(true).args(["cron", "every_ms"]))]
pub struct AddSchedule {
    /// The schedule's id (at most 200 characters)
    #[arg(long)]
    id: String,
    /// The run whose timers its occurrences are
    #[arg(long)]
    run: String,
    /// A cron expression: five fields (minute hour day-of-month month
    /// day-of-week), six with seconds first, or @daily and the like
    #[arg(long, value_name = "EXPR")]
    cron: Option<String>,
    /// An interval in milliseconds, from --anchor
    #[arg(long, value_name = "MS")]
    every_ms: Option<u64>,
    /// An interval's first occurrence (RFC 3339, or milliseconds since the
    /// epoch); default now
    #[arg(long, value_name = "TIME", value_parser = parse_time, allow_negative_numbers = true, requires = "every_ms")]
    anchor: Option<Timestamp>,
    /// The IANA time zone a cron expression is read in
    #[arg(long, default_value = "UTC")]
    zone: String,
    /// No occurrence before this time
    #[arg(long, value_name = "TIME", value_parser = parse_time, allow_negative_numbers = true)]
    start: Option<Timestamp>,
    /// No occurrence after this time
    #[arg(long, value_name = "TIME", value_parser = parse_time, allow_negative_numbers = true)]
    end: Option<Timestamp>,
    /// A wall time daylight saving skips
    #[arg(long, value_enum, default_value = "shift-forward")]
    gap: GapFlag,
    /// A wall time daylight saving repeats
    #[arg(long, value_enum, default_value = "first")]
    repeat: RepeatFlag,
    /// An occurrence due while the previous one is claimed and not done
    #[arg(long, value_enum, default_value = "skip")]
    overlap: OverlapFlag,
    /// Which missed occurrences fire after downtime: all-within:MS,
    /// latest-within:MS or none [default: all-within one year]
    #[arg(long, value_name = "POLICY", value_parser = parse_catch_up)]
    catch_up: Option<CatchUp>,
    /// Fire each occurrence up to this many milliseconds late, the same on
    /// every host
    #[arg(long, value_name = "MS")]
    jitter_ms: Option<u64>,
    /// The case the occurrences' timers carry
    #[arg(long)]
    case: Option<String>,
    /// The occurrences' saga step
    #[arg(long, default_value_t = 0)]
    step: u32,
    /// The occurrences' saga phase
    #[arg(long, value_enum, default_value = "forward")]
    phase: PhaseFlag,
}

impl AddSchedule {
    fn def(&self) -> Result<ScheduleDef, CliError> {
        let rule = match (&self.cron, self.every_ms) {
            (Some(expr), None) => Rule::Cron { expr: expr.clone() },
            (None, Some(every_ms)) => Rule::Interval {
                every_ms,
                anchor: self.anchor.unwrap_or_else(values::now),
            },
            // clap's group allows exactly one.
            _ => {
                return Err(CliError::Input(
                    "give --cron or --every-ms, not both".to_owned(),
                ));
            }
        };
        let mut spec = ScheduleSpec::new(rule, self.zone.clone());
        spec.start = self.start;
        spec.end = self.end;
        spec.gap = match self.gap {
            GapFlag::ShiftForward => GapPolicy::ShiftForward,
            GapFlag::Skip => GapPolicy::Skip,
        };
        spec.repeat = match self.repeat {
            RepeatFlag::First => RepeatPolicy::First,
            RepeatFlag::Both => RepeatPolicy::Both,
        };
        spec.overlap = match self.overlap {
            OverlapFlag::Skip => Overlap::Skip,
            OverlapFlag::BufferOne => Overlap::BufferOne,
            OverlapFlag::BufferAll => Overlap::BufferAll,
        };
        spec.catch_up = self.catch_up.unwrap_or_default();
        // 0 is no jitter, as the WIT has it.
        spec.jitter_ms = self.jitter_ms.filter(|&j| j > 0);
        Ok(ScheduleDef {
            id: self.id.clone(),
            run: self.run.clone(),
            case: self.case.clone(),
            step: self.step,
            phase: match self.phase {
                PhaseFlag::Forward => Phase::Forward,
                PhaseFlag::Compensating => Phase::Compensating,
            },
            spec,
        })
    }
}

#[derive(Debug, Args)]
pub struct Named {
    /// The schedule's id
    id: String,
}

#[derive(Debug, Args)]
pub struct Pause {
    /// The schedule's id
    id: String,
    /// Why it is paused (1-1024 characters)
    #[arg(long)]
    note: String,
}

#[derive(Debug, Args)]
pub struct Next {
    /// The schedule's id
    id: String,
    /// Occurrences strictly after this time (RFC 3339, or milliseconds
    /// since the epoch); default now
    #[arg(long, value_name = "TIME", value_parser = parse_time, allow_negative_numbers = true)]
    after: Option<Timestamp>,
    /// How many (1-1000)
    #[arg(
        short = 'n',
        long = "count",
        default_value_t = 10,
        allow_negative_numbers = true
    )]
    n: u32,
}
