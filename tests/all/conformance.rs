//! The conformance kit (`leasehold_host::testkit`) on the shipped backends:
//! this run's backend (a redb file, or a fresh PostgreSQL schema when
//! `LEASEHOLD_TEST_BACKEND=postgres`), and redb in memory. The kit's
//! scenario check is the scenario suite (`tests/scenarios/*.json`) through
//! the component; the JavaScript and Python hosts run the same files.

use std::time::Duration;

use leasehold_host::storage::Backend;
use leasehold_host::storage::file::Access;
use leasehold_host::storage::postgres::PgBackend;
use leasehold_host::storage::redb::{GroupCommit, RedbBackend};
use leasehold_host::testkit::Guarded;
use leasehold_host::{Durability, Limits};

use leasehold_tests::{Backend as Run, backend, pg};

/// A fresh, empty store of this run's backend, gone with the value.
fn run_backend() -> Box<dyn Backend> {
    match backend() {
        Run::Redb => {
            let dir = tempfile::tempdir().expect("temp dir");
            let redb = RedbBackend::open(
                &dir.path().join("kit.redb"),
                Durability::None,
                Access::Write,
                Duration::ZERO,
                GroupCommit::new(true, &Limits::default()),
            )
            .expect("a fresh redb file");
            Box::new(Guarded::new(redb, dir))
        }
        Run::Postgres => {
            let base = pg::url().expect("the PostgreSQL pass has a database");
            let schema = pg::Schema::fresh_in(&base);
            let pg = PgBackend::connect(&schema.url, 4, false).expect("connects");
            Box::new(Guarded::new(pg, schema))
        }
    }
}

fn redb_in_memory() -> RedbBackend {
    RedbBackend::in_memory(Durability::None, GroupCommit::new(true, &Limits::default()))
        .expect("redb in memory")
}

mod on_this_runs_backend {
    leasehold_host::conformance_tests!(super::run_backend);
}

mod on_redb_in_memory {
    leasehold_host::conformance_tests!(super::redb_in_memory);
}

/// The kit's copy of the scenario files is the directory's: a file added
/// to `tests/scenarios` without the kit learning of it would go unrun here.
#[test]
fn the_kit_runs_every_scenario_file() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios");
    let mut on_disk: Vec<String> = std::fs::read_dir(dir)
        .expect("tests/scenarios exists")
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .map(|p| {
            p.file_stem()
                .expect("a name")
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    on_disk.sort();
    let mut in_kit: Vec<String> = leasehold_host::testkit::scenarios::SCENARIOS
        .iter()
        .map(|(name, _)| (*name).to_owned())
        .collect();
    in_kit.sort();
    assert_eq!(in_kit, on_disk);
    for (name, text) in leasehold_host::testkit::scenarios::SCENARIOS {
        let on_disk = std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("scenarios/{name}.json")),
        )
        .expect("read");
        assert_eq!(
            *text, on_disk,
            "{name}.json changed since the kit was built"
        );
    }
}

/// A boxed backend is one: the kit and `EngineBuilder::backend` take it.
#[test]
fn a_boxed_backend_serves_an_engine() {
    let engine = leasehold_host::Engine::builder()
        .backend(run_backend())
        .expect("an engine");
    let t = engine.tenant("acme").expect("tenant");
    assert_eq!(t.open_count().expect("counts"), 0);
}
