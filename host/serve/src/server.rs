//! Running the service: what it needs to start ([`Config`]), opening the
//! engine, the bounds fitted to what the engine can run, the sweeper, the
//! listeners (the API's and the operations one) and their connections
//! (`crate::connections`, TLS in `crate::tls`), signals (SIGTERM and SIGINT
//! stop, SIGHUP reloads the credentials) and shutdown. The application it
//! serves, routes and layers, is `crate::router`'s. It owns the runtime; it
//! must never answer a request before its engine call has returned, so a
//! 2xx is always durable.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use leasehold_host::EngineBuilder;

use crate::auth::{Credentials, LiveCredentials, Reload};
use crate::change::WebhookPayload;
use crate::cursor::CursorKey;
pub use crate::error::ServeError;
use crate::push::Push;
use crate::router::app;
use crate::state::{AppState, Options};

/// Connections the operations listener keeps open at once: probes and
/// scrapers are few.
const OPS_CONNECTIONS: usize = 64;

/// What the server needs to start.
pub struct Config {
    /// A redb file path or a PostgreSQL URL.
    pub db: String,
    /// The address to listen on.
    pub listen: SocketAddr,
    /// The credentials accepted at start.
    pub credentials: Credentials,
    /// How to read the credentials again on SIGHUP (or
    /// [`Server::reload_credentials`]); without it they are fixed.
    pub reload: Option<Reload>,
    /// Limits and behaviour of the service.
    pub options: Options,
    /// How the engine is built (limits, reuse, compile cache); the server
    /// opens `db` with it.
    pub engine: EngineBuilder,
    /// The listener's certificate chain and key (PEM), for HTTPS.
    pub tls: Option<(PathBuf, PathBuf)>,
    /// The key page cursors are sealed with; without one the server makes
    /// its own, and its cursors open only on it.
    pub cursor_key: Option<CursorKey>,
    /// Stop on SIGTERM and SIGINT and reload on SIGHUP (the CLI); tests
    /// stop through the handle.
    pub handle_signals: bool,
}

impl std::fmt::Debug for Config {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Config")
            .field("db", &self.db)
            .field("listen", &self.listen)
            .field("options", &self.options)
            .field("tls", &self.tls)
            .finish_non_exhaustive()
    }
}

/// The credentials in force and where fresh ones come from.
struct Reloader {
    live: LiveCredentials,
    source: Option<Reload>,
}

impl Reloader {
    fn reload(&self) -> Result<(usize, usize), String> {
        let Some(source) = &self.source else {
            return Err("this server was given no credential files to read again".to_owned());
        };
        let fresh = source()?;
        self.live.replace(fresh)
    }

    /// Reloads and says so in the log, whatever the outcome: a failed
    /// reload keeps the credentials in force.
    fn reload_logged(&self) {
        match self.reload() {
            Ok((tokens, keys)) => tracing::info!(
                tokens,
                jwt_keys = keys,
                "credentials reloaded: {tokens} tokens and {keys} JWT keys are live"
            ),
            Err(why) => tracing::error!(%why, "credentials not reloaded; the old ones stay live"),
        }
    }
}

/// A running server: its address, and the way to stop it.
pub struct Server {
    addr: SocketAddr,
    ops_addr: Option<SocketAddr>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<Result<(), ServeError>>>,
    reloader: Arc<Reloader>,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server")
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
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
        Server::start_on(engine, config)
    }

    /// [`start`](Self::start) over an engine the caller opened (over a
    /// backend of its own, say); `config.db` only decides the per-tenant
    /// bound, as a URL or a file would.
    pub fn start_on(engine: leasehold_host::Engine, config: Config) -> Result<Server, ServeError> {
        if config.credentials.is_empty() {
            return Err(ServeError::NoCredentials);
        }
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
        let ops_listener = match config.options.ops_listen {
            Some(at) => {
                let l = std::net::TcpListener::bind(at)
                    .map_err(|source| ServeError::Listen { addr: at, source })?;
                l.set_nonblocking(true).map_err(ServeError::Serve)?;
                Some(l)
            }
            None => None,
        };
        let ops_addr = match &ops_listener {
            Some(l) => Some(l.local_addr().map_err(ServeError::Serve)?),
            None => None,
        };
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .thread_name("leasehold-serve")
            .build()
            .map_err(ServeError::Runtime)?;
        let cursors = match config.cursor_key {
            Some(k) => k,
            None => CursorKey::random().map_err(ServeError::CursorKey)?,
        };
        let live = LiveCredentials::new(config.credentials);
        let (tokens, keys) = live.current().live();
        tracing::info!(
            tokens,
            jwt_keys = keys,
            "{tokens} tokens and {keys} JWT keys are live"
        );
        let reloader = Arc::new(Reloader {
            live: live.clone(),
            source: config.reload,
        });
        // No tenant may hold more than half of what the engine can run at
        // once: its instance slots, or its database connections.
        let capacity = if leasehold_host::is_url(&config.db) {
            config.engine.connections()
        } else {
            engine.limits().concurrent_calls as usize
        };
        let mut options = config.options;
        options.max_in_flight_per_tenant =
            options.max_in_flight_per_tenant.min((capacity / 2).max(1));
        // Streams and long-polls each keep a connection for as long as they
        // last: together they may take at most three quarters of the
        // connections, so that short calls, probes and other tenants always
        // find one.
        let room = (options.connections.max_connections * 3 / 4).max(2);
        let lived = options.events.max_subscribers + options.long_polls.all;
        if lived > room {
            let streams = (options.events.max_subscribers * room / lived).max(1);
            let polls = (room - streams).max(1);
            tracing::warn!(
                streams,
                long_polls = polls,
                "streams and long-polls together may hold at most three quarters of \
                 --max-connections; their bounds are lowered to fit"
            );
            options.events.max_subscribers = streams;
            options.long_polls.all = polls;
        }
        // The last handle on the engine is dropped on this thread, outside
        // the runtime: a PostgreSQL engine owns a runtime of its own, which
        // may not be dropped from async code.
        let last = engine.clone();
        let mut state = AppState::new(
            engine.clone(),
            live.clone(),
            cursors,
            options.clone(),
            crate::router::routes(),
        );
        if options.sweep {
            let tenants = live.current().tokens.tenants();
            let sweeper_options = leasehold_host::SweeperOptions {
                on_sweep: Some(Arc::new(crate::ops::swept)),
                retention: options.retention,
                first_sweep_after: options.first_sweep_after,
                ..leasehold_host::SweeperOptions::default()
            };
            // Bulk jobs run here, after the standard duties, on the same
            // turns: a job yields to other tenants as every duty does, and
            // one left unfinished by a stopped server is resumed from its
            // stored row.
            let mut duties = leasehold_host::standard_duties(&sweeper_options);
            duties.push(Box::new(leasehold_host::StepJobs::default()));
            let sweeper =
                leasehold_host::Sweeper::start_with(&engine, tenants, sweeper_options, duties)
                    .map_err(ServeError::Sweeper)?;
            state.sweeper = Some(Arc::new(sweeper));
        }
        // The deliveries run on the server's runtime.
        let push = {
            let _inside = runtime.enter();
            let push = Push::start(
                &engine,
                &options.webhooks,
                live.current().tokens.tenants(),
                Arc::new(|subscription: &str, entry: &leasehold_host::FeedEntry| {
                    serde_json::to_vec(&WebhookPayload::of(subscription, entry)).unwrap_or_default()
                }),
            )
            .map_err(ServeError::Webhooks)?;
            if push.deliveries().is_some() {
                tokio::spawn(serve_reloaded_tenants(push.clone(), live.clone()));
            }
            push
        };
        state.push = Some(push.clone());
        drop(engine);
        let streams = state.clone();
        let ops_app = crate::ops::router(state.clone());
        let app = app(state);
        let tls = match &config.tls {
            Some((cert, key)) => Some(crate::tls::acceptor(cert, key)?),
            None => None,
        };
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let signals = config.handle_signals;
        let hup = reloader.clone();
        // Signal handlers are in place before `start` answers: a signal sent
        // once the server is up is never met by the default action.
        let (up, is_up) = std::sync::mpsc::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("leasehold-serve".to_owned())
            .spawn(move || {
                let served = runtime.block_on(async move {
                    let listener = tokio::net::TcpListener::from_std(listener);
                    let shutdown = if signals {
                        let handlers = Signals::install();
                        let Signals { hangup, terminate } = handlers;
                        tokio::spawn(reload_on_hangup(hup, hangup));
                        let _ = up.send(());
                        Box::pin(async move {
                            tokio::select! {
                                _ = stopped => {}
                                () = terminate => {}
                            }
                        })
                            as std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>
                    } else {
                        let _ = up.send(());
                        Box::pin(async move {
                            let _ = stopped.await;
                        })
                    };
                    let listener = listener.map_err(ServeError::Serve)?;
                    // The operations listener stops with the API's.
                    let (ops_stop, ops_stopped) = tokio::sync::watch::channel(false);
                    if let Some(l) = ops_listener {
                        let l = tokio::net::TcpListener::from_std(l).map_err(ServeError::Serve)?;
                        let mut stopped = ops_stopped;
                        // Probes and scrapes show no credential: they are
                        // all strangers there.
                        let limits = crate::connections::ConnectionLimits {
                            max_connections: OPS_CONNECTIONS,
                            max_unauthenticated: OPS_CONNECTIONS,
                            ..options.connections
                        };
                        tokio::spawn(crate::connections::serve(
                            l,
                            None,
                            ops_app,
                            limits,
                            async move {
                                let _ = stopped.wait_for(|s| *s).await;
                            },
                        ));
                    }
                    let shutdown = async move {
                        shutdown.await;
                        let _ = ops_stop.send(true);
                        tracing::info!(
                            "shutting down: no new connections; finishing requests in flight"
                        );
                        streams.stop_streams();
                        if let Some(s) = &streams.sweeper {
                            s.stop();
                        }
                    };
                    crate::connections::serve(listener, tls, app, options.connections, shutdown)
                        .await;
                    // Positions saved and leases given up, so another
                    // server takes the subscriptions over at once.
                    let grace = options.connections.shutdown_grace;
                    if tokio::time::timeout(grace, push.shutdown()).await.is_err() {
                        tracing::warn!(
                            "webhook deliveries did not stop within the shutdown grace; their \
                             leases lapse by themselves"
                        );
                    }
                    Ok(())
                });
                // Engine calls still on the blocking pool have deadlines of
                // their own; past the grace the process does not wait for
                // them, and a call that had not committed writes nothing.
                runtime.shutdown_timeout(options.connections.shutdown_grace);
                drop(last);
                served
            })
            .map_err(ServeError::Runtime)?;
        let _ = is_up.recv();
        Ok(Server {
            addr,
            ops_addr,
            stop: Some(stop),
            thread: Some(thread),
            reloader,
        })
    }

    /// The address the server listens on (the port chosen, if `listen`
    /// asked for port 0).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Where the operations listener listens, if it was asked for.
    pub fn ops_addr(&self) -> Option<SocketAddr> {
        self.ops_addr
    }

    /// Reads the credentials again, as SIGHUP does, and answers how many
    /// tokens and JWT keys are now live. On failure the old ones stay.
    pub fn reload_credentials(&self) -> Result<(usize, usize), String> {
        self.reloader.reload()
    }

    /// Stops accepting, lets requests in flight finish within the grace,
    /// closes the database, and answers how serving ended.
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

/// The signals the CLI's server answers, registered up front.
struct Signals {
    hangup: Option<tokio::signal::unix::Signal>,
    terminate: std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>,
}

impl Signals {
    fn install() -> Signals {
        use tokio::signal::unix::{SignalKind, signal};
        let hangup = signal(SignalKind::hangup())
            .inspect_err(|e| {
                tracing::warn!(error = %e, "cannot listen for SIGHUP; credentials reload only on restart");
            })
            .ok();
        let term = signal(SignalKind::terminate()).ok();
        let int = signal(SignalKind::interrupt()).ok();
        let wait = |s: Option<tokio::signal::unix::Signal>| async move {
            match s {
                Some(mut s) => {
                    s.recv().await;
                }
                None => std::future::pending::<()>().await,
            }
        };
        let terminate = Box::pin(async move {
            tokio::select! {
                () = wait(term) => {}
                () = wait(int) => {}
            }
        });
        Signals { hangup, terminate }
    }
}

/// SIGHUP, each time: the credentials are read again.
async fn reload_on_hangup(reloader: Arc<Reloader>, hangup: Option<tokio::signal::unix::Signal>) {
    let Some(mut hup) = hangup else { return };
    while hup.recv().await.is_some() {
        let r = reloader.clone();
        // Reading files blocks.
        let _ = tokio::task::spawn_blocking(move || r.reload_logged()).await;
    }
}

/// After each reload of the credentials, the tenants the tokens name now
/// are delivered for too (a tenant dropped from them keeps its deliveries:
/// its subscriptions are the tenant's, not a credential's).
async fn serve_reloaded_tenants(push: Arc<Push>, live: LiveCredentials) {
    let mut reloads = live.reloads();
    while reloads.changed().await.is_ok() {
        for t in live.current().tokens.tenants() {
            push.serve(&t);
        }
    }
}
