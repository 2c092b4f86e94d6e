//! Sweeps: tasks past their due time, lapsed leases back to the queue, and
//! overdue tasks acted on by their `on_expiry` (what the server's sweeper
//! does by itself unless it runs with `--no-sweep`). Services and
//! operators only.

use leasehold_host::Verb;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::extract::{Caller, Json, Query};
use crate::problem::Problem;
use crate::state::AppState;
use crate::wire::{Answer, DEFAULT_PAGE, Task, whole};

/// Tasks a sweep moves at most when a call names no `limit`.
const DEFAULT_SWEEP: u32 = 100;

/// The sweeps' routes.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(overdue))
        .routes(routes!(reclaim_lapsed))
        .routes(routes!(expire_overdue))
}

/// Tasks past their due time that still await expiry, earliest first.
#[utoipa::path(get, path = "/v1/overdue", operation_id = Verb::Overdue.name(), tag = "sweeps",
    params(OverdueParams),
    responses(
        (status = 200, description = "Overdue tasks", body = TaskList),
        (status = "default", description = "A problem (RFC 9457)", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = ["service", "operator"])))]
async fn overdue(c: Caller, Query(q): Query<OverdueParams>) -> Answer<TaskList> {
    let now = c.now(q.now)?;
    let limit = q.limit.unwrap_or(DEFAULT_PAGE);
    let tasks = c
        .call(Verb::Overdue, move |x| x.overdue(now, limit))
        .await?;
    Ok(axum::Json(TaskList {
        tasks: tasks.into_iter().map(Into::into).collect(),
    }))
}

/// Return tasks whose lease has lapsed to the queue.
#[utoipa::path(post, path = "/v1/reclaim-lapsed", operation_id = Verb::ReclaimLapsed.name(), tag = "sweeps",
    request_body = Option<ReclaimRequest>,
    responses(
        (status = 200, description = "The tasks moved, as they now stand", body = TaskList),
        (status = "default", description = "A problem (RFC 9457)", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = ["service", "operator"])))]
async fn reclaim_lapsed(c: Caller, Json(body): Json<ReclaimRequest>) -> Answer<TaskList> {
    let now = c.now(body.now)?;
    let limit = body.limit.unwrap_or(DEFAULT_SWEEP);
    let tasks = c
        .call(Verb::ReclaimLapsed, move |x| x.reclaim_lapsed(now, limit))
        .await?;
    Ok(axum::Json(TaskList {
        tasks: tasks.into_iter().map(Into::into).collect(),
    }))
}

/// Act on tasks past their due time by their `on_expiry`: `escalate`
/// escalates a task, `deny` and `proceed` settle it `expired`; then fire
/// the reminders and escalation-chain steps whose instant has come, one
/// step per task per call, each a change whose history entry carries its
/// `step`. The server's sweeper does this by itself unless it runs with
/// `--no-sweep`.
#[utoipa::path(post, path = "/v1/expire-overdue", operation_id = Verb::ExpireOverdue.name(), tag = "sweeps",
    request_body = Option<ReclaimRequest>,
    responses(
        (status = 200, description = "The tasks acted on, as they now stand", body = TaskList),
        (status = "default", description = "A problem (RFC 9457)", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = ["service", "operator"])))]
async fn expire_overdue(c: Caller, Json(body): Json<ReclaimRequest>) -> Answer<TaskList> {
    let now = c.now(body.now)?;
    let limit = body.limit.unwrap_or(DEFAULT_SWEEP);
    let tasks = c
        .call(Verb::ExpireOverdue, move |x| x.expire_overdue(now, limit))
        .await?;
    Ok(axum::Json(TaskList {
        tasks: tasks.into_iter().map(Into::into).collect(),
    }))
}

#[derive(Debug, Deserialize, ToSchema, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct OverdueParams {
    /// How many tasks (default 20).
    #[param(schema_with = crate::schema::limit)]
    #[serde(default)]
    #[serde(deserialize_with = "whole::opt_u32")]
    pub limit: Option<u32>,
    /// A clock override: compare due times with this instant instead of the
    /// service's clock; refused unless the server allows them.
    #[param(schema_with = crate::schema::instant)]
    #[serde(default)]
    #[serde(deserialize_with = "whole::opt_i64")]
    pub now: Option<i64>,
}

/// Return lapsed claims to the queue.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ReclaimRequest {
    /// How many tasks at most (default 100).
    #[serde(default)]
    #[schema(schema_with = crate::schema::opt_limit)]
    #[serde(deserialize_with = "whole::opt_u32")]
    pub limit: Option<u32>,
    /// A clock override: refused unless the server allows them.
    #[serde(default)]
    #[schema(schema_with = crate::schema::opt_instant)]
    #[serde(deserialize_with = "whole::opt_i64")]
    pub now: Option<i64>,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct TaskList {
    pub tasks: Vec<Task>,
}
