//! What a worker's threads share: the local buffer of claimed tasks not yet
//! started, every task it holds with its lease end, the finished tasks
//! waiting to be settled, and the bell that wakes its loop (a handler done,
//! a commit heard, the clock moved by hand, a stop). It carries state and
//! news and never makes a call.

use std::collections::{HashMap, VecDeque};
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};
use std::time::Instant;

use leasehold_guest::model::{Finished, Task, Timestamp};

use super::stats::Counts;

#[derive(Default)]
pub(super) struct State {
    /// Claimed and not yet started, in queue order.
    pub(super) buffer: VecDeque<Task>,
    /// Every task held and not yet settled or released (buffered, running
    /// or finished), with when its lease ends by the engine's clock.
    pub(super) held: HashMap<String, Timestamp>,
    /// Handlers running now.
    pub(super) running: usize,
    /// Finished, to be settled; with when the first of them finished.
    pub(super) done: Vec<Finished>,
    pub(super) done_since: Option<Instant>,
    /// Failed, to be released.
    pub(super) failed: Vec<String>,
    /// No new task is started; the loop winds down.
    pub(super) stopping: bool,
    /// The loop is gone: nothing more is called, and a handler finishing now
    /// drops its result.
    pub(super) gone: bool,
    /// A commit of the tenant was heard since the loop last looked.
    pub(super) heard: bool,
    /// Something changed since the loop last looked.
    pub(super) rung: bool,
}

#[derive(Default)]
pub(super) struct Shared {
    state: Mutex<State>,
    /// Wakes the loop.
    pub(super) bell: Condvar,
    /// Wakes idle handlers: a task buffered, or a stop.
    pub(super) work: Condvar,
    pub(super) counts: Counts,
}

impl Shared {
    pub(super) fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(super) fn ring(&self, f: impl FnOnce(&mut State)) {
        let mut s = self.lock();
        f(&mut s);
        s.rung = true;
        drop(s);
        self.bell.notify_all();
        self.work.notify_all();
    }
}
