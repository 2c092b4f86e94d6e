//! Search against brute force: random stores made by the model-based test's
//! operations, then random filters, sorts, viewers and page sizes. Every
//! page, every cursor walk and every count is checked against an
//! evaluation of the model's tasks written here from the WIT's rules, not
//! from the component's predicates; a reviewer's pages hold only what it
//! holds or may take.

use proptest::prelude::*;
use proptest::test_runner::TestCaseError;

use super::model_based::{apply, verify};
use super::model_based_ops::{ACTORS, CASES, PRIORITIES, ROLES, RUNS, op, pick};
use super::model_based_reference::Model;
use super::*;
use crate::model::{ALL_STATES, Settlement};
use crate::search::{self, AssigneeFilter, SearchQuery, SortKey, TaskFilter, TaskSort, Viewer};

const KINDS: [&str; 3] = ["k0", "k1", "k9"];

/// A filter drawn over the model's pools, each field given one time in
/// three or so.
fn filter() -> impl Strategy<Value = TaskFilter> {
    // Each field given about one time in six, so that most filters still
    // match some of a store of a few tasks.
    let time = || proptest::option::weighted(0.15, 0..45i64);
    // Tasks are created at 0 to 20 (the seeds) or 0 to 100 (the ops).
    let created = || proptest::option::weighted(0.2, 0..22i64);
    (
        prop_oneof![3 => Just(Vec::new()), 1 => proptest::collection::vec(0..6usize, 1..3)],
        prop_oneof![3 => Just(Vec::new()), 1 => proptest::collection::vec(0..KINDS.len(), 1..2)],
        proptest::option::weighted(0.15, 0..ROLES.len()),
        proptest::option::weighted(0.15, proptest::option::of(0..ACTORS.len())),
        proptest::option::weighted(0.15, 0..CASES.len()),
        proptest::option::weighted(0.15, 0..RUNS.len()),
        proptest::option::weighted(0.15, 0..PRIORITIES.len()),
        (time(), time(), created(), created(), time()),
    )
        .prop_map(
            |(states, kinds, role, assignee, case, run, prio, (db, da, cb, ca, od))| {
                // Ranges drawn inverted are put the right way round (an
                // inverted range is a refusal, tested apart).
                let (da, db) = match (da, db) {
                    (Some(a), Some(b)) if a >= b => (Some(b), Some(a + 1)),
                    p => p,
                };
                let (ca, cb) = match (ca, cb) {
                    (Some(a), Some(b)) if a >= b => (Some(b), Some(a + 1)),
                    p => p,
                };
                TaskFilter {
                    states: states.into_iter().map(|s| ALL_STATES[s]).collect(),
                    kinds: kinds.into_iter().map(|k| KINDS[k].to_owned()).collect(),
                    role: role.map(|r| ROLES[r].to_owned()),
                    assignee: assignee.map(|a| match a {
                        None => AssigneeFilter::Nobody,
                        Some(a) => AssigneeFilter::Actor(ACTORS[a].to_owned()),
                    }),
                    case: case.map(|c| CASES[c].to_owned()),
                    run: run.map(|r| RUNS[r].to_owned()),
                    priority_at_least: prio.map(|p| PRIORITIES[p]),
                    due_before: db,
                    due_after: da,
                    created_before: cb,
                    created_after: ca,
                    overdue_at: od,
                }
            },
        )
}

/// A task of the larger store the searches run over, and what happens to
/// it after it opens.
#[derive(Clone, Debug)]
struct Seed {
    run: usize,
    case: Option<usize>,
    kind: usize,
    roles: Vec<usize>,
    excluded: Vec<usize>,
    priority: usize,
    created: i64,
    due: Option<i64>,
    /// 0: left open; 1: claimed; 2: claimed then completed; 3: escalated;
    /// 4: withdrawn.
    fate: usize,
    actor: usize,
}

fn seed() -> impl Strategy<Value = Seed> {
    (
        (
            0..RUNS.len(),
            proptest::option::of(0..CASES.len()),
            0..2usize,
        ),
        proptest::collection::vec(0..3usize, 0..3),
        proptest::collection::vec(0..3usize, 0..2),
        (
            0..PRIORITIES.len(),
            0..20i64,
            proptest::option::of(0..40i64),
        ),
        (0..5usize, 0..ACTORS.len()),
    )
        .prop_map(
            |((run, case, kind), roles, excluded, (priority, created, due), (fate, actor))| Seed {
                run,
                case,
                kind,
                roles,
                excluded,
                priority,
                created,
                due,
                fate,
                actor,
            },
        )
}

/// Opens the seeds (ids `s00`…) through the verbs and in the model, and
/// brings each to its fate, checking that both agree.
fn plant(kv: &mut MemKv, model: &mut Model, seeds: &[Seed]) -> Result<(), TestCaseError> {
    for (i, s) in seeds.iter().enumerate() {
        let id = format!("s{i:02}");
        let t = Task {
            id: id.clone(),
            run: RUNS[s.run].to_owned(),
            case: s.case.map(|c| CASES[c].to_owned()),
            kind: KINDS[s.kind].to_owned(),
            candidate_roles: pick(&ROLES, &s.roles),
            excluded_actors: pick(&ACTORS, &s.excluded),
            priority: PRIORITIES[s.priority],
            created_at: s.created,
            due_at: s.due,
            ..task("unused")
        };
        prop_assert_eq!(&crate::tasks::open(kv, &t), &model.open(&t));
        let actor = ACTORS[s.actor];
        let all = pick(&ROLES, &[0, 1, 2]);
        if matches!(s.fate, 1 | 2) {
            prop_assert_eq!(
                &crate::tasks::claim(kv, &id, actor, &all, None, None),
                &model.claim(&id, actor, &all, None)
            );
        }
        if s.fate == 2 {
            let real = crate::tasks::settle(kv, &id, Settlement::Completed, None, None, None);
            prop_assert_eq!(&real, &model.settle(&id, Settlement::Completed, None, None));
        }
        if s.fate == 3 {
            prop_assert_eq!(&crate::tasks::escalate(kv, &id, None), &model.escalate(&id));
        }
        if s.fate == 4 {
            let real = crate::tasks::settle(kv, &id, Settlement::Withdrawn, None, None, None);
            prop_assert_eq!(&real, &model.settle(&id, Settlement::Withdrawn, None, None));
        }
    }
    Ok(())
}

fn sort() -> impl Strategy<Value = TaskSort> {
    (0..4usize, any::<bool>()).prop_map(|(k, descending)| TaskSort {
        key: [
            SortKey::QueueOrder,
            SortKey::DueAt,
            SortKey::CreatedAt,
            SortKey::Priority,
        ][k],
        descending,
    })
}

fn viewer() -> impl Strategy<Value = Option<Viewer>> {
    proptest::option::of((0..ACTORS.len(), proptest::collection::vec(0..3usize, 0..3))).prop_map(
        |v| {
            v.map(|(a, roles)| Viewer {
                actor: ACTORS[a].to_owned(),
                roles: pick(&ROLES, &roles),
            })
        },
    )
}

/// The WIT's rules for what matches, written apart from the component's.
fn expected(model: &Model, f: &TaskFilter, sort: TaskSort, v: Option<&Viewer>) -> Vec<String> {
    let mut found: Vec<&Task> = model
        .tasks
        .values()
        .map(|(t, _)| t)
        .filter(|t| {
            let due = t.due_at;
            let pending = matches!(
                t.state,
                TaskState::Open | TaskState::Claimed | TaskState::Escalated
            );
            (f.states.is_empty() || f.states.contains(&t.state))
                && (f.kinds.is_empty() || f.kinds.contains(&t.kind))
                && f.role
                    .as_ref()
                    .is_none_or(|r| t.candidate_roles.iter().any(|c| c == r))
                && match &f.assignee {
                    None => true,
                    Some(AssigneeFilter::Nobody) => t.assignee.is_none(),
                    Some(AssigneeFilter::Actor(a)) => t.assignee.as_deref() == Some(a.as_str()),
                }
                && f.case
                    .as_ref()
                    .is_none_or(|c| t.case.as_deref() == Some(c.as_str()))
                && f.run.as_ref().is_none_or(|r| t.run == *r)
                && f.priority_at_least.is_none_or(|p| t.priority >= p)
                && f.due_before.is_none_or(|x| due.is_some_and(|d| d < x))
                && f.due_after.is_none_or(|x| due.is_some_and(|d| d >= x))
                && f.created_before.is_none_or(|x| t.created_at < x)
                && f.created_after.is_none_or(|x| t.created_at >= x)
                && f.overdue_at
                    .is_none_or(|x| pending && due.is_some_and(|d| d <= x))
                && v.is_none_or(|v| {
                    let holds = t.state == TaskState::Claimed
                        && t.assignee.as_deref() == Some(v.actor.as_str());
                    let offered = matches!(t.state, TaskState::Open | TaskState::Escalated)
                        && !t.excluded_actors.contains(&v.actor)
                        && (t.candidate_roles.is_empty()
                            || t.candidate_roles.iter().any(|r| v.roles.contains(r)));
                    holds || offered
                })
        })
        .collect();
    // Priority orders low < normal < high < urgent (the enum's order).
    found.sort_by(|a, b| {
        let key = |t: &Task| match sort.key {
            SortKey::CreatedAt => (0i64, t.created_at, t.id.clone()),
            SortKey::DueAt => (t.due_at.unwrap_or(i64::MAX), t.created_at, t.id.clone()),
            // Higher priority first, then older first.
            SortKey::QueueOrder => (-(t.priority as i64), t.created_at, t.id.clone()),
            // The queue's order reversed.
            SortKey::Priority => (t.priority as i64, -t.created_at, String::new()),
        };
        let o = key(a).cmp(&key(b));
        // Priority's tie-break on ids runs backwards too.
        let o = if sort.key == SortKey::Priority {
            o.then_with(|| b.id.cmp(&a.id))
        } else {
            o
        };
        if sort.descending { o.reverse() } else { o }
    });
    found.into_iter().map(|t| t.id.clone()).collect()
}

/// Pages through a search to its end, checking the paging rules.
fn walk_search(kv: &mut MemKv, q: &SearchQuery) -> Result<Vec<String>, TestCaseError> {
    let mut out = Vec::new();
    let mut after = None;
    for _ in 0..100 {
        let page = search::search(
            kv,
            &SearchQuery {
                after: after.clone(),
                ..q.clone()
            },
        )
        .map_err(|e| TestCaseError::fail(format!("search failed: {e} ({q:?})")))?;
        prop_assert!(page.tasks.len() <= q.limit as usize);
        prop_assert!(!page.budget_spent, "a small store never spends the budget");
        prop_assert!(page.next.is_none() || page.tasks.len() == q.limit as usize);
        prop_assert!(
            after.is_none() || !page.tasks.is_empty(),
            "next led nowhere"
        );
        out.extend(ids(&page.tasks));
        match page.next {
            Some(n) => after = Some(n),
            None => return Ok(out),
        }
    }
    Err(TestCaseError::fail("paging did not end"))
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 256,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn every_search_page_cursor_walk_and_count_agrees_with_brute_force(
        seeds in proptest::collection::vec(seed(), 0..40),
        ops in proptest::collection::vec(op(), 1..40),
        searches in proptest::collection::vec((filter(), sort(), 1..5u32, viewer()), 1..8),
        offered in (0..ROLES.len(), 1..3usize, any::<bool>(), any::<bool>(), 1..5u32),
    ) {
        let mut kv = MemKv::new();
        let mut model = Model::default();
        plant(&mut kv, &mut model, &seeds)?;
        for (i, op) in ops.iter().enumerate() {
            kv.slot = (i % 3) as u32;
            kv.now = (i as i64 * 7919) % 100;
            apply(&mut kv, &mut model, op)?;
            // The search entries and counts stay as the rows imply.
            if i % 10 == 9 {
                verify(&mut kv, &model)?;
            }
        }
        verify(&mut kv, &model)?;
        // What a role is offered, in queue order: the shape a reviewer's
        // inbox asks most, served by the queue's own index.
        let (role, states, by_priority, descending, limit) = offered;
        let offered = TaskFilter {
            role: Some(ROLES[role].to_owned()),
            states: [TaskState::Open, TaskState::Escalated][..states].to_vec(),
            ..TaskFilter::default()
        };
        let key = if by_priority { SortKey::Priority } else { SortKey::QueueOrder };
        let mut searches = searches;
        searches.push((offered, TaskSort { key, descending }, limit, None));
        for (f, s, limit, v) in &searches {
            let want = expected(&model, f, *s, v.as_ref());
            let q = SearchQuery {
                filter: f.clone(),
                sort: *s,
                limit: *limit,
                after: None,
                viewer: v.clone(),
            };
            let got = walk_search(&mut kv, &q)?;
            if std::env::var_os("SEARCH_STATS").is_some() {
                eprintln!("stats {} of {}", want.len(), model.tasks.len());
            }
            prop_assert_eq!(&got, &want, "{:?}", q);
            let counted = search::count(&mut kv, f, v.as_ref(), None)
                .map_err(|e| TestCaseError::fail(format!("count failed: {e}")))?;
            prop_assert!(counted.exact && counted.next.is_none());
            prop_assert_eq!(counted.count, want.len() as u64, "count of {:?}", q);
            // A cursor of this search is refused by another.
            if let Some(next) = search::search(&mut kv, &q).ok().and_then(|p| p.next) {
                let other = SearchQuery {
                    sort: TaskSort { descending: !s.descending, ..*s },
                    after: Some(next),
                    ..q.clone()
                };
                prop_assert!(
                    matches!(search::search(&mut kv, &other), Err(StoreError::Invalid(_))),
                    "a cursor crossed searches"
                );
            }
        }
    }
}
