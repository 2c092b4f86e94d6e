//! The engine's public face: its limits, its builder, and the handle that
//! hands out tenants. It decides nothing about a call: compiling and the
//! instance pool are [`crate::compiled`], one call's store, limits and
//! commit decision are [`crate::call`].

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::compiled::{Compiled, compiled};
use crate::error::Error;
use crate::storage::file::Access;
use crate::storage::postgres::{DEFAULT_POOL_SIZE, PgBackend};
use crate::storage::redb::{GroupCommit, RedbBackend};
use crate::storage::{self, Backend, CommitStats};
use crate::tenant::Tenant;

/// The guest component built from `guest/` by `build.rs`.
pub static GUEST_COMPONENT: &[u8] = include_bytes!(env!("LEASEHOLD_GUEST_WASM"));

/// The sandbox's limits. Every one has a safe default.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Wall-clock budget of one call (epoch interruption).
    pub deadline: Duration,
    /// Budget of the consistency check, which walks the whole tenant.
    pub check_deadline: Duration,
    /// Linear memory one instance may grow to, in bytes.
    pub memory_bytes: usize,
    /// Longest key the guest may use (before the tenant prefix).
    pub key_bytes: usize,
    /// Largest value the guest may write.
    pub value_bytes: usize,
    /// Most entries one scan may ask for, and most keys one `get-many`.
    pub scan_entries: u32,
    /// Most bytes (keys and values) one scan may hand the guest.
    pub scan_bytes: usize,
    /// Most bytes all of a call's reads together may hand the guest.
    pub call_read_bytes: usize,
    /// Most bytes (keys and values) one call may write.
    pub call_write_bytes: usize,
    /// How long a writing call waits for the writer ahead of it (redb), or
    /// any call for a free connection (PostgreSQL), before it answers
    /// [`Error::LockTimeout`]. Not part of the call's deadline.
    pub lock_wait: Duration,
    /// Most write calls one redb group commit takes before it commits, so
    /// that a stream of callers cannot hold a group open.
    pub group_calls: u32,
    /// A redb group older than this commits at the next call that finishes,
    /// whoever is waiting. A member's wait for its commit is bounded by
    /// this, one call's deadline and the commit itself.
    pub group_age: Duration,
    /// Instances that can run at once (pooling allocator slots).
    pub concurrent_calls: u32,
    /// How many times a call that lost a serialization race (PostgreSQL) is
    /// run again, from a fresh instance, before it answers
    /// [`Error::Conflict`].
    pub conflict_retries: u32,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            deadline: Duration::from_secs(5),
            check_deadline: Duration::from_secs(600),
            memory_bytes: 64 << 20,
            key_bytes: 4096,
            value_bytes: 4 << 20,
            scan_entries: 4096,
            scan_bytes: 16 << 20,
            call_read_bytes: 64 << 20,
            call_write_bytes: 16 << 20,
            lock_wait: Duration::from_secs(5),
            group_calls: 128,
            group_age: Duration::from_millis(20),
            concurrent_calls: 128,
            conflict_retries: 32,
        }
    }
}

/// How hard a commit presses the data to disk.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Durability {
    /// Each commit is on disk when the call returns (one fsync per call).
    #[default]
    Immediate,
    /// Commits are atomic but may be lost by a crash until a later durable
    /// commit. For benchmarks and throwaway databases.
    None,
}

/// Builds an [`Engine`].
#[derive(Clone, Debug, Default)]
pub struct EngineBuilder {
    limits: Limits,
    durability: Durability,
    component: Option<Arc<[u8]>>,
    access: Access,
    file_wait: Duration,
    /// Unset means on.
    no_group_commit: bool,
    pool_size: Option<usize>,
}

impl EngineBuilder {
    pub fn limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    pub fn durability(mut self, durability: Durability) -> Self {
        self.durability = durability;
        self
    }

    /// Runs these component bytes instead of the embedded guest: any
    /// component that implements the `leasehold:engine/engine` world.
    pub fn component(mut self, bytes: impl Into<Arc<[u8]>>) -> Self {
        self.component = Some(bytes.into());
        self
    }

    /// Whether write calls that arrive while a commit is being made durable
    /// share the next commit (on by default). Every call is still its own
    /// all-or-nothing unit, and none is acknowledged before the commit that
    /// covers it is durable; off, every write call commits alone, which is
    /// there to measure what grouping buys.
    pub fn group_commit(mut self, on: bool) -> Self {
        self.no_group_commit = !on;
        self
    }

    /// Opens the file for reading only: it is never created, repaired or
    /// written, read permission is enough, and other read-only engines may
    /// have it open at once. A writing verb answers [`Error::ReadOnly`].
    /// Applies to [`open`](Self::open), not to an in-memory database.
    pub fn read_only(mut self) -> Self {
        self.access = Access::ReadOnly;
        self
    }

    /// How long [`open`](Self::open) waits while another process has the
    /// file open, before it answers busy ([`OpenError::Busy`]). Zero, the
    /// default, tries once.
    ///
    /// [`OpenError::Busy`]: crate::OpenError::Busy
    pub fn file_wait(mut self, wait: Duration) -> Self {
        self.file_wait = wait;
        self
    }

    /// Most connections a PostgreSQL engine keeps open (default
    /// [`DEFAULT_POOL_SIZE`](crate::storage::postgres::DEFAULT_POOL_SIZE)). A
    /// call holds one for its whole transaction.
    pub fn pool_size(mut self, connections: usize) -> Self {
        self.pool_size = Some(connections);
        self
    }

    /// Opens the PostgreSQL database `url` names (`postgres://user:password@host:port/db`,
    /// or a `key=value` connection string), creating Leasehold's tables in
    /// the connection's `search_path` on first use. Many engines, in many
    /// processes, may share one database: each call is one SERIALIZABLE
    /// transaction, run again when it loses a race. With
    /// [`read_only`](Self::read_only), a writing verb answers
    /// [`Error::ReadOnly`].
    pub fn postgres(self, url: &str) -> Result<Engine, Error> {
        let compiled = self.compile()?;
        let backend = PgBackend::connect(
            url,
            self.pool_size.unwrap_or(DEFAULT_POOL_SIZE),
            self.access == Access::ReadOnly,
        )?;
        Ok(self.build(compiled, Arc::new(backend)))
    }

    /// Opens `db`: a PostgreSQL URL (see [`postgres`](Self::postgres)) or a
    /// redb file path (see [`open`](Self::open)).
    pub fn open_any(self, db: &str) -> Result<Engine, Error> {
        if crate::storage::postgres::is_url(db) {
            self.postgres(db)
        } else {
            self.open(db)
        }
    }

    /// Opens a redb database file, creating it if the path does not exist
    /// (unless read-only). An existing file that is empty or not a
    /// Leasehold database is refused, never initialized.
    pub fn open(self, path: impl AsRef<Path>) -> Result<Engine, Error> {
        // Compiled before the file is opened: the file stays locked while
        // the engine lives, and other processes may be waiting for it.
        let compiled = self.compile()?;
        let backend = RedbBackend::open(
            path.as_ref(),
            self.durability,
            self.access,
            self.file_wait,
            self.group(),
        )?;
        Ok(self.build(compiled, Arc::new(backend)))
    }

    /// Opens a redb database on a storage backend of the caller's (any
    /// [`redb::StorageBackend`]: a platform's block store, or a test's
    /// simulated disk), creating it there when the backend is empty and
    /// repairing one a writer left open. Durability, group commit and
    /// limits apply as to a file.
    pub fn redb_storage(self, storage: impl redb::StorageBackend) -> Result<Engine, Error> {
        let compiled = self.compile()?;
        let backend = RedbBackend::on_storage(storage, self.durability, self.group())?;
        Ok(self.build(compiled, Arc::new(backend)))
    }

    fn group(&self) -> GroupCommit {
        GroupCommit::new(!self.no_group_commit, &self.limits)
    }

    /// A redb database that lives in memory and is gone with the engine.
    pub fn in_memory(self) -> Result<Engine, Error> {
        let compiled = self.compile()?;
        let backend = RedbBackend::in_memory(self.durability, self.group())?;
        Ok(self.build(compiled, Arc::new(backend)))
    }

    fn compile(&self) -> Result<Arc<Compiled>, Error> {
        let bytes = self
            .component
            .clone()
            .unwrap_or_else(|| Arc::from(GUEST_COMPONENT));
        compiled(&bytes, &self.limits)
    }

    fn build(self, compiled: Arc<Compiled>, backend: Arc<dyn Backend>) -> Engine {
        Engine {
            shared: Arc::new(Shared {
                compiled,
                backend,
                limits: self.limits,
                durability: self.durability,
                retries: AtomicU64::new(0),
            }),
        }
    }
}

pub(crate) struct Shared {
    pub(crate) compiled: Arc<Compiled>,
    pub(crate) backend: Arc<dyn Backend>,
    pub(crate) limits: Limits,
    pub(crate) durability: Durability,
    /// Calls run again after a serialization conflict.
    pub(crate) retries: AtomicU64,
}

/// A Leasehold engine over one database. Cheap to clone; share it between
/// threads.
#[derive(Clone)]
pub struct Engine {
    pub(crate) shared: Arc<Shared>,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("limits", &self.shared.limits)
            .field("durability", &self.shared.durability)
            .finish_non_exhaustive()
    }
}

impl Engine {
    pub fn builder() -> EngineBuilder {
        EngineBuilder::default()
    }

    /// Opens (or creates) a database file with the embedded guest and
    /// default limits.
    pub fn open(path: impl AsRef<Path>) -> Result<Engine, Error> {
        Self::builder().open(path)
    }

    /// An in-memory database with the embedded guest and default limits.
    pub fn in_memory() -> Result<Engine, Error> {
        Self::builder().in_memory()
    }

    /// A handle on one tenant: every call through it sees only that
    /// tenant's keys.
    pub fn tenant(&self, name: &str) -> Result<Tenant, Error> {
        storage::check_tenant(name)?;
        Ok(Tenant::new(self.clone(), name.to_owned()))
    }

    /// An engine that runs another component over this engine's database,
    /// sharing its writer, its commits and its limits: two versions of the
    /// rules side by side during an upgrade, or a test's fixture beside the
    /// real rules. Both see the same tenants' keys.
    pub fn with_component(&self, bytes: impl Into<Arc<[u8]>>) -> Result<Engine, Error> {
        let s = &self.shared;
        let compiled = compiled(&bytes.into(), &s.limits)?;
        Ok(Engine {
            shared: Arc::new(Shared {
                compiled,
                backend: s.backend.clone(),
                limits: s.limits,
                durability: s.durability,
                retries: AtomicU64::new(0),
            }),
        })
    }

    pub fn limits(&self) -> &Limits {
        &self.shared.limits
    }

    /// How many times, so far, a call was run again because it lost a
    /// serialization race (PostgreSQL only; redb has one writer).
    pub fn conflict_retries(&self) -> u64 {
        self.shared.retries.load(Ordering::Relaxed)
    }

    /// How many times, so far, a call waited for the database server's answer
    /// (PostgreSQL); `None` for redb, which lives in this process.
    pub fn round_trips(&self) -> Option<u64> {
        self.shared.backend.round_trips()
    }

    /// What group commit has done on this engine's redb database so far:
    /// durable commits, the write calls they covered, and the time spent
    /// committing. `None` for PostgreSQL, whose server groups commits itself.
    pub fn commit_stats(&self) -> Option<CommitStats> {
        self.shared.backend.commit_stats()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::{Mode, Txn};
    use leasehold_guest::model::{OnExpiry, Priority, Task, TaskState};
    use leasehold_guest::schema;

    /// redb that says other processes write it too, as a database server's
    /// backend does.
    struct SaysConcurrent(RedbBackend);

    impl Backend for SaysConcurrent {
        fn begin(
            &self,
            tenant: &str,
            mode: Mode,
            lock_wait: Duration,
        ) -> Result<Box<dyn Txn>, Error> {
            self.0.begin(tenant, mode, lock_wait)
        }

        fn concurrent_writers(&self) -> bool {
            true
        }
    }

    fn task(id: &str) -> Task {
        Task {
            id: id.to_owned(),
            run: "r".to_owned(),
            case: None,
            kind: "k".to_owned(),
            justification: "{}".to_owned(),
            candidate_roles: Vec::new(),
            assignee: None,
            lease_until: None,
            priority: Priority::Normal,
            state: TaskState::Open,
            on_expiry: OnExpiry::Deny,
            escalate_to: Vec::new(),
            excluded_actors: Vec::new(),
            created_at: 1,
            due_at: None,
        }
    }

    fn mark(engine: &Engine, tenant: &str) -> Option<Vec<u8>> {
        let mut txn = engine
            .shared
            .backend
            .begin(tenant, Mode::Read, Duration::from_secs(1))
            .expect("a read transaction");
        txn.get(schema::layout().as_bytes()).expect("reads")
    }

    /// The component may keep the host's answer for its instance's life;
    /// every call here is a fresh instance from one shared pool, so two
    /// engines that answer differently must each lay out by their own.
    #[test]
    fn engines_sharing_one_pool_lay_keyspaces_out_by_their_own_backends() {
        let sole = Engine::builder().in_memory().expect("an engine");
        let builder = Engine::builder();
        let compiled = builder.compile().expect("compiles");
        assert!(Arc::ptr_eq(&compiled, &sole.shared.compiled), "one pool");
        let group = GroupCommit::new(false, &Limits::default());
        let backend = RedbBackend::in_memory(Durability::None, group).expect("redb");
        let shared = builder.build(compiled, Arc::new(SaysConcurrent(backend)));
        for i in 0..4 {
            let tenant = format!("t{i}");
            for engine in [&sole, &shared] {
                let t = engine.tenant(&tenant).expect("tenant");
                t.open(&task("a")).expect("opens");
                assert_eq!(t.open_count().expect("counts"), 1);
            }
            assert_eq!(mark(&sole, &tenant).as_deref(), Some(&b"5/1"[..]));
            assert_eq!(mark(&shared, &tenant).as_deref(), Some(&b"5/64"[..]));
        }
    }
}
