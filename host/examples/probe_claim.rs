use leasehold_host::{Durability, Engine, OnExpiry, Priority, Task, TaskState};
fn main() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("p.redb");
    let t = Engine::builder().durability(Durability::None).open(&path)?.tenant("t")?;
    let n: usize = std::env::args().nth(1).map(|s| s.parse().unwrap()).unwrap_or(2000);
    let mk = |i: usize| Task {
        id: format!("task-{i:07}"), run: format!("run-{}", i % 64), case: Some(format!("case-{}", i / 10)), kind: "approve-payment".into(),
        justification: r#"{"amount":1250,"currency":"EUR","reason":"invoice 4711 exceeds the auto-approval limit"}"#.into(),
        candidate_roles: vec!["reviewer".into()], assignee: None,
        lease_until: None, priority: Priority::Normal, state: TaskState::Open,
        on_expiry: OnExpiry::Escalate, escalate_to: vec!["manager".into()], excluded_actors: vec!["mallory".into()],
        created_at: 1000 + i as i64, due_at: Some(1000 + i as i64 + 86_400_000),
    };
    for i in 0..n { t.open(&mk(i))?; }
    let c = std::time::Instant::now();
    for i in 0..n { let got = t.claim(&format!("task-{i:07}"), "alice", &["reviewer"], None)?; assert!(got.state == TaskState::Claimed); }
    println!("{n} claims in {:?} = {:.1}us", c.elapsed(), c.elapsed().as_secs_f64()*1e6/n as f64);
    Ok(())
}
