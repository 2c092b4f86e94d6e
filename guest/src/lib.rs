//! Leasehold's rules, as plain Rust over an ordered key-value store.
//!
//! Everything that matters (the claim ladder, take-over and settlement as
//! compare-and-swap and compare-and-set, escalation, timer leases, sealed runs,
//! every index and counter) lives in the domain modules below, generic over
//! [`kv::Kv`]. Compiled to `wasm32-wasip2`, the private `bindings` module
//! adapts them to the WIT world `leasehold:engine/engine`, with the host's
//! `kv` import as the store; compiled natively, the same code runs against
//! [`kv::MemKv`] in unit tests, or against any other [`kv::Kv`].
//!
//! The rules never read a clock, a random source or the environment: the same
//! inputs over the same storage make the same writes.

pub mod check;
mod convert;
pub mod keys;
pub mod kv;
pub mod model;
pub mod runs;
pub mod schema;
pub mod store;
pub mod tasks;
pub mod timers;
pub mod validate;

#[cfg(target_arch = "wasm32")]
mod bindings;

#[cfg(test)]
mod tests;
