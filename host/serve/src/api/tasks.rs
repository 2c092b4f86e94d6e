//! Tasks: open one, read one, move it through the claim ladder (claim,
//! release, take over, renew), settle or escalate it, and list a case's.
//! Every route about one task reaches it through `Caller::task`
//! (`crate::access`), so a reviewer hears of a task it may not see exactly
//! what it would hear of one that does not exist. Handlers must never
//! choose a tenant, and never let a reviewer act as anyone else or give
//! its own time.

use axum::http::StatusCode;
use leasehold_guest::model::Decision;
use leasehold_host::{self as host, Verb, new_task};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::access::TaskPath;
use crate::auth::Scope;
use crate::extract::{Caller, Json, Path, Query};
use crate::long_poll::LongPoll;
use crate::problem::{ApiError, Problem};
use crate::revision::{IfMatch, Tagged};
use crate::state::AppState;
use crate::wire::{
    Answer, DEFAULT_PAGE, OnExpiry, Page, PageParams, Priority, Task, lease, mirror_enum, refs,
    whole,
};

/// A task as answered: its JSON, tagged with its revision.
pub type TaskAnswer = Result<Tagged<Task>, ApiError>;

/// The answer of a task as it stands.
pub fn tagged(t: host::Task) -> Tagged<Task> {
    Tagged(t.revision, t.into())
}

/// The tasks' routes.
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
        .routes(routes!(for_case))
}

/// Open a task. First open wins: if the id exists, the stored task is
/// answered unchanged.
#[utoipa::path(post, path = "/v1/tasks", operation_id = Verb::Open.name(), tag = "tasks",
    request_body = NewTask,
    responses(
        (status = 200, description = "The task as stored", body = Task),
        (status = 400, description = "Invalid input", body = Problem, content_type = "application/problem+json"),
        (status = "default", description = "A problem (RFC 9457)", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = ["service", "operator"])))]
async fn open(c: Caller, Json(body): Json<new_task::NewTask>) -> TaskAnswer {
    let created = c.now(body.created_at)?;
    let task = body.into_task(created);
    let stored = c.call(Verb::Open, move |x| x.open(&task)).await?;
    Ok(tagged(stored))
}

/// One task, its revision as the `ETag`. A reviewer sees only tasks it
/// holds or may take. With `wait_ms`, a long-poll for a decision: answered
/// as soon as the task's revision is not `revision` (the one the caller
/// has), or it is settled, or the wait ends (then as it stands); woken by
/// the task's own changes.
#[utoipa::path(get, path = "/v1/tasks/{id}", operation_id = Verb::Get.name(), tag = "tasks",
    params(TaskPath, GetParams),
    responses(
        (status = 200, description = "The task", body = Task),
        (status = 400, description = "Invalid input", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such task", body = Problem, content_type = "application/problem+json"),
        (status = "default", description = "A problem (RFC 9457)", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = ["reviewer", "service", "operator"])))]
async fn get(
    c: Caller,
    Path(TaskPath { id }): Path<TaskPath>,
    Query(q): Query<GetParams>,
) -> TaskAnswer {
    if q.revision.is_some_and(|r| r > (1 << 53) - 1) {
        return Err(ApiError::invalid("revision", "at most 2^53 - 1"));
    }
    let task = c.task(id);
    let mut wait = LongPoll::new(&c, Verb::Get, q.wait_ms, None)?;
    let mut last = None;
    loop {
        if !wait.may_try()? {
            break;
        }
        let t = task.get_at(wait.attempt()).await?;
        let moved = !t.state.is_pending() || q.revision.is_some_and(|r| t.revision != r);
        if moved || wait.over() {
            return Ok(tagged(t));
        }
        last = Some(t);
        if wait.ready(&c).await? {
            continue;
        }
        let id = task.id().to_owned();
        wait.wait(
            &c,
            None,
            |change| matches!(change, host::Change::Task(t) if t.id == id),
        )
        .await;
    }
    // Shutting down: the task as last read, or as it stands.
    match last {
        Some(t) => Ok(tagged(t)),
        None => Ok(tagged(task.get().await?)),
    }
}

/// Reserve a task for the caller (an operator may name the actor), under a
/// lease if `lease_ms` is given.
#[utoipa::path(post, path = "/v1/tasks/{id}/claim", operation_id = Verb::Claim.name(), tag = "tasks",
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
    if_match: IfMatch,
    Json(body): Json<ClaimRequest>,
) -> TaskAnswer {
    let actor = c.actor(body.actor)?;
    let roles = c.roles(body.roles)?;
    let lease = lease(c.now(body.now)?, body.lease_ms);
    let task = c
        .task(id)
        .expecting(if_match)
        .act(Verb::Claim, move |x, id| {
            x.claim(id, &actor, &refs(&roles), lease)
        })
        .await?;
    Ok(tagged(task))
}

/// Give a claimed task back; only its holder may.
#[utoipa::path(post, path = "/v1/tasks/{id}/release", operation_id = Verb::Release.name(), tag = "tasks",
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
    if_match: IfMatch,
    Json(body): Json<ReleaseRequest>,
) -> Result<StatusCode, ApiError> {
    let actor = c.actor(body.actor)?;
    c.task(id)
        .expecting(if_match)
        .act(Verb::Release, move |x, id| x.release(id, &actor))
        .await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Move a claim from `from` to `actor` (default: the operator).
#[utoipa::path(post, path = "/v1/tasks/{id}/take-over", operation_id = Verb::TakeOver.name(), tag = "tasks",
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
    if_match: IfMatch,
    Json(body): Json<TakeOverRequest>,
) -> TaskAnswer {
    let actor = c.actor(body.actor)?;
    let roles = c.roles(body.roles)?;
    let lease = lease(c.now(body.now)?, body.lease_ms);
    let from = body.from;
    let task = c
        .task(id)
        .expecting(if_match)
        .act(Verb::TakeOver, move |x, id| {
            x.take_over(id, &from, &actor, &refs(&roles), lease)
        })
        .await?;
    Ok(tagged(task))
}

/// The holder extends its lease to end `lease_ms` from now.
#[utoipa::path(post, path = "/v1/tasks/{id}/renew", operation_id = Verb::Renew.name(), tag = "tasks",
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
    if_match: IfMatch,
    Json(body): Json<RenewRequest>,
) -> TaskAnswer {
    let actor = c.actor(body.actor)?;
    let now = c.now(body.now)?;
    let lease_ms = body.lease_ms;
    let task = c
        .task(id)
        .expecting(if_match)
        .act(Verb::Renew, move |x, id| x.renew(id, &actor, now, lease_ms))
        .await?;
    Ok(tagged(task))
}

/// Settle a pending task. A reviewer settles only a task it holds; a
/// service or operator may settle without a holder.
#[utoipa::path(post, path = "/v1/tasks/{id}/settle", operation_id = Verb::Settle.name(), tag = "tasks",
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
    if_match: IfMatch,
    Json(body): Json<SettleRequest>,
) -> Answer<Settled> {
    let holder = if c.principal.scope == Scope::Reviewer {
        Some(c.actor(body.holder)?)
    } else {
        body.holder
    };
    let settlement = host::Settlement::from(body.settlement);
    let decision = body.decision.map(Decision::from);
    let settled = c
        .task(id)
        .expecting(if_match)
        .act(Verb::Settle, move |x, id| {
            x.decide(id, settlement, holder.as_deref(), decision.as_ref())
        })
        .await?;
    Ok(axum::Json(Settled { settled }))
}

/// Escalate a pending task: back to the queue, with `escalate_to` added to
/// its candidate roles.
#[utoipa::path(post, path = "/v1/tasks/{id}/escalate", operation_id = Verb::Escalate.name(), tag = "tasks",
    params(TaskPath),
    responses(
        (status = 200, description = "The task as it now stands", body = Task),
        (status = 404, description = "No such task", body = Problem, content_type = "application/problem+json"),
        (status = "default", description = "A problem (RFC 9457)", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = ["service", "operator"])))]
async fn escalate(
    c: Caller,
    Path(TaskPath { id }): Path<TaskPath>,
    if_match: IfMatch,
) -> TaskAnswer {
    let task = c
        .task(id)
        .expecting(if_match)
        .act(Verb::Escalate, |x, id| x.escalate(id))
        .await?;
    Ok(tagged(task))
}

/// Every task of a case, in any state, oldest first. A reviewer sees only
/// the tasks it holds or may take; the cursor walks the whole case, sealed,
/// so a page may come back with fewer tasks than asked, or none, and a
/// `next`.
#[utoipa::path(get, path = "/v1/cases/{case}/tasks", operation_id = Verb::ForCase.name(), tag = "tasks",
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
    let list = format!("{}:{case}", Verb::ForCase.name());
    let after = c.open_cursor(&list, q.after)?;
    let page = c
        .call(Verb::ForCase, move |x| {
            x.for_case(&case, limit, after.as_deref())
        })
        .await?;
    Ok(axum::Json(Page {
        tasks: page
            .tasks
            .into_iter()
            .filter(|t| c.may_see(t))
            .map(Into::into)
            .collect(),
        next: c.seal_cursor(&list, page.next)?,
    }))
}

mirror_enum!(
    /// The final states `settle` accepts.
    Settlement => Settlement { Completed, Expired, Withdrawn });

/// A task to open. State, assignee and lease are not given: a new task is
/// open and unclaimed.
///
/// Only the document's description of the body (its serde attributes say
/// which fields are optional): the body is read by the host library's one
/// input model of `open` (`leasehold_host::new_task`, which `leasehold task
/// open` reads too), so its defaults and its reading of the justification
/// are the CLI's; a test holds these fields to that model's.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
pub struct NewTask {
    #[schema(schema_with = crate::schema::name)]
    pub id: String,
    #[schema(schema_with = crate::schema::name)]
    pub run: String,
    #[serde(default)]
    #[schema(schema_with = crate::schema::opt_name)]
    pub case: Option<String>,
    #[schema(schema_with = crate::schema::name)]
    pub kind: String,
    /// Any JSON document; `{}` when omitted. Stored as sent.
    #[serde(default)]
    #[schema(schema_with = crate::schema::justification)]
    pub justification: Option<Box<RawValue>>,
    #[serde(default)]
    #[schema(schema_with = crate::schema::names)]
    pub candidate_roles: Vec<String>,
    #[serde(default)]
    #[schema(schema_with = crate::schema::names)]
    pub escalate_to: Vec<String>,
    #[serde(default)]
    #[schema(schema_with = crate::schema::names)]
    pub excluded_actors: Vec<String>,
    #[serde(default)]
    pub priority: Option<Priority>,
    #[serde(default)]
    pub on_expiry: Option<OnExpiry>,
    /// Defaults to the service's clock; giving it is a clock override
    /// (`--allow-clock-override`).
    #[serde(default)]
    #[schema(schema_with = crate::schema::opt_instant)]
    #[serde(deserialize_with = "whole::opt_i64")]
    pub created_at: Option<i64>,
    #[serde(default)]
    #[schema(schema_with = crate::schema::opt_instant)]
    #[serde(deserialize_with = "whole::opt_i64")]
    pub due_at: Option<i64>,
    #[serde(default)]
    #[schema(schema_with = crate::timeline::new_remind_before)]
    pub remind_before: Vec<u64>,
    #[serde(default)]
    #[schema(schema_with = crate::timeline::new_escalation)]
    pub escalation: Vec<crate::timeline::EscalationStep>,
}

/// Claim a task (or the head of the queue). A reviewer claims as itself;
/// an operator may name the actor and roles.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ClaimRequest {
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
}

/// Give a claimed task back.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ReleaseRequest {
    /// Operator only: whose claim (default: the caller).
    #[serde(default)]
    #[schema(schema_with = crate::schema::opt_name)]
    pub actor: Option<String>,
}

/// Move a claim from `from` to `actor` (default: the operator itself).
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TakeOverRequest {
    #[schema(schema_with = crate::schema::name)]
    pub from: String,
    #[serde(default)]
    #[schema(schema_with = crate::schema::opt_name)]
    pub actor: Option<String>,
    #[serde(default)]
    #[schema(schema_with = crate::schema::opt_names)]
    pub roles: Option<Vec<String>>,
    #[serde(default)]
    #[schema(schema_with = crate::schema::opt_lease_ms)]
    #[serde(deserialize_with = "whole::opt_u32")]
    pub lease_ms: Option<u32>,
    /// A clock override: refused unless the server allows them.
    #[serde(default)]
    #[schema(schema_with = crate::schema::opt_instant)]
    #[serde(deserialize_with = "whole::opt_i64")]
    pub now: Option<i64>,
}

/// Extend the holder's lease to `now + lease_ms`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RenewRequest {
    #[schema(schema_with = crate::schema::lease_ms)]
    #[serde(deserialize_with = "whole::u32")]
    pub lease_ms: u32,
    /// Operator only: whose lease (default: the caller's).
    #[serde(default)]
    #[schema(schema_with = crate::schema::opt_name)]
    pub actor: Option<String>,
    /// A clock override: refused unless the server allows them.
    #[serde(default)]
    #[schema(schema_with = crate::schema::opt_instant)]
    #[serde(deserialize_with = "whole::opt_i64")]
    pub now: Option<i64>,
}

/// Settle a pending task. A reviewer settles as the holder, always.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SettleRequest {
    pub settlement: Settlement,
    /// Settle only if this actor holds the task (a reviewer always settles
    /// as the holder).
    #[serde(default)]
    #[schema(schema_with = crate::schema::opt_name)]
    pub holder: Option<String>,
    /// What was decided, kept with the task and its record with who
    /// decided (the holder). Checked against the outcomes the task, or
    /// else its kind, declares: an outcome not declared, a missing reason
    /// where the outcome needs one, or an output that breaks the outcome's
    /// schema is 400 `invalid`, `field` naming `decision.outcome`,
    /// `decision.reason` or `decision.output` (with `path`, the first
    /// violation's JSON Pointer), and nothing is written.
    #[serde(default)]
    pub decision: Option<DecisionRequest>,
}

/// A decision, as a settle gives it.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct DecisionRequest {
    #[schema(schema_with = crate::schema::outcome)]
    pub outcome: String,
    #[serde(default)]
    #[schema(schema_with = crate::schema::reason)]
    pub reason: Option<String>,
    #[serde(default)]
    #[schema(schema_with = crate::schema::decision_output)]
    pub output: Option<Box<RawValue>>,
}

impl From<DecisionRequest> for Decision {
    fn from(d: DecisionRequest) -> Self {
        Decision {
            outcome: d.outcome,
            reason: d.reason,
            output: d.output.map(|o| o.get().to_owned()),
        }
    }
}

/// A read of one task, which may wait for its decision.
#[derive(Debug, Deserialize, ToSchema, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct GetParams {
    /// Wait up to this many milliseconds (at most 30000) for the task to
    /// settle, or to move past `revision`.
    #[param(schema_with = crate::schema::opt_wait_ms)]
    #[serde(default)]
    #[serde(deserialize_with = "whole::opt_u32")]
    pub wait_ms: Option<u32>,
    /// The revision the caller has: a wait ends as soon as the task's is
    /// another. Without it, a wait ends when the task settles.
    #[param(schema_with = crate::schema::seq)]
    #[serde(default)]
    #[serde(deserialize_with = "whole::opt_u64")]
    pub revision: Option<u64>,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct Settled {
    /// Whether this call settled the task (false: it was already settled).
    pub settled: bool,
}

/// The case a path names.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Path)]
pub struct CasePath {
    /// The case.
    #[param(schema_with = crate::schema::name)]
    pub case: String,
}

#[cfg(test)]
mod tests {
    use leasehold_host::new_task::{Form, Wire};
    use utoipa::PartialSchema;

    /// The document describes the body the host's input model reads: the
    /// same fields, in the same order, and only `id`, `run` and `kind`
    /// required.
    #[test]
    fn the_documented_new_task_is_the_host_input_model() {
        let schema = serde_json::to_value(super::NewTask::schema()).expect("schema");
        let fields: Vec<&str> = schema["properties"]
            .as_object()
            .expect("properties")
            .keys()
            .map(String::as_str)
            .collect();
        let mut documented = fields.clone();
        let mut read = Wire::FIELDS.to_vec();
        documented.sort_unstable();
        read.sort_unstable();
        assert_eq!(documented, read);
        let mut required: Vec<&str> = schema["required"]
            .as_array()
            .expect("required")
            .iter()
            .map(|v| v.as_str().expect("name"))
            .collect();
        required.sort_unstable();
        assert_eq!(required, ["id", "kind", "run"]);
    }
}
