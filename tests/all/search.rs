//! Search over a keyspace laid out before search: a copy of the layout-9
//! fixture (`tests/fixtures/layout-9`, written by the previous release)
//! refuses `search` and `count` until its index is built, and the
//! sweeper's standard duties build it with no call from anyone, after
//! which every old task is found, each state's count is exact, and
//! `check` finds nothing. Real component, real redb file.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use leasehold_host::{
    Change, Engine, Error, FeedRead, ManualClock, SearchQuery, StoreError, Sweeper, SweeperOptions,
    TaskFilter, TaskSort, TaskState, Tenant,
};
use leasehold_tests::*;

/// The fixture's tenants that hold tasks (`gamma` holds timers only).
const TENANTS: [&str; 4] = ["alpha", "beta", "gamma", "delta"];

/// A copy of the layout-9 fixture's file, so the fixture stays as the
/// previous release wrote it.
fn layout_9_copy(dir: &Path) -> std::path::PathBuf {
    let file = dir.join("layout-9.redb");
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/layout-9/db.redb"),
        &file,
    )
    .expect("copy the layout-9 fixture");
    file
}

/// Every task the tenant holds, found by the ids its feed names (the
/// feed holds the whole record in layout 9) and read one by one.
fn every_task(t: &Tenant) -> BTreeMap<String, TaskState> {
    let mut ids = BTreeSet::new();
    let mut after: Option<String> = None;
    loop {
        let FeedRead::Page(page) = t.feed(after.as_deref(), 1000).expect("feed") else {
            panic!("the fixture's feed is not trimmed");
        };
        for e in &page.entries {
            if let Change::Task(c) = &e.change {
                ids.insert(c.id.clone());
            }
        }
        if page.next == page.head {
            break;
        }
        after = Some(page.next);
    }
    ids.into_iter()
        .filter_map(|id| {
            let task = t.get(&id).expect("get")?;
            Some((id, task.state))
        })
        .collect()
}

fn query(filter: TaskFilter, after: Option<String>) -> SearchQuery {
    SearchQuery {
        filter,
        sort: TaskSort::default(),
        limit: 7,
        after,
        viewer: None,
    }
}

/// Every task a search of `filter` finds, walking its pages by `next`.
fn found(t: &Tenant, filter: &TaskFilter) -> Vec<String> {
    let mut out = Vec::new();
    let mut after = None;
    loop {
        let page = t.search(&query(filter.clone(), after)).expect("search");
        out.extend(page.tasks.into_iter().map(|task| task.id));
        match page.next {
            Some(next) => after = Some(next),
            None => return out,
        }
    }
}

fn being_built<T: std::fmt::Debug>(r: Result<T, Error>) -> bool {
    match r {
        Err(Error::Store(StoreError::Storage(m))) => {
            assert!(m.contains("search index is being built"), "{m}");
            true
        }
        Ok(_) => false,
        other => panic!("expected the index to be built or being built, got {other:?}"),
    }
}

#[test]
fn the_sweeper_builds_an_old_keyspaces_search_index_and_then_every_old_task_is_found() {
    let dir = tempfile::tempdir().expect("temp dir");
    let file = layout_9_copy(dir.path());
    // Before the fixture's instants, so that the task duties have nothing
    // to do and every change the sweeper makes is the index's.
    let clock = Arc::new(ManualClock::new(0));
    let engine = Engine::builder()
        .clock(clock.clone())
        .open(&file)
        .expect("open the copy");
    let before: Vec<(Tenant, BTreeMap<String, TaskState>)> = TENANTS
        .iter()
        .map(|name| {
            let t = engine.tenant(name).expect("tenant");
            let tasks = every_task(&t);
            (t, tasks)
        })
        .collect();
    let held: usize = before.iter().map(|(_, tasks)| tasks.len()).sum();
    assert!(held >= 20, "the fixture holds {held} tasks");
    for (t, tasks) in &before {
        if tasks.is_empty() {
            continue;
        }
        assert!(
            being_built(t.search(&query(TaskFilter::default(), None))),
            "{}: a search before the index is built",
            t.name()
        );
        assert!(being_built(t.count(&TaskFilter::default(), None, None)));
    }

    // A turn of two calls: the index is built a bounded batch a call,
    // through the same turns as every duty.
    let sweeper = Sweeper::start(
        &engine,
        Vec::<String>::new(),
        SweeperOptions {
            calls_per_turn: 2,
            ..SweeperOptions::default()
        },
    )
    .expect("sweeper");
    let deadline = Instant::now() + Duration::from_secs(60);
    while before
        .iter()
        .any(|(t, _)| being_built(t.count(&TaskFilter::default(), None, None)))
    {
        assert!(
            Instant::now() < deadline,
            "the index was not built in a minute"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // Once built, a tenant's index is never asked for again: the sweeper
    // comes to rest.
    let indexed = sweeper.counted("indexed");
    assert_eq!(indexed, held as u64, "each old task indexed once");
    let sweeps = sweeper.stats().sweeps;
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(sweeper.stats().sweeps, sweeps, "nothing more to do");
    assert_eq!(sweeper.stats().errors, 0);
    drop(sweeper);

    for (t, tasks) in &before {
        let mut all = found(t, &TaskFilter::default());
        all.sort();
        let expected: Vec<String> = tasks.keys().cloned().collect();
        assert_eq!(all, expected, "{}: every old task is found", t.name());
        for state in [
            TaskState::Open,
            TaskState::Claimed,
            TaskState::Escalated,
            TaskState::Completed,
            TaskState::Expired,
            TaskState::Withdrawn,
        ] {
            let filter = TaskFilter {
                states: vec![state],
                ..TaskFilter::default()
            };
            let held = tasks.values().filter(|s| **s == state).count() as u64;
            let c = t.count(&filter, None, None).expect("count");
            assert!(c.exact && c.next.is_none(), "{c:?}");
            assert_eq!(c.count, held, "{}: the count of {state}", t.name());
            assert_eq!(found(t, &filter).len() as u64, held, "{state}");
        }
        let total = t.count(&TaskFilter::default(), None, None).expect("count");
        assert_eq!(total.count, tasks.len() as u64);
        assert_consistent(t);
    }
}
