//! Native unit tests of the rules, run against [`MemKv`].
//!
//! Each submodule owns one part of the contract; this file holds the fixtures
//! they all share, and a `*_support` module the fixtures only a few share.
//! Cost is asserted by counting kv calls, never by timing, and "nothing is
//! written by a call that returns an error" is asserted by comparing the
//! whole map before and after.

use std::fmt;

use crate::check;
use crate::kv::MemKv;
use crate::model::{Discrepancy, OnExpiry, Phase, Priority, StoreError, Task, TaskState, Timer};

mod buffer;
mod claim_ladder;
mod claim_leases;
mod consistency_check;
mod corrupt_rows;
mod corruption_support;
mod cost_counts_and_check;
mod cost_queue;
mod cost_support;
mod cost_sweeps;
mod cost_writes;
mod error_paths;
mod escalate;
mod history_start;
mod jobs;
mod layout;
mod layout_refusal;
mod model_based;
mod model_based_ops;
mod model_based_reference;
mod model_based_search;
mod open_and_get;
mod open_count_and_overdue;
mod queue_reads;
mod record;
mod record_check;
mod record_history;
mod record_layouts;
mod record_support;
mod record_trim;
mod schedules;
mod sealing;
mod search;
mod settle;
mod sharding;
mod subscriptions;
mod take_over_release;
mod task_changes;
mod task_decisions;
mod task_steps;
mod timer_leases;
mod timer_moves;
mod worker_batches;
mod worklist_support;

/// Owned strings from literals, for role, actor and id lists.
pub(super) fn names(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| (*s).to_owned()).collect()
}

/// An open task of `run-1` with no case, offered to anyone, created at 1000.
pub(super) fn task(id: &str) -> Task {
    Task {
        id: id.to_owned(),
        run: "run-1".to_owned(),
        case: None,
        kind: "approve".to_owned(),
        justification: "{}".to_owned(),
        candidate_roles: Vec::new(),
        assignee: None,
        lease_until: None,
        priority: Priority::Normal,
        state: TaskState::Open,
        on_expiry: OnExpiry::Deny,
        escalate_to: Vec::new(),
        excluded_actors: Vec::new(),
        created_at: 1_000,
        due_at: None,
        revision: 0,
        decision: None,
        outcomes: Vec::new(),
        remind_before: Vec::new(),
        escalation: Vec::new(),
        steps_done: 0,
    }
}

/// Readable variations on [`task`].
pub(super) trait TaskFixture: Sized {
    fn roles(self, roles: &[&str]) -> Self;
    fn excluding(self, actors: &[&str]) -> Self;
    fn escalating_to(self, roles: &[&str]) -> Self;
    fn of_run(self, run: &str) -> Self;
    fn in_case(self, case: &str) -> Self;
    fn priority(self, p: Priority) -> Self;
    fn created(self, at: i64) -> Self;
    fn due(self, at: i64) -> Self;
}

impl TaskFixture for Task {
    fn roles(self, roles: &[&str]) -> Self {
        Task {
            candidate_roles: names(roles),
            ..self
        }
    }
    fn excluding(self, actors: &[&str]) -> Self {
        Task {
            excluded_actors: names(actors),
            ..self
        }
    }
    fn escalating_to(self, roles: &[&str]) -> Self {
        Task {
            escalate_to: names(roles),
            ..self
        }
    }
    fn of_run(self, run: &str) -> Self {
        Task {
            run: run.to_owned(),
            ..self
        }
    }
    fn in_case(self, case: &str) -> Self {
        Task {
            case: Some(case.to_owned()),
            ..self
        }
    }
    fn priority(self, priority: Priority) -> Self {
        Task { priority, ..self }
    }
    fn created(self, created_at: i64) -> Self {
        Task { created_at, ..self }
    }
    fn due(self, at: i64) -> Self {
        Task {
            due_at: Some(at),
            ..self
        }
    }
}

/// A forward timer of step 0.
pub(super) fn timer(run: &str, effect: &str, fire_at: i64) -> Timer {
    Timer {
        run: run.to_owned(),
        case: None,
        effect: effect.to_owned(),
        step: 0,
        phase: Phase::Forward,
        fire_at,
    }
}

/// Opens a task that must be new, answering it as stored.
#[track_caller]
pub(super) fn open(kv: &mut MemKv, t: Task) -> Task {
    let before = crate::tasks::get(kv, &t.id).expect("get before open");
    assert_eq!(before, None, "fixture task {} already exists", t.id);
    crate::tasks::open(kv, &t).expect("a valid task opens")
}

/// Arms a timer that must be new.
#[track_caller]
pub(super) fn arm(kv: &mut MemKv, t: Timer) {
    assert_eq!(
        crate::timers::arm(kv, &t),
        Ok(crate::model::ArmOutcome::Armed),
        "arming {}/{}",
        t.run,
        t.effect
    );
}

/// Runs a call that must fail and must leave the store exactly as it was:
/// no set, no delete, the same map. Answers the error.
#[track_caller]
pub(super) fn fails_cleanly<T: fmt::Debug, E: fmt::Debug>(
    kv: &mut MemKv,
    call: impl FnOnce(&mut MemKv) -> Result<T, E>,
) -> E {
    let before = kv.map.clone();
    let calls = kv.calls;
    let err = match call(kv) {
        Ok(v) => panic!("expected an error, got Ok({v:?})"),
        Err(e) => e,
    };
    assert_eq!(
        kv.calls.sets, calls.sets,
        "a call answering {err:?} set keys"
    );
    assert_eq!(
        kv.calls.deletes, calls.deletes,
        "a call answering {err:?} deleted keys"
    );
    assert!(
        kv.map == before,
        "a call answering {err:?} changed the store"
    );
    err
}

/// Runs a call that must succeed without writing anything.
#[track_caller]
pub(super) fn writes_nothing<T, E: fmt::Debug>(
    kv: &mut MemKv,
    call: impl FnOnce(&mut MemKv) -> Result<T, E>,
) -> T {
    let before = kv.map.clone();
    let calls = kv.calls;
    let out = call(kv).expect("the call succeeds");
    assert_eq!(kv.calls.sets, calls.sets, "the call set keys");
    assert_eq!(kv.calls.deletes, calls.deletes, "the call deleted keys");
    assert!(kv.map == before, "the call changed the store");
    out
}

/// The reason of an `invalid` error.
#[track_caller]
pub(super) fn invalid_reason(e: StoreError) -> String {
    match e {
        StoreError::Invalid(why) => why,
        other => panic!("expected invalid, got {other:?}"),
    }
}

/// Asserts that the consistency check finds nothing.
#[track_caller]
pub(super) fn assert_healthy(kv: &mut MemKv) {
    let found: Vec<Discrepancy> = check::check(kv).expect("the check runs");
    assert!(found.is_empty(), "the check found {found:#?}");
}

/// The ids of some tasks, in order.
pub(super) fn ids(tasks: &[Task]) -> Vec<String> {
    tasks.iter().map(|t| t.id.clone()).collect()
}

/// The stored state of a task that must exist.
#[track_caller]
pub(super) fn stored(kv: &mut MemKv, id: &str) -> Task {
    crate::tasks::get(kv, id)
        .expect("get succeeds")
        .unwrap_or_else(|| panic!("task {id} exists"))
}
