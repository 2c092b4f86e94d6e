//! The counting the cost tests share: the kv calls a call makes, counted
//! from zero, and what every count must cost. Fixtures only, no test.

use super::*;
use crate::kv::{Calls, Kv};

/// Runs `f` with the call counters reset, answering its result and the calls
/// it made.
pub(super) fn counted<T>(kv: &mut MemKv, f: impl FnOnce(&mut MemKv) -> T) -> (T, Calls) {
    kv.calls = Calls::default();
    let out = f(kv);
    (out, kv.calls)
}

/// What a count costs, directly and over the call's buffer: the layout mark
/// and the counter's 64 shards, in one batched read and nothing else, however
/// many rows are counted.
#[track_caller]
pub(super) fn assert_one_batch_of_every_shard(
    kv: &mut MemKv,
    count: fn(&mut dyn Kv) -> Result<u64, StoreError>,
) {
    let (_, calls) = counted(kv, |kv| count(kv));
    let expected = Calls {
        gets: 65,
        get_manys: 1,
        batched_keys: 65,
        // What the host's keyspaces have, so that one batch holds them.
        asks: 1,
        ..Calls::default()
    };
    assert_eq!(calls, expected);
    assert_eq!(calls.round_trips(), 1, "{calls:?}");
    let (_, calls) = counted(kv, |kv| kv.call(|kv| count(kv)));
    assert_eq!(calls, expected, "over the buffer");
}
