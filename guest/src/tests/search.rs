//! Search beyond the differential's small stores: what a page costs on a
//! large one, the scan budget and its continuation, counts from counters,
//! the input rules, saved views, and building the entries of a keyspace
//! laid out before search.

use super::cost_support::counted;
use super::*;
use crate::model::Settlement;
use crate::search::{
    self, AssigneeFilter, COUNT_BUDGET, SEARCH_BUDGET, SavedView, SearchQuery, SortKey, TaskFilter,
    TaskSort, Viewer, views,
};
use crate::tasks;

fn query(filter: TaskFilter, key: SortKey, limit: u32) -> SearchQuery {
    SearchQuery {
        filter,
        sort: TaskSort {
            key,
            descending: false,
        },
        limit,
        after: None,
        viewer: None,
    }
}

/// 3,000 tasks: every third claimed by bob, every seventh in case c1,
/// kinds alternating.
fn large() -> MemKv {
    let mut kv = MemKv::new();
    let roles = names(&["a"]);
    for i in 0..3_000 {
        let id = format!("t{i:05}");
        let mut t = task(&id).roles(&["a"]).due(10_000 + i64::from(i));
        t.kind = if i % 2 == 0 { "even" } else { "odd" }.into();
        if i % 7 == 0 {
            t.case = Some("c1".into());
        }
        t.created_at = i64::from(i);
        open(&mut kv, t);
        if i % 3 == 0 {
            tasks::claim(&mut kv, &id, "bob", &roles, None, None).expect("claims");
        }
    }
    kv
}

#[test]
fn an_indexed_filter_reads_o_page_entries_beside_a_large_store() {
    let mut kv = large();
    for (filter, key) in [
        (
            TaskFilter {
                states: vec![TaskState::Claimed],
                ..TaskFilter::default()
            },
            SortKey::CreatedAt,
        ),
        (
            TaskFilter {
                assignee: Some(AssigneeFilter::Actor("bob".into())),
                ..TaskFilter::default()
            },
            SortKey::CreatedAt,
        ),
        (
            TaskFilter {
                case: Some("c1".into()),
                ..TaskFilter::default()
            },
            SortKey::CreatedAt,
        ),
        (
            TaskFilter {
                kinds: vec!["odd".into()],
                states: vec![TaskState::Open],
                ..TaskFilter::default()
            },
            SortKey::CreatedAt,
        ),
        (TaskFilter::default(), SortKey::DueAt),
        (TaskFilter::default(), SortKey::QueueOrder),
    ] {
        let (page, calls) = counted(&mut kv, |kv| {
            search::search(kv, &query(filter.clone(), key, 20))
        });
        let page = page.expect("searches");
        assert_eq!(page.tasks.len(), 20, "{filter:?}");
        assert!(page.next.is_some() && !page.budget_spent);
        assert!(page.tasks.iter().all(|t| filter.matches(t)));
        // One chunk of each range merged, and the page's rows.
        assert!(calls.scanned <= 6 * 128, "{filter:?}: {calls:?}");
        assert!(calls.gets <= 30, "{filter:?}: {calls:?}");
    }
}

/// A filter over several states merges one range a state, and reads the
/// first chunk of all of them in one crossing (`scan-many`), not one round
/// trip a range.
#[test]
fn a_filter_over_several_states_reads_its_ranges_in_one_crossing() {
    let mut kv = large();
    let filter = TaskFilter {
        states: vec![TaskState::Open, TaskState::Claimed, TaskState::Completed],
        ..TaskFilter::default()
    };
    let (page, calls) = counted(&mut kv, |kv| {
        kv.call(|kv| search::search(kv, &query(filter.clone(), SortKey::CreatedAt, 20)))
    });
    let page = page.expect("searches");
    assert_eq!(page.tasks.len(), 20);
    assert!(page.tasks.iter().all(|t| filter.matches(t)));
    assert_eq!(
        (calls.scans, calls.scan_manys, calls.batched_ranges),
        (3, 1, 3),
        "{calls:?}"
    );
    // The three ranges cost one round trip; the point reads (the layout
    // mark, the page's rows) cost what they did.
    let point_trips = calls.get_manys + calls.gets - calls.batched_keys;
    assert_eq!(calls.round_trips(), point_trips + 1, "{calls:?}");
}

#[test]
fn a_filter_no_index_serves_stops_at_the_budget_and_goes_on_from_there() {
    let mut kv = large();
    // Nobody holds tasks t02990 on, in creation order: the first 2,000
    // entries of the walk hold no match.
    let filter = TaskFilter {
        created_after: Some(0),
        priority_at_least: Some(Priority::Urgent),
        ..TaskFilter::default()
    };
    tasks::update(
        &mut kv,
        "t02999",
        None,
        &crate::model::TaskChanges {
            priority: Some(Priority::Urgent),
            ..Default::default()
        },
        None,
    )
    .expect("updates");
    let q = query(filter.clone(), SortKey::CreatedAt, 10);
    let (page, calls) = counted(&mut kv, |kv| search::search(kv, &q));
    let page = page.expect("searches");
    assert!(page.tasks.is_empty());
    assert!(page.budget_spent);
    assert!(calls.gets as usize <= SEARCH_BUDGET + 8, "{calls:?}");
    let next = page.next.expect("goes on");
    let page = search::search(
        &mut kv,
        &SearchQuery {
            after: Some(next),
            ..q.clone()
        },
    )
    .expect("searches on");
    assert_eq!(ids(&page.tasks), ["t02999"]);
    assert_eq!(page.next, None);
    assert!(!page.budget_spent);
    // A count of the same filter adds up across its calls.
    let first = search::count(&mut kv, &filter, None, None).expect("counts");
    assert_eq!((first.count, first.exact), (1, true));
    let wide = TaskFilter {
        role: Some("a".into()),
        ..TaskFilter::default()
    };
    let mut total = 0;
    let mut after = None;
    let mut calls_made = 0;
    loop {
        let c = search::count(&mut kv, &wide, None, after.as_deref()).expect("counts");
        total += c.count;
        calls_made += 1;
        match c.next {
            Some(n) => after = Some(n),
            None => break,
        }
    }
    assert_eq!(total, 3_000);
    assert_eq!(calls_made, 3_000usize.div_ceil(COUNT_BUDGET));
}

#[test]
fn a_count_of_states_comes_from_the_counters_without_a_row() {
    let mut kv = large();
    let by = |states: Vec<TaskState>| TaskFilter {
        states,
        ..TaskFilter::default()
    };
    let (c, calls) = counted(&mut kv, |kv| {
        search::count(kv, &by(vec![TaskState::Claimed]), None, None)
    });
    let c = c.expect("counts");
    assert_eq!(
        (c.count, c.exact, c.index.as_str()),
        (1_000, true, "counters")
    );
    assert!(calls.scanned <= 64, "{calls:?}");
    tasks::settle(&mut kv, "t00000", Settlement::Completed, None, None, None).expect("settles");
    let c = search::count(
        &mut kv,
        &by(vec![TaskState::Claimed, TaskState::Completed]),
        None,
        None,
    )
    .expect("counts");
    assert_eq!(c.count, 1_000);
    assert_eq!(
        search::count(&mut kv, &TaskFilter::default(), None, None).map(|c| c.count),
        Ok(3_000)
    );
    // Kinds are counted on their entries alone, no row read.
    let (c, calls) = counted(&mut kv, |kv| {
        search::count(
            kv,
            &TaskFilter {
                kinds: vec!["odd".into()],
                ..TaskFilter::default()
            },
            None,
            None,
        )
    });
    assert_eq!(c.map(|c| (c.count, c.exact)), Ok((1_500, true)));
    assert!(calls.gets <= 4, "{calls:?}");
}

#[test]
fn a_reviewer_sees_only_what_it_holds_or_may_take() {
    let mut kv = MemKv::new();
    open(&mut kv, task("mine").roles(&["a"]));
    open(&mut kv, task("offered").roles(&["a"]));
    open(&mut kv, task("other-role").roles(&["b"]));
    open(&mut kv, task("excluded").roles(&["a"]).excluding(&["ann"]));
    open(&mut kv, task("theirs").roles(&["a"]));
    tasks::claim(&mut kv, "mine", "ann", &names(&["a"]), None, None).expect("claims");
    tasks::claim(&mut kv, "theirs", "bob", &names(&["a"]), None, None).expect("claims");
    let viewer = Viewer {
        actor: "ann".into(),
        roles: names(&["a"]),
    };
    let q = SearchQuery {
        viewer: Some(viewer.clone()),
        ..query(TaskFilter::default(), SortKey::CreatedAt, 10)
    };
    let page = search::search(&mut kv, &q).expect("searches");
    let mut got = ids(&page.tasks);
    got.sort();
    assert_eq!(got, ["mine", "offered"]);
    let c = search::count(&mut kv, &TaskFilter::default(), Some(&viewer), None).expect("counts");
    assert_eq!((c.count, c.exact), (2, true));
}

#[test]
fn bad_input_is_refused_naming_the_field_and_reads_nothing() {
    let mut kv = large();
    let refused = |kv: &mut MemKv, q: &SearchQuery, field: &str| {
        let (got, calls) = counted(kv, |kv| search::search(kv, q));
        match got {
            Err(StoreError::Invalid(why)) => assert!(why.contains(field), "{why}"),
            other => panic!("{q:?} answered {other:?}"),
        }
        assert_eq!(calls.reads(), 0, "{calls:?}");
    };
    let base = query(TaskFilter::default(), SortKey::CreatedAt, 10);
    refused(
        &mut kv,
        &SearchQuery {
            limit: 0,
            ..base.clone()
        },
        "limit",
    );
    refused(
        &mut kv,
        &SearchQuery {
            limit: 1_001,
            ..base.clone()
        },
        "limit",
    );
    let inverted = TaskFilter {
        due_after: Some(10),
        due_before: Some(10),
        ..TaskFilter::default()
    };
    refused(&mut kv, &query(inverted, SortKey::DueAt, 10), "due-after");
    let inverted = TaskFilter {
        created_after: Some(11),
        created_before: Some(10),
        ..TaskFilter::default()
    };
    refused(
        &mut kv,
        &query(inverted, SortKey::DueAt, 10),
        "created-after",
    );
    let many = TaskFilter {
        kinds: (0..33).map(|i| format!("k{i}")).collect(),
        ..TaskFilter::default()
    };
    refused(
        &mut kv,
        &query(many, SortKey::CreatedAt, 10),
        "filter.kinds",
    );
    let bad_role = TaskFilter {
        role: Some(String::new()),
        ..TaskFilter::default()
    };
    refused(
        &mut kv,
        &query(bad_role, SortKey::CreatedAt, 10),
        "filter.role",
    );
    refused(
        &mut kv,
        &SearchQuery {
            after: Some("not a cursor".into()),
            ..base.clone()
        },
        "after",
    );
    // A cursor of one search is refused by another: another filter, sort
    // or viewer.
    let next = search::search(&mut kv, &base)
        .expect("searches")
        .next
        .expect("more");
    for other in [
        query(
            TaskFilter {
                states: vec![TaskState::Open],
                ..TaskFilter::default()
            },
            SortKey::CreatedAt,
            10,
        ),
        SearchQuery {
            sort: TaskSort {
                key: SortKey::CreatedAt,
                descending: true,
            },
            ..base.clone()
        },
        SearchQuery {
            viewer: Some(Viewer {
                actor: "bob".into(),
                roles: vec![],
            }),
            ..base.clone()
        },
    ] {
        refused(
            &mut kv,
            &SearchQuery {
                after: Some(next.clone()),
                ..other
            },
            "another search",
        );
    }
    // The same search with another page size goes on.
    let page = search::search(
        &mut kv,
        &SearchQuery {
            limit: 3,
            after: Some(next),
            ..base
        },
    )
    .expect("goes on");
    assert_eq!(ids(&page.tasks), ["t00010", "t00011", "t00012"]);
}

fn view(name: &str) -> SavedView {
    SavedView {
        name: name.into(),
        filter: TaskFilter {
            states: vec![TaskState::Open],
            ..TaskFilter::default()
        },
        sort: TaskSort {
            key: SortKey::DueAt,
            descending: false,
        },
        revision: 99,
        by: Some("olga".into()),
        at: 0,
    }
}

#[test]
fn views_are_made_once_changed_at_their_revision_and_listed_by_name() {
    let mut kv = MemKv::new();
    kv.now = 1_234;
    let made = views::put(&mut kv, &view("legal"), None).expect("makes");
    assert_eq!((made.revision, made.at), (1, 1_234));
    assert!(matches!(
        views::put(&mut kv, &view("legal"), None),
        Err(StoreError::Invalid(why)) if why.starts_with("name")
    ));
    assert_eq!(
        views::put(&mut kv, &view("legal"), Some(7)),
        Err(StoreError::Stale(1))
    );
    assert_eq!(
        views::put(&mut kv, &view("nope"), Some(1)),
        Err(StoreError::NotFound("nope".into()))
    );
    let mut changed = view("legal");
    changed.filter.kinds = vec!["contract".into()];
    let changed = views::put(&mut kv, &changed, Some(1)).expect("changes");
    assert_eq!(changed.revision, 2);
    views::put(&mut kv, &view("all"), None).expect("makes");
    let listed = views::list(&mut kv, 10, None).expect("lists");
    assert_eq!(
        listed.iter().map(|v| v.name.as_str()).collect::<Vec<_>>(),
        ["all", "legal"]
    );
    assert_eq!(
        views::list(&mut kv, 10, Some("all")).map(|l| l.len()),
        Ok(1)
    );
    assert_eq!(views::get(&mut kv, "legal"), Ok(Some(changed)));
    assert_eq!(
        views::delete(&mut kv, "legal", Some(1)),
        Err(StoreError::Stale(2))
    );
    assert_eq!(views::delete(&mut kv, "legal", Some(2)), Ok(true));
    assert_eq!(views::delete(&mut kv, "legal", None), Ok(false));
    let long = "v".repeat(129);
    assert!(matches!(
        views::put(&mut kv, &view(&long), None),
        Err(StoreError::Invalid(_))
    ));
    let mut bad = view("bad");
    bad.filter.due_after = Some(5);
    bad.filter.due_before = Some(1);
    assert!(
        matches!(views::put(&mut kv, &bad, None), Err(StoreError::Invalid(w)) if w.contains("due-after"))
    );
    assert!(crate::check::check(&mut kv).expect("checks").is_empty());
}

#[test]
fn a_tenant_keeps_at_most_500_views() {
    let mut kv = MemKv::new();
    for i in 0..views::MAX_VIEWS {
        views::put(&mut kv, &view(&format!("v{i:03}")), None).expect("makes");
    }
    assert!(matches!(
        views::put(&mut kv, &view("one-more"), None),
        Err(StoreError::Invalid(w)) if w.contains("500")
    ));
}

/// `kv` as a build before search would have left it: rows at revision 0
/// (as layout 9 wrote them), no search entry, count or build mark, and a
/// layout-9 mark.
fn before_search(kv: &mut MemKv) {
    let search_prefixes = [
        crate::schema::by_states(),
        crate::schema::by_kinds(),
        crate::schema::assigneds(),
        crate::schema::by_due(),
        crate::schema::by_runs(),
        crate::schema::by_priority(),
        crate::schema::search_counts(),
    ];
    kv.map.retain(|k, _| {
        !search_prefixes.iter().any(|p| k.starts_with(p.as_bytes()))
            && *k != crate::schema::search_built().into_bytes()
            && !k.starts_with(crate::schema::helds().as_bytes())
    });
    let rows: Vec<(Vec<u8>, Vec<u8>)> = kv
        .map
        .iter()
        .filter(|(k, _)| k.starts_with(crate::schema::tasks().as_bytes()))
        .filter_map(|(k, v)| {
            let mut row = crate::store::decode_task(v).ok()?;
            row.task.revision = 0;
            Some((k.clone(), crate::store::encode_row(&row).ok()?))
        })
        .collect();
    kv.map.extend(rows);
    kv.map
        .insert(crate::schema::layout().into_bytes(), b"9/1".to_vec());
}

#[test]
fn a_keyspace_laid_out_before_search_is_built_a_stretch_at_a_time_and_changes_meanwhile_count_once()
{
    let mut kv = MemKv::new();
    let roles = names(&["a"]);
    for i in 0..50 {
        open(&mut kv, task(&format!("t{i:02}")).roles(&["a"]));
    }
    for i in (0..50).step_by(5) {
        tasks::claim(&mut kv, &format!("t{i:02}"), "bob", &roles, None, None).expect("claims");
    }
    before_search(&mut kv);
    assert!(crate::check::check(&mut kv).expect("checks").is_empty());
    let claimed = TaskFilter {
        states: vec![TaskState::Claimed],
        ..TaskFilter::default()
    };
    // Refused while the index is built: its answers would leave tasks out.
    assert!(matches!(
        search::count(&mut kv, &claimed, None, None),
        Err(StoreError::Storage(why)) if why.contains("being built")
    ));
    // Part built; then changes on both sides of the build's position.
    let p = search::build_index(&mut kv, 20).expect("builds");
    assert_eq!((p.built, p.indexed), (false, 20));
    assert!(crate::check::check(&mut kv).expect("checks").is_empty());
    tasks::claim(&mut kv, "t01", "bob", &roles, None, None).expect("claims a built task");
    tasks::claim(&mut kv, "t41", "bob", &roles, None, None).expect("claims an unbuilt one");
    tasks::settle(&mut kv, "t45", Settlement::Completed, None, None, None).expect("settles");
    assert!(crate::check::check(&mut kv).expect("checks").is_empty());
    let mut rounds = 0;
    loop {
        rounds += 1;
        let p = search::build_index(&mut kv, 20).expect("builds");
        if p.built {
            break;
        }
    }
    assert_eq!(rounds, 2);
    assert!(crate::check::check(&mut kv).expect("checks").is_empty());
    assert_eq!(
        search::count(&mut kv, &claimed, None, None).map(|c| (c.count, c.exact)),
        Ok((11, true))
    );
    let page = search::search(&mut kv, &query(claimed, SortKey::CreatedAt, 100)).expect("searches");
    assert_eq!(page.tasks.len(), 11);
    assert_eq!(
        search::build_index(&mut kv, 20).map(|p| (p.built, p.indexed)),
        Ok((true, 0))
    );
    assert!(matches!(
        search::build_index(&mut kv, 0),
        Err(StoreError::Invalid(_))
    ));
}

#[test]
fn a_fresh_keyspace_is_built_from_its_first_write() {
    let mut kv = MemKv::new();
    assert_eq!(
        search::search(
            &mut kv,
            &query(TaskFilter::default(), SortKey::CreatedAt, 5)
        )
        .map(|p| p.tasks.len()),
        Ok(0)
    );
    open(&mut kv, task("t"));
    assert_eq!(
        kv.map
            .get(crate::schema::search_built().as_bytes())
            .map(Vec::as_slice),
        Some(crate::schema::SEARCH_BUILT)
    );
    assert_eq!(search::build_index(&mut kv, 5).map(|p| p.built), Ok(true));
}

/// A writer's six search count shards are written together by its first
/// move and kept at zero after: a shard deleted at zero and inserted again
/// beside the ones every verb reads ahead makes unrelated calls meet on a
/// serializable store.
#[test]
fn a_writers_search_counts_are_written_together_and_kept_at_zero() {
    let mut kv = MemKv::new();
    let shards = |kv: &MemKv| {
        let prefix = crate::schema::search_counts().into_bytes();
        kv.map
            .iter()
            .filter(|(k, _)| k.starts_with(&prefix))
            .map(|(_, v)| i64::from_be_bytes(v.as_slice().try_into().expect("8 bytes")))
            .collect::<Vec<_>>()
    };
    open(&mut kv, task("t1").roles(&["a"]));
    assert_eq!(shards(&kv).len(), crate::model::ALL_STATES.len());
    assert_eq!(shards(&kv).iter().sum::<i64>(), 1);
    tasks::claim(&mut kv, "t1", "bob", &names(&["a"]), None, None).expect("claims");
    tasks::settle(&mut kv, "t1", Settlement::Completed, None, None, None).expect("settles");
    let after = shards(&kv);
    assert_eq!(after.len(), crate::model::ALL_STATES.len(), "{after:?}");
    assert_eq!(after.iter().filter(|&&n| n == 0).count(), 5, "{after:?}");
    assert_eq!(after.iter().sum::<i64>(), 1);
}
