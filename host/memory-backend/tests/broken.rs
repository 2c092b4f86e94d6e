//! Tests of the conformance kit itself: the example backend broken three
//! ways, each of which the kit must catch. A kit that passed any of these
//! would pass a backend that loses or leaks data.
//!
//! Each flaw is a wrapper around the working backend, so what breaks is the
//! one promise named, and the kit must name that check among its failures.

use std::time::Duration;

use leasehold_host::storage::{Backend, Entry, Mode, Pending, StorageError, Txn, Write};
use leasehold_host::testkit::{self, Failure};
use leasehold_memory_backend::MemoryBackend;

/// Runs `check` of the kit on the flawed backend and answers its failure.
fn caught<B: Backend>(check: &'static str, make: &dyn Fn() -> B) -> Result<(), Failure> {
    let (_, run) = testkit::kv::checks::<B>()
        .into_iter()
        .find(|(name, _)| *name == check)
        .expect("the kit has the check");
    testkit::run_one(check, run, make)
}

// ---- a scan that ignores its limit ----------------------------------------------------

struct IgnoresLimit(MemoryBackend);

struct IgnoresLimitTxn(Box<dyn Txn>);

impl Backend for IgnoresLimit {
    fn begin(&self, t: &str, m: Mode, w: Duration) -> Result<Box<dyn Txn>, StorageError> {
        Ok(Box::new(IgnoresLimitTxn(self.0.begin(t, m, w)?)))
    }
    fn concurrent_writers(&self) -> bool {
        false
    }
}

impl Txn for IgnoresLimitTxn {
    fn get(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>, StorageError> {
        self.0.get(key)
    }
    fn scan(
        &mut self,
        start: &[u8],
        end: Option<&[u8]>,
        _limit: u32,
        reverse: bool,
        max_bytes: usize,
    ) -> Result<(Vec<Entry>, bool), StorageError> {
        self.0.scan(start, end, u32::MAX, reverse, max_bytes)
    }
    fn commit(self: Box<Self>, batch: Vec<Write>) -> Result<Pending, StorageError> {
        self.0.commit(batch)
    }
}

#[test]
fn the_kit_catches_a_scan_that_ignores_its_limit() {
    let make = || IgnoresLimit(MemoryBackend::new());
    let failure = caught("scan_limits_and_bounds", &make).expect_err("the kit passed it");
    assert!(failure.what.contains("limit"), "{failure}");
}

// ---- a read that sees a batch committed after it began --------------------------------

/// Its read transactions read whatever is committed at each read, not the
/// snapshot they began on: from the reader's side, a batch that was not
/// committed when it began shows up part way through.
struct NoSnapshot(MemoryBackend);

struct NoSnapshotTxn {
    backend: MemoryBackend,
    tenant: String,
}

impl NoSnapshotTxn {
    fn now(&self) -> Result<Box<dyn Txn>, StorageError> {
        self.backend
            .begin(&self.tenant, Mode::Read, Duration::from_secs(1))
    }
}

impl Backend for NoSnapshot {
    fn begin(&self, t: &str, m: Mode, w: Duration) -> Result<Box<dyn Txn>, StorageError> {
        match m {
            Mode::Write => self.0.begin(t, m, w),
            Mode::Read => Ok(Box::new(NoSnapshotTxn {
                backend: self.0.clone(),
                tenant: t.to_owned(),
            })),
        }
    }
    fn concurrent_writers(&self) -> bool {
        false
    }
}

impl Txn for NoSnapshotTxn {
    fn get(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>, StorageError> {
        self.now()?.get(key)
    }
    fn scan(
        &mut self,
        start: &[u8],
        end: Option<&[u8]>,
        limit: u32,
        reverse: bool,
        max_bytes: usize,
    ) -> Result<(Vec<Entry>, bool), StorageError> {
        self.now()?.scan(start, end, limit, reverse, max_bytes)
    }
    fn commit(self: Box<Self>, batch: Vec<Write>) -> Result<Pending, StorageError> {
        self.now()?.commit(batch)
    }
}

#[test]
fn the_kit_catches_a_read_that_sees_a_batch_committed_after_it_began() {
    let make = || NoSnapshot(MemoryBackend::new());
    let failure = caught("reads_see_one_snapshot", &make).expect_err("the kit passed it");
    assert!(failure.what.contains("after it began"), "{failure}");
    caught("batches_are_all_or_nothing", &make).expect_err("the kit passed it");
}

// ---- a tenant prefix that leaks -------------------------------------------------------

/// Keeps every tenant in one tenant of the store underneath, each key the
/// tenant's name joined to the key: tenant `a`'s key `b1` is tenant `ab`'s
/// key `1`, and a scan of `a` to its end runs on into `ab`.
struct JoinedNames(MemoryBackend);

struct JoinedNamesTxn {
    inner: Box<dyn Txn>,
    prefix: Vec<u8>,
}

impl JoinedNamesTxn {
    fn key(&self, key: &[u8]) -> Vec<u8> {
        [self.prefix.as_slice(), key].concat()
    }
}

impl Backend for JoinedNames {
    fn begin(&self, t: &str, m: Mode, w: Duration) -> Result<Box<dyn Txn>, StorageError> {
        Ok(Box::new(JoinedNamesTxn {
            inner: self.0.begin("all", m, w)?,
            prefix: t.as_bytes().to_vec(),
        }))
    }
    fn concurrent_writers(&self) -> bool {
        false
    }
}

impl Txn for JoinedNamesTxn {
    fn get(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>, StorageError> {
        let k = self.key(key);
        self.inner.get(&k)
    }
    fn scan(
        &mut self,
        start: &[u8],
        end: Option<&[u8]>,
        limit: u32,
        reverse: bool,
        max_bytes: usize,
    ) -> Result<(Vec<Entry>, bool), StorageError> {
        let start = self.key(start);
        let end = end.map(|e| self.key(e));
        let (entries, over) = self
            .inner
            .scan(&start, end.as_deref(), limit, reverse, max_bytes)?;
        let strip = self.prefix.len();
        let entries = entries
            .into_iter()
            .filter(|(k, _)| k.len() >= strip)
            .map(|(k, v)| (k[strip..].to_vec(), v))
            .collect();
        Ok((entries, over))
    }
    fn commit(self: Box<Self>, batch: Vec<Write>) -> Result<Pending, StorageError> {
        let batch = batch
            .into_iter()
            .map(|w| match w {
                Write::Put(k, v) => Write::Put(self.key(&k), v),
                Write::Delete(k) => Write::Delete(self.key(&k)),
            })
            .collect();
        self.inner.commit(batch)
    }
}

#[test]
fn the_kit_catches_a_tenant_prefix_that_leaks() {
    let make = || JoinedNames(MemoryBackend::new());
    let failure = caught("tenants_are_apart", &make).expect_err("the kit passed it");
    assert!(failure.what.contains("tenant"), "{failure}");
}

/// Run whole, the kit names each flaw's check among its failures, and
/// passes the working backend.
#[test]
fn the_whole_kit_names_each_flaw() {
    let names = |failures: Vec<Failure>| -> Vec<&'static str> {
        failures.into_iter().map(|f| f.check).collect()
    };
    let all = names(testkit::run_all(&|| IgnoresLimit(MemoryBackend::new())));
    assert!(all.contains(&"scan_limits_and_bounds"), "{all:?}");
    let all = names(testkit::run_all(&|| NoSnapshot(MemoryBackend::new())));
    assert!(all.contains(&"reads_see_one_snapshot"), "{all:?}");
    let all = names(testkit::run_all(&|| JoinedNames(MemoryBackend::new())));
    assert!(all.contains(&"tenants_are_apart"), "{all:?}");
    let none = testkit::run_all(&MemoryBackend::new);
    assert!(none.is_empty(), "{none:?}");
}
