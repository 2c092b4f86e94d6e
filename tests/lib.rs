//! Shared helpers for the integration tests: fresh engines on temp redb files
//! and task and timer builders with sensible defaults.

use leasehold_host::{
    Engine, OnExpiry, Phase, Priority, QueueQuery, Task, TaskState, Tenant, Timer,
};

/// An engine on a fresh redb file that lives as long as the returned guard.
pub fn temp_engine() -> (Engine, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("temp dir");
    let engine = Engine::open(dir.path().join("leasehold.redb")).expect("engine opens");
    (engine, dir)
}

/// A tenant of a fresh engine on a temp file.
pub fn temp_tenant() -> (Tenant, tempfile::TempDir) {
    let (engine, dir) = temp_engine();
    (engine.tenant("acme").expect("valid tenant"), dir)
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

/// A tenant of a fresh engine on a temp file that commits without fsync:
/// for tests that make hundreds of writes (races, big backlogs).
pub fn fast_tenant() -> (Tenant, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("temp dir");
    let engine = Engine::builder()
        .durability(leasehold_host::Durability::None)
        .open(dir.path().join("leasehold.redb"))
        .expect("engine opens");
    (engine.tenant("acme").expect("valid tenant"), dir)
}

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
pub fn raw_contents(path: &std::path::Path) -> std::collections::BTreeMap<Vec<u8>, Vec<u8>> {
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
pub fn raw_write(path: &std::path::Path, f: impl FnOnce(&mut redb::Table<&[u8], &[u8]>)) {
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
