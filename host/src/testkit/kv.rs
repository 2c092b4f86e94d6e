//! The storage trait's promises, each checked directly on a backend. Every
//! check takes a fresh backend from `make`, works in tenants named for it
//! alone, and answers the first promise it saw broken, as a [`Failure`]
//! named for the check: never a panic, and never a hang (a check that must
//! wait on a backend, for a turn or another writer's commit, waits a
//! bounded time and then fails). Checks of readers and writers begin their
//! transactions through every entry point of the trait the engine calls,
//! and write batches as large as the engine lets one call stage. It owns which checks there are; it must
//! never accept an answer the trait's documentation rules out, and never
//! depend on timing to pass: a check that runs threads side by side
//! accepts every interleaving a conforming backend can produce, and forces
//! the one it means to test wherever the backend allows it.
//!
//! The checks live by subject: point reads (`reads`), scans (`scans`),
//! commits and deletes (`batches`), readers beside writers (`isolation`),
//! writers beside writers (`writers`), tenancy (`tenants`), and keys that
//! differ only in trailing bytes through all of these (`trailing`).

mod batches;
mod isolation;
mod reads;
mod scans;
mod tenants;
mod trailing;
mod writers;

pub use batches::{
    batches_are_all_or_nothing, commits_are_seen_once_acknowledged, deleted_keys_are_gone,
    deletes_of_absent_keys, deletes_take_no_longer_or_shorter_keys, empty_batches_commit_nothing,
    read_transactions_refuse_batches,
};
pub use isolation::{
    batches_land_whole_under_a_concurrent_reader, largest_batches_land_whole,
    reads_see_one_snapshot,
};
pub use reads::{
    absent_keys_read_as_absent, empty_store_reads_nothing, largest_key_and_value, puts_read_back,
};
pub use scans::{
    bytewise_order_both_ways, long_scans_skip_nothing, scan_byte_caps, scan_flags_on_every_shape,
    scan_limits_and_bounds, scan_many_answers_each_range_as_scan,
};
pub use tenants::{tenants_are_apart, tenants_are_listed};
pub use trailing::keys_differing_only_in_trailing_bytes_are_distinct;
pub use writers::writers_are_serializable;

use crate::storage::backend::Backend;
use crate::testkit::report::Check;

/// Every check of this module, by name (the list is
/// `leasehold_host::__kv_checks!`'s).
pub fn checks<B: Backend>() -> Vec<Check<B>> {
    crate::__kv_checks!(checks(B))
}
