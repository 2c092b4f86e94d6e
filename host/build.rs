//! Builds the guest component and hands its path to the crate, which embeds it.

fn main() {
    let manifest =
        std::path::PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let workspace = manifest.parent().expect("host/ sits in the workspace");
    let wasm = leasehold_build::build_component(
        workspace,
        "leasehold-guest",
        &["guest/src", "guest/Cargo.toml", "wit", "Cargo.lock"],
    );
    println!("cargo:rustc-env=LEASEHOLD_GUEST_WASM={}", wasm.display());
}
