//! Compiling a component and pooling its instances: one compilation per
//! process for the same bytes and pool sizes, shared by every engine built
//! from them, with the clock that ends overlong calls. Nothing here knows a
//! call or a tenant.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::Duration;

use sha2::{Digest, Sha256};
use wasmtime::component::{Component, ComponentExportIndex, HasSelf, InstancePre, Linker};
use wasmtime::{Config, Enabled, InstanceAllocationStrategy, PoolingAllocationConfig};

use crate::bindings::{WorldPre, kv};
use crate::call::CallCtx;
use crate::engine::Limits;
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
const TICK: Duration = Duration::from_millis(5);

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
}

/// What makes two compilations interchangeable: the bytes (by SHA-256, which
/// no two different components share in practice) and the pool's sizes.
type CacheKey = ([u8; 32], usize, u32);

/// Compiling takes far longer than everything else an engine does. The cache
/// holds no component alive: an entry whose engines are all gone is dead and
/// is compiled again when next asked for.
pub(crate) fn compiled(bytes: &[u8], limits: &Limits) -> Result<Arc<Compiled>, Error> {
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

fn compile(bytes: &[u8], limits: &Limits) -> Result<Compiled, Error> {
    let setup = |what: &str, e: wasmtime::Error| Error::setup_from(what, e);
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
        .map_err(|e| Error::setup_from("cannot start the deadline clock", e))?;
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
                    Error::setup(format!(
                        "the component does not export {} from {interface}",
                        verb.name()
                    ))
                })
        })
        .collect()
}

/// Held by every unit test that makes an engine while another counts the
/// deadline clocks of the process, so the count sees only its own.
#[cfg(test)]
pub(crate) static ENGINE_TESTS: Mutex<()> = Mutex::new(());

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::{Engine, GUEST_COMPONENT};
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
}
