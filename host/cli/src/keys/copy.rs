//! Writing one tenant's entries into a load (one write transaction over
//! the target, `leasehold_host::storage::Load`), and deleting a tenant's
//! keys. A copy writes only a tenant that is empty, or finds one that
//! already holds exactly the source (a copy made before) and writes
//! nothing; every entry it writes is first checked against the engine's
//! key and value limits. It owns that rule; it must never write a tenant
//! that breaks it, and never commit (its caller commits the load, or drops
//! it and nothing is written).

use std::collections::VecDeque;

use leasehold_host::storage::{Backend, Entry, Load, Write};
use leasehold_host::tenant_keys::{Digest, batch_bounds, check_entry, hex};
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
    /// The target already held the whole of it.
    AlreadyCopied,
    /// The source holds no key of the tenant.
    Empty,
}

/// What copying one tenant did.
pub struct Copied {
    pub outcome: Outcome,
    /// Keys the target held already, the whole of the source's.
    pub kept: u64,
    /// Keys written by this copy.
    pub written: u64,
    /// The source's digest, over every key it gave.
    pub source: Digest,
}

/// A tenant's entries as the load's transaction sees them, a batch at a
/// time in key order.
struct TargetWalk {
    tenant: String,
    next: Option<Vec<u8>>,
}

impl TargetWalk {
    fn new(tenant: &str) -> TargetWalk {
        TargetWalk {
            tenant: tenant.to_owned(),
            next: Some(Vec::new()),
        }
    }

    fn batch(&mut self, load: &mut dyn Load) -> Result<Vec<Entry>, MoveError> {
        let Some(start) = self.next.take() else {
            return Ok(Vec::new());
        };
        let (limit, max_bytes) = batch_bounds();
        let (entries, more) = load
            .scan(&self.tenant, &start, limit, max_bytes)
            .map_err(MoveError::storage("read", &self.tenant))?;
        match entries.last() {
            Some((last, _)) => {
                let mut after = last.clone();
                after.push(0);
                self.next = Some(after);
            }
            None if more => {
                return Err(MoveError::OverLimit {
                    tenant: self.tenant.clone(),
                    why: format!(
                        "the target holds an entry larger than a batch ({max_bytes} bytes)"
                    ),
                });
            }
            None => {}
        }
        Ok(entries)
    }
}

/// The first key of `tenant` in the load's transaction, if it holds any:
/// reading it is what holds the tenant against other writers until the
/// load ends.
pub fn first_key(load: &mut dyn Load, tenant: &str) -> Result<Option<Vec<u8>>, MoveError> {
    let (entries, more) = load
        .scan(tenant, b"", 1, batch_bounds().1)
        .map_err(MoveError::storage("read", tenant))?;
    match entries.into_iter().next() {
        Some((key, _)) => Ok(Some(key)),
        // An entry larger than a batch is still a key.
        None if more => Ok(Some(Vec::new())),
        None => Ok(None),
    }
}

/// What the target holds of a tenant, against the source.
enum Start {
    /// Nothing: the copy writes it all.
    Empty,
    /// Exactly the source's keys and values, with their digest and count.
    Whole(Digest),
}

/// Reads the target's entries of `tenant` alongside the source's: they
/// must be none at all, or exactly the source's (read to its end), or the
/// tenant is refused.
fn match_target(
    source: &mut dyn Entries,
    load: &mut dyn Load,
    tenant: &str,
) -> Result<Start, MoveError> {
    let refuse = |why: String| MoveError::NotEmpty {
        tenant: tenant.to_owned(),
        why,
    };
    let mut there = TargetWalk::new(tenant);
    let mut batch = there.batch(load)?;
    if batch.is_empty() {
        return Ok(Start::Empty);
    }
    let mut digest = Digest::default();
    let mut pending: VecDeque<Entry> = VecDeque::new();
    while !batch.is_empty() {
        for entry in batch {
            if pending.is_empty() {
                pending.extend(source.batch()?);
            }
            match pending.pop_front() {
                Some(ours) if ours == entry => digest.add(&ours.0, &ours.1),
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
        batch = there.batch(load)?;
    }
    if !pending.is_empty() || !source.batch()?.is_empty() {
        return Err(refuse(format!(
            "it holds only the source's first {} keys",
            digest.keys()
        )));
    }
    Ok(Start::Whole(digest))
}

/// Whether `tenant` may be copied into the load: refused as
/// [`copy_tenant`] would refuse it, before anything is put, so that a copy
/// of many tenants refuses before it writes any.
pub fn may_copy(
    source: &mut dyn Entries,
    load: &mut dyn Load,
    tenant: &str,
) -> Result<(), MoveError> {
    match_target(source, load, tenant).map(drop)
}

/// Puts `tenant`'s entries from `source` into the load, a batch at a time
/// (each within one call's budget), each entry first checked against the
/// engine's limits. A target tenant that already holds exactly the source
/// is left as it is; one that holds anything else is refused.
pub fn copy_tenant(
    source: &mut dyn Entries,
    load: &mut dyn Load,
    tenant: &str,
    progress: &mut Progress,
) -> Result<Copied, MoveError> {
    if let Start::Whole(digest) = match_target(source, load, tenant)? {
        return Ok(Copied {
            outcome: Outcome::AlreadyCopied,
            kept: digest.keys(),
            written: 0,
            source: digest,
        });
    }
    let mut digest = Digest::default();
    loop {
        let batch = source.batch()?;
        if batch.is_empty() {
            break;
        }
        for (key, value) in &batch {
            check_entry(key, value).map_err(|why| MoveError::OverLimit {
                tenant: tenant.to_owned(),
                why: format!("key {} has {why}", hex(key)),
            })?;
            digest.add(key, value);
        }
        load.put(tenant, &batch)
            .map_err(MoveError::storage("write", tenant))?;
        progress.batch_done("copy", tenant, digest.keys(), Some(digest.bytes()))?;
    }
    Ok(Copied {
        outcome: if digest.keys() == 0 {
            Outcome::Empty
        } else {
            Outcome::Copied
        },
        kept: 0,
        written: digest.keys(),
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
