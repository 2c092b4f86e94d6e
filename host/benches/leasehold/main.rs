//! What the sandbox costs, and how cost grows with the backlog.
//!
//! `cargo bench -p leasehold-host` runs everything and prints the tables that
//! BENCHMARKS.md quotes: per-verb throughput and latency for the product (the
//! component through the host), the same rules compiled natively over the same
//! redb layer, and a raw redb insert + commit; the fixed per-call cost of the
//! sandbox; four backlog-scaling ratios; and read latency beside a writer.
//! Every figure is the median of repeated runs, with the min and max beside it.
//! Positional arguments pick sections (`verbs`, `fixed`, `scaling`,
//! `search`, `jobs`, `concurrency`, `group`, `worker`, `seed`; none means all) and narrow the
//! per-verb section (see [`verbs::Filter`]) and the seed comparison for profiling.
//!
//! Without `--bench` (as `cargo test` runs it) it makes a smoke pass: tiny
//! sizes, a few calls, every answer checked, so the benchmark cannot rot.
//!
//! This file reads the command line and runs the sections in order; it
//! times nothing but the one compilation it reports. The figures are taken
//! in the section modules, over the engines in `drivers` and the data in
//! `workload`, and reduced in `stats`.

mod against_seed;
mod bench;
mod concurrency;
mod drivers;
mod fixed;
mod group;
mod jobs;
mod scaling;
mod search;
mod stats;
mod verbs;
mod worker;
mod workload;

use std::time::Instant;

use anyhow::{Context, Result};
use leasehold_host::Engine;

use crate::bench::{Bench, FULL, SMOKE};
use crate::drivers::{TENANT, bench_limits};
use crate::verbs::Filter;

/// The allocator the `leasehold` binary runs on (see its `main.rs`): every
/// engine in the run, product, native and raw, uses it.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let sizes = if args.iter().any(|a| a == "--bench") {
        FULL
    } else {
        SMOKE
    };
    const SECTIONS: [&str; 9] = [
        "verbs",
        "fixed",
        "scaling",
        "search",
        "jobs",
        "concurrency",
        "group",
        "worker",
        "seed",
    ];
    let picked: Vec<&str> = args
        .iter()
        .map(String::as_str)
        .filter(|a| SECTIONS.contains(a))
        .collect();
    let wanted = |s: &str| picked.is_empty() || picked.contains(&s);
    let filter = Filter::from_args(&args);

    let scratch = tempfile::Builder::new()
        .prefix("leasehold-bench-")
        .tempdir()
        .context("a scratch directory")?;
    let mut bench = Bench::new(sizes, scratch.path().to_owned());
    println!(
        "# Leasehold benchmark{}\n\n{} runs per figure; each cell is the median of the runs, \
         with (min–max). Cores: {}. Allocator: mimalloc, as the `leasehold` binary's. \
         Scratch files in {}.\n",
        if sizes.smoke {
            " — smoke pass (tiny sizes, not a measurement)"
        } else {
            ""
        },
        sizes.runs,
        std::thread::available_parallelism().map_or(0, usize::from),
        scratch.path().display(),
    );
    // Compile the component once, outside every timed section, and keep it
    // compiled to the end: the host's cache holds a component only while an
    // engine uses it, and without this one every engine a section opens
    // compiled it again.
    let started = Instant::now();
    let compiled = Engine::builder().limits(bench_limits()).in_memory()?;
    compiled.tenant(TENANT)?.open_count()?;
    println!(
        "Compiling the component took {:.2} s (once per process).\n",
        started.elapsed().as_secs_f64()
    );

    if wanted("verbs") {
        bench.verbs(&filter)?;
    }
    if wanted("fixed") {
        bench.fixed_cost()?;
    }
    if wanted("scaling") {
        bench.scaling()?;
    }
    if wanted("search") {
        bench.search()?;
    }
    if wanted("jobs") {
        bench.jobs()?;
    }
    if wanted("concurrency") {
        bench.concurrency()?;
    }
    if wanted("group") {
        bench.group_commit()?;
    }
    if wanted("worker") {
        bench.worker()?;
    }
    if wanted("seed") {
        bench.against_seed(&args)?;
    }
    bench.print_targets();
    Ok(())
}
