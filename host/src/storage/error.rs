//! What a storage backend can answer instead of a result: one enum for every
//! backend, with the backend's own error kept as the source. It owns the
//! words of the storage boundary and nothing else: it must never name a
//! backend, a verb or a tenant, so that a backend of someone else's can
//! answer in it, and the call boundary alone decides what each means to a
//! caller (see `leasehold_host::Error`'s `From<StorageError>`).

use std::sync::Arc;
use std::time::Duration;

/// A backend's own error, kept as the source.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Why a storage operation did not happen. Each variant calls for a
/// different response from the engine: a conflict runs the call again, a
/// busy store or an unavailable one is reported as retryable or not, and an
/// unknown outcome is never retried as it stands.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StorageError {
    /// The store could not be reached or stopped answering: a closed
    /// connection, a timeout, an I/O failure. Before a commit, nothing of
    /// the transaction was written.
    #[error("the store is unavailable: {0}")]
    Unavailable(#[source] BoxError),
    /// The transaction waited this long for its turn (the writer of a
    /// single-writer store, a free connection, a line) and gave up. Nothing
    /// was done.
    #[error("no turn within {0:?}")]
    Busy(Duration),
    /// The transaction lost a race with concurrent ones (a serialization
    /// failure, a deadlock) and was rolled back. Nothing was done, and the
    /// engine runs the call again from the start.
    #[error("the transaction conflicted with a concurrent one: {0}")]
    Conflict(#[source] BoxError),
    /// The commit was sent but its answer never came back: it may have
    /// landed or not.
    #[error("the outcome of the commit is unknown: {0}")]
    OutcomeUnknown(#[source] BoxError),
    /// What the store holds is damaged: a page, a checksum, a row it cannot
    /// read back.
    #[error("the store is corrupt: {0}")]
    Corrupt(#[source] BoxError),
    /// A commit this transaction shared with others (group commit) did not
    /// happen, and the transaction's outcome rested on it.
    #[error(transparent)]
    GroupFailed(GroupFailure),
    /// A write was asked of a store or a transaction that only reads.
    #[error("the store is open read-only")]
    ReadOnly,
    /// Anything else the backend could not do.
    #[error("storage failed: {0}")]
    Other(#[source] BoxError),
}

impl StorageError {
    /// [`Other`](Self::Other) from a message.
    pub fn other(what: impl Into<String>) -> StorageError {
        StorageError::Other(what.into().into())
    }

    /// Whether nothing was done and the same transaction may succeed if run
    /// again.
    pub fn is_retryable(&self) -> bool {
        match self {
            StorageError::Busy(_) | StorageError::Conflict(_) => true,
            StorageError::GroupFailed(f) => f.nothing_committed(),
            _ => false,
        }
    }
}

/// Why a shared commit did not happen, the same for every transaction of
/// the group.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum GroupFailure {
    /// The database refused the commit. redb then takes no further write
    /// until the file is opened again, and what reached the disk is for its
    /// recovery to decide.
    #[error("the commit this call shared with others failed")]
    Commit(#[source] Arc<dyn std::error::Error + Send + Sync>),
    /// A call of the group could not apply its batch; the group was aborted
    /// and nothing of it was committed.
    #[error("a call of this call's group failed to apply its writes; the group was aborted")]
    Apply(#[source] Arc<dyn std::error::Error + Send + Sync>),
    /// The call that was to commit the group panicked or was dropped first;
    /// the group was aborted and nothing of it was committed.
    #[error(
        "the call that was to commit this call's group stopped before it did; the group was aborted"
    )]
    Abandoned,
}

impl GroupFailure {
    /// Whether the group was aborted, so that nothing of it was written.
    pub fn nothing_committed(&self) -> bool {
        !matches!(self, GroupFailure::Commit(_))
    }
}

/// A member stopped waiting for its group's commit, which was still going.
#[derive(Debug, thiserror::Error)]
#[error("the commit this call shared with others had not finished after {0:?}")]
pub struct CommitHung(pub Duration);
