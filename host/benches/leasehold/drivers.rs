//! The engines under test behind one face: the product (the component
//! through the host, instances kept between calls of the tenant as
//! shipped, or, as *fresh*, a fresh instance per call) and the native build of the same rules, each over a redb
//! file, and raw redb beside them as the floor. A driver only forwards a call
//! to its engine, so the engines differ in nothing but what they are; nothing
//! here may time a call or add work to one.

use std::path::Path;

use anyhow::{Result, bail, ensure};
use leasehold_guest::search::{self, CountAnswer, SearchPage, SearchQuery, TaskFilter};
use leasehold_guest::{tasks, timers};
use leasehold_host::native::{NativeEngine, NativeTenant};
use leasehold_host::{
    ArmOutcome, Durability, Engine, Error, Limits, Page, QueueQuery, Settlement, Task, TaskChanges,
    Tenant, Timer,
};
use redb::{ReadableDatabase, TableDefinition};

/// The one tenant every engine of the run opens.
pub(crate) const TENANT: &str = "acme";

/// The product or the native build, over one redb file.
pub(crate) enum Driver {
    Product(Tenant),
    Native(NativeTenant),
}

/// What one engine of a per-verb run drives.
pub(crate) enum Subject {
    Driver(Driver),
    Raw(Raw),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// The component as shipped: instances kept between calls.
    Product,
    /// The component with a fresh instance per call
    /// (`EngineBuilder::fresh_instances`).
    Fresh,
    Native,
    Raw,
}

impl Kind {
    pub(crate) const ALL: [Kind; 4] = [Kind::Product, Kind::Fresh, Kind::Native, Kind::Raw];

    pub(crate) fn name(self) -> &'static str {
        match self {
            Kind::Product => "product",
            Kind::Fresh => "fresh",
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
pub(crate) fn bench_limits() -> Limits {
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
    pub(crate) fn open(kind: Kind, path: &Path, durability: Durability) -> Result<Driver> {
        Ok(match kind {
            Kind::Product | Kind::Fresh => {
                let builder = Engine::builder()
                    .durability(durability)
                    .limits(bench_limits());
                let builder = if kind == Kind::Fresh {
                    builder.fresh_instances()
                } else {
                    builder
                };
                Driver::Product(builder.open(path)?.tenant(TENANT)?)
            }
            Kind::Native => Driver::Native(NativeEngine::open(path, durability)?.tenant(TENANT)?),
            Kind::Raw => bail!("the raw baseline has no driver"),
        })
    }

    pub(crate) fn open_task(&self, t: &Task) -> Result<Task, Error> {
        match self {
            Driver::Product(p) => p.open(t),
            Driver::Native(n) => n.write(|kv| tasks::open(kv, t)),
        }
    }

    pub(crate) fn claim(&self, id: &str, actor: &str, roles: &[String]) -> Result<Task, Error> {
        match self {
            Driver::Product(p) => p.claim(id, actor, &strs(roles), None),
            Driver::Native(n) => n.write(|kv| tasks::claim(kv, id, actor, roles, None, None)),
        }
    }

    pub(crate) fn claim_next(&self, q: &QueueQuery) -> Result<Option<Task>, Error> {
        match self {
            Driver::Product(p) => p.claim_next(q, None),
            Driver::Native(n) => n.write(|kv| tasks::claim_next(kv, q, None)),
        }
    }

    pub(crate) fn settle(&self, id: &str) -> Result<bool, Error> {
        match self {
            Driver::Product(p) => p.settle(id, Settlement::Completed, None),
            Driver::Native(n) => {
                n.write(|kv| tasks::settle(kv, id, Settlement::Completed, None, None, None))
            }
        }
    }

    /// A manager moving the due time, recorded with its before and after;
    /// the due time moves the task into the overdue index too.
    pub(crate) fn update(&self, id: &str) -> Result<Task, Error> {
        let changes = TaskChanges {
            due_at: Some(Some(4_000_000_000_000)),
            ..TaskChanges::default()
        };
        match self {
            Driver::Product(p) => p.update(id, Some("lead"), &changes),
            Driver::Native(n) => n.write(|kv| tasks::update(kv, id, Some("lead"), &changes, None)),
        }
    }

    /// A manager's assignment of a queued task to `to`.
    pub(crate) fn assign(&self, id: &str, to: &str, roles: &[String]) -> Result<Task, Error> {
        match self {
            Driver::Product(p) => p.assign(id, to, &strs(roles), None, false, Some("lead")),
            Driver::Native(n) => {
                n.write(|kv| tasks::assign(kv, id, to, roles, None, false, Some("lead"), None))
            }
        }
    }

    pub(crate) fn held(&self, actor: &str, limit: u32) -> Result<Page, Error> {
        match self {
            Driver::Product(p) => p.held(actor, limit, None),
            Driver::Native(n) => n.read(|kv| tasks::held(kv, actor, limit, None)),
        }
    }

    pub(crate) fn search(&self, q: &SearchQuery) -> Result<SearchPage, Error> {
        match self {
            Driver::Product(p) => p.search(q),
            Driver::Native(n) => n.read(|kv| search::search(kv, q)),
        }
    }

    pub(crate) fn count(&self, f: &TaskFilter) -> Result<CountAnswer, Error> {
        match self {
            Driver::Product(p) => p.count(f, None, None),
            Driver::Native(n) => n.read(|kv| search::count(kv, f, None, None)),
        }
    }

    pub(crate) fn escalate(&self, id: &str) -> Result<Task, Error> {
        match self {
            Driver::Product(p) => p.escalate(id),
            Driver::Native(n) => n.write(|kv| tasks::escalate(kv, id, None)),
        }
    }

    pub(crate) fn queue(&self, q: &QueueQuery) -> Result<Page, Error> {
        match self {
            Driver::Product(p) => p.queue(q),
            Driver::Native(n) => n.read(|kv| tasks::queue(kv, q)),
        }
    }

    pub(crate) fn for_case(&self, case: &str, limit: u32) -> Result<Page, Error> {
        match self {
            Driver::Product(p) => p.for_case(case, limit, None),
            Driver::Native(n) => n.read(|kv| tasks::for_case(kv, case, limit, None)),
        }
    }

    pub(crate) fn open_count(&self) -> Result<u64, Error> {
        match self {
            Driver::Product(p) => p.open_count(),
            Driver::Native(n) => n.read(|kv| tasks::open_count(kv)),
        }
    }

    pub(crate) fn arm(&self, t: &Timer) -> Result<ArmOutcome, Error> {
        match self {
            Driver::Product(p) => p.arm(t),
            Driver::Native(n) => n.write(|kv| timers::arm(kv, t)),
        }
    }

    pub(crate) fn claim_due(
        &self,
        now: i64,
        limit: u32,
        lease_ms: u32,
    ) -> Result<Vec<Timer>, Error> {
        match self {
            Driver::Product(p) => p.claim_due(now, limit, lease_ms),
            Driver::Native(n) => n.write(|kv| timers::claim_due(kv, now, limit, lease_ms)),
        }
    }

    /// The consistency check (product only; the smoke pass runs it after
    /// every measurement, so the benchmark never times a broken database).
    pub(crate) fn check(&self) -> Result<()> {
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
pub(crate) struct Raw {
    db: redb::Database,
    durability: Durability,
}

const RAW_TABLE: TableDefinition<&[u8], &[u8]> = TableDefinition::new("raw");
/// About the size of an index entry plus a small row.
pub(crate) const RAW_VALUE: [u8; 96] = [7; 96];
/// Keys the raw read baseline reads, round and round.
pub(crate) const RAW_READ_KEYS: usize = 1000;

impl Raw {
    pub(crate) fn open(path: &Path, durability: Durability) -> Result<Raw> {
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

    pub(crate) fn insert(&self, i: usize) -> Result<()> {
        let mut w = self.db.begin_write()?;
        if self.durability == Durability::None {
            w.set_durability(redb::Durability::None)?;
        }
        w.open_table(RAW_TABLE)?
            .insert(Self::key(i).as_slice(), RAW_VALUE.as_slice())?;
        w.commit()?;
        Ok(())
    }

    pub(crate) fn get(&self, i: usize) -> Result<bool> {
        let r = self.db.begin_read()?;
        let t = r.open_table(RAW_TABLE)?;
        Ok(t.get(Self::key(i).as_slice())?.is_some())
    }
}
