//! Group commit: write calls that arrive while a commit is being made
//! durable share the next commit, and so its one fsync. redb groups every
//! write call this way; PostgreSQL groups the calls that take turns on one
//! line (see `storage::postgres::line`), which share the line's turn too.
//!
//! This module owns the writer's turn, the open group and its transaction,
//! and telling each member of a group how the group's commit went. It must
//! never tell a call anything before the commit its answer rests on is
//! settled, never commit a group one of whose batches failed to apply, and
//! never leave a caller waiting without a bound.
//!
//! redb lets one write transaction exist at a time. A call takes the *turn*
//! (one call at a time, in arrival order as the OS wakes them), runs its guest
//! on the group's open transaction, which already holds the writes of the
//! calls before it, and applies its batch only if it answered `ok`. Then,
//! if others are waiting for the turn and the group is below its caps, it
//! hands them the open transaction and waits for the group's commit;
//! otherwise it closes the group and commits it. A lone caller commits at
//! once: no batching window.
//!
//! The bounds:
//! - a wait for the turn ends within `lock_wait` ([`StorageError::Busy`]);
//! - a group takes at most `calls` calls and closes at the first call that
//!   finishes after it is `age` old, so a member waits for at most the
//!   group's age cap, one call, and the commit; past `outcome_wait` it stops
//!   waiting and answers [`StorageError::OutcomeUnknown`], which only a commit that
//!   hangs in the file system can cause;
//! - a batch that fails to apply closes its group at once, and the group is
//!   aborted: it takes no further call, and every member gets the failure;
//! - a transaction that a failed read left unusable is not handed on: the
//!   group closes, and its commit (which then fails) tells every member;
//! - a closer that panics or is dropped before it commits aborts its group
//!   and fails every member ([`GroupFailure::Abandoned`]), by a drop guard.
//!
//! What an answer means: a call's answer, `ok` or an error, is given only
//! once the group whose writes it read is settled. A call that answers an
//! error inside a group that holds earlier members' writes waits for the
//! group's commit like a member, and if that commit fails it answers the
//! group's failure instead of its own refusal, which rested on writes that
//! never became true.

use std::collections::HashMap;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::config::Limits;
use crate::storage::commit::{CommitStats, Pending};
use crate::storage::error::{BoxError, CommitHung, GroupFailure, StorageError};

/// The transaction a group shares: redb's, PostgreSQL's for the calls of
/// one line, or a test's.
pub(crate) trait GroupTxn: Send + 'static {
    /// Makes the group's writes durable (or, under `Durability::None`,
    /// visible).
    fn commit(self) -> Result<(), BoxError>;
    /// Drops the group's writes.
    fn abort(self);
    /// Whether the next call may still run on it. A transaction that a
    /// failed read has left unusable (PostgreSQL aborts a transaction at
    /// its first error) is not handed on: its group closes.
    fn usable(&self) -> bool {
        true
    }
    /// What a member is told when its group did not commit. A backend
    /// whose failed commit changed nothing says so in its own words (a
    /// conflict, run again) rather than as a shared failure.
    fn failed(failure: GroupFailure) -> StorageError {
        StorageError::GroupFailed(failure)
    }
}

impl GroupTxn for redb::WriteTransaction {
    fn commit(self) -> Result<(), BoxError> {
        redb::WriteTransaction::commit(self).map_err(|e| Box::new(redb::Error::from(e)) as BoxError)
    }

    fn abort(self) {
        let _ = redb::WriteTransaction::abort(self);
    }
}

/// How far a group may grow, and how long a member waits for its outcome.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Bounds {
    /// Most calls one group takes.
    pub(crate) calls: u32,
    /// A group older than this closes at the next call that finishes.
    pub(crate) age: Duration,
    /// Longest a member waits for its group's outcome.
    pub(crate) outcome_wait: Duration,
}

impl Bounds {
    /// The bounds `limits` set.
    pub(crate) fn of(limits: &Limits) -> Self {
        Bounds {
            calls: limits.group_calls.max(1),
            age: limits.group_age,
            // A member waits for its group to close (its age cap, then the
            // call running then, up to its deadline) and for the commit;
            // only a commit that hangs outlasts this.
            outcome_wait: limits.group_age + limits.deadline + limits.lock_wait,
        }
    }
}

type Outcome = Result<(), GroupFailure>;

/// A group's members still waiting for its commit, and its outcome once known.
#[derive(Default)]
struct Members {
    waiting: usize,
    outcome: Option<Outcome>,
}

struct State<T> {
    /// A call holds the turn.
    busy: bool,
    /// Calls waiting for the turn.
    waiting: usize,
    /// The open group's transaction, between two of its calls.
    open: Option<T>,
    /// The open group's number.
    group: u64,
    /// When the open group's first call took the turn.
    opened: Option<Instant>,
    /// Whether any call of the open group applied writes.
    dirty: bool,
    /// Calls that have taken the turn in the open group.
    taken: u64,
    members: HashMap<u64, Members>,
    stats: CommitStats,
}

/// The writer of one redb database.
pub(crate) struct Writer<T> {
    state: Mutex<State<T>>,
    turn: Condvar,
    committed: Condvar,
    /// Off: every call commits on its own, as if alone.
    grouping: bool,
    bounds: Bounds,
}

/// A call's turn: the transaction it runs on, and its group.
pub(crate) struct Turn<T: GroupTxn> {
    writer: Arc<Writer<T>>,
    txn: Option<T>,
    group: u64,
    /// The call's batch is going into the transaction: if the turn ends
    /// now, the transaction may hold part of it.
    applying: bool,
}

impl<T: GroupTxn> Writer<T> {
    pub(crate) fn stats(&self) -> CommitStats {
        let s = self.lock();
        CommitStats {
            waiting: s.waiting as u64,
            ..s.stats
        }
    }

    pub(crate) fn new(grouping: bool, bounds: Bounds) -> Arc<Writer<T>> {
        Arc::new(Writer {
            state: Mutex::new(State {
                busy: false,
                waiting: 0,
                open: None,
                group: 0,
                opened: None,
                dirty: false,
                taken: 0,
                members: HashMap::new(),
                stats: CommitStats::default(),
            }),
            turn: Condvar::new(),
            committed: Condvar::new(),
            grouping,
            bounds,
        })
    }

    fn lock(&self) -> MutexGuard<'_, State<T>> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Waits at most `wait` for the turn, and answers the transaction to
    /// run on: the open group's, or a new one from `begin`.
    pub(crate) fn enter(
        writer: &Arc<Writer<T>>,
        wait: Duration,
        begin: impl FnOnce() -> Result<T, StorageError>,
    ) -> Result<Turn<T>, StorageError> {
        let deadline = Instant::now() + wait;
        let mut s = writer.lock();
        s.waiting += 1;
        while s.busy {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                s.waiting -= 1;
                return Err(StorageError::Busy(wait));
            }
            s = writer
                .turn
                .wait_timeout(s, left)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
        s.waiting -= 1;
        s.busy = true;
        s.taken += 1;
        let group = s.group;
        let turn = |txn| Turn {
            writer: writer.clone(),
            txn: Some(txn),
            group,
            applying: false,
        };
        if let Some(txn) = s.open.take() {
            return Ok(turn(txn));
        }
        s.opened = Some(Instant::now());
        drop(s);
        // The previous group may still be committing; redb's own lock makes
        // this wait for it, and everyone arriving meanwhile queues for the
        // turn behind this call: they are the next group.
        match begin() {
            Ok(txn) => Ok(turn(txn)),
            Err(e) => {
                writer.leave_empty();
                Err(e)
            }
        }
    }

    /// Gives up a turn that never got a transaction.
    fn leave_empty(&self) {
        let mut s = self.lock();
        s.busy = false;
        s.taken = s.taken.saturating_sub(1);
        if s.taken == 0 {
            s.opened = None;
        }
        self.turn.notify_one();
    }

    /// Whether the call finishing now must close the open group rather
    /// than hand it on.
    fn must_close(&self, s: &State<T>) -> bool {
        !self.grouping
            || s.waiting == 0
            || s.taken >= u64::from(self.bounds.calls)
            || s.opened.is_some_and(|t| t.elapsed() >= self.bounds.age)
    }

    /// Waits for the commit of `group`, of which the caller is a member, at
    /// most `outcome_wait`.
    fn outcome_of(&self, group: u64) -> Result<(), StorageError> {
        let deadline = Instant::now() + self.bounds.outcome_wait;
        let mut s = self.lock();
        loop {
            let Some(entry) = s.members.get_mut(&group) else {
                // Only a member's own leaving removes its entry.
                return Err(StorageError::other("a member's group was forgotten"));
            };
            let outcome = entry.outcome.clone();
            let left = deadline.saturating_duration_since(Instant::now());
            if outcome.is_some() || left.is_zero() {
                entry.waiting -= 1;
                if entry.waiting == 0 {
                    s.members.remove(&group);
                }
                return match outcome {
                    Some(outcome) => outcome.map_err(T::failed),
                    None => Err(StorageError::OutcomeUnknown(Box::new(CommitHung(
                        self.bounds.outcome_wait,
                    )))),
                };
            }
            s = self
                .committed
                .wait_timeout(s, left)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }

    /// A member that will never ask for its outcome.
    fn forget_member(&self, group: u64) {
        let mut s = self.lock();
        if let Some(entry) = s.members.get_mut(&group) {
            entry.waiting -= 1;
            if entry.waiting == 0 {
                s.members.remove(&group);
            }
        }
    }
}

impl<T: GroupTxn> Turn<T> {
    pub(crate) fn txn(&self) -> &T {
        self.txn
            .as_ref()
            .expect("a turn holds its transaction until it ends")
    }

    /// The transaction, for writes made before [`commit`](Self::commit)
    /// (a load's, which streams): from now on a turn that ends without
    /// committing aborts its group, as one stopped while applying does.
    pub(crate) fn writing(&mut self) -> &T {
        self.applying = true;
        self.txn()
    }

    /// Applies the call's batch with `apply` (when `wrote`) and gives up the
    /// turn. The answer waits for the commit that covers the call; the
    /// caller may free what it holds before it waits. A call that answered
    /// an error ends here too, with nothing to apply, so that its answer
    /// waits for the writes it read.
    pub(crate) fn commit(
        mut self,
        apply: impl FnOnce(&T) -> Result<(), BoxError>,
        wrote: bool,
    ) -> Pending {
        self.applying = true;
        let applied = if wrote { apply(self.txn()) } else { Ok(()) };
        self.applying = false;
        let writer = self.writer.clone();
        let txn = self.txn.take();
        let group = self.group;
        let mut s = writer.lock();
        if let Err(e) = applied {
            // Part of this call's batch may be in the transaction: the group
            // is aborted now, before another call runs on it.
            let failure = GroupFailure::Apply(Arc::from(e));
            let closing = close_group(&writer, s, txn, group, Some(failure));
            return closer(closing);
        }
        s.dirty |= wrote;
        if writer.must_close(&s) || txn.as_ref().is_some_and(|t| !t.usable()) {
            let closing = close_group(&writer, s, txn, group, None);
            return closer(closing);
        }
        // A call that wrote nothing may still have read what earlier calls
        // of the group wrote: its answer waits for their commit too.
        let covered = s.dirty;
        s.open = txn;
        s.busy = false;
        writer.turn.notify_one();
        if !covered {
            return Pending::done();
        }
        s.members.entry(group).or_default().waiting += 1;
        drop(s);
        let member = Member {
            writer,
            group,
            asked: false,
        };
        Pending::waiting(move || member.wait())
    }
}

impl<T: GroupTxn> Drop for Turn<T> {
    /// A call that ended without [`Turn::commit`] (it failed, or its
    /// thread is unwinding) applied nothing of its own; the group's earlier
    /// writes are not its to drop, so it hands the transaction on, or
    /// commits the group if it must close. Unless it stopped while applying
    /// its batch: then the transaction may hold part of it, and the group
    /// is aborted.
    fn drop(&mut self) {
        let Some(txn) = self.txn.take() else {
            return;
        };
        let writer = self.writer.clone();
        let s = writer.lock();
        let torn = self.applying.then_some(GroupFailure::Abandoned);
        if torn.is_none() && txn.usable() && !writer.must_close(&s) {
            let mut s = s;
            s.open = Some(txn);
            s.busy = false;
            writer.turn.notify_one();
            return;
        }
        let _ = close_group(&writer, s, Some(txn), self.group, torn).finish();
    }
}

fn closer<T: GroupTxn>(closing: Closing<T>) -> Pending {
    Pending::waiting(move || closing.finish())
}

/// A call waiting for its group's commit. Dropped without asking, it leaves
/// the group's list, so the list never grows.
struct Member<T: GroupTxn> {
    writer: Arc<Writer<T>>,
    group: u64,
    asked: bool,
}

impl<T: GroupTxn> Member<T> {
    fn wait(mut self) -> Result<(), StorageError> {
        self.asked = true;
        self.writer.outcome_of(self.group)
    }
}

impl<T: GroupTxn> Drop for Member<T> {
    fn drop(&mut self) {
        if !self.asked {
            self.writer.forget_member(self.group);
        }
    }
}

/// A group closed to new calls, whose commit is still to be made. Dropped
/// before it has told its members (its call panicked, or its commit was
/// never waited for), it aborts the group and fails them.
struct Closing<T: GroupTxn> {
    writer: Arc<Writer<T>>,
    txn: Option<T>,
    failure: Option<GroupFailure>,
    dirty: bool,
    group: u64,
    /// Calls that took the group's turn.
    calls: u64,
    told: bool,
}

/// Closes the open group: the next call starts a new one (and redb makes it
/// wait for this group's commit to finish).
fn close_group<T: GroupTxn>(
    writer: &Arc<Writer<T>>,
    mut s: MutexGuard<'_, State<T>>,
    txn: Option<T>,
    group: u64,
    failure: Option<GroupFailure>,
) -> Closing<T> {
    let dirty = std::mem::take(&mut s.dirty);
    let calls = std::mem::take(&mut s.taken);
    s.stats.largest = s.stats.largest.max(calls);
    s.opened = None;
    s.group += 1;
    s.busy = false;
    writer.turn.notify_one();
    Closing {
        writer: writer.clone(),
        txn,
        failure,
        dirty,
        group,
        calls,
        told: false,
    }
}

impl<T: GroupTxn> Closing<T> {
    /// Commits the group (or aborts it, when nothing was written or a batch
    /// failed to apply) and tells its waiting calls how it went.
    fn finish(mut self) -> Result<(), StorageError> {
        let mut took = None;
        let outcome: Outcome = match (self.txn.take(), self.failure.take()) {
            (None, None) => Ok(()),
            (None, Some(failure)) => Err(failure),
            (Some(txn), Some(failure)) => {
                txn.abort();
                Err(failure)
            }
            (Some(txn), None) if self.dirty => {
                let started = Instant::now();
                let done = txn.commit().map_err(|e| GroupFailure::Commit(Arc::from(e)));
                took = done.is_ok().then(|| started.elapsed());
                done
            }
            // A group that changed nothing has nothing to make durable.
            (Some(txn), None) => {
                txn.abort();
                Ok(())
            }
        };
        self.tell(outcome.clone(), took);
        outcome.map_err(T::failed)
    }

    fn tell(&mut self, outcome: Outcome, took: Option<Duration>) {
        self.told = true;
        let mut s = self.writer.lock();
        match (took, &outcome) {
            (Some(took), _) => {
                s.stats.commits += 1;
                s.stats.calls += self.calls;
                s.stats.committing += took;
            }
            (None, Err(_)) => s.stats.failed += 1,
            (None, Ok(())) => {}
        }
        if let Some(entry) = s.members.get_mut(&self.group) {
            entry.outcome = Some(outcome);
            self.writer.committed.notify_all();
        }
    }
}

impl<T: GroupTxn> Drop for Closing<T> {
    fn drop(&mut self) {
        if self.told {
            return;
        }
        if let Some(txn) = self.txn.take() {
            txn.abort();
        }
        self.tell(Err(GroupFailure::Abandoned), None);
    }
}

#[cfg(test)]
mod tests;
