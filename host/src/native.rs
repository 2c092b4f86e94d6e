//! The same rules compiled natively: the guest's domain code called directly
//! over the same redb storage layer, one transaction per call, with no
//! component, no instance and no boundary.
//!
//! This is not the product (it has no sandbox: no deadline, no memory cap, no
//! isolation from a faulty rule); it exists so the benchmark can say what the
//! sandbox costs, against the same code over the same storage.

use std::path::Path;
use std::sync::Arc;

use leasehold_guest::kv::Kv;

use crate::engine::{Durability, Limits, Mode};
use crate::error::Error;
use crate::storage::{self, KV_TABLE, KvView};

/// A database run by the native build of the rules.
#[derive(Clone)]
pub struct NativeEngine {
    db: Arc<redb::Database>,
    limits: Limits,
    durability: Durability,
}

impl std::fmt::Debug for NativeEngine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NativeEngine").finish_non_exhaustive()
    }
}

impl NativeEngine {
    pub fn open(path: impl AsRef<Path>, durability: Durability) -> Result<Self, Error> {
        let path = path.as_ref();
        let db = redb::Database::create(path)
            .map_err(|e| Error::Setup(format!("cannot open {}: {e}", path.display())))?;
        let w = db.begin_write()?;
        w.open_table(KV_TABLE)?;
        w.commit()?;
        Ok(NativeEngine {
            db: Arc::new(db),
            limits: Limits::default(),
            durability,
        })
    }

    pub fn tenant(&self, name: &str) -> Result<NativeTenant, Error> {
        Ok(NativeTenant {
            engine: self.clone(),
            prefix: storage::tenant_prefix(name)?,
        })
    }
}

/// One tenant of a [`NativeEngine`].
#[derive(Clone, Debug)]
pub struct NativeTenant {
    engine: NativeEngine,
    prefix: Vec<u8>,
}

impl NativeTenant {
    /// Runs a domain call (e.g. `|kv| leasehold_guest::tasks::claim(kv, ..)`)
    /// in one write transaction: committed on `Ok`, aborted on `Err`.
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
        let e = &self.engine;
        let mut view = KvView::new(&self.prefix, e.limits);
        view.begin(&e.db, mode, e.durability)?;
        let answer = f(&mut view);
        view.finish(answer.is_ok())?;
        answer.map_err(Into::into)
    }
}
