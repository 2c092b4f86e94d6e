//! One tenant's keys as bare bytes, and the tenant-keys format they travel
//! in: walking a tenant's keys in key order from a read snapshot, their
//! digest (and, keyed, their seal), the format's lines with their writer
//! and reader, and the backup that holds one such part per tenant.
//! `leasehold tenant export` and `tenant import` write and read it whole;
//! a backup (`GET /backup`, `leasehold backup` and `restore`) holds one
//! part per tenant. Nothing here reads meaning into a key or a value (that
//! is the component's), begins or commits a transaction (its callers hand
//! it a snapshot and write what it reads), or opens a database. This file
//! only names the parts; each lives in its own module, which imports its
//! siblings directly and never this file.
//!
//! The format (docs/operations.md, "Moving between backends") is JSON lines:
//!
//! ```text
//! {"format":"leasehold-tenant-keys","version":1,"tenant":"acme"}
//! {"key":"<hex>","value":"<hex>"}            one line per key, keys rising
//! {"end":{"keys":2,"bytes":41,"sha256":"<hex>"}}
//! ```
//!
//! The digest of a keyspace is SHA-256 over every entry in key order, each
//! as the key's length (4 bytes, big-endian), the key, the value's length
//! and the value: equal digests mean the same keys holding the same values.
//! The last line carries the count, the bytes of keys and values, and the
//! digest of the lines before it, so a file cut short or changed is refused.
//!
//! Keyed with an operator's secret, the first line is version 2 and names
//! its digest (`"digest":"hmac-sha256"`), and the last line carries
//! `"hmac_sha256"`: HMAC-SHA256 under the key over every byte of the lines
//! before it, so only a holder of the key can have written the file.
//!
//! Bounds (`bounds`): every entry within the engine's key and value limits
//! (those a call's writes are held to), and every line within the largest
//! entry's line; a reader refuses past either, having read no more of a
//! long line than the bound.

mod backup;
mod bounds;
mod digest;
mod error;
mod export;
mod lines;
mod walk;

pub use backup::{
    BACKUP_FORMAT, BACKUP_VERSION, BACKUP_VERSION_NAMED, BackupEnd, BackupHeader, BackupTotals,
    BackupWriter, PER_TENANT, Snapshot, write_backup,
};
pub use bounds::{LINE_OVERHEAD, batch_bounds, check_entry, entry_bounds, max_line_bytes};
pub use digest::{Digest, DigestKey, Seal, hex, unhex};
pub use error::KeysError;
pub use export::{
    FORMAT, HMAC_SHA256, Header, Reader, SHA256, Summary, VERSION, VERSION_NAMED, Writer,
    write_tenant,
};
pub use lines::{Line, LineReader};
pub use walk::Walk;
