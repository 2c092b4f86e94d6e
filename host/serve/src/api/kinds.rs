//! Kinds: a tenant's per-kind definitions of what a decision may be (its
//! outcomes, which need a reason, each one's output schema). Operators
//! define, list and remove them; anyone may read one kind's (the inbox
//! renders a task's outcomes from its kind's when the task declares none).
//! A definition's revision is its `ETag`; `If-Match` on `PUT` is the
//! revision it replaces (`"0"`: not yet defined). Handlers must never
//! choose a tenant.

use axum::http::StatusCode;
use leasehold_guest::model::KindDefinition;
use leasehold_host::Verb;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::extract::{Caller, Json, Path, Query};
use crate::problem::{ApiError, Problem};
use crate::revision::{IfMatch, Tagged};
use crate::state::AppState;
use crate::wire::{Answer, DEFAULT_PAGE, OutcomeRule, whole};

/// The kinds' routes.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(define_kind, get_kind, remove_kind))
        .routes(routes!(list_kinds))
}

/// A kind's definition as answered.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct Kind {
    pub kind: String,
    pub outcomes: Vec<OutcomeRule>,
    /// 1 when first defined, one more with each definition after; also the
    /// `ETag`.
    #[schema(schema_with = crate::schema::seq)]
    pub revision: u64,
}

impl From<KindDefinition> for Kind {
    fn from(d: KindDefinition) -> Self {
        Kind {
            kind: d.kind,
            outcomes: d.outcomes.into_iter().map(Into::into).collect(),
            revision: d.revision,
        }
    }
}

/// The kind a path names.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Path)]
pub struct KindPath {
    /// The kind, as tasks name it.
    #[param(schema_with = crate::schema::name)]
    pub kind: String,
}

/// What a kind declares.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct KindRequest {
    /// At most 64 rules with distinct names.
    #[schema(schema_with = crate::schema::outcome_rules)]
    pub outcomes: Vec<OutcomeRule>,
}

/// Define (or redefine) a kind: each output schema compiled now. With
/// `If-Match`, only over that revision (`"0"`: not yet defined).
#[utoipa::path(put, path = "/v1/kinds/{kind}", operation_id = Verb::DefineKind.name(), tag = "kinds",
    params(KindPath),
    request_body = KindRequest,
    responses(
        (status = 200, description = "The definition, with its new revision", body = Kind),
        (status = 400, description = "Invalid input (a schema that does not compile names `outcomes`)", body = Problem, content_type = "application/problem+json"),
        (status = "default", description = "A problem (RFC 9457)", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = ["operator"])))]
async fn define_kind(
    c: Caller,
    Path(KindPath { kind }): Path<KindPath>,
    if_match: IfMatch,
    Json(body): Json<KindRequest>,
) -> Result<Tagged<Kind>, ApiError> {
    let definition = KindDefinition {
        kind,
        outcomes: body.outcomes.into_iter().map(Into::into).collect(),
        revision: 0,
    };
    let d = c
        .call(Verb::DefineKind, move |x| {
            x.define_kind(&definition, if_match.0)
        })
        .await?;
    Ok(Tagged(d.revision, d.into()))
}

/// One kind's definition.
#[utoipa::path(get, path = "/v1/kinds/{kind}", operation_id = Verb::GetKind.name(), tag = "kinds",
    params(KindPath),
    responses(
        (status = 200, description = "The definition", body = Kind),
        (status = 404, description = "The kind has no definition", body = Problem, content_type = "application/problem+json"),
        (status = "default", description = "A problem (RFC 9457)", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = ["reviewer", "service", "operator"])))]
async fn get_kind(
    c: Caller,
    Path(KindPath { kind }): Path<KindPath>,
) -> Result<Tagged<Kind>, ApiError> {
    let name = kind.clone();
    match c.call(Verb::GetKind, move |x| x.get_kind(&name)).await? {
        Some(d) => Ok(Tagged(d.revision, d.into())),
        None => Err(ApiError::NotFound(format!("kind {kind} has no definition"))),
    }
}

/// Remove a kind's definition: tasks of the kind then allow any outcome
/// (unless they declare their own).
#[utoipa::path(delete, path = "/v1/kinds/{kind}", operation_id = Verb::RemoveKind.name(), tag = "kinds",
    params(KindPath),
    responses(
        (status = 204, description = "Removed"),
        (status = 404, description = "The kind has no definition", body = Problem, content_type = "application/problem+json"),
        (status = "default", description = "A problem (RFC 9457)", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = ["operator"])))]
async fn remove_kind(
    c: Caller,
    Path(KindPath { kind }): Path<KindPath>,
) -> Result<StatusCode, ApiError> {
    let name = kind.clone();
    if c.call(Verb::RemoveKind, move |x| x.remove_kind(&name))
        .await?
    {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(ApiError::NotFound(format!("kind {kind} has no definition")))
    }
}

/// Defined kinds, in name order.
#[utoipa::path(get, path = "/v1/kinds", operation_id = Verb::ListKinds.name(), tag = "kinds",
    params(KindsParams),
    responses(
        (status = 200, description = "One page of definitions", body = Kinds),
        (status = 400, description = "Invalid input, or an `after` this service did not give for this list", body = Problem, content_type = "application/problem+json"),
        (status = "default", description = "A problem (RFC 9457)", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = ["operator"])))]
async fn list_kinds(c: Caller, Query(q): Query<KindsParams>) -> Answer<Kinds> {
    let list = Verb::ListKinds.name();
    let limit = q.limit.unwrap_or(DEFAULT_PAGE);
    let after = c.open_cursor(list, q.after)?;
    let kinds = c
        .call(Verb::ListKinds, move |x| {
            x.list_kinds(limit, after.as_deref())
        })
        .await?;
    // A full page may have more after it: its last kind is where to read
    // on.
    let next = if kinds.len() as u32 >= limit {
        kinds.last().map(|d| d.kind.clone())
    } else {
        None
    };
    Ok(axum::Json(Kinds {
        kinds: kinds.into_iter().map(Into::into).collect(),
        next: c.seal_cursor(list, next)?,
    }))
}

#[derive(Debug, Deserialize, ToSchema, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct KindsParams {
    /// Kinds per page (default 20).
    #[param(schema_with = crate::schema::limit)]
    #[serde(default)]
    #[serde(deserialize_with = "whole::opt_u32")]
    pub limit: Option<u32>,
    /// The `next` of the previous page.
    #[param(schema_with = crate::schema::cursor)]
    pub after: Option<String>,
}

/// A page of kinds; pass `next` back as `after` to read on.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct Kinds {
    pub kinds: Vec<Kind>,
    pub next: Option<String>,
}
