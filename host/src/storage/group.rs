//! Group commit for redb: write calls that arrive while a commit is being
//! made durable share the next commit, and so its one fsync.
//!
//! redb lets one write transaction exist at a time. A call takes the *turn*
//! (one call at a time, in arrival order as the OS wakes them), runs its guest
//! on the group's open transaction, which already holds the writes of the
//! calls before it, and applies its batch only if it answered `ok`. Then,
//! if others are waiting for the turn, it hands them the open transaction
//! and waits for the group's commit; if nobody is, it commits the group. A
//! call is told `ok` only once the commit that covers it is durable, and a
//! commit that fails fails every call of its group with the same error. A
//! call that fails adds nothing, and the group commits as if it had never
//! run. A lone caller commits at once: no batching window.

use std::collections::HashMap;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::error::Error;

/// Why a group's commit failed, shared by every call of the group.
#[derive(Debug, Clone)]
pub struct GroupFailure(Arc<redb::Error>);

impl std::fmt::Display for GroupFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the commit this call shared with others failed: {}",
            self.0
        )
    }
}

impl std::error::Error for GroupFailure {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&*self.0)
    }
}

type Outcome = Result<(), GroupFailure>;

#[derive(Default)]
struct State {
    /// A call holds the turn.
    busy: bool,
    /// Calls waiting for the turn.
    waiting: usize,
    /// The open group's transaction, between two of its calls.
    open: Option<redb::WriteTransaction>,
    /// The open group's number.
    group: u64,
    /// Whether any call of the open group applied writes.
    dirty: bool,
    /// A failure while applying a batch: the open group cannot commit.
    poisoned: Option<GroupFailure>,
    /// Calls of a group still waiting for its commit, and its outcome once
    /// known.
    members: HashMap<u64, (usize, Option<Outcome>)>,
    /// Calls that have taken the turn in the open group.
    taken: u64,
    stats: CommitStats,
}

/// What group commit has done on one database so far: how many durable
/// commits it made, how many write calls they covered, and how long they
/// took. `calls / commits` is the mean group size.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct CommitStats {
    /// Commits that made writes durable (or, under `Durability::None`,
    /// visible).
    pub commits: u64,
    /// Write calls those commits covered, including calls of a group that
    /// wrote nothing or failed: they shared its turn.
    pub calls: u64,
    /// Time spent inside those commits, fsync included.
    pub committing: Duration,
}

/// The writer of one redb database.
pub(crate) struct Writer {
    state: Mutex<State>,
    turn: Condvar,
    committed: Condvar,
    /// Off: every call commits on its own, as if alone.
    grouping: bool,
}

/// A call's turn: the transaction it runs on, and its group.
pub(crate) struct Turn {
    writer: Arc<Writer>,
    txn: Option<redb::WriteTransaction>,
    group: u64,
}

impl Writer {
    pub(crate) fn stats(&self) -> CommitStats {
        self.lock().stats
    }

    pub(crate) fn new(grouping: bool) -> Arc<Writer> {
        Arc::new(Writer {
            state: Mutex::new(State::default()),
            turn: Condvar::new(),
            committed: Condvar::new(),
            grouping,
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Waits at most `wait` for the turn, and answers the transaction to
    /// run on: the open group's, or a new one from `begin`.
    pub(crate) fn enter(
        writer: &Arc<Writer>,
        wait: Duration,
        begin: impl FnOnce() -> Result<redb::WriteTransaction, Error>,
    ) -> Result<Turn, Error> {
        let deadline = Instant::now() + wait;
        let mut s = writer.lock();
        s.waiting += 1;
        while s.busy {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                s.waiting -= 1;
                return Err(Error::LockTimeout(wait));
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
        if let Some(txn) = s.open.take() {
            return Ok(Turn {
                writer: writer.clone(),
                txn: Some(txn),
                group,
            });
        }
        drop(s);
        // The previous group may still be committing; redb's own lock makes
        // this wait for it, and everyone arriving meanwhile queues for the
        // turn behind this call: they are the next group.
        match begin() {
            Ok(txn) => Ok(Turn {
                writer: writer.clone(),
                txn: Some(txn),
                group,
            }),
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
        self.turn.notify_one();
    }
}

impl Turn {
    pub(crate) fn txn(&self) -> &redb::WriteTransaction {
        self.txn
            .as_ref()
            .expect("a turn holds its transaction until it ends")
    }

    /// Applies the call's batch with `apply` and gives up the turn. The
    /// answer waits for the commit that covers the call to be durable; the
    /// caller may free what it holds before it waits.
    pub(crate) fn commit(
        mut self,
        apply: impl FnOnce(&redb::WriteTransaction) -> Result<(), redb::Error>,
        wrote: bool,
    ) -> Result<Pending, Error> {
        let applied = if wrote { Some(apply(self.txn())) } else { None };
        let writer = self.writer.clone();
        let txn = self.txn.take();
        let mut s = writer.lock();
        match applied {
            Some(Ok(())) => s.dirty = true,
            Some(Err(e)) => {
                // Part of this call's batch may be in the transaction: the
                // whole group fails rather than commit half a call.
                let failure = GroupFailure(Arc::new(e));
                s.poisoned.get_or_insert(failure.clone());
            }
            None => {}
        }
        let group = self.group;
        let closes = s.waiting == 0 || !writer.grouping;
        if closes {
            let closing = close_group(&writer, s, txn, group);
            return Ok(Pending(Some(Box::new(move || closing.finish()))));
        }
        // A call that wrote nothing may still have read what earlier calls
        // of the group wrote: its answer waits for their fsync too.
        let covered = s.dirty || s.poisoned.is_some();
        s.open = txn;
        s.busy = false;
        writer.turn.notify_one();
        if !covered {
            return Ok(Pending(None));
        }
        s.members.entry(group).or_insert((0, None)).0 += 1;
        drop(s);
        Ok(Pending(Some(Box::new(move || writer.outcome_of(group)))))
    }
}

/// A commit that may still be becoming durable.
pub struct Pending(Option<Box<dyn FnOnce() -> Result<(), Error> + Send>>);

impl Pending {
    /// Nothing to wait for.
    pub fn done() -> Pending {
        Pending(None)
    }

    /// Waits until the commit is durable, and answers how it went.
    pub fn wait(self) -> Result<(), Error> {
        match self.0 {
            Some(wait) => wait(),
            None => Ok(()),
        }
    }
}

impl Writer {
    /// Waits for the commit of `group`, of which the caller is a member.
    fn outcome_of(&self, group: u64) -> Result<(), Error> {
        let mut s = self.lock();
        loop {
            let entry = s
                .members
                .get_mut(&group)
                .expect("a member's group is listed until it has its outcome");
            if let Some(outcome) = entry.1.clone() {
                entry.0 -= 1;
                if entry.0 == 0 {
                    s.members.remove(&group);
                }
                return outcome.map_err(|e| Error::Storage(Box::new(e)));
            }
            s = self.committed.wait(s).unwrap_or_else(|p| p.into_inner());
        }
    }
}

/// A group closed to new calls, whose commit is still to be made.
struct Closing {
    writer: Arc<Writer>,
    txn: Option<redb::WriteTransaction>,
    poisoned: Option<GroupFailure>,
    dirty: bool,
    group: u64,
    /// Calls that took the group's turn.
    calls: u64,
}

/// Closes the open group: the next call starts a new one (and redb makes it
/// wait for this group's commit to finish).
fn close_group(
    writer: &Arc<Writer>,
    mut s: MutexGuard<'_, State>,
    txn: Option<redb::WriteTransaction>,
    group: u64,
) -> Closing {
    let dirty = std::mem::take(&mut s.dirty);
    let poisoned = s.poisoned.take();
    let calls = std::mem::take(&mut s.taken);
    s.group += 1;
    s.busy = false;
    writer.turn.notify_one();
    Closing {
        writer: writer.clone(),
        txn,
        poisoned,
        dirty,
        group,
        calls,
    }
}

impl Closing {
    /// Commits the group (or aborts it, when nothing was written or a batch
    /// failed to apply) and tells its waiting calls how it went.
    fn finish(self) -> Result<(), Error> {
        let mut committing = None;
        let outcome: Outcome = match (self.txn, self.poisoned) {
            (None, _) => Ok(()),
            (Some(txn), Some(failure)) => {
                let _ = txn.abort();
                Err(failure)
            }
            (Some(txn), None) if self.dirty => {
                let started = Instant::now();
                let done = txn.commit().map_err(|e| GroupFailure(Arc::new(e.into())));
                committing = done.is_ok().then(|| started.elapsed());
                done
            }
            // A group that changed nothing has nothing to make durable.
            (Some(txn), None) => txn.abort().map_err(|e| GroupFailure(Arc::new(e.into()))),
        };
        let mut s = self.writer.lock();
        if let Some(took) = committing {
            s.stats.commits += 1;
            s.stats.calls += self.calls;
            s.stats.committing += took;
        }
        if let Some(entry) = s.members.get_mut(&self.group) {
            entry.1 = Some(outcome.clone());
            self.writer.committed.notify_all();
        }
        drop(s);
        outcome.map_err(|e| Error::Storage(Box::new(e)))
    }
}

impl Drop for Turn {
    /// A call that failed (an error answer, a trap, a limit) ends here
    /// without applying anything; the group's earlier writes are not its to
    /// drop, so it hands the transaction on, or commits the group if nobody
    /// is waiting for it.
    fn drop(&mut self) {
        let Some(txn) = self.txn.take() else {
            return;
        };
        let writer = self.writer.clone();
        let mut s = writer.lock();
        if s.waiting > 0 && writer.grouping {
            s.open = Some(txn);
            s.busy = false;
            writer.turn.notify_one();
            return;
        }
        let _ = close_group(&writer, s, Some(txn), self.group).finish();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn db() -> redb::Database {
        redb::Database::builder()
            .create_with_backend(redb::backends::InMemoryBackend::new())
            .expect("in-memory database")
    }

    fn begin(db: &redb::Database) -> impl FnOnce() -> Result<redb::WriteTransaction, Error> + '_ {
        || {
            db.begin_write()
                .map_err(|e| Error::from(redb::Error::from(e)))
        }
    }

    #[test]
    fn a_writer_waits_for_the_turn_a_bounded_time() {
        let db = db();
        let writer = Writer::new(true);
        let held = Writer::enter(&writer, Duration::ZERO, begin(&db)).expect("free");
        let started = Instant::now();
        let again = Writer::enter(&writer, Duration::from_millis(30), begin(&db));
        assert!(matches!(again, Err(Error::LockTimeout(_))));
        assert!(started.elapsed() >= Duration::from_millis(30));
        drop(held);
        assert!(Writer::enter(&writer, Duration::ZERO, begin(&db)).is_ok());
    }
}
