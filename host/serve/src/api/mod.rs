//! The handlers under `/v1`: one per WIT verb, each turning its request into
//! one engine call as the caller's credential allows, and its answer into
//! JSON. Each handler's `#[utoipa::path]` is the OpenAPI document's entry
//! for it. Handlers must never choose a tenant, and never let a reviewer act
//! as anyone else or give its own time.

use axum::http::StatusCode;
use leasehold_host::{self as host, Lease, QueueQuery};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::auth::Scope;
use crate::extract::{Caller, Json, Path, Query};
use crate::feeds::{Follower, PAGE};
use crate::model::*;
use crate::problem::{ApiError, Problem};
use crate::state::AppState;

const DEFAULT_PAGE: u32 = 20;
const DEFAULT_SWEEP: u32 = 100;
const DEFAULT_TIMERS: u32 = 10;
const DEFAULT_TRIM: u32 = 1000;

/// Every API route, each registered with its OpenAPI entry.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(open))
        .routes(routes!(get))
        .routes(routes!(claim))
        .routes(routes!(release))
        .routes(routes!(take_over))
        .routes(routes!(renew))
        .routes(routes!(settle))
        .routes(routes!(escalate))
        .routes(routes!(queue))
        .routes(routes!(claim_next))
        .routes(routes!(for_case))
        .routes(routes!(overdue))
        .routes(routes!(reclaim_lapsed))
        .routes(routes!(expire_overdue))
        .routes(routes!(withdraw_run))
        .routes(routes!(seal))
        .routes(routes!(is_sealed))
        .routes(routes!(arm))
        .routes(routes!(claim_due))
        .routes(routes!(disarm))
        .routes(routes!(disarm_run))
        .routes(routes!(open_count))
        .routes(routes!(pending_count))
        .routes(routes!(leased_count))
        .routes(routes!(next_due))
        .routes(routes!(next_lease_end))
        .routes(routes!(check))
        .routes(routes!(history))
        .routes(routes!(entry_place))
        .routes(routes!(feed))
        .routes(routes!(trim))
        .routes(routes!(whoami))
}

type Answer<T> = Result<axum::Json<T>, ApiError>;

fn lease(now: i64, lease_ms: Option<u32>) -> Option<Lease> {
    lease_ms.map(|lease_ms| Lease { now, lease_ms })
}

fn refs(list: &[String]) -> Vec<&str> {
    list.iter().map(String::as_str).collect()
}

/// Whether a reviewer may see a task: it holds it, or it may take it.
fn visible(c: &Caller, t: &host::Task) -> bool {
    if c.principal.scope != Scope::Reviewer {
        return true;
    }
    let me = &c.principal.actor;
    t.assignee.as_ref() == Some(me)
        || (!t.excluded_actors.contains(me) && t.admits_roles(&c.principal.roles))
}

/// A refusal as a reviewer may hear it: about a task it may not see, every
/// verb answers as `get` does, 404, so no answer tells it the task exists.
/// Every refusal a reviewer hears about a task (a missing one's included)
/// reads the task once to decide, so that a hidden task and a missing one
/// cost the same work and take the same time.
async fn hidden_as_missing<T>(
    c: &Caller,
    id: &str,
    answer: Result<T, ApiError>,
) -> Result<T, ApiError> {
    if c.principal.scope != Scope::Reviewer {
        return answer;
    }
    let refusal = match answer {
        Err(e @ (ApiError::Refused(_) | ApiError::NotFound(_))) => e,
        other => return other,
    };
    let key = id.to_owned();
    match c.call("get", move |x| x.get(&key)).await? {
        Some(task) if visible(c, &task) && !matches!(refusal, ApiError::NotFound(_)) => {
            Err(refusal)
        }
        _ => Err(ApiError::NotFound(format!("no task {id}"))),
    }
}

/// Open a task. First open wins: if the id exists, the stored task is
/// answered unchanged.
#[utoipa::path(post, path = "/v1/tasks", operation_id = "open", tag = "tasks",
    request_body = NewTask,
    responses(
        (status = 200, description = "The task as stored", body = Task),
        (status = 400, description = "Invalid input", body = Problem, content_type = "application/problem+json"),
        (status = "default", description = "A problem (RFC 9457)", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = ["service", "operator"])))]
async fn open(c: Caller, Json(body): Json<NewTask>) -> Answer<Task> {
    let created = c.now(body.created_at)?;
    let task = body.into_host(created);
    let stored = c.call("open", move |x| x.open(&task)).await?;
    Ok(axum::Json(stored.into()))
}

/// One task. A reviewer sees only tasks it holds or may take.
#[utoipa::path(get, path = "/v1/tasks/{id}", operation_id = "get", tag = "tasks",
    params(TaskPath),
    responses(
        (status = 200, description = "The task", body = Task),
        (status = 404, description = "No such task", body = Problem, content_type = "application/problem+json"),
        (status = "default", description = "A problem (RFC 9457)", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = ["reviewer", "service", "operator"])))]
async fn get(c: Caller, Path(TaskPath { id }): Path<TaskPath>) -> Answer<Task> {
    let key = id.clone();
    let found = c.call("get", move |x| x.get(&key)).await?;
    match found {
        Some(task) if visible(&c, &task) => Ok(axum::Json(task.into())),
        _ => Err(ApiError::NotFound(format!("no task {id}"))),
    }
}

/// Reserve a task for the caller (an operator may name the actor), under a
/// lease if `lease_ms` is given.
#[utoipa::path(post, path = "/v1/tasks/{id}/claim", operation_id = "claim", tag = "tasks",
    params(TaskPath),
    request_body = Option<ClaimRequest>,
    responses(
        (status = 200, description = "The task, now held by the actor", body = Task),
        (status = 409, description = "A claim-ladder refusal: excluded, wrong-role, not-pending, already-claimed", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such task", body = Problem, content_type = "application/problem+json"),
        (status = "default", description = "A problem (RFC 9457)", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = ["reviewer", "operator"])))]
async fn claim(
    c: Caller,
    Path(TaskPath { id }): Path<TaskPath>,
    Json(body): Json<ClaimRequest>,
) -> Answer<Task> {
    let actor = c.actor(body.actor)?;
    let roles = c.roles(body.roles)?;
    let lease = lease(c.now(body.now)?, body.lease_ms);
    let key = id.clone();
    let answer = c
        .call("claim", move |x| {
            x.claim(&key, &actor, &refs(&roles), lease)
        })
        .await;
    let task = hidden_as_missing(&c, &id, answer).await?;
    Ok(axum::Json(task.into()))
}

/// Give a claimed task back; only its holder may.
#[utoipa::path(post, path = "/v1/tasks/{id}/release", operation_id = "release", tag = "tasks",
    params(TaskPath),
    request_body = Option<ReleaseRequest>,
    responses(
        (status = 204, description = "Released"),
        (status = 409, description = "not-held", body = Problem, content_type = "application/problem+json"),
        (status = "default", description = "A problem (RFC 9457)", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = ["reviewer", "operator"])))]
async fn release(
    c: Caller,
    Path(TaskPath { id }): Path<TaskPath>,
    Json(body): Json<ReleaseRequest>,
) -> Result<StatusCode, ApiError> {
    let actor = c.actor(body.actor)?;
    let key = id.clone();
    let answer = c.call("release", move |x| x.release(&key, &actor)).await;
    hidden_as_missing(&c, &id, answer).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Move a claim from `from` to `actor` (default: the operator).
#[utoipa::path(post, path = "/v1/tasks/{id}/take-over", operation_id = "take-over", tag = "tasks",
    params(TaskPath),
    request_body = TakeOverRequest,
    responses(
        (status = 200, description = "The task, now held by the actor", body = Task),
        (status = 409, description = "A claim-ladder refusal, or not-held by `from`", body = Problem, content_type = "application/problem+json"),
        (status = "default", description = "A problem (RFC 9457)", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = ["operator"])))]
async fn take_over(
    c: Caller,
    Path(TaskPath { id }): Path<TaskPath>,
    Json(body): Json<TakeOverRequest>,
) -> Answer<Task> {
    let actor = c.actor(body.actor)?;
    let roles = c.roles(body.roles)?;
    let lease = lease(c.now(body.now)?, body.lease_ms);
    let from = body.from;
    let task = c
        .call("take-over", move |x| {
            x.take_over(&id, &from, &actor, &refs(&roles), lease)
        })
        .await?;
    Ok(axum::Json(task.into()))
}

/// The holder extends its lease to end `lease_ms` from now.
#[utoipa::path(post, path = "/v1/tasks/{id}/renew", operation_id = "renew", tag = "tasks",
    params(TaskPath),
    request_body = RenewRequest,
    responses(
        (status = 200, description = "The task with its new lease end", body = Task),
        (status = 409, description = "not-held", body = Problem, content_type = "application/problem+json"),
        (status = "default", description = "A problem (RFC 9457)", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = ["reviewer", "operator"])))]
async fn renew(
    c: Caller,
    Path(TaskPath { id }): Path<TaskPath>,
    Json(body): Json<RenewRequest>,
) -> Answer<Task> {
    let actor = c.actor(body.actor)?;
    let now = c.now(body.now)?;
    let lease_ms = body.lease_ms;
    let key = id.clone();
    let answer = c
        .call("renew", move |x| x.renew(&key, &actor, now, lease_ms))
        .await;
    let task = hidden_as_missing(&c, &id, answer).await?;
    Ok(axum::Json(task.into()))
}

/// Settle a pending task. A reviewer settles only a task it holds; a
/// service or operator may settle without a holder.
#[utoipa::path(post, path = "/v1/tasks/{id}/settle", operation_id = "settle", tag = "tasks",
    params(TaskPath),
    request_body = SettleRequest,
    responses(
        (status = 200, description = "Whether this call settled the task", body = Settled),
        (status = 409, description = "not-held", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such task", body = Problem, content_type = "application/problem+json"),
        (status = "default", description = "A problem (RFC 9457)", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = ["reviewer", "service", "operator"])))]
async fn settle(
    c: Caller,
    Path(TaskPath { id }): Path<TaskPath>,
    Json(body): Json<SettleRequest>,
) -> Answer<Settled> {
    let holder = if c.principal.scope == Scope::Reviewer {
        Some(c.actor(body.holder)?)
    } else {
        body.holder
    };
    let settlement = host::Settlement::from(body.settlement);
    let key = id.clone();
    let answer = c
        .call("settle", move |x| {
            x.settle(&key, settlement, holder.as_deref())
        })
        .await;
    let settled = hidden_as_missing(&c, &id, answer).await?;
    Ok(axum::Json(Settled { settled }))
}

/// Escalate a pending task: back to the queue, with `escalate_to` added to
/// its candidate roles.
#[utoipa::path(post, path = "/v1/tasks/{id}/escalate", operation_id = "escalate", tag = "tasks",
    params(TaskPath),
    responses(
        (status = 200, description = "The task as it now stands", body = Task),
        (status = 404, description = "No such task", body = Problem, content_type = "application/problem+json"),
        (status = "default", description = "A problem (RFC 9457)", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = ["service", "operator"])))]
async fn escalate(c: Caller, Path(TaskPath { id }): Path<TaskPath>) -> Answer<Task> {
    let task = c.call("escalate", move |x| x.escalate(&id)).await?;
    Ok(axum::Json(task.into()))
}

/// Queued tasks the caller may take, urgent first, then oldest.
#[utoipa::path(get, path = "/v1/queue", operation_id = "queue", tag = "queue",
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
    let list = format!("queue:{actor}");
    let query = QueueQuery {
        roles,
        actor: Some(actor),
        limit: q.limit.unwrap_or(DEFAULT_PAGE),
        after: c.open_cursor(&list, q.after)?,
    };
    let page = c.call("queue", move |x| x.queue(&query)).await?;
    Ok(axum::Json(Page {
        tasks: page.tasks.into_iter().map(Into::into).collect(),
        next: c.seal_cursor(&list, page.next)?,
    }))
}

/// Claim the head of the caller's queue; `task` is null when it is empty.
#[utoipa::path(post, path = "/v1/queue/claim-next", operation_id = "claim-next", tag = "queue",
    request_body = Option<ClaimNextRequest>,
    responses(
        (status = 200, description = "The claimed task, or null", body = ClaimedNext),
        (status = "default", description = "A problem (RFC 9457)", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = ["reviewer", "operator"])))]
async fn claim_next(c: Caller, Json(body): Json<ClaimNextRequest>) -> Answer<ClaimedNext> {
    let actor = c.actor(body.actor)?;
    let roles = c.roles(body.roles)?;
    let mut wait = Waiting::new(&c, body.wait_ms, body.now)?;
    loop {
        if !wait.may_try()? {
            return Ok(axum::Json(ClaimedNext { task: None }));
        }
        let lease = lease(c.now(body.now)?, body.lease_ms);
        let query = QueueQuery {
            roles: roles.clone(),
            actor: Some(actor.clone()),
            limit: 1,
            after: None,
        };
        let task = c
            .call_at(wait.attempt(), "claim-next", move |x| {
                x.claim_next(&query, lease)
            })
            .await?;
        if task.is_some() || wait.over() {
            return Ok(axum::Json(ClaimedNext {
                task: task.map(Into::into),
            }));
        }
        if wait.ready(&c).await? {
            continue;
        }
        // A task comes to the queue only by a commit: an open, a release,
        // or the sweeper returning a lapsed lease; each leaves it open.
        wait.until_change_or(&c, None, |change| could_offer(change, &actor, &roles))
            .await;
    }
}

/// Whether a change could put a task in the queue `claim-next` reads for
/// `actor` with `roles`: a task left open, offered to one of the roles (or
/// to no role in particular), that does not exclude the actor. It may say
/// yes when the claim then finds nothing; never no when it would.
fn could_offer(change: &host::Change, actor: &str, roles: &[String]) -> bool {
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

/// Counts a request while it waits, however its wait ends (a client that
/// goes away drops it).
struct WaitingGauge;

impl WaitingGauge {
    fn new() -> Self {
        metrics::gauge!("leasehold_requests_waiting").increment(1.0);
        WaitingGauge
    }
}

impl Drop for WaitingGauge {
    fn drop(&mut self) {
        metrics::gauge!("leasehold_requests_waiting").decrement(1.0);
    }
}

/// A long-poll: a claim tried again each time the tenant commits a change
/// that could give it something (or an instant passes) until it finds
/// something or the wait ends. It follows the tenant's feed, sharing the
/// reads with the tenant's event streams, so a commit that cannot matter to
/// it (a settle, another queue's task) costs it nothing. Before it first
/// waits it reads the feed's head and tries once more, so every change that
/// try did not see lies after where it follows from. While it waits, no
/// call runs and nothing is held but its place among the long-polls: a
/// client that goes away ends the request there, and claims nothing.
///
/// Every try after the first is made only while the credential still names
/// the same caller (a reload that revokes it, or its expiry, wakes the wait
/// and the request is answered 401), and none once the server begins to
/// shut down (the request is answered as an empty wait's end).
struct Waiting {
    follower: Option<Follower>,
    end: std::time::Instant,
    first: Option<std::time::Instant>,
    budget: std::time::Duration,
    tried: bool,
    credential: crate::auth::HeldCredential,
    stopping: tokio::sync::watch::Receiver<bool>,
    _hold: Option<crate::holds::Hold>,
}

impl Waiting {
    fn new(c: &Caller, wait_ms: Option<u32>, now: Option<i64>) -> Result<Waiting, ApiError> {
        let wait_ms = wait_ms.unwrap_or(0);
        if wait_ms > crate::schema::MAX_WAIT_MS {
            return Err(ApiError::invalid(
                "wait_ms",
                format!("at most {} milliseconds", crate::schema::MAX_WAIT_MS),
            ));
        }
        let state = c.state();
        // A wait runs by the server's clock: with a given `now`, the claim
        // is tried once.
        let (follower, hold) = if wait_ms > 0 && now.is_none() {
            let hold = state.subscribers.poll(&c.principal)?;
            let name = c.tenant.name();
            let feed = state
                .subscribers
                .feeds
                .tenant(name, || Ok(state.engine.watch(name)?))?;
            (Some(Follower::new(feed)), Some(hold))
        } else {
            (None, None)
        };
        let started = std::time::Instant::now();
        Ok(Waiting {
            follower,
            end: started + std::time::Duration::from_millis(u64::from(wait_ms)),
            first: Some(c.deadline()),
            budget: crate::state::budget(&state.options, "claim-due"),
            tried: false,
            credential: state
                .credentials
                .hold(c.authorization().map(str::to_owned), c.principal.clone()),
            stopping: state.stopping(),
            _hold: hold,
        })
    }

    /// Whether to make the next try: not once the server is shutting down
    /// (`false`), and never for a credential that no longer holds (401).
    fn may_try(&mut self) -> Result<bool, ApiError> {
        let first = !self.tried;
        self.tried = true;
        if *self.stopping.borrow() {
            return Ok(false);
        }
        if !first && !self.credential.holds() {
            return Err(ApiError::Unauthorized(
                "the credential was revoked or expired while the request waited".to_owned(),
            ));
        }
        Ok(true)
    }

    /// The deadline of the next try: the request's for the first, then a
    /// fresh one each.
    fn attempt(&mut self) -> std::time::Instant {
        self.first
            .take()
            .unwrap_or_else(|| std::time::Instant::now() + self.budget)
    }

    fn over(&self) -> bool {
        self.follower.is_none() || std::time::Instant::now() >= self.end
    }

    /// Before the first wait, reads where the feed stands and answers true:
    /// the caller tries once more before it waits.
    async fn ready(&mut self, c: &Caller) -> Result<bool, ApiError> {
        match self.follower.as_mut() {
            Some(f) if !f.following() => {
                f.begin_at(crate::events::head(c.state(), &c.tenant).await?);
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    /// Waits for a committed change that `wakes`, the instant `at` (by the
    /// server's clock), the end of the wait, the end of the credential or
    /// the start of shutdown, whichever comes first.
    async fn until_change_or(
        &mut self,
        c: &Caller,
        at: Option<i64>,
        wakes: impl Fn(&host::Change) -> bool,
    ) {
        let end = tokio::time::Instant::from_std(self.end);
        let until = match at {
            Some(at) => {
                let ms = at.saturating_sub(crate::state::clock_ms()).max(0) as u64;
                end.min(tokio::time::Instant::now() + std::time::Duration::from_millis(ms))
            }
            None => end,
        };
        let Some(follower) = self.follower.as_mut() else {
            return;
        };
        let (state, tenant) = (c.state(), &c.tenant);
        let read = |after: String| crate::events::read(state, tenant, Some(after), PAGE);
        let _waiting = WaitingGauge::new();
        let stopping = self.stopping.wait_for(|s| *s);
        tokio::select! {
            () = follower.wait(read, wakes) => {}
            () = tokio::time::sleep_until(until) => {}
            () = self.credential.lapsed() => {}
            _ = stopping => {}
        }
    }
}

/// Every task of a case, in any state, oldest first. A reviewer sees only
/// the tasks it holds or may take; the cursor walks the whole case, sealed,
/// so a page may come back with fewer tasks than asked, or none, and a
/// `next`.
#[utoipa::path(get, path = "/v1/cases/{case}/tasks", operation_id = "for-case", tag = "tasks",
    params(CasePath, PageParams),
    responses(
        (status = 200, description = "One page of the case's tasks", body = Page),
        (status = 400, description = "Invalid input, or an `after` this service did not give for this case", body = Problem, content_type = "application/problem+json"),
        (status = "default", description = "A problem (RFC 9457)", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = ["reviewer", "service", "operator"])))]
async fn for_case(
    c: Caller,
    Path(CasePath { case }): Path<CasePath>,
    Query(q): Query<PageParams>,
) -> Answer<Page> {
    let limit = q.limit.unwrap_or(DEFAULT_PAGE);
    let list = format!("for-case:{case}");
    let after = c.open_cursor(&list, q.after)?;
    let page = c
        .call("for-case", move |x| {
            x.for_case(&case, limit, after.as_deref())
        })
        .await?;
    Ok(axum::Json(Page {
        tasks: page
            .tasks
            .into_iter()
            .filter(|t| visible(&c, t))
            .map(Into::into)
            .collect(),
        next: c.seal_cursor(&list, page.next)?,
    }))
}

/// Tasks past their due time that still await expiry, earliest first.
#[utoipa::path(get, path = "/v1/overdue", operation_id = "overdue", tag = "sweeps",
    params(OverdueParams),
    responses(
        (status = 200, description = "Overdue tasks", body = TaskList),
        (status = "default", description = "A problem (RFC 9457)", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = ["service", "operator"])))]
async fn overdue(c: Caller, Query(q): Query<OverdueParams>) -> Answer<TaskList> {
    let now = c.now(q.now)?;
    let limit = q.limit.unwrap_or(DEFAULT_PAGE);
    let tasks = c.call("overdue", move |x| x.overdue(now, limit)).await?;
    Ok(axum::Json(TaskList {
        tasks: tasks.into_iter().map(Into::into).collect(),
    }))
}

/// Return tasks whose lease has lapsed to the queue.
#[utoipa::path(post, path = "/v1/reclaim-lapsed", operation_id = "reclaim-lapsed", tag = "sweeps",
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
        .call("reclaim-lapsed", move |x| x.reclaim_lapsed(now, limit))
        .await?;
    Ok(axum::Json(TaskList {
        tasks: tasks.into_iter().map(Into::into).collect(),
    }))
}

/// Act on tasks past their due time by their `on_expiry`: `escalate`
/// escalates a task, `deny` and `proceed` settle it `expired`. The server's
/// sweeper does this by itself unless it runs with `--no-sweep`.
#[utoipa::path(post, path = "/v1/expire-overdue", operation_id = "expire-overdue", tag = "sweeps",
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
        .call("expire-overdue", move |x| x.expire_overdue(now, limit))
        .await?;
    Ok(axum::Json(TaskList {
        tasks: tasks.into_iter().map(Into::into).collect(),
    }))
}

/// Withdraw the run's awaited tasks that are still pending.
#[utoipa::path(post, path = "/v1/runs/{run}/withdraw", operation_id = "withdraw-run", tag = "runs",
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
        .call("withdraw-run", move |x| {
            x.withdraw_run(&run, &refs(&awaited))
        })
        .await?;
    Ok(axum::Json(Withdrawn { withdrawn }))
}

/// Seal a run: retire its timers and withdraw its awaited pending tasks.
#[utoipa::path(post, path = "/v1/runs/{run}/seal", operation_id = "seal", tag = "runs",
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
        .call("seal", move |x| x.seal(&run, &refs(&awaited)))
        .await?;
    Ok(axum::Json(SealOutcome {
        timers_disarmed: o.timers_disarmed,
        tasks_withdrawn: o.tasks_withdrawn,
    }))
}

/// Whether a run is sealed.
#[utoipa::path(get, path = "/v1/runs/{run}", operation_id = "is-sealed", tag = "runs",
    params(RunPath),
    responses(
        (status = 200, description = "The run's seal", body = RunStatus),
        (status = "default", description = "A problem (RFC 9457)", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = ["service", "operator"])))]
async fn is_sealed(c: Caller, Path(RunPath { run }): Path<RunPath>) -> Answer<RunStatus> {
    let key = run.clone();
    let sealed = c.call("is-sealed", move |x| x.is_sealed(&key)).await?;
    Ok(axum::Json(RunStatus { run, sealed }))
}

/// Arm a durable timer. First arming wins.
#[utoipa::path(post, path = "/v1/timers", operation_id = "arm", tag = "timers",
    request_body = Timer,
    responses(
        (status = 200, description = "What arming did", body = Armed),
        (status = "default", description = "A problem (RFC 9457)", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = ["service", "operator"])))]
async fn arm(c: Caller, Json(body): Json<Timer>) -> Answer<Armed> {
    let timer = host::Timer::from(body);
    let outcome = c.call("arm", move |x| x.arm(&timer)).await?;
    Ok(axum::Json(Armed {
        outcome: outcome.into(),
    }))
}

/// Claim due timers, each leased for `lease_ms`.
#[utoipa::path(post, path = "/v1/timers/claim-due", operation_id = "claim-due", tag = "timers",
    request_body = ClaimDueRequest,
    responses(
        (status = 200, description = "The timers claimed", body = TimerList),
        (status = "default", description = "A problem (RFC 9457)", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = ["service", "operator"])))]
async fn claim_due(c: Caller, Json(body): Json<ClaimDueRequest>) -> Answer<TimerList> {
    let limit = body.limit.unwrap_or(DEFAULT_TIMERS);
    let lease_ms = body.lease_ms;
    let mut wait = Waiting::new(&c, body.wait_ms, body.now)?;
    loop {
        if !wait.may_try()? {
            return Ok(axum::Json(TimerList { timers: Vec::new() }));
        }
        let now = c.now(body.now)?;
        let timers = c
            .call_at(wait.attempt(), "claim-due", move |x| {
                x.claim_due(now, limit, lease_ms)
            })
            .await?;
        if !timers.is_empty() || wait.over() {
            return Ok(axum::Json(TimerList {
                timers: timers.into_iter().map(Into::into).collect(),
            }));
        }
        if wait.ready(&c).await? {
            continue;
        }
        // Something may become due by time alone: a timer's fire time, or
        // the end of another worker's lease; else only by a change of a
        // timer.
        let next = c
            .call_at(wait.attempt(), "next-due", |x| x.next_due())
            .await?;
        wait.until_change_or(&c, next, |change| matches!(change, host::Change::Timer(_)))
            .await;
    }
}

/// Retire one timer.
#[utoipa::path(delete, path = "/v1/runs/{run}/timers/{effect}", operation_id = "disarm", tag = "timers",
    params(TimerPath),
    responses(
        (status = 200, description = "Whether the timer existed", body = Disarmed),
        (status = "default", description = "A problem (RFC 9457)", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = ["service", "operator"])))]
async fn disarm(c: Caller, Path(TimerPath { run, effect }): Path<TimerPath>) -> Answer<Disarmed> {
    let disarmed = c.call("disarm", move |x| x.disarm(&run, &effect)).await?;
    Ok(axum::Json(Disarmed { disarmed }))
}

/// Retire every timer of a run.
#[utoipa::path(delete, path = "/v1/runs/{run}/timers", operation_id = "disarm-run", tag = "timers",
    params(RunPath),
    responses(
        (status = 200, description = "How many timers were retired", body = DisarmedRun),
        (status = "default", description = "A problem (RFC 9457)", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = ["service", "operator"])))]
async fn disarm_run(c: Caller, Path(RunPath { run }): Path<RunPath>) -> Answer<DisarmedRun> {
    let disarmed = c.call("disarm-run", move |x| x.disarm_run(&run)).await?;
    Ok(axum::Json(DisarmedRun { disarmed }))
}

/// Pending tasks (claimed ones count).
#[utoipa::path(get, path = "/v1/stats/open-count", operation_id = "open-count", tag = "stats",
    responses(
        (status = 200, description = "The count", body = Count),
        (status = "default", description = "A problem (RFC 9457)", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = ["operator"])))]
async fn open_count(c: Caller) -> Answer<Count> {
    let count = c.call("open-count", |x| x.open_count()).await?;
    Ok(axum::Json(Count { count }))
}

/// Armed timers.
#[utoipa::path(get, path = "/v1/stats/pending-count", operation_id = "pending-count", tag = "stats",
    responses(
        (status = 200, description = "The count", body = Count),
        (status = "default", description = "A problem (RFC 9457)", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = ["operator"])))]
async fn pending_count(c: Caller) -> Answer<Count> {
    let count = c.call("pending-count", |x| x.pending_count()).await?;
    Ok(axum::Json(Count { count }))
}

/// Tasks claimed under a lease, lapsed or not.
#[utoipa::path(get, path = "/v1/stats/leased-count", operation_id = "leased-count", tag = "stats",
    responses(
        (status = 200, description = "The count", body = Count),
        (status = "default", description = "A problem (RFC 9457)", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = ["operator"])))]
async fn leased_count(c: Caller) -> Answer<Count> {
    let count = c.call("leased-count", |x| x.leased_count()).await?;
    Ok(axum::Json(Count { count }))
}

/// When the next armed timer becomes claimable.
#[utoipa::path(get, path = "/v1/stats/next-due", operation_id = "next-due", tag = "stats",
    responses(
        (status = 200, description = "The instant, or null", body = NextAt),
        (status = "default", description = "A problem (RFC 9457)", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = ["operator"])))]
async fn next_due(c: Caller) -> Answer<NextAt> {
    let at = c.call("next-due", |x| x.next_due()).await?;
    Ok(axum::Json(NextAt { at }))
}

/// The earliest lease end among leased claims.
#[utoipa::path(get, path = "/v1/stats/next-lease-end", operation_id = "next-lease-end", tag = "stats",
    responses(
        (status = 200, description = "The instant, or null", body = NextAt),
        (status = "default", description = "A problem (RFC 9457)", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = ["operator"])))]
async fn next_lease_end(c: Caller) -> Answer<NextAt> {
    let at = c.call("next-lease-end", |x| x.next_lease_end()).await?;
    Ok(axum::Json(NextAt { at }))
}

/// The consistency check over the caller's tenant.
#[utoipa::path(get, path = "/v1/check", operation_id = "check", tag = "admin",
    responses(
        (status = 200, description = "Every discrepancy found; empty means consistent", body = CheckReport),
        (status = "default", description = "A problem (RFC 9457)", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = ["operator"])))]
async fn check(c: Caller) -> Answer<CheckReport> {
    let found = c.call("check", |x| x.check()).await?;
    Ok(axum::Json(CheckReport {
        discrepancies: found
            .into_iter()
            .map(|d| Discrepancy {
                structure: d.structure,
                subject: d.subject,
                detail: d.detail,
            })
            .collect(),
    }))
}

/// A task's history, oldest first. A reviewer sees the history of a task
/// it may see now (one it holds, or may take), and of no other.
#[utoipa::path(get, path = "/v1/tasks/{id}/history", operation_id = "history", tag = "changes",
    params(TaskPath, HistoryParams),
    responses(
        (status = 200, description = "The entries, oldest first", body = History),
        (status = 404, description = "No such task", body = Problem, content_type = "application/problem+json"),
        (status = "default", description = "A problem (RFC 9457)", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = ["reviewer", "service", "operator"])))]
async fn history(
    c: Caller,
    Path(TaskPath { id }): Path<TaskPath>,
    Query(q): Query<HistoryParams>,
) -> Answer<History> {
    if q.after.is_some_and(|a| a > (1 << 53) - 1) {
        return Err(ApiError::invalid("after", "at most 2^53 - 1"));
    }
    let key = id.clone();
    let task = c.call("get", move |x| x.get(&key)).await?;
    if !task.is_some_and(|t| visible(&c, &t)) {
        return Err(ApiError::NotFound(format!("no task {id}")));
    }
    let limit = q.limit.unwrap_or(DEFAULT_PAGE);
    let entries = c
        .call("history", move |x| x.history(&id, q.after, limit))
        .await?;
    Ok(axum::Json(History {
        entries: entries.into_iter().map(Into::into).collect(),
    }))
}

/// Where entry `seq` of a task's history sits in the feed: its writer slot
/// and its number there. Services and operators only: a reviewer's
/// positions are its own, and slot numbers count every change.
#[utoipa::path(get, path = "/v1/tasks/{id}/history/{seq}/place", operation_id = "entry-place", tag = "changes",
    params(EntryPath),
    responses(
        (status = 200, description = "Where the entry sits", body = FeedPlace),
        (status = 404, description = "No such task, or that entry is not kept", body = Problem, content_type = "application/problem+json"),
        (status = "default", description = "A problem (RFC 9457)", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = ["service", "operator"])))]
async fn entry_place(c: Caller, Path(EntryPath { id, seq }): Path<EntryPath>) -> Answer<FeedPlace> {
    if !(1..=(1 << 53) - 1).contains(&seq) {
        return Err(ApiError::invalid("seq", "between 1 and 2^53 - 1"));
    }
    let key = id.clone();
    match c
        .call("entry-place", move |x| x.entry_place(&key, seq))
        .await?
    {
        Some(p) => Ok(axum::Json(FeedPlace {
            slot: p.slot,
            seq: p.seq,
        })),
        None => Err(ApiError::NotFound(format!(
            "entry {seq} of task {id} is not kept"
        ))),
    }
}

/// The tenant's changes after a position. As JSON (the default), one page
/// of them; with `Accept: text/event-stream`, a stream of server-sent
/// events that follows the feed as it grows (see README, "Events"). A
/// reviewer receives only changes of tasks it holds or that are offered to
/// its roles, and no timer's.
#[utoipa::path(get, path = "/v1/events", operation_id = "feed", tag = "changes",
    params(EventsParams,
        ("Last-Event-ID" = Option<String>, Header, description = "For a stream: the `id` of the last event received; resumes after it (it wins over `after`)"),
    ),
    responses(
        (status = 200, description = "The events, and where to read on; or, asked for `text/event-stream`, the stream", content(
            (Events = "application/json"),
            (String = "text/event-stream"),
        )),
        (status = 400, description = "Invalid input, or an `after` or `Last-Event-ID` that is not a position this feed gave", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "At the bound of event subscribers", body = Problem, content_type = "application/problem+json"),
        (status = "default", description = "A problem (RFC 9457)", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = ["reviewer", "service", "operator"])))]
async fn feed(
    c: Caller,
    headers: axum::http::HeaderMap,
    Query(q): Query<EventsParams>,
) -> Result<axum::response::Response, ApiError> {
    use axum::response::IntoResponse;
    let wants_stream = headers
        .get_all(axum::http::header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| v.contains("text/event-stream"));
    if wants_stream {
        // `Last-Event-ID` wins over `after`: it is where an `EventSource`
        // that reconnects says it stopped.
        let last = match headers.get("last-event-id") {
            Some(v) => Some((
                "Last-Event-ID",
                v.to_str()
                    .ok()
                    .filter(|s| !s.is_empty())
                    .map(str::to_owned)
                    .ok_or_else(|| {
                        ApiError::invalid("Last-Event-ID", "not an event id this service gave")
                    })?,
            )),
            None => None,
        };
        let authorization = c.authorization().map(str::to_owned);
        let sub = crate::events::Subscription {
            principal: c.principal.clone(),
            tenant: c.tenant.clone(),
            authorization,
            after: last.or(q.after.map(|a| ("after", a))),
        };
        return Ok(crate::events::subscribe(c.state(), sub)
            .await?
            .into_response());
    }
    let limit = q.limit.unwrap_or(DEFAULT_PAGE);
    let positions = crate::positions::Positions::new(&c.state().cursors, &c.principal);
    if !positions.viewer() {
        let after = match q.after {
            Some(a) => Some(positions.take("after", &a)?),
            None => None,
        };
        let read = c
            .call("feed", move |x| x.feed(after.as_deref(), limit))
            .await?;
        let events = match read {
            host::FeedRead::Page(p) => Events {
                entries: p.entries.into_iter().map(Into::into).collect(),
                next: p.next,
                head: p.head,
                gone: false,
            },
            host::FeedRead::Gone(head) => Events {
                entries: Vec::new(),
                next: head.clone(),
                head,
                gone: true,
            },
        };
        return Ok(axum::Json(events).into_response());
    }
    // A reviewer's pages are read here, so its `limit` is checked here,
    // by the rule the verb applies.
    if !(1..=leasehold_guest::validate::MAX_LIMIT).contains(&limit) {
        return Err(ApiError::invalid(
            "limit",
            format!(
                "limit must be between 1 and {}",
                leasehold_guest::validate::MAX_LIMIT
            ),
        ));
    }
    let state = c.state();
    let gone = |head: &str| -> Result<axum::response::Response, ApiError> {
        let view = crate::view::View::starting(&crate::view::parse(head)?, true);
        let shown = positions.show_view(&view)?;
        Ok(axum::Json(Events {
            entries: Vec::new(),
            next: shown.clone(),
            head: shown,
            gone: true,
        })
        .into_response())
    };
    let (mut view, mut at) = match q.after {
        Some(a) => {
            let view = positions.take_view("after", &a)?;
            match crate::view::resolve(state, &c.tenant, &view).await? {
                Some(at) => (view, at),
                None => {
                    let head = crate::events::head(state, &c.tenant).await?;
                    return gone(&head);
                }
            }
        }
        None => {
            let at = crate::view::floor(state, &c.tenant).await?;
            (crate::view::View::starting(&at, false), at)
        }
    };
    // Pages are read on past changes it may not see until one more of its
    // own shows the page is not the last, or the feed's end is reached, so
    // that neither the entries, `next` nor `head` say anything of others'
    // changes: the view moves only with what it is given.
    let mut entries = Vec::new();
    let mut more = false;
    let mut ended = false;
    'pages: for _ in 0..REVIEWER_PAGES {
        let from = at.encode();
        let read = c.call("feed", move |x| x.feed(Some(&from), PAGE)).await?;
        let p = match read {
            host::FeedRead::Page(p) => p,
            host::FeedRead::Gone(head) => return gone(&head),
        };
        for e in p.entries {
            let after = crate::view::parse(&e.position)?;
            let slot = crate::view::slot_between(&at, &after).ok_or_else(|| {
                ApiError::Internal("the feed moved more than one slot for one entry".into())
            })?;
            if crate::events::may_see_change(&c.principal, &e.change) {
                if entries.len() as u32 >= limit {
                    more = true;
                    break 'pages;
                }
                if let host::Change::Task(t) = &e.change {
                    view.seen(slot, &t.id, t.entry.seq, after);
                }
                let mut ev: Event = e.into();
                ev.position = positions.show_view(&view)?;
                entries.push(ev);
            }
            at = after;
        }
        at = crate::view::parse(&p.next)?;
        if p.next == p.head {
            ended = true;
            break;
        }
    }
    // Read to the end, `head` is `next`; with more to read, another
    // spelling of the same view. A read that stopped at its budget holds
    // how far it went, so that reading on goes further.
    if !more && !ended {
        view = view.reached(at);
    }
    let next = positions.show_view(&view)?;
    let head = if ended {
        next.clone()
    } else {
        positions.show_view(&view.ahead())?
    };
    Ok(axum::Json(Events {
        entries,
        next,
        head,
        gone: false,
    })
    .into_response())
}

/// Pages of the feed one reviewer's JSON read goes through at most, looking
/// for changes it may see.
const REVIEWER_PAGES: usize = 50;

/// Removes old feed entries, with the history they cover: those recorded
/// before `before`, and the oldest beyond the newest `keep`. Never a task's
/// last entry.
#[utoipa::path(post, path = "/v1/events/trim", operation_id = "trim", tag = "changes",
    request_body = TrimRequest,
    responses(
        (status = 200, description = "What this call removed", body = Trimmed),
        (status = "default", description = "A problem (RFC 9457)", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = ["operator"])))]
async fn trim(c: Caller, Json(body): Json<TrimRequest>) -> Answer<Trimmed> {
    if body.keep.is_some_and(|k| k > (1 << 53) - 1) {
        return Err(ApiError::invalid("keep", "at most 2^53 - 1"));
    }
    if body.before.is_none() && body.keep.is_none() {
        return Err(ApiError::invalid(
            "keep",
            "say what to trim: `before` (an instant), `keep` (how many to keep), or both",
        ));
    }
    let limit = body.limit.unwrap_or(DEFAULT_TRIM);
    let out = c
        .call("trim", move |x| x.trim(body.before, body.keep, limit))
        .await?;
    Ok(axum::Json(Trimmed {
        feed_removed: out.feed_removed,
        history_removed: out.history_removed,
        more: out.more,
    }))
}

/// Who this credential is: its tenant, actor, scope and roles. Calls no
/// verb; a page asks it once it has a credential.
#[utoipa::path(get, path = "/v1/whoami", operation_id = "whoami", tag = "service",
    responses(
        (status = 200, description = "The caller", body = WhoAmI),
        (status = "default", description = "A problem (RFC 9457)", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = ["reviewer", "service", "operator"])))]
async fn whoami(c: Caller) -> Answer<WhoAmI> {
    let p = &c.principal;
    Ok(axum::Json(WhoAmI {
        tenant: p.tenant.clone(),
        actor: p.actor.clone(),
        scope: p.scope.to_string(),
        roles: p.roles.clone(),
    }))
}

#[cfg(test)]
mod tests {
    /// Checked against the host's one declaration of the verbs: each has
    /// its route, named as the WIT names the verb in snake case, and the
    /// handlers call the verb's `Tenant` method.
    #[test]
    fn every_verb_has_its_route() {
        let code = include_str!("api.rs");
        for f in leasehold_host::exported_functions() {
            let snake = f.name.replace('-', "_");
            assert!(
                code.contains(&format!(".routes(routes!({snake}))")),
                "no route for {}",
                f.name
            );
            assert!(
                code.contains(&format!("x.{snake}(")),
                "no route calls Tenant::{snake}"
            );
        }
    }
}
