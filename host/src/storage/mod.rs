//! Storage behind the component's `kv` import, independent of the WIT
//! bindings: the public trait a backend implements ([`Backend`], [`Txn`]),
//! its error ([`StorageError`]), the optional durability capability
//! ([`Pending`], [`CommitStats`]), and the two backends that ship (redb and
//! PostgreSQL). This file only names the parts; each lives in its own
//! module, which imports its siblings directly and never this file.
//!
//! A third party's backend uses exactly what is public here, as the
//! shipped ones do; the engine reaches every backend only through the
//! trait (`EngineBuilder::backend`).

pub(crate) mod backend;
pub(crate) mod commit;
pub(crate) mod error;
pub mod file;
pub(crate) mod group;
pub(crate) mod overlay;
pub mod postgres;
pub mod redb;
pub(crate) mod tenant_name;

pub use backend::{
    Backend, Entry, Heard, HeardHook, Load, Mode, ScanRange, Txn, Write, entries_bytes,
    scan_one_by_one, take_within,
};
pub use commit::{CommitStats, Pending};
pub use error::{BoxError, CommitHung, GroupFailure, StorageError};
pub use tenant_name::{InvalidTenant, MAX_TENANT_BYTES, check_tenant};
