//! The optional durability capability of a backend: a commit that is still
//! becoming durable when the transaction hands it back ([`Pending`]), and
//! what a backend that groups commits can report of them ([`CommitStats`]).
//! It owns these two values only; it must never decide when a commit is
//! made, which is the backend's business.

use std::time::Duration;

use crate::storage::error::StorageError;

/// A transaction's commit, which may still be becoming durable. The engine
/// acknowledges the call only once [`wait`](Self::wait) answers `Ok`, and
/// frees the call's sandbox before it waits, so a backend that shares one
/// fsync among many transactions (group commit) hands back the wait here.
/// A backend whose commit is durable when it returns answers
/// [`Pending::done`].
#[must_use = "a commit is acknowledged only once its wait answers"]
pub struct Pending(Option<Box<dyn FnOnce() -> Result<(), StorageError> + Send>>);

impl std::fmt::Debug for Pending {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pending")
            .field("waits", &self.0.is_some())
            .finish()
    }
}

impl Pending {
    /// Nothing to wait for: the commit is settled.
    pub fn done() -> Pending {
        Pending(None)
    }

    /// A commit settled by `wait`, which blocks until the commit is durable
    /// (or has failed) and answers how it went.
    pub fn waiting(wait: impl FnOnce() -> Result<(), StorageError> + Send + 'static) -> Pending {
        Pending(Some(Box::new(wait)))
    }

    /// Whether the commit is settled already, with nothing to wait for.
    pub fn is_done(&self) -> bool {
        self.0.is_none()
    }

    /// Waits until the commit is settled, and answers how it went.
    pub fn wait(self) -> Result<(), StorageError> {
        match self.0 {
            Some(wait) => wait(),
            None => Ok(()),
        }
    }
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
    /// The most calls any one group took, committed or not.
    pub largest: u64,
    /// Groups that ended without committing because a batch failed to
    /// apply, the commit failed, or the closer stopped first.
    pub failed: u64,
    /// Calls waiting for the turn at the moment these were read.
    pub waiting: u64,
}
