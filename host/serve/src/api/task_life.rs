//! A task's life after it opens: what an actor holds (`held`), a change
//! of its fields (`update`, a `PATCH`), a manager's assignment and
//! unassignment, a holder's delegation, and notes. Each change goes
//! through `Caller::task` (`crate::access`) with the caller's `If-Match`
//! as its guard, and answers the task with its `ETag`.
//!
//! Who may do what: operators and services change, assign and unassign; a
//! reviewer delegates only what it holds (`from` is always its own actor)
//! and may never say which roles its delegate has: the delegate's roles
//! are those the service's token file grants it as a reviewer in this
//! tenant (none, when it has no token there: then only a task offered to
//! no role in particular can be handed to it). An operator or service may
//! name them, as it may for a claim. Anyone who may see a task may note
//! it, as itself. Handlers must never let a reviewer act as anyone else,
//! vouch for anyone's roles, or read another actor's held tasks.

use leasehold_guest::model::TaskChanges;
use leasehold_host::Verb;
use serde::Deserialize;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::access::TaskPath;
use crate::auth::Scope;
use crate::extract::{Caller, Json, Path, Query, UpdateJson, decode};
use crate::problem::{ApiError, Problem};
use crate::revision::IfMatch;
use crate::state::AppState;
use crate::timeline::EscalationStep;
use crate::update::Update;
use crate::wire::{
    Answer, DEFAULT_PAGE, OnExpiry, OutcomeRule, Page, Priority, Task, lease, refs, whole,
};

use super::tasks::{TaskAnswer, tagged};

/// The routes of a task's life after it opens.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(held))
        .routes(routes!(update))
        .routes(routes!(assign))
        .routes(routes!(unassign))
        .routes(routes!(delegate))
        .routes(routes!(note))
}

/// The tasks an actor holds, soonest lease end first (claims without a
/// lease last): the caller's own; a service or operator may name anyone
/// with `actor`. A reviewer naming another actor is refused.
#[utoipa::path(get, path = "/v1/me/tasks", operation_id = Verb::Held.name(), tag = "tasks",
    params(HeldParams),
    responses(
        (status = 200, description = "One page of the tasks the actor holds", body = Page),
        (status = 400, description = "Invalid input, or an `after` this service did not give for this list", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "A reviewer named another actor (`acting-as-another`)", body = Problem, content_type = "application/problem+json"),
        (status = "default", description = "A problem (RFC 9457)", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = ["reviewer", "service", "operator"])))]
async fn held(c: Caller, Query(q): Query<HeldParams>) -> Answer<Page> {
    let actor = match q.actor {
        Some(a) if c.principal.scope != Scope::Reviewer => a,
        named => c.actor(named)?,
    };
    // A cursor pages one actor's list only.
    let list = format!("{}:{actor}", Verb::Held.name());
    let after = c.open_cursor(&list, q.after)?;
    let limit = q.limit.unwrap_or(DEFAULT_PAGE);
    let page = c
        .call(Verb::Held, move |x| x.held(&actor, limit, after.as_deref()))
        .await?;
    Ok(axum::Json(Page {
        tasks: page.tasks.into_iter().map(Into::into).collect(),
        next: c.seal_cursor(&list, page.next)?,
    }))
}

/// Change a pending task's fields, each by `open`'s rules: only those the
/// body names (`null` clears `due_at`; no other field can be cleared). A
/// change that excludes the holder ends the claim in the same change.
#[utoipa::path(patch, path = "/v1/tasks/{id}", operation_id = Verb::Update.name(), tag = "tasks",
    params(TaskPath),
    request_body = TaskPatch,
    responses(
        (status = 200, description = "The task as it now stands", body = Task),
        (status = 400, description = "Invalid input: an unknown field or a change that names none (`field` names it), or a value the rules refuse", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such task", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "`not-pending`: the task is settled", body = Problem, content_type = "application/problem+json"),
        (status = "default", description = "A problem (RFC 9457)", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = ["service", "operator"])))]
async fn update(
    c: Caller,
    Path(TaskPath { id }): Path<TaskPath>,
    if_match: IfMatch,
    UpdateJson(body): UpdateJson<serde_json::Map<String, serde_json::Value>>,
) -> TaskAnswer {
    let changes = TaskPatch::read(body)?;
    let by = c.principal.actor.clone();
    let task = c
        .task(id)
        .expecting(if_match)
        .act(Verb::Update, move |x, id| x.update(id, Some(&by), &changes))
        .await
        .map_err(body_field)?;
    Ok(tagged(task))
}

/// The rules name a change's field as `changes.<field>`; the body names it
/// `<field>`.
fn body_field(e: ApiError) -> ApiError {
    match e {
        ApiError::Invalid {
            field: Some(f),
            detail,
        } => ApiError::Invalid {
            field: Some(f.strip_prefix("changes.").unwrap_or(&f).to_owned()),
            detail,
        },
        other => other,
    }
}

/// Claim the task for `to`, from whoever holds it, by the claim ladder for
/// `to` with `roles`; the roles rung is skipped only with
/// `override_roles`, which the record then says.
#[utoipa::path(post, path = "/v1/tasks/{id}/assign", operation_id = Verb::Assign.name(), tag = "tasks",
    params(TaskPath),
    request_body = AssignRequest,
    responses(
        (status = 200, description = "The task, held by `to`", body = Task),
        (status = 404, description = "No such task", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "A claim-ladder refusal for `to`: excluded, wrong-role, not-pending", body = Problem, content_type = "application/problem+json"),
        (status = "default", description = "A problem (RFC 9457)", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = ["service", "operator"])))]
async fn assign(
    c: Caller,
    Path(TaskPath { id }): Path<TaskPath>,
    if_match: IfMatch,
    Json(body): Json<AssignRequest>,
) -> TaskAnswer {
    let lease = lease(c.now(body.now)?, body.lease_ms);
    let by = c.principal.actor.clone();
    let task = c
        .task(id)
        .expecting(if_match)
        .act(Verb::Assign, move |x, id| {
            x.assign(
                id,
                &body.to,
                &refs(&body.roles),
                lease,
                body.override_roles,
                Some(&by),
            )
        })
        .await?;
    Ok(tagged(task))
}

/// Back to the queue from whoever holds it.
#[utoipa::path(post, path = "/v1/tasks/{id}/unassign", operation_id = Verb::Unassign.name(), tag = "tasks",
    params(TaskPath),
    responses(
        (status = 200, description = "The task, held by nobody", body = Task),
        (status = 404, description = "No such task", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "`not-pending`: the task is settled", body = Problem, content_type = "application/problem+json"),
        (status = "default", description = "A problem (RFC 9457)", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = ["service", "operator"])))]
async fn unassign(
    c: Caller,
    Path(TaskPath { id }): Path<TaskPath>,
    if_match: IfMatch,
) -> TaskAnswer {
    let by = c.principal.actor.clone();
    let task = c
        .task(id)
        .expecting(if_match)
        .act(Verb::Unassign, move |x, id| x.unassign(id, Some(&by)))
        .await?;
    Ok(tagged(task))
}

/// The holder hands the task to `to`, by the claim ladder for `to`. A
/// reviewer hands on only what it holds, and `to`'s roles are those the
/// service's token file grants `to` as a reviewer in this tenant (none
/// when it has none there); an operator or service may name `from` and
/// `roles`.
#[utoipa::path(post, path = "/v1/tasks/{id}/delegate", operation_id = Verb::Delegate.name(), tag = "tasks",
    params(TaskPath),
    request_body = DelegateRequest,
    responses(
        (status = 200, description = "The task, held by `to`", body = Task),
        (status = 403, description = "A reviewer named `from` or `roles` (`acting-as-another`)", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such task", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "`not-held` by `from`, or a claim-ladder refusal for `to`", body = Problem, content_type = "application/problem+json"),
        (status = "default", description = "A problem (RFC 9457)", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = ["reviewer", "service", "operator"])))]
async fn delegate(
    c: Caller,
    Path(TaskPath { id }): Path<TaskPath>,
    if_match: IfMatch,
    Json(body): Json<DelegateRequest>,
) -> TaskAnswer {
    let reviewer = c.principal.scope == Scope::Reviewer;
    let from = match body.from {
        Some(f) if !reviewer => f,
        named => c.actor(named)?,
    };
    let roles = match body.roles {
        Some(_) if reviewer => {
            return Err(ApiError::ActingAsAnother(
                "a reviewer does not say which roles its delegate has: the service's \
                 credentials do"
                    .to_owned(),
            ));
        }
        Some(r) => r,
        None => c
            .state()
            .credentials
            .current()
            .tokens
            .reviewer_roles(&c.principal.tenant, &body.to),
    };
    let lease = lease(c.now(body.now)?, body.lease_ms);
    let to = body.to;
    let task = c
        .task(id)
        .expecting(if_match)
        .act(Verb::Delegate, move |x, id| {
            x.delegate(id, &from, &to, &refs(&roles), lease)
        })
        .await?;
    Ok(tagged(task))
}

/// An append-only remark on a task, by the caller, kept in its history.
/// Anyone who may see the task may note it.
#[utoipa::path(post, path = "/v1/tasks/{id}/notes", operation_id = Verb::Note.name(), tag = "tasks",
    params(TaskPath),
    request_body = NoteRequest,
    responses(
        (status = 200, description = "The task, its revision one more", body = Task),
        (status = 400, description = "Invalid input", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such task", body = Problem, content_type = "application/problem+json"),
        (status = "default", description = "A problem (RFC 9457)", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = ["reviewer", "service", "operator"])))]
async fn note(
    c: Caller,
    Path(TaskPath { id }): Path<TaskPath>,
    if_match: IfMatch,
    Json(body): Json<NoteRequest>,
) -> TaskAnswer {
    let actor = c.principal.actor.clone();
    let task = c
        .task(id)
        .expecting(if_match)
        .act_seen(Verb::Note, move |x, id| x.note(id, &actor, &body.text))
        .await?;
    Ok(tagged(task))
}

#[derive(Debug, Deserialize, ToSchema, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct HeldParams {
    /// Tasks per page (default 20).
    #[param(schema_with = crate::schema::limit)]
    #[serde(default)]
    #[serde(deserialize_with = "whole::opt_u32")]
    pub limit: Option<u32>,
    /// The `next` of the previous page.
    #[param(schema_with = crate::schema::cursor)]
    pub after: Option<String>,
    /// Services and operators only: whose held tasks (default: the
    /// caller's).
    #[param(schema_with = crate::schema::name)]
    pub actor: Option<String>,
}

/// A change of a task: only the fields named change. At least one field
/// (the document's `minProperties`, set in `crate::openapi::refine`).
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TaskPatch {
    /// A new due time; `null` clears it.
    #[serde(default, deserialize_with = "due")]
    #[schema(schema_with = crate::schema::opt_instant)]
    pub due_at: Update<i64>,
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Priority)]
    pub priority: Option<Priority>,
    #[serde(default, deserialize_with = "present")]
    #[schema(schema_with = crate::schema::names)]
    pub candidate_roles: Option<Vec<String>>,
    #[serde(default, deserialize_with = "present")]
    #[schema(schema_with = crate::schema::names)]
    pub escalate_to: Option<Vec<String>>,
    #[serde(default, deserialize_with = "present")]
    #[schema(schema_with = crate::schema::names)]
    pub excluded_actors: Option<Vec<String>>,
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = OnExpiry)]
    pub on_expiry: Option<OnExpiry>,
    /// The outcomes a decision may have (an empty list: the kind's).
    #[serde(default, deserialize_with = "present")]
    #[schema(schema_with = crate::schema::outcome_rules)]
    pub outcomes: Option<Vec<OutcomeRule>>,
    /// The task's reminders, all of them (an empty list: none). A change
    /// of these, the chain or the due time re-arms the steps: those of the
    /// new timeline at or before the last step that fired count as fired
    /// (a reminder whose moment passed is not sent late), a chain step
    /// that never fired is never skipped.
    #[serde(default, deserialize_with = "crate::timeline::present_offsets")]
    #[schema(schema_with = crate::timeline::new_remind_before)]
    pub remind_before: Option<Vec<u64>>,
    /// The task's escalation chain, all of it (an empty list: none).
    #[serde(default, deserialize_with = "present")]
    #[schema(schema_with = crate::timeline::new_escalation)]
    pub escalation: Option<Vec<EscalationStep>>,
}

/// A due time as given: `null` clears it; a number is read as JSON Schema
/// counts integers (`738`, `738.0`), as every instant of the API is.
fn due<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Update<i64>, D::Error> {
    let v = serde_json::Value::deserialize(d)?;
    if v.is_null() {
        return Ok(Update::Clear);
    }
    whole::i64(v)
        .map(Update::Set)
        .map_err(serde::de::Error::custom)
}

/// A field that, when present, holds a value: `null` is refused (only
/// `due_at` can be cleared), never read as absent.
fn present<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    T::deserialize(d).map(Some)
}

impl TaskPatch {
    /// The fields a change may name.
    const FIELDS: [&'static str; 9] = [
        "due_at",
        "priority",
        "candidate_roles",
        "escalate_to",
        "excluded_actors",
        "on_expiry",
        "outcomes",
        "remind_before",
        "escalation",
    ];

    /// The change a body asks for: refused, naming the field, when it
    /// names an unknown field or none.
    pub(crate) fn read(
        body: serde_json::Map<String, serde_json::Value>,
    ) -> Result<TaskChanges, ApiError> {
        if let Some(unknown) = body.keys().find(|k| !Self::FIELDS.contains(&k.as_str())) {
            return Err(ApiError::invalid(
                unknown,
                format!(
                    "{unknown} is not a field a change may name (those are: {})",
                    Self::FIELDS.join(", ")
                ),
            ));
        }
        if body.is_empty() {
            return Err(ApiError::Invalid {
                field: None,
                detail: format!(
                    "the change names no field: name at least one of {}",
                    Self::FIELDS.join(", ")
                ),
            });
        }
        if let Some((field, _)) = body.iter().find(|(k, v)| v.is_null() && *k != "due_at") {
            return Err(ApiError::invalid(
                field,
                format!("{field} cannot be cleared: only due_at takes null"),
            ));
        }
        let bytes = serde_json::to_vec(&body).map_err(|e| ApiError::Internal(Box::new(e)))?;
        let patch: TaskPatch = decode(&bytes)?;
        Ok(TaskChanges {
            due_at: match patch.due_at {
                Update::Keep => None,
                Update::Clear => Some(None),
                Update::Set(t) => Some(Some(t)),
            },
            priority: patch.priority.map(Into::into),
            candidate_roles: patch.candidate_roles,
            escalate_to: patch.escalate_to,
            excluded_actors: patch.excluded_actors,
            on_expiry: patch.on_expiry.map(Into::into),
            outcomes: patch
                .outcomes
                .map(|list| list.into_iter().map(Into::into).collect()),
            remind_before: patch.remind_before,
            escalation: patch
                .escalation
                .map(|chain| chain.into_iter().map(Into::into).collect()),
        })
    }
}

/// Assign a task to `to`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AssignRequest {
    /// Who will hold it.
    #[schema(schema_with = crate::schema::name)]
    pub to: String,
    /// `to`'s roles, as the claim ladder's roles rung reads them (default:
    /// none).
    #[serde(default)]
    #[schema(schema_with = crate::schema::names)]
    pub roles: Vec<String>,
    /// Hold it for this long, renewable; without it, until released.
    #[serde(default)]
    #[schema(schema_with = crate::schema::opt_lease_ms)]
    #[serde(deserialize_with = "whole::opt_u32")]
    pub lease_ms: Option<u32>,
    /// Skip the roles rung; the record says it was skipped.
    #[serde(default)]
    pub override_roles: bool,
    /// A clock override: refused unless the server allows them.
    #[serde(default)]
    #[schema(schema_with = crate::schema::opt_instant)]
    #[serde(deserialize_with = "whole::opt_i64")]
    pub now: Option<i64>,
}

/// Hand a held task to `to`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct DelegateRequest {
    /// Who will hold it.
    #[schema(schema_with = crate::schema::name)]
    pub to: String,
    /// Services and operators only: who holds it now (default: the
    /// caller).
    #[serde(default)]
    #[schema(schema_with = crate::schema::opt_name)]
    pub from: Option<String>,
    /// Services and operators only: `to`'s roles (default: those the
    /// service's token file grants `to` as a reviewer in this tenant).
    #[serde(default)]
    #[schema(schema_with = crate::schema::opt_names)]
    pub roles: Option<Vec<String>>,
    /// `to` holds it for this long, renewable; without it, until released.
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

/// A remark on a task.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NoteRequest {
    #[schema(schema_with = crate::schema::note_text)]
    pub text: String,
}
