//! What the reads over the whole keyspace cost, in kv calls: a count reads
//! the layout mark and every shard in one batch however many rows count in
//! it, and the consistency check reads each chunk's rows ahead in a few
//! batches, not a round trip a key.

use super::cost_support::{assert_one_batch_of_every_shard, counted};
use super::*;
use crate::{tasks, timers};

#[test]
fn open_count_reads_every_shard_in_one_batch_however_many_tasks() {
    let mut kv = MemKv::new();
    for i in 0..3_000 {
        open(&mut kv, task(&format!("t{i}")).roles(&["a"]));
    }
    assert_eq!(tasks::open_count(&mut kv), Ok(3_000));
    assert_one_batch_of_every_shard(&mut kv, |kv| tasks::open_count(kv));
}

#[test]
fn pending_count_reads_every_shard_in_one_batch_however_many_timers() {
    let mut kv = MemKv::new();
    for i in 0..3_000 {
        arm(&mut kv, timer(&format!("r{}", i % 7), &format!("e{i}"), i));
    }
    assert_eq!(timers::pending_count(&mut kv), Ok(3_000));
    assert_one_batch_of_every_shard(&mut kv, |kv| timers::pending_count(kv));
}

#[test]
fn the_check_reads_ahead_a_few_batches_a_chunk_not_a_trip_a_key() {
    let mut kv = MemKv::new();
    let approver = names(&["approver"]);
    for i in 0..1_200 {
        let id = format!("t{i:04}");
        open(
            &mut kv,
            task(&id)
                .roles(&["approver"])
                .in_case(&format!("c{}", i % 7))
                .due(1_000 + i64::from(i)),
        );
        if i % 3 == 0 {
            tasks::claim(&mut kv, &id, "bob", &approver, None, None).expect("claims");
        }
    }
    for i in 0..400 {
        arm(
            &mut kv,
            timer(&format!("r{}", i % 5), &format!("e{i}"), i64::from(i)),
        );
    }
    let direct = crate::check::check(&mut kv).expect("the check runs");
    assert!(direct.is_empty(), "{direct:?}");
    let (found, calls) = counted(&mut kv, |kv| kv.call(|kv| crate::check::check(kv)));
    assert_eq!(found.expect("the check runs over the buffer"), direct);
    // Every point read of a chunk's entries was read ahead: what is left one
    // key at a time is the layout, the shards and the feed's heads.
    let single = calls.gets - calls.batched_keys;
    assert!(
        single <= 16,
        "{single} point reads one at a time: {calls:?}"
    );
    // A scan per chunk and at most a few batches beside it.
    assert!(
        calls.round_trips() <= 3 * calls.scans + 16,
        "{} round trips for {} scans: {calls:?}",
        calls.round_trips(),
        calls.scans
    );
    // An embedded store, the keyspace's only writer, answers point reads in
    // place: nothing is read ahead there, and the check finds the same.
    kv.sole_writer = true;
    let (found, calls) = counted(&mut kv, |kv| kv.call(|kv| crate::check::check(kv)));
    assert_eq!(found.expect("the check runs over the buffer"), direct);
    assert!(calls.get_manys <= 4, "{calls:?}");
}
