//! What every handler shares: the engine, the credentials, the limits, and
//! the one way a handler calls the engine. It owns moving each synchronous
//! engine call onto the blocking pool and counting it; it must never run an
//! engine call on the async executor.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use leasehold_host::{Engine, Error, Tenant};

use crate::auth::Credentials;
use crate::problem::ApiError;

/// The service's limits.
#[derive(Clone, Copy, Debug)]
pub struct Options {
    /// Largest request body accepted, in bytes.
    pub body_limit: usize,
    /// Longest a request may take before it is answered 503.
    pub request_timeout: Duration,
    /// Most requests handled at once; past it, 503 with `Retry-After`.
    pub max_in_flight: usize,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            // A justification may be 256 KiB; room for the rest of a task.
            body_limit: 512 * 1024,
            request_timeout: Duration::from_secs(30),
            max_in_flight: 256,
        }
    }
}

#[derive(Clone)]
pub struct AppState {
    pub engine: Engine,
    pub credentials: Arc<Credentials>,
    pub options: Options,
}

/// Milliseconds since the Unix epoch by this server's clock: the time every
/// call runs at unless a service or operator gives one.
pub fn clock_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

/// The outcome label of a call, coarse on purpose: labels are never per
/// task or per actor.
fn outcome(r: &Result<(), &Error>) -> &'static str {
    match r {
        Ok(()) => "ok",
        Err(e) if e.is_invalid_input() => "invalid",
        Err(e) if e.is_refusal() => "refused",
        Err(e) if e.is_retryable() => "unavailable",
        Err(_) => "error",
    }
}

impl AppState {
    /// Runs one engine call for `verb` on the blocking pool, counting it by
    /// verb and outcome and timing it.
    pub async fn call<T, F>(&self, verb: &'static str, tenant: Tenant, f: F) -> Result<T, ApiError>
    where
        T: Send + 'static,
        F: FnOnce(&Tenant) -> Result<T, Error> + Send + 'static,
    {
        metrics::gauge!("leasehold_calls_in_flight").increment(1.0);
        let started = Instant::now();
        let joined = tokio::task::spawn_blocking(move || f(&tenant)).await;
        metrics::gauge!("leasehold_calls_in_flight").decrement(1.0);
        let elapsed = started.elapsed().as_secs_f64();
        let answer = match joined {
            Ok(answer) => answer,
            Err(e) => {
                metrics::counter!("leasehold_calls_total", "verb" => verb, "outcome" => "panic")
                    .increment(1);
                return Err(ApiError::Internal(Box::new(e)));
            }
        };
        let label = outcome(&answer.as_ref().map(|_| ()));
        metrics::counter!("leasehold_calls_total", "verb" => verb, "outcome" => label).increment(1);
        metrics::histogram!("leasehold_call_seconds", "verb" => verb).record(elapsed);
        answer.map_err(ApiError::from)
    }
}
