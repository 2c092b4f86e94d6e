//! Recurring schedules (WIT `schedules`): add, read, page, pause, resume,
//! trigger and remove one, compute its next occurrences, and say which
//! time-zone database the instants come from. Services and operators only,
//! as every timer route: a schedule's occurrences are timers of its run,
//! claimed with `claim-due`. Every `now` is the server's clock. Every rule
//! about a spec is the component's (its shape is `super::schedule_spec`'s),
//! and a refusal is an `invalid` problem whose `field` is the request's
//! path to the value to fix. It must never write anything on a refusal.

use axum::http::StatusCode;
use leasehold_host::{self as host, Verb};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

pub use super::schedule_spec::Schedule;
use super::schedule_spec::ScheduleSpec;
use super::timers::Timer;
use crate::extract::{Caller, Json, Path, Query};
use crate::problem::{ApiError, Problem};
use crate::state::AppState;
use crate::wire::{Answer, DEFAULT_PAGE, PageParams, whole};

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
