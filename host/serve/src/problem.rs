//! The service's one error type at the HTTP boundary, and its rendering as
//! RFC 9457 `application/problem+json`. It owns the status mapping and the
//! stable `type` of every problem; it must never put guest internals, stored
//! values of another caller, or credentials into an answer.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use leasehold_host::{Error, Refusal, SandboxError, StoreError};
use serde::Serialize;
use utoipa::ToSchema;

/// The prefix of every problem `type`: a URN, so it never resolves to a
/// page that could drift from the code.
pub const TYPE_PREFIX: &str = "urn:leasehold:problem:";

/// The `ETag` of a task's or kind's `revision`: the revision in quotes, a
/// strong tag (`crate::revision` owns the contract; a `stale` answer here
/// carries the current one).
pub fn etag(revision: u64) -> HeaderValue {
    HeaderValue::from_str(&format!("\"{revision}\""))
        .unwrap_or_else(|_| HeaderValue::from_static("\"0\""))
}

/// How the component words a search or count of a keyspace whose search
/// entries are still being built (`guest/src/search`).
const INDEX_BUILDING: &str = "search: this tenant's search index is being built";

/// How long a client should wait before retrying a 503, in seconds.
const RETRY_AFTER_SECS: &str = "1";

/// Why a request was not done. Every variant is one problem `type`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ApiError {
    /// No credential, or one that is bad, expired or unknown.
    #[error("{0}")]
    Unauthorized(String),
    /// A good credential whose scope does not allow this.
    #[error("{0}")]
    Forbidden(String),
    /// A reviewer named an actor or roles other than its own.
    #[error("{0}")]
    ActingAsAnother(String),
    /// An argument broke the input rules; `field` names it where known.
    #[error("{detail}")]
    Invalid {
        /// The argument rejected, where known.
        field: Option<String>,
        /// Why.
        detail: String,
    },
    /// The body is not JSON, or not the JSON this route takes.
    #[error("{0}")]
    MalformedBody(String),
    /// The body is not declared as JSON.
    #[error("{0}")]
    UnsupportedMediaType(String),
    /// The body is larger than the service accepts.
    #[error("the request body is larger than {limit} bytes")]
    BodyTooLarge {
        /// The most bytes the service accepts.
        limit: usize,
    },
    /// No such task, run or route.
    #[error("{0}")]
    NotFound(String),
    /// The route exists, but not for this method.
    #[error("the route exists, but not for this method")]
    MethodNotAllowed,
    /// The engine refused a claim-ladder rung.
    #[error(transparent)]
    Refused(Refusal),
    /// A sweeper holds the timer under a lease ending at this instant:
    /// moving it needs `take_back`. Nothing was written.
    #[error("a sweeper holds the timer under a lease ending at {0}; move it with take_back")]
    TimerHeld(i64),
    /// The run is sealed: it takes no wake-up, new or moved.
    #[error("run {0} is sealed")]
    RunSealed(String),
    /// The revision the caller gave (`If-Match`) is not the current one,
    /// which this is; nothing was written.
    #[error(
        "the revision given in If-Match is not the current one, {0}: read it again and decide again"
    )]
    Stale(u64),
    /// Retry later: the database was busy, a transaction lost every retry,
    /// or the service is at its bound of in-flight calls.
    #[error("{detail}")]
    Unavailable {
        /// Which bound was met, as the problem type names it.
        kind: &'static str,
        /// What happened.
        detail: String,
    },
    /// Too many of the tenant's requests are waiting for their turn: this
    /// one was turned away at once, having started nothing.
    #[error("{0}")]
    TooManyRequests(String),
    /// The request ran past its deadline before its call could commit:
    /// nothing was done, and the same request may be sent again.
    #[error("the request ran past its deadline before its call could commit; nothing was done")]
    Timeout,
    /// The request's body did not arrive within the request's time.
    #[error("the request body did not arrive in time")]
    BodyTimeout,
    /// The call may or may not have taken effect: its commit was sent and
    /// no answer came back, or it had not finished when the request had to
    /// be answered. Read before trying again.
    #[error("{0}")]
    OutcomeUnknown(String),
    /// The rules sandbox failed the call. Its transaction was aborted.
    #[error("the rules engine failed this call; nothing was written")]
    Sandbox(#[source] SandboxError),
    /// Stored data does not decode.
    #[error("stored data is damaged; run the consistency check")]
    Corrupt(String),
    /// A newer build moved the tenant to a layout this server's build does
    /// not know: nothing was done; an upgraded server can answer.
    #[error("{0}")]
    NewerLayout(String),
    /// Anything else that is the service's fault.
    #[error("internal error")]
    Internal(#[source] Box<dyn std::error::Error + Send + Sync>),
}

/// The body of every error answer.
#[derive(Debug, Serialize, ToSchema)]
pub struct Problem {
    /// Stable identifier of the problem, `urn:leasehold:problem:<name>`.
    #[serde(rename = "type")]
    pub kind: String,
    /// A short, fixed summary of the problem type.
    pub title: String,
    /// The HTTP status code.
    pub status: u16,
    /// What went wrong with this request.
    pub detail: String,
    /// The field the input rules rejected (`invalid`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
    /// Who holds the task (`already-claimed`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub holder: Option<String>,
    /// The task's settled state (`not-pending`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
    /// The actor refused (`excluded`, `wrong-role`, `not-held`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub actor: Option<String>,
    /// The current revision (`stale`), as the `ETag` header also says.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub revision: Option<u64>,
    /// When the sweeper's lease on the timer ends (`timer-held`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lease_until: Option<i64>,
    /// Where in a decision's output the first violation of its outcome's
    /// schema is (`invalid` with `field` `decision.output`): a JSON
    /// Pointer, `""` for the whole output.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
}

impl ApiError {
    /// The credential's scope does not allow this, for the reason given.
    pub fn forbidden(why: impl Into<String>) -> Self {
        ApiError::Forbidden(why.into())
    }

    /// The input rules rejected `field`.
    pub fn invalid(field: &str, detail: impl Into<String>) -> Self {
        ApiError::Invalid {
            field: Some(field.to_owned()),
            detail: detail.into(),
        }
    }

    /// The stable name in `type`, the status and the title.
    pub fn kind(&self) -> (&'static str, StatusCode, &'static str) {
        use StatusCode as S;
        match self {
            ApiError::Unauthorized(_) => ("unauthorized", S::UNAUTHORIZED, "Unauthorized"),
            ApiError::Forbidden(_) => ("forbidden", S::FORBIDDEN, "Outside the credential's scope"),
            ApiError::ActingAsAnother(_) => (
                "acting-as-another",
                S::FORBIDDEN,
                "A reviewer acts only as itself",
            ),
            ApiError::Invalid { .. } => ("invalid", S::BAD_REQUEST, "Invalid input"),
            ApiError::MalformedBody(_) => ("malformed-body", S::BAD_REQUEST, "Malformed body"),
            ApiError::UnsupportedMediaType(_) => (
                "unsupported-media-type",
                S::UNSUPPORTED_MEDIA_TYPE,
                "The body must be application/json",
            ),
            ApiError::BodyTooLarge { .. } => (
                "body-too-large",
                S::PAYLOAD_TOO_LARGE,
                "Request body too large",
            ),
            ApiError::NotFound(_) => ("not-found", S::NOT_FOUND, "Not found"),
            ApiError::MethodNotAllowed => (
                "method-not-allowed",
                S::METHOD_NOT_ALLOWED,
                "Method not allowed",
            ),
            ApiError::Refused(r) => match r {
                Refusal::NotFound(_) => ("not-found", S::NOT_FOUND, "Not found"),
                Refusal::Excluded(_) => ("excluded", S::CONFLICT, "The actor is excluded"),
                Refusal::WrongRole(_) => (
                    "wrong-role",
                    S::CONFLICT,
                    "None of the actor's roles is a candidate",
                ),
                Refusal::NotPending(_) => ("not-pending", S::CONFLICT, "The task is settled"),
                Refusal::AlreadyClaimed(_) => (
                    "already-claimed",
                    S::CONFLICT,
                    "Somebody else holds the task",
                ),
                Refusal::NotHeld(_) => {
                    ("not-held", S::CONFLICT, "The actor does not hold the task")
                }
                _ => ("refused", S::CONFLICT, "Refused"),
            },
            ApiError::TimerHeld(_) => ("timer-held", S::CONFLICT, "A sweeper holds the timer"),
            ApiError::RunSealed(_) => ("run-sealed", S::CONFLICT, "The run is sealed"),
            ApiError::Stale(_) => (
                "stale",
                S::PRECONDITION_FAILED,
                "The revision given is not the current one",
            ),
            ApiError::Unavailable { kind, .. } => {
                (kind, S::SERVICE_UNAVAILABLE, "Unavailable; retry later")
            }
            ApiError::TooManyRequests(_) => (
                "too-many-requests",
                S::TOO_MANY_REQUESTS,
                "Too many requests waiting; retry later",
            ),
            ApiError::Timeout => ("timeout", S::SERVICE_UNAVAILABLE, "Request timed out"),
            ApiError::BodyTimeout => (
                "body-timeout",
                S::REQUEST_TIMEOUT,
                "The request body did not arrive in time",
            ),
            ApiError::OutcomeUnknown(_) => (
                "outcome-unknown",
                S::INTERNAL_SERVER_ERROR,
                "The outcome is unknown; read before retrying",
            ),
            ApiError::Sandbox(_) => ("sandbox", S::INTERNAL_SERVER_ERROR, "Rules engine failure"),
            ApiError::Corrupt(_) => ("corrupt", S::INTERNAL_SERVER_ERROR, "Damaged data"),
            ApiError::NewerLayout(_) => (
                "newer-layout",
                S::SERVICE_UNAVAILABLE,
                "A newer build wrote this tenant; upgrade this server",
            ),
            ApiError::Internal(_) => ("internal", S::INTERNAL_SERVER_ERROR, "Internal error"),
        }
    }

    /// The problem document this error answers with.
    pub fn problem(&self) -> Problem {
        let (name, status, title) = self.kind();
        let mut p = Problem {
            kind: format!("{TYPE_PREFIX}{name}"),
            title: title.to_owned(),
            status: status.as_u16(),
            detail: self.to_string(),
            field: None,
            holder: None,
            state: None,
            actor: None,
            revision: None,
            lease_until: None,
            path: None,
        };
        match self {
            ApiError::Invalid { field, detail } => {
                p.field = field.clone();
                p.path = violation_path(field.as_deref(), detail);
            }
            ApiError::Stale(current) => p.revision = Some(*current),
            ApiError::TimerHeld(until) => p.lease_until = Some(*until),
            ApiError::Refused(Refusal::AlreadyClaimed(h)) => p.holder = Some(h.clone()),
            ApiError::Refused(Refusal::NotPending(s)) => p.state = Some(s.as_str().to_owned()),
            ApiError::Refused(
                Refusal::Excluded(a) | Refusal::WrongRole(a) | Refusal::NotHeld(a),
            ) => p.actor = Some(a.clone()),
            _ => {}
        }
        p
    }
}

/// The field an `invalid` answer of the rules names: its text starts with
/// it, spelt as in the WIT (`lease-ms`, `candidate-roles[2]`,
/// `decision.output:`), which the JSON spells with underscores.
fn invalid_field(why: &str) -> Option<String> {
    let first = why.split_whitespace().next()?;
    let name = first.split('[').next()?.trim_end_matches(':');
    let known = name
        .bytes()
        .all(|b| b.is_ascii_lowercase() || b == b'-' || b == b'.');
    (known && !name.is_empty()).then(|| name.replace('-', "_"))
}

/// Where the first violation of an output schema is, as the rules word it
/// (`decision.output: /amount: maximum: …`, `(root)` for the whole
/// output): a JSON Pointer.
fn violation_path(field: Option<&str>, detail: &str) -> Option<String> {
    if field != Some("decision.output") {
        return None;
    }
    let rest = detail.strip_prefix("decision.output: ")?;
    let (at, _) = rest.split_once(": ")?;
    match at {
        "(root)" => Some(String::new()),
        p if p.starts_with('/') => Some(p.to_owned()),
        _ => None,
    }
}

impl From<Error> for ApiError {
    fn from(e: Error) -> Self {
        match e {
            Error::Refused(Refusal::Stale(current)) | Error::Store(StoreError::Stale(current)) => {
                ApiError::Stale(current)
            }
            Error::Refused(Refusal::NotFound(id)) | Error::Store(StoreError::NotFound(id)) => {
                ApiError::NotFound(format!("no task {id}"))
            }
            Error::Refused(r) => ApiError::Refused(r),
            Error::Store(StoreError::Invalid(why)) => ApiError::Invalid {
                field: invalid_field(&why),
                detail: why,
            },
            Error::Store(StoreError::Corrupt(what)) => ApiError::Corrupt(what),
            Error::Store(StoreError::NewerLayout(what)) => ApiError::NewerLayout(what),
            // Not a failure of the storage: the tenant's search entries are
            // still being made (a keyspace laid out before search), which
            // the sweeper finishes a stretch at a time. Nothing is wrong,
            // and the same request will be answered soon.
            Error::Store(StoreError::Storage(what)) if what.starts_with(INDEX_BUILDING) => {
                ApiError::Unavailable {
                    kind: "index-building",
                    detail: format!(
                        "this tenant's search index is being built, which the server's sweeper \
                         finishes a stretch at a time; nothing was done: try again shortly ({what})"
                    ),
                }
            }
            Error::Store(StoreError::Storage(what)) => ApiError::Unavailable {
                kind: "storage-unavailable",
                detail: format!("the storage failed: {what}"),
            },
            Error::Storage(source) => {
                tracing::error!(error = %source, "storage failed");
                ApiError::Unavailable {
                    kind: "storage-unavailable",
                    detail: "the database did not answer".to_owned(),
                }
            }
            Error::LockTimeout(wait) => ApiError::Unavailable {
                kind: "busy",
                detail: format!("the database gave this call no turn within {wait:?}"),
            },
            Error::DeadlinePassed => ApiError::Timeout,
            Error::OutcomeUnknown { source } => {
                tracing::error!(error = %source, "a commit's outcome is unknown");
                ApiError::OutcomeUnknown(
                    "the call's commit was sent and its answer never came back: it may or may \
                     not have taken effect; read before trying again"
                        .to_owned(),
                )
            }
            Error::GroupFailed(f) if f.nothing_committed() => {
                tracing::error!(error = %f, "a group commit failed; nothing was committed");
                ApiError::Unavailable {
                    kind: "commit-failed",
                    detail: "the commit failed and nothing was written; try again".to_owned(),
                }
            }
            Error::GroupFailed(f) => {
                tracing::error!(error = %f, "a group commit's outcome is unknown");
                ApiError::OutcomeUnknown(
                    "the commit this call shared with others did not complete cleanly: it may \
                     or may not have taken effect; read before trying again"
                        .to_owned(),
                )
            }
            Error::Conflict { attempts, .. } => ApiError::Unavailable {
                kind: "conflict",
                detail: format!("the call lost to concurrent calls on each of {attempts} attempts"),
            },
            Error::Sandbox(SandboxError::Busy(_)) => ApiError::Unavailable {
                kind: "busy",
                detail: "every rules-engine instance is in use".to_owned(),
            },
            Error::Sandbox(s) => {
                tracing::error!(error = %s, "sandbox failure");
                ApiError::Sandbox(s)
            }
            other => {
                tracing::error!(error = %other, "internal failure");
                ApiError::Internal(Box::new(other))
            }
        }
    }
}

/// The JSON of a problem and its status, with `Retry-After` on a 503 and
/// `WWW-Authenticate` on a 401.
impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let problem = self.problem();
        let status = self.kind().1;
        let overloaded = matches!(
            self,
            ApiError::Unavailable {
                kind: "overloaded",
                ..
            }
        );
        let body = serde_json::to_vec(&problem).unwrap_or_else(|_| b"{}".to_vec());
        let mut res = (status, body).into_response();
        let headers = res.headers_mut();
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/problem+json"),
        );
        // Every 503 and 429 says nothing was done: try again. An unknown
        // outcome (500) is never an invitation to retry blindly.
        if status == StatusCode::SERVICE_UNAVAILABLE || status == StatusCode::TOO_MANY_REQUESTS {
            headers.insert(
                header::RETRY_AFTER,
                HeaderValue::from_static(RETRY_AFTER_SECS),
            );
        }
        // A caller refused for load gives its connection back too: a
        // refused long-poll must not keep holding what it was refused.
        // A body cut off part way leaves the connection unusable.
        if overloaded || matches!(self, ApiError::BodyTimeout) {
            headers.insert(header::CONNECTION, HeaderValue::from_static("close"));
        }
        if let ApiError::Stale(current) = &self {
            headers.insert(header::ETAG, etag(*current));
        }
        if status == StatusCode::UNAUTHORIZED {
            headers.insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static("Bearer realm=\"leasehold\""),
            );
        }
        res
    }
}

/// Every problem `type` the service can answer, with its status: the table
/// in README, held to [`ApiError::kind`] by a test.
pub const CATALOG: &[(&str, u16)] = &[
    ("unauthorized", 401),
    ("forbidden", 403),
    ("acting-as-another", 403),
    ("invalid", 400),
    ("malformed-body", 400),
    ("body-too-large", 413),
    ("unsupported-media-type", 415),
    ("not-found", 404),
    ("method-not-allowed", 405),
    ("excluded", 409),
    ("wrong-role", 409),
    ("not-pending", 409),
    ("already-claimed", 409),
    ("not-held", 409),
    ("stale", 412),
    ("busy", 503),
    ("conflict", 503),
    ("storage-unavailable", 503),
    ("index-building", 503),
    ("overloaded", 503),
    ("timeout", 503),
    ("too-many-requests", 429),
    ("commit-failed", 503),
    ("body-timeout", 408),
    ("outcome-unknown", 500),
    ("sandbox", 500),
    ("corrupt", 500),
    ("newer-layout", 503),
    ("internal", 500),
];

#[cfg(test)]
mod tests {
    use super::*;
    use leasehold_host::TaskState;

    #[test]
    fn an_invalid_answer_names_the_json_field() {
        assert_eq!(
            invalid_field("lease-ms is 0, outside 1..=604800000").as_deref(),
            Some("lease_ms")
        );
        assert_eq!(
            invalid_field("candidate-roles[2] is empty").as_deref(),
            Some("candidate_roles")
        );
        assert_eq!(invalid_field("Something Else"), None);
    }

    #[test]
    fn every_claim_ladder_rung_has_its_own_type_and_detail() {
        let cases = [
            (Refusal::Excluded("a".into()), "excluded"),
            (Refusal::WrongRole("a".into()), "wrong-role"),
            (Refusal::NotPending(TaskState::Completed), "not-pending"),
            (Refusal::AlreadyClaimed("bob".into()), "already-claimed"),
            (Refusal::NotHeld("a".into()), "not-held"),
        ];
        for (refusal, name) in cases {
            let e = ApiError::from(Error::Refused(refusal));
            let p = e.problem();
            assert_eq!(p.kind, format!("{TYPE_PREFIX}{name}"));
            assert_eq!(p.status, 409);
        }
        let p = ApiError::from(Error::Refused(Refusal::AlreadyClaimed("bob".into()))).problem();
        assert_eq!(p.holder.as_deref(), Some("bob"));
        let p = ApiError::from(Error::Refused(Refusal::NotPending(TaskState::Expired))).problem();
        assert_eq!(p.state.as_deref(), Some("expired"));
        let p = ApiError::from(Error::Refused(Refusal::NotFound("t".into()))).problem();
        assert_eq!(p.status, 404);
    }

    #[test]
    fn a_stale_revision_is_412_with_the_current_one() {
        for e in [
            Error::Refused(Refusal::Stale(7)),
            Error::Store(StoreError::Stale(7)),
        ] {
            let e = ApiError::from(e);
            let p = e.problem();
            assert_eq!(p.status, 412);
            assert_eq!(p.kind, format!("{TYPE_PREFIX}stale"));
            assert_eq!(p.revision, Some(7));
            let res = e.into_response();
            assert_eq!(res.headers()[header::ETAG], "\"7\"");
        }
    }

    #[test]
    fn a_schema_violation_names_the_field_and_the_path() {
        let p = ApiError::from(Error::Store(StoreError::Invalid(
            "decision.output: /amount: maximum: 12 is greater than 10".into(),
        )))
        .problem();
        assert_eq!(p.field.as_deref(), Some("decision.output"));
        assert_eq!(p.path.as_deref(), Some("/amount"));
        let p = ApiError::from(Error::Store(StoreError::Invalid(
            "decision.output: (root): type: null is not an object".into(),
        )))
        .problem();
        assert_eq!(p.path.as_deref(), Some(""));
        let p = ApiError::from(Error::Store(StoreError::Invalid(
            "decision.reason: the outcome \"rejected\" needs a reason".into(),
        )))
        .problem();
        assert_eq!(p.field.as_deref(), Some("decision.reason"));
        assert_eq!(p.path, None);
    }

    #[test]
    fn a_search_index_being_built_is_its_own_503_not_a_storage_failure() {
        let e = ApiError::from(Error::Store(StoreError::Storage(
            "search: this tenant's search index is being built (up to task \"t-9\"); \
             build-search-index finishes it, and a host's sweeper calls it"
                .into(),
        )));
        let p = e.problem();
        assert_eq!(p.kind, format!("{TYPE_PREFIX}index-building"));
        assert_eq!(p.status, 503);
        assert!(p.detail.contains("being built"), "{}", p.detail);
        let res = e.into_response();
        assert_eq!(res.headers()[header::RETRY_AFTER], "1");
        let other = ApiError::from(Error::Store(StoreError::Storage("disk on fire".into())));
        assert_eq!(other.kind().0, "storage-unavailable");
    }

    #[test]
    fn a_sandbox_failure_says_nothing_of_the_guest() {
        let e = ApiError::from(Error::Sandbox(SandboxError::Trap("secret frame".into())));
        let p = e.problem();
        assert_eq!(p.status, 500);
        assert!(!p.detail.contains("secret"), "{}", p.detail);
    }

    #[test]
    fn the_catalog_agrees_with_the_mapping() {
        let samples = [
            ApiError::Unauthorized(String::new()),
            ApiError::forbidden(""),
            ApiError::ActingAsAnother(String::new()),
            ApiError::invalid("x", ""),
            ApiError::MalformedBody(String::new()),
            ApiError::BodyTooLarge { limit: 1 },
            ApiError::UnsupportedMediaType(String::new()),
            ApiError::NotFound(String::new()),
            ApiError::MethodNotAllowed,
            ApiError::Stale(3),
            ApiError::Timeout,
            ApiError::TooManyRequests(String::new()),
            ApiError::BodyTimeout,
            ApiError::OutcomeUnknown(String::new()),
            ApiError::Corrupt(String::new()),
            ApiError::NewerLayout(String::new()),
            ApiError::Sandbox(SandboxError::Trap(String::new())),
        ];
        for e in samples {
            let (name, status, _) = e.kind();
            assert!(
                CATALOG.contains(&(name, status.as_u16())),
                "{name} {status} is not in the catalog"
            );
        }
    }
}
