//! How many shards a keyspace's counters have: chosen once from what the
//! host says of its writers, recorded in the layout mark, and followed by
//! every later call whatever its host says.

use super::*;
use crate::kv::{Calls, Kv};
use crate::model::Settlement;
use crate::schema::{self, Shards};
use crate::{store, tasks, timers};

/// A keyspace whose host says it is the only writer, as redb's does.
fn sole() -> MemKv {
    MemKv {
        sole_writer: true,
        ..MemKv::new()
    }
}

fn mark(kv: &MemKv) -> Option<&[u8]> {
    kv.map.get(schema::layout().as_bytes()).map(Vec::as_slice)
}

/// Every shard key stored for counter `name`, as shard numbers.
fn stored_shards(kv: &MemKv, name: &str) -> Vec<u8> {
    (0..schema::MAX_SHARDS)
        .filter(|&s| {
            kv.map
                .contains_key(schema::counter_shard(name, s).as_bytes())
        })
        .collect()
}

/// Opens, claims and settles tasks and arms and sweeps timers, so every
/// counter moves.
fn busy(kv: &mut MemKv) {
    for i in 0..40 {
        open(kv, task(&format!("t{i:02}")));
        arm(kv, timer(&format!("r{}", i % 3), &format!("e{i:02}"), i));
    }
    let lease = crate::model::Lease {
        now: 10,
        lease_ms: 100,
    };
    for i in 0..10 {
        let id = format!("t{i:02}");
        tasks::claim(kv, &id, "ann", &[], Some(&lease), None).expect("claim");
    }
    for i in 10..15 {
        let id = format!("t{i:02}");
        tasks::settle(kv, &id, Settlement::Completed, None, None, None).expect("settle");
    }
    timers::claim_due(kv, 20, 10, 1_000).expect("sweep");
    timers::disarm_run(kv, "r1").expect("disarm");
}

#[test]
fn a_sole_writer_lays_out_one_shard_per_counter() {
    let mut kv = sole();
    busy(&mut kv);
    assert_eq!(
        mark(&kv),
        Some(schema::layout_mark(Shards::SOLE).as_bytes())
    );
    for name in schema::COUNTERS {
        assert!(stored_shards(&kv, name).iter().all(|&s| s == 0), "{name}");
    }
    assert_eq!(tasks::open_count(&mut kv), Ok(35));
    assert_eq!(tasks::leased_count(&mut kv), Ok(10));
    assert_healthy(&mut kv);
}

#[test]
fn concurrent_writers_lay_out_64_shards() {
    let mut kv = MemKv::new();
    busy(&mut kv);
    assert_eq!(
        mark(&kv),
        Some(schema::layout_mark(Shards::SHARED).as_bytes())
    );
    // Each writer slot counts in a shard of its own.
    kv.slot = 40;
    open(&mut kv, task("late"));
    kv.slot = 0;
    tasks::settle(&mut kv, "late", Settlement::Completed, None, None, None).expect("settle");
    assert!(stored_shards(&kv, schema::OPEN_TASKS).contains(&40));
    assert_eq!(tasks::open_count(&mut kv), Ok(35));
    assert_eq!(tasks::leased_count(&mut kv), Ok(10));
    assert_healthy(&mut kv);
}

/// The mark, not the host, decides: a keyspace moved between hosts keeps
/// counting where its rows were counted.
#[test]
fn the_mark_outranks_what_a_later_host_says() {
    for first_sole in [true, false] {
        let mut kv = MemKv {
            sole_writer: first_sole,
            ..MemKv::new()
        };
        busy(&mut kv);
        let laid_out = mark(&kv).map(<[u8]>::to_vec);
        kv.sole_writer = !first_sole;
        for i in 40..60 {
            open(&mut kv, task(&format!("t{i:02}")));
            arm(&mut kv, timer("r9", &format!("e{i:02}"), i));
        }
        tasks::settle(&mut kv, "t00", Settlement::Completed, None, None, None).expect("settle");
        timers::disarm_run(&mut kv, "r0").expect("disarm");
        assert_eq!(mark(&kv).map(<[u8]>::to_vec), laid_out);
        if first_sole {
            assert!(
                stored_shards(&kv, schema::OPEN_TASKS)
                    .iter()
                    .all(|&s| s == 0)
            );
        }
        assert_eq!(
            tasks::open_count(&mut kv),
            Ok(54),
            "first sole: {first_sole}"
        );
        assert_eq!(
            tasks::leased_count(&mut kv),
            Ok(9),
            "first sole: {first_sole}"
        );
        assert_healthy(&mut kv);
    }
}

/// A layout-3 keyspace has 64 shards and a mark of `3`: read and written as
/// such, even by a host that would lay out one shard; its first change
/// moves the mark to this component's version, keeping the shape.
#[test]
fn a_layout_3_keyspace_counts_in_its_64_shards() {
    let mut kv = MemKv::new();
    kv.map.insert(schema::layout().into_bytes(), b"3".to_vec());
    busy(&mut kv);
    kv.sole_writer = true;
    open(&mut kv, task("late"));
    assert_eq!(
        mark(&kv),
        Some(schema::layout_mark_from(Shards::SHARED, Some(3)).as_bytes())
    );
    let late = Shards::SHARED.task("late");
    assert!(
        kv.map
            .contains_key(schema::counter_shard(schema::OPEN_TASKS, late).as_bytes())
    );
    // The host's keyspaces have one shard, so the count reads the mark and
    // one shard, then the other 63 in a second batch.
    kv.calls = Calls::default();
    assert_eq!(tasks::open_count(&mut kv), Ok(36));
    assert_eq!(kv.calls.get_manys, 2, "{:?}", kv.calls);
    assert_eq!(kv.calls.batched_keys, 65, "{:?}", kv.calls);
    assert_healthy(&mut kv);
}

/// On its own host's keyspaces a count is one batch of two keys: the mark
/// and the one shard.
#[test]
fn a_sole_writers_count_reads_the_mark_and_one_shard() {
    let mut kv = sole();
    busy(&mut kv);
    type Count = fn(&mut dyn Kv) -> Result<u64, StoreError>;
    let counts: [Count; 3] = [
        |kv| tasks::open_count(kv),
        |kv| tasks::leased_count(kv),
        |kv| timers::pending_count(kv),
    ];
    for count in counts {
        kv.calls = Calls::default();
        count(&mut kv).expect("counts");
        let expected = Calls {
            gets: 2,
            get_manys: 1,
            batched_keys: 2,
            asks: 1,
            ..Calls::default()
        };
        assert_eq!(kv.calls, expected);
    }
}

#[test]
fn a_mark_naming_no_shard_count_is_refused_as_corrupt() {
    for bad in [
        &b"4/0"[..],
        b"4/65",
        b"4/064",
        b"4/+8",
        b"4/",
        b"4/x",
        b"4",
        b"4/1 ",
        b"5/0",
        b"5/65",
        b"5/08",
        b"5/-1",
        b"5",
        b"5/64/",
        b"6/0",
        b"6/65",
        b"6",
        b"7/0",
        b"7/65",
        b"7",
        b"8/0",
        b"8/65",
        b"8",
        b"8/64/",
        b"8/64/from-7",
        b"8/64/from-2",
        b"8/64/from-05",
        b"8/64/to-5",
        b"8/64/from-5/x",
        b"08/64",
    ] {
        let mut kv = MemKv::new();
        kv.map.insert(schema::layout().into_bytes(), bad.to_vec());
        let err = fails_cleanly(&mut kv, |kv| tasks::open(kv, &task("t")));
        assert!(
            matches!(&err, StoreError::Corrupt(d) if d.contains("layout")),
            "{:?}: {err:?}",
            String::from_utf8_lossy(bad)
        );
        let err = fails_cleanly(&mut kv, tasks::open_count);
        assert!(matches!(err, StoreError::Corrupt(_)), "{err:?}");
    }
    for good in [1u8, 2, 7, 63, 64] {
        let mark = format!("4/{good}");
        assert_eq!(
            store::known_layout(Some(mark.as_bytes())),
            Ok(Shards::by_row(good))
        );
        for apart in ["5", "6"] {
            let mark = format!("{apart}/{good}");
            assert_eq!(
                store::known_layout(Some(mark.as_bytes())),
                Ok(Shards::record_apart(good))
            );
        }
        for mark in [format!("7/{good}"), format!("8/{good}")] {
            assert_eq!(
                store::known_layout(Some(mark.as_bytes())),
                Ok(Shards::new(good))
            );
        }
        for (origin, shards) in [
            (3, Shards::by_row(good)),
            (4, Shards::by_row(good)),
            (5, Shards::record_apart(good)),
            (6, Shards::record_apart(good)),
        ] {
            let mark = format!("8/{good}/from-{origin}");
            assert_eq!(store::known_layout(Some(mark.as_bytes())), Ok(shards));
        }
    }
}

/// A shard key past the keyspace's count is no counter's: a verb never reads
/// it, so the check must name it.
#[test]
fn a_shard_beyond_the_layout_is_found_by_the_check() {
    let mut kv = sole();
    busy(&mut kv);
    kv.map.insert(
        schema::counter_shard(schema::OPEN_TASKS, 5).into_bytes(),
        1u64.to_be_bytes().to_vec(),
    );
    let found = check::check(&mut kv).expect("the check runs");
    assert_eq!(found.len(), 1, "{found:#?}");
    assert_eq!(found[0].structure, "counter");
    assert!(found[0].detail.contains("no counter's shard"), "{found:#?}");
}

/// The first change this component records in a keyspace of an earlier
/// layout moves its mark to this component's version, in the same call,
/// keeping the keys' shape and naming the layout it came from; reads never
/// move it, and a later change leaves it as it is.
#[test]
fn the_first_change_moves_an_earlier_mark_and_reads_never_do() {
    let by_row = |n| Shards::by_row(n).expect("a shard count");
    let apart = |n| Shards::record_apart(n).expect("a shard count");
    for (old, moved) in [
        ("3", schema::layout_mark_from(by_row(64), Some(3))),
        ("4/8", schema::layout_mark_from(by_row(8), Some(4))),
        ("5/64", schema::layout_mark_from(apart(64), Some(5))),
        ("6/1", schema::layout_mark_from(apart(1), Some(6))),
        ("7/64", schema::layout_mark(Shards::SHARED)),
    ] {
        let mut kv = MemKv::new();
        kv.map
            .insert(schema::layout().into_bytes(), old.as_bytes().to_vec());
        assert_eq!(tasks::open_count(&mut kv), Ok(0));
        assert_eq!(timers::pending_count(&mut kv), Ok(0));
        crate::changes::feed(&mut kv, None, 10).expect("feed");
        assert_eq!(check::check(&mut kv), Ok(Vec::new()));
        assert_eq!(mark(&kv), Some(old.as_bytes()), "a read moved {old}");
        let sets = kv.calls.sets;
        open(&mut kv, task("t"));
        assert_eq!(mark(&kv), Some(moved.as_bytes()), "from {old}");
        let first = kv.calls.sets - sets;
        tasks::settle(&mut kv, "t", Settlement::Completed, None, None, None).expect("settle");
        assert_eq!(mark(&kv), Some(moved.as_bytes()), "from {old}");
        assert_eq!(
            store::known_layout(Some(old.as_bytes())),
            store::known_layout(Some(moved.as_bytes()))
        );
        assert!(first > 1, "the move rides in the change's own call");
        assert_healthy(&mut kv);
    }
}
