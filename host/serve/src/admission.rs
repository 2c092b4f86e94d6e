//! Admitting a call: the slots it holds until it ends. One of all calls in
//! flight (taken at once or refused, 503 `overloaded`); one of its tenant's
//! (waited for in the tenant's own line, within the call's deadline); and,
//! for a consistency check, its tenant's one check slot and then one of the
//! server's. Each tenant's line is bounded: a call that finds it full is
//! answered 429 `too-many-requests` with `Retry-After` at once, so a
//! tenant's burst holds no more connections waiting than its line. Because
//! a tenant runs or waits for one check at a time, the server's check slots
//! are shared between tenants in turn, never taken by one tenant's burst.
//!
//! It owns the slots and the lines; it must never hand out a slot without
//! its tenant's bound, never keep an entry for a tenant with nothing in
//! flight or waiting, and never say in a refusal which bound was met.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use leasehold_host::Verb;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::problem::ApiError;

/// The bounds admission keeps.
#[derive(Clone, Copy, Debug)]
pub struct Bounds {
    /// Calls in flight at once, over all tenants.
    pub all: usize,
    /// Calls of one tenant in flight at once.
    pub per_tenant: usize,
    /// Calls of one tenant waiting for its slots at once.
    pub waiting_per_tenant: usize,
    /// Consistency checks running at once, over all tenants (one a tenant).
    pub checks: usize,
}

/// One tenant's slots and its line.
struct Tenant {
    calls: Arc<Semaphore>,
    check: Arc<Semaphore>,
    waiting: AtomicUsize,
}

pub struct Admission {
    all: Arc<Semaphore>,
    checks: Arc<Semaphore>,
    bounds: Bounds,
    tenants: Mutex<HashMap<Arc<str>, Arc<Tenant>>>,
}

/// A call's slots; given back when the call ends, however its request
/// ended.
pub struct Slots {
    _all: Option<OwnedSemaphorePermit>,
    _check: Option<OwnedSemaphorePermit>,
    _tenant_check: Option<OwnedSemaphorePermit>,
    calls: Option<OwnedSemaphorePermit>,
    tenant: Arc<Tenant>,
    name: Arc<str>,
    admission: Arc<Admission>,
}

impl Drop for Slots {
    fn drop(&mut self) {
        drop(self.calls.take());
        drop(self._tenant_check.take());
        // A tenant with nothing in flight or waiting leaves the table, so
        // the table holds only tenants with calls.
        let mut tenants = self
            .admission
            .tenants
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if Arc::strong_count(&self.tenant) == 2 {
            tenants.remove(&self.name);
        }
    }
}

/// A place in a tenant's line, left when dropped (the request may be
/// given up while it waits).
struct InLine<'a>(&'a AtomicUsize);

impl Drop for InLine<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Admission {
    pub fn new(b: Bounds) -> Self {
        // No slot at all is a server that refuses every call, `overloaded`.
        let all = b.all.min(Semaphore::MAX_PERMITS);
        let bounds = Bounds {
            all,
            per_tenant: b.per_tenant.clamp(1, all.max(1)),
            waiting_per_tenant: b.waiting_per_tenant,
            checks: b.checks.clamp(1, Semaphore::MAX_PERMITS),
        };
        Admission {
            all: Arc::new(Semaphore::new(all)),
            checks: Arc::new(Semaphore::new(bounds.checks)),
            bounds,
            tenants: Mutex::new(HashMap::new()),
        }
    }

    /// Slots for one call of `verb` by `tenant`. A call waits in its
    /// tenant's line until its deadline, holding only its tenant's slots
    /// meanwhile, so a tenant at its bound delays only itself; past the
    /// deadline it is answered `timeout`, having started nothing, and a
    /// full line is answered `too-many-requests` at once. The slot of all
    /// calls is taken at once or refused, `overloaded`.
    pub async fn admit(
        self: &Arc<Self>,
        verb: Verb,
        tenant: &str,
        deadline: Instant,
    ) -> Result<Slots, ApiError> {
        let (name, line) = {
            let mut tenants = self.tenants.lock().unwrap_or_else(PoisonError::into_inner);
            match tenants.get_key_value(tenant) {
                Some((name, line)) => (name.clone(), line.clone()),
                None => {
                    let name: Arc<str> = Arc::from(tenant);
                    let line = Arc::new(Tenant {
                        calls: Arc::new(Semaphore::new(self.bounds.per_tenant)),
                        check: Arc::new(Semaphore::new(1)),
                        waiting: AtomicUsize::new(0),
                    });
                    tenants.insert(name.clone(), line.clone());
                    (name, line)
                }
            }
        };
        let mut slots = Slots {
            _all: None,
            _check: None,
            _tenant_check: None,
            calls: None,
            tenant: line.clone(),
            name,
            admission: self.clone(),
        };
        if verb.is_long() {
            // The tenant's own check slot first: a tenant waits for the
            // server's check slots with one check at most, so they go round
            // the tenants in turn.
            slots._tenant_check = Some(self.in_line(&line, &line.check, deadline).await?);
        }
        slots.calls = Some(self.in_line(&line, &line.calls, deadline).await?);
        if verb.is_long() {
            let waited =
                tokio::time::timeout_at(deadline.into(), self.checks.clone().acquire_owned());
            slots._check = Some(
                waited
                    .await
                    .map_err(|_| ApiError::Timeout)?
                    .map_err(|e| ApiError::Internal(Box::new(e)))?,
            );
        }
        // The refusal names no bound: it must not tell a caller how busy
        // other tenants keep the service.
        slots._all =
            Some(
                self.all
                    .clone()
                    .try_acquire_owned()
                    .map_err(|_| ApiError::Unavailable {
                        kind: "overloaded",
                        detail: "the service cannot take another call now; retry later".to_owned(),
                    })?,
            );
        Ok(slots)
    }

    /// A permit of `sem`, one of `line`'s: at once if one is free, else
    /// after waiting in the line, if it has room, until `deadline`.
    async fn in_line(
        &self,
        line: &Tenant,
        sem: &Arc<Semaphore>,
        deadline: Instant,
    ) -> Result<OwnedSemaphorePermit, ApiError> {
        if let Ok(p) = sem.clone().try_acquire_owned() {
            return Ok(p);
        }
        let ahead = line.waiting.fetch_add(1, Ordering::Relaxed);
        let _place = InLine(&line.waiting);
        if ahead >= self.bounds.waiting_per_tenant {
            metrics::counter!("leasehold_calls_turned_away_total").increment(1);
            return Err(ApiError::TooManyRequests(
                "too many of this tenant's requests are waiting for their turn; retry later"
                    .to_owned(),
            ));
        }
        tokio::time::timeout_at(deadline.into(), sem.clone().acquire_owned())
            .await
            .map_err(|_| ApiError::Timeout)?
            .map_err(|e| ApiError::Internal(Box::new(e)))
    }

    /// How many tenants have calls in flight or waiting.
    #[cfg(test)]
    fn tenants(&self) -> usize {
        self.tenants
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn admission(per_tenant: usize, waiting: usize, checks: usize) -> Arc<Admission> {
        Arc::new(Admission::new(Bounds {
            all: 100,
            per_tenant,
            waiting_per_tenant: waiting,
            checks,
        }))
    }

    fn soon() -> Instant {
        Instant::now() + Duration::from_secs(600)
    }

    /// A full line is refused at once, another tenant is admitted, and the
    /// table forgets a tenant once nothing of it is left.
    #[tokio::test]
    async fn a_full_line_is_refused_at_once_and_other_tenants_go_on() {
        let a = admission(1, 1, 1);
        let first = a.admit(Verb::Get, "acme", soon()).await.expect("a slot");
        let waiting = tokio::spawn({
            let a = a.clone();
            async move { a.admit(Verb::Get, "acme", soon()).await.map(drop) }
        });
        // The second is in the line once the line is full.
        while a.tenants.lock().expect("table")["acme"]
            .waiting
            .load(Ordering::Relaxed)
            == 0
        {
            tokio::task::yield_now().await;
        }
        let refused = a.admit(Verb::Get, "acme", soon()).await;
        assert!(
            matches!(refused, Err(ApiError::TooManyRequests(_))),
            "{:?}",
            refused.err()
        );
        let other = a.admit(Verb::Get, "globex", soon()).await.expect("globex");
        drop(first);
        waiting.await.expect("joined").expect("its turn came");
        drop(other);
        assert_eq!(a.tenants(), 0);
    }

    /// One tenant's checks take one of the server's check slots at a time:
    /// with two, another tenant's check is admitted while the first
    /// tenant's second check waits.
    #[tokio::test]
    async fn a_tenants_checks_take_one_check_slot_at_a_time() {
        let a = admission(8, 8, 2);
        let first = a.admit(Verb::Check, "acme", soon()).await.expect("a check");
        let second = tokio::spawn({
            let a = a.clone();
            async move { a.admit(Verb::Check, "acme", soon()).await.map(drop) }
        });
        while a.tenants.lock().expect("table")["acme"]
            .waiting
            .load(Ordering::Relaxed)
            == 0
        {
            tokio::task::yield_now().await;
        }
        let other = a
            .admit(Verb::Check, "globex", soon())
            .await
            .expect("globex's check is not behind acme's");
        drop((first, other));
        second
            .await
            .expect("joined")
            .expect("acme's second check ran");
    }
}
