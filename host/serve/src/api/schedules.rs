//! Recurring schedules (WIT `schedules`): add, read, page, pause, resume,
//! trigger and remove one, compute its next occurrences, and say which
//! time-zone database the instants come from. Services and operators only,
//! as every timer route: a schedule's occurrences are timers of its run,
//! claimed with `claim-due`. Every `now` is the server's clock. It owns the
//! schedule's wire shape; every rule about a spec is the component's, and a
//! refusal is an `invalid` problem whose `field` is the request's path to
//! the value to fix. It must never write anything on a refusal.

use axum::http::StatusCode;
use leasehold_guest::validate::MAX_TIMESTAMP;
use leasehold_host::{self as host, Verb};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::timers::{Phase, Timer};
use crate::extract::{Caller, Json, Path, Query};
use crate::problem::{ApiError, Problem};
use crate::state::AppState;
use crate::wire::{Answer, DEFAULT_PAGE, PageParams, mirror_enum, whole};

/// Occurrences `next` computes when it names no `n`.
const DEFAULT_OCCURRENCES: u32 = 10;

/// The schedules' routes.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(add_schedule, list_schedules))
        .routes(routes!(get_schedule, remove_schedule))
        .routes(routes!(pause_schedule))
        .routes(routes!(resume_schedule))
        .routes(routes!(trigger_schedule))
        .routes(routes!(next_occurrences))
        .routes(routes!(tz_version))
}

/// Add a schedule and arm its first occurrence at or after the server's
/// clock. A spec the rules refuse is `invalid`, `field` naming what to fix
/// (`zone`, `recurrence.expr` with the cron field in `detail`, `end`...);
/// an id in use is `invalid` naming `id`, a sealed run `invalid` naming
/// `run`. Nothing is written then.
#[utoipa::path(post, path = "/v1/schedules", operation_id = Verb::AddSchedule.name(), tag = "schedules",
    request_body = ScheduleSpec,
    responses(
        (status = 201, description = "The schedule as added, its first occurrence armed", body = Schedule),
        (status = 400, description = "A spec the rules refuse, an id in use, or a sealed run (`invalid`, `field` naming it)", body = Problem, content_type = "application/problem+json"),
        (status = "default", description = "A problem (RFC 9457)", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = ["service", "operator"])))]
async fn add_schedule(
    c: Caller,
    Json(body): Json<ScheduleSpec>,
) -> Result<(StatusCode, axum::Json<Schedule>), ApiError> {
    let def = host::ScheduleDef::try_from(body)?;
    let now = c.now(None)?;
    let added = c
        .call(Verb::AddSchedule, move |x| x.add_schedule(&def, now))
        .await
        .map_err(spec_field)?;
    Ok((StatusCode::CREATED, axum::Json(added.into())))
}

/// The tenant's schedules by id, a page at a time.
#[utoipa::path(get, path = "/v1/schedules", operation_id = Verb::ListSchedules.name(), tag = "schedules",
    params(PageParams),
    responses(
        (status = 200, description = "One page of schedules", body = SchedulePage),
        (status = 400, description = "Invalid input, or an `after` this service did not give for this list", body = Problem, content_type = "application/problem+json"),
        (status = "default", description = "A problem (RFC 9457)", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = ["service", "operator"])))]
async fn list_schedules(c: Caller, Query(q): Query<PageParams>) -> Answer<SchedulePage> {
    let list = Verb::ListSchedules.name();
    let after = c.open_cursor(list, q.after)?;
    let limit = q.limit.unwrap_or(DEFAULT_PAGE);
    let page = c
        .call(Verb::ListSchedules, move |x| {
            x.list_schedules(limit, after.as_deref())
        })
        .await?;
    Ok(axum::Json(SchedulePage {
        schedules: page.schedules.into_iter().map(Into::into).collect(),
        next: c.seal_cursor(list, page.next)?,
    }))
}

/// One schedule.
#[utoipa::path(get, path = "/v1/schedules/{id}", operation_id = Verb::GetSchedule.name(), tag = "schedules",
    params(SchedulePath),
    responses(
        (status = 200, description = "The schedule", body = Schedule),
        (status = 404, description = "No such schedule", body = Problem, content_type = "application/problem+json"),
        (status = "default", description = "A problem (RFC 9457)", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = ["service", "operator"])))]
async fn get_schedule(
    c: Caller,
    Path(SchedulePath { id }): Path<SchedulePath>,
) -> Answer<Schedule> {
    let i = id.clone();
    match c
        .call(Verb::GetSchedule, move |x| x.get_schedule(&i))
        .await?
    {
        Some(s) => Ok(axum::Json(s.into())),
        None => Err(missing(&id)),
    }
}

/// Remove a schedule with its armed and waiting occurrences; an occurrence
/// a sweeper has claimed stays with it.
#[utoipa::path(delete, path = "/v1/schedules/{id}", operation_id = Verb::RemoveSchedule.name(), tag = "schedules",
    params(SchedulePath),
    responses(
        (status = 200, description = "Whether the schedule existed", body = Removed),
        (status = "default", description = "A problem (RFC 9457)", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = ["service", "operator"])))]
async fn remove_schedule(
    c: Caller,
    Path(SchedulePath { id }): Path<SchedulePath>,
) -> Answer<Removed> {
    let removed = c
        .call(Verb::RemoveSchedule, move |x| x.remove_schedule(&id))
        .await?;
    Ok(axum::Json(Removed { removed }))
}

/// Pause a schedule with a note: its armed and waiting occurrences are
/// retired and nothing fires until it is resumed. Pausing a paused
/// schedule replaces the note.
#[utoipa::path(post, path = "/v1/schedules/{id}/pause", operation_id = Verb::PauseSchedule.name(), tag = "schedules",
    params(SchedulePath),
    request_body = PauseRequest,
    responses(
        (status = 200, description = "The schedule, paused", body = Schedule),
        (status = 404, description = "No such schedule", body = Problem, content_type = "application/problem+json"),
        (status = "default", description = "A problem (RFC 9457)", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = ["service", "operator"])))]
async fn pause_schedule(
    c: Caller,
    Path(SchedulePath { id }): Path<SchedulePath>,
    Json(body): Json<PauseRequest>,
) -> Answer<Schedule> {
    let i = id.clone();
    let paused = c
        .call(Verb::PauseSchedule, move |x| {
            x.pause_schedule(&i, &body.note)
        })
        .await
        .map_err(|e| named(e, &id))?;
    Ok(axum::Json(paused.into()))
}

/// Resume a paused schedule: its next occurrence at or after the server's
/// clock is armed; what fell in the pause does not fire. Resuming a
/// running schedule changes nothing.
#[utoipa::path(post, path = "/v1/schedules/{id}/resume", operation_id = Verb::ResumeSchedule.name(), tag = "schedules",
    params(SchedulePath),
    responses(
        (status = 200, description = "The schedule, running", body = Schedule),
        (status = 404, description = "No such schedule", body = Problem, content_type = "application/problem+json"),
        (status = "default", description = "A problem (RFC 9457)", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = ["service", "operator"])))]
async fn resume_schedule(
    c: Caller,
    Path(SchedulePath { id }): Path<SchedulePath>,
) -> Answer<Schedule> {
    let now = c.now(None)?;
    let i = id.clone();
    let resumed = c
        .call(Verb::ResumeSchedule, move |x| x.resume_schedule(&i, now))
        .await
        .map_err(|e| named(e, &id))?;
    Ok(axum::Json(resumed.into()))
}

/// Arm an extra occurrence now (the server's clock), beside the schedule's
/// own, paused or not, and answer its timer; it is claimed with
/// `claim-due` as any other. Triggering twice in one millisecond arms one.
#[utoipa::path(post, path = "/v1/schedules/{id}/trigger", operation_id = Verb::TriggerSchedule.name(), tag = "schedules",
    params(SchedulePath),
    responses(
        (status = 200, description = "The occurrence's timer, due now", body = Timer),
        (status = 400, description = "The schedule's run is sealed (`invalid`, `field` naming `run`)", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such schedule", body = Problem, content_type = "application/problem+json"),
        (status = "default", description = "A problem (RFC 9457)", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = ["service", "operator"])))]
async fn trigger_schedule(
    c: Caller,
    Path(SchedulePath { id }): Path<SchedulePath>,
) -> Answer<Timer> {
    let now = c.now(None)?;
    let i = id.clone();
    let timer = c
        .call(Verb::TriggerSchedule, move |x| x.trigger_schedule(&i, now))
        .await
        .map_err(|e| named(e, &id))?;
    Ok(axum::Json(timer.into()))
}

/// The schedule's next `n` occurrences strictly after `after` (the
/// server's clock when not given), before jitter. Writes nothing.
#[utoipa::path(get, path = "/v1/schedules/{id}/next", operation_id = Verb::NextOccurrences.name(), tag = "schedules",
    params(SchedulePath, NextParams),
    responses(
        (status = 200, description = "The occurrences, in order; fewer than `n` once the schedule ends", body = Occurrences),
        (status = 404, description = "No such schedule", body = Problem, content_type = "application/problem+json"),
        (status = "default", description = "A problem (RFC 9457)", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = ["service", "operator"])))]
async fn next_occurrences(
    c: Caller,
    Path(SchedulePath { id }): Path<SchedulePath>,
    Query(q): Query<NextParams>,
) -> Answer<Occurrences> {
    let after = match q.after {
        Some(a) => a,
        None => c.now(None)?,
    };
    let n = q.n.unwrap_or(DEFAULT_OCCURRENCES);
    let i = id.clone();
    let occurrences = c
        .call(Verb::NextOccurrences, move |x| {
            x.next_occurrences(&i, after, n)
        })
        .await
        .map_err(|e| named(e, &id))?;
    Ok(axum::Json(Occurrences { occurrences }))
}

/// The release of the IANA time-zone database every schedule's instants
/// are computed from (the component carries it, so every host agrees).
#[utoipa::path(get, path = "/v1/tz-version", operation_id = Verb::TzVersion.name(), tag = "schedules",
    responses(
        (status = 200, description = "The database's release", body = TzVersion),
        (status = "default", description = "A problem (RFC 9457)", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = ["service", "operator"])))]
async fn tz_version(c: Caller) -> Answer<TzVersion> {
    let tz_version = c.call(Verb::TzVersion, |x| x.tz_version()).await?;
    Ok(axum::Json(TzVersion { tz_version }))
}

/// No such schedule, in the words every schedule route uses.
fn missing(id: &str) -> ApiError {
    ApiError::NotFound(format!("no schedule {id}"))
}

/// A refusal about the schedule `id` names: its absence said as a
/// schedule's (the engine's words are a task's).
fn named(e: ApiError, id: &str) -> ApiError {
    match e {
        ApiError::NotFound(_) => missing(id),
        e => e,
    }
}

/// A refused spec's field as the request spells its path: the rules name
/// the spec's fields as the WIT does, and a recurrence's or a catch-up's
/// are nested here.
fn spec_field(e: ApiError) -> ApiError {
    match e {
        ApiError::Invalid {
            field: Some(f),
            detail,
        } => {
            let f = match f.as_str() {
                "cron" => "recurrence.expr".to_owned(),
                "every_ms" | "anchor" => format!("recurrence.{f}"),
                "catch_up" => "catch_up.window_ms".to_owned(),
                _ => f,
            };
            ApiError::Invalid {
                field: Some(f),
                detail,
            }
        }
        e => e,
    }
}

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

/// One page of schedules.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct SchedulePage {
    pub schedules: Vec<Schedule>,
    /// Pass as `after` for the next page; `null` at the end.
    pub next: Option<String>,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct Removed {
    /// Whether the schedule existed.
    pub removed: bool,
}

/// Pause a schedule.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PauseRequest {
    #[schema(schema_with = crate::schema::pause_note)]
    pub note: String,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct Occurrences {
    /// Instants, in milliseconds since 1970, in order.
    pub occurrences: Vec<i64>,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct TzVersion {
    /// The IANA release, such as `2025b`.
    pub tz_version: String,
}

/// The schedule a path names.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Path)]
pub struct SchedulePath {
    /// The schedule's id.
    #[param(schema_with = crate::schema::schedule_id)]
    pub id: String,
}

#[derive(Debug, Deserialize, ToSchema, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct NextParams {
    /// Occurrences strictly after this instant (default: now).
    #[param(schema_with = crate::schema::instant)]
    #[serde(default)]
    #[serde(deserialize_with = "whole::opt_i64")]
    pub after: Option<i64>,
    /// How many (default 10).
    #[param(schema_with = crate::schema::occurrences)]
    #[serde(default)]
    #[serde(deserialize_with = "whole::opt_u32")]
    pub n: Option<u32>,
}
