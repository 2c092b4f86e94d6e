//! Changes: a task's history, where one of its entries sits in the feed,
//! the tenant's feed (a JSON page, or with `Accept: text/event-stream` the
//! event stream of `crate::sse`), and trimming the record. Which changes a
//! caller is given, and at which position, is the feed pager's
//! (`crate::feed_pager`); what a change looks like on the wire is
//! `crate::change`'s. Handlers must never give a reviewer the feed's own
//! positions, nor a change of a task it may not see.

use axum::response::IntoResponse;
use leasehold_host::Verb;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::access::{EntryPath, TaskPath};
use crate::change::{Event, HistoryEntry};
use crate::extract::{Caller, Json, Path, Query};
use crate::problem::{ApiError, Problem};
use crate::state::AppState;
use crate::wire::{Answer, DEFAULT_PAGE, whole};

/// Feed entries one `trim` removes at most when it names no `limit`.
const DEFAULT_TRIM: u32 = 1000;

/// The changes' routes.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(history))
        .routes(routes!(entry_place))
        .routes(routes!(feed))
        .routes(routes!(trim))
}

/// A task's history, oldest first. A reviewer sees the history of a task
/// it may see now (one it holds, or may take), and of no other.
#[utoipa::path(get, path = "/v1/tasks/{id}/history", operation_id = Verb::History.name(), tag = "changes",
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
    let limit = q.limit.unwrap_or(DEFAULT_PAGE);
    let entries = c
        .task(id)
        .read_record(Verb::History, move |x, id| x.history(id, q.after, limit))
        .await?;
    Ok(axum::Json(History {
        entries: entries.into_iter().map(Into::into).collect(),
    }))
}

/// Where entry `seq` of a task's history sits in the feed: its writer slot
/// and its number there. Services and operators only: a reviewer's
/// positions are its own, and slot numbers count every change.
#[utoipa::path(get, path = "/v1/tasks/{id}/history/{seq}/place", operation_id = Verb::FeedPlace.name(), tag = "changes",
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
    let task = c.task(id);
    match task
        .act(Verb::FeedPlace, move |x, id| x.entry_place(id, seq))
        .await?
    {
        Some(p) => Ok(axum::Json(FeedPlace {
            slot: p.slot,
            seq: p.seq,
        })),
        None => Err(task.not_found(|id| format!("entry {seq} of task {id} is not kept"))),
    }
}

/// The tenant's changes after a position. As JSON (the default), one page
/// of them; with `Accept: text/event-stream`, a stream of server-sent
/// events that follows the feed as it grows (see README, "Events"). A
/// reviewer receives only changes of tasks it holds or that are offered to
/// its roles, and no timer's. With `run`, only that run's changes.
#[utoipa::path(get, path = "/v1/events", operation_id = Verb::Feed.name(), tag = "changes",
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
    if let Some(run) = &q.run
        && leasehold_guest::validate::name("run", run).is_err()
    {
        return Err(ApiError::invalid(
            "run",
            "a run is 1 to 256 characters, none of them a control character",
        ));
    }
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
        let sub = crate::sse::Subscription {
            principal: c.principal.clone(),
            tenant: c.tenant.clone(),
            authorization,
            after: last.or(q.after.map(|a| ("after", a))),
            run: q.run,
        };
        return Ok(crate::sse::subscribe(c.state(), sub).await?.into_response());
    }
    let limit = q.limit.unwrap_or(DEFAULT_PAGE);
    let page = crate::feed_pager::page(&c, q.after, limit, q.run).await?;
    Ok(axum::Json(Events {
        entries: page.entries,
        next: page.next,
        head: page.head,
        gone: page.gone,
    })
    .into_response())
}

/// Removes old feed entries, with the history they cover: those recorded
/// before `before`, and the oldest beyond the newest `keep`. Never a task's
/// last entry.
#[utoipa::path(post, path = "/v1/events/trim", operation_id = Verb::Trim.name(), tag = "changes",
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
        .call(Verb::Trim, move |x| x.trim(body.before, body.keep, limit))
        .await?;
    Ok(axum::Json(Trimmed {
        feed_removed: out.feed_removed,
        history_removed: out.history_removed,
        more: out.more,
    }))
}

#[derive(Debug, Deserialize, ToSchema, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct HistoryParams {
    /// Entries per page (default 20).
    #[param(schema_with = crate::schema::limit)]
    #[serde(default)]
    #[serde(deserialize_with = "whole::opt_u32")]
    pub limit: Option<u32>,
    /// The `seq` of the last entry already read.
    #[param(schema_with = crate::schema::seq)]
    #[serde(default)]
    #[serde(deserialize_with = "whole::opt_u64")]
    pub after: Option<u64>,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct History {
    pub entries: Vec<HistoryEntry>,
}

/// Where one history entry sits in the feed.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct FeedPlace {
    /// The writer slot the entry was recorded in.
    pub slot: u32,
    /// Its number in that slot: within a slot, a higher number committed
    /// later.
    pub seq: u64,
}

#[derive(Debug, Deserialize, ToSchema, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct EventsParams {
    /// Events per page (default 20); a stream reads as it needs.
    #[param(schema_with = crate::schema::limit)]
    #[serde(default)]
    #[serde(deserialize_with = "whole::opt_u32")]
    pub limit: Option<u32>,
    /// A `position`, `next` or `head` of an earlier read. Without it, a page
    /// starts at the oldest event kept, and a stream at the newest.
    #[param(schema_with = crate::schema::position)]
    pub after: Option<String>,
    /// Only the changes of this run's tasks and timers (a workflow reading
    /// its decisions in order); positions are the feed's as ever, so a
    /// page may hold fewer changes than `limit`, or none, and read on.
    #[param(schema_with = crate::schema::name)]
    pub run: Option<String>,
}

/// A read of the feed. `gone`: the events after `after` were trimmed (or
/// `after` is not a position of this feed); refresh, then read on from
/// `head`.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct Events {
    pub entries: Vec<Event>,
    pub next: String,
    pub head: String,
    pub gone: bool,
}

/// Which feed entries `trim` removes: those recorded before `before`, and
/// the oldest beyond the newest `keep`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TrimRequest {
    /// Remove entries recorded before this instant.
    #[serde(default)]
    #[schema(schema_with = crate::schema::opt_instant)]
    #[serde(deserialize_with = "whole::opt_i64")]
    pub before: Option<i64>,
    /// Keep at most this many of the newest entries.
    #[serde(default)]
    #[schema(schema_with = crate::schema::opt_seq)]
    #[serde(deserialize_with = "whole::opt_u64")]
    pub keep: Option<u64>,
    /// Most feed entries removed by this call (default 1000).
    #[serde(default)]
    #[schema(schema_with = crate::schema::opt_limit)]
    #[serde(deserialize_with = "whole::opt_u32")]
    pub limit: Option<u32>,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct Trimmed {
    pub feed_removed: u32,
    pub history_removed: u32,
    pub more: bool,
}
