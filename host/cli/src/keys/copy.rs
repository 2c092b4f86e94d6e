//! Copying one tenant's keys onto another backend, and deleting them, a
//! batch per transaction. A copy writes only a tenant that is empty or
//! holds exactly the source's first keys (what a copy that stopped part way
//! leaves), and goes on after the last of them; keys go in order, so the
//! target's last key is where a stopped copy got to, and no marker is
//! needed. It owns that rule; it must never write a tenant that breaks it.

use std::collections::VecDeque;

use leasehold_host::storage::{Backend, Entry, Write};
use leasehold_host::tenant_keys::{Digest, hex};
use serde::Serialize;

use crate::keys::entries::{Entries, TenantWalk};
use crate::keys::error::MoveError;
use crate::keys::progress::Progress;
use crate::keys::store::commit;

/// How a tenant's copy went.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// Copied from its first key.
    Copied,
    /// An unfinished copy was found and finished.
    Resumed,
    /// The target already held the whole of it.
    AlreadyCopied,
    /// The source holds no key of the tenant.
    Empty,
}

/// What copying one tenant did.
pub struct Copied {
    pub outcome: Outcome,
    /// Keys the target held already, as the start of the source's.
    pub kept: u64,
    /// Keys written by this copy.
    pub written: u64,
    /// The source's digest, over every key it gave.
    pub source: Digest,
}

/// What the target already holds of a tenant, matched against the
/// source's first entries.
struct Start {
    /// The source's digest over the entries the target holds.
    digest: Digest,
    kept: u64,
    /// Source entries read past the target's last key, not yet written.
    pending: VecDeque<Entry>,
    source_done: bool,
}

/// Reads the target's entries of `tenant` alongside the source's: they must
/// be exactly the source's first ones (none at all, or what a copy that
/// stopped part way left), or the tenant is refused.
fn match_start(
    source: &mut dyn Entries,
    target: &dyn Backend,
    tenant: &str,
) -> Result<Start, MoveError> {
    let mut start = Start {
        digest: Digest::default(),
        kept: 0,
        pending: VecDeque::new(),
        source_done: false,
    };
    let refuse = |why: String| MoveError::NotEmpty {
        tenant: tenant.to_owned(),
        why,
    };
    let mut there = TenantWalk::new(target, tenant)?;
    loop {
        let batch = there.batch()?;
        if batch.is_empty() {
            return Ok(start);
        }
        for entry in batch {
            if start.pending.is_empty() && !start.source_done {
                start.pending.extend(source.batch()?);
                start.source_done = start.pending.is_empty();
            }
            match start.pending.pop_front() {
                Some(ours) if ours == entry => {
                    start.digest.add(&ours.0, &ours.1);
                    start.kept += 1;
                }
                Some(ours) if ours.0 == entry.0 => {
                    return Err(refuse(format!("key {} holds another value", hex(&entry.0))));
                }
                Some(_) => {
                    return Err(refuse(format!(
                        "it holds key {}, which the source does not",
                        hex(&entry.0)
                    )));
                }
                None => {
                    return Err(refuse(format!(
                        "it holds key {} past the source's last",
                        hex(&entry.0)
                    )));
                }
            }
        }
    }
}

/// Whether `tenant` may be copied onto `target`: refused as
/// [`copy_tenant`] would refuse it, before anything is written, so that a
/// copy of many tenants refuses before it writes any.
pub fn may_copy(
    source: &mut dyn Entries,
    target: &dyn Backend,
    tenant: &str,
) -> Result<(), MoveError> {
    match_start(source, target, tenant).map(|_| ())
}

/// Copies `tenant`'s entries from `source` onto `target`'s tenant of the
/// same name, a batch per transaction. A target that already holds keys is
/// written only if they are exactly the source's first keys (a copy that
/// stopped part way): then it goes on after the last of them. Keys go in
/// order, so the target's last key is where a stopped copy got to, and no
/// marker is needed.
pub fn copy_tenant(
    source: &mut dyn Entries,
    target: &dyn Backend,
    tenant: &str,
    progress: &mut Progress,
) -> Result<Copied, MoveError> {
    let Start {
        mut digest,
        kept,
        mut pending,
        source_done,
    } = match_start(source, target, tenant)?;
    let mut written = 0u64;
    let mut written_bytes = 0u64;
    loop {
        let batch: Vec<Entry> = if pending.is_empty() {
            if source_done {
                break;
            }
            source.batch()?
        } else {
            pending.drain(..).collect()
        };
        if batch.is_empty() {
            break;
        }
        let mut writes = Vec::with_capacity(batch.len());
        for entry in batch {
            digest.add(&entry.0, &entry.1);
            written += 1;
            written_bytes += (entry.0.len() + entry.1.len()) as u64;
            writes.push(Write::Put(entry.0, entry.1));
        }
        commit(target, tenant, writes)?;
        progress.batch_done("copy", tenant, written, Some(written_bytes))?;
    }
    let outcome = match (kept, written) {
        (0, 0) => Outcome::Empty,
        (0, _) => Outcome::Copied,
        (_, 0) => Outcome::AlreadyCopied,
        _ => Outcome::Resumed,
    };
    Ok(Copied {
        outcome,
        kept,
        written,
        source: digest,
    })
}

/// Deletes every key of `tenant`, a batch per transaction; answers how
/// many went.
pub fn delete_tenant(
    store: &dyn Backend,
    tenant: &str,
    progress: &mut Progress,
) -> Result<u64, MoveError> {
    let mut deleted = 0u64;
    loop {
        // Each batch reads its keys afresh: the ones before were deleted.
        let mut walk = TenantWalk::new(store, tenant)?;
        let batch = walk.batch()?;
        drop(walk);
        if batch.is_empty() {
            return Ok(deleted);
        }
        let n = batch.len() as u64;
        commit(
            store,
            tenant,
            batch.into_iter().map(|(k, _)| Write::Delete(k)).collect(),
        )?;
        deleted += n;
        progress.batch_done("delete", tenant, deleted, None)?;
    }
}
