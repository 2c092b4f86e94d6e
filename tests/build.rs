//! Builds the hostile fixture component that the sandbox tests load, and the
//! real guest one layout later (`next-layout`), which the rolling-upgrade
//! test runs as the next release.

fn main() {
    let manifest =
        std::path::PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let workspace = manifest.parent().expect("tests/ sits in the workspace");
    let wasm = leasehold_build::build_component(
        workspace,
        "leasehold-hostile",
        &[
            "tests/fixtures/hostile/src",
            "tests/fixtures/hostile/Cargo.toml",
            "wit",
        ],
    );
    println!("cargo:rustc-env=LEASEHOLD_HOSTILE_WASM={}", wasm.display());
    let next = leasehold_build::build_component_with(
        workspace,
        "leasehold-guest",
        &["next-layout"],
        &["guest/src", "guest/Cargo.toml", "wit", "Cargo.lock"],
    );
    println!(
        "cargo:rustc-env=LEASEHOLD_NEXT_LAYOUT_WASM={}",
        next.display()
    );
}
