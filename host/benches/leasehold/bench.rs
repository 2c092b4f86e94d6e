//! One pass of the benchmark: its sizes (full or smoke), its scratch files,
//! and the targets the sections hold their figures against, printed last.
//! Each section is an `impl Bench` block in a file of its own; this file
//! measures nothing and knows no section.

use std::path::PathBuf;
use std::time::Duration;

use leasehold_host::Durability;

/// Sizes of one pass. The full run must finish in about ten minutes on a
/// two-core machine; the smoke pass in seconds in the dev profile.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Sizes {
    pub(crate) smoke: bool,
    /// Repetitions of every measurement; figures are their median.
    pub(crate) runs: usize,
    /// Calls per run of a per-verb measurement, by durability.
    pub(crate) calls_none: usize,
    pub(crate) calls_immediate: usize,
    /// Tasks behind the `queue` page of the per-verb table.
    pub(crate) queue_backlog: usize,
    /// Timers the `claim-due` measurements cycle through.
    pub(crate) timer_pool: usize,
    /// Calls per run of the fixed-cost and scaling measurements.
    pub(crate) read_calls: usize,
    pub(crate) write_calls: usize,
    pub(crate) queue_small: usize,
    pub(crate) queue_large: usize,
    pub(crate) count_small: usize,
    pub(crate) count_large: usize,
    pub(crate) held_large: usize,
    pub(crate) case_small: usize,
    pub(crate) case_large: usize,
    /// Tasks in the search section's small and large stores (a page of 50
    /// of each filter needs about 750).
    pub(crate) search_small: usize,
    pub(crate) search_large: usize,
    /// How long each concurrency run reads.
    pub(crate) concurrency_for: Duration,
    /// Tasks a bulk job assigns, the other tenant's pool it claims from
    /// meanwhile, and how long that tenant's claims are timed with no job,
    /// before it and again after.
    pub(crate) jobs_tasks: usize,
    pub(crate) jobs_pool: usize,
    pub(crate) jobs_quiet: Duration,
    /// Durable claims per writer thread in each group-commit run.
    pub(crate) group_claims: usize,
    /// Tasks one worker drains, without fsync and with.
    pub(crate) worker_tasks: usize,
    pub(crate) worker_tasks_durable: usize,
}

pub(crate) const FULL: Sizes = Sizes {
    smoke: false,
    runs: 7,
    calls_none: 2000,
    calls_immediate: 500,
    queue_backlog: 1000,
    timer_pool: 1000,
    read_calls: 2000,
    write_calls: 50,
    queue_small: 1_000,
    queue_large: 100_000,
    count_small: 100,
    count_large: 100_000,
    held_large: 10_000,
    case_small: 10,
    case_large: 100_000,
    search_small: 1_000,
    search_large: 100_000,
    concurrency_for: Duration::from_secs(2),
    jobs_tasks: 10_000,
    jobs_pool: 500,
    jobs_quiet: Duration::from_secs(3),
    group_claims: 300,
    worker_tasks: 2_000,
    worker_tasks_durable: 300,
};

pub(crate) const SMOKE: Sizes = Sizes {
    smoke: true,
    runs: 2,
    calls_none: 5,
    calls_immediate: 3,
    queue_backlog: 60,
    timer_pool: 200,
    read_calls: 5,
    write_calls: 3,
    queue_small: 20,
    queue_large: 200,
    count_small: 10,
    count_large: 200,
    held_large: 150,
    case_small: 10,
    case_large: 200,
    search_small: 800,
    search_large: 2_400,
    concurrency_for: Duration::from_millis(200),
    jobs_tasks: 150,
    jobs_pool: 20,
    jobs_quiet: Duration::from_millis(100),
    group_claims: 4,
    worker_tasks: 30,
    worker_tasks_durable: 12,
};

impl Sizes {
    pub(crate) fn calls(&self, d: Durability) -> usize {
        match d {
            Durability::None => self.calls_none,
            Durability::Immediate => self.calls_immediate,
        }
    }
}

struct Target {
    what: String,
    goal: String,
    measured: String,
    met: bool,
}

pub(crate) struct Bench {
    pub(crate) sizes: Sizes,
    pub(crate) scratch: PathBuf,
    pub(crate) files: usize,
    targets: Vec<Target>,
}

impl Bench {
    pub(crate) fn new(sizes: Sizes, scratch: PathBuf) -> Bench {
        Bench {
            sizes,
            scratch,
            files: 0,
            targets: Vec::new(),
        }
    }

    /// A path no earlier measurement used.
    pub(crate) fn fresh_file(&mut self) -> PathBuf {
        self.files += 1;
        self.scratch.join(format!("bench-{}.redb", self.files))
    }

    pub(crate) fn target(
        &mut self,
        what: impl Into<String>,
        goal: &str,
        measured: String,
        met: bool,
    ) {
        self.targets.push(Target {
            what: what.into(),
            goal: goal.into(),
            measured,
            met,
        });
    }

    pub(crate) fn print_targets(&self) {
        if self.sizes.smoke {
            println!("Smoke pass: every answer above was checked; its timings measure nothing.");
            return;
        }
        if self.targets.is_empty() {
            return;
        }
        println!("## Targets (Durability::None unless named)\n");
        println!("| target | goal | measured | met |");
        println!("| --- | --- | --- | --- |");
        for t in &self.targets {
            println!(
                "| {} | {} | {} | {} |",
                t.what,
                t.goal,
                t.measured,
                if t.met { "yes" } else { "**no**" }
            );
        }
        println!();
    }
}
