//! Sharded counters: a counter is the sum of its shards, and calls the host
//! runs side by side (different writer slots) on different tasks or timers
//! share no key they write, so a serializable store never makes one of them
//! retry because of the other. Layout-4 keyspaces spread by row instead:
//! there calls on tasks in different shards share no key.

use std::collections::BTreeSet;

use super::*;
use crate::kv::{self, Entry, KvError, Snapshot, Write};
use crate::model::{Lease, Settlement};
use crate::schema;
use crate::{tasks, timers};

/// Every key a call read or wrote, as a serializable store sees it.
#[derive(Debug, Default)]
struct Footprint {
    read: BTreeSet<Vec<u8>>,
    /// Scanned ranges, `start..end` (no end: unbounded).
    ranges: Vec<(Vec<u8>, Option<Vec<u8>>)>,
    written: BTreeSet<Vec<u8>>,
}

impl Footprint {
    fn covers(&self, key: &[u8]) -> bool {
        self.read.contains(key)
            || self.written.contains(key)
            || self
                .ranges
                .iter()
                .any(|(lo, hi)| key >= lo.as_slice() && hi.as_deref().is_none_or(|h| key < h))
    }

    /// The keys one call wrote that the other read, scanned or wrote: what
    /// makes two concurrent serializable transactions conflict.
    fn conflicts(&self, other: &Footprint) -> Vec<Vec<u8>> {
        let mut out: Vec<Vec<u8>> = self
            .written
            .iter()
            .filter(|k| other.covers(k))
            .chain(other.written.iter().filter(|k| self.covers(k)))
            .cloned()
            .collect();
        out.sort();
        out.dedup();
        out
    }
}

/// A snapshot that records what the call reads.
struct Recording<'a> {
    kv: &'a mut MemKv,
    print: Footprint,
}

impl Snapshot for Recording<'_> {
    fn concurrent_writers(&mut self) -> bool {
        Snapshot::concurrent_writers(&mut *self.kv)
    }

    fn writer_slot(&mut self) -> u32 {
        Snapshot::writer_slot(&mut *self.kv)
    }

    fn call_time(&mut self) -> i64 {
        Snapshot::call_time(&mut *self.kv)
    }

    fn get(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>, KvError> {
        self.print.read.insert(key.to_vec());
        Snapshot::get(&mut *self.kv, key)
    }

    fn get_many(&mut self, keys: &[Vec<u8>]) -> Result<Vec<Option<Vec<u8>>>, KvError> {
        self.print.read.extend(keys.iter().cloned());
        Snapshot::get_many(&mut *self.kv, keys)
    }

    fn scan(
        &mut self,
        start: &[u8],
        end: Option<&[u8]>,
        limit: u32,
        reverse: bool,
    ) -> Result<Vec<Entry>, KvError> {
        self.print
            .ranges
            .push((start.to_vec(), end.map(<[u8]>::to_vec)));
        Snapshot::scan(&mut *self.kv, start, end, limit, reverse)
    }
}

/// Runs one call as the component does, committing it, and answers what it
/// read and wrote.
#[track_caller]
fn footprint<T, E: fmt::Debug>(
    kv: &mut MemKv,
    call: impl FnOnce(&mut kv::Buffered<&mut Recording<'_>>) -> Result<T, E>,
) -> Footprint {
    let mut rec = Recording {
        kv,
        print: Footprint::default(),
    };
    let (answer, batch) = kv::buffered(&mut rec, call);
    answer.expect("the call succeeds");
    let mut print = rec.print;
    for w in &batch {
        match w {
            Write::Put(k, _) | Write::Delete(k) => print.written.insert(k.clone()),
        };
    }
    kv.apply(batch);
    print
}

/// An id whose task counts in another shard than `id`'s, or the same one,
/// where shards are spread by row.
fn id_in(same_shard_as: &str, same: bool) -> String {
    let want = schema::Shards::SHARED.task(same_shard_as);
    (0..)
        .map(|i| format!("x{i}"))
        .find(|id| (schema::Shards::SHARED.task(id) == want) == same)
        .expect("some id")
}

/// A keyspace laid out by an earlier component: 64 shards, spread by row.
fn layout_4() -> MemKv {
    let mut kv = MemKv::new();
    kv.map
        .insert(schema::layout().into_bytes(), b"4/64".to_vec());
    kv
}

fn by_row() -> schema::Shards {
    schema::Shards::by_row(64).expect("64 shards")
}

#[test]
fn the_counts_sum_every_shard_however_the_writers_spread_them() {
    for layout in [5, 4] {
        let mut kv = if layout == 5 {
            MemKv::new()
        } else {
            layout_4()
        };
        let approver = names(&["a"]);
        let lease = Lease {
            now: 1,
            lease_ms: 100,
        };
        // Each call by another writer slot: a task opened in one shard is
        // claimed and settled in others.
        let mut slot = 0u32;
        let mut next = |kv: &mut MemKv| {
            slot = (slot + 7) % 97;
            kv.slot = slot;
        };
        for i in 0..500 {
            next(&mut kv);
            open(&mut kv, task(&format!("t{i:03}")).roles(&["a"]));
        }
        for i in 0..200 {
            next(&mut kv);
            let id = format!("t{i:03}");
            tasks::claim(&mut kv, &id, "bob", &approver, Some(&lease), None).expect("claims");
        }
        // Settled all by one writer, whose shard then falls below zero
        // where shards are spread by writer.
        for i in 0..100 {
            kv.slot = 63;
            let id = format!("t{i:03}");
            tasks::settle(&mut kv, &id, Settlement::Completed, None, None, None).expect("settles");
        }
        for i in 0..300 {
            next(&mut kv);
            arm(&mut kv, timer(&format!("r{}", i % 3), &format!("e{i}"), i));
        }
        next(&mut kv);
        assert_eq!(timers::disarm_run(&mut kv, "r0"), Ok(100));
        assert_eq!(tasks::open_count(&mut kv), Ok(400));
        assert_eq!(tasks::leased_count(&mut kv), Ok(100));
        assert_eq!(timers::pending_count(&mut kv), Ok(200));
        let shards = if layout == 5 {
            schema::Shards::SHARED
        } else {
            by_row()
        };
        let each: Vec<i64> = (0..schema::MAX_SHARDS)
            .map(|s| {
                crate::store::read_shard(&mut kv, schema::OPEN_TASKS, s, shards).expect("a shard")
            })
            .collect();
        assert_eq!(each.iter().sum::<i64>(), 400);
        assert!(each.iter().filter(|&&n| n != 0).count() > 50, "{each:?}");
        // Spread by row no shard goes below zero; spread by writer, the
        // shards that settled more than they opened do.
        assert_eq!(each.iter().any(|&n| n < 0), layout == 5, "{each:?}");
        assert_healthy(&mut kv);
    }
}

#[test]
fn a_call_counts_only_in_its_writers_shard() {
    let mut kv = MemKv::new();
    kv.slot = 69;
    open(&mut kv, task("t1"));
    kv.slot = 9;
    tasks::settle(&mut kv, "t1", Settlement::Completed, None, None, None).expect("settles");
    let keys: Vec<(Vec<u8>, Vec<u8>)> = kv
        .map
        .iter()
        .filter(|(k, _)| k.starts_with(schema::counters().as_bytes()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    assert_eq!(
        keys,
        [
            (
                schema::counter_shard(schema::OPEN_TASKS, 5).into_bytes(),
                1i64.to_be_bytes().to_vec()
            ),
            (
                schema::counter_shard(schema::OPEN_TASKS, 9).into_bytes(),
                (-1i64).to_be_bytes().to_vec()
            ),
        ],
        "slot 69 is shard 5 of 64; an absent shard is zero, and a zero is not written"
    );
    assert_eq!(tasks::open_count(&mut kv), Ok(0));
    assert_healthy(&mut kv);
}

#[test]
fn in_a_layout_4_keyspace_a_task_counts_only_in_its_own_shard() {
    let mut kv = layout_4();
    kv.slot = 3;
    open(&mut kv, task("t1"));
    let own = schema::Shards::SHARED.task("t1");
    for s in 0..schema::MAX_SHARDS {
        let n =
            crate::store::read_shard(&mut kv, schema::OPEN_TASKS, s, by_row()).expect("a shard");
        assert_eq!(n, i64::from(s == own), "shard {s}");
    }
    let keys: Vec<&Vec<u8>> = kv
        .map
        .keys()
        .filter(|k| k.starts_with(schema::counters().as_bytes()))
        .collect();
    assert_eq!(
        keys,
        [&schema::counter_shard(schema::OPEN_TASKS, own).into_bytes()],
        "an absent shard is zero, and a zero is not written"
    );
    assert_eq!(
        kv.map.get(schema::layout().as_bytes()).map(Vec::as_slice),
        Some(schema::layout_mark_from(by_row(), Some(4)).as_bytes()),
        "the mark moves to this component's version, keeping the shape"
    );
}

/// The point of sharding: two calls on different tasks, by writers the host
/// runs side by side, share no key one of them writes, whichever verbs they
/// are, even tasks a layout spread by row would count in one shard, and the
/// feed entries they record go to their own slots; by one writer slot they
/// share exactly that slot's shards and its feed head. In a layout-4
/// keyspace, tasks in different shards share no key, and tasks in one shard
/// that one (and the feed head of their one slot).
#[test]
fn calls_by_different_writers_touch_different_keys() {
    let roles = names(&["a"]);
    let lease = Lease {
        now: 1,
        lease_ms: 100,
    };
    for (layout, same) in [(5, false), (5, true), (4, false), (4, true)] {
        let a = "t1".to_owned();
        // Layout 5: always tasks of one shard by row, told apart by slot.
        let b = id_in(&a, layout == 5 || same);
        let mut kv = if layout == 5 {
            MemKv::new()
        } else {
            layout_4()
        };
        // Another task already there, so the layout mark is written.
        open(&mut kv, task("seed"));
        let slots = if same { (4, 4) } else { (4, 5) };
        let pair = |kv: &mut MemKv, verb: &str| -> (Footprint, Footprint) {
            let run = |kv: &mut MemKv, id: &str| match verb {
                "open" => footprint(kv, |kv| {
                    tasks::open(kv, &task(id).roles(&["a"]).due(50)).map(drop)
                }),
                "claim" => footprint(kv, |kv| {
                    tasks::claim(kv, id, "bob", &roles, Some(&lease), None).map(drop)
                }),
                "renew" => footprint(kv, |kv| tasks::renew(kv, id, "bob", 5, 100, None).map(drop)),
                "release" => footprint(kv, |kv| tasks::release(kv, id, "bob", None)),
                "escalate" => footprint(kv, |kv| tasks::escalate(kv, id, None).map(drop)),
                "settle" => footprint(kv, |kv| {
                    tasks::settle(kv, id, Settlement::Completed, None, None, None).map(drop)
                }),
                other => panic!("no verb {other}"),
            };
            kv.slot = slots.0;
            let fa = run(kv, &a);
            kv.slot = slots.1;
            (fa, run(kv, &b))
        };
        for verb in ["open", "claim", "renew", "release", "escalate", "settle"] {
            let (fa, fb) = pair(&mut kv, verb);
            let conflicts = fa.conflicts(&fb);
            if same {
                // Only the shard they share, when the verb moves a count
                // (renew moves none; escalate moves the search count of a
                // state), and the feed head of their one slot, which every
                // change moves.
                let shard = if layout == 5 {
                    schema::Shards::SHARED.writer(slots.0)
                } else {
                    schema::Shards::SHARED.task(&a)
                };
                // A fresh keyspace keeps its heads beside its feed; layout 4
                // apart from it.
                let spelt = if layout == 5 {
                    schema::Shards::SHARED
                } else {
                    schema::Shards::by_row(64).expect("64 shards")
                };
                let head =
                    schema::feed_head(spelt, schema::Shards::SHARED.writer(slots.0)).into_bytes();
                assert!(conflicts.contains(&head), "{verb}: {conflicts:?}");
                let moves = verb != "renew";
                assert_eq!(conflicts.len() > 1, moves, "{verb}: {conflicts:?}");
                assert!(
                    conflicts.iter().all(|k| *k == head
                        || schema::COUNTERS
                            .iter()
                            .any(|n| *k == schema::counter_shard(n, shard).into_bytes())
                        || crate::model::ALL_STATES
                            .iter()
                            .any(|s| *k == schema::search_count(s.as_str(), shard).into_bytes())),
                    "{verb}: {conflicts:?}"
                );
            } else {
                assert_eq!(conflicts, Vec::<Vec<u8>>::new(), "{verb}: {a} and {b}");
            }
        }
        assert_healthy(&mut kv);
    }
}

#[test]
fn timer_calls_by_different_writers_touch_different_keys() {
    for layout in [5, 4] {
        let mut kv = if layout == 5 {
            MemKv::new()
        } else {
            layout_4()
        };
        arm(&mut kv, timer("seed", "e", 1));
        let a = ("r", "a".to_owned());
        // Layout 5: a timer of the same shard by row, told apart by slot.
        let b = (0..)
            .map(|i| ("r", format!("e{i}")))
            .find(|(r, e)| {
                (schema::Shards::SHARED.timer(r, e) == schema::Shards::SHARED.timer(a.0, &a.1))
                    == (layout == 5)
                    && e != &a.1
            })
            .expect("some effect");
        kv.slot = 1;
        let fa = footprint(&mut kv, |kv| timers::arm(kv, &timer(a.0, &a.1, 10)));
        kv.slot = 2;
        let fb = footprint(&mut kv, |kv| timers::arm(kv, &timer(b.0, &b.1, 20)));
        assert_eq!(fa.conflicts(&fb), Vec::<Vec<u8>>::new());
        kv.slot = 2;
        let fa = footprint(&mut kv, |kv| timers::disarm(kv, a.0, &a.1));
        kv.slot = 1;
        let fb = footprint(&mut kv, |kv| timers::disarm(kv, b.0, &b.1));
        assert_eq!(fa.conflicts(&fb), Vec::<Vec<u8>>::new());
        assert_eq!(timers::pending_count(&mut kv), Ok(1));
        assert_healthy(&mut kv);
    }
}
