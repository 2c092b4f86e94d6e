//! Long-lived holds as resources with an owner and a bound: an event stream
//! or a waiting long-poll keeps a connection for as long as it runs, so each
//! is counted against the service, against its tenant and against its
//! caller (one credential's tenant, actor and scope), and refused past any
//! of them. The bounds sit below the connection cap, so that no caller and
//! no tenant can take the last connection from everyone else.
//!
//! It owns the counts and the words of a refusal; it must never say in a
//! refusal which bound was reached (that would tell a caller how busy other
//! tenants are), and never keep an entry for a tenant or caller that holds
//! nothing.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::problem::ApiError;

/// How many holds of one kind may be taken: in all, by one tenant, and by
/// one caller.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bounds {
    /// Most holds in all.
    pub all: usize,
    /// Most holds of one tenant.
    pub per_tenant: usize,
    /// Most holds of one caller (tenant, actor and scope).
    pub per_caller: usize,
}

impl Bounds {
    /// The bounds made consistent: at least one of each, and no narrower
    /// bound wider than the one that contains it.
    pub fn clamped(self) -> Bounds {
        let all = self.all.clamp(1, Semaphore::MAX_PERMITS);
        let per_tenant = self.per_tenant.clamp(1, all);
        Bounds {
            all,
            per_tenant,
            per_caller: self.per_caller.clamp(1, per_tenant),
        }
    }
}

/// Semaphores by name, each kept only while some hold uses it.
struct Keyed {
    bound: usize,
    map: Mutex<HashMap<Arc<str>, Arc<Semaphore>>>,
}

impl Keyed {
    fn new(bound: usize) -> Self {
        Keyed {
            bound,
            map: Mutex::new(HashMap::new()),
        }
    }

    fn take(&self, key: &str) -> Option<(Arc<str>, Arc<Semaphore>, OwnedSemaphorePermit)> {
        let mut map = self.map.lock().unwrap_or_else(PoisonError::into_inner);
        let (name, sem) = match map.get_key_value(key) {
            Some((n, s)) => (n.clone(), s.clone()),
            None => {
                let n: Arc<str> = Arc::from(key);
                let s = Arc::new(Semaphore::new(self.bound));
                map.insert(n.clone(), s.clone());
                (n, s)
            }
        };
        match sem.clone().try_acquire_owned() {
            Ok(p) => Some((name, sem, p)),
            Err(_) => None,
        }
    }

    /// Drops the entry of `name` if nothing but the caller's handle and
    /// the map's own refer to it.
    fn release(&self, name: &Arc<str>, sem: &Arc<Semaphore>) {
        let mut map = self.map.lock().unwrap_or_else(PoisonError::into_inner);
        if Arc::strong_count(sem) == 2 {
            map.remove(name);
        }
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.map
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }
}

/// The holds of one kind (event streams, or long-polls).
pub struct Holds {
    /// What is held, for the refusal's words and the metrics.
    kind: &'static str,
    all: Arc<Semaphore>,
    tenants: Keyed,
    callers: Keyed,
}

/// One hold, given back when dropped.
pub struct Hold {
    _all: OwnedSemaphorePermit,
    tenant: Option<(Arc<str>, Arc<Semaphore>, OwnedSemaphorePermit)>,
    caller: Option<(Arc<str>, Arc<Semaphore>, OwnedSemaphorePermit)>,
    of: Arc<Holds>,
}

impl std::fmt::Debug for Hold {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hold").field("kind", &self.of.kind).finish()
    }
}

impl Drop for Hold {
    fn drop(&mut self) {
        if let Some((name, sem, permit)) = self.caller.take() {
            drop(permit);
            self.of.callers.release(&name, &sem);
        }
        if let Some((name, sem, permit)) = self.tenant.take() {
            drop(permit);
            self.of.tenants.release(&name, &sem);
        }
        metrics::gauge!("leasehold_holds", "kind" => self.of.kind).decrement(1.0);
    }
}

impl Holds {
    pub fn new(kind: &'static str, bounds: Bounds) -> Arc<Self> {
        let b = bounds.clamped();
        Arc::new(Holds {
            kind,
            all: Arc::new(Semaphore::new(b.all)),
            tenants: Keyed::new(b.per_tenant),
            callers: Keyed::new(b.per_caller),
        })
    }

    /// A hold for `caller` of `tenant`, or the one refusal every bound
    /// gives: the service is busy, try again later.
    pub fn take(self: &Arc<Self>, tenant: &str, caller: &str) -> Result<Hold, ApiError> {
        let refused = || {
            metrics::counter!("leasehold_holds_refused_total", "kind" => self.kind).increment(1);
            ApiError::Unavailable {
                kind: "overloaded",
                detail: format!(
                    "the service cannot take another {} now; retry later",
                    self.kind
                ),
            }
        };
        let all = self
            .all
            .clone()
            .try_acquire_owned()
            .map_err(|_| refused())?;
        metrics::gauge!("leasehold_holds", "kind" => self.kind).increment(1.0);
        let mut hold = Hold {
            _all: all,
            tenant: None,
            caller: None,
            of: self.clone(),
        };
        hold.tenant = Some(self.tenants.take(tenant).ok_or_else(refused)?);
        hold.caller = Some(self.callers.take(caller).ok_or_else(refused)?);
        Ok(hold)
    }

    /// How many tenants and callers hold something (entries are let go
    /// with their last hold).
    #[cfg(test)]
    fn entries(&self) -> (usize, usize) {
        (self.tenants.len(), self.callers.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn holds(all: usize, per_tenant: usize, per_caller: usize) -> Arc<Holds> {
        Holds::new(
            "test hold",
            Bounds {
                all,
                per_tenant,
                per_caller,
            },
        )
    }

    #[test]
    fn each_bound_refuses_alike_and_gives_back_on_drop() {
        let h = holds(5, 3, 2);
        let a1 = h.take("acme", "alice").expect("first");
        let a2 = h.take("acme", "alice").expect("second");
        let caller = h.take("acme", "alice").expect_err("caller bound");
        let b1 = h.take("acme", "bob").expect("another caller");
        let tenant = h.take("acme", "carol").expect_err("tenant bound");
        let g1 = h.take("globex", "gus").expect("another tenant");
        let g2 = h.take("globex", "gina").expect("another tenant");
        let all = h.take("initech", "ian").expect_err("global bound");
        // One refusal for every bound: it names none of them.
        let words: Vec<String> = [caller, tenant, all]
            .iter()
            .map(|e| e.to_string())
            .collect();
        assert!(words.iter().all(|w| w == &words[0]), "{words:?}");
        drop((a1, a2, b1, g1, g2));
        assert_eq!(
            h.entries(),
            (0, 0),
            "nothing kept for those who hold nothing"
        );
        h.take("initech", "ian").expect("room again");
    }

    #[test]
    fn bounds_are_made_consistent() {
        let b = Bounds {
            all: 0,
            per_tenant: 10,
            per_caller: 20,
        }
        .clamped();
        assert_eq!((b.all, b.per_tenant, b.per_caller), (1, 1, 1));
    }
}
