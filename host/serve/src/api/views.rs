//! Saved views (WIT `put-view`, `get-view`, `list-views`, `delete-view`):
//! a tenant's named, shared searches, a filter and a sort each, kept in its
//! keyspace so every browser and every script shows the same. Everyone in
//! the tenant reads them (the inbox shows them as tabs, each counted as its
//! reader sees it); operators alone make, change and remove them. A view's
//! revision is its `ETag`: `PUT` without `If-Match` makes one (refused,
//! naming `name`, when one of that name exists), with `If-Match` changes
//! the one at that revision (412 `stale` at another); `DELETE` takes
//! `If-Match` too. Every rule about a view is the component's; handlers
//! must never choose a tenant, nor write on a refusal.

use axum::http::StatusCode;
use leasehold_guest::search as rules;
use leasehold_host::Verb;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::search::{TaskFilter, TaskSort};
use crate::extract::{Caller, Json, Path, Query};
use crate::problem::{ApiError, Problem};
use crate::revision::{IfMatch, Tagged};
use crate::state::AppState;
use crate::wire::{Answer, DEFAULT_PAGE, PageParams};

/// The views' routes.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_views))
        .routes(routes!(get_view, put_view, delete_view))
}

/// A saved view as answered.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct View {
    #[schema(schema_with = crate::schema::view_name)]
    pub name: String,
    pub filter: TaskFilter,
    pub sort: TaskSort,
    /// 1 when made, one more with each change; also the `ETag`.
    #[schema(schema_with = crate::schema::seq)]
    pub revision: u64,
    /// Who last changed it.
    pub by: Option<String>,
    /// When it was last changed, in milliseconds since 1970.
    pub at: i64,
}

impl From<rules::SavedView> for View {
    fn from(v: rules::SavedView) -> Self {
        View {
            name: v.name,
            filter: v.filter.into(),
            sort: v.sort.into(),
            revision: v.revision,
            by: v.by,
            at: v.at,
        }
    }
}

/// The view a path names.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Path)]
pub struct ViewPath {
    /// The view's name: 1–128 characters, no control characters.
    #[param(schema_with = crate::schema::view_name)]
    pub name: String,
}

/// What a view searches for.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ViewRequest {
    #[serde(default)]
    pub filter: TaskFilter,
    #[serde(default)]
    pub sort: TaskSort,
}

/// A page of views, in name order; pass `next` back as `after` to read on.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct Views {
    pub views: Vec<View>,
    pub next: Option<String>,
}

/// The tenant's saved views, in name order (bytewise).
#[utoipa::path(get, path = "/v1/views", operation_id = Verb::ListViews.name(), tag = "views",
    params(PageParams),
    responses(
        (status = 200, description = "One page of views", body = Views),
        (status = 400, description = "Invalid input, or an `after` this service did not give for this list", body = Problem, content_type = "application/problem+json"),
        (status = "default", description = "A problem (RFC 9457)", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = ["reviewer", "service", "operator"])))]
async fn list_views(c: Caller, Query(q): Query<PageParams>) -> Answer<Views> {
    let list = Verb::ListViews.name();
    let limit = q.limit.unwrap_or(DEFAULT_PAGE);
    let after = c.open_cursor(list, q.after)?;
    let views = c
        .call(Verb::ListViews, move |x| {
            x.list_views(limit, after.as_deref())
        })
        .await?;
    // A full page may have more after it: its last name is where to read
    // on.
    let next = if views.len() as u32 >= limit {
        views.last().map(|v| v.name.clone())
    } else {
        None
    };
    Ok(axum::Json(Views {
        views: views.into_iter().map(Into::into).collect(),
        next: c.seal_cursor(list, next)?,
    }))
}

/// One saved view.
#[utoipa::path(get, path = "/v1/views/{name}", operation_id = Verb::GetView.name(), tag = "views",
    params(ViewPath),
    responses(
        (status = 200, description = "The view", body = View),
        (status = 404, description = "No view of that name", body = Problem, content_type = "application/problem+json"),
        (status = "default", description = "A problem (RFC 9457)", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = ["reviewer", "service", "operator"])))]
async fn get_view(
    c: Caller,
    Path(ViewPath { name }): Path<ViewPath>,
) -> Result<Tagged<View>, ApiError> {
    let n = name.clone();
    match c.call(Verb::GetView, move |x| x.get_view(&n)).await {
        Ok(Some(v)) => Ok(Tagged(v.revision, v.into())),
        Ok(None) => Err(missing(&name)),
        Err(e) => Err(named(e, &name)),
    }
}

/// Make a view (no `If-Match`: refused, naming `name`, when one of that
/// name exists) or change one (`If-Match`: its revision; 404 when there is
/// none, 412 `stale` at another). At most 500 views per tenant. The view
/// records the caller as who changed it.
#[utoipa::path(put, path = "/v1/views/{name}", operation_id = Verb::PutView.name(), tag = "views",
    params(ViewPath),
    request_body = Option<ViewRequest>,
    responses(
        (status = 200, description = "The view, with its new revision", body = View),
        (status = 400, description = "Invalid input (`invalid`, `field` naming it: a name in use, a filter field, the tenant's 500 views)", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "`If-Match` named a revision of a view that does not exist", body = Problem, content_type = "application/problem+json"),
        (status = "default", description = "A problem (RFC 9457)", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = ["operator"])))]
async fn put_view(
    c: Caller,
    Path(ViewPath { name }): Path<ViewPath>,
    if_match: IfMatch,
    Json(body): Json<ViewRequest>,
) -> Result<Tagged<View>, ApiError> {
    let view = rules::SavedView {
        name: name.clone(),
        filter: body.filter.into(),
        sort: body.sort.into(),
        // The component sets the revision and the time; what is given is
        // ignored.
        revision: 0,
        by: Some(c.principal.actor.clone()),
        at: 0,
    };
    let v = c
        .call(Verb::PutView, move |x| x.put_view(&view, if_match.0))
        .await
        .map_err(|e| named(e, &name))?;
    Ok(Tagged(v.revision, v.into()))
}

/// Remove a view (with `If-Match`, only at that revision: 412 `stale` at
/// another).
#[utoipa::path(delete, path = "/v1/views/{name}", operation_id = Verb::DeleteView.name(), tag = "views",
    params(ViewPath),
    responses(
        (status = 204, description = "Removed"),
        (status = 404, description = "No view of that name", body = Problem, content_type = "application/problem+json"),
        (status = "default", description = "A problem (RFC 9457)", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = ["operator"])))]
async fn delete_view(
    c: Caller,
    Path(ViewPath { name }): Path<ViewPath>,
    if_match: IfMatch,
) -> Result<StatusCode, ApiError> {
    let n = name.clone();
    let removed = c
        .call(Verb::DeleteView, move |x| x.delete_view(&n, if_match.0))
        .await
        .map_err(|e| named(e, &name))?;
    if removed {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(missing(&name))
    }
}

/// No such view, in the words every view route uses.
fn missing(name: &str) -> ApiError {
    ApiError::NotFound(format!("no view {name}"))
}

/// A refusal about the view `name` names: its absence said as a view's
/// (the engine's words are a task's).
fn named(e: ApiError, name: &str) -> ApiError {
    match e {
        ApiError::NotFound(_) => missing(name),
        e => e,
    }
}
