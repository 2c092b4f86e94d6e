//! The SQLite backend passes the whole conformance kit: every promise of
//! the storage trait, then the scenario suite through the component, each
//! check on a fresh file.

use leasehold_host::testkit::Guarded;
use leasehold_sqlite_backend::SqliteBackend;

fn fresh() -> Guarded<SqliteBackend, tempfile::TempDir> {
    let dir = tempfile::tempdir().expect("temp dir");
    let backend = SqliteBackend::open(dir.path().join("kit.sqlite")).expect("opens");
    Guarded::new(backend, dir)
}

leasehold_host::conformance_tests!(fresh);

/// What was committed is in the file: a second backend on the same path
/// reads it.
#[test]
fn commits_are_in_the_file() {
    use leasehold_host::storage::{Backend, Mode, Write};
    use std::time::Duration;
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("kept.sqlite");
    let first = SqliteBackend::open(&path).expect("opens");
    first
        .begin("acme", Mode::Write, Duration::from_secs(5))
        .expect("begins")
        .commit(vec![Write::Put(b"k".to_vec(), b"v".to_vec())])
        .expect("commits")
        .wait()
        .expect("durable");
    drop(first);
    let second = SqliteBackend::open(&path).expect("opens again");
    let mut txn = second
        .begin("acme", Mode::Read, Duration::from_secs(5))
        .expect("begins");
    assert_eq!(txn.get(b"k").expect("reads"), Some(b"v".to_vec()));
}
