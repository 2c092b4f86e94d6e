//! Compiles a component crate of this workspace for `wasm32-wasip2` from a
//! build script, so `cargo build`, `cargo test` and `cargo run` on a fresh
//! clone need no separate step; and [`layering`], the check each crate's
//! tests run to keep its source files free of import circles. It depends on
//! nothing, so any crate of the workspace (the guest included) can use it.
//!
//! The nested cargo gets its own target directory under `OUT_DIR` (sharing
//! the outer one would deadlock on cargo's lock) and none of the outer
//! build's flags or wrappers, which are meant for the native target.

pub mod layering;

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

pub const TARGET: &str = "wasm32-wasip2";

/// Builds `package` (a member of the workspace at `workspace`) and answers
/// the path of its `.wasm`. Emits `rerun-if-changed` for `watch`.
///
/// # Panics
///
/// When the target cannot be installed or the build fails: a build script
/// has no better way to stop, and the message says what to do.
pub fn build_component(workspace: &Path, package: &str, watch: &[&str]) -> PathBuf {
    build_component_with(workspace, package, &[], watch)
}

/// [`build_component`] with cargo `features` of `package` turned on, in a
/// target directory of its own, so the same package built without them
/// (by this build script or another) is never overwritten.
///
/// # Panics
///
/// As [`build_component`].
pub fn build_component_with(
    workspace: &Path,
    package: &str,
    features: &[&str],
    watch: &[&str],
) -> PathBuf {
    for path in watch {
        println!("cargo:rerun-if-changed={}", workspace.join(path).display());
    }
    ensure_target();
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let target_dir = if features.is_empty() {
        out.join("wasm")
    } else {
        out.join(format!("wasm-{}", features.join("-")))
    };
    let cargo = env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.current_dir(workspace)
        .args(["build", "--release", "--target", TARGET, "-p", package]);
    if !features.is_empty() {
        cmd.args(["--features", &features.join(",")]);
    }
    cmd.env("CARGO_TARGET_DIR", &target_dir)
        // Small and fast: no debug info in the shipped component.
        .env("CARGO_PROFILE_RELEASE_DEBUG", "false")
        .env("CARGO_PROFILE_RELEASE_STRIP", "true")
        .env("CARGO_PROFILE_RELEASE_LTO", "true")
        .env("CARGO_PROFILE_RELEASE_CODEGEN_UNITS", "1");
    for var in [
        "RUSTFLAGS",
        "CARGO_ENCODED_RUSTFLAGS",
        "RUSTC_WORKSPACE_WRAPPER",
        "RUSTC_WRAPPER",
        "CARGO_BUILD_TARGET",
        "CARGO_MAKEFLAGS",
    ] {
        cmd.env_remove(var);
    }
    let status = cmd
        .status()
        .unwrap_or_else(|e| panic!("could not run cargo to build {package}: {e}"));
    assert!(
        status.success(),
        "building the {package} component for {TARGET} failed (see the cargo output above)"
    );
    let file = format!("{}.wasm", package.replace('-', "_"));
    let wasm = target_dir.join(TARGET).join("release").join(file);
    assert!(wasm.exists(), "the build made no {}", wasm.display());
    wasm
}

/// Adds the wasm target when rustup can, and otherwise stops with the one
/// command to run.
fn ensure_target() {
    let rustc = env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    let sysroot = Command::new(&rustc)
        .args(["--print", "sysroot"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| PathBuf::from(String::from_utf8_lossy(&o.stdout).trim()));
    let installed = |root: &Option<PathBuf>| {
        root.as_ref()
            .is_some_and(|r| r.join("lib/rustlib").join(TARGET).join("lib").is_dir())
    };
    if installed(&sysroot) {
        return;
    }
    println!("cargo:warning=the {TARGET} target is missing; running `rustup target add {TARGET}`");
    let added = Command::new("rustup")
        .args(["target", "add", TARGET])
        .status()
        .is_ok_and(|s| s.success());
    if !added || !installed(&sysroot) {
        panic!(
            "\n\nLeasehold's rules are a WebAssembly component and need the Rust target \
             {TARGET}, which is not installed and could not be added automatically.\n\
             Run:\n\n    rustup target add {TARGET}\n\nthen build again.\n"
        );
    }
}
