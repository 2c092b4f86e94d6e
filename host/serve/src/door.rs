//! Who holds the connections. A connection begins as a *stranger*: it has
//! shown no credential yet. Strangers have a small pool of their own, apart
//! from everyone else's: when it is full, a new connection closes the oldest
//! stranger that the server has waited for at least a grace (its client was
//! given its chance to send a head and did not), so a thousand silent or slow
//! strangers cannot keep a new client from showing its credential; a new
//! connection never closes one that has not had its grace, it waits for
//! room instead (in the kernel's queue). A connection whose request shows a
//! good credential becomes its caller's: it leaves the strangers and holds
//! one of the connections of all callers, of its tenant and of its caller
//! (a credential's tenant, actor and scope) until it closes, so one tenant
//! or one credential cannot take every connection.
//!
//! It owns the pool, the shares and the order of closing; it must never
//! close a connection that has shown a credential to make room, and never
//! say in a refusal which bound was met.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

use crate::holds::{Bounds, Hold, Holds};
use crate::principal::Principal;
use crate::problem::ApiError;
use crate::waiters::caller_key;

/// The strangers and the callers' connections of one listener.
pub struct Door {
    max_strangers: usize,
    /// How long the server waits for a stranger before it may be closed.
    grace: Duration,
    strangers: Mutex<Strangers>,
    /// Raised when a stranger is waited for or leaves: there may be room.
    room: Notify,
    callers: Arc<Holds>,
}

#[derive(Default)]
struct Strangers {
    next: u64,
    by_age: BTreeMap<u64, Arc<Stranger>>,
}

#[derive(Default)]
struct Stranger {
    /// Since when the server has waited for this client.
    waited: OnceLock<Instant>,
    /// Raised when it is closed to make room.
    closed: Notify,
}

/// One connection's place: a stranger's, or a caller's hold.
pub struct Ticket {
    id: u64,
    door: Arc<Door>,
    stranger: Arc<Stranger>,
    held: Mutex<Option<(String, Hold)>>,
}

impl Door {
    pub fn new(max_strangers: usize, grace: Duration, callers: Bounds) -> Arc<Door> {
        Arc::new(Door {
            max_strangers: max_strangers.max(1),
            grace,
            strangers: Mutex::default(),
            room: Notify::new(),
            callers: Holds::new("connection", callers),
        })
    }

    /// A place for a new connection, as a stranger: at once if the pool
    /// has room, else by closing its oldest stranger that has been waited
    /// for a grace, else once one has been.
    pub async fn enter(self: &Arc<Self>) -> Arc<Ticket> {
        loop {
            let next;
            {
                let mut s = self
                    .strangers
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner);
                let full = s.by_age.len() >= self.max_strangers;
                let now = Instant::now();
                let oldest = s
                    .by_age
                    .iter()
                    .find(|(_, x)| x.waited.get().is_some_and(|t| *t + self.grace <= now))
                    .map(|(id, _)| *id);
                // When the first stranger waited for will have had its grace.
                next = s
                    .by_age
                    .values()
                    .filter_map(|x| x.waited.get().map(|t| *t + self.grace))
                    .min();
                if full
                    && let Some(id) = oldest
                    && let Some(x) = s.by_age.remove(&id)
                {
                    // Stored if its task is not waiting for it yet.
                    x.closed.notify_one();
                    metrics::counter!("leasehold_connections_evicted_total").increment(1);
                }
                if s.by_age.len() < self.max_strangers {
                    let id = s.next;
                    s.next += 1;
                    let stranger = Arc::new(Stranger::default());
                    s.by_age.insert(id, stranger.clone());
                    return Arc::new(Ticket {
                        id,
                        door: self.clone(),
                        stranger,
                        held: Mutex::new(None),
                    });
                }
            }
            // A permit is stored if the room came between the look and now.
            match next {
                Some(at) => {
                    tokio::select! {
                        () = self.room.notified() => {}
                        () = tokio::time::sleep_until(at) => {}
                    }
                }
                None => self.room.notified().await,
            }
        }
    }

    fn leave(&self, id: u64) {
        let mut s = self
            .strangers
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if s.by_age.remove(&id).is_some() {
            drop(s);
            self.room.notify_one();
        }
    }
}

impl Ticket {
    /// The server waited for this connection's client: if it is still a
    /// stranger, it may now be closed to make room.
    pub fn waited(&self) {
        if self.stranger.waited.get().is_none() && self.stranger.waited.set(Instant::now()).is_ok()
        {
            self.door.room.notify_one();
        }
    }

    /// Resolves once the connection is closed to make room.
    pub async fn closed(&self) {
        self.stranger.closed.notified().await;
    }

    /// The connection carries a request of `p`: it holds one of the
    /// connections of all callers, of `p`'s tenant and of `p`'s caller
    /// (kept while the same caller goes on sending), or is refused,
    /// `overloaded`, naming no bound.
    pub fn admit(&self, p: &Principal) -> Result<(), ApiError> {
        let caller = caller_key(p);
        let mut held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
        if held.as_ref().is_some_and(|(c, _)| *c == caller) {
            return Ok(());
        }
        // Another caller's request on this connection gives up the first
        // caller's hold before taking its own.
        *held = None;
        let hold = self.door.callers.take(&p.tenant, &caller)?;
        *held = Some((caller, hold));
        drop(held);
        self.door.leave(self.id);
        Ok(())
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        self.door.leave(self.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::principal::Scope;

    fn door(strangers: usize, per_tenant: usize, per_caller: usize) -> Arc<Door> {
        Door::new(
            strangers,
            Duration::ZERO,
            Bounds {
                all: 100,
                per_tenant,
                per_caller,
            },
        )
    }

    fn who(tenant: &str, actor: &str) -> Principal {
        Principal {
            tenant: tenant.to_owned(),
            actor: actor.to_owned(),
            roles: vec![],
            scope: Scope::Service,
        }
    }

    fn strangers(d: &Door) -> usize {
        d.strangers.lock().expect("pool").by_age.len()
    }

    /// A full pool closes its oldest stranger that was waited for, never
    /// one that was not, nor a caller's connection.
    #[tokio::test]
    async fn a_full_pool_closes_its_oldest_waited_for_stranger() {
        let d = door(2, 10, 10);
        let first = d.enter().await;
        let second = d.enter().await;
        let third = tokio::spawn({
            let d = d.clone();
            async move { d.enter().await }
        });
        // Neither was waited for: the third waits for room.
        tokio::task::yield_now().await;
        assert!(!third.is_finished());
        second.waited();
        let third = third.await.expect("joined");
        // The second was closed for it; the first, never waited for, not.
        second.closed().await;
        assert_eq!(strangers(&d), 2);
        first.admit(&who("acme", "sam")).expect("a caller's");
        assert_eq!(strangers(&d), 1);
        third.waited();
        let fourth = d.enter().await;
        assert_eq!(strangers(&d), 2, "the third and the fourth");
        drop((first, third, fourth));
        assert_eq!(strangers(&d), 0);
    }

    /// A tenant's and a caller's share of connections are bounded apart
    /// from other tenants'.
    #[tokio::test]
    async fn each_tenant_and_caller_has_a_share() {
        let d = door(10, 2, 1);
        let a = d.enter().await;
        a.admit(&who("acme", "sam")).expect("sam's first");
        a.admit(&who("acme", "sam")).expect("the same caller again");
        let b = d.enter().await;
        assert!(b.admit(&who("acme", "sam")).is_err(), "sam's share");
        b.admit(&who("acme", "olga"))
            .expect("another of acme's callers");
        let c = d.enter().await;
        assert!(c.admit(&who("acme", "ann")).is_err(), "acme's share");
        c.admit(&who("globex", "gina")).expect("another tenant");
    }
}
