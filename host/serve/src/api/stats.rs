//! The tenant's counters and next instants: open tasks, armed timers,
//! leased claims, the next timer due, the next lease end and the next
//! instant a task's expiry or step is owed. Operators only.

use leasehold_host::Verb;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::extract::Caller;
use crate::problem::Problem;
use crate::state::AppState;
use crate::wire::{Answer, whole};

/// The stats' routes.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(open_count))
        .routes(routes!(pending_count))
        .routes(routes!(leased_count))
        .routes(routes!(next_due))
        .routes(routes!(next_lease_end))
        .routes(routes!(next_wake))
}

/// Pending tasks (claimed ones count).
#[utoipa::path(get, path = "/v1/stats/open-count", operation_id = Verb::OpenCount.name(), tag = "stats",
    responses(
        (status = 200, description = "The count", body = Count),
        (status = "default", description = "A problem (RFC 9457)", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = ["operator"])))]
async fn open_count(c: Caller) -> Answer<Count> {
    let count = c.call(Verb::OpenCount, |x| x.open_count()).await?;
    Ok(axum::Json(Count { count }))
}

/// Armed timers.
#[utoipa::path(get, path = "/v1/stats/pending-count", operation_id = Verb::PendingCount.name(), tag = "stats",
    responses(
        (status = 200, description = "The count", body = Count),
        (status = "default", description = "A problem (RFC 9457)", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = ["operator"])))]
async fn pending_count(c: Caller) -> Answer<Count> {
    let count = c.call(Verb::PendingCount, |x| x.pending_count()).await?;
    Ok(axum::Json(Count { count }))
}

/// Tasks claimed under a lease, lapsed or not.
#[utoipa::path(get, path = "/v1/stats/leased-count", operation_id = Verb::LeasedCount.name(), tag = "stats",
    responses(
        (status = 200, description = "The count", body = Count),
        (status = "default", description = "A problem (RFC 9457)", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = ["operator"])))]
async fn leased_count(c: Caller) -> Answer<Count> {
    let count = c.call(Verb::LeasedCount, |x| x.leased_count()).await?;
    Ok(axum::Json(Count { count }))
}

/// When the next armed timer becomes claimable.
#[utoipa::path(get, path = "/v1/stats/next-due", operation_id = Verb::NextDue.name(), tag = "stats",
    responses(
        (status = 200, description = "The instant, or null", body = NextAt),
        (status = "default", description = "A problem (RFC 9457)", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = ["operator"])))]
async fn next_due(c: Caller) -> Answer<NextAt> {
    let at = c.call(Verb::NextDue, |x| x.next_due()).await?;
    Ok(axum::Json(NextAt { at }))
}

/// The earliest lease end among leased claims.
#[utoipa::path(get, path = "/v1/stats/next-lease-end", operation_id = Verb::NextLeaseEnd.name(), tag = "stats",
    responses(
        (status = 200, description = "The instant, or null", body = NextAt),
        (status = "default", description = "A problem (RFC 9457)", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = ["operator"])))]
async fn next_lease_end(c: Caller) -> Answer<NextAt> {
    let at = c.call(Verb::NextLeaseEnd, |x| x.next_lease_end()).await?;
    Ok(axum::Json(NextAt { at }))
}

/// The earliest instant the sweeper has a task's expiry, reminder or
/// escalation step to act on: what it sleeps until.
#[utoipa::path(get, path = "/v1/stats/next-wake", operation_id = Verb::NextWake.name(), tag = "stats",
    responses(
        (status = 200, description = "The instant, or null", body = NextAt),
        (status = "default", description = "A problem (RFC 9457)", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = ["operator"])))]
async fn next_wake(c: Caller) -> Answer<NextAt> {
    let at = c.call(Verb::NextWake, |x| x.next_wake()).await?;
    Ok(axum::Json(NextAt { at }))
}

/// One counter or instant of the tenant's stats.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct Count {
    pub count: u64,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct NextAt {
    /// Milliseconds since 1970; null when there is none.
    #[serde(default)]
    #[serde(deserialize_with = "whole::opt_i64")]
    pub at: Option<i64>,
}
