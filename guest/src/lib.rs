//! Leasehold's rules, as plain Rust over an ordered key-value store.
//!
//! Everything that matters (the claim ladder, take-over and settlement as
//! compare-and-swap and compare-and-set, escalation, leased claims and their
//! reclaiming, timer leases, sealed runs, every index and counter) lives in the domain modules below, generic over
//! [`kv::Kv`]. Compiled to `wasm32-wasip2`, the private `bindings` module
//! adapts them to the WIT world `leasehold:engine/engine`, with the host's
//! `kv` import as the store; compiled natively, the same code runs against
//! [`kv::MemKv`] in unit tests, or against any other [`kv::Kv`].
//!
//! The rules never read a clock, a random source or the environment: the same
//! inputs over the same storage make the same writes. Compiled to wasm the
//! crate is `no_std` (with an allocator of its own), so the component imports
//! nothing but its storage: no WASI, and one core instance to set up per call.

#![cfg_attr(target_arch = "wasm32", no_std)]

extern crate alloc;

/// What std's prelude would bring, for the `no_std` build.
#[allow(unused_imports)]
mod prelude {
    pub use alloc::borrow::ToOwned;
    pub use alloc::boxed::Box;
    pub use alloc::format;
    pub use alloc::string::{String, ToString};
    pub use alloc::vec;
    pub use alloc::vec::Vec;
}

pub mod calendar;
pub mod changes;
pub mod check;
mod convert;
pub mod jobs;
mod json;
pub mod jsonschema;
pub mod keys;
pub mod kinds;
pub mod kv;
#[cfg(any(test, target_arch = "wasm32"))]
mod mem;
pub mod model;
mod queue;
pub mod runs;
pub mod schedules;
pub mod schema;
pub mod search;
pub mod store;
pub mod subscriptions;
pub mod tasks;
mod time;
pub mod timeline;
pub mod timers;
pub mod validate;

#[cfg(target_arch = "wasm32")]
mod bindings;

#[cfg(test)]
mod tests;
