//! Section 3, scaling with the backlog: each measurement on a small and a
//! large seeded database, product and native, and the ratio of their p50s.
//! The timed call must do the same work at both sizes, only beside more
//! data, or the ratio compares different work.

use std::path::Path;
use std::time::Instant;

use anyhow::{Result, ensure};
use leasehold_guest::kv::Kv;
use leasehold_guest::tasks;
use leasehold_host::{Durability, Error, QueueQuery};

use crate::bench::Bench;
use crate::drivers::{Driver, Kind};
use crate::stats::{Runs, Spread, time_calls};
use crate::workload::{ALICE, REVIEWER, SWEEP_FROM, seed, seed_tasks, seed_timers, task};

impl Bench {
    /// Item 3: each verb at a small and a large backlog, on the product and
    /// (for reference) natively; the figure is the ratio of the p50s.
    pub(crate) fn scaling(&mut self) -> Result<()> {
        let s = self.sizes;
        println!("## 3. Scaling with the backlog\n");
        println!(
            "Each figure is the p50 latency of one call, µs, median (min–max) over {} runs of \
             {} calls ({} for `claim-due`, which writes), Durability::None. Ratio = large / \
             small, of the medians.\n",
            s.runs, s.read_calls, s.write_calls
        );
        println!(
            "| measurement | small | large | product small | product large | product ratio | native small | native large | native ratio |"
        );
        println!("| --- | --- | --- | --- | --- | --- | --- | --- | --- |");

        // `queue` for a role that matches 10 tasks, beside many open tasks
        // offered to other roles.
        let auditor = |i: usize| {
            task(
                format!("audit-{i:03}"),
                500 + i as i64,
                "auditor",
                format!("audit-case-{i}"),
            )
        };
        let others = |n: usize| {
            (0..n).map(|i| {
                task(
                    format!("other-{i:07}"),
                    1_000 + i as i64,
                    &format!("team-{}", i % 20),
                    format!("case-{}", i / 10),
                )
            })
        };
        let query = QueueQuery {
            roles: vec!["auditor".into()],
            actor: Some(ALICE.into()),
            limit: 50,
            after: None,
        };
        self.scale_case(
            "`queue` for a role matching 10 tasks; open tasks of other roles",
            (s.queue_small, s.queue_large),
            |kv, n| seed_tasks(kv, (0..10).map(auditor).chain(others(n))),
            s.read_calls,
            |d, _| {
                let page = d.queue(&query)?;
                ensure!(page.tasks.len() == 10, "queue page of {}", page.tasks.len());
                Ok(())
            },
        )?;

        self.scale_case(
            "`open-count`; pending tasks",
            (s.count_small, s.count_large),
            |kv, n| seed_tasks(kv, others(n)),
            s.read_calls,
            |d, n| {
                let got = d.open_count()?;
                ensure!(got == n as u64, "open-count answered {got}, expected {n}");
                Ok(())
            },
        )?;

        self.scale_case(
            "`claim-due` (limit 100); timers held under unexpired leases",
            (0, s.held_large),
            |kv, n| seed_timers(kv, n, s.timer_pool),
            s.write_calls,
            // Each measured call sweeps at a later `now` (see SWEEP_FROM);
            // the call counter lives in the closure.
            {
                let mut call = 0i64;
                move |d, _| {
                    call += 1;
                    let got = d.claim_due(SWEEP_FROM + call, 100, 1)?;
                    ensure!(got.len() == 100, "claim-due claimed {}", got.len());
                    Ok(())
                }
            },
        )?;

        // `held`: a page of the 10 tasks alice holds, beside tasks held by
        // fifty others.
        let mine = |i: usize| {
            task(
                format!("mine-{i:03}"),
                500 + i as i64,
                REVIEWER,
                format!("mine-case-{i}"),
            )
        };
        self.scale_case(
            "`held` page (limit 50) of the 10 tasks one actor holds; tasks others hold",
            (s.count_small, s.count_large),
            |kv, n| {
                let roles = [REVIEWER.to_owned()];
                for i in 0..10 {
                    let t = mine(i);
                    tasks::open(kv, &t)?;
                    tasks::claim(kv, &t.id, ALICE, &roles, None, None)?;
                }
                for t in others(n) {
                    tasks::open(kv, &t)?;
                    let holder = format!("holder-{:02}", t.created_at % 50);
                    tasks::claim(kv, &t.id, &holder, &t.candidate_roles, None, None)?;
                }
                Ok(())
            },
            s.read_calls,
            |d, _| {
                let page = d.held(ALICE, 50)?;
                ensure!(page.tasks.len() == 10, "held page of {}", page.tasks.len());
                Ok(())
            },
        )?;

        let target_case = |i: usize| {
            task(
                format!("target-{i:03}"),
                500 + i as i64,
                REVIEWER,
                "case-target".into(),
            )
        };
        self.scale_case(
            "`for-case` page (limit 50) of a 10-task case; tasks in other cases",
            (s.case_small, s.case_large),
            |kv, n| seed_tasks(kv, (0..10).map(target_case).chain(others(n))),
            s.read_calls,
            |d, _| {
                let page = d.for_case("case-target", 50)?;
                ensure!(
                    page.tasks.len() == 10,
                    "for-case page of {}",
                    page.tasks.len()
                );
                Ok(())
            },
        )?;
        println!();
        Ok(())
    }

    /// Seeds a small and a large database with `seed(kv, n)`, then times
    /// `call(driver, n)` on each, product and native.
    fn scale_case(
        &mut self,
        what: &str,
        sizes: (usize, usize),
        seed_with: impl Fn(&mut dyn Kv, usize) -> Result<(), Error>,
        calls: usize,
        call: impl FnMut(&Driver, usize) -> Result<()>,
    ) -> Result<()> {
        let paths = self.seed_pair(what, sizes, seed_with)?;
        self.time_pair(what, &paths, sizes, calls, call)?;
        for path in paths {
            std::fs::remove_file(&path)?;
        }
        Ok(())
    }

    /// A small and a large database seeded with `seed(kv, n)`.
    pub(crate) fn seed_pair(
        &mut self,
        what: &str,
        (small, large): (usize, usize),
        seed_with: impl Fn(&mut dyn Kv, usize) -> Result<(), Error>,
    ) -> Result<Vec<std::path::PathBuf>> {
        let mut paths = Vec::new();
        for n in [small, large] {
            self.files += 1;
            let path = self.scratch.join(format!("bench-{}.redb", self.files));
            let started = Instant::now();
            seed(&path, |kv| seed_with(kv, n))?;
            eprintln!(
                "  seeded {n} for {what} in {:.1} s",
                started.elapsed().as_secs_f64()
            );
            paths.push(path);
        }
        Ok(paths)
    }

    /// Times `call(driver, n)` on the small and the large database, product
    /// and native, and prints their row with the ratio of the p50s.
    pub(crate) fn time_pair(
        &mut self,
        what: &str,
        paths: &[std::path::PathBuf],
        (small, large): (usize, usize),
        calls: usize,
        mut call: impl FnMut(&Driver, usize) -> Result<()>,
    ) -> Result<()> {
        let mut p50 = |kind: Kind, path: &Path, n: usize| -> Result<Spread> {
            let mut runs = Vec::new();
            for _ in 0..self.sizes.runs {
                let d = Driver::open(kind, path, Durability::None)?;
                d.open_count()?;
                runs.push(time_calls(calls, |_| call(&d, n))?);
                if self.sizes.smoke {
                    d.check()?;
                }
            }
            Ok(Runs(runs).p50())
        };
        let mut figures = Vec::new();
        for kind in [Kind::Product, Kind::Native] {
            for (path, n) in paths.iter().zip([small, large]) {
                figures.push(p50(kind, path, n)?);
            }
        }
        let [ps, pl, ns, nl] = [figures[0], figures[1], figures[2], figures[3]];
        let (pr, nr) = (pl.median / ps.median, nl.median / ns.median);
        println!(
            "| {what} | {small} | {large} | {} | {} | **{pr:.2}** | {} | {} | {nr:.2} |",
            ps.us(),
            pl.us(),
            ns.us(),
            nl.us(),
        );
        self.target(
            format!("scaling: {what}, {small} → {large}"),
            "product ratio ≤ 1.1",
            format!("{pr:.2}"),
            pr <= 1.1,
        );
        Ok(())
    }
}
