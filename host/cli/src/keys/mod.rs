//! Tenants' keyspaces as bare bytes, moved between databases and files:
//! opening a database as a storage backend (no engine, no component), the
//! one transaction a move writes in (`target`), copying one tenant's keys
//! into it, deleting them, the progress lines those batches print, the
//! backup file read back, the digest key, and the digest and `check` that
//! end each move.
//! The lines of an export and their digest are the host library's
//! (`leasehold_host::tenant_keys`). Nothing here reads meaning into a key or
//! a value (that is the component's; whether a copy is sound is for `check`
//! to say through the engine), and nothing writes a tenant that holds
//! anything (`delete` aside, which only deletes) or commits a move that
//! was not read through and checked whole.

pub mod backup_file;
pub mod copy;
pub mod entries;
pub mod error;
pub mod key_file;
pub mod progress;
pub mod store;
pub mod target;
pub mod verify;
