//! A schedule as the API spells it (WIT `schedule-spec` and `schedule`):
//! its recurrence and catch-up as objects tagged by `kind`, its policies as
//! snake_case names, integers as JSON Schema counts them, and the
//! conversions to and from the host's. It owns only the shape; whether a
//! spec is valid is the rules', but for a span beyond every instant's,
//! which the wire cannot carry to them, refused here naming the field.

use leasehold_guest::validate::MAX_TIMESTAMP;
use leasehold_host as host;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::timers::Phase;
use crate::problem::ApiError;
use crate::wire::{mirror_enum, whole};

mirror_enum!(
    /// A wall time the zone skips (clocks go forward): `shift_forward`
    /// fires at the first instant after the gap, `skip` not that day.
    GapPolicy => GapPolicy { ShiftForward, Skip });
mirror_enum!(
    /// A wall time the zone repeats (clocks go back): `first` fires once,
    /// at its first occurrence; `both` at each.
    RepeatPolicy => RepeatPolicy { First, Both });
mirror_enum!(
    /// An occurrence that falls due while the previous one is claimed and
    /// not done: `skip` drops it, `buffer_one` keeps one waiting,
    /// `buffer_all` keeps each waiting.
    OverlapPolicy => Overlap { Skip, BufferOne, BufferAll });

/// When a schedule fires.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Recurrence {
    /// A cron expression read in the schedule's zone: five fields (minute
    /// hour day-of-month month day-of-week) or six (seconds first); names
    /// of months and days, ranges, steps, lists, `L` and `#`, and the
    /// macros `@yearly`, `@monthly`, `@weekly`, `@daily`, `@hourly`.
    /// One the rules cannot parse, or that matches no date, is refused
    /// with 400 (`invalid`, `field` naming `recurrence.expr`, `detail` the
    /// cron field).
    Cron {
        /// The expression.
        expr: String,
    },
    /// Every `every_ms` milliseconds from `anchor` (the first occurrence):
    /// real time, which daylight saving never moves.
    Every {
        #[schema(schema_with = crate::schema::span_ms)]
        #[serde(deserialize_with = "whole::i64")]
        every_ms: i64,
        #[schema(schema_with = crate::schema::instant)]
        #[serde(deserialize_with = "whole::i64")]
        anchor: i64,
    },
}

/// Which missed occurrences fire after downtime (every host down): each
/// within the window before now, once, oldest first (`all_within`); only
/// the latest within it (`latest_within`); or none. Beyond the window none
/// fires.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum CatchUp {
    AllWithin {
        #[schema(schema_with = crate::schema::span_ms)]
        #[serde(deserialize_with = "whole::i64")]
        window_ms: i64,
    },
    LatestWithin {
        #[schema(schema_with = crate::schema::span_ms)]
        #[serde(deserialize_with = "whole::i64")]
        window_ms: i64,
    },
    None,
}

fn forward() -> Phase {
    Phase::Forward
}

fn shift_forward() -> GapPolicy {
    GapPolicy::ShiftForward
}

fn first() -> RepeatPolicy {
    RepeatPolicy::First
}

fn skip() -> OverlapPolicy {
    OverlapPolicy::Skip
}

fn a_year() -> CatchUp {
    CatchUp::from(host::CatchUp::default())
}

/// What a schedule is (WIT `schedule-spec`). Each occurrence is armed as
/// the timer `(run, "schedule/<id>/<instant>")` carrying `case`, `step` and
/// `phase`. An `id` in use, or a sealed `run`, is refused with 400
/// (`invalid`, `field` naming it).
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ScheduleSpec {
    #[schema(schema_with = crate::schema::schedule_id)]
    pub id: String,
    #[schema(schema_with = crate::schema::name)]
    pub run: String,
    #[serde(default)]
    #[schema(schema_with = crate::schema::opt_name)]
    pub case: Option<String>,
    /// The occurrences' saga step (default 0).
    #[serde(default)]
    #[schema(schema_with = crate::schema::step)]
    #[serde(deserialize_with = "whole::u32")]
    pub step: u32,
    /// The occurrences' phase (default `forward`).
    #[serde(default = "forward")]
    pub phase: Phase,
    pub recurrence: Recurrence,
    /// An IANA zone name (`Europe/London`), stored under its canonical
    /// name. Intervals ignore it, but it must exist: a name the time-zone
    /// database does not know is refused with 400 (`invalid`, `field`
    /// naming `zone`).
    pub zone: String,
    /// No occurrence before this instant (inclusive).
    #[serde(default)]
    #[schema(schema_with = crate::schema::opt_instant)]
    #[serde(deserialize_with = "whole::opt_i64")]
    pub start: Option<i64>,
    /// No occurrence after this instant (inclusive). One before `start`, or
    /// with no occurrence between the two, is refused with 400 (`invalid`,
    /// `field` naming `end`).
    #[serde(default)]
    #[schema(schema_with = crate::schema::opt_instant)]
    #[serde(deserialize_with = "whole::opt_i64")]
    pub end: Option<i64>,
    /// Default `shift_forward`.
    #[serde(default = "shift_forward")]
    pub gap: GapPolicy,
    /// Default `first`.
    #[serde(default = "first")]
    pub repeat: RepeatPolicy,
    /// Default `skip`.
    #[serde(default = "skip")]
    pub overlap: OverlapPolicy,
    /// Default: `all_within` a year.
    #[serde(default = "a_year")]
    pub catch_up: CatchUp,
    /// Each occurrence fires up to this many milliseconds after its instant,
    /// by an amount fixed by the id and the instant (0, the default: on
    /// it). At most a day; one not below an interval is refused with 400
    /// (`invalid`, `field` naming `jitter_ms`).
    #[serde(default)]
    #[schema(schema_with = crate::schema::jitter_ms)]
    #[serde(deserialize_with = "whole::u32")]
    pub jitter_ms: u32,
}

/// A span the wire carries as an integer and the rules as unsigned; one
/// beyond every instant's span is refused here, naming `field`, as the
/// document's bound says.
fn span(field: &str, ms: i64) -> Result<u64, ApiError> {
    u64::try_from(ms)
        .ok()
        .filter(|_| ms <= MAX_TIMESTAMP)
        .ok_or_else(|| {
            ApiError::invalid(
                field,
                format!("{field} is {ms}; it must be 1-{MAX_TIMESTAMP} milliseconds"),
            )
        })
}

impl TryFrom<ScheduleSpec> for host::ScheduleDef {
    type Error = ApiError;

    fn try_from(s: ScheduleSpec) -> Result<Self, ApiError> {
        let rule = match s.recurrence {
            Recurrence::Cron { expr } => host::Rule::Cron { expr },
            Recurrence::Every { every_ms, anchor } => host::Rule::Interval {
                every_ms: span("recurrence.every_ms", every_ms)?,
                anchor,
            },
        };
        let catch_up = match s.catch_up {
            CatchUp::AllWithin { window_ms } => host::CatchUp::AllWithinWindow {
                window_ms: span("catch_up.window_ms", window_ms)?,
            },
            CatchUp::LatestWithin { window_ms } => host::CatchUp::Latest {
                window_ms: span("catch_up.window_ms", window_ms)?,
            },
            CatchUp::None => host::CatchUp::None,
        };
        let mut spec = host::ScheduleSpec::new(rule, s.zone);
        spec.start = s.start;
        spec.end = s.end;
        spec.gap = s.gap.into();
        spec.repeat = s.repeat.into();
        spec.overlap = s.overlap.into();
        spec.catch_up = catch_up;
        spec.jitter_ms = (s.jitter_ms > 0).then_some(u64::from(s.jitter_ms));
        Ok(host::ScheduleDef {
            id: s.id,
            run: s.run,
            case: s.case,
            step: s.step,
            phase: s.phase.into(),
            spec,
        })
    }
}

/// A stored span beyond `i64` (which the document's bound keeps out) is
/// shown as the most an instant spans, which means the same.
fn shown(ms: u64) -> i64 {
    i64::try_from(ms).unwrap_or(MAX_TIMESTAMP)
}

impl From<host::CatchUp> for CatchUp {
    fn from(c: host::CatchUp) -> Self {
        match c {
            host::CatchUp::AllWithinWindow { window_ms } => CatchUp::AllWithin {
                window_ms: shown(window_ms),
            },
            host::CatchUp::Latest { window_ms } => CatchUp::LatestWithin {
                window_ms: shown(window_ms),
            },
            host::CatchUp::None => CatchUp::None,
        }
    }
}

impl From<host::ScheduleDef> for ScheduleSpec {
    fn from(d: host::ScheduleDef) -> Self {
        let s = d.spec;
        ScheduleSpec {
            id: d.id,
            run: d.run,
            case: d.case,
            step: d.step,
            phase: d.phase.into(),
            recurrence: match s.rule {
                host::Rule::Cron { expr } => Recurrence::Cron { expr },
                host::Rule::Interval { every_ms, anchor } => Recurrence::Every {
                    every_ms: shown(every_ms),
                    anchor,
                },
            },
            zone: s.zone,
            start: s.start,
            end: s.end,
            gap: s.gap.into(),
            repeat: s.repeat.into(),
            overlap: s.overlap.into(),
            catch_up: s.catch_up.into(),
            jitter_ms: s
                .jitter_ms
                .map_or(0, |j| u32::try_from(j).unwrap_or(u32::MAX)),
        }
    }
}

/// A schedule and where it stands (WIT `schedule`).
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct Schedule {
    /// What it is, as it was added (its zone's canonical name).
    pub spec: ScheduleSpec,
    /// The note it was paused with; `null` while it runs.
    pub paused: Option<String>,
    /// The instant of the occurrence armed next (before jitter); `null`
    /// while paused or once the schedule has ended.
    #[schema(schema_with = crate::schema::opt_instant)]
    pub next_at: Option<i64>,
    /// The instant of the last occurrence that fired.
    #[schema(schema_with = crate::schema::opt_instant)]
    pub last_at: Option<i64>,
    /// Occurrences kept waiting by `overlap`, oldest first.
    pub waiting: Vec<i64>,
    /// 1 when added, one more with each change.
    #[schema(schema_with = crate::schema::seq)]
    pub revision: u64,
}

impl From<host::Schedule> for Schedule {
    fn from(s: host::Schedule) -> Self {
        Schedule {
            spec: s.def.into(),
            paused: s.paused,
            next_at: s.next_at,
            last_at: s.last_at,
            waiting: s.waiting,
            revision: s.revision,
        }
    }
}
