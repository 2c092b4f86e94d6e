//! PostgreSQL-only behaviour: round trips, conflicts and retries, many host
//! processes on one database. The shared suite runs on PostgreSQL too (see
//! tests/run); these are what only a shared server has.

use leasehold_host::Engine;
use leasehold_tests::pg::Schema;
use leasehold_tests::*;

fn engine(schema: &Schema) -> Engine {
    Engine::builder()
        .postgres(&schema.url)
        .expect("the engine connects")
}

#[test]
fn a_task_round_trips_through_postgres() {
    let Some(schema) = Schema::fresh() else { return };
    let t = engine(&schema).tenant("acme").expect("tenant");
    let opened = t.open(&task("t1", 10).roles(&["reviewer"])).expect("open");
    assert_eq!(t.get("t1").expect("get"), Some(opened));
    let claimed = t.claim("t1", "alice", &["reviewer"], None).expect("claim");
    assert_eq!(claimed.assignee.as_deref(), Some("alice"));
    assert_eq!(t.open_count().expect("count"), 1);
    let page = t.queue(&query(&["reviewer"], None, 10, None)).expect("queue");
    assert!(page.tasks.is_empty());
    assert_consistent(&t);
}
