//! Putting the service together and running it: the router with its
//! layers (request id, trace, HTTP metrics, body limit, timeout, bound on
//! in-flight requests), the operations endpoints, the listener, and
//! graceful shutdown. It owns the runtime; it must never answer a request
//! before its engine call has returned, so a 2xx is always durable.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};
use std::time::Instant;

use axum::error_handling::HandleErrorLayer;
use axum::extract::{DefaultBodyLimit, MatchedPath, Request, State};
use axum::http::{HeaderName, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{BoxError, Router};
use leasehold_host::{Engine, EngineBuilder};
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
use tower::ServiceBuilder;
use tower::limit::GlobalConcurrencyLimitLayer;
use tower_http::request_id::{MakeRequestUuid, PropagateRequestIdLayer, SetRequestIdLayer};
use tower_http::trace::{DefaultOnResponse, TraceLayer};
use utoipa::OpenApi;

use crate::api;
use crate::auth::Credentials;
use crate::openapi::ApiDoc;
use crate::problem::ApiError;
use crate::state::{AppState, Options};

/// The header that carries each request's id, echoed in the answer.
pub const REQUEST_ID: &str = "x-request-id";

/// What the server needs to start.
#[derive(Debug)]
pub struct Config {
    /// A redb file path or a PostgreSQL URL.
    pub db: String,
    pub listen: SocketAddr,
    pub credentials: Credentials,
    pub options: Options,
    pub engine: EngineBuilder,
    /// The listener's certificate chain and key (PEM), for HTTPS.
    pub tls: Option<(PathBuf, PathBuf)>,
    /// Stop on SIGTERM and SIGINT (the CLI); tests stop through the handle.
    pub handle_signals: bool,
}

/// Why the server could not start or stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("no credential source: give --tokens FILE or --jwt-keys FILE, or --dev")]
    NoCredentials,
    #[error("cannot open the database: {0}")]
    Engine(#[source] leasehold_host::Error),
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot start the runtime: {0}")]
    Runtime(#[source] std::io::Error),
    #[error("TLS setup: {0}")]
    Tls(String),
    #[error("the server failed: {0}")]
    Serve(#[source] std::io::Error),
}

/// The OpenAPI document and the API router, from the same registrations.
pub fn api() -> (Router<AppState>, utoipa::openapi::OpenApi) {
    utoipa_axum::router::OpenApiRouter::with_openapi(ApiDoc::openapi())
        .merge(api::router())
        .split_for_parts()
}

/// The OpenAPI document the service serves at `/v1/openapi.json`.
pub fn openapi() -> utoipa::openapi::OpenApi {
    api().1
}

/// The recorder is process-wide: every server in a process shares it.
fn prometheus() -> Option<&'static PrometheusHandle> {
    static HANDLE: OnceLock<Option<PrometheusHandle>> = OnceLock::new();
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

/// The whole application: the API under `/v1` with its limits, and the
/// operations endpoints beside it.
pub fn app(engine: Engine, credentials: Credentials, options: Options) -> Router {
    let _ = prometheus();
    let state = AppState {
        engine,
        credentials: Arc::new(credentials),
        options,
    };
    let (api, doc) = api();
    let doc = Arc::new(doc);
    let limits = ServiceBuilder::new()
        .layer(HandleErrorLayer::new(move |e: BoxError| async move {
            limit_error(e, options)
        }))
        .load_shed()
        // One bound shared by every route: `Router::layer` wraps each route
        // on its own, so a per-layer limit would be a bound per route.
        .layer(GlobalConcurrencyLimitLayer::new(options.max_in_flight))
        .timeout(options.request_timeout);
    let api = api
        .layer(limits)
        .layer(DefaultBodyLimit::max(options.body_limit));
    let ops = Router::new()
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics_text))
        .route(
            "/v1/openapi.json",
            get(move || {
                let doc = doc.clone();
                async move { axum::Json(doc.as_ref().clone()) }
            }),
        );
    let request_id = HeaderName::from_static(REQUEST_ID);
    api.merge(ops)
        .fallback(|| async { ApiError::NotFound("no such route".to_owned()) })
        .method_not_allowed_fallback(|| async { ApiError::MethodNotAllowed })
        .with_state(state.clone())
        .layer(middleware::from_fn(http_metrics))
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
                        tracing::info_span!("request", method = %req.method(), uri = %req.uri().path(), request_id = %id)
                    })
                    .on_response(DefaultOnResponse::new().level(tracing::Level::INFO)),
                )
                .layer(PropagateRequestIdLayer::new(request_id)),
        )
}

fn limit_error(e: BoxError, options: Options) -> ApiError {
    if e.is::<tower::timeout::error::Elapsed>() {
        ApiError::Timeout(options.request_timeout)
    } else if e.is::<tower::load_shed::error::Overloaded>() {
        ApiError::Unavailable {
            kind: "overloaded",
            detail: format!(
                "the service is at its bound of {} requests in flight",
                options.max_in_flight
            ),
        }
    } else {
        ApiError::Internal(e)
    }
}

/// Readiness means storage answers: one counter read on a tenant no
/// credential can name (token files and JWTs are checked the same way, but
/// the name is reserved here by convention).
async fn readyz(State(state): State<AppState>) -> Response {
    let engine = state.engine.clone();
    let answer =
        tokio::task::spawn_blocking(move || engine.tenant("_readyz").and_then(|t| t.open_count()))
            .await;
    match answer {
        Ok(Ok(_)) => (StatusCode::OK, "ready\n").into_response(),
        Ok(Err(e)) => {
            tracing::warn!(error = %e, "not ready");
            ApiError::Unavailable {
                kind: "storage-unavailable",
                detail: "the storage does not answer".to_owned(),
            }
            .into_response()
        }
        Err(e) => ApiError::Internal(Box::new(e)).into_response(),
    }
}

async fn metrics_text(State(state): State<AppState>) -> Response {
    let engine = &state.engine;
    if let Some(c) = engine.commit_stats() {
        metrics::counter!("leasehold_group_commits_total").absolute(c.commits);
        metrics::counter!("leasehold_group_commit_calls_total").absolute(c.calls);
    }
    metrics::counter!("leasehold_pg_conflict_retries_total").absolute(engine.conflict_retries());
    if let Some(n) = engine.round_trips() {
        metrics::counter!("leasehold_pg_round_trips_total").absolute(n);
    }
    let text = prometheus().map(|h| h.render()).unwrap_or_default();
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], text).into_response()
}

/// Counts every HTTP answer by route template and status: never by the
/// concrete path, which would carry task ids.
async fn http_metrics(req: Request, next: Next) -> Response {
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map_or_else(|| "unmatched".to_owned(), |m| m.as_str().to_owned());
    let method = req.method().as_str().to_owned();
    let started = Instant::now();
    let res = next.run(req).await;
    let status = res.status().as_u16().to_string();
    metrics::counter!("leasehold_http_requests_total", "route" => route.clone(), "method" => method, "status" => status)
        .increment(1);
    metrics::histogram!("leasehold_http_request_seconds", "route" => route)
        .record(started.elapsed().as_secs_f64());
    res
}

/// A running server: its address, and the way to stop it.
#[derive(Debug)]
pub struct Server {
    addr: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<Result<(), ServeError>>>,
}

impl Server {
    /// Opens the database, binds the listener and starts serving on a
    /// runtime of its own. Answers once the listener accepts.
    pub fn start(config: Config) -> Result<Server, ServeError> {
        if config.credentials.is_empty() {
            return Err(ServeError::NoCredentials);
        }
        let engine = config
            .engine
            .clone()
            .open_any(&config.db)
            .map_err(ServeError::Engine)?;
        let listener =
            std::net::TcpListener::bind(config.listen).map_err(|source| ServeError::Listen {
                addr: config.listen,
                source,
            })?;
        let addr = listener.local_addr().map_err(|source| ServeError::Listen {
            addr: config.listen,
            source,
        })?;
        listener.set_nonblocking(true).map_err(ServeError::Serve)?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .thread_name("leasehold-serve")
            .build()
            .map_err(ServeError::Runtime)?;
        // The last handle on the engine is dropped on this thread, outside
        // the runtime: a PostgreSQL engine owns a runtime of its own, which
        // may not be dropped from async code.
        let last = engine.clone();
        let app = app(engine, config.credentials, config.options);
        let tls = match &config.tls {
            Some((cert, key)) => Some(crate::tls::acceptor(cert, key)?),
            None => None,
        };
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let signals = config.handle_signals;
        let thread = std::thread::Builder::new()
            .name("leasehold-serve".to_owned())
            .spawn(move || {
                let served = runtime.block_on(async move {
                    let shutdown = async move {
                        if signals {
                            tokio::select! {
                                _ = stopped => {}
                                () = terminate() => {}
                            }
                        } else {
                            let _ = stopped.await;
                        }
                        tracing::info!(
                            "shutting down: no new connections; finishing requests in flight"
                        );
                    };
                    let listener =
                        tokio::net::TcpListener::from_std(listener).map_err(ServeError::Serve)?;
                    match tls {
                        None => axum::serve(listener, app)
                            .with_graceful_shutdown(shutdown)
                            .await
                            .map_err(ServeError::Serve),
                        Some(acceptor) => axum::serve(
                            crate::tls::TlsListener {
                                tcp: listener,
                                acceptor,
                            },
                            app,
                        )
                        .with_graceful_shutdown(shutdown)
                        .await
                        .map_err(ServeError::Serve),
                    }
                });
                // Dropping the runtime waits for engine calls still on the
                // blocking pool, so the engine closes after them.
                drop(runtime);
                drop(last);
                served
            })
            .map_err(ServeError::Runtime)?;
        Ok(Server {
            addr,
            stop: Some(stop),
            thread: Some(thread),
        })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops accepting, lets requests in flight finish, closes the
    /// database, and answers how serving ended.
    pub fn shutdown(mut self) -> Result<(), ServeError> {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        self.join()
    }

    /// Waits until the server stops (on a signal, with `handle_signals`).
    pub fn wait(mut self) -> Result<(), ServeError> {
        self.join()
    }

    fn join(&mut self) -> Result<(), ServeError> {
        match self.thread.take().map(std::thread::JoinHandle::join) {
            Some(Ok(served)) => served,
            Some(Err(_)) => Err(ServeError::Serve(std::io::Error::other(
                "the server thread panicked",
            ))),
            None => Ok(()),
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        let _ = self.join();
    }
}

/// SIGTERM or SIGINT.
async fn terminate() {
    let ctrl_c = async {
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {}
        () = term => {}
    }
}
