//! The same rules compiled natively: the guest's domain code called directly
//! over the same storage backend and the same write buffer, one transaction
//! per call, with no component, no instance and no boundary. It must never
//! be used to serve calls: only the benchmark builds it.
//!
//! This is not the product (it has no sandbox: no deadline, no memory cap, no
//! isolation from a faulty rule); it exists so the benchmark can say what the
//! sandbox costs, against the same code over the same storage.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use leasehold_guest::kv::{self, Entry, Kv, KvError, ScanRequest, Snapshot};

use crate::config::{Durability, Limits};
use crate::error::Error;
use crate::storage::backend::{Backend, Mode, ScanRange, Txn};
use crate::storage::error::StorageError;
use crate::storage::file::Access;
use crate::storage::redb::{GroupCommit, RedbBackend};
use crate::storage::tenant_name::check_tenant;

/// A database run by the native build of the rules.
#[derive(Clone)]
pub struct NativeEngine {
    backend: Arc<RedbBackend>,
}

impl std::fmt::Debug for NativeEngine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NativeEngine").finish_non_exhaustive()
    }
}

impl NativeEngine {
    /// Opens (or creates) a redb database file, as [`Engine::open`](crate::Engine::open) does.
    pub fn open(path: impl AsRef<Path>, durability: Durability) -> Result<Self, Error> {
        Ok(NativeEngine {
            backend: Arc::new(RedbBackend::open(
                path.as_ref(),
                durability,
                Access::Write,
                Duration::ZERO,
                GroupCommit::new(true, &Limits::default()),
            )?),
        })
    }

    /// A handle on one tenant, as [`Engine::tenant`](crate::Engine::tenant).
    pub fn tenant(&self, name: &str) -> Result<NativeTenant, Error> {
        check_tenant(name)?;
        Ok(NativeTenant {
            engine: self.clone(),
            name: name.to_owned(),
        })
    }
}

/// One tenant of a [`NativeEngine`].
#[derive(Clone, Debug)]
pub struct NativeTenant {
    engine: NativeEngine,
    name: String,
}

/// A backend transaction as the snapshot under the guest's buffer.
struct TxnSnapshot<'a> {
    txn: &'a mut dyn Txn,
    concurrent_writers: bool,
}

fn kv_error(e: StorageError) -> KvError {
    KvError::Storage(e.to_string())
}

impl Snapshot for TxnSnapshot<'_> {
    fn concurrent_writers(&mut self) -> bool {
        self.concurrent_writers
    }

    fn writer_slot(&mut self) -> u32 {
        self.txn.writer_slot()
    }

    fn call_time(&mut self) -> i64 {
        crate::clock::Clock::now(&crate::clock::SystemClock)
    }

    fn get(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>, KvError> {
        self.txn.get(key).map_err(kv_error)
    }

    fn get_many(&mut self, keys: &[Vec<u8>]) -> Result<Vec<Option<Vec<u8>>>, KvError> {
        self.txn.get_many(keys).map_err(kv_error)
    }

    fn scan(
        &mut self,
        start: &[u8],
        end: Option<&[u8]>,
        limit: u32,
        reverse: bool,
    ) -> Result<Vec<Entry>, KvError> {
        self.txn
            .scan(start, end, limit, reverse, usize::MAX)
            .map(|(entries, _)| entries)
            .map_err(kv_error)
    }

    fn scan_many(&mut self, requests: &[ScanRequest]) -> Result<Vec<Vec<Entry>>, KvError> {
        let ranges: Vec<ScanRange<'_>> = requests
            .iter()
            .map(|r| ScanRange {
                start: &r.start,
                end: r.end.as_deref(),
                limit: r.limit,
                reverse: r.reverse,
            })
            .collect();
        self.txn
            .scan_many(&ranges, usize::MAX)
            .map(|(answers, _)| answers)
            .map_err(kv_error)
    }
}

impl NativeTenant {
    /// Runs a domain call (e.g. `|kv| leasehold_guest::tasks::claim(kv, ..)`)
    /// in one write transaction: committed on `Ok`, nothing written on `Err`.
    pub fn write<T, E: Into<Error>>(
        &self,
        f: impl FnOnce(&mut dyn Kv) -> Result<T, E>,
    ) -> Result<T, Error> {
        self.run(Mode::Write, f)
    }

    /// Runs a domain call on a read snapshot.
    pub fn read<T, E: Into<Error>>(
        &self,
        f: impl FnOnce(&mut dyn Kv) -> Result<T, E>,
    ) -> Result<T, Error> {
        self.run(Mode::Read, f)
    }

    fn run<T, E: Into<Error>>(
        &self,
        mode: Mode,
        f: impl FnOnce(&mut dyn Kv) -> Result<T, E>,
    ) -> Result<T, Error> {
        let mut txn = self
            .engine
            .backend
            .begin(&self.name, mode, Duration::from_secs(5))?;
        let snapshot = TxnSnapshot {
            txn: txn.as_mut(),
            concurrent_writers: self.engine.backend.concurrent_writers(),
        };
        let (answer, batch) = kv::buffered(snapshot, |kv| f(kv));
        let answer = answer.map_err(Into::into)?;
        txn.commit(batch)?.wait()?;
        Ok(answer)
    }
}
