//! Tenants' keyspaces as bare bytes, moved between databases and files:
//! opening a database as a storage backend (no engine, no component),
//! copying one tenant's keys onto another backend in batches that can be
//! resumed, deleting them, the progress lines those batches print, the
//! backup file read back, and the digest and `check` that end each move.
//! The lines of an export and their digest are the host library's
//! (`leasehold_host::tenant_keys`). Nothing here reads meaning into a key or
//! a value (that is the component's; whether a copy is sound is for `check`
//! to say through the engine), and nothing writes a tenant that holds
//! anything but a part of what it copies (`delete` aside, which only
//! deletes).

pub mod backup_file;
pub mod copy;
pub mod entries;
pub mod error;
pub mod progress;
pub mod store;
pub mod verify;
