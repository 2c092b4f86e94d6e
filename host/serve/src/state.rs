//! What every handler shares: the engine and its clock (the one clock of
//! the server, which the sweeper reads too), the credentials in force, the
//! cursor key, the limits, and the one way a handler calls the engine. It
//! owns calling through admission (`crate::admission`: the bounds on calls
//! in flight and waiting, and on consistency checks), running it on the
//! blocking pool under
//! the request's deadline, and counting it; it must never run an engine call
//! on the async executor, never free a call's slot before the call has
//! ended, and never answer as done, or as not done, a call whose outcome it
//! does not know.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use leasehold_host::{Clock, Engine, Error, Tenant, Verb};

use crate::admission::Admission;

use crate::auth::LiveCredentials;
use crate::backup_bounds::{BackupLimits, BackupPermits};
use crate::connections::ConnectionLimits;
use crate::cursor::CursorKey;
use crate::holds::Bounds;
use crate::problem::ApiError;
use crate::waiters::{EventOptions, Waiters};

/// The service's limits.
#[derive(Clone, Debug)]
pub struct Options {
    /// Largest request body accepted, in bytes.
    pub body_limit: usize,
    /// The least rate a body must arrive at; past it, 408 `body-timeout`
    /// and the connection is closed.
    pub body_rate: crate::body_rate::BodyRate,
    /// How long a request may take: reading its body, waiting for its turn
    /// and running its call. A call that has not begun to commit by then
    /// commits nothing and is answered `timeout`.
    pub request_timeout: Duration,
    /// The same for the consistency check, which walks the whole tenant.
    pub check_timeout: Duration,
    /// How long past its deadline a call whose commit has begun is waited
    /// for, before the answer says its outcome is unknown.
    pub commit_grace: Duration,
    /// Most engine calls in flight at once; past it, 503 `overloaded`.
    pub max_in_flight: usize,
    /// Most engine calls of one tenant in flight at once, so no tenant can
    /// take every slot; past it, a call waits its turn (within its
    /// deadline) while other tenants' calls go on.
    pub max_in_flight_per_tenant: usize,
    /// Most calls of one tenant waiting for its turn at once; past it, 429
    /// `too-many-requests` with `Retry-After`, at once.
    pub max_waiting_per_tenant: usize,
    /// Most consistency checks running at once, over all tenants, and one
    /// a tenant; past it, a check waits its turn within its deadline, and
    /// the tenants take the turns in order.
    pub max_checks: usize,
    /// Whether a service or operator credential may give `now` (or a new
    /// task's `created_at`) instead of the server's clock. Off, any request
    /// that gives one is refused, 403.
    pub allow_clock_override: bool,
    /// The bounds on connections.
    pub connections: ConnectionLimits,
    /// The bounds and pace of event streams.
    pub events: EventOptions,
    /// The bounds on long-polls (a `claim-next` or `claim-due` with a
    /// `wait_ms`) waiting at once: in all, per tenant and per caller.
    pub long_polls: Bounds,
    /// A second listener for `/healthz`, `/readyz` and `/metrics` alone,
    /// with connections of its own, so that probes and scrapes are answered
    /// however busy the API's listener is. `/metrics` there needs no
    /// credential; on the API's listener it needs an operator's.
    pub ops_listen: Option<std::net::SocketAddr>,
    /// Whether the server keeps time for its tenants itself: lapsed leases
    /// back to the queue, overdue tasks acted on (see README, "Sweeps").
    /// Off for an embedder that sweeps elsewhere.
    pub sweep: bool,
    /// How long the change record is kept, trimmed by the sweeper as
    /// tenants commit; `None` keeps it all.
    pub retention: Option<leasehold_host::Retention>,
    /// How long after start the sweeper first acts; it logs what that
    /// first sweep will do at once (see README, "Sweeps").
    pub first_sweep_after: Duration,
    /// The tenant whose operators administer the whole server: they may
    /// back up every tenant (`GET /backup`; any other operator only its
    /// own) and read `/metrics` on the API's listener. None: nobody reads
    /// `/metrics` there (scrape `ops_listen`).
    pub admin_tenant: Option<crate::principal::TenantName>,
    /// The bounds on online backups: how many run at once, and how long
    /// one may hold its snapshots.
    pub backups: BackupLimits,
    /// Webhooks: whether this server delivers, and which endpoints it
    /// takes (https and public addresses only, unless allowed).
    pub webhooks: crate::push::WebhookOptions,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            // A justification may be 256 KiB; room for the rest of a task.
            body_limit: 512 * 1024,
            body_rate: crate::body_rate::BodyRate::default(),
            request_timeout: Duration::from_secs(30),
            check_timeout: Duration::from_secs(300),
            commit_grace: Duration::from_secs(10),
            max_in_flight: 256,
            max_in_flight_per_tenant: 32,
            max_waiting_per_tenant: 64,
            max_checks: 2,
            allow_clock_override: false,
            connections: ConnectionLimits::default(),
            events: EventOptions::default(),
            long_polls: Bounds {
                all: 256,
                per_tenant: 64,
                per_caller: 16,
            },
            ops_listen: None,
            sweep: true,
            retention: None,
            first_sweep_after: Duration::ZERO,
            admin_tenant: None,
            backups: BackupLimits::default(),
            webhooks: crate::push::WebhookOptions::default(),
        }
    }
}

#[derive(Clone)]
pub struct AppState {
    pub engine: Engine,
    /// The engine's clock: the time every call runs at unless an allowed
    /// override gives one, the instant a long-poll waits for, and the
    /// start of a backup, as the sweeper and the recorded changes read it.
    clock: Arc<dyn Clock>,
    pub credentials: LiveCredentials,
    pub cursors: CursorKey,
    pub options: Options,
    pub readiness: Arc<Readiness>,
    pub waiters: Arc<Waiters>,
    /// The API's routes, with the scopes each admits.
    pub routes: &'static [crate::routes::Route],
    /// The sweeper, when the server keeps time itself.
    pub sweeper: Option<Arc<leasehold_host::Sweeper>>,
    /// The places online backups run in: one per tenant, and the admin's.
    pub backups: Arc<BackupPermits>,
    /// Webhooks: the endpoint policy, and the deliveries when this server
    /// delivers. Set by the server as it starts.
    pub push: Option<Arc<crate::push::Push>>,
    admission: Arc<Admission>,
    /// Raised when the server begins to shut down, so that streams end.
    stopping: Arc<tokio::sync::watch::Sender<bool>>,
}

impl AppState {
    pub fn new(
        engine: Engine,
        credentials: LiveCredentials,
        cursors: CursorKey,
        options: Options,
        routes: &'static [crate::routes::Route],
    ) -> Self {
        let waiters = Waiters::new(options.events.bounds(), options.long_polls);
        let backups = BackupPermits::new(&options.backups);
        let admission = Arc::new(Admission::new(crate::admission::Bounds {
            all: options.max_in_flight,
            per_tenant: options.max_in_flight_per_tenant,
            waiting_per_tenant: options.max_waiting_per_tenant,
            checks: options.max_checks,
        }));
        AppState {
            clock: engine.clock(),
            engine,
            credentials,
            cursors,
            options,
            readiness: Arc::default(),
            waiters,
            routes,
            sweeper: None,
            backups,
            push: None,
            admission,
            stopping: Arc::new(tokio::sync::watch::Sender::new(false)),
        }
    }

    /// Tells every stream that the server is shutting down.
    pub fn stop_streams(&self) {
        self.stopping.send_replace(true);
    }

    /// Raised once the server begins to shut down.
    pub fn stopping(&self) -> tokio::sync::watch::Receiver<bool> {
        self.stopping.subscribe()
    }

    /// Milliseconds since the Unix epoch by the server's clock.
    pub fn now_ms(&self) -> i64 {
        self.clock.now()
    }
}

/// How long a readiness answer is reused.
pub const READY_FOR: Duration = Duration::from_secs(1);

/// The last readiness probe and when it ran; one probe at a time.
#[derive(Default)]
pub struct Readiness {
    pub(crate) last: Mutex<Option<(Instant, Result<(), String>)>>,
    pub(crate) probing: tokio::sync::Mutex<()>,
}

impl Readiness {
    pub(crate) fn fresh(&self) -> Option<Result<(), String>> {
        let last = self.last.lock().unwrap_or_else(PoisonError::into_inner);
        last.as_ref()
            .filter(|(at, _)| at.elapsed() < READY_FOR)
            .map(|(_, r)| r.clone())
    }
}

impl AppState {
    /// Runs one engine call for `verb` on the blocking pool, to be decided
    /// by `deadline`: counted by verb and outcome, and timed. The call's
    /// slots are held until the call itself ends, even when its request has
    /// been answered.
    pub async fn call<T, F>(
        &self,
        verb: Verb,
        tenant: Tenant,
        deadline: Instant,
        f: F,
    ) -> Result<T, ApiError>
    where
        T: Send + 'static,
        F: FnOnce(&Tenant) -> Result<T, Error> + Send + 'static,
    {
        let slots = self.admission.admit(verb, tenant.name(), deadline).await?;
        metrics::gauge!("leasehold_calls_in_flight").increment(1.0);
        let started = Instant::now();
        let tenant = tenant.until(deadline);
        let verb = verb.name();
        let call = tokio::task::spawn_blocking(move || {
            let answer = f(&tenant).map_err(ApiError::from);
            let label = answer.as_ref().map_or_else(|e| e.kind().0, |_| "ok");
            metrics::counter!("leasehold_calls_total", "verb" => verb, "outcome" => label)
                .increment(1);
            metrics::histogram!("leasehold_call_seconds", "verb" => verb)
                .record(started.elapsed().as_secs_f64());
            metrics::gauge!("leasehold_calls_in_flight").decrement(1.0);
            drop(slots);
            answer
        });
        let waited =
            tokio::time::timeout_at((deadline + self.options.commit_grace).into(), call).await;
        match waited {
            Ok(Ok(answer)) => answer,
            Ok(Err(e)) => {
                metrics::counter!("leasehold_calls_total", "verb" => verb, "outcome" => "panic")
                    .increment(1);
                Err(ApiError::Internal(Box::new(e)))
            }
            // The call is past the point where it could still give up: it
            // goes on, holding its slots, and nobody here can say how it ends.
            Err(_) => Err(ApiError::OutcomeUnknown(format!(
                "the call did not finish within {:?} of its deadline; it may or may not \
                 have taken effect: read before trying again",
                self.options.commit_grace
            ))),
        }
    }
}

/// How long a request may take, by verb: a verb that walks the whole
/// tenant has the longer time.
pub fn budget(options: &Options, verb: Verb) -> Duration {
    if verb.is_long() {
        options.check_timeout
    } else {
        options.request_timeout
    }
}
