//! Section 1, per-verb throughput and latency: every verb on the product,
//! the native build and raw redb, each on a fresh file, the three taking
//! turns so that a slow spell of the machine hits them alike. Each call's
//! answer is checked inside its timing, by a comparison or two; seeding,
//! opening and warming an engine must stay outside it.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, ensure};
use leasehold_guest::tasks;
use leasehold_host::{ArmOutcome, Durability, TaskState};

use crate::bench::Bench;
use crate::drivers::{Driver, Kind, RAW_READ_KEYS, RAW_VALUE, Raw, Subject};
use crate::stats::{Run, Runs, us};
use crate::workload::{
    ALICE, REVIEWER, SWEEP_FROM, reviewer_query, reviewer_task, seed, seed_tasks, seed_timers,
    task_id, timer,
};

/// How long the thread idles after each call in the paused runs: about what
/// one fsync takes on the disk these figures come from, so that a CPU-bound
/// run shows what waiting on the disk does to the work around it.
const PAUSE: Duration = Duration::from_micros(250);
/// How many calls one engine makes before the next takes its turn: short
/// enough that a slow spell of the shared machine or its disk hits every
/// engine alike, long enough that each runs with warm caches.
const TURN: usize = 10;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Verb {
    Open,
    Claim,
    Update,
    Assign,
    Settle,
    Escalate,
    Queue,
    ClaimNext,
    /// What a caller does without `claim-next`: a one-task page, then a
    /// claim of its head, two calls timed as one.
    QueueClaim,
    Arm,
    ClaimDue,
}

impl Verb {
    const ALL: [Verb; 11] = [
        Verb::Open,
        Verb::Claim,
        Verb::Update,
        Verb::Assign,
        Verb::Settle,
        Verb::Escalate,
        Verb::Queue,
        Verb::ClaimNext,
        Verb::QueueClaim,
        Verb::Arm,
        Verb::ClaimDue,
    ];

    fn name(self) -> &'static str {
        match self {
            Verb::Open => "open",
            Verb::Claim => "claim",
            Verb::Update => "update (due time)",
            Verb::Assign => "assign",
            Verb::Settle => "settle",
            Verb::Escalate => "escalate",
            Verb::Queue => "queue (limit 50)",
            Verb::ClaimNext => "claim-next",
            Verb::QueueClaim => "queue+claim (limit 1, then its head)",
            Verb::Arm => "arm",
            Verb::ClaimDue => "claim-due (limit 100)",
        }
    }

    /// As a command-line filter names it.
    fn short_name(self) -> &'static str {
        self.name().split(' ').next().unwrap_or_default()
    }

    fn reads_only(self) -> bool {
        self == Verb::Queue
    }
}

/// Results of one verb under one durability, per engine.
struct VerbRow {
    verb: Verb,
    durability: Durability,
    /// Measured with the thread idle for [`PAUSE`] after every call.
    paused: bool,
    product: Runs,
    fresh: Runs,
    native: Runs,
    raw: Runs,
}

/// Narrows the per-verb section for profiling: positional arguments naming
/// verbs (`claim`, `claim-due`, ...), durabilities (`none`, `immediate`) or
/// engines (`product`, `fresh`, `native`, `raw`) keep only those.
#[derive(Debug, Default)]
pub(crate) struct Filter {
    verbs: Vec<Verb>,
    durabilities: Vec<Durability>,
    kinds: Vec<Kind>,
}

impl Filter {
    pub(crate) fn from_args(args: &[String]) -> Filter {
        let mut f = Filter::default();
        for a in args {
            if let Some(v) = Verb::ALL.iter().find(|v| v.short_name() == a) {
                f.verbs.push(*v);
            }
            if let Some(k) = Kind::ALL.iter().find(|k| k.name() == a) {
                f.kinds.push(*k);
            }
            match a.as_str() {
                "none" => f.durabilities.push(Durability::None),
                "immediate" => f.durabilities.push(Durability::Immediate),
                _ => {}
            }
        }
        f
    }

    fn wants_verb(&self, v: Verb) -> bool {
        self.verbs.is_empty() || self.verbs.contains(&v)
    }

    fn wants_kind(&self, k: Kind) -> bool {
        self.kinds.is_empty() || self.kinds.contains(&k)
    }

    fn wants_durability(&self, d: Durability) -> bool {
        self.durabilities.is_empty() || self.durabilities.contains(&d)
    }
}

impl Bench {
    /// Seeds what `verb` needs for `calls` calls.
    fn seed_for(&self, verb: Verb, path: &Path, calls: usize) -> Result<()> {
        let s = self.sizes;
        match verb {
            Verb::Open | Verb::Arm => seed(path, |_| Ok(())),
            Verb::Claim
            | Verb::Update
            | Verb::Assign
            | Verb::Escalate
            | Verb::ClaimNext
            | Verb::QueueClaim => seed(path, |kv| seed_tasks(kv, (0..calls).map(reviewer_task))),
            Verb::Settle => seed(path, |kv| {
                let roles = [REVIEWER.to_owned()];
                for i in 0..calls {
                    let t = reviewer_task(i);
                    tasks::open(kv, &t)?;
                    tasks::claim(kv, &t.id, ALICE, &roles, None, None)?;
                }
                Ok(())
            }),
            Verb::Queue => seed(path, |kv| {
                seed_tasks(kv, (0..s.queue_backlog).map(reviewer_task))
            }),
            Verb::ClaimDue => seed(path, |kv| seed_timers(kv, 0, s.timer_pool)),
        }
    }

    /// One call of `verb` (the `i`th of its run), its answer checked.
    fn call_verb(subject: &Subject, verb: Verb, i: usize) -> Result<()> {
        let d = match subject {
            Subject::Raw(raw) => {
                if verb.reads_only() {
                    ensure!(raw.get(i % RAW_READ_KEYS)?, "raw key {i} missing");
                } else {
                    raw.insert(i)?;
                }
                return Ok(());
            }
            Subject::Driver(d) => d,
        };
        match verb {
            Verb::Open => {
                let t = reviewer_task(i);
                let want = leasehold_host::Task {
                    revision: 1,
                    ..t.clone()
                };
                ensure!(d.open_task(&t)? == want, "open answered another task");
            }
            Verb::Claim => {
                let got = d.claim(&task_id(i), ALICE, &[REVIEWER.to_owned()])?;
                ensure!(got.state == TaskState::Claimed, "claim did not claim");
            }
            Verb::Update => {
                let got = d.update(&task_id(i))?;
                ensure!(
                    got.revision == 2,
                    "update answered revision {}",
                    got.revision
                );
            }
            Verb::Assign => {
                let got = d.assign(&task_id(i), ALICE, &[REVIEWER.to_owned()])?;
                ensure!(
                    got.assignee.as_deref() == Some(ALICE),
                    "assign did not assign"
                );
            }
            Verb::Settle => ensure!(d.settle(&task_id(i))?, "settle did not move"),
            Verb::Escalate => {
                let got = d.escalate(&task_id(i))?;
                ensure!(got.state == TaskState::Escalated, "escalate did not");
            }
            Verb::Queue => {
                let page = d.queue(&reviewer_query(50))?;
                ensure!(page.tasks.len() == 50, "queue page of {}", page.tasks.len());
            }
            Verb::ClaimNext => {
                let got = d.claim_next(&reviewer_query(1))?;
                let got = got.context("claim-next found the queue empty")?;
                ensure!(
                    got.state == TaskState::Claimed && got.assignee.as_deref() == Some(ALICE),
                    "claim-next answered {} as {} by {:?}",
                    got.id,
                    got.state,
                    got.assignee
                );
            }
            Verb::QueueClaim => {
                let page = d.queue(&reviewer_query(1))?;
                let head = page.tasks.first().context("the queue is empty")?;
                let got = d.claim(&head.id, ALICE, &[REVIEWER.to_owned()])?;
                ensure!(got.state == TaskState::Claimed, "claim did not claim");
            }
            Verb::Arm => {
                let got = d.arm(&timer(i, 5_000 + i as i64))?;
                ensure!(got == ArmOutcome::Armed, "arm answered {got:?}");
            }
            Verb::ClaimDue => {
                let got = d.claim_due(SWEEP_FROM + i as i64, 100, 1)?;
                ensure!(got.len() == 100, "claim-due claimed {}", got.len());
            }
        }
        Ok(())
    }

    /// One run of `verb`: each engine on a fresh file of its own, the
    /// engines taking turns [`TURN`] calls at a time.
    fn verb_round(
        &mut self,
        filter: &Filter,
        verb: Verb,
        durability: Durability,
        pause: Option<Duration>,
    ) -> Result<Vec<Run>> {
        let calls = match pause {
            Some(_) => self.sizes.calls_immediate,
            None => self.sizes.calls(durability),
        };
        let mut subjects = Vec::new();
        for kind in Kind::ALL {
            let path = self.fresh_file();
            let subject = if !filter.wants_kind(kind) {
                None
            } else if kind == Kind::Raw {
                let raw = Raw::open(&path, durability)?;
                if verb.reads_only() {
                    for i in 0..RAW_READ_KEYS {
                        raw.insert(i)?;
                    }
                }
                Some(Subject::Raw(raw))
            } else {
                self.seed_for(verb, &path, calls)?;
                let d = Driver::open(kind, &path, durability)?;
                // Page the file in and warm the instance pool.
                for _ in 0..3 {
                    d.open_count()?;
                }
                Some(Subject::Driver(d))
            };
            subjects.push((path, subject));
        }
        let mut runs: Vec<Vec<f64>> = vec![Vec::with_capacity(calls); subjects.len()];
        for from in (0..calls).step_by(TURN) {
            for ((_, subject), run) in subjects.iter().zip(&mut runs) {
                let Some(subject) = subject else { continue };
                for i in from..(from + TURN).min(calls) {
                    let started = Instant::now();
                    Self::call_verb(subject, verb, i)?;
                    run.push(started.elapsed().as_secs_f64() * 1e6);
                    if let Some(pause) = pause {
                        std::thread::sleep(pause);
                    }
                }
            }
        }
        for (path, subject) in subjects {
            if self.sizes.smoke
                && let Some(Subject::Driver(d)) = &subject
            {
                d.check()?;
            }
            drop(subject);
            if path.exists() {
                std::fs::remove_file(&path)
                    .with_context(|| format!("removing {}", path.display()))?;
            }
        }
        Ok(runs.into_iter().map(Run).collect())
    }

    pub(crate) fn verbs(&mut self, filter: &Filter) -> Result<()> {
        let mut rows = Vec::new();
        let settings = [
            (Durability::None, None),
            (Durability::Immediate, None),
            (Durability::None, Some(PAUSE)),
        ];
        for (durability, pause) in settings {
            if !filter.wants_durability(durability) {
                continue;
            }
            for verb in Verb::ALL {
                if !filter.wants_verb(verb)
                    || pause.is_some() && !matches!(verb, Verb::Open | Verb::Claim)
                {
                    continue;
                }
                let mut per_kind: [Vec<Run>; 4] = Default::default();
                for _ in 0..self.sizes.runs {
                    let round = self
                        .verb_round(filter, verb, durability, pause)
                        .with_context(|| {
                            format!("{} ({durability:?}, pause {pause:?})", verb.name())
                        })?;
                    for (k, run) in round.into_iter().enumerate() {
                        per_kind[k].push(run);
                    }
                }
                let [product, fresh, native, raw] = per_kind;
                eprintln!(
                    "  measured {} ({durability:?}{})",
                    verb.name(),
                    if pause.is_some() { ", paused" } else { "" }
                );
                rows.push(VerbRow {
                    verb,
                    durability,
                    paused: pause.is_some(),
                    product: Runs(product),
                    fresh: Runs(fresh),
                    native: Runs(native),
                    raw: Runs(raw),
                });
            }
        }
        self.print_verbs(&rows);
        Ok(())
    }

    fn print_verbs(&mut self, rows: &[VerbRow]) {
        let s = self.sizes;
        println!("## 1. Per-verb throughput and latency\n");
        println!(
            "Single thread, a fresh redb file per run, {} calls per run under Durability::None \
             and {} under Durability::Immediate. *product*: the Wasm component through the host \
             as shipped, a call running on the instance the tenant's last call left; \
             *native*: the same rules compiled natively over the same redb layer, one \
             transaction per call; *raw*: one {}-byte insert + commit per call on redb directly \
             (for the read verb `queue`: one read transaction and one point get); *fresh*: \
             the product with a fresh instance per call (`EngineBuilder::fresh_instances`). \
             `queue` reads \
             the first page of {} queued tasks; `claim-next` claims the head of a queue of as \
             many tasks as the run makes calls, beside `queue+claim`, the two calls a caller \
             makes without it (a one-task page, then a claim of its head, timed together as one \
             call); `claim-due` claims 100 of a pool of {} due timers. The engines run \
             side by side on files of their own, taking turns {TURN} calls at a time, so a slow \
             spell of the machine or its disk hits them alike.\n",
            s.calls_none,
            s.calls_immediate,
            RAW_VALUE.len() + 16,
            s.queue_backlog,
            s.timer_pool
        );
        println!(
            "Ratios are of throughput (calls/s, medians): product/native 0.5 means the sandbox \
             halves throughput; product/raw 0.25 means a call costs four raw commits.\n"
        );
        for durability in [Durability::None, Durability::Immediate] {
            let rows: Vec<&VerbRow> = rows
                .iter()
                .filter(|r| r.durability == durability && !r.paused)
                .collect();
            if rows.is_empty() {
                continue;
            }
            println!("### Durability::{durability:?}\n");
            println!(
                "| verb | product calls/s | fresh calls/s | native calls/s | raw calls/s | product/native | fresh/native | product/raw |"
            );
            println!("| --- | --- | --- | --- | --- | --- | --- | --- |");
            for r in &rows {
                let (p, u, n, w) = (
                    r.product.rate(),
                    r.fresh.rate(),
                    r.native.rate(),
                    r.raw.rate(),
                );
                println!(
                    "| {} | {} | {} | {} | {} | {:.2} | {:.2} | {:.2} |",
                    r.verb.name(),
                    p.rate(),
                    u.rate(),
                    n.rate(),
                    w.rate(),
                    p.median / n.median,
                    u.median / n.median,
                    p.median / w.median,
                );
            }
            println!();
            println!("Latency per call, µs (p50 and p99 within a run):\n");
            println!(
                "| verb | product p50 | fresh p50 | native p50 | raw p50 | product p99 | fresh p99 | native p99 | raw p99 |"
            );
            println!("| --- | --- | --- | --- | --- | --- | --- | --- | --- |");
            for r in &rows {
                println!(
                    "| {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                    r.verb.name(),
                    r.product.p50().us(),
                    r.fresh.p50().us(),
                    r.native.p50().us(),
                    r.raw.p50().us(),
                    r.product.p99().us(),
                    r.fresh.p99().us(),
                    r.native.p99().us(),
                    r.raw.p99().us(),
                );
            }
            println!();
        }
        self.print_paused(rows);
        // The round-3 targets: what the sandbox costs, as ratios of
        // throughput to the same rules compiled natively.
        for r in rows
            .iter()
            .filter(|r| !r.paused && r.durability == Durability::None)
        {
            let n = r.native.rate().median;
            let (p, u) = (r.product.rate().median / n, r.fresh.rate().median / n);
            let floor = match r.verb {
                Verb::Queue | Verb::ClaimDue => 0.75,
                Verb::QueueClaim => continue,
                _ => 0.70,
            };
            let name = r.verb.name();
            self.target(
                format!("{name}, None: product/native (kept instances, as shipped)"),
                "≥ 0.85",
                format!("{p:.2}"),
                p >= 0.85,
            );
            self.target(
                format!("{name}, None: fresh/native (fresh instance per call)"),
                &format!("≥ {floor:.2}"),
                format!("{u:.2}"),
                u >= floor,
            );
        }
        // The round-2 targets, as ratios of p50 latencies taken in this run.
        for r in rows
            .iter()
            .filter(|r| !r.paused && r.durability == Durability::None)
        {
            let (p, w) = (r.product.p50().median, r.raw.p50().median);
            let name = r.verb.name();
            let (goal, bound) = match r.verb {
                Verb::Open | Verb::Claim | Verb::Settle | Verb::Escalate | Verb::Arm => {
                    ("≤ 2.0× a raw commit (p50)", 2.0)
                }
                Verb::Queue => ("≤ 100× a raw point get (p50)", 100.0),
                Verb::ClaimDue => ("≤ 40× a raw commit (p50)", 40.0),
                _ => continue,
            };
            self.target(
                format!("{name}, None: product vs raw"),
                goal,
                format!("{:.1}×", p / w),
                p / w <= bound,
            );
        }
    }

    /// The paused rows beside the unpaused ones: what idling between calls
    /// (as every call does while its fsync runs) costs each engine.
    fn print_paused(&self, rows: &[VerbRow]) {
        let paused: Vec<&VerbRow> = rows.iter().filter(|r| r.paused).collect();
        if paused.is_empty() {
            return;
        }
        println!(
            "### Durability::None, the thread idle for {} µs after every call\n",
            PAUSE.as_micros()
        );
        println!(
            "What waiting on the disk does to the work around it, without the disk: the same \
             calls as above ({} per run), with a sleep after each (not timed). Latency per call, \
             µs, p50.\n",
            self.sizes.calls_immediate
        );
        println!(
            "| verb | product p50 | native p50 | raw p50 | product − native, paused | product − native, back to back |"
        );
        println!("| --- | --- | --- | --- | --- | --- |");
        for r in paused {
            let back_to_back = rows
                .iter()
                .find(|u| !u.paused && u.verb == r.verb && u.durability == r.durability)
                .map_or(String::from("—"), |u| {
                    us(u.product.p50().median - u.native.p50().median)
                });
            println!(
                "| {} | {} | {} | {} | {} | {back_to_back} |",
                r.verb.name(),
                r.product.p50().us(),
                r.native.p50().us(),
                r.raw.p50().us(),
                us(r.product.p50().median - r.native.p50().median),
            );
        }
        println!();
    }
}
