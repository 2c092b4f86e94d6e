//! Why a tenant's keys could not be walked, written or read back: one enum
//! for the whole tenant-keys boundary, with the storage's or the file's own
//! error kept as the source. It owns these words only; it must never read
//! or write anything.

use std::io;

use crate::storage::error::{BoxError, StorageError};

/// Why keys could not be walked, written or read back.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum KeysError {
    /// The snapshot could not be read.
    #[error("cannot read the tenant's keys")]
    Storage(#[source] StorageError),
    /// One entry is larger than a batch may hold; the engine never writes
    /// one (its key and value limits are far below a batch).
    #[error("the tenant holds an entry larger than a batch ({max_bytes} bytes)")]
    TooLarge {
        /// The most bytes of keys and values a batch holds.
        max_bytes: usize,
    },
    /// An entry over the engine's key or value limit, which no call could
    /// have written and no reader of the format takes back.
    #[error("{0}")]
    OverLimit(String),
    /// Writing or reading the lines failed.
    #[error("cannot write or read the lines")]
    Io(#[source] io::Error),
    /// A line that is not what the format says belongs there: the file is
    /// not one, or is damaged, cut short, over a bound, or (for a keyed
    /// file) not sealed with the key given.
    #[error("line {line}: {why}")]
    BadLine {
        /// The line's number, counted from 1 at the input's first line.
        line: u64,
        /// What is wrong with it.
        why: String,
    },
    /// A backup the format cannot hold: a tenant named twice, or a name
    /// that is no tenant's.
    #[error("{0}")]
    Refused(String),
    /// A tenant's read snapshot could not be begun.
    #[error("cannot begin a snapshot of tenant {tenant}")]
    Snapshot {
        /// The tenant.
        tenant: String,
        /// Why.
        #[source]
        source: BoxError,
    },
    /// A digest key that is too short to authenticate anything.
    #[error("{0}")]
    BadKey(String),
}
