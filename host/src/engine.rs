//! The engine's public face: its builder, which picks a backend, and the
//! handle that hands out tenants. It decides nothing about a call:
//! compiling and the instance pool are [`crate::compiled`], one call's
//! store, limits and commit decision are [`crate::call`], and it must never
//! reach a backend except through the storage trait, so that a backend of
//! someone else's is served exactly as the shipped ones are.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::cache::CompiledFrom;
use crate::clock::{Clock, SystemClock};
use crate::compiled::{Compiled, compiled};
use crate::config::{Durability, Limits, Reuse};
use crate::error::Error;
use crate::keep::{InstanceStats, Keeper};
use crate::runtime::Shared;
use crate::storage::backend::Backend;
use crate::storage::commit::CommitStats;
use crate::storage::file::{Access, check_path};
use crate::storage::postgres::{DEFAULT_POOL_SIZE, PgBackend, is_url};
use crate::storage::redb::{GroupCommit, RedbBackend};
use crate::storage::tenant_name::check_tenant;
use crate::tenant::Tenant;
use crate::watch::{Changes, Hub};

/// The guest component built from `guest/` by `build.rs`.
pub static GUEST_COMPONENT: &[u8] = include_bytes!(env!("LEASEHOLD_GUEST_WASM"));

/// Builds an [`Engine`].
#[derive(Clone, Default)]
pub struct EngineBuilder {
    limits: Limits,
    durability: Durability,
    component: Option<Arc<[u8]>>,
    access: Access,
    file_wait: Duration,
    /// Unset means on.
    no_group_commit: bool,
    pool_size: Option<usize>,
    /// Unset means [`Reuse::default`].
    reuse: Option<Reuse>,
    /// Unset means instances are kept.
    fresh_instances: bool,
    clock: Option<Arc<dyn Clock>>,
    cache_dir: Option<PathBuf>,
}

impl std::fmt::Debug for EngineBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EngineBuilder")
            .field("limits", &self.limits)
            .field("durability", &self.durability)
            .field("access", &self.access)
            .field("reuse", &self.reuse)
            .field("fresh_instances", &self.fresh_instances)
            .field("own_clock", &self.clock.is_some())
            .field("cache_dir", &self.cache_dir)
            .finish_non_exhaustive()
    }
}

impl EngineBuilder {
    /// The sandbox's limits (default: [`Limits::default`]).
    pub fn limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// How hard a redb commit presses data to disk (default:
    /// [`Durability::Immediate`]).
    pub fn durability(mut self, durability: Durability) -> Self {
        self.durability = durability;
        self
    }

    /// The clock each writing call's changes are recorded at (the history
    /// and the feed, `kv.call-time`), read once per call: the system's
    /// unless given. A [`ManualClock`](crate::ManualClock) makes recorded
    /// times exact in tests. It never decides a rule: the verbs' times are
    /// their arguments.
    pub fn clock(mut self, clock: impl Clock) -> Self {
        self.clock = Some(Arc::new(clock));
        self
    }

    /// Runs these component bytes instead of the embedded guest: any
    /// component that implements the `leasehold:engine/engine` world.
    pub fn component(mut self, bytes: impl Into<Arc<[u8]>>) -> Self {
        self.component = Some(bytes.into());
        self
    }

    /// Keeps the compiled component in `dir` (made, for this user alone, if
    /// it does not exist), and loads it from there when the same component
    /// was compiled before by an engine configured the same way, instead of
    /// compiling it again: the difference between a process that starts in
    /// milliseconds and one that first spends a second or more compiling.
    /// Off by default; the `leasehold` command keeps its cache in
    /// [`default_cache_dir`](crate::default_cache_dir).
    ///
    /// A file is used only when it is whole (its digest matches), was
    /// written for these very bytes and this engine's configuration, and
    /// the directory and file are this user's alone; anything else, and any
    /// failure to read or write the directory, is logged (`tracing`) and the
    /// component is compiled as without a cache. [`Engine::compiled_from`]
    /// says which happened.
    pub fn compile_cache(mut self, dir: impl Into<PathBuf>) -> Self {
        self.cache_dir = Some(dir.into());
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

    /// Keeps instances within `reuse`'s bounds instead of
    /// [`Reuse::default`]'s. By default an instance serves more than one
    /// call of the same tenant; [`fresh_instances`](Self::fresh_instances)
    /// turns that off. A kept instance never serves another tenant, and is
    /// thrown away after any call that did not answer `ok` (a trap, a
    /// limit, a deadline, an error answer, a failed commit) and after any
    /// call that grew its memory.
    ///
    /// The trade: a call skips instantiation and teardown, but what one call
    /// of a tenant leaves in the instance's memory (the guest starts its
    /// allocator afresh every call, but does not wipe the bytes) is still
    /// there during the tenant's next calls, so a flaw in the rules that
    /// read memory it never wrote could see an earlier call's data of the
    /// same tenant, never another's. Idle instances hold pool slots (at
    /// most half of [`Limits::concurrent_calls`]) and memory (at most
    /// [`Reuse::idle_bytes`]), and are let go after [`Reuse::idle_for`].
    pub fn reuse_instances(mut self, reuse: Reuse) -> Self {
        self.reuse = Some(reuse);
        self.fresh_instances = false;
        self
    }

    /// Instantiates the component afresh for every call and keeps no
    /// instance between calls: slower, and for an embedder who wants no
    /// byte of one call's memory to outlive the call.
    pub fn fresh_instances(mut self) -> Self {
        self.fresh_instances = true;
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

    /// The PostgreSQL connections an engine built here keeps open at most,
    /// and so how many of its calls can run at once there.
    pub fn connections(&self) -> usize {
        self.pool_size.unwrap_or(DEFAULT_POOL_SIZE)
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
        )?
        .with_groups(!self.no_group_commit, &self.limits);
        Ok(self.build(compiled, Arc::new(backend)))
    }

    /// Runs the engine over `backend`: any implementation of the storage
    /// trait, the shipped ones (see [`crate::storage`]) or one of the
    /// caller's. Limits apply as to any other; durability, group commit,
    /// read-only access and the pool size are the backend's own business
    /// and are not applied here. Pass an `Arc` to keep a handle on the
    /// backend.
    pub fn backend(self, backend: impl Backend) -> Result<Engine, Error> {
        let compiled = self.compile()?;
        Ok(self.build(compiled, Arc::new(backend)))
    }

    /// Opens `db`: a PostgreSQL URL (see [`postgres`](Self::postgres)) or a
    /// redb file path (see [`open`](Self::open)).
    pub fn open_any(self, db: &str) -> Result<Engine, Error> {
        if is_url(db) {
            self.postgres(db)
        } else {
            self.open(db)
        }
    }

    /// Opens a redb database file, creating it if the path does not exist
    /// (unless read-only). An existing file that is empty or not a
    /// Leasehold database is refused, never initialized.
    pub fn open(self, path: impl AsRef<Path>) -> Result<Engine, Error> {
        // A path that cannot be opened is said at once, not after compiling.
        check_path(path.as_ref(), self.access)?;
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
        let backend =
            RedbBackend::on_storage(storage, self.durability, self.group()).map_err(Error::from)?;
        Ok(self.build(compiled, Arc::new(backend)))
    }

    fn group(&self) -> GroupCommit {
        GroupCommit::new(!self.no_group_commit, &self.limits)
    }

    /// A redb database that lives in memory and is gone with the engine.
    pub fn in_memory(self) -> Result<Engine, Error> {
        let compiled = self.compile()?;
        let backend = RedbBackend::in_memory(self.durability, self.group()).map_err(Error::from)?;
        Ok(self.build(compiled, Arc::new(backend)))
    }

    fn compile(&self) -> Result<Arc<Compiled>, Error> {
        let bytes = self
            .component
            .clone()
            .unwrap_or_else(|| Arc::from(GUEST_COMPONENT));
        compiled(&bytes, &self.limits, self.cache_dir.as_deref())
    }

    fn build(self, compiled: Arc<Compiled>, backend: Arc<dyn Backend>) -> Engine {
        Engine {
            shared: Arc::new(Shared {
                compiled,
                backend,
                keeper: Keeper::new(
                    (!self.fresh_instances).then(|| self.reuse.unwrap_or_default()),
                    self.limits.concurrent_calls,
                ),
                limits: self.limits,
                durability: self.durability,
                retries: AtomicU64::new(0),
                clock: self.clock.unwrap_or_else(|| Arc::new(SystemClock)),
                hub: Hub::new(),
                cache_dir: self.cache_dir,
            }),
        }
    }
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
    /// A builder with the embedded guest and default limits.
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
        check_tenant(name)?;
        Ok(Tenant::new(self.shared.clone(), name.into()))
    }

    /// An engine that runs another component over this engine's database,
    /// sharing its writer, its commits and its limits: two versions of the
    /// rules side by side during an upgrade, or a test's fixture beside the
    /// real rules. Both see the same tenants' keys.
    pub fn with_component(&self, bytes: impl Into<Arc<[u8]>>) -> Result<Engine, Error> {
        let s = &self.shared;
        let compiled = compiled(&bytes.into(), &s.limits, s.cache_dir.as_deref())?;
        Ok(Engine {
            shared: Arc::new(Shared {
                compiled,
                backend: s.backend.clone(),
                keeper: Keeper::new(s.keeper.policy(), s.limits.concurrent_calls),
                limits: s.limits,
                durability: s.durability,
                retries: AtomicU64::new(0),
                clock: s.clock.clone(),
                hub: s.hub.clone(),
                cache_dir: s.cache_dir.clone(),
            }),
        })
    }

    /// The limits every call of this engine runs under.
    pub fn limits(&self) -> &Limits {
        &self.shared.limits
    }

    /// Whether this engine's component was compiled by this process or
    /// loaded from the compile cache (see [`EngineBuilder::compile_cache`]).
    pub fn compiled_from(&self) -> CompiledFrom {
        self.shared.compiled.from
    }

    /// The clock this engine records calls at (see
    /// [`EngineBuilder::clock`]), for whatever else the embedder times by
    /// it: a sweeper's "now", say.
    pub fn clock(&self) -> Arc<dyn Clock> {
        self.shared.clock.clone()
    }

    /// Subscribes to `tenant`'s commits: woken after every call that
    /// committed a change of the tenant, through this engine (or any engine
    /// on its backend) and, on a database several processes share
    /// (PostgreSQL), through theirs. A wake-up is a hint to read the feed
    /// again; it carries no change itself, and a lost one loses nothing
    /// the feed does not hold. See [`Changes`].
    pub fn watch(&self, tenant: &str) -> Result<Changes, Error> {
        check_tenant(tenant)?;
        let s = &self.shared;
        Ok(s.hub.subscribe(&*s.backend, Some(Arc::from(tenant))))
    }

    /// Subscribes to every tenant's commits, as [`watch`](Self::watch) does
    /// to one's: what wakes it names the tenants that committed.
    pub fn changes(&self) -> Changes {
        let s = &self.shared;
        s.hub.subscribe(&*s.backend, None)
    }

    /// How many times, so far, a call was run again because it lost a
    /// serialization race (PostgreSQL only; redb has one writer).
    pub fn conflict_retries(&self) -> u64 {
        self.shared.retries.load(Ordering::Relaxed)
    }

    /// The tenants this engine's storage holds keys for, each once, in
    /// bytewise order; `None` when its backend cannot list them (see
    /// [`Backend::tenants`]).
    pub fn stored_tenants(&self) -> Result<Option<Vec<String>>, Error> {
        self.shared.backend.tenants().map_err(Error::from)
    }

    /// A read snapshot of `tenant`'s bare keys, for copying them out while
    /// calls go on (an online backup): a
    /// [`Mode::Read`](crate::storage::Mode::Read) transaction of the
    /// engine's own backend, so that a redb file this process holds is read
    /// beside its writer. It may last up to `deadline`; it never writes, and
    /// the caller must never read meaning into the keys (that is the
    /// component's).
    pub fn snapshot(
        &self,
        tenant: &str,
        deadline: std::time::Duration,
    ) -> Result<Box<dyn crate::storage::backend::Txn>, Error> {
        check_tenant(tenant)?;
        let s = &self.shared;
        s.backend
            .begin_with_deadline(
                tenant,
                crate::storage::backend::Mode::Read,
                s.limits.lock_wait,
                deadline,
            )
            .map_err(Error::from)
    }

    /// How many times, so far, a call waited for the database server's answer
    /// (PostgreSQL); `None` for redb, which lives in this process.
    pub fn round_trips(&self) -> Option<u64> {
        self.shared.backend.round_trips()
    }

    /// How many calls so far instantiated the component, how many ran on
    /// an instance kept from an earlier call of their tenant, and what is
    /// kept idle now (see [`EngineBuilder::reuse_instances`]).
    pub fn instance_stats(&self) -> InstanceStats {
        self.shared.keeper.stats()
    }

    /// How instances are kept; `None` for an engine built with
    /// [`EngineBuilder::fresh_instances`].
    pub fn reuse(&self) -> Option<Reuse> {
        self.shared.keeper.policy()
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
    use crate::storage::backend::{Mode, Txn};
    use crate::storage::error::StorageError;
    use crate::testing::task;
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
        ) -> Result<Box<dyn Txn>, StorageError> {
            self.0.begin(tenant, mode, lock_wait)
        }

        fn concurrent_writers(&self) -> bool {
            true
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
            let (one, many) = (
                schema::layout_mark(schema::Shards::SOLE),
                schema::layout_mark(schema::Shards::SHARED),
            );
            assert_eq!(mark(&sole, &tenant).as_deref(), Some(one.as_bytes()));
            assert_eq!(mark(&shared, &tenant).as_deref(), Some(many.as_bytes()));
        }
    }
}

#[cfg(test)]
mod compiling {
    use super::*;
    use crate::compiled::TICK;
    use crate::testing::{ENGINE_TESTS, task};
    use leasehold_guest::model::QueueQuery;
    use std::time::Instant;

    /// Threads of this process that run a deadline clock.
    fn clocks() -> usize {
        std::fs::read_dir("/proc/self/task")
            .map(|tasks| {
                tasks
                    .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
                    .filter(|name| name.starts_with("leasehold-dead"))
                    .count()
            })
            .unwrap_or(0)
    }

    /// Sizes no other test uses, so this test's compilation is its own.
    fn own_limits() -> Limits {
        Limits {
            memory_bytes: 48 << 20,
            concurrent_calls: 3,
            ..Limits::default()
        }
    }

    #[test]
    fn a_compiled_component_and_its_clock_go_when_the_last_engine_does() {
        let _one_at_a_time = ENGINE_TESTS.lock().unwrap_or_else(|p| p.into_inner());
        // No engine lives while the lock is held, but the clock of one that
        // just went ends up to a tick later, and a new clock thread takes its
        // name only once it runs: counts are awaited, never read once.
        let settle = |want: usize| {
            let waited = Instant::now();
            while clocks() != want && waited.elapsed() < Duration::from_secs(2) {
                std::thread::sleep(TICK);
            }
            clocks()
        };
        let before = settle(0);
        let a = Engine::builder()
            .limits(own_limits())
            .in_memory()
            .expect("engine");
        let b = Engine::builder()
            .limits(own_limits())
            .in_memory()
            .expect("engine");
        assert!(
            Arc::ptr_eq(&a.shared.compiled, &b.shared.compiled),
            "the same bytes and sizes compile once"
        );
        assert_eq!(settle(before + 1), before + 1);
        let compiled = Arc::downgrade(&a.shared.compiled);
        drop((a, b));
        assert!(compiled.upgrade().is_none(), "the cache kept the component");
        let waited = Instant::now();
        while clocks() > before && waited.elapsed() < Duration::from_secs(2) {
            std::thread::sleep(TICK);
        }
        assert_eq!(clocks(), before, "the deadline clock outlived its engines");
    }

    #[test]
    fn components_that_differ_in_any_byte_never_share_a_compilation() {
        // Serialised with the test above, which counts clocks.
        let _one_at_a_time = ENGINE_TESTS.lock().unwrap_or_else(|p| p.into_inner());
        // The same component with a custom section appended: valid, and
        // different bytes.
        let mut other = GUEST_COMPONENT.to_vec();
        other.extend_from_slice(&[0, 5, 4, b'n', b'o', b't', b'e']);
        let limits = Limits {
            concurrent_calls: 5,
            ..own_limits()
        };
        let a = Engine::builder()
            .limits(limits)
            .in_memory()
            .expect("engine");
        let b = Engine::builder()
            .limits(limits)
            .component(other)
            .in_memory()
            .expect("engine");
        assert!(!Arc::ptr_eq(&a.shared.compiled, &b.shared.compiled));
    }

    #[test]
    fn a_read_only_engine_refuses_a_writing_verb_and_changes_nothing() {
        let _counted = crate::testing::ENGINE_TESTS
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("db.redb");
        drop(Engine::open(&path).expect("created"));
        let before = std::fs::read(&path).expect("read");
        let engine = Engine::builder()
            .read_only()
            .open(&path)
            .expect("read-only engine");
        let t = engine.tenant("acme").expect("tenant");
        assert_eq!(t.open_count().expect("a reading verb"), 0);
        let r = t.escalate("t1");
        assert!(
            matches!(r, Err(Error::ReadOnly { verb: "escalate" })),
            "{r:?}"
        );
        drop((t, engine));
        assert_eq!(std::fs::read(&path).expect("read"), before);
    }

    /// What a short script of calls answers on a fresh tenant of `engine`,
    /// as text to compare.
    fn answers(engine: &Engine) -> String {
        let t = engine.tenant("acme").expect("tenant");
        let mut out = Vec::new();
        for id in ["a", "b", "c"] {
            out.push(format!("{:?}", t.open(&task(id))));
        }
        out.push(format!("{:?}", t.claim("b", "alice", &[], None)));
        out.push(format!("{:?}", t.claim("b", "bob", &[], None)));
        let query = QueueQuery {
            roles: Vec::new(),
            actor: Some("bob".into()),
            limit: 10,
            after: None,
        };
        out.push(format!("{:?}", t.queue(&query)));
        out.push(format!("{:?}", t.open_count()));
        out.push(format!("{:?}", t.check()));
        out.join("\n")
    }

    #[test]
    fn a_component_from_the_compile_cache_answers_as_a_compiled_one() {
        let _one_at_a_time = ENGINE_TESTS.lock().unwrap_or_else(|p| p.into_inner());
        let dir = tempfile::tempdir().expect("temp dir");
        let cache = dir.path().join("cache");
        // Sizes no other test uses: no engine elsewhere in this process holds
        // this compilation, so each build below compiles or loads afresh.
        let limits = Limits {
            memory_bytes: 40 << 20,
            concurrent_calls: 2,
            ..Limits::default()
        };
        let build = || {
            Engine::builder()
                .limits(limits)
                .compile_cache(&cache)
                .in_memory()
                .expect("engine")
        };
        let first = build();
        assert_eq!(first.compiled_from(), CompiledFrom::Compiler);
        let compiled = answers(&first);
        assert!(compiled.contains("alice"), "{compiled}");
        drop(first);

        let second = build();
        assert_eq!(second.compiled_from(), CompiledFrom::Cache);
        assert_eq!(answers(&second), compiled);
        drop(second);

        // A damaged file is compiled around, and replaced.
        let files: Vec<_> = std::fs::read_dir(&cache)
            .expect("the cache")
            .map(|e| e.expect("an entry").path())
            .collect();
        assert_eq!(files.len(), 1, "{files:?}");
        let mut bytes = std::fs::read(&files[0]).expect("read");
        let middle = bytes.len() / 2;
        bytes[middle] ^= 0x55;
        std::fs::write(&files[0], bytes).expect("write");
        let third = build();
        assert_eq!(third.compiled_from(), CompiledFrom::Compiler);
        assert_eq!(answers(&third), compiled);
        drop(third);
        assert_eq!(build().compiled_from(), CompiledFrom::Cache);
    }

    /// A path a read-only open cannot use is refused before the component
    /// is compiled: nothing reaches the compile cache.
    #[test]
    fn a_wrong_path_is_refused_before_compiling() {
        let dir = tempfile::tempdir().expect("temp dir");
        let cache = dir.path().join("cache");
        let empty = dir.path().join("empty.redb");
        std::fs::write(&empty, b"").expect("write");
        let limits = Limits {
            memory_bytes: 36 << 20,
            concurrent_calls: 2,
            ..Limits::default()
        };
        let open = |path: &Path| {
            Engine::builder()
                .limits(limits)
                .compile_cache(&cache)
                .read_only()
                .open(path)
        };
        let r = open(&dir.path().join("missing.redb"));
        assert!(
            matches!(
                r,
                Err(Error::Open(crate::storage::file::OpenError::Missing { .. }))
            ),
            "{r:?}"
        );
        let r = open(&empty);
        assert!(
            matches!(
                r,
                Err(Error::Open(crate::storage::file::OpenError::Empty { .. }))
            ),
            "{r:?}"
        );
        assert!(!cache.exists(), "the component was compiled first");
    }
}
