//! Calls of one line that meet in one process share a turn and a commit.
//! When a call on a line (`claim-next`, say) finishes while others of the
//! same tenant and line wait in this process, it hands them its open
//! transaction, still holding the line's turn on the server: each runs on
//! it in arrival order, seeing the writes of the calls before it, so it
//! answers exactly what it would have answered alone, one turn later. The
//! last one commits them all, with one `COMMIT` and one WAL flush, and
//! gives the turn back. It owns the registry of lines and the group's
//! shared transaction; it must never let a call read another group's
//! uncommitted writes, never hand on a transaction a failed read left
//! unusable, and never tell a call `ok` before the commit that covers it.
//!
//! The grouping itself (who waits for the turn, when a group closes, who
//! is told what) is [`crate::storage::group`]'s, as for redb; the bounds are
//! the engine's (`Limits::group_calls`, `group_age`). The calls' writes wait
//! in an [`Overlay`] until the group commits, since the server sees a
//! call's batch only with the `COMMIT`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use crate::storage::backend::{Entry, ScanRange, Txn, Write};
use crate::storage::commit::{CommitStats, Pending};
use crate::storage::error::{BoxError, GroupFailure, StorageError};
use crate::storage::group::{Bounds, GroupTxn, Turn, Writer};
use crate::storage::overlay::Overlay;

/// Lines this process holds a registry entry for, past which idle ones are
/// forgotten.
const KEPT_LINES: usize = 1024;

/// A line of one tenant: (tenant, line).
type LineKey = (String, &'static str);

/// The lines of one engine: one writer per (tenant, line).
pub(crate) struct Lines {
    writers: Mutex<HashMap<LineKey, Arc<Writer<LineGroup>>>>,
    grouping: bool,
    bounds: Bounds,
    /// What the writers forgotten so far had done.
    forgotten: Mutex<CommitStats>,
}

impl Lines {
    pub(crate) fn new(grouping: bool, bounds: Bounds) -> Self {
        Lines {
            writers: Mutex::new(HashMap::new()),
            grouping,
            bounds,
            forgotten: Mutex::new(CommitStats::default()),
        }
    }

    fn writer(&self, tenant: &str, line: &'static str) -> Arc<Writer<LineGroup>> {
        let mut writers = self.writers.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(w) = writers.get(&(tenant.to_owned(), line)) {
            return w.clone();
        }
        if writers.len() >= KEPT_LINES {
            // A writer only this map holds has no call on it, waiting or
            // running, and no group open.
            let mut forgotten = self.forgotten.lock().unwrap_or_else(|p| p.into_inner());
            writers.retain(|_, w| {
                let idle = Arc::strong_count(w) == 1;
                if idle {
                    add(&mut forgotten, w.stats());
                }
                !idle
            });
        }
        writers
            .entry((tenant.to_owned(), line))
            .or_insert_with(|| Writer::new(self.grouping, self.bounds))
            .clone()
    }

    /// Waits at most `wait` for this process's turn on the line, and answers
    /// a transaction on the open group's, or on a new one from `begin`
    /// (which takes the server's turn with its first read).
    pub(crate) fn enter(
        &self,
        tenant: &str,
        line: &'static str,
        wait: Duration,
        begin: impl FnOnce() -> Result<Box<dyn Txn>, StorageError>,
    ) -> Result<Box<dyn Txn>, StorageError> {
        let writer = self.writer(tenant, line);
        let turn = Writer::enter(&writer, wait, || Ok(LineGroup::new(begin()?)))?;
        Ok(Box::new(LineTxn { turn }))
    }

    /// What the lines' groups have done so far, all lines together.
    pub(crate) fn stats(&self) -> CommitStats {
        let mut total = *self.forgotten.lock().unwrap_or_else(|p| p.into_inner());
        let writers = self.writers.lock().unwrap_or_else(|p| p.into_inner());
        for w in writers.values() {
            add(&mut total, w.stats());
        }
        total
    }
}

fn add(total: &mut CommitStats, s: CommitStats) {
    total.commits += s.commits;
    total.calls += s.calls;
    total.committing += s.committing;
    total.largest = total.largest.max(s.largest);
    total.failed += s.failed;
    total.waiting += s.waiting;
}

/// The transaction a line's group shares: the first call's, with the
/// writes of the calls that answered `ok` laid over it.
pub(crate) struct LineGroup {
    shared: Mutex<Shared>,
}

struct Shared {
    overlay: Overlay,
    /// The failure that left the transaction unusable, if one did: the
    /// server has aborted it, and the group's commit answers this.
    broken: Option<Arc<StorageError>>,
}

impl LineGroup {
    fn new(txn: Box<dyn Txn>) -> Self {
        LineGroup {
            shared: Mutex::new(Shared {
                overlay: Overlay::new(txn),
                broken: None,
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Shared> {
        self.shared.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Runs one read; a failed one leaves the transaction unusable (the
    /// server aborts a transaction at its first error), and the call is
    /// told the failure in its own words.
    fn read<R>(
        &self,
        f: impl FnOnce(&mut Overlay) -> Result<R, StorageError>,
    ) -> Result<R, StorageError> {
        let mut s = self.lock();
        if let Some(broken) = &s.broken {
            return Err(shared(broken));
        }
        f(&mut s.overlay).map_err(|e| {
            let e = Arc::new(e);
            let answer = shared(&e);
            s.broken = Some(e);
            answer
        })
    }
}

impl GroupTxn for LineGroup {
    fn commit(self) -> Result<(), BoxError> {
        let s = self.shared.into_inner().unwrap_or_else(|p| p.into_inner());
        if let Some(broken) = s.broken {
            return Err(Box::new(shared(&broken)));
        }
        let (txn, batch) = s.overlay.into_parts();
        txn.commit(batch)
            .and_then(Pending::wait)
            .map_err(|e| Box::new(e) as BoxError)
    }

    fn abort(self) {
        // Dropping the transaction rolls it back and gives the turn back.
    }

    fn usable(&self) -> bool {
        self.lock().broken.is_none()
    }

    /// A commit that failed in a way that changed nothing (a lost
    /// serialization race, the server gone before the `COMMIT` went out)
    /// is told to every member as what it is, so that a conflict is run
    /// again; only what is not a storage error stays a shared failure.
    fn failed(failure: GroupFailure) -> StorageError {
        match &failure {
            GroupFailure::Commit(source) => match source.downcast_ref::<StorageError>() {
                Some(e) => like(e, Box::new(Retold(source.clone()))),
                None => StorageError::GroupFailed(failure),
            },
            _ => StorageError::GroupFailed(failure),
        }
    }
}

/// A storage failure several calls are told, each as its own error.
#[derive(Debug)]
struct Retold(Arc<dyn std::error::Error + Send + Sync>);

impl std::fmt::Display for Retold {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl std::error::Error for Retold {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&*self.0)
    }
}

/// `e`, told again: the same kind of failure, with the first as its source.
fn shared(e: &Arc<StorageError>) -> StorageError {
    like(e, Box::new(Retold(e.clone())))
}

/// A failure of the same kind as `e`, whose source is `source`.
fn like(e: &StorageError, source: BoxError) -> StorageError {
    match e {
        StorageError::Unavailable(_) => StorageError::Unavailable(source),
        StorageError::Busy(waited) => StorageError::Busy(*waited),
        StorageError::Conflict(_) => StorageError::Conflict(source),
        StorageError::OutcomeUnknown(_) => StorageError::OutcomeUnknown(source),
        StorageError::Corrupt(_) => StorageError::Corrupt(source),
        StorageError::GroupFailed(f) => StorageError::GroupFailed(f.clone()),
        StorageError::ReadOnly => StorageError::ReadOnly,
        _ => StorageError::Other(source),
    }
}

/// One call's transaction on its line's group.
struct LineTxn {
    turn: Turn<LineGroup>,
}

impl Txn for LineTxn {
    fn get(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>, StorageError> {
        self.turn.txn().read(|o| o.get(key))
    }

    fn get_many(&mut self, keys: &[Vec<u8>]) -> Result<Vec<Option<Vec<u8>>>, StorageError> {
        self.turn.txn().read(|o| o.get_many(keys))
    }

    fn scan(
        &mut self,
        start: &[u8],
        end: Option<&[u8]>,
        limit: u32,
        reverse: bool,
        max_bytes: usize,
    ) -> Result<(Vec<Entry>, bool), StorageError> {
        self.turn
            .txn()
            .read(|o| o.scan(start, end, limit, reverse, max_bytes))
    }

    fn scan_many(
        &mut self,
        ranges: &[ScanRange<'_>],
        max_bytes: usize,
    ) -> Result<(Vec<Vec<Entry>>, bool), StorageError> {
        self.turn.txn().read(|o| o.scan_many(ranges, max_bytes))
    }

    fn commit(self: Box<Self>, batch: Vec<Write>) -> Result<Pending, StorageError> {
        let wrote = !batch.is_empty();
        let LineTxn { turn } = *self;
        Ok(turn.commit(
            |group| {
                group.lock().overlay.apply(batch);
                Ok(())
            },
            wrote,
        ))
    }

    fn writer_slot(&self) -> u32 {
        self.turn.txn().lock().overlay.txn().writer_slot()
    }

    fn finish_unwritten(self: Box<Self>) -> Pending {
        let LineTxn { turn } = *self;
        turn.commit(|_| Ok(()), false)
    }
}
