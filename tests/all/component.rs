//! The shipped component is exactly the WIT world: it exports the four
//! Leasehold interfaces and imports nothing but the `kv` store and the WASI
//! interfaces Rust's std links in (which the host links, granting nothing).

use wasmtime::component::Component;

fn names(pairs: impl Iterator<Item = String>) -> Vec<String> {
    let mut v: Vec<String> = pairs.collect();
    v.sort();
    v
}

#[test]
fn the_component_exports_exactly_the_world_and_imports_only_kv_and_std_wasi() {
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
            "leasehold:engine/admin@0.1.0",
            "leasehold:engine/runs@0.1.0",
            "leasehold:engine/tasks@0.1.0",
            "leasehold:engine/timers@0.1.0",
        ]
    );
    let imports = names(ty.imports(&engine).map(|(n, _)| n.to_owned()));
    assert!(
        imports.contains(&"leasehold:engine/kv@0.1.0".to_owned()),
        "{imports:?}"
    );
    for name in &imports {
        let allowed = name.starts_with("leasehold:engine/kv@")
            || name.starts_with("leasehold:engine/types@")
            || name.starts_with("wasi:cli/")
            || name.starts_with("wasi:io/");
        assert!(
            allowed,
            "the component imports {name}, which it should not need"
        );
    }
}
