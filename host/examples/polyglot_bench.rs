//! calls/s of `claim` and `queue` through the Rust host, on an in-memory redb
//! and a redb file (both `Durability::None`): the workload host/js/bench.mjs
//! and host/python/bench.py run too (BENCHMARKS.md, "Other hosts").
//!
//! `cargo run --release --example polyglot_bench -p leasehold-host -- [TASKS] [RUNS]`

use std::time::Instant;

use sha2::{Digest, Sha256};

use leasehold_host::{
    Durability, Engine, Error, OnExpiry, Priority, QueueQuery, Task, TaskState, Tenant,
};

fn task(i: usize) -> Task {
    Task {
        id: format!("t{i}"),
        run: "r".into(),
        case: None,
        kind: "k".into(),
        justification: "{}".into(),
        candidate_roles: vec!["approver".into()],
        assignee: None,
        lease_until: None,
        priority: Priority::Normal,
        state: TaskState::Open,
        on_expiry: OnExpiry::Deny,
        escalate_to: Vec::new(),
        excluded_actors: Vec::new(),
        created_at: i as i64,
        due_at: None,
        revision: 0,
        decision: None,
        outcomes: Vec::new(),
        remind_before: Vec::new(),
        escalation: Vec::new(),
        steps_done: 0,
    }
}

/// One run: answers (claim calls/s, queue calls/s).
fn once(t: &Tenant, tasks: usize) -> Result<(f64, f64), Error> {
    for i in 0..tasks {
        t.open(&task(i))?;
    }
    let query = QueueQuery {
        roles: vec!["approver".into()],
        actor: Some("alice".into()),
        limit: 50,
        after: None,
    };
    let start = Instant::now();
    for _ in 0..tasks {
        assert_eq!(t.queue(&query)?.tasks.len(), 50, "a short page");
    }
    let queue = tasks as f64 / start.elapsed().as_secs_f64();
    let start = Instant::now();
    for i in 0..tasks {
        t.claim(&format!("t{i}"), "bob", &["approver"], None)?;
    }
    let claim = tasks as f64 / start.elapsed().as_secs_f64();
    Ok((claim, queue))
}

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let tasks: usize = args.next().map_or(Ok(1000), |a| a.parse())?;
    let runs: usize = args.next().map_or(Ok(3), |a| a.parse())?;
    let sha256: String = Sha256::digest(leasehold_host::GUEST_COMPONENT)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    println!("component sha256 {sha256}; {tasks} tasks, median of {runs} runs");
    let dir = tempfile::tempdir()?;
    for store in ["memory", "redb"] {
        let mut claims = Vec::new();
        let mut queues = Vec::new();
        for run in 0..runs {
            let builder = Engine::builder().durability(Durability::None);
            let engine = match store {
                "memory" => builder.in_memory()?,
                _ => builder.open(dir.path().join(format!("bench-{run}.redb")))?,
            };
            let (c, q) = once(&engine.tenant("bench")?, tasks)?;
            claims.push(c);
            queues.push(q);
        }
        println!(
            "rust {store}: claim {:.0} calls/s, queue (limit 50) {:.0} calls/s",
            median(claims),
            median(queues)
        );
    }
    Ok(())
}
