//! Instances kept between calls of one tenant, which engines do unless
//! built with fresh instances. It owns the idle instances and the rules for
//! keeping one; it must never hand an instance to any tenant but the one
//! whose call left it, never keep one whose call failed in any way or whose
//! memory grew, and never keep more than its bounds (in all, per tenant, in
//! bytes of memory, in idle time), so that idle instances cannot take the
//! pool's slots or the machine's memory from calls that need them.
//!
//! What a kept instance carries into the next call is only what the guest
//! keeps in its own memory: the component resets its allocator at the start
//! of every call, and the host gives every call its own view of storage.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use wasmtime::Store;
use wasmtime::component::{Func, Instance};

use crate::config::Reuse;
use crate::ctx::CallCtx;
use crate::verbs::Verb;

/// One instance and the store it lives in, with the exports it has looked
/// up so far (a lookup adds to the store, so a kept store looks each up once).
pub(crate) struct Warm {
    pub(crate) store: Store<CallCtx>,
    instance: Instance,
    /// The tenant whose call made it: the only one it ever serves.
    tenant: Arc<str>,
    funcs: [Option<Func>; Verb::ALL.len()],
    /// Calls this instance has begun.
    calls: u32,
    born: Instant,
    /// Its linear memory as instantiated (one that grows is never kept).
    bytes: usize,
}

impl Warm {
    pub(crate) fn new(store: Store<CallCtx>, instance: Instance, tenant: &Arc<str>) -> Warm {
        Warm {
            store,
            instance,
            tenant: tenant.clone(),
            funcs: [None; Verb::ALL.len()],
            calls: 0,
            born: Instant::now(),
            bytes: 0,
        }
    }

    /// Counts a call begun on this instance, and answers the export
    /// `verb` runs.
    pub(crate) fn begin_call(
        &mut self,
        verb: Verb,
        index: &wasmtime::component::ComponentExportIndex,
    ) -> Option<Func> {
        self.calls = self.calls.saturating_add(1);
        if let Some(f) = self.funcs[verb.index()] {
            return Some(f);
        }
        let f = self.instance.get_func(&mut self.store, index)?;
        self.funcs[verb.index()] = Some(f);
        Some(f)
    }
}

impl Shelved for Warm {
    fn tenant(&self) -> &str {
        &self.tenant
    }

    fn bytes(&self) -> usize {
        self.bytes
    }
}

/// How many calls ran on a fresh instance and how many on a kept one, and
/// what is kept idle now.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct InstanceStats {
    /// Calls that instantiated the component.
    pub fresh: u64,
    /// Calls served by an instance kept from an earlier call of the same
    /// tenant.
    pub reused: u64,
    /// Instances kept idle now, over all tenants.
    pub idle: usize,
    /// The linear memory those idle instances hold, in bytes.
    pub idle_bytes: usize,
}

/// What the shelf needs to know of what it keeps.
pub(crate) trait Shelved {
    /// The one tenant it may serve.
    fn tenant(&self) -> &str;
    /// The memory it holds while idle.
    fn bytes(&self) -> usize;
}

/// The idle instances, least recently used first, each with the time (by
/// the engine's clock, in milliseconds) its last call began, and the bytes
/// they hold together. It enforces every bound but the age and call count,
/// which belong to the instance; what it lets go it hands back, so that
/// the caller drops it outside any lock.
struct Shelf<T> {
    idle: VecDeque<(T, i64)>,
    bytes: usize,
}

impl<T: Shelved> Shelf<T> {
    fn new() -> Shelf<T> {
        Shelf {
            idle: VecDeque::new(),
            bytes: 0,
        }
    }

    fn remove(&mut self, at: usize) -> Option<T> {
        let (item, _) = self.idle.remove(at)?;
        self.bytes -= item.bytes();
        Some(item)
    }

    /// Lets go of every instance idle for `policy.idle_for` or longer at
    /// `now`.
    fn let_go_idle(&mut self, now: i64, policy: &Reuse, out: &mut Vec<T>) {
        let limit = i64::try_from(policy.idle_for.as_millis()).unwrap_or(i64::MAX);
        let mut at = 0;
        while at < self.idle.len() {
            if now.saturating_sub(self.idle[at].1) >= limit {
                out.extend(self.remove(at));
            } else {
                at += 1;
            }
        }
    }

    /// The most recently used idle instance of `tenant`, after letting go
    /// of those idle too long.
    fn take(&mut self, tenant: &str, now: i64, policy: &Reuse, out: &mut Vec<T>) -> Option<T> {
        self.let_go_idle(now, policy, out);
        let at = self.idle.iter().rposition(|(w, _)| w.tenant() == tenant)?;
        self.remove(at)
    }

    /// Keeps `item`, last used at `now`, then lets go of the least
    /// recently used until every bound holds: those idle too long, then
    /// the tenant's beyond its count, then any beyond the count and bytes
    /// of all.
    fn put(&mut self, item: T, now: i64, policy: &Reuse, out: &mut Vec<T>) {
        self.let_go_idle(now, policy, out);
        if policy.per_tenant == 0 {
            out.push(item);
            return;
        }
        let theirs = self
            .idle
            .iter()
            .filter(|(w, _)| w.tenant() == item.tenant())
            .count();
        for _ in policy.per_tenant as usize..=theirs {
            match self
                .idle
                .iter()
                .position(|(w, _)| w.tenant() == item.tenant())
            {
                Some(at) => out.extend(self.remove(at)),
                None => break,
            }
        }
        self.bytes += item.bytes();
        self.idle.push_back((item, now));
        while self.idle.len() > policy.idle as usize || self.bytes > policy.idle_bytes {
            match self.remove(0) {
                Some(item) => out.push(item),
                None => break,
            }
        }
    }
}

/// The idle instances of one engine and the count of calls each way. An
/// engine built with fresh instances has a keeper that keeps none.
pub(crate) struct Keeper {
    policy: Option<Reuse>,
    shelf: Mutex<Shelf<Warm>>,
    fresh: AtomicU64,
    reused: AtomicU64,
}

impl Keeper {
    /// A keeper that keeps at most `policy.idle` instances, and never more
    /// than half of `slots`; none without a policy.
    pub(crate) fn new(policy: Option<Reuse>, slots: u32) -> Keeper {
        let policy = policy.map(|p| Reuse {
            idle: p.idle.min(slots / 2),
            ..p
        });
        Keeper {
            policy,
            shelf: Mutex::new(Shelf::new()),
            fresh: AtomicU64::new(0),
            reused: AtomicU64::new(0),
        }
    }

    pub(crate) fn policy(&self) -> Option<Reuse> {
        self.policy
    }

    fn shelf(&self) -> std::sync::MutexGuard<'_, Shelf<Warm>> {
        // A panic while the lock was held left nothing half-done that
        // matters: at worst the byte count is off until the engine ends.
        self.shelf.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The most recently kept instance of `tenant`, if one is young enough,
    /// for a call that began at `now` by the engine's clock.
    pub(crate) fn take(&self, tenant: &str, now: i64) -> Option<Warm> {
        let policy = self.policy?;
        let mut gone = Vec::new();
        let found = self.shelf().take(tenant, now, &policy, &mut gone);
        // What was let go, and an instance too old to serve, are dropped
        // here, outside the lock (freeing a slot takes a while); the call
        // then instantiates afresh.
        drop(gone);
        let found = found?;
        if found.born.elapsed() >= policy.age {
            return None;
        }
        self.reused.fetch_add(1, Ordering::Relaxed);
        Some(found)
    }

    /// Counts a call that instantiated the component.
    pub(crate) fn counted_fresh(&self) {
        self.fresh.fetch_add(1, Ordering::Relaxed);
    }

    /// Keeps `warm`, whose last call began at `now`, for its tenant's next
    /// call, unless it has served its calls or grew its memory (its age is
    /// checked when it is taken). The caller hands back only an instance
    /// whose call answered `ok`.
    pub(crate) fn give_back(&self, mut warm: Warm, now: i64) {
        let Some(policy) = self.policy else { return };
        if warm.calls >= policy.calls || warm.store.data().memory_grew || policy.idle == 0 {
            return;
        }
        warm.bytes = warm.store.data().memory_bytes;
        let mut gone = Vec::new();
        self.shelf().put(warm, now, &policy, &mut gone);
        drop(gone);
    }

    /// Drops the least recently used idle instance, freeing its slot;
    /// false when none is kept.
    pub(crate) fn evict_one(&self) -> bool {
        let evicted = self.shelf().remove(0);
        evicted.is_some()
    }

    pub(crate) fn stats(&self) -> InstanceStats {
        let (idle, idle_bytes) = {
            let shelf = self.shelf();
            (shelf.idle.len(), shelf.bytes)
        };
        InstanceStats {
            fresh: self.fresh.load(Ordering::Relaxed),
            reused: self.reused.load(Ordering::Relaxed),
            idle,
            idle_bytes,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{Shelf, Shelved};
    use crate::config::Reuse;
    use std::time::Duration;

    /// A stand-in for an instance: the shelf only asks whose it is and what
    /// memory it holds.
    #[derive(Debug, PartialEq)]
    struct Item(&'static str, usize, u32);

    impl Shelved for Item {
        fn tenant(&self) -> &str {
            self.0
        }
        fn bytes(&self) -> usize {
            self.1
        }
    }

    fn policy() -> Reuse {
        Reuse {
            idle: 100,
            per_tenant: 100,
            idle_bytes: usize::MAX,
            idle_for: Duration::from_secs(60),
            ..Reuse::default()
        }
    }

    fn ids(v: &[Item]) -> Vec<u32> {
        v.iter().map(|i| i.2).collect()
    }

    #[test]
    fn an_instance_goes_only_to_its_own_tenant_most_recent_first() {
        let (p, mut out) = (policy(), Vec::new());
        let mut shelf = Shelf::new();
        shelf.put(Item("a", 1, 1), 0, &p, &mut out);
        shelf.put(Item("b", 1, 2), 0, &p, &mut out);
        shelf.put(Item("a", 1, 3), 0, &p, &mut out);
        assert_eq!(shelf.take("ab", 0, &p, &mut out), None);
        assert_eq!(shelf.take("A", 0, &p, &mut out), None);
        assert_eq!(shelf.take("a", 0, &p, &mut out), Some(Item("a", 1, 3)));
        assert_eq!(shelf.take("a", 0, &p, &mut out), Some(Item("a", 1, 1)));
        assert_eq!(shelf.take("a", 0, &p, &mut out), None);
        assert_eq!(shelf.take("b", 0, &p, &mut out), Some(Item("b", 1, 2)));
        assert!(out.is_empty());
        assert_eq!(shelf.bytes, 0);
    }

    #[test]
    fn a_tenant_keeps_at_most_its_count_the_least_recent_going_first() {
        let p = Reuse {
            per_tenant: 2,
            ..policy()
        };
        let (mut shelf, mut out) = (Shelf::new(), Vec::new());
        shelf.put(Item("a", 1, 1), 0, &p, &mut out);
        shelf.put(Item("b", 1, 2), 0, &p, &mut out);
        shelf.put(Item("a", 1, 3), 0, &p, &mut out);
        assert!(out.is_empty());
        shelf.put(Item("a", 1, 4), 0, &p, &mut out);
        assert_eq!(ids(&out), [1]);
        let kept: Vec<u32> = shelf.idle.iter().map(|(i, _)| i.2).collect();
        assert_eq!(kept, [2, 3, 4]);
    }

    #[test]
    fn all_tenants_together_keep_at_most_the_count_and_the_bytes() {
        let p = Reuse {
            idle: 3,
            ..policy()
        };
        let (mut shelf, mut out) = (Shelf::new(), Vec::new());
        for (n, t) in ["a", "b", "c", "d"].into_iter().enumerate() {
            shelf.put(Item(t, 1, n as u32), 0, &p, &mut out);
        }
        assert_eq!(ids(&out), [0]);
        assert_eq!(shelf.idle.len(), 3);

        let p = Reuse {
            idle_bytes: 10,
            ..policy()
        };
        let (mut shelf, mut out) = (Shelf::new(), Vec::new());
        shelf.put(Item("a", 4, 1), 0, &p, &mut out);
        shelf.put(Item("b", 4, 2), 0, &p, &mut out);
        assert!(out.is_empty());
        assert_eq!(shelf.bytes, 8);
        // Room is made by the least recently used, as many as it takes.
        shelf.put(Item("c", 9, 3), 0, &p, &mut out);
        assert_eq!(ids(&out), [1, 2]);
        assert_eq!(shelf.bytes, 9);
        // One that can never fit is not kept at all.
        out.clear();
        shelf.put(Item("d", 11, 4), 0, &p, &mut out);
        assert_eq!(ids(&out), [3, 4]);
        assert_eq!((shelf.idle.len(), shelf.bytes), (0, 0));
    }

    #[test]
    fn an_instance_idle_too_long_is_let_go_at_any_tenants_next_call() {
        let p = Reuse {
            idle_for: Duration::from_millis(100),
            ..policy()
        };
        let (mut shelf, mut out) = (Shelf::new(), Vec::new());
        shelf.put(Item("a", 1, 1), 1_000, &p, &mut out);
        shelf.put(Item("b", 1, 2), 1_050, &p, &mut out);
        // b's call, 99 ms after a's instance was last used: both stay.
        assert_eq!(shelf.take("b", 1_099, &p, &mut out), Some(Item("b", 1, 2)));
        assert!(out.is_empty());
        shelf.put(Item("b", 1, 2), 1_099, &p, &mut out);
        // At 100 ms, a's goes, at b's call, and b's is served.
        assert_eq!(shelf.take("b", 1_100, &p, &mut out), Some(Item("b", 1, 2)));
        assert_eq!(ids(&out), [1]);
        assert_eq!(shelf.take("a", 1_100, &p, &mut out), None);
        // A clock that went back lets nothing go early.
        out.clear();
        shelf.put(Item("c", 1, 3), 5_000, &p, &mut out);
        assert_eq!(shelf.take("c", 4_000, &p, &mut out), Some(Item("c", 1, 3)));
        assert!(out.is_empty());
        assert_eq!(shelf.bytes, 0);
    }
}
