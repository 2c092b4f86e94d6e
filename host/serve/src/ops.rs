//! The operations endpoints beside the API: liveness, readiness and the
//! Prometheus metrics, and the HTTP metrics every request records. Health
//! and readiness take no credential (nor do the metrics on the operations
//! listener; on the API's they need an operator's), so each must cost the
//! server a bounded amount
//! whoever calls it how often: readiness probes the storage at most once a
//! second, with a deadline, and metric labels come from fixed sets. They
//! must never label a metric by anything a caller chooses freely.

use std::time::{Duration, Instant};

use axum::extract::{MatchedPath, Request, State};
use axum::http::{Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};

use crate::problem::ApiError;
use crate::state::AppState;

/// How long a readiness probe may take before the storage counts as not
/// answering.
const PROBE_DEADLINE: Duration = Duration::from_secs(2);
/// The tenant readiness probes write to. Tenant names a credential may
/// carry are checked the same way, so by convention no deployment issues
/// credentials for it.
const PROBE_TENANT: &str = "_readyz";

/// Readiness means the storage takes a write now: one writing call on the
/// probe tenant (which begins a write transaction and commits, as every
/// writing verb does), so a store that fails writes (a redb file whose
/// commit failed takes none until reopened) is not ready even while it
/// still answers reads.
pub async fn readyz(State(state): State<AppState>) -> Response {
    let ready = &state.readiness;
    let answer = match ready.fresh() {
        Some(r) => r,
        None => {
            let _one = ready.probing.lock().await;
            match ready.fresh() {
                Some(r) => r,
                None => {
                    let r = probe(&state).await;
                    *ready
                        .last
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner) =
                        Some((Instant::now(), r.clone()));
                    r
                }
            }
        }
    };
    match answer {
        Ok(()) => (StatusCode::OK, "ready\n").into_response(),
        Err(why) => ApiError::Unavailable {
            kind: "storage-unavailable",
            detail: format!("not ready: {why}"),
        }
        .into_response(),
    }
}

async fn probe(state: &AppState) -> Result<(), String> {
    let engine = state.engine.clone();
    let deadline = Instant::now() + PROBE_DEADLINE;
    // Each probe writes: it arms the probe's timer, or retires it when the
    // last probe armed it. A call that stages nothing may never reach the
    // store's write path.
    let call = tokio::task::spawn_blocking(move || {
        let t = engine.tenant(PROBE_TENANT)?.until(deadline);
        let timer = leasehold_host::Timer {
            run: "readyz".to_owned(),
            case: None,
            effect: "probe".to_owned(),
            step: 0,
            phase: leasehold_host::Phase::Forward,
            fire_at: leasehold_guest::validate::MAX_TIMESTAMP,
        };
        match t.arm(&timer)? {
            leasehold_host::ArmOutcome::Armed => Ok(()),
            _ => t.disarm(&timer.run, &timer.effect).map(|_| ()),
        }
    });
    match tokio::time::timeout_at(deadline.into(), call).await {
        Ok(Ok(Ok(_))) => Ok(()),
        Ok(Ok(Err(e))) => {
            tracing::warn!(error = %e, "not ready: the storage refused a write");
            Err("the storage does not take writes".to_owned())
        }
        Ok(Err(e)) => Err(format!("the probe failed: {e}")),
        Err(_) => {
            tracing::warn!("not ready: the storage did not answer in time");
            Err(format!(
                "the storage did not answer within {PROBE_DEADLINE:?}"
            ))
        }
    }
}

/// The recorder is process-wide: every server in a process shares it.
pub fn prometheus() -> Option<&'static PrometheusHandle> {
    static HANDLE: std::sync::OnceLock<Option<PrometheusHandle>> = std::sync::OnceLock::new();
    HANDLE
        .get_or_init(|| {
            let buckets = [
                0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0,
            ];
            let recorder = PrometheusBuilder::new()
                .set_buckets(&buckets)
                .ok()?
                .build_recorder();
            let handle = recorder.handle();
            metrics::set_global_recorder(recorder).ok()?;
            Some(handle)
        })
        .as_ref()
}

/// `/metrics` on the API's listener: for operators of the server's admin
/// tenant alone (`--admin-tenant`), since the counts of every tenant's calls
/// are there and an operator of one tenant must learn nothing of another.
/// The operations listener serves them without a credential (see
/// `Options::ops_listen`).
pub async fn metrics_for_operators(
    State(state): State<AppState>,
    headers: axum::http::HeaderMap,
) -> Response {
    let header = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    let admin = |tenant: &str| {
        state
            .options
            .admin_tenant
            .is_some_and(|a| a.as_str() == tenant)
    };
    match state.credentials.current().authenticate(header) {
        Ok(p) if p.scope == crate::auth::Scope::Operator && admin(&p.tenant) => {
            metrics_text(State(state)).await
        }
        Ok(_) => ApiError::forbidden(
            "only an operator of the server's admin tenant (--admin-tenant) may read /metrics \
             here, which counts every tenant's calls; or scrape the operations listener \
             (--ops-listen)",
        )
        .into_response(),
        Err(_) => ApiError::Unauthorized(
            "/metrics takes an operator's bearer credential on this listener".to_owned(),
        )
        .into_response(),
    }
}

/// What the operations listener serves: liveness, readiness and the
/// metrics, nothing of the API.
pub fn router(state: AppState) -> axum::Router {
    axum::Router::new()
        .route("/healthz", axum::routing::get(|| async { "ok\n" }))
        .route("/readyz", axum::routing::get(readyz))
        .route("/metrics", axum::routing::get(metrics_text))
        .fallback(|| async { ApiError::NotFound("no such route".to_owned()) })
        .with_state(state)
}

pub async fn metrics_text(State(state): State<AppState>) -> Response {
    let engine = &state.engine;
    if let Some(c) = engine.commit_stats() {
        metrics::counter!("leasehold_group_commits_total").absolute(c.commits);
        metrics::counter!("leasehold_group_commit_calls_total").absolute(c.calls);
    }
    metrics::counter!("leasehold_pg_conflict_retries_total").absolute(engine.conflict_retries());
    if let Some(n) = engine.round_trips() {
        metrics::counter!("leasehold_pg_round_trips_total").absolute(n);
    }
    let mut text = prometheus().map(|h| h.render()).unwrap_or_default();
    // Each subscription's deliveries, labelled by tenant and by the id the
    // server made for it.
    if let Some(push) = &state.push {
        text.push_str(&push.metrics_text());
    }
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], text).into_response()
}

/// The method as a metric label: the methods HTTP defines, and `other` for
/// the rest, which anyone may make up.
/// Counts one sweep of the server's sweeper.
pub fn swept(r: &leasehold_host::SweepReport) {
    let outcome = if r.error.is_some() { "error" } else { "ok" };
    metrics::counter!("leasehold_sweeps_total", "outcome" => outcome).increment(1);
    for (action, n) in [
        ("reclaimed", r.reclaimed),
        ("escalated", r.escalated),
        ("expired", r.expired),
    ] {
        metrics::counter!("leasehold_swept_tasks_total", "action" => action).increment(n);
    }
    // The bulk jobs' steps (`StepJobs`, which `crate::server` adds): a task
    // changed, skipped or failed, or a stretch of a job's set counted.
    metrics::counter!("leasehold_job_steps_total").increment(r.counted("job-steps"));
    metrics::histogram!("leasehold_sweep_late_seconds").record(r.late_ms.max(0) as f64 / 1000.0);
}

pub fn method_label(m: &Method) -> &'static str {
    match *m {
        Method::GET => "GET",
        Method::HEAD => "HEAD",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::DELETE => "DELETE",
        Method::PATCH => "PATCH",
        Method::OPTIONS => "OPTIONS",
        Method::CONNECT => "CONNECT",
        Method::TRACE => "TRACE",
        _ => "other",
    }
}

/// Counts every HTTP answer by route template, method and status: never by
/// the concrete path, which would carry task ids, nor by a made-up method.
pub async fn http_metrics(req: Request, next: Next) -> Response {
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map_or_else(|| "unmatched".to_owned(), |m| m.as_str().to_owned());
    let method = method_label(req.method());
    let started = Instant::now();
    let res = next.run(req).await;
    let status = res.status().as_u16().to_string();
    metrics::counter!("leasehold_http_requests_total", "route" => route.clone(), "method" => method, "status" => status)
        .increment(1);
    metrics::histogram!("leasehold_http_request_seconds", "route" => route)
        .record(started.elapsed().as_secs_f64());
    res
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn made_up_methods_share_one_label() {
        for m in ["FOO", "BREW", "get", "PROPFIND"] {
            let m = Method::from_bytes(m.as_bytes()).expect("a method token");
            assert_eq!(method_label(&m), "other", "{m}");
        }
        assert_eq!(method_label(&Method::HEAD), "HEAD");
    }
}
