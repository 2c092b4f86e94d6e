//! Moving and listing timers: `reschedule` one, page a run's timers, and
//! page the timers falling due in a window. Services and operators only,
//! as every timer route. A refusal of a move (no such timer, a sweeper's
//! lease, a sealed run) is a problem document naming it; nothing is
//! written then.

use leasehold_host::{self as host, Rescheduled, Verb};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::timers::{Timer, TimerPath};
use crate::extract::{Caller, Json, Path, Query};
use crate::problem::{ApiError, Problem};
use crate::state::AppState;
use crate::wire::{Answer, DEFAULT_PAGE, PageParams, RunPath, whole};

/// The routes that move and list timers.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(reschedule))
        .routes(routes!(timers_of))
        .routes(routes!(due_between))
}

/// Move an armed timer to a new fire time in one call, keeping its
/// identity; the feed records it as `rescheduled`. A timer a sweeper holds
/// under an unexpired lease is refused (`timer-held`, with the lease's
/// end) unless `take_back`.
#[utoipa::path(post, path = "/v1/runs/{run}/timers/{effect}/reschedule", operation_id = Verb::Reschedule.name(), tag = "timers",
    params(TimerPath),
    request_body = RescheduleRequest,
    responses(
        (status = 200, description = "The timer as it now waits, unclaimed", body = TimerInfo),
        (status = 404, description = "No timer is armed under this run and effect", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "A sweeper holds the timer (`timer-held`, with `lease_until`), or the run is sealed (`run-sealed`)", body = Problem, content_type = "application/problem+json"),
        (status = "default", description = "A problem (RFC 9457)", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = ["service", "operator"])))]
async fn reschedule(
    c: Caller,
    Path(TimerPath { run, effect }): Path<TimerPath>,
    Json(body): Json<RescheduleRequest>,
) -> Answer<TimerInfo> {
    let (fire_at, take_back) = (body.fire_at, body.take_back);
    let (r, e) = (run.clone(), effect.clone());
    match c
        .call(Verb::Reschedule, move |x| {
            x.reschedule(&r, &e, fire_at, take_back)
        })
        .await?
    {
        Rescheduled::Moved(info) => Ok(axum::Json(info.into())),
        Rescheduled::NotFound => Err(ApiError::NotFound(format!("no timer {run}/{effect}"))),
        Rescheduled::Held(until) => Err(ApiError::TimerHeld(until)),
        Rescheduled::RunSealed => Err(ApiError::RunSealed(run)),
        other => Err(ApiError::Internal(
            format!("an answer of reschedule this server does not know: {other:?}").into(),
        )),
    }
}

/// The timers armed for a run, by effect, a page at a time.
#[utoipa::path(get, path = "/v1/runs/{run}/timers", operation_id = Verb::TimersOf.name(), tag = "timers",
    params(RunPath, PageParams),
    responses(
        (status = 200, description = "One page of the run's timers", body = TimerPage),
        (status = 400, description = "Invalid input, or an `after` this service did not give for this run's list", body = Problem, content_type = "application/problem+json"),
        (status = "default", description = "A problem (RFC 9457)", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = ["service", "operator"])))]
async fn timers_of(
    c: Caller,
    Path(RunPath { run }): Path<RunPath>,
    Query(q): Query<PageParams>,
) -> Answer<TimerPage> {
    // A cursor pages one run's list only.
    let list = format!("{}:{run}", Verb::TimersOf.name());
    let after = c.open_cursor(&list, q.after)?;
    let limit = q.limit.unwrap_or(DEFAULT_PAGE);
    let page = c
        .call(Verb::TimersOf, move |x| {
            x.timers_of(&run, limit, after.as_deref())
        })
        .await?;
    Ok(axum::Json(TimerPage {
        timers: page.timers.into_iter().map(Into::into).collect(),
        next: c.seal_cursor(&list, page.next)?,
    }))
}

/// The timers that become claimable in `[from, to)`, in the order
/// `claim-due` takes them: each at its fire time, or while a sweeper holds
/// it at its lease's end.
#[utoipa::path(get, path = "/v1/timers/due", operation_id = Verb::DueBetween.name(), tag = "timers",
    params(DueParams),
    responses(
        (status = 200, description = "One page of the timers due in the window", body = TimerPage),
        (status = 400, description = "Invalid input (`to` before `from`), or an `after` this service did not give for this window", body = Problem, content_type = "application/problem+json"),
        (status = "default", description = "A problem (RFC 9457)", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = ["service", "operator"])))]
async fn due_between(c: Caller, Query(q): Query<DueParams>) -> Answer<TimerPage> {
    // A cursor pages one window only.
    let list = format!("{}:{}:{}", Verb::DueBetween.name(), q.from, q.to);
    let after = c.open_cursor(&list, q.after)?;
    let (from, to) = (q.from, q.to);
    let limit = q.limit.unwrap_or(DEFAULT_PAGE);
    let page = c
        .call(Verb::DueBetween, move |x| {
            x.due_between(from, to, limit, after.as_deref())
        })
        .await?;
    Ok(axum::Json(TimerPage {
        timers: page.timers.into_iter().map(Into::into).collect(),
        next: c.seal_cursor(&list, page.next)?,
    }))
}

/// Move a timer.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RescheduleRequest {
    /// The new fire time.
    #[schema(schema_with = crate::schema::instant)]
    #[serde(deserialize_with = "whole::i64")]
    pub fire_at: i64,
    /// Move it even while a sweeper holds it, ending that lease (the
    /// sweeper's firing is then a duplicate the effect key absorbs).
    #[serde(default)]
    pub take_back: bool,
}

/// An armed timer as a listing shows it.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct TimerInfo {
    pub timer: Timer,
    /// The sweeper's lease end while the timer is claimed; `null` while it
    /// waits for its fire time.
    #[schema(schema_with = crate::schema::opt_instant)]
    pub lease_until: Option<i64>,
}

impl From<host::TimerInfo> for TimerInfo {
    fn from(i: host::TimerInfo) -> Self {
        TimerInfo {
            timer: i.timer.into(),
            lease_until: i.lease_until,
        }
    }
}

/// One page of timers.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct TimerPage {
    pub timers: Vec<TimerInfo>,
    /// Pass as `after` for the next page; `null` at the end.
    pub next: Option<String>,
}

#[derive(Debug, Deserialize, ToSchema, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct DueParams {
    /// The window's start (in it).
    #[param(schema_with = crate::schema::instant, required = true)]
    #[serde(deserialize_with = "whole::i64")]
    pub from: i64,
    /// The window's end (not in it); not before `from`.
    #[param(schema_with = crate::schema::instant, required = true)]
    #[serde(deserialize_with = "whole::i64")]
    pub to: i64,
    /// Timers per page (default 20).
    #[param(schema_with = crate::schema::limit)]
    #[serde(default)]
    #[serde(deserialize_with = "whole::opt_u32")]
    pub limit: Option<u32>,
    /// The `next` of the previous page of this window.
    #[param(schema_with = crate::schema::cursor)]
    pub after: Option<String>,
}
