//! Compiling a component and pooling its instances: one compilation per
//! process for the same bytes and pool sizes, shared by every engine built
//! from them, with the clock that ends overlong calls; across processes,
//! the compile cache ([`crate::cache`]) when the engine has one. Nothing
//! here knows a call, a tenant or a backend.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::Duration;

use sha2::{Digest, Sha256};
use wasmtime::component::{Component, ComponentExportIndex, HasSelf, InstancePre, Linker};
use wasmtime::{Config, Enabled, InstanceAllocationStrategy, PoolingAllocationConfig};

use crate::bindings::{WorldPre, kv};
use crate::cache::{self, CompiledFrom};
use crate::config::Limits;
use crate::ctx::CallCtx;
use crate::error::Error;
use crate::verbs::Verb;
use crate::view::KvView;

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
pub(crate) const TICK: Duration = Duration::from_millis(5);

/// A deadline as clock ticks, rounded up, with one tick of slack.
pub(crate) fn ticks(d: Duration) -> u64 {
    (d.as_micros() / TICK.as_micros()).max(1) as u64 + 1
}

/// A compiled component, ready to instantiate, with the clock that ends
/// overlong calls. The clock runs while the component is in use and stops
/// when the last engine using it is dropped.
pub(crate) struct Compiled {
    pub(crate) wasm: wasmtime::Engine,
    pub(crate) pre: InstancePre<CallCtx>,
    /// The export of every verb, by [`Verb::index`].
    pub(crate) exports: Vec<ComponentExportIndex>,
    /// Whether this process compiled it or loaded it from the cache.
    pub(crate) from: CompiledFrom,
}

/// What makes two compilations interchangeable: the bytes (by SHA-256, which
/// no two different components share in practice) and the pool's sizes.
type CacheKey = ([u8; 32], usize, u32);

/// Compiling takes far longer than everything else an engine does. The cache
/// holds no component alive: an entry whose engines are all gone is dead and
/// is compiled again (or loaded from `cache_dir`) when next asked for.
pub(crate) fn compiled(
    bytes: &[u8],
    limits: &Limits,
    cache_dir: Option<&Path>,
) -> Result<Arc<Compiled>, Error> {
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
    let c = Arc::new(compile(bytes, limits, cache_dir)?);
    cache.insert(key, Arc::downgrade(&c));
    Ok(c)
}

/// The wasmtime engine a component is compiled for and run on.
pub(crate) fn wasm_engine(limits: &Limits) -> Result<wasmtime::Engine, Error> {
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
    // For profiling the guest's compiled code with `perf`: wasmtime writes
    // the map `perf report` names JIT code by.
    if std::env::var_os("LEASEHOLD_PERF_MAP").is_some() {
        config.profiler(wasmtime::ProfilingStrategy::PerfMap);
    }
    config
        .wasm_component_model(true)
        .epoch_interruption(true)
        .allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
    wasmtime::Engine::new(&config).map_err(|e| Error::setup_from("wasmtime", e))
}

fn compile(bytes: &[u8], limits: &Limits, cache_dir: Option<&Path>) -> Result<Compiled, Error> {
    let setup = |what: &str, e: wasmtime::Error| Error::setup_from(what, e);
    let wasm = wasm_engine(limits)?;
    let (component, from) = cache::component(&wasm, bytes, cache_dir)
        .map_err(|e| setup("the component does not compile", e))?;
    speaks_this_version(&wasm, &component)?;
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
        .map_err(|e| Error::setup_from("cannot start the deadline clock", e))?;
    Ok(Compiled {
        wasm,
        pre: instance_pre,
        exports,
        from,
    })
}

/// Refuses a component that speaks another version of the package, naming
/// both, before linking would fail on the first name it cannot match.
fn speaks_this_version(wasm: &wasmtime::Engine, component: &Component) -> Result<(), Error> {
    let ty = component.component_type();
    let names = ty
        .imports(wasm)
        .map(|(n, _)| n)
        .chain(ty.exports(wasm).map(|(n, _)| n));
    for name in names {
        let Some(rest) = name.strip_prefix(crate::verbs::PACKAGE) else {
            continue;
        };
        let version = rest.rsplit_once('@').map(|(_, v)| v);
        if version != Some(crate::verbs::VERSION) {
            return Err(Error::setup(format!(
                "this component speaks {}@{} ({name}); this host speaks {}@{}: use the \
                 component built with this host (`leasehold component --out`)",
                crate::verbs::PACKAGE,
                version.unwrap_or("no version"),
                crate::verbs::PACKAGE,
                crate::verbs::VERSION
            )));
        }
    }
    Ok(())
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
                    Error::setup(format!(
                        "the component does not export {} from {interface}",
                        verb.name()
                    ))
                })
        })
        .collect()
}
