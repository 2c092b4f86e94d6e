//! Runs: sealing a run (its timers retired, its awaited pending tasks
//! withdrawn), withdrawing its awaited tasks alone, and whether it is
//! sealed. Services and operators only.

use leasehold_host::Verb;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::extract::{Caller, Json, Path};
use crate::problem::Problem;
use crate::state::AppState;
use crate::wire::{Answer, RunPath, refs, whole};

/// The runs' routes.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(withdraw_run))
        .routes(routes!(seal))
        .routes(routes!(is_sealed))
}

/// Withdraw the run's awaited tasks that are still pending.
#[utoipa::path(post, path = "/v1/runs/{run}/withdraw", operation_id = Verb::WithdrawRun.name(), tag = "runs",
    params(RunPath),
    request_body = Option<AwaitedRequest>,
    responses(
        (status = 200, description = "How many tasks moved", body = Withdrawn),
        (status = "default", description = "A problem (RFC 9457)", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = ["service", "operator"])))]
async fn withdraw_run(
    c: Caller,
    Path(RunPath { run }): Path<RunPath>,
    Json(body): Json<AwaitedRequest>,
) -> Answer<Withdrawn> {
    let awaited = body.awaited;
    let withdrawn = c
        .call(Verb::WithdrawRun, move |x| {
            x.withdraw_run(&run, &refs(&awaited))
        })
        .await?;
    Ok(axum::Json(Withdrawn { withdrawn }))
}

/// Seal a run: retire its timers (its schedules end with them) and withdraw
/// its awaited pending tasks.
#[utoipa::path(post, path = "/v1/runs/{run}/seal", operation_id = Verb::Seal.name(), tag = "runs",
    params(RunPath),
    request_body = Option<AwaitedRequest>,
    responses(
        (status = 200, description = "What this call moved", body = SealOutcome),
        (status = "default", description = "A problem (RFC 9457)", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = ["service", "operator"])))]
async fn seal(
    c: Caller,
    Path(RunPath { run }): Path<RunPath>,
    Json(body): Json<AwaitedRequest>,
) -> Answer<SealOutcome> {
    let awaited = body.awaited;
    let o = c
        .call(Verb::Seal, move |x| x.seal(&run, &refs(&awaited)))
        .await?;
    Ok(axum::Json(SealOutcome {
        timers_disarmed: o.timers_disarmed,
        tasks_withdrawn: o.tasks_withdrawn,
    }))
}

/// Whether a run is sealed.
#[utoipa::path(get, path = "/v1/runs/{run}", operation_id = Verb::IsSealed.name(), tag = "runs",
    params(RunPath),
    responses(
        (status = 200, description = "The run's seal", body = RunStatus),
        (status = "default", description = "A problem (RFC 9457)", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = ["service", "operator"])))]
async fn is_sealed(c: Caller, Path(RunPath { run }): Path<RunPath>) -> Answer<RunStatus> {
    let key = run.clone();
    let sealed = c.call(Verb::IsSealed, move |x| x.is_sealed(&key)).await?;
    Ok(axum::Json(RunStatus { run, sealed }))
}

/// The tasks of a run the caller still awaits.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AwaitedRequest {
    #[serde(default)]
    #[schema(schema_with = crate::schema::names)]
    pub awaited: Vec<String>,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct Withdrawn {
    #[serde(deserialize_with = "whole::u32")]
    pub withdrawn: u32,
}

/// What `seal` moved in this call.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct SealOutcome {
    #[serde(deserialize_with = "whole::u32")]
    pub timers_disarmed: u32,
    #[serde(deserialize_with = "whole::u32")]
    pub tasks_withdrawn: u32,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct RunStatus {
    pub run: String,
    pub sealed: bool,
}
