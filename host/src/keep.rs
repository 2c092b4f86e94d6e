//! Instances kept between calls of one tenant, for an engine built to reuse
//! them. It owns the idle instances and the rule for keeping one; it must
//! never hand an instance to any tenant but the one whose call left it,
//! never keep one whose call failed in any way or whose memory grew, and
//! never keep more than its bound, so that idle instances cannot take the
//! pool's slots from calls that need them.
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

/// How many calls ran on a fresh instance and how many on a kept one.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct InstanceStats {
    /// Calls that instantiated the component.
    pub fresh: u64,
    /// Calls served by an instance kept from an earlier call of the same
    /// tenant.
    pub reused: u64,
}

/// The idle instances of one engine, most recently used last, and the
/// count of calls each way. An engine that does not reuse instances has a
/// keeper that keeps none.
pub(crate) struct Keeper {
    policy: Option<Reuse>,
    idle: Mutex<VecDeque<Warm>>,
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
            idle: Mutex::new(VecDeque::new()),
            fresh: AtomicU64::new(0),
            reused: AtomicU64::new(0),
        }
    }

    pub(crate) fn policy(&self) -> Option<Reuse> {
        self.policy
    }

    fn idle(&self) -> std::sync::MutexGuard<'_, VecDeque<Warm>> {
        // A panic while the lock was held left nothing half-done: the
        // queue is only pushed to and removed from.
        self.idle.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The most recently kept instance of `tenant`, if one is young enough.
    pub(crate) fn take(&self, tenant: &str) -> Option<Warm> {
        let policy = self.policy?;
        let found = {
            let mut idle = self.idle();
            let at = idle.iter().rposition(|w| &*w.tenant == tenant)?;
            idle.remove(at)
        }?;
        // Too old: dropped here, outside the lock (freeing a slot takes a
        // while), and the call instantiates afresh.
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

    /// Keeps `warm` for its tenant's next call, unless it has served its
    /// calls or grew its memory (its age is checked when it is taken). The
    /// caller hands back only an instance whose call answered `ok`.
    pub(crate) fn give_back(&self, warm: Warm) {
        let Some(policy) = self.policy else { return };
        if warm.calls >= policy.calls || warm.store.data().memory_grew || policy.idle == 0 {
            return;
        }
        let evicted = {
            let mut idle = self.idle();
            idle.push_back(warm);
            if idle.len() > policy.idle as usize {
                idle.pop_front()
            } else {
                None
            }
        };
        drop(evicted);
    }

    /// Drops the least recently used idle instance, freeing its slot;
    /// false when none is kept.
    pub(crate) fn evict_one(&self) -> bool {
        let evicted = self.idle().pop_front();
        evicted.is_some()
    }

    pub(crate) fn stats(&self) -> InstanceStats {
        InstanceStats {
            fresh: self.fresh.load(Ordering::Relaxed),
            reused: self.reused.load(Ordering::Relaxed),
        }
    }
}
