use leasehold_tests::*;

#[test]
fn a_task_round_trips_through_the_component() {
    let (t, _dir) = temp_tenant();
    let opened = t.open(&task("t1", 10).roles(&["reviewer"])).expect("open");
    assert_eq!(opened.id, "t1");
    assert_eq!(t.get("t1").expect("get"), Some(opened));
    let claimed = t.claim("t1", "alice", &["reviewer"], None).expect("claim");
    assert_eq!(claimed.assignee.as_deref(), Some("alice"));
    assert_eq!(t.open_count().expect("count"), 1);
    assert!(t.check().expect("check").is_empty());
}
