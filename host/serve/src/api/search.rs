//! Finding tasks (WIT `search`): one page of the tasks a filter matches, in
//! a sort's order, and how many match. The filter and the sort are typed
//! fields of the body, never a query language, and every rule about them
//! is the component's: a refusal is an `invalid` problem whose `field` is
//! the body's path to what to fix (`filter.due_before`, `sort.key`,
//! `limit`, `after`).
//!
//! Who sees what is decided here, once, for search and count alike
//! ([`viewer`]): a reviewer always searches as itself, its actor and roles
//! from its credential, and sees only what it holds or may take; a service
//! or operator sees the whole tenant, or searches as a viewer it names.
//! The component's cursor is sealed to the tenant and the viewer
//! (`crate::cursor`), and carries a digest of the filter, sort and viewer
//! it was made for: a cursor of another tenant does not open, one of
//! another search is refused by the component. It must never widen what a
//! reviewer sees, nor write anything.

use leasehold_guest::search as rules;
use leasehold_host::Verb;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::auth::Scope;
use crate::extract::{Caller, Json};
use crate::problem::{ApiError, Problem};
use crate::state::AppState;
use crate::wire::{Answer, DEFAULT_PAGE, Priority, Task, TaskState, whole};

/// The search routes.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(search))
        .routes(routes!(count))
}

/// One page of the tasks `filter` matches, in `sort`'s order (ties broken
/// by creation time, then id, so paging neither repeats nor skips a task
/// that did not change). A page examines a bounded number of index
/// entries: when it stops there before it is full, `budget_spent` says so
/// and `next` goes on from where it stopped, so a page may hold fewer
/// tasks than `limit`, or none, and a `next`.
#[utoipa::path(post, path = "/v1/search", operation_id = Verb::Search.name(), tag = "search",
    request_body = Option<SearchRequest>,
    responses(
        (status = 200, description = "One page of the matching tasks", body = SearchPage),
        (status = 400, description = "Invalid input (`invalid`, `field` naming it: an unknown field or sort key, an inverted time range, a limit out of range, an `after` of another search or tenant)", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "`index-building`: the tenant's search index is still being built by the sweeper; try again after `Retry-After`", body = Problem, content_type = "application/problem+json"),
        (status = "default", description = "A problem (RFC 9457)", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = ["reviewer", "service", "operator"])))]
async fn search(c: Caller, Json(body): Json<SearchRequest>) -> Answer<SearchPage> {
    let viewer = viewer(&c, body.viewer)?;
    let list = cursor_list(Verb::Search, viewer.as_ref());
    let query = rules::SearchQuery {
        filter: body.filter.into(),
        sort: body.sort.into(),
        limit: body.limit.unwrap_or(DEFAULT_PAGE),
        after: c.open_cursor(&list, body.after)?,
        viewer,
    };
    let page = c.call(Verb::Search, move |x| x.search(&query)).await?;
    Ok(axum::Json(SearchPage {
        tasks: page.tasks.into_iter().map(Into::into).collect(),
        next: c.seal_cursor(&list, page.next)?,
        budget_spent: page.budget_spent,
        index: page.index,
    }))
}

/// How many tasks `filter` matches. States alone, for the whole tenant,
/// are answered from counters kept with every change (`exact`, index
/// `counters`); any other filter is counted along an index within a
/// bounded number of entries: when `exact` is false, add the counts of
/// the calls that follow `next` (passed back as `after`).
#[utoipa::path(post, path = "/v1/search/count", operation_id = Verb::Count.name(), tag = "search",
    request_body = Option<CountRequest>,
    responses(
        (status = 200, description = "The count, or the first part of it", body = CountAnswer),
        (status = 400, description = "Invalid input (`invalid`, `field` naming it: an unknown field, an inverted time range, an `after` of another count or tenant)", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "`index-building`: the tenant's search index is still being built by the sweeper; try again after `Retry-After`", body = Problem, content_type = "application/problem+json"),
        (status = "default", description = "A problem (RFC 9457)", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = ["reviewer", "service", "operator"])))]
async fn count(c: Caller, Json(body): Json<CountRequest>) -> Answer<CountAnswer> {
    let viewer = viewer(&c, body.viewer)?;
    let list = cursor_list(Verb::Count, viewer.as_ref());
    let filter: rules::TaskFilter = body.filter.into();
    let after = c.open_cursor(&list, body.after)?;
    let answer = c
        .call(Verb::Count, move |x| {
            x.count(&filter, viewer.as_ref(), after.as_deref())
        })
        .await?;
    Ok(axum::Json(CountAnswer {
        count: answer.count,
        exact: answer.exact,
        next: c.seal_cursor(&list, answer.next)?,
        index: answer.index,
    }))
}

/// Who a search or count sees tasks as: a reviewer, always itself (naming
/// another actor, or roles it lacks, is refused as acting as another); a
/// service or operator, the whole tenant unless it names a viewer.
pub(crate) fn viewer(
    c: &Caller,
    asked: Option<ViewerBody>,
) -> Result<Option<rules::Viewer>, ApiError> {
    match (c.principal.scope, asked) {
        (Scope::Reviewer, asked) => {
            let (actor, roles) = match asked {
                Some(v) => (Some(v.actor), Some(v.roles)),
                None => (None, None),
            };
            Ok(Some(rules::Viewer {
                actor: c.actor(actor)?,
                roles: c.roles(roles)?,
            }))
        }
        (_, Some(v)) => Ok(Some(rules::Viewer {
            actor: v.actor,
            roles: v.roles,
        })),
        (_, None) => Ok(None),
    }
}

/// What a cursor of `verb` is sealed to besides the tenant: the viewer it
/// pages for, so one reviewer's cursor never opens for another (the
/// component's digest refuses it too; this keeps it from being opened at
/// all).
fn cursor_list(verb: Verb, viewer: Option<&rules::Viewer>) -> String {
    match viewer {
        None => verb.name().to_owned(),
        Some(v) => format!("{}:as:{}", verb.name(), v.actor),
    }
}

/// Who holds a task (WIT `assignee-filter`): `"nobody"`, or
/// `{"actor": name}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AssigneeFilter {
    /// Nobody holds or last held it.
    Nobody,
    /// This actor holds it (or, for a settled task, last held it).
    Actor(String),
}

/// What a task must be to match (WIT `task-filter`): every field given
/// must hold, and of a list one of its entries. `{}` matches every task.
/// Instants are milliseconds since 1970.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TaskFilter {
    /// In one of these states (none: any).
    #[serde(default)]
    pub states: Vec<TaskState>,
    /// Of one of these kinds (none: any); at most 32.
    #[serde(default)]
    #[schema(schema_with = crate::schema::filter_kinds)]
    pub kinds: Vec<String>,
    /// Offered to this role (one of its candidate roles).
    #[serde(default)]
    #[schema(schema_with = crate::schema::opt_name)]
    pub role: Option<String>,
    /// Who holds it.
    #[serde(default)]
    #[schema(schema_with = crate::schema::assignee_filter)]
    pub assignee: Option<AssigneeFilter>,
    #[serde(default)]
    #[schema(schema_with = crate::schema::opt_name)]
    pub case: Option<String>,
    #[serde(default)]
    #[schema(schema_with = crate::schema::opt_name)]
    pub run: Option<String>,
    /// At this priority or above.
    #[serde(default)]
    pub priority_at_least: Option<Priority>,
    /// Due strictly before this instant (a task with no due time does not
    /// match).
    #[serde(default, deserialize_with = "whole::opt_i64")]
    #[schema(schema_with = crate::schema::opt_instant)]
    pub due_before: Option<i64>,
    /// Due at or after this instant; before `due_before` when both are
    /// given.
    #[serde(default, deserialize_with = "whole::opt_i64")]
    #[schema(schema_with = crate::schema::opt_instant)]
    pub due_after: Option<i64>,
    /// Created strictly before this instant.
    #[serde(default, deserialize_with = "whole::opt_i64")]
    #[schema(schema_with = crate::schema::opt_instant)]
    pub created_before: Option<i64>,
    /// Created at or after this instant; before `created_before` when
    /// both are given.
    #[serde(default, deserialize_with = "whole::opt_i64")]
    #[schema(schema_with = crate::schema::opt_instant)]
    pub created_after: Option<i64>,
    /// Pending and due at or before this instant.
    #[serde(default, deserialize_with = "whole::opt_i64")]
    #[schema(schema_with = crate::schema::opt_instant)]
    pub overdue_at: Option<i64>,
}

impl From<TaskFilter> for rules::TaskFilter {
    fn from(f: TaskFilter) -> Self {
        rules::TaskFilter {
            states: f.states.into_iter().map(Into::into).collect(),
            kinds: f.kinds,
            role: f.role,
            assignee: f.assignee.map(|a| match a {
                AssigneeFilter::Nobody => rules::AssigneeFilter::Nobody,
                AssigneeFilter::Actor(x) => rules::AssigneeFilter::Actor(x),
            }),
            case: f.case,
            run: f.run,
            priority_at_least: f.priority_at_least.map(Into::into),
            due_before: f.due_before,
            due_after: f.due_after,
            created_before: f.created_before,
            created_after: f.created_after,
            overdue_at: f.overdue_at,
        }
    }
}

impl From<rules::TaskFilter> for TaskFilter {
    fn from(f: rules::TaskFilter) -> Self {
        TaskFilter {
            states: f.states.into_iter().map(Into::into).collect(),
            kinds: f.kinds,
            role: f.role,
            assignee: f.assignee.map(|a| match a {
                rules::AssigneeFilter::Nobody => AssigneeFilter::Nobody,
                rules::AssigneeFilter::Actor(x) => AssigneeFilter::Actor(x),
            }),
            case: f.case,
            run: f.run,
            priority_at_least: f.priority_at_least.map(Into::into),
            due_before: f.due_before,
            due_after: f.due_after,
            created_before: f.created_before,
            created_after: f.created_after,
            overdue_at: f.overdue_at,
        }
    }
}

/// The orders a search pages in (WIT `sort-key`): `queue_order` (higher
/// priority first, then older first), `due_at` (earliest first; tasks
/// with none after every due one), `created_at` (oldest first),
/// `priority` (lowest first, then newer first: the queue's order
/// reversed).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum SortKey {
    #[default]
    QueueOrder,
    DueAt,
    CreatedAt,
    Priority,
}

/// A sort key and its direction; `descending` reverses the whole order,
/// ties included. Default: the queue's order.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TaskSort {
    #[serde(default)]
    pub key: SortKey,
    #[serde(default)]
    pub descending: bool,
}

impl From<TaskSort> for rules::TaskSort {
    fn from(s: TaskSort) -> Self {
        rules::TaskSort {
            key: match s.key {
                SortKey::QueueOrder => rules::SortKey::QueueOrder,
                SortKey::DueAt => rules::SortKey::DueAt,
                SortKey::CreatedAt => rules::SortKey::CreatedAt,
                SortKey::Priority => rules::SortKey::Priority,
            },
            descending: s.descending,
        }
    }
}

impl From<rules::TaskSort> for TaskSort {
    fn from(s: rules::TaskSort) -> Self {
        TaskSort {
            key: match s.key {
                rules::SortKey::QueueOrder => SortKey::QueueOrder,
                rules::SortKey::DueAt => SortKey::DueAt,
                rules::SortKey::CreatedAt => SortKey::CreatedAt,
                rules::SortKey::Priority => SortKey::Priority,
            },
            descending: s.descending,
        }
    }
}

/// Search as this reviewer: only what it holds or may take (offered to
/// one of `roles`, or to anyone, and not excluding it). A reviewer may
/// name only itself and its own roles; a service or operator anyone.
#[derive(Clone, Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ViewerBody {
    #[schema(schema_with = crate::schema::name)]
    pub actor: String,
    #[schema(schema_with = crate::schema::names)]
    pub roles: Vec<String>,
}

/// A search; without a body, the first page of every task (a reviewer's:
/// of what it may see) in the queue's order.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SearchRequest {
    #[serde(default)]
    pub filter: TaskFilter,
    #[serde(default)]
    pub sort: TaskSort,
    /// Tasks per page, 1–1000 (default 20).
    #[serde(default, deserialize_with = "whole::opt_u32")]
    #[schema(schema_with = crate::schema::opt_limit)]
    pub limit: Option<u32>,
    /// The `next` of the previous page of this same search.
    #[serde(default)]
    #[schema(schema_with = crate::schema::opt_cursor)]
    pub after: Option<String>,
    /// Services and operators: search as this reviewer (default: the
    /// whole tenant). A reviewer always searches as itself.
    #[serde(default)]
    pub viewer: Option<ViewerBody>,
}

/// One page of a search.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct SearchPage {
    pub tasks: Vec<Task>,
    /// Pass as `after` with the same filter and sort for the next page;
    /// `null` when the search is done.
    pub next: Option<String>,
    /// The page stopped at the scan budget before it was full.
    pub budget_spent: bool,
    /// The index that drove the page (`by-state`, `by-kind`, `assigned`,
    /// `by-run`, `case`, `by-due`, `by-priority`, ...).
    pub index: String,
}

/// A count; without a body, every task (a reviewer's: what it may see).
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CountRequest {
    #[serde(default)]
    pub filter: TaskFilter,
    /// The `next` of the previous part of this same count.
    #[serde(default)]
    #[schema(schema_with = crate::schema::opt_cursor)]
    pub after: Option<String>,
    /// Services and operators: count as this reviewer sees.
    #[serde(default)]
    pub viewer: Option<ViewerBody>,
}

/// How many tasks match.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct CountAnswer {
    /// The tasks that match (from `after` on, when given).
    #[schema(schema_with = crate::schema::seq)]
    pub count: u64,
    /// `count` is the whole answer; otherwise add the counts of the calls
    /// that follow `next`.
    pub exact: bool,
    pub next: Option<String>,
    /// `counters` when kept counts answered, otherwise the index counted.
    pub index: String,
}

#[cfg(test)]
mod tests {
    use axum::Router;
    use axum::body::Body;
    use axum::http::{Request, StatusCode};
    use axum::routing::{get, post};
    use tower::ServiceExt;

    /// Why search is `/v1/search` and not `/v1/tasks/search`: a fixed
    /// segment beside `{id}` wins the match for every method, so a task
    /// named `search` could no longer be read (405, not its task).
    #[test]
    fn a_route_under_tasks_would_hide_a_task_of_its_name() {
        let app = Router::new()
            .route("/v1/tasks/search", post(|| async { "search" }))
            .route("/v1/tasks/{id}", get(|| async { "the task" }));
        let status = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("a runtime")
            .block_on(async {
                let req = Request::get("/v1/tasks/search")
                    .body(Body::empty())
                    .expect("a request");
                app.oneshot(req).await.expect("an answer").status()
            });
        assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED);
    }
}
