//! The shipped component is exactly the WIT world: it exports the ten
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
            "leasehold:engine/jobs@0.3.0",
            "leasehold:engine/kinds@0.3.0",
            "leasehold:engine/runs@0.3.0",
            "leasehold:engine/schedules@0.3.0",
            "leasehold:engine/search@0.3.0",
            "leasehold:engine/subscriptions@0.3.0",
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

/// A component that exports `leasehold:engine/tasks@0.2.0`: what a build of
/// the previous contract looks like from outside, assembled here.
fn component_speaking(version: &str) -> Vec<u8> {
    use wasm_encoder::{
        Component, ComponentExportKind, ComponentExportSection, ComponentInstanceSection,
    };
    let mut c = Component::new();
    let mut instances = ComponentInstanceSection::new();
    instances.export_items(Vec::<(&str, ComponentExportKind, u32)>::new());
    c.section(&instances);
    let mut exports = ComponentExportSection::new();
    exports.export(
        format!("leasehold:engine/tasks@{version}"),
        ComponentExportKind::Instance,
        0,
        None,
    );
    c.section(&exports);
    c.finish()
}

#[test]
fn a_component_of_another_package_version_is_refused_naming_both() {
    let engine = leasehold_host::Engine::in_memory().expect("engine");
    let e = engine
        .with_component(component_speaking("0.2.0"))
        .expect_err("a 0.2.0 component is refused");
    let text = e.to_string();
    assert!(
        text.contains("this component speaks leasehold:engine@0.2.0")
            && text.contains("this host speaks leasehold:engine@0.3.0"),
        "{text}"
    );
}
