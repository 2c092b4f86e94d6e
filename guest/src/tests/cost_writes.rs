//! What the writes cost, in kv calls, beside a large backlog: a verb on one
//! task or timer touches only its own row, shards and log, in one crossing
//! over the call's buffer, and `disarm-run` reads the logs and shards of the
//! timers it moves in batches, not a crossing a timer.

use super::cost_support::counted;
use super::*;
use crate::kv::Calls;
use crate::{tasks, timers};

#[test]
fn claim_and_settle_touch_only_their_own_task() {
    let mut kv = MemKv::new();
    for i in 0..3_000 {
        open(&mut kv, task(&format!("t{i:05}")).roles(&["a"]).due(i));
    }
    // The writer's first claim writes its search count shards of every
    // state, once; what is measured is every claim after.
    tasks::claim(&mut kv, "t00000", "bob", &names(&["a"]), None, None).expect("claims");
    let (t, calls) = counted(&mut kv, |kv| {
        tasks::claim(kv, "t01500", "bob", &names(&["a"]), None, None)
    });
    t.expect("claims");
    // The layout mark, the row, a shard, the task's log, the feed head and
    // the search counts of the two states it moves between, over a bare
    // store that keeps nothing it read (so the mark is read again by the
    // writes).
    assert_eq!(calls.scans, 0, "{calls:?}");
    assert!(calls.reads() <= 10, "{calls:?}");
    let (moved, calls) = counted(&mut kv, |kv| {
        tasks::settle(
            kv,
            "t01500",
            crate::model::Settlement::Completed,
            None,
            None,
            None,
        )
    });
    assert_eq!(moved, Ok(true));
    // As the claim, and both of the open and leased counts' shards.
    assert_eq!(calls.scans, 0, "{calls:?}");
    assert!(calls.reads() <= 11, "{calls:?}");
}

/// As the component runs them, over the call's buffer, the verbs on one task
/// or timer cross to the store once: the layout mark, the row, its own
/// counter shards, its log and the feed head in one batch (never all 64
/// shards), and for a task the search count shards of its own writer, one
/// per state, since its state is known only once its row is.
#[test]
fn verbs_on_one_task_or_timer_make_one_crossing() {
    use crate::model::{Lease, Settlement};
    let mut kv = MemKv::new();
    for i in 0..1_000 {
        open(&mut kv, task(&format!("t{i:05}")).roles(&["a"]));
    }
    let lease = Lease {
        now: 10,
        lease_ms: 1_000,
    };
    let one = Calls {
        gets: 6,
        get_manys: 1,
        batched_keys: 6,
        ..Calls::default()
    };
    let one_task = Calls {
        gets: 12,
        batched_keys: 12,
        ..one
    };
    let crossings = |c: Calls| (c.round_trips(), c.batched_keys, c.gets);
    let (t, calls) = counted(&mut kv, |kv| kv.call(|kv| tasks::open(kv, &task("new"))));
    t.expect("opens");
    assert_eq!(crossings(calls), crossings(one_task), "open: {calls:?}");
    let (t, calls) = counted(&mut kv, |kv| {
        kv.call(|kv| tasks::claim(kv, "t00500", "bob", &names(&["a"]), Some(&lease), None))
    });
    t.expect("claims");
    assert_eq!(crossings(calls), crossings(one_task), "claim: {calls:?}");
    // What the host's keyspaces have, asked once per call at most.
    assert_eq!(calls.asks, 1, "claim: {calls:?}");
    let (t, calls) = counted(&mut kv, |kv| {
        kv.call(|kv| tasks::settle(kv, "t00500", Settlement::Completed, Some("bob"), None, None))
    });
    assert_eq!(t, Ok(true));
    assert_eq!(crossings(calls), crossings(one_task), "settle: {calls:?}");
    // A timer: the layout mark, the run's seal, the row, its shard, its log
    // and the feed head.
    let (t, calls) = counted(&mut kv, |kv| {
        kv.call(|kv| timers::arm(kv, &timer("r", "e", 5)))
    });
    t.expect("arms");
    assert_eq!(crossings(calls), crossings(one), "arm: {calls:?}");
    // The layout mark, the row, its shard, its log and the feed head.
    let (t, calls) = counted(&mut kv, |kv| kv.call(|kv| timers::disarm(kv, "r", "e")));
    assert_eq!(t, Ok(true));
    assert_eq!(
        (calls.round_trips(), calls.batched_keys),
        (1, 5),
        "disarm: {calls:?}"
    );
}

/// Disarming a run moves the shards of all its timers, which it learns only
/// as it walks them: it reads their logs in one batch per walk's chunk and
/// those shards in one batch at the end, not one crossing per timer.
#[test]
fn disarm_run_reads_the_shards_it_moves_in_one_batch() {
    let mut kv = MemKv::new();
    for i in 0..200 {
        arm(&mut kv, timer("r", &format!("e{i:03}"), i));
    }
    arm(&mut kv, timer("other", "e", 1));
    let (n, calls) = counted(&mut kv, |kv| kv.call(|kv| timers::disarm_run(kv, "r")));
    assert_eq!(n, Ok(200));
    // The layout mark and the feed head (one batch, so the buffer keeps
    // them for the writes), one scan of the run's timers, one batch of their
    // 200 logs, one batch of shards.
    assert_eq!(calls.scans, 1, "{calls:?}");
    assert_eq!(calls.get_manys, 3, "{calls:?}");
    assert_eq!(calls.round_trips(), 4, "{calls:?}");
    assert!(calls.batched_keys <= 2 + 200 + 64, "{calls:?}");
    assert_eq!(timers::pending_count(&mut kv), Ok(1));
    assert_healthy(&mut kv);
}
