//! The `kv` import over redb, seen from one call: one transaction, one
//! tenant's slice of one table, and the caps on what the guest may ask.
//!
//! Every guest key is stored behind the tenant's prefix (its length, then its
//! name, so tenant `a` can never alias tenant `ab`), and every scan is clamped
//! to that prefix: no key the guest can spell reaches another tenant. Sizes the
//! guest controls are checked before they are used. A cap hit or a storage
//! failure is recorded here and fails the call whatever the guest answers
//! afterwards, so a guest cannot swallow it and commit.

use leasehold_guest::kv::{Entry, Kv, KvError};
use redb::{ReadableTable, TableDefinition};

use crate::bindings::kv;
use redb::ReadableDatabase;

use crate::engine::{Durability, Limits, Mode};
use crate::error::{Error, SandboxError};

/// The name of the one redb table: tenant-prefixed guest keys to guest values.
pub const KV_TABLE_NAME: &str = "leasehold-kv";

pub(crate) const KV_TABLE: TableDefinition<&[u8], &[u8]> = TableDefinition::new(KV_TABLE_NAME);

/// The longest tenant name; keeps the prefix one length byte.
pub const MAX_TENANT_BYTES: usize = 64;

/// Checks a tenant name and answers its key prefix: every key of the tenant
/// starts with it.
pub fn tenant_prefix(name: &str) -> Result<Vec<u8>, Error> {
    let why = if name.is_empty() {
        Some("it is empty")
    } else if name.len() > MAX_TENANT_BYTES {
        Some("it is longer than 64 bytes")
    } else if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
    {
        Some("use only ASCII letters, digits, '-', '_' and '.'")
    } else {
        None
    };
    if let Some(why) = why {
        return Err(Error::Tenant {
            name: name.to_owned(),
            why,
        });
    }
    let mut prefix = Vec::with_capacity(name.len() + 1);
    prefix.push(name.len() as u8);
    prefix.extend_from_slice(name.as_bytes());
    Ok(prefix)
}

/// The exclusive end of every key that starts with `prefix`. Tenant names are
/// ASCII, so the last byte can always be incremented.
pub(crate) fn prefix_end(prefix: &[u8]) -> Vec<u8> {
    let mut end = prefix.to_vec();
    if let Some(last) = end.last_mut() {
        *last += 1;
    }
    end
}

/// The transaction a call runs in. One per call, moved once: the size of the
/// write variant does not matter.
#[allow(clippy::large_enum_variant)]
enum Txn {
    /// Not begun yet (the instance is made first, outside the write lock).
    Idle,
    Write(redb::WriteTransaction),
    Read(redb::ReadOnlyTable<&'static [u8], &'static [u8]>),
}

/// What one call's guest sees of storage.
pub(crate) struct KvView {
    txn: Txn,
    prefix: Vec<u8>,
    prefix_end: Vec<u8>,
    limits: Limits,
    /// The first host-side failure of this call; it decides the outcome.
    pub(crate) violation: Option<Error>,
}

impl KvView {
    pub(crate) fn new(prefix: &[u8], limits: Limits) -> Self {
        KvView {
            txn: Txn::Idle,
            prefix: prefix.to_vec(),
            prefix_end: prefix_end(prefix),
            limits,
            violation: None,
        }
    }

    /// Begins the call's one transaction.
    pub(crate) fn begin(
        &mut self,
        db: &redb::Database,
        mode: Mode,
        durability: Durability,
    ) -> Result<(), Error> {
        self.txn = match mode {
            Mode::Write => {
                let mut w = db.begin_write()?;
                if durability == Durability::None {
                    w.set_durability(redb::Durability::None)?;
                }
                Txn::Write(w)
            }
            Mode::Read => Txn::Read(db.begin_read()?.open_table(KV_TABLE)?),
        };
        Ok(())
    }

    /// Moves the call's transaction and outcome out, leaving an idle view
    /// behind (the store that held it is about to be torn down).
    pub(crate) fn take(&mut self) -> KvView {
        std::mem::replace(
            self,
            KvView {
                txn: Txn::Idle,
                prefix: Vec::new(),
                prefix_end: Vec::new(),
                limits: self.limits,
                violation: None,
            },
        )
    }

    /// Ends the call: commits when `commit` and nothing failed on the host's
    /// side, aborts otherwise. A recorded violation is the call's outcome.
    pub(crate) fn finish(self, commit: bool) -> Result<(), Error> {
        let Txn::Write(w) = self.txn else {
            return self.violation.map_or(Ok(()), Err);
        };
        match self.violation {
            Some(v) => {
                // Dropping would abort too; saying so keeps the intent plain.
                let _ = w.abort();
                Err(v)
            }
            None if commit => Ok(w.commit()?),
            None => Ok(w.abort()?),
        }
    }

    fn fail(&mut self, e: Error) {
        self.violation.get_or_insert(e);
    }

    fn full_key(&mut self, key: &[u8]) -> Result<Vec<u8>, KvError> {
        if key.len() > self.limits.key_bytes {
            self.fail(Error::Sandbox(SandboxError::KeySize {
                size: key.len(),
                cap: self.limits.key_bytes,
            }));
            return Err(KvError::TooLarge);
        }
        let mut full = Vec::with_capacity(self.prefix.len() + key.len());
        full.extend_from_slice(&self.prefix);
        full.extend_from_slice(key);
        Ok(full)
    }

    fn storage<E: std::fmt::Display>(&mut self, e: E) -> KvError {
        let detail = e.to_string();
        self.fail(Error::Storage(detail.clone()));
        KvError::Storage(detail)
    }
}

impl Kv for KvView {
    fn get(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>, KvError> {
        let full = self.full_key(key)?;
        let found = match &self.txn {
            Txn::Write(w) => w
                .open_table(KV_TABLE)
                .map_err(redb::Error::from)
                .and_then(|t| Ok(t.get(full.as_slice())?.map(|v| v.value().to_vec()))),
            Txn::Read(t) => t
                .get(full.as_slice())
                .map(|v| v.map(|v| v.value().to_vec()))
                .map_err(redb::Error::from),
            Txn::Idle => return Err(self.storage("no transaction")),
        };
        found.map_err(|e| self.storage(e))
    }

    fn set(&mut self, key: &[u8], value: &[u8]) -> Result<(), KvError> {
        let full = self.full_key(key)?;
        if value.len() > self.limits.value_bytes {
            self.fail(Error::Sandbox(SandboxError::ValueSize {
                size: value.len(),
                cap: self.limits.value_bytes,
            }));
            return Err(KvError::TooLarge);
        }
        let Txn::Write(w) = &self.txn else {
            return Err(KvError::ReadOnly);
        };
        let done = w
            .open_table(KV_TABLE)
            .map_err(redb::Error::from)
            .and_then(|mut t| {
                t.insert(full.as_slice(), value)
                    .map(drop)
                    .map_err(redb::Error::from)
            });
        done.map_err(|e| self.storage(e))
    }

    fn delete(&mut self, key: &[u8]) -> Result<(), KvError> {
        let full = self.full_key(key)?;
        let Txn::Write(w) = &self.txn else {
            return Err(KvError::ReadOnly);
        };
        let done = w
            .open_table(KV_TABLE)
            .map_err(redb::Error::from)
            .and_then(|mut t| {
                t.remove(full.as_slice())
                    .map(drop)
                    .map_err(redb::Error::from)
            });
        done.map_err(|e| self.storage(e))
    }

    fn scan(
        &mut self,
        start: &[u8],
        end: Option<&[u8]>,
        limit: u32,
        reverse: bool,
    ) -> Result<Vec<Entry>, KvError> {
        if limit > self.limits.scan_entries {
            self.fail(Error::Sandbox(SandboxError::ScanLength {
                asked: limit,
                cap: self.limits.scan_entries,
            }));
            return Err(KvError::Limit);
        }
        let start = self.full_key(start)?;
        // Clamped to the tenant: an end past the prefix, or none, stops at it.
        let end = match end {
            Some(e) => self.full_key(e)?.min(self.prefix_end.clone()),
            None => self.prefix_end.clone(),
        };
        if start >= end || limit == 0 {
            return Ok(Vec::new());
        }
        let strip = self.prefix.len();
        let collect = |iter: redb::Range<'_, &'static [u8], &'static [u8]>| {
            let take = |it: &mut dyn Iterator<Item = _>| -> Result<Vec<Entry>, redb::StorageError> {
                let mut out = Vec::new();
                for item in it.take(limit as usize) {
                    let (k, v): (redb::AccessGuard<&[u8]>, redb::AccessGuard<&[u8]>) = item?;
                    out.push((k.value()[strip..].to_vec(), v.value().to_vec()));
                }
                Ok(out)
            };
            if reverse {
                take(&mut iter.rev())
            } else {
                take(&mut { iter })
            }
        };
        let bounds = start.as_slice()..end.as_slice();
        let found = match &self.txn {
            Txn::Write(w) => w
                .open_table(KV_TABLE)
                .map_err(redb::Error::from)
                .and_then(|t| Ok(collect(t.range(bounds)?)?)),
            Txn::Read(t) => t
                .range(bounds)
                .map_err(redb::Error::from)
                .and_then(|r| Ok(collect(r)?)),
            Txn::Idle => return Err(self.storage("no transaction")),
        };
        found.map_err(|e| self.storage(e))
    }
}

/// The WIT import is the same store: a failure the guest can see is the inner
/// error; nothing here traps (a violation already fails the call).
impl kv::Host for KvView {
    fn get(&mut self, key: Vec<u8>) -> wasmtime::Result<Result<Option<Vec<u8>>, kv::KvError>> {
        Ok(Kv::get(self, &key).map_err(to_wit))
    }

    fn set(&mut self, key: Vec<u8>, value: Vec<u8>) -> wasmtime::Result<Result<(), kv::KvError>> {
        Ok(Kv::set(self, &key, &value).map_err(to_wit))
    }

    fn delete(&mut self, key: Vec<u8>) -> wasmtime::Result<Result<(), kv::KvError>> {
        Ok(Kv::delete(self, &key).map_err(to_wit))
    }

    fn scan(
        &mut self,
        range: kv::KeyRange,
        limit: u32,
        reverse: bool,
    ) -> wasmtime::Result<Result<Vec<kv::Entry>, kv::KvError>> {
        let found = Kv::scan(self, &range.start, range.end.as_deref(), limit, reverse);
        Ok(found
            .map(|entries| {
                entries
                    .into_iter()
                    .map(|(key, value)| kv::Entry { key, value })
                    .collect()
            })
            .map_err(to_wit))
    }
}

fn to_wit(e: KvError) -> kv::KvError {
    match e {
        KvError::ReadOnly => kv::KvError::ReadOnly,
        KvError::TooLarge => kv::KvError::TooLarge,
        KvError::Limit => kv::KvError::Limit,
        KvError::Storage(d) => kv::KvError::Storage(d),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tenant_prefixes_never_alias() {
        let a = tenant_prefix("a").expect("valid");
        let ab = tenant_prefix("ab").expect("valid");
        assert!(
            !ab.starts_with(&a),
            "tenant ab's keys would fall in tenant a's range"
        );
        let end = prefix_end(&a);
        assert!(ab.as_slice() >= end.as_slice() || ab.as_slice() < a.as_slice());
    }

    #[test]
    fn tenant_names_are_checked() {
        for bad in ["", "has space", "slash/", "é", &"x".repeat(65)] {
            assert!(
                matches!(tenant_prefix(bad), Err(Error::Tenant { .. })),
                "{bad:?} accepted"
            );
        }
        for good in ["acme", "a.b-c_d", &"x".repeat(64)] {
            assert!(tenant_prefix(good).is_ok(), "{good:?} refused");
        }
    }
}
