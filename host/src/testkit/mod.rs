//! The conformance kit: what any storage backend runs against itself to
//! know it keeps the storage trait's promises. It owns the checks and the
//! way they report; it must never need anything of a backend beyond the
//! public trait, so a third party's backend is checked exactly as the
//! shipped ones are.
//!
//! Two parts:
//! - [`kv`]: every promise of [`Backend`] and [`Txn`]
//!   checked directly: point reads of present and absent keys, bytewise
//!   order both ways, scan limits, byte caps and the stopped-early flag on
//!   every shape of scan, scans across pages, empty batches, deletes (beside
//!   keys that extend them and keys they extend), atomic batches (as large
//!   as one call may stage, under a concurrent reader), read transactions
//!   that refuse a batch, commits seen once acknowledged, snapshot reads
//!   against a concurrent commit, serializable writers (the races forced,
//!   made of puts and of deletes), tenants kept apart whatever names a
//!   backend might merge, the tenant listing, and keys that differ only in
//!   trailing bytes (spaces, zero bytes, a longer key sharing a prefix)
//!   kept distinct by every read, scan, write, delete and tenant; readers
//!   and writers begin through every entry point the engine calls;
//! - [`scenarios`]: the whole scenario suite through the component on the
//!   backend.
//!
//! A backend's tests run all of it with one macro call, one `#[test]` per
//! check:
//!
//! ```ignore
//! #[cfg(test)]
//! mod conformance {
//!     leasehold_host::conformance_tests!(|| my_store::MyBackend::in_memory());
//! }
//! ```
//!
//! `make` is called once per check and must answer a backend with nothing
//! in it that a check could see: a fresh store, or a fresh schema or
//! namespace of a shared server ([`Guarded`] drops such a namespace with
//! the backend). Checks use tenant names of their own, so they may also
//! share one store.

mod job_values;
pub mod kv;
mod report;
pub mod scenarios;
mod schedule_values;
mod search_values;
mod steps;
mod subscription_values;

pub use report::{Check, Failure, assert_passes, run_one};

use crate::storage::backend::{Backend, forward_backend};

/// Every check of the kit, the scenario suite last.
pub fn checks<B: Backend>() -> Vec<Check<B>> {
    let mut all = kv::checks::<B>();
    all.push(("scenarios", |make| scenarios::run_scenarios(make)));
    all
}

/// Runs every check on backends from `make` and answers every failure (an
/// empty list: the backend conforms). No check panics or hangs on a
/// misbehaving backend; a backend that panics fails the check it was in.
pub fn run_all<B: Backend>(make: &dyn Fn() -> B) -> Vec<Failure> {
    checks::<B>()
        .into_iter()
        .filter_map(|(name, check)| run_one(name, check, make).err())
        .collect()
}

/// A backend with something that must live as long as it, and go with it:
/// a fresh database schema, a temporary directory.
pub struct Guarded<B, G> {
    backend: B,
    _guard: G,
}

impl<B: Backend, G: Send + Sync + 'static> Guarded<B, G> {
    /// `backend`, keeping `guard` until it is dropped.
    pub fn new(backend: B, guard: G) -> Self {
        Guarded {
            backend,
            _guard: guard,
        }
    }
}

forward_backend!([B: Backend, G: Send + Sync + 'static] Guarded<B, G>, self => self.backend);

/// One `#[test]` per check of the kit, on backends from `$make` (an
/// expression that calls to a fresh backend: a closure or a function
/// path). Use it inside a test module of the backend's crate.
#[macro_export]
macro_rules! conformance_tests {
    ($make:expr) => {
        $crate::__kv_checks!(tests($make));
        #[test]
        fn scenarios() {
            $crate::testkit::assert_passes($crate::testkit::run_one(
                "scenarios",
                |make| $crate::testkit::scenarios::run_scenarios(make),
                &$make,
            ));
        }
    };
}

/// The kv checks, named once: [`kv::checks`] and [`conformance_tests!`]
/// both expand from this list, so a check cannot be in one and not the
/// other.
#[doc(hidden)]
#[macro_export]
macro_rules! __kv_checks {
    (@list tests ($make:expr); $($check:ident,)+) => {
        $(
            #[test]
            fn $check() {
                $crate::testkit::assert_passes($crate::testkit::run_one(
                    stringify!($check),
                    |make| $crate::testkit::kv::$check(make),
                    &$make,
                ));
            }
        )+
    };
    (@list checks ($backend:ty); $($check:ident,)+) => {
        vec![$(
            (
                stringify!($check),
                $crate::testkit::kv::$check::<$backend>
                    as fn(&dyn Fn() -> $backend) -> Result<(), $crate::testkit::Failure>,
            ),
        )+]
    };
    ($mode:ident $arg:tt) => {
        $crate::__kv_checks! { @list $mode $arg;
            empty_store_reads_nothing,
            puts_read_back,
            absent_keys_read_as_absent,
            keys_differing_only_in_trailing_bytes_are_distinct,
            bytewise_order_both_ways,
            scan_limits_and_bounds,
            scan_byte_caps,
            scan_flags_on_every_shape,
            scan_many_answers_each_range_as_scan,
            long_scans_skip_nothing,
            largest_key_and_value,
            empty_batches_commit_nothing,
            deletes_of_absent_keys,
            deleted_keys_are_gone,
            deletes_take_no_longer_or_shorter_keys,
            batches_are_all_or_nothing,
            read_transactions_refuse_batches,
            commits_are_seen_once_acknowledged,
            reads_see_one_snapshot,
            batches_land_whole_under_a_concurrent_reader,
            largest_batches_land_whole,
            writers_are_serializable,
            tenants_are_apart,
            tenants_are_listed,
        }
    };
}
