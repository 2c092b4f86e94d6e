//! An example storage backend for Leasehold: every tenant's keys in one
//! in-memory `BTreeMap`, written against the public storage trait alone
//! (`leasehold_host::storage`), as a backend of a platform's own would be.
//! It passes the conformance kit (`tests/conformance.rs`), and its tests
//! break it the ways real backends go wrong, each a small wrapper, to show
//! the kit's check for each notices (`tests/broken.rs`).
//!
//! It owns its map and its one writer's turn; it must never let a reader
//! see a write committed after the reader began, and never let two writers
//! run at once. It keeps nothing on disk, and every commit copies the map,
//! so it is for tests and examples, not for data that matters.
//!
//! ```
//! use leasehold_host::Engine;
//! use leasehold_memory_backend::MemoryBackend;
//!
//! let engine = Engine::builder().backend(MemoryBackend::new())?;
//! let acme = engine.tenant("acme")?;
//! assert_eq!(acme.open_count()?, 0);
//! # Ok::<(), leasehold_host::Error>(())
//! ```

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use leasehold_host::storage::{
    Backend, Entry, Mode, Pending, StorageError, Txn, Write, take_within,
};

/// Keys of every tenant: ordered by tenant, then by key bytes, so one
/// tenant's keys are one contiguous range and no tenant's name, however it
/// extends another's, reaches into another's range.
type Map = BTreeMap<(String, Vec<u8>), Vec<u8>>;

/// A store of many tenants' keys in memory, gone with its last handle.
#[derive(Clone, Default)]
pub struct MemoryBackend {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for MemoryBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryBackend").finish_non_exhaustive()
    }
}

#[derive(Default)]
struct Shared {
    /// The last committed state. A transaction keeps the `Arc` it began
    /// on: that is its snapshot, whatever commits after.
    committed: Mutex<Arc<Map>>,
    /// Whether a write transaction is open.
    writing: Mutex<bool>,
    writer_done: Condvar,
}

impl Shared {
    fn snapshot(&self) -> Arc<Map> {
        lock(&self.committed).clone()
    }
}

/// A poisoned lock only means a panic elsewhere; the data under it is a
/// whole `Arc` or a flag, never half-written.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl MemoryBackend {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }
}

impl Backend for MemoryBackend {
    fn begin(
        &self,
        tenant: &str,
        mode: Mode,
        lock_wait: Duration,
    ) -> Result<Box<dyn Txn>, StorageError> {
        let turn = match mode {
            Mode::Read => None,
            Mode::Write => Some(WriterTurn::take(&self.shared, lock_wait)?),
        };
        // Taken after the turn: a writer reads what the writer before it
        // committed, so writers are serial.
        Ok(Box::new(MemoryTxn {
            tenant: tenant.to_owned(),
            snapshot: self.shared.snapshot(),
            turn,
        }))
    }

    /// One process holds the map: its calls are the only writers.
    fn concurrent_writers(&self) -> bool {
        false
    }

    /// Steps from tenant to tenant: the map is ordered by name first, and
    /// a name with a zero byte added sorts after every key of the name and
    /// before the next name, so it reads one key per tenant.
    fn tenants(&self) -> Result<Option<Vec<String>>, StorageError> {
        let map = self.shared.snapshot();
        let mut names: Vec<String> = Vec::new();
        let mut from = (String::new(), Vec::new());
        while let Some(((name, _), _)) = map.range(from..).next() {
            names.push(name.clone());
            from = (format!("{name}\0"), Vec::new());
        }
        Ok(Some(names))
    }
}

/// The one writer's turn, given back when the transaction ends.
struct WriterTurn {
    shared: Arc<Shared>,
}

impl WriterTurn {
    fn take(shared: &Arc<Shared>, wait: Duration) -> Result<WriterTurn, StorageError> {
        let until = Instant::now() + wait;
        let mut writing = lock(&shared.writing);
        while *writing {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(StorageError::Busy(wait));
            }
            writing = shared
                .writer_done
                .wait_timeout(writing, left)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
        *writing = true;
        Ok(WriterTurn {
            shared: shared.clone(),
        })
    }
}

impl Drop for WriterTurn {
    fn drop(&mut self) {
        *lock(&self.shared.writing) = false;
        self.shared.writer_done.notify_one();
    }
}

struct MemoryTxn {
    tenant: String,
    snapshot: Arc<Map>,
    /// Held by a write transaction until it ends.
    turn: Option<WriterTurn>,
}

impl MemoryTxn {
    fn at(&self, key: &[u8]) -> (String, Vec<u8>) {
        (self.tenant.clone(), key.to_vec())
    }
}

impl Txn for MemoryTxn {
    fn get(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>, StorageError> {
        Ok(self.snapshot.get(&self.at(key)).cloned())
    }

    fn scan(
        &mut self,
        start: &[u8],
        end: Option<&[u8]>,
        limit: u32,
        reverse: bool,
        max_bytes: usize,
    ) -> Result<(Vec<Entry>, bool), StorageError> {
        if end.is_some_and(|e| e <= start) {
            return Ok((Vec::new(), false));
        }
        let low = Bound::Included(self.at(start));
        // No end: up to the first key of the next tenant name, which every
        // key of this tenant sorts before.
        let high = match end {
            Some(e) => Bound::Excluded(self.at(e)),
            None => Bound::Excluded((format!("{}\0", self.tenant), Vec::new())),
        };
        let range = self.snapshot.range((low, high));
        let entries: Box<dyn Iterator<Item = _>> = if reverse {
            Box::new(range.rev())
        } else {
            Box::new(range)
        };
        take_within(
            entries
                .take(limit as usize)
                .map(|((_, k), v)| Ok((k.clone(), v.clone()))),
            max_bytes,
        )
    }

    fn commit(self: Box<Self>, batch: Vec<Write>) -> Result<Pending, StorageError> {
        let Some(turn) = &self.turn else {
            return if batch.is_empty() {
                Ok(Pending::done())
            } else {
                Err(StorageError::ReadOnly)
            };
        };
        if batch.is_empty() {
            return Ok(Pending::done());
        }
        // The writer's turn means nothing committed since this snapshot.
        let mut next = Map::clone(&self.snapshot);
        for w in batch {
            match w {
                Write::Put(k, v) => {
                    next.insert((self.tenant.clone(), k), v);
                }
                Write::Delete(k) => {
                    next.remove(&(self.tenant.clone(), k));
                }
            }
        }
        *lock(&turn.shared.committed) = Arc::new(next);
        Ok(Pending::done())
    }
}
