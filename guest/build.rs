//! Keeps the component's memory small. The host resets every page a call
//! might have touched before the next call in the same slot, so a compact
//! layout (a modest stack, the heap's first arena right after the data)
//! makes every call cheaper. A build for the host's own tests is untouched.

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let arch = std::env::var("CARGO_CFG_TARGET_ARCH").unwrap_or_default();
    if arch == "wasm32" {
        // The rules recurse only shallowly; the default is a megabyte.
        println!("cargo:rustc-link-arg=-zstack-size=262144");
    }
}
