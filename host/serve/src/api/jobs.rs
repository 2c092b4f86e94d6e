//! Bulk jobs (WIT `start-job`, `get-job`, `list-jobs`, `cancel-job`): one
//! action over the tasks a search filter matches, a task at a time, run
//! by the server's sweeper (`leasehold_host::StepJobs`), never by a
//! request. Operators and services start, read and cancel them; a
//! reviewer reaches none. The filter is search's body type and the
//! changes the task update route's, so a refusal names the body's path to
//! what to fix (`filter.due_before`, `action.to`, `action.changes.priority`).
//! A job runs as the caller's actor at the server's clock; handlers must
//! never choose a tenant, step a job, nor write on a refusal.

use axum::http::{HeaderValue, StatusCode, header};
use leasehold_guest::jobs as rules;
use leasehold_host::Verb;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::job_action::{JobAction, action_json, body_field, read_action};
use super::search::TaskFilter;
use crate::extract::{Caller, Json, Path, Query};
use crate::problem::{ApiError, Problem};
use crate::state::AppState;
use crate::wire::{Answer, DEFAULT_PAGE, PageParams};

/// The jobs' routes.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(start_job, list_jobs))
        .routes(routes!(get_job))
        .routes(routes!(cancel_job))
}

/// Where a job stands (WIT `job-state`): `counting` its set, a stretch
/// per step; `running` its action, a task per step; `cancelled`; `done`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum JobState {
    Counting,
    Running,
    Cancelled,
    Done,
}

impl From<rules::JobState> for JobState {
    fn from(s: rules::JobState) -> Self {
        match s {
            rules::JobState::Counting => JobState::Counting,
            rules::JobState::Running => JobState::Running,
            rules::JobState::Cancelled => JobState::Cancelled,
            rules::JobState::Done => JobState::Done,
        }
    }
}

/// A task a job did not change, and why.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct JobMiss {
    pub id: String,
    pub reason: String,
}

impl From<rules::JobFailure> for JobMiss {
    fn from(f: rules::JobFailure) -> Self {
        JobMiss {
            id: f.id,
            reason: f.reason,
        }
    }
}

/// A bulk job (WIT `job`). Its set is the tasks its filter matched and
/// that were created at or before `created_at`; `done + skipped + failed`
/// of them are taken, and all `total` once it is `done`.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct Job {
    #[schema(schema_with = crate::schema::name)]
    pub id: String,
    pub filter: TaskFilter,
    pub action: JobAction,
    /// Who started it: each change it makes is recorded as by this actor
    /// where its verb takes one.
    pub by: Option<String>,
    pub state: JobState,
    /// The tasks of its set found so far (all of them once it runs).
    #[schema(schema_with = crate::schema::seq)]
    pub total: u64,
    /// Tasks the action was applied to.
    #[schema(schema_with = crate::schema::seq)]
    pub done: u64,
    /// Tasks that no longer matched the filter when their turn came.
    #[schema(schema_with = crate::schema::seq)]
    pub skipped: u64,
    /// Tasks whose verb refused.
    #[schema(schema_with = crate::schema::seq)]
    pub failed: u64,
    /// The last 16 failures, oldest first.
    pub last_failures: Vec<JobMiss>,
    /// The last 16 skips, oldest first.
    pub last_skipped: Vec<JobMiss>,
    /// When it started, in milliseconds since 1970.
    pub created_at: i64,
}

impl From<rules::Job> for Job {
    fn from(j: rules::Job) -> Self {
        Job {
            id: j.id,
            filter: j.filter.into(),
            action: action_json(j.action),
            by: j.by,
            state: j.state.into(),
            total: j.total,
            done: j.done,
            skipped: j.skipped,
            failed: j.failed,
            last_failures: j.last_failures.into_iter().map(Into::into).collect(),
            last_skipped: j.last_skipped.into_iter().map(Into::into).collect(),
            created_at: j.created_at,
        }
    }
}

/// A job to start.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct StartJobRequest {
    /// The job's id, unique in the tenant even once it is finished
    /// (default: one the server makes, time-ordered).
    #[serde(default)]
    #[schema(schema_with = crate::schema::opt_name)]
    pub id: Option<String>,
    /// The tasks it acts on, as `/v1/search` takes a filter (`{}`: every
    /// task).
    // Read as optional so that its absence is refused naming it.
    #[serde(default)]
    #[schema(value_type = TaskFilter, required = true)]
    pub filter: Option<TaskFilter>,
    #[serde(default)]
    #[schema(value_type = JobAction, required = true)]
    pub action: Value,
}

/// The job a path names.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Path)]
pub struct JobPath {
    /// The job's id.
    #[param(schema_with = crate::schema::name)]
    pub id: String,
}

/// A page of jobs, in id order; pass `next` back as `after` to read on.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct Jobs {
    pub jobs: Vec<Job>,
    pub next: Option<String>,
}

/// Start a job: `action` over the tasks `filter` matches that exist now.
/// The server's sweeper counts its set, then changes each task in its own
/// transaction (its history naming the job), skipping one that no longer
/// matches; a filter that matches nothing is a job of total 0. It runs as
/// the caller, at the server's clock.
#[utoipa::path(post, path = "/v1/jobs", operation_id = Verb::StartJob.name(), tag = "jobs",
    request_body = StartJobRequest,
    responses(
        (status = 201, description = "The job as started (`counting`, or `done` at once when no instant is left for its set)", body = Job,
            headers(("location" = String, description = "The job's URL, `/v1/jobs/{id}`"))),
        (status = 400, description = "Invalid input (`invalid`, `field` naming it: `id` in use or malformed, a filter field as `/v1/search` names it, `action.to`, `action.changes.<field>`, ...)", body = Problem, content_type = "application/problem+json"),
        (status = "default", description = "A problem (RFC 9457)", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = ["service", "operator"])))]
async fn start_job(
    c: Caller,
    Json(body): Json<StartJobRequest>,
) -> Result<
    (
        StatusCode,
        [(header::HeaderName, HeaderValue); 1],
        axum::Json<Job>,
    ),
    ApiError,
> {
    let Some(filter) = body.filter else {
        return Err(ApiError::invalid(
            "filter",
            "filter: required (`{}` matches every task)",
        ));
    };
    let action = read_action(body.action)?;
    let id = match body.id {
        Some(id) => id,
        None => new_id(),
    };
    let filter: leasehold_guest::search::TaskFilter = filter.into();
    let by = c.principal.actor.clone();
    let now = c.now(None)?;
    let job = c
        .call(Verb::StartJob, move |x| {
            x.start_job(&id, &filter, &action, Some(&by), now)
        })
        .await
        .map_err(body_field)?;
    let location = HeaderValue::try_from(format!("/v1/jobs/{}", escaped(&job.id)))
        .map_err(|e| ApiError::Internal(Box::new(e)))?;
    Ok((
        StatusCode::CREATED,
        [(header::LOCATION, location)],
        axum::Json(job.into()),
    ))
}

/// One job, as it stands.
#[utoipa::path(get, path = "/v1/jobs/{id}", operation_id = Verb::GetJob.name(), tag = "jobs",
    params(JobPath),
    responses(
        (status = 200, description = "The job", body = Job),
        (status = 404, description = "No job of that id in the caller's tenant", body = Problem, content_type = "application/problem+json"),
        (status = "default", description = "A problem (RFC 9457)", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = ["service", "operator"])))]
async fn get_job(c: Caller, Path(JobPath { id }): Path<JobPath>) -> Answer<Job> {
    let i = id.clone();
    match c.call(Verb::GetJob, move |x| x.get_job(&i)).await {
        Ok(Some(j)) => Ok(axum::Json(j.into())),
        Ok(None) => Err(missing(&id)),
        Err(e) => Err(named(e, &id)),
    }
}

/// The tenant's jobs, finished ones too, in id order (bytewise; the ids
/// the server makes sort by when they were made).
#[utoipa::path(get, path = "/v1/jobs", operation_id = Verb::ListJobs.name(), tag = "jobs",
    params(PageParams),
    responses(
        (status = 200, description = "One page of jobs", body = Jobs),
        (status = 400, description = "Invalid input, or an `after` this service did not give for this list", body = Problem, content_type = "application/problem+json"),
        (status = "default", description = "A problem (RFC 9457)", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = ["service", "operator"])))]
async fn list_jobs(c: Caller, Query(q): Query<PageParams>) -> Answer<Jobs> {
    let list = Verb::ListJobs.name();
    let limit = q.limit.unwrap_or(DEFAULT_PAGE);
    let after = c.open_cursor(list, q.after)?;
    let jobs = c
        .call(Verb::ListJobs, move |x| {
            x.list_jobs(limit, after.as_deref())
        })
        .await?;
    // A full page may have more after it: its last id is where to read on.
    let next = if jobs.len() as u32 >= limit {
        jobs.last().map(|j| j.id.clone())
    } else {
        None
    };
    Ok(axum::Json(Jobs {
        jobs: jobs.into_iter().map(Into::into).collect(),
        next: c.seal_cursor(list, next)?,
    }))
}

/// Stop a job at once: `cancelled`, and no task is changed by it after
/// (those it changed stay changed). A finished job answers as it stands.
#[utoipa::path(post, path = "/v1/jobs/{id}/cancel", operation_id = Verb::CancelJob.name(), tag = "jobs",
    params(JobPath),
    responses(
        (status = 200, description = "The job, `cancelled` (or `done`, had it finished)", body = Job),
        (status = 404, description = "No job of that id in the caller's tenant", body = Problem, content_type = "application/problem+json"),
        (status = "default", description = "A problem (RFC 9457)", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = ["service", "operator"])))]
async fn cancel_job(c: Caller, Path(JobPath { id }): Path<JobPath>) -> Answer<Job> {
    let i = id.clone();
    let job = c
        .call(Verb::CancelJob, move |x| x.cancel_job(&i))
        .await
        .map_err(|e| named(e, &id))?;
    Ok(axum::Json(job.into()))
}

/// A new job id: a UUIDv7, so the server's ids list in the order they
/// were made (monotonic within this process).
fn new_id() -> String {
    uuid::Uuid::now_v7().to_string()
}

/// What of an id a path segment keeps as it is: RFC 3986's unreserved
/// characters; the rest is percent-encoded.
const SEGMENT: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// An id as a path segment.
fn escaped(id: &str) -> String {
    percent_encoding::utf8_percent_encode(id, SEGMENT).to_string()
}

/// No such job, in the words every job route uses.
fn missing(id: &str) -> ApiError {
    ApiError::NotFound(format!("no job {id}"))
}

/// A refusal about the job `id` names: its absence said as a job's (the
/// engine's words are a task's).
fn named(e: ApiError, id: &str) -> ApiError {
    match e {
        ApiError::NotFound(_) => missing(id),
        e => e,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn made_ids_are_uuid_v7_and_sort_as_made() {
        let ids: Vec<String> = (0..64).map(|_| new_id()).collect();
        assert!(
            ids.iter().all(|i| i.len() == 36 && &i[14..15] == "7"),
            "{ids:?}"
        );
        assert!(ids.windows(2).all(|w| w[0] < w[1]), "{ids:?}");
    }

    #[test]
    fn an_id_in_a_location_keeps_only_unreserved_characters() {
        assert_eq!(escaped("a-b.c_d~e9"), "a-b.c_d~e9");
        assert_eq!(escaped("a/b c?é"), "a%2Fb%20c%3F%C3%A9");
    }
}
