//! What the sandbox costs, and how cost grows with the backlog.
//!
//! `cargo bench -p leasehold-host` runs everything and prints the tables that
//! BENCHMARKS.md quotes: per-verb throughput and latency for the product (the
//! component through the host), the same rules compiled natively over the same
//! redb layer, and a raw redb insert + commit; the fixed per-call cost of the
//! sandbox; four backlog-scaling ratios; and read latency beside a writer.
//! Every figure is the median of repeated runs, with the min and max beside it.
//! Positional arguments pick sections (`verbs`, `fixed`, `scaling`,
//! `concurrency`; none means all) and narrow the per-verb section for
//! profiling (see [`Filter`]).
//!
//! Without `--bench` (as `cargo test` runs it) it makes a smoke pass: tiny
//! sizes, a few calls, every answer checked, so the benchmark cannot rot.

/// The allocator the `leasehold` binary runs on (see its `main.rs`): every
/// engine in the run, product, native and raw, uses it.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};
use leasehold_guest::kv::Kv;
use leasehold_guest::{tasks, timers};
use leasehold_host::native::{NativeEngine, NativeTenant};
use leasehold_host::{
    ArmOutcome, Durability, Engine, Error, Limits, OnExpiry, Page, Phase, Priority, QueueQuery,
    Settlement, Task, TaskState, Tenant, Timer,
};
use redb::{ReadableDatabase, TableDefinition};

const TENANT: &str = "acme";

/// Sizes of one pass. The full run must finish in about ten minutes on a
/// two-core machine; the smoke pass in seconds in the dev profile.
#[derive(Clone, Copy, Debug)]
struct Sizes {
    smoke: bool,
    /// Repetitions of every measurement; figures are their median.
    runs: usize,
    /// Calls per run of a per-verb measurement, by durability.
    calls_none: usize,
    calls_immediate: usize,
    /// Tasks behind the `queue` page of the per-verb table.
    queue_backlog: usize,
    /// Timers the `claim-due` measurements cycle through.
    timer_pool: usize,
    /// Calls per run of the fixed-cost and scaling measurements.
    read_calls: usize,
    write_calls: usize,
    queue_small: usize,
    queue_large: usize,
    count_small: usize,
    count_large: usize,
    held_large: usize,
    case_small: usize,
    case_large: usize,
    /// How long each concurrency run reads.
    concurrency_for: Duration,
    /// Durable claims per writer thread in each group-commit run.
    group_claims: usize,
}

const FULL: Sizes = Sizes {
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
    concurrency_for: Duration::from_secs(2),
    group_claims: 300,
};

const SMOKE: Sizes = Sizes {
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
    concurrency_for: Duration::from_millis(200),
    group_claims: 4,
};

impl Sizes {
    fn calls(&self, d: Durability) -> usize {
        match d {
            Durability::None => self.calls_none,
            Durability::Immediate => self.calls_immediate,
        }
    }
}

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let sizes = if args.iter().any(|a| a == "--bench") {
        FULL
    } else {
        SMOKE
    };
    const SECTIONS: [&str; 5] = ["verbs", "fixed", "scaling", "concurrency", "group"];
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
    let mut bench = Bench {
        sizes,
        scratch: scratch.path().to_owned(),
        files: 0,
        targets: Vec::new(),
        filter,
    };
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
    // Compile the component once, outside every timed section.
    let started = Instant::now();
    Engine::builder()
        .limits(bench_limits())
        .in_memory()?
        .tenant(TENANT)?
        .open_count()?;
    println!(
        "Compiling the component took {:.2} s (once per process).\n",
        started.elapsed().as_secs_f64()
    );

    if wanted("verbs") {
        bench.verbs()?;
    }
    if wanted("fixed") {
        bench.fixed_cost()?;
    }
    if wanted("scaling") {
        bench.scaling()?;
    }
    if wanted("concurrency") {
        bench.concurrency()?;
    }
    if wanted("group") {
        bench.group_commit()?;
    }
    bench.print_targets();
    Ok(())
}

// ---------------------------------------------------------------------------
// Statistics

/// Median, min and max of one figure over the runs.
#[derive(Clone, Copy, Debug)]
struct Spread {
    median: f64,
    min: f64,
    max: f64,
}

impl Spread {
    fn of(xs: &[f64]) -> Spread {
        let mut v = xs.to_vec();
        v.sort_by(f64::total_cmp);
        let n = v.len();
        let median = if n == 0 {
            f64::NAN
        } else if n % 2 == 1 {
            v[n / 2]
        } else {
            (v[n / 2 - 1] + v[n / 2]) / 2.0
        };
        Spread {
            median,
            min: v.first().copied().unwrap_or(f64::NAN),
            max: v.last().copied().unwrap_or(f64::NAN),
        }
    }

    fn us(&self) -> String {
        format!("{} ({}–{})", us(self.median), us(self.min), us(self.max))
    }

    fn rate(&self) -> String {
        format!(
            "{} ({}–{})",
            rate(self.median),
            rate(self.min),
            rate(self.max)
        )
    }
}

/// Microseconds, with as many decimals as make sense for the size.
fn us(x: f64) -> String {
    if x < 10.0 {
        format!("{x:.2}")
    } else if x < 100.0 {
        format!("{x:.1}")
    } else {
        format!("{x:.0}")
    }
}

/// Calls per second, to three significant figures.
fn rate(x: f64) -> String {
    if x >= 10_000.0 {
        format!("{:.0}k", x / 1000.0)
    } else if x >= 1000.0 {
        format!("{:.1}k", x / 1000.0)
    } else {
        format!("{x:.0}")
    }
}

/// One run: the latency of each call, in microseconds.
struct Run(Vec<f64>);

impl Run {
    fn quantile(&self, q: f64) -> f64 {
        let mut v = self.0.clone();
        v.sort_by(f64::total_cmp);
        if v.is_empty() {
            return f64::NAN;
        }
        v[((v.len() - 1) as f64 * q).round() as usize]
    }

    fn p50(&self) -> f64 {
        self.quantile(0.5)
    }

    fn p99(&self) -> f64 {
        self.quantile(0.99)
    }

    fn max(&self) -> f64 {
        self.quantile(1.0)
    }

    /// Calls per second over the whole run.
    fn rate(&self) -> f64 {
        let total: f64 = self.0.iter().sum();
        self.0.len() as f64 / (total / 1e6)
    }
}

/// Figures over repeated runs.
struct Runs(Vec<Run>);

impl Runs {
    fn spread(&self, f: impl Fn(&Run) -> f64) -> Spread {
        Spread::of(&self.0.iter().map(f).collect::<Vec<_>>())
    }
    fn p50(&self) -> Spread {
        self.spread(Run::p50)
    }
    fn p99(&self) -> Spread {
        self.spread(Run::p99)
    }
    fn rate(&self) -> Spread {
        self.spread(Run::rate)
    }
}

/// One burst of claims from many threads.
struct Burst {
    /// Claims per second, all threads together, over the burst's wall time.
    rate: f64,
    /// Every call's latency.
    latency: Run,
    /// Write calls per durable commit, and the mean commit's time in µs.
    calls_per_commit: f64,
    commit_us: f64,
}

/// `threads` threads claim `claims` distinct tasks each, all at once.
const FSYNC_PROBES: usize = 60;

/// The median time of `fdatasync` after writing 1, 4, 16 and 32 scattered
/// pages: how an fsync's cost grows with what a commit wrote.
fn fsync_probe(path: &Path) -> Result<Vec<(usize, f64)>> {
    use std::os::unix::fs::FileExt;
    const PAGES: u64 = 4096;
    let file = std::fs::File::create(path).context("the fsync probe's file")?;
    file.set_len(PAGES * 4096)?;
    file.sync_all()?;
    let page = [0x5au8; 4096];
    // A fixed sequence of offsets, so every run writes the same pages.
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut out = Vec::new();
    for pages in [1usize, 4, 16, 32] {
        let mut took = Vec::with_capacity(FSYNC_PROBES);
        for _ in 0..FSYNC_PROBES {
            for _ in 0..pages {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                file.write_at(&page, (x % PAGES) * 4096)?;
            }
            let started = Instant::now();
            file.sync_data()?;
            took.push(started.elapsed().as_secs_f64() * 1e6);
        }
        out.push((pages, Spread::of(&took).median));
    }
    drop(file);
    std::fs::remove_file(path)?;
    Ok(out)
}

fn claim_burst(tenant: &Tenant, threads: usize, claims: usize) -> Result<Burst> {
    let start = std::sync::Barrier::new(threads);
    let started = Instant::now();
    let runs: Vec<Result<Run>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|w| {
                let start = &start;
                s.spawn(move || {
                    start.wait();
                    time_calls(claims, |i| {
                        let got =
                            tenant.claim(&task_id(w * claims + i), ALICE, &[REVIEWER], None)?;
                        ensure!(got.state == TaskState::Claimed, "claim did not claim");
                        Ok(())
                    })
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|_| bail!("a claimer panicked")))
            .collect()
    });
    let wall = started.elapsed().as_secs_f64();
    let mut all = Vec::new();
    for run in runs {
        all.extend(run?.0);
    }
    Ok(Burst {
        rate: (threads * claims) as f64 / wall,
        latency: Run(all),
        calls_per_commit: f64::NAN,
        commit_us: f64::NAN,
    })
}

/// Times `calls` calls of `f` (which checks its own answer: a comparison or
/// two, nothing beside a call), each alone.
fn time_calls(calls: usize, mut f: impl FnMut(usize) -> Result<()>) -> Result<Run> {
    let mut out = Vec::with_capacity(calls);
    for i in 0..calls {
        let started = Instant::now();
        f(i)?;
        out.push(started.elapsed().as_secs_f64() * 1e6);
    }
    Ok(Run(out))
}

// ---------------------------------------------------------------------------
// The engines under test

/// The product or the native build, over one redb file.
enum Driver {
    Product(Tenant),
    Native(NativeTenant),
}

/// What one engine of a per-verb run drives.
enum Subject {
    Driver(Driver),
    Raw(Raw),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Product,
    Native,
    Raw,
}

impl Kind {
    const ALL: [Kind; 3] = [Kind::Product, Kind::Native, Kind::Raw];

    fn name(self) -> &'static str {
        match self {
            Kind::Product => "product",
            Kind::Native => "native",
            Kind::Raw => "raw",
        }
    }
}

fn strs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

/// The default limits, except that `LEASEHOLD_BENCH_SLOTS` may shrink the
/// instance pool: valgrind cannot reserve the default pool's address space,
/// so profiling under callgrind needs a few slots only.
fn bench_limits() -> Limits {
    let mut limits = Limits::default();
    if let Some(slots) = std::env::var("LEASEHOLD_BENCH_SLOTS")
        .ok()
        .and_then(|s| s.parse().ok())
    {
        limits.concurrent_calls = slots;
    }
    limits
}

impl Driver {
    fn open(kind: Kind, path: &Path, durability: Durability) -> Result<Driver> {
        Ok(match kind {
            Kind::Product => Driver::Product(
                Engine::builder()
                    .durability(durability)
                    .limits(bench_limits())
                    .open(path)?
                    .tenant(TENANT)?,
            ),
            Kind::Native => Driver::Native(NativeEngine::open(path, durability)?.tenant(TENANT)?),
            Kind::Raw => bail!("the raw baseline has no driver"),
        })
    }

    fn open_task(&self, t: &Task) -> Result<Task, Error> {
        match self {
            Driver::Product(p) => p.open(t),
            Driver::Native(n) => n.write(|kv| tasks::open(kv, t)),
        }
    }

    fn claim(&self, id: &str, actor: &str, roles: &[String]) -> Result<Task, Error> {
        match self {
            Driver::Product(p) => p.claim(id, actor, &strs(roles), None),
            Driver::Native(n) => n.write(|kv| tasks::claim(kv, id, actor, roles, None)),
        }
    }

    fn claim_next(&self, q: &QueueQuery) -> Result<Option<Task>, Error> {
        match self {
            Driver::Product(p) => p.claim_next(q, None),
            Driver::Native(n) => n.write(|kv| tasks::claim_next(kv, q, None)),
        }
    }

    fn settle(&self, id: &str) -> Result<bool, Error> {
        match self {
            Driver::Product(p) => p.settle(id, Settlement::Completed, None),
            Driver::Native(n) => n.write(|kv| tasks::settle(kv, id, Settlement::Completed, None)),
        }
    }

    fn escalate(&self, id: &str) -> Result<Task, Error> {
        match self {
            Driver::Product(p) => p.escalate(id),
            Driver::Native(n) => n.write(|kv| tasks::escalate(kv, id)),
        }
    }

    fn queue(&self, q: &QueueQuery) -> Result<Page, Error> {
        match self {
            Driver::Product(p) => p.queue(q),
            Driver::Native(n) => n.read(|kv| tasks::queue(kv, q)),
        }
    }

    fn for_case(&self, case: &str, limit: u32) -> Result<Page, Error> {
        match self {
            Driver::Product(p) => p.for_case(case, limit, None),
            Driver::Native(n) => n.read(|kv| tasks::for_case(kv, case, limit, None)),
        }
    }

    fn open_count(&self) -> Result<u64, Error> {
        match self {
            Driver::Product(p) => p.open_count(),
            Driver::Native(n) => n.read(|kv| tasks::open_count(kv)),
        }
    }

    fn arm(&self, t: &Timer) -> Result<ArmOutcome, Error> {
        match self {
            Driver::Product(p) => p.arm(t),
            Driver::Native(n) => n.write(|kv| timers::arm(kv, t)),
        }
    }

    fn claim_due(&self, now: i64, limit: u32, lease_ms: u32) -> Result<Vec<Timer>, Error> {
        match self {
            Driver::Product(p) => p.claim_due(now, limit, lease_ms),
            Driver::Native(n) => n.write(|kv| timers::claim_due(kv, now, limit, lease_ms)),
        }
    }

    /// The consistency check (product only; the smoke pass runs it after
    /// every measurement, so the benchmark never times a broken database).
    fn check(&self) -> Result<()> {
        if let Driver::Product(p) = self {
            let found = p.check()?;
            ensure!(
                found.is_empty(),
                "the benchmark left discrepancies: {found:?}"
            );
        }
        Ok(())
    }
}

/// The floor: one small insert and a commit per call, on redb directly.
struct Raw {
    db: redb::Database,
    durability: Durability,
}

const RAW_TABLE: TableDefinition<&[u8], &[u8]> = TableDefinition::new("raw");
/// About the size of an index entry plus a small row.
const RAW_VALUE: [u8; 96] = [7; 96];
/// Keys the raw read baseline reads, round and round.
const RAW_READ_KEYS: usize = 1000;
/// How long the thread idles after each call in the paused runs: about what
/// one fsync takes on the disk these figures come from, so that a CPU-bound
/// run shows what waiting on the disk does to the work around it.
const PAUSE: Duration = Duration::from_micros(250);
/// How many calls one engine makes before the next takes its turn: short
/// enough that a slow spell of the shared machine or its disk hits every
/// engine alike, long enough that each runs with warm caches.
const TURN: usize = 10;

impl Raw {
    fn open(path: &Path, durability: Durability) -> Result<Raw> {
        let db = redb::Database::create(path)?;
        let w = db.begin_write()?;
        w.open_table(RAW_TABLE)?;
        w.commit()?;
        Ok(Raw { db, durability })
    }

    fn key(i: usize) -> [u8; 16] {
        let mut k = *b"raw-key-00000000";
        k[8..].copy_from_slice(format!("{i:08}").as_bytes());
        k
    }

    fn insert(&self, i: usize) -> Result<()> {
        let mut w = self.db.begin_write()?;
        if self.durability == Durability::None {
            w.set_durability(redb::Durability::None)?;
        }
        w.open_table(RAW_TABLE)?
            .insert(Self::key(i).as_slice(), RAW_VALUE.as_slice())?;
        w.commit()?;
        Ok(())
    }

    fn get(&self, i: usize) -> Result<bool> {
        let r = self.db.begin_read()?;
        let t = r.open_table(RAW_TABLE)?;
        Ok(t.get(Self::key(i).as_slice())?.is_some())
    }
}

// ---------------------------------------------------------------------------
// Workload shapes

const REVIEWER: &str = "reviewer";
const ALICE: &str = "alice";

/// A realistic task: one role, an escalation audience, an excluded actor, a
/// case, a due date and a small justification.
fn task(id: String, created_at: i64, role: &str, case: String) -> Task {
    Task {
        id,
        run: format!("run-{}", created_at % 64),
        case: Some(case),
        kind: "approve-payment".into(),
        justification: r#"{"amount":1250,"currency":"EUR","reason":"invoice 4711 exceeds the auto-approval limit"}"#.into(),
        candidate_roles: vec![role.into()],
        assignee: None,
        lease_until: None,
        priority: [Priority::Low, Priority::Normal, Priority::High, Priority::Urgent]
            [(created_at % 4) as usize],
        state: TaskState::Open,
        on_expiry: OnExpiry::Escalate,
        escalate_to: vec!["manager".into()],
        excluded_actors: vec!["mallory".into()],
        created_at,
        due_at: Some(created_at + 86_400_000),
    }
}

fn task_id(i: usize) -> String {
    format!("task-{i:07}")
}

fn reviewer_task(i: usize) -> Task {
    task(
        task_id(i),
        1_000 + i as i64,
        REVIEWER,
        format!("case-{}", i / 10),
    )
}

fn timer(i: usize, fire_at: i64) -> Timer {
    Timer {
        run: format!("run-{}", i % 64),
        case: Some(format!("case-{}", i / 10)),
        effect: format!("wake-{i:07}"),
        step: 1,
        phase: Phase::Forward,
        fire_at,
    }
}

/// Where the `claim-due` measurements sweep: every pool timer fired long
/// before; each call's `now` is one millisecond after the last one's, with a
/// one-millisecond lease, so what a call claims is claimable again by the
/// next call and every call finds a full page, while the held timers' leases
/// (seven days) outlast the whole run.
const SWEEP_FROM: i64 = 10_000_000;
const LONG_LEASE: u32 = 604_800_000;

/// Seeds a database through the native build of the rules (the same code and
/// the same keyspace the component writes), in one transaction.
fn seed(path: &Path, f: impl FnOnce(&mut dyn Kv) -> Result<(), Error>) -> Result<()> {
    let native = NativeEngine::open(path, Durability::Immediate)?;
    native.tenant(TENANT)?.write(f)?;
    Ok(())
}

fn seed_tasks(kv: &mut dyn Kv, tasks: impl Iterator<Item = Task>) -> Result<(), Error> {
    for t in tasks {
        tasks::open(kv, &t)?;
    }
    Ok(())
}

/// `held` timers claimed under a long lease, then `pool` due ones.
fn seed_timers(kv: &mut dyn Kv, held: usize, pool: usize) -> Result<(), Error> {
    for i in 0..held {
        timers::arm(kv, &timer(i, i as i64))?;
    }
    let mut claimed = 0;
    while claimed < held {
        let n = timers::claim_due(kv, held as i64, 1000, LONG_LEASE)?.len();
        if n == 0 {
            break;
        }
        claimed += n;
    }
    for i in held..held + pool {
        timers::arm(kv, &timer(i, 1_000_000 + i as i64))?;
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// The sections

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Verb {
    Open,
    Claim,
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
    const ALL: [Verb; 9] = [
        Verb::Open,
        Verb::Claim,
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

fn reviewer_query(limit: u32) -> QueueQuery {
    QueueQuery {
        roles: vec![REVIEWER.into()],
        actor: Some(ALICE.into()),
        limit,
        after: None,
    }
}

/// Results of one verb under one durability, per engine.
struct VerbRow {
    verb: Verb,
    durability: Durability,
    /// Measured with the thread idle for [`PAUSE`] after every call.
    paused: bool,
    product: Runs,
    native: Runs,
    raw: Runs,
}

struct Target {
    what: String,
    goal: String,
    measured: String,
    met: bool,
}

struct Bench {
    sizes: Sizes,
    scratch: PathBuf,
    files: usize,
    targets: Vec<Target>,
    filter: Filter,
}

/// Narrows the per-verb section for profiling: positional arguments naming
/// verbs (`claim`, `claim-due`, ...), durabilities (`none`, `immediate`) or
/// engines (`product`, `native`, `raw`) keep only those.
#[derive(Debug, Default)]
struct Filter {
    verbs: Vec<Verb>,
    durabilities: Vec<Durability>,
    kinds: Vec<Kind>,
}

impl Filter {
    fn from_args(args: &[String]) -> Filter {
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
    /// A path no earlier measurement used.
    fn fresh_file(&mut self) -> PathBuf {
        self.files += 1;
        self.scratch.join(format!("bench-{}.redb", self.files))
    }

    fn target(&mut self, what: impl Into<String>, goal: &str, measured: String, met: bool) {
        self.targets.push(Target {
            what: what.into(),
            goal: goal.into(),
            measured,
            met,
        });
    }

    /// Seeds what `verb` needs for `calls` calls.
    fn seed_for(&self, verb: Verb, path: &Path, calls: usize) -> Result<()> {
        let s = self.sizes;
        match verb {
            Verb::Open | Verb::Arm => seed(path, |_| Ok(())),
            Verb::Claim | Verb::Escalate | Verb::ClaimNext | Verb::QueueClaim => {
                seed(path, |kv| seed_tasks(kv, (0..calls).map(reviewer_task)))
            }
            Verb::Settle => seed(path, |kv| {
                let roles = [REVIEWER.to_owned()];
                for i in 0..calls {
                    let t = reviewer_task(i);
                    tasks::open(kv, &t)?;
                    tasks::claim(kv, &t.id, ALICE, &roles, None)?;
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
                ensure!(d.open_task(&t)? == t, "open answered another task");
            }
            Verb::Claim => {
                let got = d.claim(&task_id(i), ALICE, &[REVIEWER.to_owned()])?;
                ensure!(got.state == TaskState::Claimed, "claim did not claim");
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
            let subject = if !self.filter.wants_kind(kind) {
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

    fn verbs(&mut self) -> Result<()> {
        let mut rows = Vec::new();
        let settings = [
            (Durability::None, None),
            (Durability::Immediate, None),
            (Durability::None, Some(PAUSE)),
        ];
        for (durability, pause) in settings {
            if !self.filter.wants_durability(durability) {
                continue;
            }
            for verb in Verb::ALL {
                if !self.filter.wants_verb(verb)
                    || pause.is_some() && !matches!(verb, Verb::Open | Verb::Claim)
                {
                    continue;
                }
                let mut per_kind: [Vec<Run>; 3] = Default::default();
                for _ in 0..self.sizes.runs {
                    let round = self.verb_round(verb, durability, pause).with_context(|| {
                        format!("{} ({durability:?}, pause {pause:?})", verb.name())
                    })?;
                    for (k, run) in round.into_iter().enumerate() {
                        per_kind[k].push(run);
                    }
                }
                let [product, native, raw] = per_kind;
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
             and {} under Durability::Immediate. *product*: the Wasm component through the host; \
             *native*: the same rules compiled natively over the same redb layer, one \
             transaction per call; *raw*: one {}-byte insert + commit per call on redb directly \
             (for the read verb `queue`: one read transaction and one point get). `queue` reads \
             the first page of {} queued tasks; `claim-next` claims the head of a queue of as \
             many tasks as the run makes calls, beside `queue+claim`, the two calls a caller \
             makes without it (a one-task page, then a claim of its head, timed together as one \
             call); `claim-due` claims 100 of a pool of {} due timers. The three engines run \
             side by side on three files, taking turns {TURN} calls at a time, so a slow spell \
             of the machine or its disk hits all three alike.\n",
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
                "| verb | product calls/s | native calls/s | raw calls/s | product/native | product/raw |"
            );
            println!("| --- | --- | --- | --- | --- | --- |");
            for r in &rows {
                let (p, n, w) = (r.product.rate(), r.native.rate(), r.raw.rate());
                println!(
                    "| {} | {} | {} | {} | {:.2} | {:.2} |",
                    r.verb.name(),
                    p.rate(),
                    n.rate(),
                    w.rate(),
                    p.median / n.median,
                    p.median / w.median,
                );
            }
            println!();
            println!("Latency per call, µs (p50 and p99 within a run):\n");
            println!(
                "| verb | product p50 | native p50 | raw p50 | product p99 | native p99 | raw p99 |"
            );
            println!("| --- | --- | --- | --- | --- | --- | --- |");
            for r in &rows {
                println!(
                    "| {} | {} | {} | {} | {} | {} | {} |",
                    r.verb.name(),
                    r.product.p50().us(),
                    r.native.p50().us(),
                    r.raw.p50().us(),
                    r.product.p99().us(),
                    r.native.p99().us(),
                    r.raw.p99().us(),
                );
            }
            println!();
        }
        self.print_paused(rows);
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

    /// Item 2: `open-count` through the component and natively; the
    /// difference is what instantiation and the boundary cost per call.
    fn fixed_cost(&mut self) -> Result<()> {
        let s = self.sizes;
        let path = self.fresh_file();
        seed(&path, |kv| seed_tasks(kv, (0..10).map(reviewer_task)))?;
        let mut product = Vec::new();
        let mut native = Vec::new();
        for _ in 0..s.runs {
            for (kind, out) in [(Kind::Product, &mut product), (Kind::Native, &mut native)] {
                let d = Driver::open(kind, &path, Durability::None)?;
                for _ in 0..100 {
                    d.open_count()?;
                }
                out.push(time_calls(s.read_calls * 5, |_| {
                    let n = d.open_count()?;
                    ensure!(n == 10, "open-count answered {n}");
                    Ok(())
                })?);
            }
        }
        let diffs: Vec<f64> = product
            .iter()
            .zip(&native)
            .map(|(p, n)| p.p50() - n.p50())
            .collect();
        let (product, native, fixed) = (Runs(product), Runs(native), Spread::of(&diffs));
        println!("## 2. Fixed per-call cost of the sandbox\n");
        println!(
            "`open-count` (one counter read) on a read snapshot, {} calls per run. The \
             difference of the p50s is what a fresh instance from the pre-instantiated \
             component (pooling allocator, nothing compiled per call) plus the boundary \
             crossing costs per call.\n",
            s.read_calls * 5
        );
        println!("| | p50 µs | p99 µs | calls/s |");
        println!("| --- | --- | --- | --- |");
        println!(
            "| product | {} | {} | {} |",
            product.p50().us(),
            product.p99().us(),
            product.rate().rate()
        );
        println!(
            "| native | {} | {} | {} |",
            native.p50().us(),
            native.p99().us(),
            native.rate().rate()
        );
        println!(
            "| **sandbox cost per call** (product p50 − native p50) | {} | | |",
            fixed.us()
        );
        println!();
        self.target(
            "fixed per-call cost of the sandbox",
            "≤ 4 µs median",
            format!("{} µs", us(fixed.median)),
            fixed.median <= 4.0,
        );
        Ok(())
    }

    /// Item 3: each verb at a small and a large backlog, on the product and
    /// (for reference) natively; the figure is the ratio of the p50s.
    fn scaling(&mut self) -> Result<()> {
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
        (small, large): (usize, usize),
        seed_with: impl Fn(&mut dyn Kv, usize) -> Result<(), Error>,
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
        for kind in [Kind::Product, Kind::Native] {
            for (path, n) in paths.iter().zip([small, large]) {
                figures.push(p50(kind, path, n)?);
            }
        }
        for path in paths {
            std::fs::remove_file(&path)?;
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

    /// Item 4: read latency from two threads, alone and beside a writer that
    /// commits with an fsync each call.
    /// Durable claims from 1, 2, 4 and 8 writer threads at once, with group
    /// commit on and off (`Durability::Immediate`: every commit an fsync).
    fn group_commit(&mut self) -> Result<()> {
        let s = self.sizes;
        let threads = [1usize, 2, 4, 8];
        let mut rows = Vec::new();
        for &n in &threads {
            let mut on = Vec::new();
            let mut off = Vec::new();
            for _ in 0..s.runs.min(5) {
                for (grouped, out) in [(true, &mut on), (false, &mut off)] {
                    let path = self.fresh_file();
                    let claims = s.group_claims;
                    seed(&path, |kv| {
                        seed_tasks(kv, (0..n * claims).map(reviewer_task))
                    })?;
                    let engine = Engine::builder()
                        .durability(Durability::Immediate)
                        .group_commit(grouped)
                        .limits(bench_limits())
                        .open(&path)?;
                    let tenant = engine.tenant(TENANT)?;
                    let mut burst = claim_burst(&tenant, n, claims)?;
                    let stats = engine.commit_stats().context("redb keeps commit stats")?;
                    ensure!(stats.commits > 0, "the burst made no commit");
                    burst.calls_per_commit = stats.calls as f64 / stats.commits as f64;
                    burst.commit_us = stats.committing.as_secs_f64() * 1e6 / stats.commits as f64;
                    out.push(burst);
                    if s.smoke {
                        ensure!(tenant.check()?.is_empty(), "inconsistent after the burst");
                    }
                }
            }
            rows.push((n, on, off));
        }
        println!("## 5. Durable claims from many threads: group commit\n");
        println!(
            "Each run: N threads claim {} distinct tasks each, as fast as they can, on one \
             database file under Durability::Immediate (every commit one fsync). *on*: calls \
             that queue while a commit is flushing share the next one; *off*: every call \
             commits alone (`EngineBuilder::group_commit(false)`). Median of {} runs, with \
             (min–max); latency per call within a run, µs.\n",
            s.group_claims,
            s.runs.min(5)
        );
        println!(
            "| writer threads | claims/s on | claims/s off | on/off | p50 on | p50 off | p99 on | p99 off |"
        );
        println!("| --- | --- | --- | --- | --- | --- | --- | --- |");
        let mut one = None;
        let mut four = None;
        for (n, on, off) in &rows {
            let rate = |b: &[Burst]| Spread::of(&b.iter().map(|x| x.rate).collect::<Vec<_>>());
            let p = |b: &[Burst], q: f64| {
                Spread::of(&b.iter().map(|x| x.latency.quantile(q)).collect::<Vec<_>>())
            };
            let (r_on, r_off) = (rate(on), rate(off));
            println!(
                "| {n} | {} | {} | {:.2} | {} | {} | {} | {} |",
                r_on.rate(),
                r_off.rate(),
                r_on.median / r_off.median,
                p(on, 0.5).us(),
                p(off, 0.5).us(),
                p(on, 0.99).us(),
                p(off, 0.99).us(),
            );
            if *n == 1 {
                one = Some(r_on.median);
            }
            if *n == 4 {
                four = Some(r_on.median);
            }
        }
        println!();
        println!(
            "What the commits cost. A commit covers *calls per commit* write calls and \
             takes *commit µs* (redb's commit, its fsync included); the threads wait \
             for their commit, so even with no CPU spent per call they could not make \
             more than calls per commit ÷ commit time claims/s: the *ceiling*, and \
             beside it that ceiling over the 1-thread rate (on). Medians of the runs.\n"
        );
        println!(
            "| writer threads | calls per commit (on) | commit µs (on) | commit µs (off) | ceiling (on) | ceiling / 1-thread rate |"
        );
        println!("| --- | --- | --- | --- | --- | --- |");
        for (n, on, off) in &rows {
            let med = |b: &[Burst], f: fn(&Burst) -> f64| {
                Spread::of(&b.iter().map(f).collect::<Vec<_>>()).median
            };
            let size = med(on, |b| b.calls_per_commit);
            let took = med(on, |b| b.commit_us);
            let ceiling = size / took * 1e6;
            println!(
                "| {n} | {size:.2} | {took:.0} | {:.0} | {:.1}k | {} |",
                med(off, |b| b.commit_us),
                ceiling / 1e3,
                one.map_or("—".into(), |one| format!("{:.2}×", ceiling / one)),
            );
        }
        println!();
        let probe = fsync_probe(&self.fresh_file())?;
        println!(
            "This disk, in the same run: `fdatasync` after writing N scattered 4 KiB pages \
             into a 16 MiB file, median of {FSYNC_PROBES}: {}.\n",
            probe
                .iter()
                .map(|(pages, us)| format!("{pages} pages {us:.0} µs"))
                .collect::<Vec<_>>()
                .join(", ")
        );
        if let (Some(one), Some(four)) = (one, four) {
            self.target(
                "durable claims, 4 writer threads vs 1 (group commit)",
                "≥ 3× the 1-thread rate",
                format!("{:.2}×", four / one),
                four / one >= 3.0,
            );
        }
        Ok(())
    }

    fn concurrency(&mut self) -> Result<()> {
        let s = self.sizes;
        let path = self.fresh_file();
        let backlog = 1000.min(s.queue_backlog);
        seed(&path, |kv| seed_tasks(kv, (0..backlog).map(reviewer_task)))?;
        let tenant = Engine::builder()
            .durability(Durability::Immediate)
            .open(&path)?
            .tenant(TENANT)?;
        // The control: the same writer on a database of its own, so it
        // competes for the cores and the disk but holds no lock a reader of
        // the first database could wait on.
        let elsewhere_path = self.fresh_file();
        seed(&elsewhere_path, |_| Ok(()))?;
        let elsewhere = Engine::builder()
            .durability(Durability::Immediate)
            .open(&elsewhere_path)?
            .tenant(TENANT)?;
        let mut alone = Vec::new();
        let mut beside = Vec::new();
        let mut control = Vec::new();
        let mut writes = Vec::new();
        for run in 0..s.runs {
            let from = run * 1_000_000;
            alone.push(read_phase(&tenant, backlog, s.concurrency_for, None)?.0);
            let (reads, wrote) =
                read_phase(&tenant, backlog, s.concurrency_for, Some((&tenant, from)))?;
            beside.push(reads);
            writes.push(wrote.context("the writer's run")?);
            let reads = read_phase(
                &tenant,
                backlog,
                s.concurrency_for,
                Some((&elsewhere, from)),
            )?;
            control.push(reads.0);
        }
        if s.smoke {
            let found = tenant.check()?;
            ensure!(
                found.is_empty(),
                "discrepancies after the concurrency run: {found:?}"
            );
        }
        let (alone, beside, control, writes) =
            (Runs(alone), Runs(beside), Runs(control), Runs(writes));
        println!("## 4. Reads beside a writer\n");
        println!(
            "Two threads read for {:.1} s (each call one of `get`, `queue` (limit 10), \
             `open-count`, in turn) on the product engine, Durability::Immediate, {backlog} \
             queued tasks; then the same with a third thread opening tasks as fast as it can, \
             every commit an fsync; then, as a control, with that writer writing to another \
             database, where it shares the cores and the disk with the readers but no lock. \
             Reads run on snapshots and should not wait for the writer: if they did, the second \
             row would be slower than the third.\n",
            s.concurrency_for.as_secs_f64()
        );
        println!(
            "| | reads/s (both threads) | read p50 µs | read p99 µs | read max µs | reads over 1 ms |"
        );
        println!("| --- | --- | --- | --- | --- | --- |");
        for (name, r) in [
            ("readers alone", &alone),
            ("beside a writer on the same database", &beside),
            ("beside a writer on another database (control)", &control),
        ] {
            let slow = r.spread(|r| {
                100.0 * r.0.iter().filter(|&&t| t > 1000.0).count() as f64 / r.0.len() as f64
            });
            println!(
                "| {name} | {} | {} | {} | {} | {:.2}% ({:.2}–{:.2}%) |",
                r.spread(|r| r.0.len() as f64 / s.concurrency_for.as_secs_f64())
                    .rate(),
                r.p50().us(),
                r.p99().us(),
                r.spread(Run::max).us(),
                slow.median,
                slow.min,
                slow.max,
            );
        }
        println!(
            "\nThe writer on the same database meanwhile: {} opens/s, p50 {} µs, p99 {} µs per commit.\n",
            writes
                .spread(|r| r.0.len() as f64 / s.concurrency_for.as_secs_f64())
                .rate(),
            writes.p50().us(),
            writes.p99().us(),
        );
        std::fs::remove_file(&path)?;
        std::fs::remove_file(&elsewhere_path)?;
        Ok(())
    }

    fn print_targets(&self) {
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

/// Two readers for `length`; with `writer`, a third thread opens tasks on
/// that tenant (ids from that number on) until the readers stop. Answers the
/// readers' latencies, merged, and the writer's.
fn read_phase(
    tenant: &Tenant,
    backlog: usize,
    length: Duration,
    writer: Option<(&Tenant, usize)>,
) -> Result<(Run, Option<Run>)> {
    let stop = Arc::new(AtomicBool::new(false));
    std::thread::scope(|scope| -> Result<(Run, Option<Run>)> {
        let writer = writer.map(|(writes_to, from)| {
            let stop = stop.clone();
            scope.spawn(move || -> Result<Run> {
                let mut out = Vec::new();
                let mut i = from;
                while !stop.load(Ordering::Relaxed) {
                    let t = task(
                        format!("written-{i:09}"),
                        2_000_000 + i as i64,
                        REVIEWER,
                        "written".into(),
                    );
                    let started = Instant::now();
                    writes_to.open(&t)?;
                    out.push(started.elapsed().as_secs_f64() * 1e6);
                    i += 1;
                }
                Ok(Run(out))
            })
        });
        let readers: Vec<_> = (0..2)
            .map(|r| {
                scope.spawn(move || -> Result<Vec<f64>> {
                    let query = reviewer_query(10);
                    let ends = Instant::now() + length;
                    let mut out = Vec::new();
                    let mut i = r;
                    while Instant::now() < ends {
                        let started = Instant::now();
                        match i % 3 {
                            0 => {
                                let id = format!("task-{:07}", (i * 7919) % backlog);
                                ensure!(tenant.get(&id)?.is_some(), "no task {id}");
                            }
                            1 => {
                                let page = tenant.queue(&query)?;
                                ensure!(page.tasks.len() == 10, "short queue page");
                            }
                            _ => {
                                ensure!(tenant.open_count()? >= backlog as u64, "open-count");
                            }
                        }
                        out.push(started.elapsed().as_secs_f64() * 1e6);
                        i += 1;
                    }
                    Ok(out)
                })
            })
            .collect();
        let joined: Vec<_> = readers.into_iter().map(|r| r.join()).collect();
        // Stop the writer before any error ends the scope, which waits for it.
        stop.store(true, Ordering::Relaxed);
        let wrote = match writer.map(|w| w.join()) {
            None => None,
            Some(Ok(got)) => Some(got?),
            Some(Err(_)) => bail!("the writer panicked"),
        };
        let mut reads = Vec::new();
        for r in joined {
            match r {
                Ok(got) => reads.extend(got?),
                Err(_) => bail!("a reader panicked"),
            }
        }
        Ok((Run(reads), wrote))
    })
}
