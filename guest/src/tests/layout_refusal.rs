//! Layouts this component cannot read: an unknown layout mark is `corrupt`
//! and a newer one `newer-layout` for every verb and the check, a keyspace
//! in layout 2 is refused by name, and `queue` blames a wrong layout before
//! an index entry it cannot read. Each refusal writes nothing.

use super::corruption_support::{corrupt_detail, findings, found, mixed_workload};
use super::*;
use crate::model::{ClaimError, QueueQuery, Settlement};
use crate::schema;
use crate::{runs, tasks, timers};

/// Runs every verb over `kv`, each of which must fail as corrupt and write
/// nothing, answering their details.
fn every_verb_refuses(kv: &mut MemKv) -> Vec<String> {
    every_verb_refuses_as(kv, corrupt_detail)
}

/// [`every_verb_refuses`], each failing as `want` accepts.
fn every_verb_refuses_as(kv: &mut MemKv, want: fn(StoreError) -> String) -> Vec<String> {
    let claim_want = |e: ClaimError| match e {
        ClaimError::Store(e) => want(e),
        other => panic!("expected a store error, got {other:?}"),
    };
    let mut out = Vec::new();
    let kv = &mut *kv;
    out.push(want(fails_cleanly(kv, |kv| tasks::get(kv, "open"))));
    out.push(want(fails_cleanly(kv, |kv| tasks::open(kv, &task("new")))));
    out.push(want(fails_cleanly(kv, |kv| tasks::open(kv, &task("open")))));
    out.push(claim_want(fails_cleanly(kv, |kv| {
        tasks::claim(kv, "open", "bob", &names(&["approver"]), None, None)
    })));
    out.push(claim_want(fails_cleanly(kv, |kv| {
        tasks::take_over(kv, "held", "bob", "ann", &names(&["approver"]), None, None)
    })));
    out.push(claim_want(fails_cleanly(kv, |kv| {
        tasks::release(kv, "held", "bob", None)
    })));
    out.push(claim_want(fails_cleanly(kv, |kv| {
        tasks::settle(kv, "open", Settlement::Completed, None, None, None)
    })));
    out.push(claim_want(fails_cleanly(kv, |kv| {
        tasks::renew(kv, "leased", "cy", 120, 50, None)
    })));
    out.push(want(fails_cleanly(kv, |kv| {
        tasks::reclaim_lapsed(kv, 1_000, 10)
    })));
    out.push(want(fails_cleanly(kv, |kv| {
        tasks::claim_next(
            kv,
            &QueueQuery {
                roles: names(&["approver"]),
                actor: Some("ann".into()),
                limit: 1,
                after: None,
            },
            None,
        )
    })));
    out.push(want(fails_cleanly(kv, tasks::leased_count)));
    out.push(want(fails_cleanly(kv, tasks::next_lease_end)));
    out.push(want(fails_cleanly(kv, |kv| {
        tasks::escalate(kv, "open", None).map_err(|e| match e {
            ClaimError::Store(s) => s,
            other => panic!("{other:?}"),
        })
    })));
    out.push(want(fails_cleanly(kv, |kv| {
        tasks::withdraw_run(kv, "run-1", &names(&["open"]))
    })));
    out.push(want(fails_cleanly(kv, |kv| {
        tasks::queue(
            kv,
            &QueueQuery {
                roles: vec![],
                actor: None,
                limit: 10,
                after: None,
            },
        )
    })));
    out.push(want(fails_cleanly(kv, |kv| {
        tasks::for_case(kv, "c", 10, None)
    })));
    out.push(want(fails_cleanly(kv, tasks::open_count)));
    out.push(want(fails_cleanly(kv, |kv| tasks::overdue(kv, 100, 10))));
    out.push(want(fails_cleanly(kv, |kv| {
        timers::arm(kv, &timer("r9", "a", 1))
    })));
    out.push(want(fails_cleanly(kv, |kv| {
        timers::claim_due(kv, 10_000, 10, 10)
    })));
    out.push(want(fails_cleanly(kv, |kv| timers::disarm(kv, "r1", "a"))));
    out.push(want(fails_cleanly(kv, |kv| timers::disarm_run(kv, "r1"))));
    out.push(want(fails_cleanly(kv, timers::pending_count)));
    out.push(want(fails_cleanly(kv, timers::next_due)));
    out.push(want(fails_cleanly(kv, |kv| runs::seal(kv, "r1", &[]))));
    out.push(want(fails_cleanly(kv, |kv| runs::is_sealed(kv, "r3"))));
    out
}

#[test]
fn an_unknown_layout_version_is_corrupt_for_every_verb() {
    let mut kv = MemKv::new();
    mixed_workload(&mut kv);
    kv.map.insert(schema::layout().into_bytes(), b"v9".to_vec());
    for d in every_verb_refuses(&mut kv) {
        assert!(d.contains("layout \"v9\""), "{d}");
    }
    assert_eq!(findings(&mut kv), found(&[("layout", "meta/layout")]));
}

/// A mark of a later version than this component's was moved there by a
/// newer build: every verb, the check too, refuses it as `newer-layout`,
/// naming both layouts, and writes nothing.
#[test]
fn a_newer_layout_is_refused_by_every_verb_naming_both() {
    let newer = schema::LAYOUT_VERSION + 1;
    for mark in [
        format!("{newer}/64"),
        format!("{newer}/1/from-5"),
        format!("{}", newer + 90),
    ] {
        let mut kv = MemKv::new();
        mixed_workload(&mut kv);
        kv.map
            .insert(schema::layout().into_bytes(), mark.clone().into_bytes());
        let newer_detail = |e: StoreError| match e {
            StoreError::NewerLayout(d) => d,
            other => panic!("expected newer-layout, got {other:?}"),
        };
        for d in every_verb_refuses_as(&mut kv, newer_detail) {
            let found = mark.split('/').next().expect("a version");
            assert!(
                d.contains(&format!("layout {found}"))
                    && d.contains(&format!("writes layout {}", schema::LAYOUT_VERSION))
                    && d.contains("upgrade"),
                "{d}"
            );
        }
        let before = kv.map.clone();
        assert!(matches!(
            check::check(&mut kv),
            Err(StoreError::NewerLayout(_))
        ));
        assert!(kv.map == before);
    }
}

/// `queue` reads the layout mark only with its rows, so whatever it meets
/// before them that does not decode must still be blamed on a wrong layout
/// when the layout is wrong, and on the index when it is not.
#[test]
fn queue_reports_a_wrong_layout_before_an_index_entry_it_cannot_read() {
    let query = |roles: &[&str]| QueueQuery {
        roles: names(roles),
        actor: Some("ann".into()),
        limit: 10,
        after: None,
    };
    let mut kv = MemKv::new();
    mixed_workload(&mut kv);
    // A queue entry whose position is not (rank, created-at, id).
    kv.map.insert(
        schema::queue_role("approver").str("junk").into_bytes(),
        Vec::new(),
    );
    let d = corrupt_detail(fails_cleanly(&mut kv, |kv| {
        tasks::queue(kv, &query(&["approver"]))
    }));
    assert!(d.contains("queue index"), "{d}");
    let d = corrupt_detail(fails_cleanly(&mut kv, |kv| {
        tasks::claim_next(kv, &query(&["approver"]), None)
    }));
    assert!(d.contains("queue index"), "{d}");
    kv.map.insert(schema::layout().into_bytes(), b"2".to_vec());
    let d = corrupt_detail(fails_cleanly(&mut kv, |kv| {
        tasks::queue(kv, &query(&["approver"]))
    }));
    assert!(d.contains("layout 2"), "{d}");
    let d = corrupt_detail(fails_cleanly(&mut kv, |kv| {
        tasks::claim_next(kv, &query(&["approver"]), None)
    }));
    assert!(d.contains("layout 2"), "{d}");
    // An empty queue has no row to carry the mark, and is refused all the
    // same.
    let mut kv = MemKv::new();
    open(&mut kv, task("t").roles(&["approver"]));
    kv.map.insert(schema::layout().into_bytes(), b"2".to_vec());
    let d = corrupt_detail(fails_cleanly(&mut kv, |kv| {
        tasks::queue(kv, &query(&["nobody"]))
    }));
    assert!(d.contains("layout 2"), "{d}");
    let d = corrupt_detail(fails_cleanly(&mut kv, |kv| {
        tasks::claim_next(kv, &query(&["nobody"]), None)
    }));
    assert!(d.contains("layout 2"), "{d}");
}

/// A keyspace written by an earlier 0.2 build: the same rows, each counter
/// in one key. Read as layout 3 its counters would all be zero, and the
/// first settle would take a shard below zero; it is refused by name.
#[test]
fn a_keyspace_in_layout_2_is_refused_by_name_for_every_verb() {
    let mut kv = MemKv::new();
    mixed_workload(&mut kv);
    for name in schema::COUNTERS {
        let total = match name {
            schema::OPEN_TASKS => tasks::open_count(&mut kv),
            schema::LEASED_CLAIMS => tasks::leased_count(&mut kv),
            _ => timers::pending_count(&mut kv),
        }
        .expect("a count");
        for k in schema::Shards::SHARED.keys(name) {
            kv.map.remove(&k);
        }
        kv.map.insert(
            crate::keys::Key::new().str("count").str(name).into_bytes(),
            total.to_be_bytes().to_vec(),
        );
    }
    kv.map.insert(schema::layout().into_bytes(), b"2".to_vec());
    for d in every_verb_refuses(&mut kv) {
        assert!(
            d.contains("layout 2") && d.contains("single-key counters"),
            "{d}"
        );
    }
    let found = check::check(&mut kv).expect("the check runs");
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].structure, "layout");
    assert!(found[0].detail.contains("layout 2"), "{found:?}");
}
