//! The application: every route in one place, built from one table. The
//! API's routes and their OpenAPI document come from the same handler
//! registrations (so the route table authorization reads is the served
//! document's), with the layers every request passes (request id, trace,
//! HTTP metrics, authorization, body limit, body timeout and the slow-body
//! guard), beside the
//! operations endpoints and the pages. It knows nothing of listeners or
//! connections (that is `server` and `connections`), and must never add a
//! route that is not in the table authorization reads.

use std::sync::{Arc, OnceLock};

use axum::Router;
use axum::extract::{DefaultBodyLimit, Request};
use axum::http::HeaderName;
use axum::middleware;
use axum::routing::get;
use tower::ServiceBuilder;
use tower_http::request_id::{MakeRequestUuid, PropagateRequestIdLayer, SetRequestIdLayer};
use tower_http::timeout::RequestBodyTimeoutLayer;
use tower_http::trace::{DefaultOnResponse, TraceLayer};
use utoipa::OpenApi;

use crate::api;
use crate::openapi::ApiDoc;
use crate::ops;
use crate::problem::ApiError;
use crate::routes::{Route, table};
use crate::state::AppState;

/// The header that carries each request's id, echoed in the answer.
pub const REQUEST_ID: &str = "x-request-id";

/// The OpenAPI document and the API router, from the same registrations.
pub fn api() -> (Router<AppState>, utoipa::openapi::OpenApi) {
    let (router, mut doc) = utoipa_axum::router::OpenApiRouter::with_openapi(ApiDoc::openapi())
        .merge(api::router())
        .split_for_parts();
    crate::openapi::refine(&mut doc);
    (router, doc)
}

/// The OpenAPI document the service serves at `/v1/openapi.json`.
pub fn openapi() -> utoipa::openapi::OpenApi {
    api().1
}

/// The whole application: the API under `/v1` with its limits, and the
/// operations endpoints and the pages (`/`, `/operator`) beside it.
pub fn app(state: AppState) -> Router {
    let _ = ops::prometheus();
    let options = state.options.clone();
    let (api, doc) = api();
    let doc = Arc::new(doc);
    let api = api
        .layer(middleware::from_fn_with_state(
            state.clone(),
            crate::extract::authorize,
        ))
        .layer(RequestBodyTimeoutLayer::new(options.request_timeout))
        .layer(DefaultBodyLimit::max(options.body_limit));
    let ops = Router::new()
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(ops::readyz))
        .route("/metrics", get(ops::metrics_for_operators))
        .route("/backup", get(crate::backup::backup))
        .merge(crate::inbox::router())
        .route(
            "/v1/openapi.json",
            get(move || {
                let doc = doc.clone();
                async move { axum::Json(doc.as_ref().clone()) }
            }),
        );
    let request_id = HeaderName::from_static(REQUEST_ID);
    // A body left unread is read to its end within the same bounds as one
    // a route reads, so its connection can carry the next request.
    let unread = crate::drain::DrainLimits {
        max_bytes: options.body_limit,
        within: options.request_timeout,
    };
    api.merge(ops)
        .fallback(|| async { ApiError::NotFound("no such route".to_owned()) })
        .method_not_allowed_fallback(|| async { ApiError::MethodNotAllowed })
        .with_state(state.clone())
        // Whose the connection is, settled from the head alone.
        .layer(middleware::from_fn_with_state(state, crate::admit::admit))
        .layer(middleware::from_fn(move |req, next| {
            crate::drain::unread_bodies(unread, req, next)
        }))
        // Outside the drain, so that a body read to its end there keeps the
        // same rate as one a route reads.
        .layer(middleware::from_fn(move |req, next| {
            crate::body_rate::guard(options.body_rate, req, next)
        }))
        .layer(middleware::from_fn(ops::http_metrics))
        .layer(
            ServiceBuilder::new()
                .layer(SetRequestIdLayer::new(request_id.clone(), MakeRequestUuid))
                .layer(
                    TraceLayer::new_for_http().make_span_with(|req: &Request| {
                        let id = req
                            .headers()
                            .get(REQUEST_ID)
                            .and_then(|v| v.to_str().ok())
                            .unwrap_or_default();
                        tracing::info_span!("request", method = %ops::method_label(req.method()), uri = %req.uri().path(), request_id = %id)
                    })
                    .on_response(DefaultOnResponse::new().level(tracing::Level::INFO)),
                )
                .layer(PropagateRequestIdLayer::new(request_id)),
        )
}

/// Every API route, from the served document.
pub fn routes() -> &'static [Route] {
    static TABLE: OnceLock<Vec<Route>> = OnceLock::new();
    TABLE.get_or_init(|| table(&openapi()))
}

#[cfg(test)]
mod tests {
    use leasehold_host::Verb;

    use super::*;
    use crate::principal::Scope;

    /// Verbs the service does not serve, each with the reason; a verb added
    /// to the WIT and the host's table is served or listed here.
    const NOT_SERVED: &[(Verb, &str)] = &[
        (
            Verb::BuildSearchIndex,
            "the sweeper's duty: it builds an old keyspace's search entries a stretch at a time",
        ),
        (
            Verb::AdvanceSubscription,
            "the delivery engine's own book: a position moves only past what was delivered",
        ),
        (
            Verb::LeaseSubscription,
            "the delivery engine's own book: which server delivers a subscription",
        ),
        (
            Verb::ReleaseSubscription,
            "the delivery engine's own book: a server giving its lease up as it stops",
        ),
        (
            Verb::RecordSubscriptionAttempts,
            "the delivery engine's own book: the attempts it made, shown in every answer",
        ),
        (
            Verb::StepJob,
            "the sweeper's duty (StepJobs): a job proceeds a step at a time on the server's own turns, never a request's",
        ),
        (
            Verb::RunnableJobs,
            "the sweeper's duty (StepJobs): which jobs it steps; `GET /v1/jobs` shows every job",
        ),
    ];

    /// Operations that call no verb of their own, each with the reason.
    const NOT_VERBS: &[(&str, &str)] = &[
        (
            api::WHOAMI,
            "names the caller from its credential; the pages ask it once signed in",
        ),
        (
            api::RESUME,
            "calls set-subscription-state (active), whose own route is the pause",
        ),
    ];

    /// The served document's operations against the host's one table of
    /// verbs: every verb is an operation (its `operationId` the verb's WIT
    /// name) or listed as not served, and every operation is a verb or
    /// listed as calling none.
    #[test]
    fn every_verb_is_an_operation_or_listed_as_not_served() {
        let ids: Vec<&str> = routes().iter().map(|r| r.verb.as_str()).collect();
        for &verb in Verb::ALL {
            let served = ids.contains(&verb.name());
            let listed = NOT_SERVED.iter().any(|(v, _)| *v == verb);
            assert!(
                served != listed,
                "{}: {}",
                verb.name(),
                if served {
                    "served, and listed as not served"
                } else {
                    "neither served nor listed as not served, with a reason"
                }
            );
        }
        for id in ids {
            let verb = Verb::named(id).is_some();
            let listed = NOT_VERBS.iter().any(|(n, _)| *n == id);
            assert!(
                verb != listed,
                "operation {id}: {}",
                if verb {
                    "a verb, and listed as calling none"
                } else {
                    "neither a verb of the host's table nor listed as calling none"
                }
            );
        }
        let reasons = NOT_SERVED.iter().map(|(_, why)| why);
        assert!(
            reasons
                .chain(NOT_VERBS.iter().map(|(_, why)| why))
                .all(|why| !why.is_empty())
        );
    }

    #[test]
    fn each_route_appears_once_each_verb_once_and_each_names_its_scopes() {
        let all = routes();
        assert!(all.len() >= 26, "{} routes", all.len());
        for (i, r) in all.iter().enumerate() {
            for s in &all[..i] {
                assert!(
                    !(s.path == r.path && s.method == r.method),
                    "{} {} twice",
                    r.method,
                    r.path
                );
                assert_ne!(s.verb, r.verb, "{} has two routes", r.verb);
            }
            assert!(!r.scopes.is_empty(), "nobody may call {}", r.verb);
            assert!(
                !r.verb.is_empty(),
                "{} {} has no operationId",
                r.method,
                r.path
            );
        }
    }

    #[test]
    fn a_reviewer_reaches_no_system_or_operator_only_verb() {
        for verb in [
            Verb::Open,
            Verb::Escalate,
            Verb::TakeOver,
            Verb::Check,
            Verb::Arm,
            Verb::ClaimDue,
            Verb::Seal,
            Verb::WithdrawRun,
            Verb::ReclaimLapsed,
            Verb::Overdue,
            Verb::OpenCount,
            Verb::Update,
            Verb::Assign,
            Verb::Unassign,
            Verb::DefineKind,
            Verb::ListKinds,
            Verb::RemoveKind,
            Verb::AddSchedule,
            Verb::RemoveSchedule,
            Verb::PauseSchedule,
            Verb::ResumeSchedule,
            Verb::TriggerSchedule,
            Verb::ListSchedules,
            Verb::AddSubscription,
            Verb::GetSubscription,
            Verb::ListSubscriptions,
            Verb::ChangeSubscription,
            Verb::SetSubscriptionState,
            Verb::RotateSubscriptionKey,
            Verb::RemoveSubscription,
            Verb::RewindSubscription,
            Verb::PutView,
            Verb::DeleteView,
            Verb::StartJob,
            Verb::GetJob,
            Verb::ListJobs,
            Verb::CancelJob,
        ] {
            let r = routes()
                .iter()
                .find(|r| r.verb == verb.name())
                .unwrap_or_else(|| panic!("no route for {}", verb.name()));
            assert!(!r.allows(Scope::Reviewer), "{}", verb.name());
        }
        for r in routes() {
            assert!(r.allows(Scope::Operator), "{}", r.verb);
        }
    }
}
