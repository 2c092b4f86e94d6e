//! Search, issue 56: a page for each indexed filter and a count, each on a
//! small and a large database, and a filter no index decides, which a call
//! walks only as far as its budget. The timed call does the same work at
//! both sizes (a page of 50 matches, a count of the counters), so the ratio
//! says what the backlog costs it.

use anyhow::{Result, ensure};
use leasehold_guest::kv::Kv;
use leasehold_guest::model::{Settlement, TaskState};
use leasehold_guest::search::{
    AssigneeFilter, SEARCH_BUDGET, SearchQuery, SortKey, TaskFilter, TaskSort,
};
use leasehold_guest::tasks;
use leasehold_host::{Durability, Error};
use std::time::Instant;

use crate::bench::Bench;
use crate::drivers::{Driver, Kind};
use crate::workload::task;

/// The search store: `n` tasks over 8 kinds, 10 cases, 10 runs; every
/// third claimed by one of five holders, every fifth of the rest completed.
fn seed_search(kv: &mut dyn Kv, n: usize) -> Result<(), Error> {
    for i in 0..n {
        let mut t = task(
            format!("s-{i:07}"),
            i as i64,
            "approver",
            format!("case-{}", i % 10),
        );
        t.kind = format!("kind-{}", i % 8);
        t.run = format!("run-{}", i % 10);
        tasks::open(kv, &t)?;
        if i % 3 == 0 {
            let holder = format!("holder-{}", i % 5);
            tasks::claim(kv, &t.id, &holder, &t.candidate_roles, None, None)?;
        } else if i % 5 == 0 {
            tasks::settle(kv, &t.id, Settlement::Completed, None, None, None)?;
        }
    }
    Ok(())
}

fn page(filter: TaskFilter, key: SortKey) -> SearchQuery {
    SearchQuery {
        filter,
        sort: TaskSort {
            key,
            descending: false,
        },
        limit: 50,
        after: None,
        viewer: None,
    }
}

impl Bench {
    pub(crate) fn search(&mut self) -> Result<()> {
        let s = self.sizes;
        println!("## Search (issue 56)\n");
        println!(
            "Each figure is the p50 latency of one call, µs, median (min–max) over {} runs of \
             {} calls, Durability::None. Ratio = large / small, of the medians. The store: \
             8 kinds, 10 cases, 10 runs; every third task claimed (five holders), every fifth \
             of the rest completed.\n",
            s.runs, s.read_calls
        );
        println!(
            "| measurement | small | large | product small | product large | product ratio | native small | native large | native ratio |"
        );
        println!("| --- | --- | --- | --- | --- | --- | --- | --- | --- |");
        let (small, large) = (s.search_small, s.search_large);
        let cases: Vec<(&str, SearchQuery)> = vec![
            (
                "`search` page of 50, state claimed (`by-state`)",
                page(
                    TaskFilter {
                        states: vec![TaskState::Claimed],
                        ..TaskFilter::default()
                    },
                    SortKey::CreatedAt,
                ),
            ),
            (
                "`search` page of 50, a kind and state open (`by-kind`)",
                page(
                    TaskFilter {
                        kinds: vec!["kind-3".into()],
                        states: vec![TaskState::Open],
                        ..TaskFilter::default()
                    },
                    SortKey::CreatedAt,
                ),
            ),
            (
                "`search` page of 50, an assignee (`assigned`)",
                page(
                    TaskFilter {
                        assignee: Some(AssigneeFilter::Actor("holder-2".into())),
                        ..TaskFilter::default()
                    },
                    SortKey::CreatedAt,
                ),
            ),
            (
                "`search` page of 50, a case (`case`)",
                page(
                    TaskFilter {
                        case: Some("case-4".into()),
                        ..TaskFilter::default()
                    },
                    SortKey::CreatedAt,
                ),
            ),
            (
                "`search` page of 50, a run (`by-run`)",
                page(
                    TaskFilter {
                        run: Some("run-7".into()),
                        ..TaskFilter::default()
                    },
                    SortKey::CreatedAt,
                ),
            ),
            (
                "`search` page of 50, due in a window, by due time (`by-due`)",
                page(
                    TaskFilter {
                        due_after: Some(86_400_000),
                        due_before: Some(86_400_100),
                        ..TaskFilter::default()
                    },
                    SortKey::DueAt,
                ),
            ),
            (
                "`search` page of 50, the whole tenant in queue order (`by-priority`)",
                page(TaskFilter::default(), SortKey::QueueOrder),
            ),
        ];
        let paths = self.seed_pair("search", (small, large), seed_search)?;
        for (what, q) in cases {
            self.time_pair(what, &paths, (small, large), s.read_calls, |d, _| {
                let p = d.search(&q)?;
                ensure!(p.tasks.len() == 50, "{what}: a page of {}", p.tasks.len());
                Ok(())
            })?;
        }
        let open = TaskFilter {
            states: vec![TaskState::Open, TaskState::Escalated],
            ..TaskFilter::default()
        };
        self.time_pair(
            "`count`, states open and escalated (the counters)",
            &paths,
            (small, large),
            s.read_calls,
            |d, n| {
                let c = d.count(&open)?;
                ensure!(c.exact && c.count > 0, "count of {} in {n}", c.count);
                Ok(())
            },
        )?;
        println!();
        println!(
            "A filter no index decides (`role`, in creation order, matching no task): each \
             call walks at most its budget of entries and answers where it stopped.\n"
        );
        println!("| store | entries a page walks | p50 of a page | calls to walk it all |");
        println!("| --- | --- | --- | --- |");
        let none = page(
            TaskFilter {
                role: Some("nobody-has-this-role".into()),
                ..TaskFilter::default()
            },
            SortKey::CreatedAt,
        );
        for (path, n) in paths.iter().zip([small, large]) {
            let d = Driver::open(Kind::Product, path, Durability::None)?;
            let mut times = Vec::new();
            let mut pages = 0;
            let mut after = None;
            loop {
                let q = SearchQuery {
                    after: after.take(),
                    ..none.clone()
                };
                let started = Instant::now();
                let p = d.search(&q)?;
                times.push(started.elapsed());
                pages += 1;
                ensure!(
                    p.tasks.is_empty(),
                    "the role matched {} tasks",
                    p.tasks.len()
                );
                match p.next {
                    Some(next) => after = Some(next),
                    None => break,
                }
            }
            times.sort();
            let p50 = times[times.len() / 2].as_secs_f64() * 1e6;
            let walked = n.min(SEARCH_BUDGET);
            println!("| {n} tasks | {walked} | {p50:.0} µs | {pages} |");
        }
        for path in paths {
            std::fs::remove_file(&path)?;
        }
        println!();
        Ok(())
    }
}
