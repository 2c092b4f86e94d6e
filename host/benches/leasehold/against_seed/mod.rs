//! Section `seed`: Leasehold against the seed it was designed from, in
//! process, both on redb's in-memory backend (issue 59). The seed's timer
//! and task stores (`seed_core`, `timers`, `tasks`: SEED BASELINE, NOT
//! PRODUCT CODE) run with their async hop taken out, beside the component
//! through the host on an in-memory engine, and, when
//! `LEASEHOLD_BENCH_MAIN_WASM` names a component file, that build too (the
//! previous main's guest), all in one run, taking turns. "In memory" is
//! the storage kind both share: redb over `InMemoryBackend`, commits
//! without a flush, so what is compared is the rules and their layout, not
//! a disk. Ratios are seed time ÷ Leasehold time, of throughput and of p50
//! latency: 1.0 or more means Leasehold is at least as fast. It times the
//! verbs and checks their answers; it must never feed the seed's code into
//! the product.

// The seed is kept whole; the benchmark calls only part of it.
#[allow(dead_code)]
mod seed_core;
#[allow(dead_code)]
mod tasks;
#[allow(dead_code)]
mod timers;

use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, Result, anyhow, ensure};
use leasehold_host::{ArmOutcome, Durability, Engine, Settlement, TaskState, Tenant};

use crate::bench::Bench;
use crate::drivers::{TENANT, bench_limits};
use crate::stats::{Run, Runs};
use crate::workload::{ALICE, REVIEWER, SWEEP_FROM, reviewer_query, reviewer_task, task_id, timer};

use seed_core::{RedbStore, Timestamp};

/// Calls one engine makes before the next takes its turn (as in `verbs`).
const TURN: usize = 10;

/// The seed's instants are whole seconds and its claims hold for sixty:
/// each of its `claim-due` calls sweeps a minute after the last, so what a
/// call claimed is claimable again and every call finds a full page, as in
/// the product's run (see [`SWEEP_FROM`]).
const SEED_SWEEP_FROM: i64 = 10_000_000;
const SEED_LEASE: i64 = 60;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Verb {
    ClaimDue,
    Queue,
    Arm,
    Claim,
    Settle,
    Open,
}

impl Verb {
    const ALL: [Verb; 6] = [
        Verb::ClaimDue,
        Verb::Queue,
        Verb::Arm,
        Verb::Claim,
        Verb::Settle,
        Verb::Open,
    ];

    fn name(self) -> &'static str {
        match self {
            Verb::ClaimDue => "claim-due (100 of 1,000 due)",
            Verb::Queue => "queue (limit 50 of 1,000)",
            Verb::Arm => "arm",
            Verb::Claim => "claim",
            Verb::Settle => "settle",
            Verb::Open => "open",
        }
    }

    fn short_name(self) -> &'static str {
        self.name().split(' ').next().unwrap_or_default()
    }
}

/// One engine of a run.
enum Subject {
    Seed(RedbStore),
    Leasehold(Tenant),
}

/// The seed's task for the benchmark's task `i`: the same fields and sizes.
fn seed_task(i: usize) -> seed_core::Task {
    let t = reviewer_task(i);
    seed_core::Task {
        id: seed_core::TaskId(i as u128 + (1 << 100)),
        run: t.run,
        case: Some(seed_core::CaseId(i as u128 / 10)),
        kind: t.kind,
        justification: t.justification,
        candidate_roles: t.candidate_roles,
        assignee: None,
        priority: match t.priority {
            leasehold_host::Priority::Low => seed_core::Priority::Low,
            leasehold_host::Priority::Normal => seed_core::Priority::Normal,
            leasehold_host::Priority::High => seed_core::Priority::High,
            leasehold_host::Priority::Urgent => seed_core::Priority::Urgent,
        },
        state: seed_core::TaskState::Open,
        escalate_to: t.escalate_to,
        excluded_actors: t.excluded_actors,
        created_at: Timestamp(t.created_at),
        due_at: t.due_at.map(Timestamp),
    }
}

fn seed_timer(i: usize, fire_at: i64) -> seed_core::Timer {
    let t = timer(i, fire_at);
    seed_core::Timer {
        run: seed_core::RunId(i as u128 % 64),
        case: Some(seed_core::CaseId(i as u128 / 10)),
        effect: seed_core::EffectKey(t.effect),
        step: seed_core::StepId(t.step),
        phase: seed_core::Phase::Forward,
        fire_at: Timestamp(fire_at),
    }
}

/// Which engine a run drives: the seed (`None`), or a component (`Some`):
/// the one given, or this build's when none is.
type Which<'a> = Option<Option<&'a Arc<[u8]>>>;

fn err(e: impl std::fmt::Display) -> anyhow::Error {
    anyhow!("the seed: {e}")
}

impl Bench {
    /// A fresh subject for one run of `verb`, seeded for `calls` calls
    /// (outside the timing): the seed, or the component `component` (none:
    /// this build's).
    fn seed_subject(&self, verb: Verb, calls: usize, component: Which<'_>) -> Result<Subject> {
        let s = self.sizes;
        let roles = [REVIEWER.to_owned()];
        let Some(component) = component else {
            let store = RedbStore::in_memory(TENANT).map_err(err)?;
            match verb {
                Verb::Open | Verb::Arm => {}
                Verb::Claim => {
                    for i in 0..calls {
                        store.open(&seed_task(i)).map_err(err)?;
                    }
                }
                Verb::Settle => {
                    for i in 0..calls {
                        let t = seed_task(i);
                        store.open(&t).map_err(err)?;
                        store.claim(t.id, ALICE, &roles).map_err(err)?;
                    }
                }
                Verb::Queue => {
                    for i in 0..s.queue_backlog {
                        store.open(&seed_task(i)).map_err(err)?;
                    }
                }
                Verb::ClaimDue => {
                    for i in 0..s.timer_pool {
                        store
                            .arm(&seed_timer(i, 1_000_000 + i as i64))
                            .map_err(err)?;
                    }
                }
            }
            return Ok(Subject::Seed(store));
        };
        let mut builder = Engine::builder()
            .durability(Durability::None)
            .limits(bench_limits());
        if let Some(bytes) = component {
            builder = builder.component(bytes.clone());
        }
        let t = builder.in_memory()?.tenant(TENANT)?;
        let roles: Vec<&str> = vec![REVIEWER];
        match verb {
            Verb::Open | Verb::Arm => {}
            Verb::Claim => {
                for i in 0..calls {
                    t.open(&reviewer_task(i))?;
                }
            }
            Verb::Settle => {
                for i in 0..calls {
                    t.open(&reviewer_task(i))?;
                    t.claim(&task_id(i), ALICE, &roles, None)?;
                }
            }
            Verb::Queue => {
                for i in 0..s.queue_backlog {
                    t.open(&reviewer_task(i))?;
                }
            }
            Verb::ClaimDue => {
                for i in 0..s.timer_pool {
                    t.arm(&timer(i, 1_000_000 + i as i64))?;
                }
            }
        }
        // Warm the instance pool.
        for _ in 0..3 {
            t.open_count()?;
        }
        Ok(Subject::Leasehold(t))
    }

    /// One call of `verb` (the `i`th of its run), its answer checked.
    fn seed_call(subject: &Subject, verb: Verb, i: usize) -> Result<()> {
        let roles = [REVIEWER.to_owned()];
        match subject {
            Subject::Seed(s) => match verb {
                Verb::Open => {
                    let t = seed_task(i);
                    ensure!(s.open(&t).map_err(err)? == t, "open answered another");
                }
                Verb::Claim => {
                    let got = s.claim(seed_task(i).id, ALICE, &roles).map_err(err)?;
                    ensure!(got.state == seed_core::TaskState::Claimed, "not claimed");
                }
                Verb::Settle => s
                    .set_state(seed_task(i).id, seed_core::TaskState::Completed)
                    .map_err(err)?,
                Verb::Queue => {
                    let page = s.queue(&roles, 50).map_err(err)?;
                    ensure!(page.len() == 50, "queue page of {}", page.len());
                }
                Verb::Arm => s.arm(&seed_timer(i, 5_000 + i as i64)).map_err(err)?,
                Verb::ClaimDue => {
                    let now = Timestamp(SEED_SWEEP_FROM + SEED_LEASE * i as i64);
                    let got = s.claim_due(now, 100).map_err(err)?;
                    ensure!(got.len() == 100, "claim-due claimed {}", got.len());
                }
            },
            Subject::Leasehold(t) => match verb {
                Verb::Open => {
                    let task = reviewer_task(i);
                    ensure!(t.open(&task)?.id == task.id, "open answered another");
                }
                Verb::Claim => {
                    let got = t.claim(&task_id(i), ALICE, &[REVIEWER], None)?;
                    ensure!(got.state == TaskState::Claimed, "not claimed");
                }
                Verb::Settle => ensure!(
                    t.settle(&task_id(i), Settlement::Completed, None)?,
                    "settle did not move"
                ),
                Verb::Queue => {
                    let page = t.queue(&reviewer_query(50))?;
                    ensure!(page.tasks.len() == 50, "queue page of {}", page.tasks.len());
                }
                Verb::Arm => {
                    let got = t.arm(&timer(i, 5_000 + i as i64))?;
                    ensure!(got == ArmOutcome::Armed, "arm answered {got:?}");
                }
                Verb::ClaimDue => {
                    let got = t.claim_due(SWEEP_FROM + i as i64, 100, 1)?;
                    ensure!(got.len() == 100, "claim-due claimed {}", got.len());
                }
            },
        }
        Ok(())
    }

    /// The previous main's component, when `LEASEHOLD_BENCH_MAIN_WASM`
    /// names one.
    fn main_component() -> Result<Option<Arc<[u8]>>> {
        let Some(path) = std::env::var_os("LEASEHOLD_BENCH_MAIN_WASM") else {
            return Ok(None);
        };
        let bytes =
            std::fs::read(&path).with_context(|| format!("reading {}", path.to_string_lossy()))?;
        Ok(Some(Arc::from(bytes)))
    }

    pub(crate) fn against_seed(&mut self, args: &[String]) -> Result<()> {
        let main = Self::main_component()?;
        // Compiled once, outside the timing, and kept compiled to the end.
        let _kept = match &main {
            Some(bytes) => Some(
                Engine::builder()
                    .limits(bench_limits())
                    .component(bytes.clone())
                    .in_memory()?,
            ),
            None => None,
        };
        let picked: Vec<Verb> = Verb::ALL
            .into_iter()
            .filter(|v| args.iter().any(|a| a == v.short_name()))
            .collect();
        // `LEASEHOLD_BENCH_SEED_ENGINES` (a comma-separated list of `seed`,
        // `main`, `this`) keeps only those, for a profiler.
        let only = std::env::var("LEASEHOLD_BENCH_SEED_ENGINES").ok();
        let keep = |name: &str| {
            only.as_deref()
                .is_none_or(|o| o.split(',').any(|n| n == name))
        };
        let mut engines: Vec<(&str, Which<'_>)> = Vec::new();
        if keep("seed") {
            engines.push(("seed", None));
        }
        if let Some(m) = &main
            && keep("main")
        {
            engines.push(("main", Some(Some(m))));
        }
        if keep("this") {
            engines.push(("this", Some(None)));
        }
        let mut rows: Vec<(Verb, Vec<Runs>)> = Vec::new();
        for verb in Verb::ALL {
            if !picked.is_empty() && !picked.contains(&verb) {
                continue;
            }
            let calls = match verb {
                Verb::ClaimDue => self.sizes.calls_immediate,
                _ => self.sizes.calls_none,
            };
            let mut per: Vec<Vec<Run>> = (0..engines.len()).map(|_| Vec::new()).collect();
            for _ in 0..self.sizes.runs {
                let subjects = engines
                    .iter()
                    .map(|(_, e)| self.seed_subject(verb, calls, *e))
                    .collect::<Result<Vec<_>>>()
                    .with_context(|| format!("seeding {}", verb.name()))?;
                let mut runs: Vec<Vec<f64>> = vec![Vec::with_capacity(calls); subjects.len()];
                for from in (0..calls).step_by(TURN) {
                    for (subject, run) in subjects.iter().zip(&mut runs) {
                        for i in from..(from + TURN).min(calls) {
                            let started = Instant::now();
                            Self::seed_call(subject, verb, i)
                                .with_context(|| verb.name().to_owned())?;
                            run.push(started.elapsed().as_secs_f64() * 1e6);
                        }
                    }
                }
                if self.sizes.smoke {
                    for s in &subjects {
                        if let Subject::Leasehold(t) = s {
                            let found = t.check()?;
                            ensure!(found.is_empty(), "discrepancies: {found:?}");
                        }
                    }
                }
                for (k, run) in runs.into_iter().enumerate() {
                    per[k].push(Run(run));
                }
            }
            eprintln!("  measured {} against the seed", verb.name());
            rows.push((verb, per.into_iter().map(Runs).collect()));
        }
        let names: Vec<&str> = engines.iter().map(|(n, _)| *n).collect();
        self.print_against_seed(&rows, &names);
        Ok(())
    }

    fn print_against_seed(&mut self, rows: &[(Verb, Vec<Runs>)], names: &[&str]) {
        println!("## Against the seed, in process (issue 59)\n");
        println!(
            "Single thread, redb's in-memory backend for every engine, commits without a \
             flush, one call a transaction. *seed*: the seed's native redb stores with their \
             async hop taken out; *this*: the component through the host as shipped \
             (kept instances); *main*, when present: the same host with the previous main's \
             component. {} calls per run ({} for `claim-due`, 100 a call of a pool of {} due), \
             median (min–max) of {} runs; the engines take turns {TURN} calls at a time. \
             Ratios are seed time ÷ Leasehold time: of throughput (calls/s, medians), then \
             of p50 latency; 1.0 or more is at least as fast.\n",
            self.sizes.calls_none,
            self.sizes.calls_immediate,
            self.sizes.timer_pool,
            self.sizes.runs,
        );
        let at = |n: &str| names.iter().position(|x| *x == n);
        let mut ratios: Vec<(usize, usize)> = Vec::new();
        if let Some(s) = at("seed") {
            ratios.extend(at("main").map(|m| (m, s)));
            ratios.extend(at("this").map(|t| (t, s)));
        }
        if let (Some(m), Some(t)) = (at("main"), at("this")) {
            ratios.push((t, m));
        }
        let mut head = String::from("| verb |");
        for n in names {
            head.push_str(&format!(" {n} calls/s |"));
        }
        for n in names {
            head.push_str(&format!(" {n} p50 µs |"));
        }
        for (a, b) in &ratios {
            head.push_str(&format!(" {}/{} |", names[*a], names[*b]));
        }
        for (a, b) in &ratios {
            head.push_str(&format!(" {}/{} by p50 |", names[*a], names[*b]));
        }
        println!("{head}");
        println!(
            "|{}",
            " --- |".repeat(1 + 2 * names.len() + 2 * ratios.len())
        );
        for (verb, runs) in rows {
            let mut line = format!("| {} |", verb.name());
            for r in runs {
                line.push_str(&format!(" {} |", r.rate().rate()));
            }
            for r in runs {
                line.push_str(&format!(" {} |", r.p50().us()));
            }
            for (a, b) in &ratios {
                let q = runs[*a].rate().median / runs[*b].rate().median;
                line.push_str(&format!(" {q:.2} |"));
                let (what, goal, met) = match (names[*a], names[*b]) {
                    ("this", "main") => (
                        "this/main",
                        "≥ 1.0 (no verb below the previous main)",
                        q >= 1.0,
                    ),
                    ("this", "seed")
                        if matches!(verb, Verb::ClaimDue | Verb::Queue | Verb::Arm) =>
                    {
                        ("this/seed", "≥ 1.0", q >= 1.0)
                    }
                    _ => continue,
                };
                self.target(
                    format!("{}, in memory: {what}", verb.name()),
                    goal,
                    format!("{q:.2}"),
                    met,
                );
            }
            // The same ratio of p50 latencies: what a slow spell of a
            // shared machine moves least.
            for (a, b) in &ratios {
                let q = runs[*b].p50().median / runs[*a].p50().median;
                line.push_str(&format!(" {q:.2} |"));
            }
            println!("{line}");
        }
        println!();
    }
}
