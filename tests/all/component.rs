//! The shipped component is exactly the WIT world: it exports the five
//! Leasehold interfaces and imports nothing but the `kv` store (and the
//! `types` it speaks in). It links no WASI at all, so a host supplies storage
//! and nothing else.

use wasmtime::component::Component;

fn names(pairs: impl Iterator<Item = String>) -> Vec<String> {
    let mut v: Vec<String> = pairs.collect();
    v.sort();
    v
}

#[test]
fn the_component_exports_exactly_the_world_and_imports_only_kv() {
    let mut config = wasmtime::Config::new();
    config.wasm_component_model(true);
    let engine = wasmtime::Engine::new(&config).expect("engine");
    let component =
        Component::new(&engine, leasehold_host::GUEST_COMPONENT).expect("the guest compiles");
    let ty = component.component_type();
    let exports = names(ty.exports(&engine).map(|(n, _)| n.to_owned()));
    assert_eq!(
        exports,
        [
            "leasehold:engine/admin@0.3.0",
            "leasehold:engine/changes@0.3.0",
            "leasehold:engine/kinds@0.3.0",
            "leasehold:engine/runs@0.3.0",
            "leasehold:engine/tasks@0.3.0",
            "leasehold:engine/timers@0.3.0",
        ]
    );
    let imports = names(ty.imports(&engine).map(|(n, _)| n.to_owned()));
    assert_eq!(
        imports,
        ["leasehold:engine/kv@0.3.0", "leasehold:engine/types@0.3.0"],
        "the component imports more than its storage"
    );
}
