//! The shortest path through the real component, on the run's backend.

use leasehold_tests::*;

#[test]
fn a_task_round_trips_through_the_component() {
    let (t, _db) = temp_tenant();
    let opened = t.open(&task("t1", 10).roles(&["reviewer"])).expect("open");
    assert_eq!(opened.id, "t1");
    assert_eq!(t.get("t1").expect("get"), Some(opened));
    let claimed = t.claim("t1", "alice", &["reviewer"], None).expect("claim");
    assert_eq!(claimed.assignee.as_deref(), Some("alice"));
    assert_eq!(t.open_count().expect("count"), 1);
    assert!(t.check().expect("check").is_empty());
}

/// The harness puts every test on the backend the run asked for: a
/// PostgreSQL run that quietly ran on redb would prove nothing.
#[test]
fn the_suite_runs_on_the_backend_the_run_asked_for() {
    let (engine, db) = temp_engine();
    assert_eq!(db.backend(), backend());
    engine
        .tenant("acme")
        .expect("tenant")
        .open(&task("t1", 1))
        .expect("open");
    // Only PostgreSQL counts round trips; only redb has a file.
    match backend() {
        Backend::Redb => {
            assert_eq!(engine.round_trips(), None);
            assert!(db.path().is_some_and(|p| p.exists()));
        }
        Backend::Postgres => {
            assert!(engine.round_trips().is_some_and(|n| n > 0));
            assert_eq!(db.path(), None);
        }
    }
    drop(engine);
    // The raw view sees what the engine stored, on either.
    assert!(!db.raw_contents("acme").is_empty());
    assert!(db.raw_contents("other").is_empty());
}
