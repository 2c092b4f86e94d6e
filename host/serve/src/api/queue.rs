//! A reviewer's queue: one page of the tasks it may take, and claiming its
//! head (`claim-next`), which may wait for work as a long-poll
//! (`crate::long_poll`). Handlers must never choose a tenant, and never let
//! a reviewer act as anyone else or give its own time.

use leasehold_host::{self as host, QueueQuery, Verb};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::extract::{Caller, Json, Query};
use crate::long_poll::LongPoll;
use crate::problem::{ApiError, Problem};
use crate::state::AppState;
use crate::wire::{Answer, DEFAULT_PAGE, Page, Task, lease, whole};

/// The queue's routes.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(queue))
        .routes(routes!(claim_next))
}

/// Queued tasks the caller may take, urgent first, then oldest.
#[utoipa::path(get, path = "/v1/queue", operation_id = Verb::Queue.name(), tag = "queue",
    params(QueueParams),
    responses(
        (status = 200, description = "One page of the queue", body = Page),
        (status = 400, description = "Invalid input, or an `after` this service did not give for this queue", body = Problem, content_type = "application/problem+json"),
        (status = "default", description = "A problem (RFC 9457)", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = ["reviewer", "operator"])))]
async fn queue(c: Caller, Query(q): Query<QueueParams>) -> Answer<Page> {
    let actor = c.actor(q.actor)?;
    let roles = c.roles(q.roles)?;
    // A queue's cursor is a position in the queue order, bound to the
    // actor whose queue it pages.
    let list = format!("{}:{actor}", Verb::Queue.name());
    let query = QueueQuery {
        roles,
        actor: Some(actor),
        limit: q.limit.unwrap_or(DEFAULT_PAGE),
        after: c.open_cursor(&list, q.after)?,
    };
    let page = c.call(Verb::Queue, move |x| x.queue(&query)).await?;
    Ok(axum::Json(Page {
        tasks: page.tasks.into_iter().map(Into::into).collect(),
        next: c.seal_cursor(&list, page.next)?,
    }))
}

/// Claim the head of the caller's queue; `task` is null when it is empty.
#[utoipa::path(post, path = "/v1/queue/claim-next", operation_id = Verb::ClaimNext.name(), tag = "queue",
    request_body = Option<ClaimNextRequest>,
    responses(
        (status = 200, description = "The claimed task, or null", body = ClaimedNext),
        (status = "default", description = "A problem (RFC 9457)", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = ["reviewer", "operator"])))]
async fn claim_next(c: Caller, Json(body): Json<ClaimNextRequest>) -> Answer<ClaimedNext> {
    let actor = c.actor(body.actor)?;
    let roles = c.roles(body.roles)?;
    let wait = LongPoll::new(&c, Verb::ClaimNext, body.wait_ms, body.now)?;
    let mut claiming = Claiming::new(wait, Tries::WhileServing, &actor, &roles);
    while let Some(deadline) = claiming.next_try()? {
        let lease = lease(c.now(body.now)?, body.lease_ms);
        let query = worker_query(&actor, &roles);
        let task = c
            .call_at(deadline, Verb::ClaimNext, move |x| {
                x.claim_next(&query, lease)
            })
            .await?;
        if claiming.answers(&c, task.is_some()).await? {
            return Ok(axum::Json(ClaimedNext {
                task: task.map(Into::into),
            }));
        }
    }
    Ok(axum::Json(ClaimedNext { task: None }))
}

/// The query a claiming route claims with: `actor`'s queue over `roles`.
pub(super) fn worker_query(actor: &str, roles: &[String]) -> QueueQuery {
    QueueQuery {
        roles: roles.to_vec(),
        actor: Some(actor.to_owned()),
        limit: 1,
        after: None,
    }
}

/// Whether a claiming route's first try is made even once the server has
/// begun to stop.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Tries {
    /// Every try only while the server serves.
    WhileServing,
    /// The first try whatever (it settles finished work, which would
    /// otherwise wait for its leases), the later ones while it serves.
    FirstAlways,
}

/// The long-poll every claiming route runs (`claim-next`, `claim-batch`,
/// `settle-and-claim`): while [`next_try`](Self::next_try) gives a
/// deadline, the route tries, and answers its try once
/// [`answers`](Self::answers) says so (it found work, or the wait is over);
/// otherwise that has waited for a commit that could offer the caller a
/// task. A task comes to the queue only so: an open, a release, or the
/// sweeper returning a lapsed lease, each leaving it open.
pub(super) struct Claiming<'a> {
    wait: LongPoll,
    tries: Tries,
    first: bool,
    actor: &'a str,
    roles: &'a [String],
}

impl<'a> Claiming<'a> {
    pub(super) fn new(wait: LongPoll, tries: Tries, actor: &'a str, roles: &'a [String]) -> Self {
        Claiming {
            wait,
            tries,
            first: true,
            actor,
            roles,
        }
    }

    /// The deadline of the next try, or none once the server has begun to
    /// stop (the route then answers that it found nothing).
    pub(super) fn next_try(&mut self) -> Result<Option<std::time::Instant>, ApiError> {
        let serving = self.wait.may_try()?;
        let first = std::mem::replace(&mut self.first, false);
        if serving || (first && self.tries == Tries::FirstAlways) {
            Ok(Some(self.wait.attempt()))
        } else {
            Ok(None)
        }
    }

    /// Whether to answer the try just made (`found`: it found work); if
    /// not, waits first for what could change that.
    pub(super) async fn answers(&mut self, c: &Caller, found: bool) -> Result<bool, ApiError> {
        if found || self.wait.over() {
            return Ok(true);
        }
        if !self.wait.ready(c).await? {
            let (actor, roles) = (self.actor, self.roles);
            self.wait
                .wait(c, None, |change| could_offer(change, actor, roles))
                .await;
        }
        Ok(false)
    }
}

/// Whether a change could put a task in the queue `claim-next` reads for
/// `actor` with `roles`: a task left open, offered to one of the roles (or
/// to no role in particular), that does not exclude the actor. It may say
/// yes when the claim then finds nothing; never no when it would.
pub(super) fn could_offer(change: &host::Change, actor: &str, roles: &[String]) -> bool {
    match change {
        host::Change::Task(t) => {
            let e = &t.entry;
            e.after == host::TaskState::Open
                && !e.excluded_actors.iter().any(|a| a == actor)
                && (e.candidate_roles.is_empty()
                    || e.candidate_roles.iter().any(|r| roles.contains(r)))
        }
        host::Change::Timer(_) => false,
    }
}

#[derive(Debug, Deserialize, ToSchema, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct QueueParams {
    /// Tasks per page (default 20).
    #[param(schema_with = crate::schema::limit)]
    #[serde(default)]
    #[serde(deserialize_with = "whole::opt_u32")]
    pub limit: Option<u32>,
    /// The `next` of the previous page.
    #[param(schema_with = crate::schema::cursor)]
    pub after: Option<String>,
    /// Operator only: whose queue (default: the caller's).
    #[param(schema_with = crate::schema::name)]
    pub actor: Option<String>,
    /// Operator only: the roles, one `roles=` each (default: the
    /// caller's).
    #[serde(default)]
    #[param(schema_with = crate::schema::names)]
    pub roles: Option<Vec<String>>,
}

/// Claim the head of the queue; without a body, as the caller, untimed,
/// without waiting.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ClaimNextRequest {
    /// Operator only: whose claim (default: the caller).
    #[serde(default)]
    #[schema(schema_with = crate::schema::opt_name)]
    pub actor: Option<String>,
    /// Operator only: with which roles (default: the caller's).
    #[serde(default)]
    #[schema(schema_with = crate::schema::opt_names)]
    pub roles: Option<Vec<String>>,
    /// Hold the task for this long, renewable; without it the claim holds
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

/// What `claim-next` claimed; `task` is null when the queue was empty.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ClaimedNext {
    pub task: Option<Task>,
}
