//! What schedules cost: a sweep of 1,000 due occurrences beside 100,000
//! schedules that are not due, against the same sweep with nothing else
//! scheduled (the sweep's cost should follow what is due, not what is
//! scheduled) and beside a sweep of as many plain timers, and
//! `next-occurrences` for a few kinds of spec.
//!
//! ```sh
//! cargo run --release -p leasehold-host --example schedules_bench [idle-schedules]
//! ```
//!
//! A sweep is `claim-due` (limit 100) at one instant until it answers
//! nothing, each claim arming its schedule's next occurrence; every
//! occurrence is disarmed after, as a worker does when its work is done.
//! A redb file without a flush (`Durability::None`), so the figures are the
//! rules' and the sandbox's cost, not the disk's. It prints a Markdown table.

use std::time::Instant;

use anyhow::ensure;
use leasehold_host::{
    CatchUp, Durability, Engine, Phase, Rule, ScheduleDef, ScheduleSpec, Tenant, Timer,
};

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

const MINUTE: i64 = 60_000;
/// 2026-01-01T00:00:00Z.
const T0: i64 = 1_767_225_600_000;
const DUE: usize = 1_000;
const ROUNDS: i64 = 7;

fn def(id: String, rule: Rule, zone: &str) -> ScheduleDef {
    let mut spec = ScheduleSpec::new(rule, zone);
    spec.catch_up = CatchUp::None;
    ScheduleDef {
        id,
        run: "bench".into(),
        case: None,
        step: 0,
        phase: Phase::Forward,
        spec,
    }
}

/// A tenant with `DUE` schedules due every minute from `T0`, and `idle`
/// schedules whose next occurrence is years away.
fn seed(t: &Tenant, idle: usize) -> anyhow::Result<()> {
    let zones = ["America/New_York", "Europe/London", "Asia/Kathmandu", "UTC"];
    for i in 0..idle {
        let d = def(
            format!("idle-{i:06}"),
            Rule::Cron {
                expr: "0 3 1 1 *".into(),
            },
            zones[i % zones.len()],
        );
        t.add_schedule(&d, T0 + 400 * 86_400_000)?;
    }
    for i in 0..DUE {
        let d = def(
            format!("due-{i:04}"),
            Rule::Interval {
                every_ms: MINUTE as u64,
                anchor: T0,
            },
            "UTC",
        );
        t.add_schedule(&d, T0)?;
    }
    Ok(())
}

/// One sweep at `now`: answers its time and how many occurrences it fired.
fn sweep(t: &Tenant, now: i64) -> anyhow::Result<(f64, usize)> {
    let start = Instant::now();
    let mut fired = Vec::new();
    loop {
        let got = t.claim_due(now, 100, 600_000)?;
        if got.is_empty() {
            break;
        }
        fired.extend(got);
    }
    let took = start.elapsed().as_secs_f64();
    for f in &fired {
        t.disarm(&f.run, &f.effect)?;
    }
    Ok((took, fired.len()))
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() -> anyhow::Result<()> {
    let idle: usize = std::env::args()
        .nth(1)
        .map(|a| a.parse())
        .transpose()?
        .unwrap_or(100_000);
    let dir = tempfile::tempdir()?;
    let engine = Engine::builder()
        .durability(Durability::None)
        .open(dir.path().join("db"))?;
    let alone = engine.tenant("alone")?;
    let plain = engine.tenant("plain")?;
    let crowded = engine.tenant("crowded")?;
    seed(&alone, 0)?;
    let start = Instant::now();
    seed(&crowded, idle)?;
    let seeded = start.elapsed().as_secs_f64();
    // Taken in turns, so a slow spell of the machine falls on all three.
    let (mut a, mut c, mut p) = (Vec::new(), Vec::new(), Vec::new());
    for r in 0..ROUNDS {
        let now = T0 + r * MINUTE;
        for i in 0..DUE {
            plain.arm(&Timer {
                run: "bench".into(),
                case: None,
                effect: format!("plain-{r}-{i:04}"),
                step: 0,
                phase: Phase::Forward,
                fire_at: now,
            })?;
        }
        for (t, times) in [(&alone, &mut a), (&crowded, &mut c), (&plain, &mut p)] {
            let (took, n) = sweep(t, now)?;
            ensure!(n == DUE, "round {r} fired {n} occurrences, not {DUE}");
            times.push(took);
        }
    }
    let p = median(p);
    let (a, c) = (median(a), median(c));
    println!("| measurement | value |\n| --- | --- |");
    println!(
        "| a sweep of {DUE} due occurrences, nothing else scheduled (median of {ROUNDS}) | {:.1} ms ({:.1} µs an occurrence) |",
        a * 1e3,
        a * 1e6 / DUE as f64
    );
    println!(
        "| the same beside {idle} schedules not due | {:.1} ms ({:.1} µs an occurrence) |",
        c * 1e3,
        c * 1e6 / DUE as f64
    );
    println!("| ratio, crowded ÷ alone | **{:.2}** |", c / a);
    println!(
        "| for scale: a sweep of {DUE} plain timers (no schedule) | {:.1} ms ({:.1} µs a timer) |",
        p * 1e3,
        p * 1e6 / DUE as f64
    );
    println!(
        "| adding the {idle} schedules, one call each | {:.1} s ({:.0} µs a schedule) |",
        seeded,
        seeded * 1e6 / idle.max(1) as f64
    );
    let specs = [
        (
            "cron `30 2 * * *`, America/New_York",
            def(
                "n".into(),
                Rule::Cron {
                    expr: "30 2 * * *".into(),
                },
                "America/New_York",
            ),
        ),
        (
            "cron `0 9 * * 1#2` (second Monday), Europe/London",
            def(
                "m".into(),
                Rule::Cron {
                    expr: "0 9 * * 1#2".into(),
                },
                "Europe/London",
            ),
        ),
        (
            "cron `*/15 * * * *`, Australia/Lord_Howe",
            def(
                "q".into(),
                Rule::Cron {
                    expr: "*/15 * * * *".into(),
                },
                "Australia/Lord_Howe",
            ),
        ),
        (
            "interval 90 s",
            def(
                "i".into(),
                Rule::Interval {
                    every_ms: 90_000,
                    anchor: T0,
                },
                "UTC",
            ),
        ),
    ];
    for (_, d) in &specs {
        alone.add_schedule(d, T0)?;
    }
    println!("\n| `next-occurrences` | n = 1 | n = 10 | n = 100 |\n| --- | --- | --- | --- |");
    for (name, d) in &specs {
        let mut cells = Vec::new();
        for n in [1u32, 10, 100] {
            let mut times = Vec::new();
            for _ in 0..200 {
                let start = Instant::now();
                let got = alone.next_occurrences(&d.id, T0, n)?;
                times.push(start.elapsed().as_secs_f64());
                ensure!(got.len() == n as usize, "{name}: {} of {n}", got.len());
            }
            cells.push(format!("{:.1} µs", median(times) * 1e6));
        }
        println!("| {name} | {} |", cells.join(" | "));
    }
    Ok(())
}
