//! Shared helpers for the integration tests: fresh databases on the backend
//! the run is for, and task and timer builders with sensible defaults.
//!
//! `LEASEHOLD_TEST_BACKEND` picks the backend every [`TestDb`] is made on:
//! `redb` (the default) for a temp file, `postgres` for a fresh schema of the
//! database `LEASEHOLD_TEST_PG` names (see [`pg`]). The suite is written once
//! and `tests/run` runs it on both.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use leasehold_host::{
    Durability, Engine, EngineBuilder, OnExpiry, Phase, Priority, QueueQuery, Task, TaskState,
    Tenant, Timer,
};

/// A store the integration tests can run on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    /// A redb file in a temp directory.
    Redb,
    /// A fresh schema of the PostgreSQL test database.
    Postgres,
}

/// The backend this run is for, from `LEASEHOLD_TEST_BACKEND`.
pub fn backend() -> Backend {
    match std::env::var("LEASEHOLD_TEST_BACKEND") {
        Err(std::env::VarError::NotPresent) => Backend::Redb,
        Ok(v) if v.is_empty() || v == "redb" => Backend::Redb,
        Ok(v) if v == "postgres" => Backend::Postgres,
        Ok(v) => {
            panic!("LEASEHOLD_TEST_BACKEND must be `redb` (the default) or `postgres`, not {v:?}")
        }
        Err(e) => panic!("LEASEHOLD_TEST_BACKEND must be `redb` (the default) or `postgres`: {e}"),
    }
}

/// Whether this run gives every call a fresh instance, from
/// `LEASEHOLD_TEST_FRESH`: unset or `0` keeps instances between calls of a
/// tenant (the engine's default), `1` builds every engine the harness opens
/// with [`EngineBuilder::fresh_instances`]. `tests/run` runs the suite once
/// more with it set, so every test also holds with fresh instances.
pub fn fresh() -> bool {
    // The old switch meant the opposite; a run that still sets it would
    // silently test the other mode.
    if std::env::var_os("LEASEHOLD_TEST_REUSE").is_some() {
        panic!(
            "LEASEHOLD_TEST_REUSE is gone: instances are kept by default; LEASEHOLD_TEST_FRESH=1 runs fresh ones"
        );
    }
    match std::env::var("LEASEHOLD_TEST_FRESH").as_deref() {
        Err(_) | Ok("") | Ok("0") => false,
        Ok("1") => true,
        Ok(v) => panic!("LEASEHOLD_TEST_FRESH must be 0 or 1, not {v:?}"),
    }
}

/// One test's database, gone when this guard is dropped: a temp redb file,
/// or a fresh PostgreSQL schema. Any number of engines can be opened on it
/// one after another (reopening), and its raw contents read and damaged
/// behind the engine's back.
///
/// redb admits one opener per process: on redb, no engine may be open on the
/// file while a second one is opened or any `raw_` method runs. Tests keep
/// that contract on both backends, so they mean the same on each.
pub struct TestDb {
    store: Store,
}

enum Store {
    Redb {
        _dir: tempfile::TempDir,
        path: PathBuf,
    },
    Postgres(pg::Schema),
}

impl Default for TestDb {
    fn default() -> Self {
        Self::new()
    }
}

impl TestDb {
    /// A fresh, empty database on this run's [`backend`].
    pub fn new() -> TestDb {
        match backend() {
            Backend::Redb => TestDb::redb(),
            Backend::Postgres => {
                let Ok(base) = std::env::var("LEASEHOLD_TEST_PG") else {
                    panic!(
                        "LEASEHOLD_TEST_BACKEND=postgres needs LEASEHOLD_TEST_PG, the URL of a \
                         test database (tests/pg-setup prints one)"
                    )
                };
                TestDb {
                    store: Store::Postgres(pg::Schema::fresh_in(&base)),
                }
            }
        }
    }

    /// A fresh redb file, whatever the run's backend: for tests that are
    /// about redb files.
    pub fn redb() -> TestDb {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("leasehold.redb");
        TestDb {
            store: Store::Redb { _dir: dir, path },
        }
    }

    pub fn backend(&self) -> Backend {
        match self.store {
            Store::Redb { .. } => Backend::Redb,
            Store::Postgres(_) => Backend::Postgres,
        }
    }

    /// The redb file, on redb.
    pub fn path(&self) -> Option<&Path> {
        match &self.store {
            Store::Redb { path, .. } => Some(path),
            Store::Postgres(_) => None,
        }
    }

    /// An engine on this database, built by `builder`; with a fresh
    /// instance per call when the run asks for it (see [`fresh`]).
    pub fn try_open(&self, builder: EngineBuilder) -> Result<Engine, leasehold_host::Error> {
        let builder = if fresh() {
            builder.fresh_instances()
        } else {
            builder
        };
        self.open_as_built(builder)
    }

    /// An engine on this database, built by `builder` exactly, whatever
    /// the run asks for: for the tests of kept instances themselves.
    pub fn open_as_built(&self, builder: EngineBuilder) -> Result<Engine, leasehold_host::Error> {
        keep_compiled();
        match &self.store {
            Store::Redb { path, .. } => builder.open(path),
            Store::Postgres(schema) => builder.postgres(&schema.url),
        }
    }

    /// An engine on this database, built by `builder`, which must open.
    pub fn open(&self, builder: EngineBuilder) -> Engine {
        self.try_open(builder).expect("engine opens")
    }

    /// An engine with the default settings.
    pub fn engine(&self) -> Engine {
        self.open(Engine::builder())
    }

    /// An engine for tests that make hundreds of writes: on redb it commits
    /// without fsync; PostgreSQL's durability is the server's, so there it
    /// is the default engine.
    pub fn fast_engine(&self) -> Engine {
        match self.backend() {
            Backend::Redb => self.open(Engine::builder().durability(Durability::None)),
            Backend::Postgres => self.engine(),
        }
    }

    /// Every stored key and value of every tenant, each key spelt as
    /// [`tenant_key`] spells it, whichever backend stores it.
    pub fn raw_all(&self) -> BTreeMap<Vec<u8>, Vec<u8>> {
        match &self.store {
            Store::Redb { path, .. } => raw_contents(path),
            Store::Postgres(schema) => schema
                .client()
                .query("SELECT tenant, key, value FROM leasehold_kv", &[])
                .expect("raw read")
                .iter()
                .map(|r| {
                    let (tenant, key): (String, Vec<u8>) = (r.get(0), r.get(1));
                    (tenant_key(&tenant, &key), r.get(2))
                })
                .collect(),
        }
    }

    /// Every guest key and value of `tenant`, read raw.
    pub fn raw_contents(&self, tenant: &str) -> BTreeMap<Vec<u8>, Vec<u8>> {
        match &self.store {
            Store::Redb { path, .. } => {
                let prefix = tenant_key(tenant, b"");
                raw_contents(path)
                    .into_iter()
                    .filter_map(|(k, v)| Some((k.strip_prefix(prefix.as_slice())?.to_vec(), v)))
                    .collect()
            }
            Store::Postgres(schema) => schema
                .client()
                .query(
                    "SELECT key, value FROM leasehold_kv WHERE tenant = $1",
                    &[&tenant],
                )
                .expect("raw read")
                .iter()
                .map(|r| (r.get(0), r.get(1)))
                .collect(),
        }
    }

    /// Stores `value` under `tenant`'s `guest_key`, behind the engine's back.
    pub fn raw_put(&self, tenant: &str, guest_key: &[u8], value: &[u8]) {
        match &self.store {
            Store::Redb { path, .. } => raw_write(path, |t| {
                t.insert(tenant_key(tenant, guest_key).as_slice(), value)
                    .expect("raw insert");
            }),
            Store::Postgres(schema) => {
                schema
                    .client()
                    .execute(
                        "INSERT INTO leasehold_kv (tenant, key, value) VALUES ($1, $2, $3) \
                         ON CONFLICT (tenant, key) DO UPDATE SET value = EXCLUDED.value",
                        &[&tenant, &guest_key, &value],
                    )
                    .expect("raw insert");
            }
        }
    }

    /// Deletes `tenant`'s `guest_key`, which must be stored.
    pub fn raw_delete(&self, tenant: &str, guest_key: &[u8]) {
        let gone = match &self.store {
            Store::Redb { path, .. } => {
                let mut gone = false;
                raw_write(path, |t| {
                    gone = t
                        .remove(tenant_key(tenant, guest_key).as_slice())
                        .expect("raw remove")
                        .is_some();
                });
                gone
            }
            Store::Postgres(schema) => {
                schema
                    .client()
                    .execute(
                        "DELETE FROM leasehold_kv WHERE tenant = $1 AND key = $2",
                        &[&tenant, &guest_key],
                    )
                    .expect("raw delete")
                    == 1
            }
        };
        assert!(gone, "raw delete: tenant {tenant} has no such key");
    }
}

/// An engine on a fresh database that lives as long as the returned guard.
pub fn temp_engine() -> (Engine, TestDb) {
    let db = TestDb::new();
    (db.engine(), db)
}

/// A tenant of a fresh engine on a fresh database.
pub fn temp_tenant() -> (Tenant, TestDb) {
    let (engine, db) = temp_engine();
    (engine.tenant("acme").expect("valid tenant"), db)
}

/// A tenant of a fresh [`TestDb::fast_engine`]: for tests that make hundreds
/// of writes (races, big backlogs).
pub fn fast_tenant() -> (Tenant, TestDb) {
    let db = TestDb::new();
    let engine = db.fast_engine();
    (engine.tenant("acme").expect("valid tenant"), db)
}

/// A small xorshift: reproducible choices (kill points, cut points, calls)
/// from a seed the test prints.
pub struct Rng(pub u64);

impl Rng {
    /// A number below `n`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

/// A seed from the clock, never zero (xorshift stays at zero).
pub fn seed() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |d| d.as_nanos() as u64)
        | 1
}

/// An open task with no roles, no due date, created at `created_at`.
pub fn task(id: &str, created_at: i64) -> Task {
    Task {
        id: id.to_owned(),
        run: "run-1".to_owned(),
        case: None,
        kind: "approve".to_owned(),
        justification: r#"{"why":"test"}"#.to_owned(),
        candidate_roles: Vec::new(),
        assignee: None,
        lease_until: None,
        priority: Priority::Normal,
        state: TaskState::Open,
        on_expiry: OnExpiry::Deny,
        escalate_to: Vec::new(),
        excluded_actors: Vec::new(),
        created_at,
        due_at: None,
        revision: 0,
        decision: None,
        outcomes: Vec::new(),
        remind_before: Vec::new(),
        escalation: Vec::new(),
        steps_done: 0,
    }
}

/// Builder-style tweaks for tests.
pub trait TaskExt {
    fn roles(self, roles: &[&str]) -> Self;
    fn excluding(self, actors: &[&str]) -> Self;
    fn escalating_to(self, roles: &[&str]) -> Self;
    fn priority(self, p: Priority) -> Self;
    fn due(self, at: i64) -> Self;
    fn in_case(self, case: &str) -> Self;
    fn in_run(self, run: &str) -> Self;
}

fn owned(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| (*s).to_owned()).collect()
}

impl TaskExt for Task {
    fn roles(mut self, roles: &[&str]) -> Self {
        self.candidate_roles = owned(roles);
        self
    }
    fn excluding(mut self, actors: &[&str]) -> Self {
        self.excluded_actors = owned(actors);
        self
    }
    fn escalating_to(mut self, roles: &[&str]) -> Self {
        self.escalate_to = owned(roles);
        self
    }
    fn priority(mut self, p: Priority) -> Self {
        self.priority = p;
        self
    }
    fn due(mut self, at: i64) -> Self {
        self.due_at = Some(at);
        self
    }
    fn in_case(mut self, case: &str) -> Self {
        self.case = Some(case.to_owned());
        self
    }
    fn in_run(mut self, run: &str) -> Self {
        self.run = run.to_owned();
        self
    }
}

/// A forward timer of `run` / `effect` firing at `fire_at`.
pub fn timer(run: &str, effect: &str, fire_at: i64) -> Timer {
    Timer {
        run: run.to_owned(),
        case: None,
        effect: effect.to_owned(),
        step: 1,
        phase: Phase::Forward,
        fire_at,
    }
}

/// The hostile fixture component (tests/fixtures/hostile), built by build.rs.
pub static HOSTILE_COMPONENT: &[u8] = include_bytes!(env!("LEASEHOLD_HOSTILE_WASM"));

/// The file of the real guest built one layout later (`next-layout`, by
/// build.rs): the next release, for the rolling-upgrade test.
pub const NEXT_LAYOUT_COMPONENT_FILE: &str = env!("LEASEHOLD_NEXT_LAYOUT_WASM");

/// Asserts the consistency check finds nothing: rows, indexes and counters
/// agree.
pub fn assert_consistent(tenant: &Tenant) {
    let found = tenant.check().expect("the consistency check runs");
    assert!(
        found.is_empty(),
        "tenant {} is inconsistent: {found:#?}",
        tenant.name()
    );
}

/// A queue query for `roles`, optionally as `actor`.
pub fn query(roles: &[&str], actor: Option<&str>, limit: u32, after: Option<String>) -> QueueQuery {
    QueueQuery {
        roles: owned(roles),
        actor: actor.map(str::to_owned),
        limit,
        after,
    }
}

/// The ids of `tasks`, in order.
pub fn ids(tasks: &[Task]) -> Vec<String> {
    tasks.iter().map(|t| t.id.clone()).collect()
}

/// The `(run, effect)` identities of `timers`, in order.
pub fn identities(timers: &[Timer]) -> Vec<(String, String)> {
    timers
        .iter()
        .map(|t| (t.run.clone(), t.effect.clone()))
        .collect()
}

/// The state of task `id`, which must exist.
pub fn state_of(tenant: &Tenant, id: &str) -> TaskState {
    tenant
        .get(id)
        .expect("get answers")
        .unwrap_or_else(|| panic!("task {id} exists"))
        .state
}

/// Every key and value in a database file, read raw with redb. The engine on
/// that file must be dropped first (redb allows one opener).
pub fn raw_contents(path: &Path) -> BTreeMap<Vec<u8>, Vec<u8>> {
    use redb::{ReadableDatabase, ReadableTable, TableDefinition};
    let table: TableDefinition<&[u8], &[u8]> = TableDefinition::new(leasehold_host::KV_TABLE_NAME);
    let db = redb::Database::create(path).expect("raw open");
    let r = db.begin_read().expect("read");
    let t = r.open_table(table).expect("table");
    t.iter()
        .expect("iter")
        .map(|e| {
            let (k, v) = e.expect("entry");
            (k.value().to_vec(), v.value().to_vec())
        })
        .collect()
}

/// Runs `f` on the raw table of a database file, in one committed write.
pub fn raw_write(path: &Path, f: impl FnOnce(&mut redb::Table<&[u8], &[u8]>)) {
    use redb::TableDefinition;
    let table: TableDefinition<&[u8], &[u8]> = TableDefinition::new(leasehold_host::KV_TABLE_NAME);
    let db = redb::Database::create(path).expect("raw open");
    let w = db.begin_write().expect("write");
    {
        let mut t = w.open_table(table).expect("table");
        f(&mut t);
    }
    w.commit().expect("commit");
}

/// The full stored key of a tenant's guest key.
pub fn tenant_key(tenant: &str, guest_key: &[u8]) -> Vec<u8> {
    let mut k = leasehold_host::tenant_prefix(tenant).expect("valid tenant");
    k.extend_from_slice(guest_key);
    k
}

/// A PostgreSQL database for the tests, when this machine has one.
///
/// `LEASEHOLD_TEST_PG` is the URL of a database the tests may create schemas
/// in (`tests/pg-setup` makes one). Each [`pg::Schema`] is a fresh schema of
/// it, dropped when the schema is, so tests never see each other's tables.
pub mod pg {
    use std::sync::atomic::{AtomicU64, Ordering};

    /// The test database's URL, or `None` (after saying so in one line) when
    /// there is none. With `LEASEHOLD_REQUIRE_PG` set, as in CI, a missing
    /// database fails the test instead.
    pub fn url() -> Option<String> {
        match std::env::var("LEASEHOLD_TEST_PG") {
            Ok(url) if !url.is_empty() => Some(url),
            _ if std::env::var_os("LEASEHOLD_REQUIRE_PG").is_some() => {
                panic!("LEASEHOLD_REQUIRE_PG is set but LEASEHOLD_TEST_PG names no database")
            }
            _ => {
                eprintln!("skipped: no PostgreSQL here (LEASEHOLD_TEST_PG is not set)");
                None
            }
        }
    }

    /// A fresh schema in the test database, dropped with this value.
    pub struct Schema {
        pub name: String,
        base: String,
        /// A URL whose connections use only this schema.
        pub url: String,
    }

    static NEXT: AtomicU64 = AtomicU64::new(0);

    impl Schema {
        /// A fresh schema, or `None` when there is no test database.
        pub fn fresh() -> Option<Schema> {
            let base = url()?;
            Some(Schema::fresh_in(&base))
        }

        pub fn fresh_in(base: &str) -> Schema {
            let name = format!(
                "t_{}_{}_{}",
                std::process::id(),
                NEXT.fetch_add(1, Ordering::Relaxed),
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map(|d| d.subsec_nanos())
                    .unwrap_or(0)
            );
            client(base)
                .batch_execute(&format!("CREATE SCHEMA {name}"))
                .expect("create a test schema");
            let sep = if base.contains('?') { '&' } else { '?' };
            let url = format!("{base}{sep}options=-c%20search_path%3D{name}");
            Schema {
                name,
                base: base.to_owned(),
                url,
            }
        }

        /// A plain connection that uses this schema.
        pub fn client(&self) -> postgres::Client {
            client(&self.url)
        }
    }

    impl Drop for Schema {
        fn drop(&mut self) {
            if let Ok(mut c) = postgres::Client::connect(&self.base, postgres::NoTls) {
                let _ = c.batch_execute(&format!("DROP SCHEMA IF EXISTS {} CASCADE", self.name));
            }
        }
    }

    pub fn client(url: &str) -> postgres::Client {
        postgres::Client::connect(url, postgres::NoTls).expect("connect to the test database")
    }
}

/// Keeps the shipped component, compiled with the default limits, alive for
/// the whole test process. The host's compile cache holds no component once
/// its engines are gone (so a server frees what it no longer runs), and
/// tests run one at a time drop their engines before the next test opens
/// its own: without this, every engine of every test compiled the component
/// again, which was most of the suites' time. The keeper is an engine that
/// never makes a call, on a redb file unlinked once open; tests of other
/// components or limits compile theirs as before.
pub fn keep_compiled() {
    static KEEPER: std::sync::OnceLock<Engine> = std::sync::OnceLock::new();
    KEEPER.get_or_init(|| {
        let dir = tempfile::tempdir().expect("a temp dir for the keeper");
        let engine = Engine::open(dir.path().join("keeper.redb")).expect("the keeper opens");
        // Open, the file needs no name; the directory goes with the guard.
        let _ = std::fs::remove_file(dir.path().join("keeper.redb"));
        engine
    });
}
