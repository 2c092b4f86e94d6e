//! The host's public error: what a call answers when it does not succeed.
//! It keeps apart what calls for different responses: the engine refusing
//! (a claim ladder rung, not found), bad input, damaged data, failed
//! storage, and a guest that broke the sandbox. It owns the one mapping
//! from the storage boundary's [`StorageError`] into it; it must never be
//! what a backend answers, so a backend never has to speak of verbs,
//! tenants or the sandbox.

use std::time::Duration;

use leasehold_guest::model::ClaimError;
pub use leasehold_guest::model::{StoreError, TaskState};

use crate::storage::error::{BoxError, GroupFailure, StorageError};
use crate::storage::file::OpenError;
use crate::storage::tenant_name::InvalidTenant;

/// Why a claim, take-over, release, renewal or holder-checked settlement did
/// not happen. Each variant calls for a different response: `NotFound` means
/// the id is wrong, `NotHeld` means the call did nothing, `AlreadyClaimed` is
/// transient, `Excluded` and `WrongRole` are permanent.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Refusal {
    /// No task has this id.
    NotFound(String),
    /// This actor is among the task's excluded actors.
    Excluded(String),
    /// This actor has none of the task's candidate roles.
    WrongRole(String),
    /// The task is no longer pending: it is in this state.
    NotPending(TaskState),
    /// Another actor, this one, holds the task.
    AlreadyClaimed(String),
    /// This actor does not hold the task.
    NotHeld(String),
    /// The caller expected another revision of the task; this is the
    /// current one. Nothing was written: read again, decide again.
    Stale(u64),
}

impl From<Refusal> for ClaimError {
    fn from(r: Refusal) -> Self {
        match r {
            Refusal::NotFound(id) => ClaimError::NotFound(id),
            Refusal::Excluded(a) => ClaimError::Excluded(a),
            Refusal::WrongRole(a) => ClaimError::WrongRole(a),
            Refusal::NotPending(s) => ClaimError::NotPending(s),
            Refusal::AlreadyClaimed(h) => ClaimError::AlreadyClaimed(h),
            Refusal::NotHeld(a) => ClaimError::NotHeld(a),
            Refusal::Stale(r) => ClaimError::Stale(r),
        }
    }
}

/// Worded once, by the rules' own `ClaimError`.
impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        ClaimError::from(self.clone()).fmt(f)
    }
}

impl std::error::Error for Refusal {}

/// A limit of the sandbox, as a call can exceed it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SandboxError {
    /// The call ran past its deadline ([`Limits::deadline`](crate::Limits::deadline)).
    #[error("the call ran past its deadline of {0:?}")]
    Deadline(Duration),
    /// The guest's linear memory would have grown past the cap.
    #[error("the guest asked for more than its memory cap of {cap} bytes")]
    Memory {
        /// The cap, in bytes.
        cap: usize,
    },
    /// The guest used a key longer than the cap.
    #[error("the guest used a key of {size} bytes; the cap is {cap}")]
    KeySize {
        /// The key's length, in bytes.
        size: usize,
        /// The cap, in bytes.
        cap: usize,
    },
    /// The guest wrote a value larger than the cap.
    #[error("the guest wrote a value of {size} bytes; the cap is {cap}")]
    ValueSize {
        /// The value's length, in bytes.
        size: usize,
        /// The cap, in bytes.
        cap: usize,
    },
    /// One scan asked for more entries than the cap.
    #[error("the guest asked one scan for {asked} entries; the cap is {cap}")]
    ScanLength {
        /// The entries asked for.
        asked: u32,
        /// The cap.
        cap: u32,
    },
    /// One `get-many` asked for more keys than the cap.
    #[error("the guest asked one get-many for {asked} keys; the cap is {cap}")]
    GetManyLength {
        /// The keys asked for.
        asked: usize,
        /// The cap.
        cap: u32,
    },
    /// One scan would have handed the guest more bytes than its budget.
    #[error("one scan read more than its budget of {cap} bytes")]
    ScanBytes {
        /// The budget, in bytes.
        cap: usize,
    },
    /// The call's reads together would have passed their budget.
    #[error("the call read more than its budget of {cap} bytes")]
    ReadBytes {
        /// The budget, in bytes.
        cap: usize,
    },
    /// The call's writes came to more than their budget.
    #[error("the call's writes came to {size} bytes; the budget is {cap}")]
    WriteBytes {
        /// The bytes the writes came to.
        size: usize,
        /// The budget, in bytes.
        cap: usize,
    },
    /// The guest staged a second batch of writes in one call.
    #[error("the guest staged a second batch of writes in one call")]
    SecondBatch,
    /// The guest staged writes in a call of a reading verb.
    #[error("the guest staged writes in a read-only call")]
    WriteInReadCall,
    /// The guest trapped, for this reason.
    #[error("the guest trapped: {0}")]
    Trap(String),
    /// The guest answered something the contract rules out.
    #[error("the guest answered something the contract rules out: {0}")]
    Malformed(String),
    /// Every instance slot of the pool was in use.
    #[error("no instance slot is free ({0}); too many calls at once")]
    Busy(String),
}

impl SandboxError {
    /// The name of the limit exceeded, if this was one.
    pub fn limit(&self) -> Option<&'static str> {
        Some(match self {
            SandboxError::Deadline(_) => "deadline",
            SandboxError::Memory { .. } => "memory",
            SandboxError::KeySize { .. } => "key-size",
            SandboxError::ValueSize { .. } => "value-size",
            SandboxError::ScanLength { .. } => "scan-length",
            SandboxError::GetManyLength { .. } => "get-many-length",
            SandboxError::ScanBytes { .. } => "scan-bytes",
            SandboxError::ReadBytes { .. } => "read-bytes",
            SandboxError::WriteBytes { .. } => "write-bytes",
            _ => return None,
        })
    }
}

/// Everything a Leasehold call can fail with.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The engine refused a claim, take-over, release, renewal or
    /// holder-checked settlement.
    #[error("refused: {0}")]
    Refused(Refusal),
    /// The engine answered a store error: not found, invalid input, a corrupt
    /// row, or the storage import failed.
    #[error("{0}")]
    Store(StoreError),
    /// The guest exceeded a limit, trapped, or answered nonsense. Its
    /// transaction was aborted; the engine keeps serving.
    #[error("sandbox: {0}")]
    Sandbox(SandboxError),
    /// The database underneath failed.
    #[error("storage: {0}")]
    Storage(#[source] BoxError),
    /// The database file could not be opened: busy, missing, empty, not a
    /// database, or refused by the file system.
    #[error(transparent)]
    Open(#[from] OpenError),
    /// A call waited this long for its turn and gave up: on redb a writing
    /// call, for the writer ahead of it; on PostgreSQL any call, for a free
    /// connection of the pool. Nothing was done; try again.
    #[error("the database is busy: no turn within {0:?}")]
    LockTimeout(Duration),
    /// The call lost a serialization race with concurrent calls (a
    /// PostgreSQL serialization failure or deadlock) on every one of its
    /// `attempts`, each run afresh. Nothing was done; try again.
    #[error("the call conflicted with concurrent calls on each of its {attempts} attempts")]
    Conflict {
        /// How many times the call was run.
        attempts: u32,
        /// The last attempt's failure.
        #[source]
        source: BoxError,
    },
    /// The call's commit was sent, but its answer never came back: it may
    /// have landed or not. Not retryable as it is: re-read, since every verb
    /// is idempotent or a compare-and-set.
    #[error("the outcome of the call's commit is unknown: {source}")]
    OutcomeUnknown {
        /// What became of the connection.
        #[source]
        source: BoxError,
    },
    /// The commit this call shared with other calls (redb's group commit)
    /// did not happen, and the call's answer, whatever it was, rested on it.
    /// Every call of the group gets the same failure. Retryable when the
    /// group was aborted ([`GroupFailure::nothing_committed`]).
    #[error("{0}")]
    GroupFailed(#[source] GroupFailure),
    /// The caller's deadline ([`Tenant::until`](crate::Tenant::until))
    /// passed before the call could commit. Nothing was done; try again.
    #[error("the caller's deadline passed before the call could commit; nothing was done")]
    DeadlinePassed,
    /// A writing verb was called on an engine opened read-only.
    #[error("the database is open read-only, and {verb} writes")]
    ReadOnly {
        /// The writing verb that was called.
        verb: &'static str,
    },
    /// A tenant name that cannot be used.
    #[error("invalid tenant name {name:?}: {why}")]
    Tenant {
        /// The name as given.
        name: String,
        /// What is wrong with it.
        why: &'static str,
    },
    /// The engine could not be set up: the component does not load or does
    /// not implement the world. `source` is wasmtime's reason, where it gave
    /// one.
    #[error("setup: {what}")]
    Setup {
        /// What could not be set up.
        what: String,
        /// The underlying error, where there was one.
        #[source]
        source: Option<BoxError>,
    },
}

impl Error {
    /// A setup failure with no underlying error.
    pub(crate) fn setup(what: impl Into<String>) -> Error {
        Error::Setup {
            what: what.into(),
            source: None,
        }
    }

    /// A setup failure caused by `source`.
    pub(crate) fn setup_from(what: impl Into<String>, source: impl Into<BoxError>) -> Error {
        Error::Setup {
            what: what.into(),
            source: Some(source.into()),
        }
    }

    /// Bad input from the caller (an argument or a tenant name).
    pub fn is_invalid_input(&self) -> bool {
        matches!(
            self,
            Error::Store(StoreError::Invalid(_)) | Error::Tenant { .. }
        )
    }

    /// Nothing was done and the same call may succeed if made again.
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            Error::LockTimeout(_)
                | Error::DeadlinePassed
                | Error::Conflict { .. }
                | Error::Refused(Refusal::AlreadyClaimed(_))
                | Error::Sandbox(SandboxError::Busy(_))
        ) || matches!(self, Error::GroupFailed(f) if f.nothing_committed())
    }

    /// The engine declined: a refusal or a missing id.
    pub fn is_refusal(&self) -> bool {
        matches!(
            self,
            Error::Refused(_) | Error::Store(StoreError::NotFound(_))
        )
    }
}

impl From<leasehold_guest::model::ClaimError> for Error {
    fn from(e: leasehold_guest::model::ClaimError) -> Self {
        use leasehold_guest::model::ClaimError as C;
        Error::Refused(match e {
            C::NotFound(id) => Refusal::NotFound(id),
            C::Excluded(a) => Refusal::Excluded(a),
            C::WrongRole(a) => Refusal::WrongRole(a),
            C::NotPending(s) => Refusal::NotPending(s),
            C::AlreadyClaimed(h) => Refusal::AlreadyClaimed(h),
            C::NotHeld(a) => Refusal::NotHeld(a),
            C::Stale(r) => Refusal::Stale(r),
            C::Store(s) => return Error::Store(s),
        })
    }
}

impl From<StoreError> for Error {
    fn from(e: StoreError) -> Self {
        Error::Store(e)
    }
}

impl From<InvalidTenant> for Error {
    fn from(e: InvalidTenant) -> Self {
        Error::Tenant {
            name: e.name,
            why: e.why,
        }
    }
}

/// What a storage failure means to a caller. A backend's own error stays
/// the source, so a caller can still ask it (a [`PgError`](crate::PgError),
/// say) what happened.
impl From<StorageError> for Error {
    fn from(e: StorageError) -> Self {
        match e {
            StorageError::Unavailable(source)
            | StorageError::Corrupt(source)
            | StorageError::Other(source) => Error::Storage(source),
            StorageError::Busy(waited) => Error::LockTimeout(waited),
            StorageError::Conflict(source) => Error::Conflict {
                attempts: 1,
                source,
            },
            StorageError::OutcomeUnknown(source) => Error::OutcomeUnknown { source },
            StorageError::GroupFailed(failure) => Error::GroupFailed(failure),
            StorageError::ReadOnly => Error::ReadOnly { verb: "this call" },
        }
    }
}
