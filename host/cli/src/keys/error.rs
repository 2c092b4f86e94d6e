//! Why a move of keys (copy, export, import, delete, backup, restore) did
//! not happen, or did not finish, and the exit code and `--json` name each
//! earns. It must never print.

use leasehold_host::storage::StorageError;
use leasehold_host::tenant_keys::KeysError;

use crate::exit::{BAD_INPUT, BUSY, FAILED, REFUSED};

/// The test-only hook: a copy (or import, or restore) that has put this
/// many batches into its transaction stops there and exits non-zero, as a
/// killed one would, so that a test can see it left nothing. Never set it
/// in production.
pub const STOP_AFTER_ENV: &str = "LEASEHOLD_COPY_STOP_AFTER_BATCHES";

/// The test-only hook: once a copy (or import, or restore) has put its
/// first batch into its transaction, it opens the named pipe this names
/// and reads it to its end before it goes on, so that a test can act while
/// the target is held. Never set it in production.
pub const HOLD_ENV: &str = "LEASEHOLD_COPY_HOLD_FIFO";

/// Test-only: with [`HOLD_ENV`], the hold waits for the first batch of
/// this tenant of the run (counted from 1), not the run's first batch, so
/// a test can stop a move with earlier tenants' keys already written.
/// Never set it in production.
pub const HOLD_FROM_ENV: &str = "LEASEHOLD_COPY_HOLD_FROM_TENANT";

#[derive(Debug, thiserror::Error)]
pub enum MoveError {
    /// The database could not be opened.
    #[error("cannot open {db}")]
    Open {
        db: String,
        #[source]
        source: Box<leasehold_host::Error>,
    },
    /// A read or a write of the keys failed.
    #[error("cannot {what} tenant {tenant}")]
    Storage {
        what: &'static str,
        tenant: String,
        #[source]
        source: StorageError,
    },
    /// The target tenant holds keys, and they are not exactly the source's
    /// (a copy already made), so writing would mix two tenants.
    #[error(
        "the target's tenant {tenant} is not empty and is not exactly the source ({why}); \
         nothing was written to it (`leasehold tenant delete` empties it)"
    )]
    NotEmpty { tenant: String, why: String },
    /// An entry over the engine's key or value limit: no call could have
    /// written it, and nothing of the move was written.
    #[error("tenant {tenant}: {why}; nothing was written")]
    OverLimit { tenant: String, why: String },
    /// The one transaction that writes the move did not commit.
    #[error("cannot commit the keys into {db}")]
    Commit {
        db: String,
        #[source]
        source: StorageError,
    },
    /// The source cannot list its tenants and none were named.
    #[error("{db} cannot list its tenants; name them with --tenant")]
    Unlisted { db: String },
    /// What the caller asked makes no sense.
    #[error("{0}")]
    Usage(String),
    /// An export file that is not one, or is damaged or cut short.
    #[error("{path}, line {line}: {why}")]
    BadFile {
        path: String,
        line: u64,
        why: String,
    },
    /// Reading or writing a file failed.
    #[error("cannot {what}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
    /// The server refused the backup, or failed before streaming it.
    #[error("the server answered {status}: {detail}")]
    Server { status: u16, detail: String },
    /// The test-only hook stopped the copy.
    #[error("stopped after {0} batches, as {STOP_AFTER_ENV} asked (a test's hook)")]
    Stopped(u64),
    /// The engine, run over the target for its `check`, failed.
    #[error("cannot check tenant {tenant}")]
    Check {
        tenant: String,
        #[source]
        source: Box<leasehold_host::Error>,
    },
}

impl MoveError {
    /// The exit code: 1 refused, 2 bad usage or input, 3 failed, 4 busy.
    pub fn exit_code(&self) -> u8 {
        match self {
            MoveError::NotEmpty { .. } => REFUSED,
            MoveError::Server { status, .. } => match status {
                401 | 403 => REFUSED,
                400..=499 => BAD_INPUT,
                503 => BUSY,
                _ => FAILED,
            },
            MoveError::Unlisted { .. }
            | MoveError::Usage(_)
            | MoveError::BadFile { .. }
            | MoveError::OverLimit { .. } => BAD_INPUT,
            MoveError::Storage { source, .. } | MoveError::Commit { source, .. }
                if source.is_retryable() =>
            {
                BUSY
            }
            MoveError::Open { source, .. } => match source.as_ref() {
                leasehold_host::Error::Open(leasehold_host::OpenError::Missing { .. }) => BAD_INPUT,
                leasehold_host::Error::Open(leasehold_host::OpenError::Busy { .. }) => BUSY,
                _ => FAILED,
            },
            _ => FAILED,
        }
    }

    /// A stable name for `--json`, and what it is about.
    pub fn kind(&self) -> (&'static str, Option<&str>) {
        match self {
            MoveError::Open { db, .. } => ("cannot_open", Some(db)),
            MoveError::Storage { tenant, .. } => ("storage", Some(tenant)),
            MoveError::NotEmpty { tenant, .. } => ("not_empty", Some(tenant)),
            MoveError::Unlisted { db } => ("cannot_list", Some(db)),
            MoveError::OverLimit { tenant, .. } => ("too_large", Some(tenant)),
            MoveError::Commit { db, .. } => ("commit", Some(db)),
            MoveError::Usage(_) => ("usage", None),
            MoveError::BadFile { path, .. } => ("bad_file", Some(path)),
            MoveError::Io { .. } => ("io", None),
            MoveError::Stopped(_) => ("stopped", None),
            MoveError::Server { .. } => ("server", None),
            MoveError::Check { tenant, .. } => ("check", Some(tenant)),
        }
    }

    /// A read or write of `tenant`'s keys that failed.
    pub fn storage(what: &'static str, tenant: &str) -> impl FnOnce(StorageError) -> MoveError {
        move |source| MoveError::Storage {
            what,
            tenant: tenant.to_owned(),
            source,
        }
    }

    /// Walking `tenant`'s keys, or writing them as lines to `writing`,
    /// failed.
    pub fn walking(tenant: &str, writing: &str) -> impl FnOnce(KeysError) -> MoveError {
        move |e| match e {
            KeysError::Storage(source) => MoveError::Storage {
                what: "read",
                tenant: tenant.to_owned(),
                source,
            },
            KeysError::TooLarge { max_bytes } => MoveError::OverLimit {
                tenant: tenant.to_owned(),
                why: format!("it holds an entry larger than a batch ({max_bytes} bytes)"),
            },
            KeysError::OverLimit(why) => MoveError::OverLimit {
                tenant: tenant.to_owned(),
                why: format!("it holds {why}"),
            },
            KeysError::Io(source) => MoveError::Io {
                what: format!("write {writing}"),
                source,
            },
            other => MoveError::Io {
                what: format!("write {writing}"),
                source: std::io::Error::other(other),
            },
        }
    }

    /// Reading the lines of the file at `path` failed.
    pub fn reading(path: &str) -> impl FnOnce(KeysError) -> MoveError {
        move |e| match e {
            KeysError::BadLine { line, why } => MoveError::BadFile {
                path: path.to_owned(),
                line,
                why,
            },
            KeysError::Io(source) => MoveError::Io {
                what: format!("read {path}"),
                source,
            },
            KeysError::Refused(why) | KeysError::BadKey(why) => {
                MoveError::Usage(format!("{path}: {why}"))
            }
            other => MoveError::Io {
                what: format!("read {path}"),
                source: std::io::Error::other(other),
            },
        }
    }
}
