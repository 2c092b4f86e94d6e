//! Reminders and escalation chains: `open` checks and orders them, the
//! `wake` index holds a pending task at its next step, `expire-overdue`
//! fires one step per task per call (a history and feed entry carrying the
//! step), `next-wake` names the earliest instant anything is owed, a
//! change re-arms the steps, and a settled task fires nothing.

use super::worklist_support::claim;
use super::*;
use crate::changes;
use crate::model::{EscalationStep, Settlement, StepAction, TaskChanges, TaskStep};
use crate::tasks;

const HOUR: i64 = 3_600_000;
const DUE: i64 = 10 * HOUR;

fn step(after_h: i64, action: StepAction) -> EscalationStep {
    EscalationStep {
        after_due_ms: (after_h * HOUR) as u64,
        action,
    }
}

fn escalate(roles: &[&str]) -> StepAction {
    StepAction::Escalate(names(roles))
}

/// Reviewed by `clerk`; reminded 2 h and 1 h before a due time of 10 h;
/// at due escalated to `leads`, at due + 4 h to `directors`, at due + 24 h
/// expired.
fn chained(id: &str) -> Task {
    Task {
        remind_before: vec![HOUR as u64, 2 * HOUR as u64],
        escalation: vec![
            step(0, escalate(&["leads"])),
            step(4, escalate(&["directors"])),
            step(24, StepAction::Expire),
        ],
        ..task(id).roles(&["clerk"]).created(0).due(DUE)
    }
}

fn sweep(kv: &mut MemKv, now: i64) -> Vec<Task> {
    let out = tasks::expire_overdue(kv, now, 100).expect("sweeps");
    assert_healthy(kv);
    out
}

fn last_entry(kv: &mut MemKv, id: &str) -> crate::model::HistoryEntry {
    changes::history(kv, id, None, 100)
        .expect("history")
        .pop()
        .expect("an entry")
}

#[test]
fn open_orders_reminders_earliest_first_and_indexes_the_first_step() {
    let mut kv = MemKv::new();
    let t = open(&mut kv, chained("t"));
    assert_eq!(t.remind_before, [2 * HOUR as u64, HOUR as u64]);
    assert_eq!(t.steps_done, 0);
    assert_eq!(
        tasks::next_wake(&mut kv).expect("next-wake"),
        Some(DUE - 2 * HOUR)
    );
    // Not overdue in the `on-expiry` sense: its chain acts at its due time.
    assert!(
        tasks::overdue(&mut kv, DUE + 1, 10)
            .expect("overdue")
            .is_empty()
    );
    // Nothing fires before the first reminder.
    assert!(
        writes_nothing(&mut kv, |kv| tasks::expire_overdue(
            kv,
            DUE - 2 * HOUR - 1,
            10
        ))
        .is_empty()
    );
    assert_healthy(&mut kv);
}

#[test]
fn each_step_fires_once_in_order_with_its_record() {
    let mut kv = MemKv::new();
    open(&mut kv, chained("t"));
    claim(&mut kv, "t", "alice", &["clerk"]).expect("claims");

    // The first reminder: the task is as it was, but for its step count.
    let got = sweep(&mut kv, DUE - 2 * HOUR);
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].state, TaskState::Claimed);
    assert_eq!(got[0].steps_done, 1);
    let e = last_entry(&mut kv, "t");
    assert_eq!(e.verb, "expire-overdue");
    assert_eq!(e.actor, None);
    assert_eq!(e.step, Some(TaskStep::Reminder(2 * HOUR as u64)));
    assert_eq!(e.after, TaskState::Claimed);
    assert!(
        e.changes
            .iter()
            .any(|c| c.field == "steps-done" && c.before == "0" && c.after == "1")
    );
    // Swept again at the same instant: nothing more is owed.
    assert!(sweep(&mut kv, DUE - 2 * HOUR).is_empty());
    assert_eq!(
        tasks::next_wake(&mut kv).expect("next-wake"),
        Some(DUE - HOUR)
    );

    sweep(&mut kv, DUE - HOUR);
    assert_eq!(
        last_entry(&mut kv, "t").step,
        Some(TaskStep::Reminder(HOUR as u64))
    );

    // At due: escalated to leads, the holder's claim ended.
    let got = sweep(&mut kv, DUE);
    assert_eq!(got[0].state, TaskState::Escalated);
    assert_eq!(got[0].assignee, None);
    assert_eq!(got[0].candidate_roles, names(&["clerk", "leads"]));
    let e = last_entry(&mut kv, "t");
    assert_eq!(
        e.step,
        Some(TaskStep::Escalation(step(0, escalate(&["leads"]))))
    );
    assert!(e.changes.iter().any(|c| c.field == "candidate-roles"
        && c.before == r#"["clerk"]"#
        && c.after == r#"["clerk","leads"]"#));

    // At due + 4 h: directors too.
    let got = sweep(&mut kv, DUE + 4 * HOUR);
    assert_eq!(
        got[0].candidate_roles,
        names(&["clerk", "leads", "directors"])
    );
    assert_eq!(got[0].steps_done, 4);

    // At due + 24 h: expired; nothing is owed after.
    let got = sweep(&mut kv, DUE + 24 * HOUR);
    assert_eq!(got[0].state, TaskState::Expired);
    assert_eq!(
        last_entry(&mut kv, "t").step,
        Some(TaskStep::Escalation(step(24, StepAction::Expire)))
    );
    assert_eq!(tasks::next_wake(&mut kv).expect("next-wake"), None);
    assert!(sweep(&mut kv, i64::from(i32::MAX) * 1000).is_empty());
}

#[test]
fn after_downtime_one_step_fires_per_call_in_order() {
    let mut kv = MemKv::new();
    open(&mut kv, chained("t"));
    let mut seen = Vec::new();
    loop {
        let got = sweep(&mut kv, DUE + 48 * HOUR);
        if got.is_empty() {
            break;
        }
        assert_eq!(got.len(), 1, "one step of a task per call");
        seen.push(last_entry(&mut kv, "t").step.expect("a step"));
    }
    assert_eq!(seen.len(), 5);
    assert_eq!(seen[0], TaskStep::Reminder(2 * HOUR as u64));
    assert_eq!(seen[4], TaskStep::Escalation(step(24, StepAction::Expire)));
    assert_eq!(stored(&mut kv, "t").state, TaskState::Expired);
}

#[test]
fn a_limit_bounds_overdue_tasks_and_steps_together() {
    let mut kv = MemKv::new();
    open(&mut kv, task("plain").due(DUE));
    open(&mut kv, chained("a"));
    open(&mut kv, chained("b"));
    let got = tasks::expire_overdue(&mut kv, DUE, 2).expect("sweeps");
    // The overdue task first, then the earliest step.
    assert_eq!(ids(&got), ["plain", "a"]);
    assert_eq!(
        tasks::next_wake(&mut kv).expect("next-wake"),
        Some(DUE - 2 * HOUR)
    );
    assert_healthy(&mut kv);
}

#[test]
fn reminders_alone_leave_the_due_time_to_on_expiry() {
    let mut kv = MemKv::new();
    open(
        &mut kv,
        Task {
            remind_before: vec![HOUR as u64],
            ..task("t").created(0).due(DUE)
        },
    );
    assert_eq!(
        tasks::next_wake(&mut kv).expect("next-wake"),
        Some(DUE - HOUR)
    );
    sweep(&mut kv, DUE - HOUR);
    // Now the due time is what is owed, to `on-expiry` (deny: expired).
    assert_eq!(tasks::next_wake(&mut kv).expect("next-wake"), Some(DUE));
    assert_eq!(
        ids(&tasks::overdue(&mut kv, DUE, 10).expect("overdue")),
        ["t"]
    );
    let got = sweep(&mut kv, DUE);
    assert_eq!(got[0].state, TaskState::Expired);
    assert_eq!(last_entry(&mut kv, "t").step, None);
}

#[test]
fn a_settled_task_fires_nothing() {
    let mut kv = MemKv::new();
    open(&mut kv, chained("t"));
    tasks::settle(&mut kv, "t", Settlement::Completed, None, None, None).expect("settles");
    assert_eq!(tasks::next_wake(&mut kv).expect("next-wake"), None);
    assert!(
        writes_nothing(&mut kv, |kv| tasks::expire_overdue(kv, DUE + 48 * HOUR, 10)).is_empty()
    );
}

#[test]
fn moving_the_due_time_rearms_the_steps_and_a_change_records_them() {
    let mut kv = MemKv::new();
    open(&mut kv, chained("t"));
    sweep(&mut kv, DUE - 2 * HOUR);
    sweep(&mut kv, DUE - HOUR);
    // A day's grace: both reminders come again before the new due time.
    let later = DUE + 24 * HOUR;
    let t = tasks::update(
        &mut kv,
        "t",
        Some("olga"),
        &TaskChanges {
            due_at: Some(Some(later)),
            ..TaskChanges::default()
        },
        None,
    )
    .expect("updates");
    assert_eq!(t.steps_done, 0);
    assert_eq!(
        tasks::next_wake(&mut kv).expect("next-wake"),
        Some(later - 2 * HOUR)
    );
    let e = last_entry(&mut kv, "t");
    assert!(
        e.changes
            .iter()
            .any(|c| c.field == "steps-done" && c.before == "2" && c.after == "0")
    );
    assert_healthy(&mut kv);

    // A new chain replaces the old: recorded before and after.
    let t = tasks::update(
        &mut kv,
        "t",
        Some("olga"),
        &TaskChanges {
            escalation: Some(vec![step(1, StepAction::Expire)]),
            remind_before: Some(vec![]),
            ..TaskChanges::default()
        },
        None,
    )
    .expect("updates");
    assert!(t.remind_before.is_empty());
    assert_eq!(
        tasks::next_wake(&mut kv).expect("next-wake"),
        Some(later + HOUR)
    );
    let e = last_entry(&mut kv, "t");
    let esc = e
        .changes
        .iter()
        .find(|c| c.field == "escalation")
        .expect("escalation changed");
    assert_eq!(esc.after, r#"[{"action":"expire","after-due-ms":3600000}]"#);
    assert_healthy(&mut kv);
}

#[test]
fn bad_timelines_are_refused_naming_the_field_and_writing_nothing() {
    let mut kv = MemKv::new();
    let e = fails_cleanly(&mut kv, |kv| {
        tasks::open(
            kv,
            &Task {
                remind_before: vec![DUE as u64 + 1],
                ..task("t").created(0).due(DUE)
            },
        )
    });
    assert!(invalid_reason(e).starts_with("remind-before[0]"));
    let e = fails_cleanly(&mut kv, |kv| {
        tasks::open(
            kv,
            &Task {
                escalation: vec![step(0, StepAction::Expire)],
                ..task("t")
            },
        )
    });
    assert!(invalid_reason(e).starts_with("escalation: "));

    open(&mut kv, chained("c"));
    let e = fails_cleanly(&mut kv, |kv| {
        tasks::update(
            kv,
            "c",
            None,
            &TaskChanges {
                due_at: Some(None),
                ..TaskChanges::default()
            },
            None,
        )
    });
    let why = match e {
        crate::model::ClaimError::Store(s) => invalid_reason(s),
        other => panic!("{other:?}"),
    };
    assert!(why.starts_with("changes.remind-before: "), "{why}");
}
