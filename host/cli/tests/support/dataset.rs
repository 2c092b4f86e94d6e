//! The tasks the copy tests and `copy_bench` fill a database with: every
//! state a task can be in, timers, a sealed run, made through the library.
//! Shared by `tests/copy.rs` and `examples/copy_bench.rs` (included by
//! path), so the benchmark measures the dataset the test proves. It only
//! writes through the engine's verbs, never keys.

use std::path::Path;

use leasehold_host::{
    Durability, Engine, Lease, OnExpiry, Phase, Priority, Reuse, Settlement, Task, TaskState,
    Tenant, Timer,
};

/// The time every task and timer is made at.
pub const T0: i64 = 1_780_000_000_000;

/// Task `i` of `tenant`; its id is `{tenant}-t{i:05}`.
pub fn task(tenant: &str, i: usize) -> Task {
    let priority = [
        Priority::Low,
        Priority::Normal,
        Priority::High,
        Priority::Urgent,
    ][i % 4];
    Task {
        id: format!("{tenant}-t{i:05}"),
        run: format!("run-{}", i % 17),
        case: Some(format!("case-{}", i % 5)),
        kind: "review".into(),
        justification: format!("{{\"n\":{i}}}"),
        candidate_roles: vec![format!("r{}", i % 3)],
        assignee: None,
        lease_until: None,
        priority,
        state: TaskState::Open,
        on_expiry: [OnExpiry::Deny, OnExpiry::Escalate, OnExpiry::Proceed][i % 3],
        escalate_to: vec!["lead".into()],
        excluded_actors: if i.is_multiple_of(7) {
            vec!["mallory".into()]
        } else {
            vec![]
        },
        created_at: T0 + i as i64,
        due_at: i.is_multiple_of(4).then_some(T0 + 60_000 + i as i64),
        revision: 0,
        decision: None,
        outcomes: Vec::new(),
        remind_before: Vec::new(),
        escalation: Vec::new(),
        steps_done: 0,
    }
}

/// One tenant's `n` tasks: opened, then claimed, leased, settled,
/// expired, escalated, released or left open by turns; a quarter as many
/// timers armed, some claimed and one disarmed; a run sealed; overdue
/// tasks expired.
pub fn fill_tenant(t: &Tenant, name: &str, n: usize) {
    for i in 0..n {
        t.open(&task(name, i)).expect("open");
    }
    for i in 0..n {
        let id = format!("{name}-t{i:05}");
        let role = format!("r{}", i % 3);
        match i % 9 {
            1 => {
                t.claim(&id, "alice", &[&role], None).expect("claim");
            }
            2 => {
                let lease = Lease {
                    now: T0,
                    lease_ms: 30_000,
                };
                t.claim(&id, "bob", &[&role], Some(lease)).expect("lease");
            }
            3 => {
                t.settle(&id, Settlement::Completed, None).expect("settle");
            }
            4 => {
                t.settle(&id, Settlement::Expired, None).expect("expire");
            }
            5 => {
                t.escalate(&id).expect("escalate");
            }
            6 => {
                t.claim(&id, "carol", &[&role], None).expect("claim");
                t.release(&id, "carol").expect("release");
            }
            _ => {}
        }
    }
    for i in 0..n / 4 {
        let timer = Timer {
            run: format!("run-{}", i % 17),
            case: Some(format!("case-{}", i % 5)),
            effect: format!("effect-{i}"),
            step: i as u32,
            phase: if i % 2 == 0 {
                Phase::Forward
            } else {
                Phase::Compensating
            },
            fire_at: T0 + 1_000 * i as i64,
        };
        t.arm(&timer).expect("arm");
    }
    t.claim_due(T0 + 5_000, 3, 10_000).expect("claim-due");
    t.disarm("run-1", "effect-1").expect("disarm");
    let awaited = format!("{name}-t00010");
    t.seal("run-10", &[&awaited]).expect("seal");
    t.expire_overdue(T0 + 60_100, 5).expect("expire-overdue");
}

/// Fills `tenants` with `n` tasks each, as [`fill_tenant`] does, all
/// tenants at once: their calls share commits (group commit), and each
/// thread keeps its instances between calls, which is what makes 100,000
/// tasks quick to make in a debug build.
pub fn fill_at_once(db: &Path, tenants: &[String], n: usize) {
    let engine = Engine::builder()
        .durability(Durability::None)
        .reuse_instances(Reuse::default())
        .open(db)
        .expect("open the source");
    std::thread::scope(|s| {
        for name in tenants {
            let t = engine.tenant(name).expect("tenant");
            s.spawn(move || fill_tenant(&t, name, n));
        }
    });
}
