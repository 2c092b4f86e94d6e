//! What the engines are given to do: the task and timer shapes every section
//! uses, the reviewer's queue query, and seeding a database with them. Seeding
//! runs before any timing, in one transaction, and goes through the native
//! build of the rules, never around them, so a seeded file is one the
//! component itself could have written.

use std::path::Path;

use anyhow::Result;
use leasehold_guest::kv::Kv;
use leasehold_guest::{tasks, timers};
use leasehold_host::native::NativeEngine;
use leasehold_host::{
    Durability, Error, OnExpiry, Phase, Priority, QueueQuery, Task, TaskState, Timer,
};

use crate::drivers::TENANT;

pub(crate) const REVIEWER: &str = "reviewer";
pub(crate) const ALICE: &str = "alice";

/// A realistic task: one role, an escalation audience, an excluded actor, a
/// case, a due date and a small justification.
pub(crate) fn task(id: String, created_at: i64, role: &str, case: String) -> Task {
    Task {
        id,
        run: format!("run-{}", created_at % 64),
        case: Some(case),
        kind: "approve-payment".into(),
        justification: r#"{"amount":1250,"currency":"EUR","reason":"invoice 4711 exceeds the auto-approval limit"}"#.into(),
        candidate_roles: vec![role.into()],
        assignee: None,
        lease_until: None,
        priority: [Priority::Low, Priority::Normal, Priority::High, Priority::Urgent]
            [(created_at % 4) as usize],
        state: TaskState::Open,
        on_expiry: OnExpiry::Escalate,
        escalate_to: vec!["manager".into()],
        excluded_actors: vec!["mallory".into()],
        created_at,
        due_at: Some(created_at + 86_400_000),
        revision: 0,
        decision: None,
        outcomes: Vec::new(),
        remind_before: Vec::new(),
        escalation: Vec::new(),
        steps_done: 0,
    }
}

pub(crate) fn task_id(i: usize) -> String {
    format!("task-{i:07}")
}

pub(crate) fn reviewer_task(i: usize) -> Task {
    task(
        task_id(i),
        1_000 + i as i64,
        REVIEWER,
        format!("case-{}", i / 10),
    )
}

pub(crate) fn timer(i: usize, fire_at: i64) -> Timer {
    Timer {
        run: format!("run-{}", i % 64),
        case: Some(format!("case-{}", i / 10)),
        effect: format!("wake-{i:07}"),
        step: 1,
        phase: Phase::Forward,
        fire_at,
    }
}

pub(crate) fn reviewer_query(limit: u32) -> QueueQuery {
    QueueQuery {
        roles: vec![REVIEWER.into()],
        actor: Some(ALICE.into()),
        limit,
        after: None,
    }
}

/// Where the `claim-due` measurements sweep: every pool timer fired long
/// before; each call's `now` is one millisecond after the last one's, with a
/// one-millisecond lease, so what a call claims is claimable again by the
/// next call and every call finds a full page, while the held timers' leases
/// (seven days) outlast the whole run.
pub(crate) const SWEEP_FROM: i64 = 10_000_000;
pub(crate) const LONG_LEASE: u32 = 604_800_000;

/// Seeds a database through the native build of the rules (the same code and
/// the same keyspace the component writes), in one transaction.
pub(crate) fn seed(path: &Path, f: impl FnOnce(&mut dyn Kv) -> Result<(), Error>) -> Result<()> {
    let native = NativeEngine::open(path, Durability::Immediate)?;
    native.tenant(TENANT)?.write(f)?;
    Ok(())
}

pub(crate) fn seed_tasks(kv: &mut dyn Kv, tasks: impl Iterator<Item = Task>) -> Result<(), Error> {
    for t in tasks {
        tasks::open(kv, &t)?;
    }
    Ok(())
}

/// `held` timers claimed under a long lease, then `pool` due ones.
pub(crate) fn seed_timers(kv: &mut dyn Kv, held: usize, pool: usize) -> Result<(), Error> {
    for i in 0..held {
        timers::arm(kv, &timer(i, i as i64))?;
    }
    let mut claimed = 0;
    while claimed < held {
        let n = timers::claim_due(kv, held as i64, 1000, LONG_LEASE)?.len();
        if n == 0 {
            break;
        }
        claimed += n;
    }
    for i in held..held + pool {
        timers::arm(kv, &timer(i, 1_000_000 + i as i64))?;
    }
    Ok(())
}
