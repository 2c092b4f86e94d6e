//! A worker's batches over HTTP: `claim-batch` (several heads of the
//! caller's queue in one request) and `settle-and-claim` (what the worker
//! finished, each answered on its own, and the next heads, in one request),
//! both of which may wait for work as `claim-next` does
//! (`crate::long_poll`). Handlers must never choose a tenant, and never let
//! a reviewer act as anyone else or give its own time.

use leasehold_host::{self as host, Finished, SettleAnswer, Verb};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::queue::{Claiming, Tries, worker_query};
use super::tasks::{DecisionRequest, Settlement};
use crate::extract::{Caller, Json};
use crate::long_poll::LongPoll;
use crate::problem::Problem;
use crate::state::AppState;
use crate::wire::{Answer, Task, TaskState, lease, whole};

/// The worker's routes.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(claim_batch))
        .routes(routes!(settle_and_claim))
}

/// Claim up to `count` heads of the caller's queue, in queue order; an
/// empty list when the queue is empty (after `wait_ms`, if given).
#[utoipa::path(post, path = "/v1/queue/claim-batch", operation_id = Verb::ClaimBatch.name(), tag = "queue",
    request_body = ClaimBatchRequest,
    responses(
        (status = 200, description = "The tasks claimed, in queue order; none when the queue was empty", body = ClaimedBatch),
        (status = 400, description = "Invalid input: a count outside 1–100, a lease or wait out of range", body = Problem, content_type = "application/problem+json"),
        (status = "default", description = "A problem (RFC 9457)", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = ["reviewer", "operator"])))]
async fn claim_batch(c: Caller, Json(body): Json<ClaimBatchRequest>) -> Answer<ClaimedBatch> {
    let actor = c.actor(body.actor)?;
    let roles = c.roles(body.roles)?;
    let count = body.count;
    let wait = LongPoll::new(&c, Verb::ClaimBatch, body.wait_ms, body.now)?;
    let mut claiming = Claiming::new(wait, Tries::WhileServing, &actor, &roles);
    while let Some(deadline) = claiming.next_try()? {
        let lease = lease(c.now(body.now)?, body.lease_ms);
        let query = worker_query(&actor, &roles);
        let tasks = c
            .call_at(deadline, Verb::ClaimBatch, move |x| {
                x.claim_batch(&query, lease, count)
            })
            .await?;
        if claiming.answers(&c, !tasks.is_empty()).await? {
            return Ok(axum::Json(ClaimedBatch {
                tasks: tasks.into_iter().map(Into::into).collect(),
            }));
        }
    }
    Ok(axum::Json(ClaimedBatch { tasks: Vec::new() }))
}

/// Settle what the caller finished, each task answered on its own in the
/// order given, then claim up to `count` more: one request per batch for a
/// steady worker. The settles commit in the first attempt; a wait for work
/// (`wait_ms`) then only claims.
#[utoipa::path(post, path = "/v1/queue/settle-and-claim", operation_id = Verb::SettleAndClaim.name(), tag = "queue",
    request_body = SettleAndClaimRequest,
    responses(
        (status = 200, description = "One answer per finished task, then the tasks claimed", body = SettledAndClaimed),
        (status = 400, description = "Invalid input: more than 100 finished tasks, a count outside 0–100, a lease or wait out of range", body = Problem, content_type = "application/problem+json"),
        (status = "default", description = "A problem (RFC 9457)", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = ["reviewer", "operator"])))]
async fn settle_and_claim(
    c: Caller,
    Json(body): Json<SettleAndClaimRequest>,
) -> Answer<SettledAndClaimed> {
    let actor = c.actor(body.actor)?;
    let roles = c.roles(body.roles)?;
    let count = body.count;
    let ids: Vec<String> = body.done.iter().map(|f| f.id.clone()).collect();
    let mut done: Vec<Finished> = body
        .done
        .into_iter()
        .map(|f| Finished {
            id: f.id,
            settlement: host::Settlement::from(f.settlement),
            decision: f.decision.map(Into::into),
        })
        .collect();
    // A count of 0 claims nothing, so there is nothing to wait for.
    let wait_ms = if count == 0 { None } else { body.wait_ms };
    let wait = LongPoll::new(&c, Verb::SettleAndClaim, wait_ms, body.now)?;
    // The settles commit in the first try, even while the server stops:
    // the worker's work is done and would otherwise wait for its leases.
    // Later tries only claim.
    let mut claiming = Claiming::new(wait, Tries::FirstAlways, &actor, &roles);
    let mut settled = None;
    while let Some(deadline) = claiming.next_try()? {
        let lease = lease(c.now(body.now)?, body.lease_ms);
        let query = worker_query(&actor, &roles);
        let tasks = if settled.is_none() {
            let finished = std::mem::take(&mut done);
            let a = c
                .call_at(deadline, Verb::SettleAndClaim, move |x| {
                    x.settle_and_claim(&finished, &query, lease, count)
                })
                .await?;
            settled = Some(a.settled);
            a.claimed
        } else {
            c.call_at(deadline, Verb::ClaimBatch, move |x| {
                x.claim_batch(&query, lease, count)
            })
            .await?
        };
        if claiming
            .answers(&c, !tasks.is_empty() || count == 0)
            .await?
        {
            return Ok(axum::Json(answer(&ids, settled.unwrap_or_default(), tasks)));
        }
    }
    Ok(axum::Json(answer(
        &ids,
        settled.unwrap_or_default(),
        Vec::new(),
    )))
}

fn answer(ids: &[String], settled: Vec<SettleAnswer>, tasks: Vec<host::Task>) -> SettledAndClaimed {
    SettledAndClaimed {
        settled: ids
            .iter()
            .zip(settled)
            .map(|(id, a)| SettleResult::of(id.clone(), a))
            .collect(),
        tasks: tasks.into_iter().map(Into::into).collect(),
    }
}

/// Claim several heads of the queue.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ClaimBatchRequest {
    /// How many tasks to claim at most: 1–100.
    #[schema(minimum = 1, maximum = 100)]
    #[serde(deserialize_with = "whole::u32")]
    pub count: u32,
    /// Operator only: whose claims (default: the caller).
    #[serde(default)]
    #[schema(schema_with = crate::schema::opt_name)]
    pub actor: Option<String>,
    /// Operator only: with which roles (default: the caller's).
    #[serde(default)]
    #[schema(schema_with = crate::schema::opt_names)]
    pub roles: Option<Vec<String>>,
    /// Hold each task for this long, renewable; without it a claim holds
    /// until released.
    #[serde(default)]
    #[schema(schema_with = crate::schema::opt_lease_ms)]
    #[serde(deserialize_with = "whole::opt_u32")]
    pub lease_ms: Option<u32>,
    /// A clock override: refused unless the server allows them.
    #[serde(default)]
    #[schema(schema_with = crate::schema::opt_instant)]
    #[serde(deserialize_with = "whole::opt_i64")]
    pub now: Option<i64>,
    /// With the queue empty, hold the request up to this many milliseconds
    /// (at most 30000) until a task arrives; with `now`, tried once without waiting.
    #[serde(default)]
    #[schema(schema_with = crate::schema::opt_wait_ms)]
    #[serde(deserialize_with = "whole::opt_u32")]
    pub wait_ms: Option<u32>,
}

/// A task the worker finished.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct FinishedTask {
    #[schema(schema_with = crate::schema::name)]
    pub id: String,
    pub settlement: Settlement,
    /// What was decided, checked as a settle checks it: a decision the
    /// task's outcomes refuse is this task's `refused` answer.
    #[serde(default)]
    pub decision: Option<DecisionRequest>,
}

/// Settle what the worker finished, then claim more.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SettleAndClaimRequest {
    /// What the worker finished: at most 100, each held by the caller.
    #[schema(max_items = 100)]
    pub done: Vec<FinishedTask>,
    /// How many tasks to claim at most: 0–100 (0 only settles).
    #[schema(minimum = 0, maximum = 100)]
    #[serde(deserialize_with = "whole::u32")]
    pub count: u32,
    /// Operator only: whose work (default: the caller).
    #[serde(default)]
    #[schema(schema_with = crate::schema::opt_name)]
    pub actor: Option<String>,
    /// Operator only: with which roles (default: the caller's).
    #[serde(default)]
    #[schema(schema_with = crate::schema::opt_names)]
    pub roles: Option<Vec<String>>,
    /// Hold each claimed task for this long, renewable.
    #[serde(default)]
    #[schema(schema_with = crate::schema::opt_lease_ms)]
    #[serde(deserialize_with = "whole::opt_u32")]
    pub lease_ms: Option<u32>,
    /// A clock override: refused unless the server allows them.
    #[serde(default)]
    #[schema(schema_with = crate::schema::opt_instant)]
    #[serde(deserialize_with = "whole::opt_i64")]
    pub now: Option<i64>,
    /// With nothing to claim, hold the request up to this many milliseconds
    /// (at most 30000) until a task arrives; the settles are not held back.
    #[serde(default)]
    #[schema(schema_with = crate::schema::opt_wait_ms)]
    #[serde(deserialize_with = "whole::opt_u32")]
    pub wait_ms: Option<u32>,
}

/// What `claim-batch` claimed.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ClaimedBatch {
    /// In queue order; empty when the queue was empty.
    pub tasks: Vec<Task>,
}

/// What became of one finished task.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum SettleOutcome {
    /// Settled by this request.
    Settled,
    /// Already settled; `state` says how. Unchanged.
    Already,
    /// Pending, but not held by the caller; `holder` names who holds it,
    /// null when nobody does. Unchanged.
    NotHeld,
    /// No such task.
    NotFound,
    /// The entry was refused (`reason` says why: a decision its outcomes
    /// refuse, a malformed id). Unchanged.
    Refused,
}

/// One finished task's answer.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct SettleResult {
    pub id: String,
    pub answer: SettleOutcome,
    /// With `already`: the state it was settled in.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state: Option<TaskState>,
    /// With `not_held`: who holds it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub holder: Option<String>,
    /// With `refused`: why.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

impl SettleResult {
    fn of(id: String, a: SettleAnswer) -> Self {
        let (answer, state, holder, reason) = match a {
            SettleAnswer::Settled => (SettleOutcome::Settled, None, None, None),
            SettleAnswer::Already(s) => (SettleOutcome::Already, Some(s.into()), None, None),
            SettleAnswer::NotHeld(h) => (SettleOutcome::NotHeld, None, h, None),
            SettleAnswer::NotFound => (SettleOutcome::NotFound, None, None, None),
            SettleAnswer::Refused(why) => (SettleOutcome::Refused, None, None, Some(why)),
        };
        SettleResult {
            id,
            answer,
            state,
            holder,
            reason,
        }
    }
}

/// What `settle-and-claim` did.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct SettledAndClaimed {
    /// One per finished task, in the order given.
    pub settled: Vec<SettleResult>,
    /// The tasks claimed, in queue order.
    pub tasks: Vec<Task>,
}
