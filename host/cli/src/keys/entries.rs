//! Where a tenant's entries come from, a batch at a time in key order: a
//! walk of one tenant of a database, in one snapshot, or an export's lines
//! read back (a whole file, or one tenant's part of a backup), every line
//! checked by `leasehold_host::tenant_keys::Reader` (its bounds, its digest
//! or keyed seal). Batches stay within one call's budget, so no batch is
//! larger than a call may write. It must never write.

use std::io::BufRead;
use std::time::Duration;

use leasehold_host::Limits;
use leasehold_host::storage::{Backend, Entry, Mode};
use leasehold_host::tenant_keys::{
    self, Digest, DigestKey, LineReader, Reader, Walk, batch_bounds,
};

use crate::keys::error::MoveError;

/// How long one walk's read transaction may last: a walk reads a whole
/// tenant in one snapshot, however large, so it is not held to a call's
/// deadline.
const WALK_DEADLINE: Duration = Duration::from_secs(24 * 3600);

/// Where a tenant's entries come from, a batch at a time in key order; an
/// empty batch means there are no more.
pub trait Entries {
    fn batch(&mut self) -> Result<Vec<Entry>, MoveError>;
}

/// One tenant's entries in key order, read in one snapshot.
pub struct TenantWalk {
    walk: Walk,
    tenant: String,
}

impl TenantWalk {
    pub fn new(store: &dyn Backend, tenant: &str) -> Result<TenantWalk, MoveError> {
        let txn = store
            .begin_with_deadline(
                tenant,
                Mode::Read,
                Limits::default().lock_wait,
                WALK_DEADLINE,
            )
            .map_err(MoveError::storage("read", tenant))?;
        Ok(TenantWalk {
            walk: Walk::new(txn),
            tenant: tenant.to_owned(),
        })
    }

    /// Writes the rest of the walk as the tenant's export lines to `out`
    /// (keyed with `key`, if given), naming `what` is written if it fails;
    /// answers their digest.
    pub fn export(
        mut self,
        out: &mut dyn std::io::Write,
        what: &str,
        key: Option<&DigestKey>,
    ) -> Result<Digest, MoveError> {
        tenant_keys::write_tenant(&mut self.walk, &self.tenant, out, key)
            .map_err(MoveError::walking(&self.tenant, what))
    }
}

impl Entries for TenantWalk {
    fn batch(&mut self) -> Result<Vec<Entry>, MoveError> {
        self.walk
            .batch()
            .map_err(MoveError::walking(&self.tenant, "the export"))
    }
}

/// An export file read back, a batch at a time.
pub struct ExportReader {
    reader: Reader<Box<dyn BufRead>>,
    path: String,
}

impl ExportReader {
    /// A whole export, from `input`, called `path` in messages; keyed with
    /// `key` if one is given, plain otherwise.
    pub fn new(
        input: Box<dyn BufRead>,
        path: &str,
        key: Option<&DigestKey>,
    ) -> Result<ExportReader, MoveError> {
        Ok(ExportReader {
            reader: Reader::new(input, key).map_err(MoveError::reading(path))?,
            path: path.to_owned(),
        })
    }

    /// One tenant's part of a backup, read from `lines` on; its reader
    /// gives the lines back with [`ExportReader::rest`] once it ended.
    pub fn section(
        lines: LineReader<Box<dyn BufRead>>,
        path: &str,
        key: Option<&DigestKey>,
    ) -> Result<ExportReader, MoveError> {
        Ok(ExportReader {
            reader: Reader::section(lines, key).map_err(MoveError::reading(path))?,
            path: path.to_owned(),
        })
    }

    /// The tenant the file says it holds.
    pub fn tenant(&self) -> &str {
        self.reader.tenant()
    }

    /// The count, bytes and digest of the entries read so far.
    pub fn digest(&self) -> &Digest {
        self.reader.digest()
    }

    /// Whether the last line was read, and matched.
    pub fn ended(&self) -> bool {
        self.reader.ended()
    }

    /// The lines after this section's last one.
    pub fn rest(self) -> LineReader<Box<dyn BufRead>> {
        self.reader.into_rest()
    }
}

impl Entries for ExportReader {
    fn batch(&mut self) -> Result<Vec<Entry>, MoveError> {
        let (limit, max_bytes) = batch_bounds();
        let mut out = Vec::new();
        let mut bytes = 0usize;
        // Stops at half the budget, so that the entry that crosses it (one
        // value at most the engine's limit) still leaves the batch within.
        while out.len() < limit as usize && bytes < max_bytes / 2 {
            let next = self
                .reader
                .next_entry()
                .map_err(MoveError::reading(&self.path))?;
            let Some(entry) = next else { break };
            bytes += entry.0.len() + entry.1.len();
            out.push(entry);
        }
        Ok(out)
    }
}
