//! What the sweeper's threads share: the tenants it was told of, its counts,
//! and the bell that wakes its loop (a commit heard, a tenant to track, the
//! clock moved by hand, a stop). It carries news and never acts on it.

use std::collections::HashSet;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};

use super::report::Counts;

/// What wakes the sweeper's thread.
#[derive(Default)]
pub(super) struct Bell {
    pub(super) rung: bool,
    pub(super) stop: bool,
    /// Tenants to read again.
    pub(super) tenants: Vec<Arc<str>>,
    /// Every known tenant may have changed.
    pub(super) all: bool,
}

#[derive(Default)]
pub(super) struct Shared {
    /// Every tenant it was told of, so that telling it again costs nothing.
    pub(super) known: Mutex<HashSet<Arc<str>>>,
    bell: Mutex<Bell>,
    pub(super) cond: Condvar,
    pub(super) counts: Counts,
}

impl Shared {
    pub(super) fn lock(&self) -> MutexGuard<'_, Bell> {
        self.bell.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(super) fn ring(&self, f: impl FnOnce(&mut Bell)) {
        let mut b = self.lock();
        f(&mut b);
        b.rung = true;
        drop(b);
        self.cond.notify_all();
    }

    /// Adds `tenants` to those it knows.
    pub(super) fn know(&self, tenants: impl IntoIterator<Item = Arc<str>>) {
        self.known
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .extend(tenants);
    }
}
