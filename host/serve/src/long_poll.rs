//! The long-poll engine: how a request that may wait for work (`claim-next`
//! or `claim-due` with a `wait_ms`) waits. Its claim is tried again each
//! time the tenant commits a change that could give it something (or an
//! instant passes) until it finds something or the wait ends. It follows
//! the tenant's feed, sharing the reads with the tenant's event streams
//! (`crate::shared_reads`), so a commit that cannot matter to it (a settle,
//! another queue's task) costs it nothing. Before it first waits it reads
//! the feed's head and tries once more, so every change that try did not
//! see lies after where it follows from. While it waits, no call runs and
//! nothing is held but its place among the long-polls: a client that goes
//! away ends the request there, and claims nothing.
//!
//! Every try after the first is made only while the credential still names
//! the same caller (a reload that revokes it, or its expiry, wakes the wait
//! and the request is answered 401), and none once the server begins to
//! shut down (the request is answered as an empty wait's end). It owns the
//! waiting; what counts as a change that could give a caller something is
//! the handler's, and it must never make a call past the credential's end.

use std::time::{Duration, Instant};

use leasehold_host::{self as host, Verb};

use crate::extract::Caller;
use crate::problem::ApiError;
use crate::schema::MAX_WAIT_MS;
use crate::shared_reads::{Follower, PAGE};

/// Counts a request while it waits, however its wait ends (a client that
/// goes away drops it).
struct WaitingGauge;

impl WaitingGauge {
    fn new() -> Self {
        metrics::gauge!("leasehold_requests_waiting").increment(1.0);
        WaitingGauge
    }
}

impl Drop for WaitingGauge {
    fn drop(&mut self) {
        metrics::gauge!("leasehold_requests_waiting").decrement(1.0);
    }
}

/// One long-poll. A handler's loop: while [`may_try`](Self::may_try), try
/// with the deadline [`attempt`](Self::attempt) gives; answer what it found,
/// or nothing once [`over`](Self::over); else, when [`ready`](Self::ready)
/// says so, try once more at once, and otherwise
/// [`wait`](Self::wait) for a change that could matter.
pub struct LongPoll {
    follower: Option<Follower>,
    end: Instant,
    first: Option<Instant>,
    budget: Duration,
    tried: bool,
    credential: crate::auth::HeldCredential,
    stopping: tokio::sync::watch::Receiver<bool>,
    _hold: Option<crate::holds::Hold>,
}

impl LongPoll {
    /// A long-poll of `verb` waiting up to `wait_ms`. A wait runs by the
    /// server's clock: with a given `now`, the verb is tried once.
    pub fn new(
        c: &Caller,
        verb: Verb,
        wait_ms: Option<u32>,
        now: Option<i64>,
    ) -> Result<LongPoll, ApiError> {
        let wait_ms = wait_ms.unwrap_or(0);
        if wait_ms > MAX_WAIT_MS {
            return Err(ApiError::invalid(
                "wait_ms",
                format!("at most {MAX_WAIT_MS} milliseconds"),
            ));
        }
        let state = c.state();
        let (follower, hold) = if wait_ms > 0 && now.is_none() {
            let hold = state.waiters.poll(&c.principal)?;
            let name = c.tenant.name();
            let feed = state
                .waiters
                .feeds
                .tenant(name, || Ok(state.engine.watch(name)?))?;
            (Some(Follower::new(feed)), Some(hold))
        } else {
            (None, None)
        };
        let started = Instant::now();
        Ok(LongPoll {
            follower,
            end: started + Duration::from_millis(u64::from(wait_ms)),
            first: Some(c.deadline()),
            budget: crate::state::budget(&state.options, verb),
            tried: false,
            credential: state
                .credentials
                .hold(c.authorization().map(str::to_owned), c.principal.clone()),
            stopping: state.stopping(),
            _hold: hold,
        })
    }

    /// Whether to make the next try: not once the server is shutting down
    /// (`false`), and never for a credential that no longer holds (401).
    pub fn may_try(&mut self) -> Result<bool, ApiError> {
        let first = !self.tried;
        self.tried = true;
        if *self.stopping.borrow() {
            return Ok(false);
        }
        if !first && !self.credential.holds() {
            return Err(ApiError::Unauthorized(
                "the credential was revoked or expired while the request waited".to_owned(),
            ));
        }
        Ok(true)
    }

    /// The deadline of the next try: the request's for the first, then a
    /// fresh one each.
    pub fn attempt(&mut self) -> Instant {
        self.first
            .take()
            .unwrap_or_else(|| Instant::now() + self.budget)
    }

    /// Whether the wait is over (or there was none).
    pub fn over(&self) -> bool {
        self.follower.is_none() || Instant::now() >= self.end
    }

    /// Before the first wait, reads where the feed stands and answers true:
    /// the caller tries once more before it waits.
    pub async fn ready(&mut self, c: &Caller) -> Result<bool, ApiError> {
        match self.follower.as_mut() {
            Some(f) if !f.following() => {
                f.begin_at(crate::feed_pager::head(c.state(), &c.tenant).await?);
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    /// Waits for a committed change that `wakes`, the instant `at` (by the
    /// server's clock), the end of the wait, the end of the credential or
    /// the start of shutdown, whichever comes first.
    pub async fn wait(
        &mut self,
        c: &Caller,
        at: Option<i64>,
        wakes: impl Fn(&host::Change) -> bool,
    ) {
        let end = tokio::time::Instant::from_std(self.end);
        let until = match at {
            Some(at) => {
                let ms = at.saturating_sub(c.state().now_ms()).max(0) as u64;
                end.min(tokio::time::Instant::now() + Duration::from_millis(ms))
            }
            None => end,
        };
        let Some(follower) = self.follower.as_mut() else {
            return;
        };
        let (state, tenant) = (c.state(), &c.tenant);
        let read = |after: String| crate::feed_pager::read(state, tenant, Some(after), PAGE);
        let _waiting = WaitingGauge::new();
        let stopping = self.stopping.wait_for(|s| *s);
        tokio::select! {
            () = follower.wait(read, wakes) => {}
            () = tokio::time::sleep_until(until) => {}
            () = self.credential.lapsed() => {}
            _ = stopping => {}
        }
    }
}
