//! The engine: a compiled component, a storage backend, and the rule that
//! each exported call runs in exactly one transaction.
//!
//! The component is compiled once (and shared by every engine in the process
//! built from the same bytes and sizes); each call gets a fresh `Store` and
//! instance from a pre-instantiated handle, so no guest memory outlives a call
//! and nothing leaks between tenants. A call commits only when the guest
//! answered `ok`, the answer passed the host's checks and nothing broke a
//! limit; otherwise its staged writes are dropped and nothing is written.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};
use wasmtime::component::{
    Component, ComponentExportIndex, ComponentNamedList, HasSelf, Instance, InstancePre, Lift,
    Linker, Lower, ResourceTable,
};
use wasmtime::{
    Config, Enabled, InstanceAllocationStrategy, PoolingAllocationConfig, ResourceLimiter, Store,
    Trap,
};
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

use crate::bindings::{WorldPre, kv};
use crate::error::{Error, SandboxError};
use crate::storage::file::Access;
use crate::storage::redb::RedbBackend;
use crate::storage::{self, Backend};
use crate::tenant::Tenant;
use crate::verbs::Verb;
use crate::view::KvView;

/// The guest component built from `guest/` by `build.rs`.
pub static GUEST_COMPONENT: &[u8] = include_bytes!(env!("LEASEHOLD_GUEST_WASM"));

/// How much of a pool slot's linear memory stays mapped between calls. The
/// next call in the slot then takes no page faults: with Linux's
/// `PAGEMAP_SCAN` (6.7 and later) only the pages the last call dirtied are
/// restored from the image; without it the lowest pages are reset with
/// `memset`, which costs about what unmapping and faulting them back did.
/// Calls of the shipped guest touch far less; pages beyond this are still
/// unmapped after each call.
const MEMORY_KEEP_RESIDENT: usize = 1 << 20;

/// The same for tables; the guest's are a few hundred entries.
const TABLE_KEEP_RESIDENT: usize = 8 << 10;

/// How often the deadline clock ticks; deadlines are accurate to one tick.
const TICK: Duration = Duration::from_millis(5);

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
    /// How long a writing call waits for the writer ahead of it before it
    /// answers [`Error::LockTimeout`]. Not part of the call's deadline.
    pub lock_wait: Duration,
    /// Instances that can run at once (pooling allocator slots).
    pub concurrent_calls: u32,
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
            concurrent_calls: 128,
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

    /// Opens a redb database file, creating it if the path does not exist
    /// (unless read-only). An existing file that is empty or not a
    /// Leasehold database is refused, never initialized.
    pub fn open(self, path: impl AsRef<Path>) -> Result<Engine, Error> {
        // Compiled before the file is opened: the file stays locked while
        // the engine lives, and other processes may be waiting for it.
        let compiled = self.compile()?;
        let backend =
            RedbBackend::open(path.as_ref(), self.durability, self.access, self.file_wait)?;
        Ok(self.build(compiled, Arc::new(backend)))
    }

    /// A redb database that lives in memory and is gone with the engine.
    pub fn in_memory(self) -> Result<Engine, Error> {
        let compiled = self.compile()?;
        let backend = RedbBackend::in_memory(self.durability)?;
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
            }),
        }
    }
}

/// A compiled component, ready to instantiate, with the clock that ends
/// overlong calls. The clock runs while the component is in use and stops
/// when the last engine using it is dropped.
pub(crate) struct Compiled {
    wasm: wasmtime::Engine,
    pre: InstancePre<CallCtx>,
    /// The export of every verb, by [`Verb::index`].
    exports: Vec<ComponentExportIndex>,
}

/// What makes two compilations interchangeable: the bytes (by SHA-256, which
/// no two different components share in practice) and the pool's sizes.
type CacheKey = ([u8; 32], usize, u32);

/// Compiling takes far longer than everything else an engine does. The cache
/// holds no component alive: an entry whose engines are all gone is dead and
/// is compiled again when next asked for.
fn compiled(bytes: &[u8], limits: &Limits) -> Result<Arc<Compiled>, Error> {
    static CACHE: OnceLock<Mutex<HashMap<CacheKey, Weak<Compiled>>>> = OnceLock::new();
    let key: CacheKey = (
        Sha256::digest(bytes).into(),
        limits.memory_bytes,
        limits.concurrent_calls,
    );
    let cache = CACHE.get_or_init(Default::default);
    let mut cache = cache.lock().unwrap_or_else(|p| p.into_inner());
    cache.retain(|_, c| c.strong_count() > 0);
    if let Some(c) = cache.get(&key).and_then(Weak::upgrade) {
        return Ok(c);
    }
    let c = Arc::new(compile(bytes, limits)?);
    cache.insert(key, Arc::downgrade(&c));
    Ok(c)
}

/// How many compiled components are alive in this process.
#[doc(hidden)]
pub fn compiled_components() -> usize {
    LIVE.load(std::sync::atomic::Ordering::SeqCst)
}

static LIVE: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

impl Drop for Compiled {
    fn drop(&mut self) {
        LIVE.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
    }
}

fn compile(bytes: &[u8], limits: &Limits) -> Result<Compiled, Error> {
    let setup = |what: &str, e: wasmtime::Error| Error::Setup(format!("{what}: {e:#}"));
    let mut pool = PoolingAllocationConfig::new();
    pool.total_component_instances(limits.concurrent_calls)
        .total_core_instances(limits.concurrent_calls * 8)
        .total_memories(limits.concurrent_calls * 2)
        .total_tables(limits.concurrent_calls * 8)
        .total_stacks(limits.concurrent_calls)
        .max_memory_size(limits.memory_bytes)
        .max_memories_per_component(4)
        .max_core_instances_per_component(16)
        // Resetting a slot in place instead of unmapping it halves the fixed
        // cost of a call (see BENCHMARKS.md).
        .linear_memory_keep_resident(MEMORY_KEEP_RESIDENT)
        .table_keep_resident(TABLE_KEEP_RESIDENT)
        .pagemap_scan(Enabled::Auto);
    let mut config = Config::new();
    config
        .wasm_component_model(true)
        .epoch_interruption(true)
        .allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
    let wasm = wasmtime::Engine::new(&config).map_err(|e| setup("wasmtime", e))?;
    let component =
        Component::new(&wasm, bytes).map_err(|e| setup("the component does not compile", e))?;
    let mut linker = Linker::<CallCtx>::new(&wasm);
    wasmtime_wasi::p2::add_to_linker_sync(&mut linker).map_err(|e| setup("linking WASI", e))?;
    kv::add_to_linker::<CallCtx, HasSelf<KvView>>(&mut linker, |c| &mut c.kv)
        .map_err(|e| setup("linking kv", e))?;
    let instance_pre = linker.instantiate_pre(&component).map_err(|e| {
        setup(
            "the component imports something this host does not supply",
            e,
        )
    })?;
    WorldPre::new(instance_pre.clone()).map_err(|e| {
        setup(
            "the component does not export the leasehold:engine world",
            e,
        )
    })?;
    let exports = export_indices(&component)?;
    // One clock per compiled component; it stops once nothing holds the
    // wasmtime engine any more.
    let clock = wasm.weak();
    std::thread::Builder::new()
        .name("leasehold-deadline".into())
        .spawn(move || {
            while let Some(engine) = clock.upgrade() {
                engine.increment_epoch();
                drop(engine);
                std::thread::sleep(TICK);
            }
        })
        .map_err(|e| Error::Setup(format!("cannot start the deadline clock: {e}")))?;
    LIVE.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    Ok(Compiled {
        wasm,
        pre: instance_pre,
        exports,
    })
}

/// Finds the export of every verb, so that a call type-checks only the one
/// function it runs.
fn export_indices(component: &Component) -> Result<Vec<ComponentExportIndex>, Error> {
    Verb::ALL
        .iter()
        .map(|verb| {
            let interface = verb.interface_name();
            component
                .get_export_index(None, &interface)
                .and_then(|parent| component.get_export_index(Some(&parent), verb.name()))
                .ok_or_else(|| {
                    Error::Setup(format!(
                        "the component does not export {} from {interface}",
                        verb.name()
                    ))
                })
        })
        .collect()
}

struct Shared {
    compiled: Arc<Compiled>,
    backend: Arc<dyn Backend>,
    limits: Limits,
    durability: Durability,
}

/// A Leasehold engine over one database. Cheap to clone; share it between
/// threads.
#[derive(Clone)]
pub struct Engine {
    shared: Arc<Shared>,
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

    pub fn limits(&self) -> &Limits {
        &self.shared.limits
    }
}

/// One call's store data: storage view, an empty WASI context, memory cap.
pub(crate) struct CallCtx {
    kv: KvView,
    /// Made on first use: the rules never call WASI (Rust's std links it
    /// in), and making a context (clocks, random sources) on every call
    /// cost about a microsecond.
    wasi: Option<WasiCtx>,
    table: ResourceTable,
    memory_cap: usize,
}

impl WasiView for CallCtx {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            // No files, environment, arguments, input or sockets; only the
            // clocks and random source every WASI context has, which the rules
            // never read (time is always an argument).
            ctx: self.wasi.get_or_insert_with(|| WasiCtx::builder().build()),
            table: &mut self.table,
        }
    }
}

/// The export a call runs, on the call's fresh instance.
pub(crate) struct Export {
    instance: Instance,
    index: ComponentExportIndex,
}

impl Export {
    /// Calls the export with `params` and answers its one result. Only this
    /// function's types are checked against the component's: loading the
    /// typed handles of all twenty-one exports, as the generated bindings
    /// do, cost about 3.5 µs per call.
    pub(crate) fn call<P, R>(&self, store: &mut Store<CallCtx>, params: P) -> wasmtime::Result<R>
    where
        P: ComponentNamedList + Lower,
        (R,): ComponentNamedList + Lift,
    {
        let func = self
            .instance
            .get_typed_func::<P, (R,)>(&mut *store, &self.index)?;
        let (answer,) = func.call(&mut *store, params)?;
        Ok(answer)
    }
}

impl ResourceLimiter for CallCtx {
    fn memory_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > self.memory_cap {
            self.kv.fail(Error::Sandbox(SandboxError::Memory {
                cap: self.memory_cap,
            }));
            return Ok(false);
        }
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(desired <= 100_000)
    }
}

impl Engine {
    /// Runs one exported call in one transaction of its own. `f` makes the
    /// call; `check` turns its answer into the caller's, refusing what the
    /// contract rules out. The call's writes commit only if `check` accepts.
    pub(crate) fn call<R, T>(
        &self,
        tenant: &Tenant,
        verb: Verb,
        f: impl FnOnce(&Export, &mut Store<CallCtx>) -> wasmtime::Result<R>,
        check: impl FnOnce(R) -> Result<T, Error>,
    ) -> Result<T, Error> {
        let span =
            tracing::debug_span!("leasehold.call", tenant = tenant.name(), verb = verb.name());
        let _entered = span.enter();
        let started = Instant::now();
        let out = self.run(tenant, verb, f, check);
        tracing::debug!(
            outcome = match &out {
                Ok(_) => "ok",
                Err(e) if e.is_refusal() || e.is_invalid_input() => "declined",
                Err(_) => "failed",
            },
            micros = started.elapsed().as_micros() as u64,
            "call finished"
        );
        out
    }

    fn run<R, T>(
        &self,
        tenant: &Tenant,
        verb: Verb,
        f: impl FnOnce(&Export, &mut Store<CallCtx>) -> wasmtime::Result<R>,
        check: impl FnOnce(R) -> Result<T, Error>,
    ) -> Result<T, Error> {
        let s = &self.shared;
        let limits = s.limits;
        let deadline = if verb.is_long() {
            limits.check_deadline
        } else {
            limits.deadline
        };
        if verb.mode() == storage::Mode::Write && s.backend.read_only() {
            return Err(Error::ReadOnly { verb: verb.name() });
        }
        // The turn to write comes first, with its own bound: a call waiting
        // for the writer ahead of it holds no instance slot and spends none
        // of its deadline.
        let txn = s
            .backend
            .begin(tenant.name(), verb.mode(), limits.lock_wait)?;
        let ctx = CallCtx {
            kv: KvView::new(txn, verb.mode(), limits),
            wasi: None,
            table: ResourceTable::new(),
            memory_cap: limits.memory_bytes,
        };
        let mut store = Store::new(&s.compiled.wasm, ctx);
        store.limiter(|c| c);
        store.set_epoch_deadline(ticks(deadline));
        store.epoch_deadline_trap();
        let answer = match s.compiled.pre.instantiate(&mut store) {
            Ok(instance) => {
                let export = Export {
                    instance,
                    index: s.compiled.exports[verb.index()],
                };
                f(&export, &mut store)
            }
            Err(e) => Err(e),
        };

        // The transaction ends before the instance is torn down, so a writer
        // gives up its turn as soon as it can.
        let outcome = store.data_mut().kv.take();
        let txn = outcome
            .txn
            .ok_or_else(|| Error::Setup("the call lost its transaction".into()))?;
        if let Some(v) = outcome.violation {
            // A limit the host recorded names the cause better than the trap
            // it led to.
            return Err(v);
        }
        let answer = answer.map_err(|trap| Error::Sandbox(classify_trap(trap, deadline)))?;
        let answer = check(answer)?;
        txn.commit(outcome.batch)?;
        Ok(answer)
    }
}

fn ticks(d: Duration) -> u64 {
    (d.as_micros() / TICK.as_micros()).max(1) as u64 + 1
}

fn classify_trap(e: wasmtime::Error, deadline: Duration) -> SandboxError {
    let text = format!("{e:#}");
    if e.downcast_ref::<wasmtime::PoolConcurrencyLimitError>()
        .is_some()
    {
        return SandboxError::Busy(text);
    }
    match e.downcast_ref::<Trap>() {
        Some(Trap::Interrupt) => SandboxError::Deadline(deadline),
        _ => SandboxError::Trap(text),
    }
}

/// Held by every unit test that makes an engine while another counts the
/// deadline clocks of the process, so the count sees only its own.
#[cfg(test)]
pub(crate) static ENGINE_TESTS: Mutex<()> = Mutex::new(());

#[cfg(test)]
mod tests {
    use super::*;

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
}
