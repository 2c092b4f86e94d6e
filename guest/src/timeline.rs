//! A task's timeline: its reminders before the due time and its escalation
//! chain after it, as one ordered list of steps, and the input rules that
//! keep that list well formed. Plain values only: this module must never
//! read or write storage. `store` indexes a pending task at its next step
//! ([`next_step`]); `tasks` fires the steps and re-arms them on a change.

#[allow(unused_imports)]
use crate::prelude::*;

use crate::model::{EscalationStep, StepAction, StoreError, Task, TaskStep, Timestamp};
use crate::validate::{self, MAX_TIMESTAMP, invalid};

/// The most reminders, and the most chain steps, one task carries.
pub const MAX_STEPS: usize = 8;

/// A task's reminders and chain under the input rules, against its due
/// and creation times: answers the reminders largest offset first (the
/// earliest reminder first), duplicates dropped, and the chain with each
/// escalation's roles deduplicated. `prefix` is put before each field's
/// name (`changes.` for `update`).
pub fn checked(
    prefix: &str,
    due_at: Option<Timestamp>,
    created_at: Timestamp,
    remind_before: &[u64],
    escalation: &[EscalationStep],
) -> Result<(Vec<u64>, Vec<EscalationStep>), StoreError> {
    if remind_before.len() > MAX_STEPS {
        return Err(invalid(format!(
            "{prefix}remind-before has {} offsets, more than {MAX_STEPS}",
            remind_before.len()
        )));
    }
    if escalation.len() > MAX_STEPS {
        return Err(invalid(format!(
            "{prefix}escalation has {} steps, more than {MAX_STEPS}",
            escalation.len()
        )));
    }
    let due = match due_at {
        Some(due) => due,
        None if remind_before.is_empty() && escalation.is_empty() => {
            return Ok((Vec::new(), Vec::new()));
        }
        None => {
            let field = if remind_before.is_empty() {
                "escalation"
            } else {
                "remind-before"
            };
            return Err(invalid(format!(
                "{prefix}{field}: reminders and an escalation chain need a due-at, and the task has none"
            )));
        }
    };
    let mut reminders: Vec<u64> = Vec::with_capacity(remind_before.len());
    for (i, &offset) in remind_before.iter().enumerate() {
        if offset == 0 {
            return Err(invalid(format!(
                "{prefix}remind-before[{i}] is 0: a reminder comes before the due time"
            )));
        }
        // The reminder must not fall before the task existed: an offset
        // larger than the time from creation to due could never remind.
        let room = u64::try_from(due.saturating_sub(created_at)).unwrap_or(0);
        if offset > room {
            return Err(invalid(format!(
                "{prefix}remind-before[{i}] is {offset} ms, more than the {room} ms from the task's creation to its due time"
            )));
        }
        if !reminders.contains(&offset) {
            reminders.push(offset);
        }
    }
    reminders.sort_unstable_by(|a, b| b.cmp(a));
    let mut chain = Vec::with_capacity(escalation.len());
    let mut last: Option<u64> = None;
    for (i, step) in escalation.iter().enumerate() {
        let after = step.after_due_ms;
        let fits = i64::try_from(after)
            .ok()
            .and_then(|a| due.checked_add(a))
            .is_some_and(|at| at <= MAX_TIMESTAMP);
        if !fits {
            return Err(invalid(format!(
                "{prefix}escalation[{i}].after-due-ms is {after}: the step would fall after year 9999"
            )));
        }
        if last.is_some_and(|l| after <= l) {
            return Err(invalid(format!(
                "{prefix}escalation[{i}].after-due-ms is {after}: each step must come after the one before it"
            )));
        }
        last = Some(after);
        let action = match &step.action {
            StepAction::Escalate(roles) => {
                if roles.is_empty() {
                    return Err(invalid(format!(
                        "{prefix}escalation[{i}].action: escalate names no role"
                    )));
                }
                if roles.len() > 64 {
                    return Err(invalid(format!(
                        "{prefix}escalation[{i}].action: escalate names {} roles, more than 64",
                        roles.len()
                    )));
                }
                StepAction::Escalate(validate::names(
                    &format!("{prefix}escalation[{i}].action.escalate"),
                    roles,
                )?)
            }
            StepAction::Expire => {
                if i + 1 != escalation.len() {
                    return Err(invalid(format!(
                        "{prefix}escalation[{i}].action: expire settles the task, so it can only be the last step"
                    )));
                }
                StepAction::Expire
            }
        };
        chain.push(EscalationStep {
            after_due_ms: after,
            action,
        });
    }
    Ok((reminders, chain))
}

/// [`checked`] of a task as it stands, written back into it: what `open`
/// and `update` hold a task's timeline to before they store it.
pub fn tidy(prefix: &str, t: &mut Task) -> Result<(), StoreError> {
    let (remind_before, escalation) = checked(
        prefix,
        t.due_at,
        t.created_at,
        &t.remind_before,
        &t.escalation,
    )?;
    t.remind_before = remind_before;
    t.escalation = escalation;
    Ok(())
}

/// Step `n` of the task's timeline (its reminders, earliest first, then
/// its chain) with the instant it fires at; none past the last, or when
/// the task has no due time.
pub fn step(t: &Task, n: usize) -> Option<(Timestamp, TaskStep)> {
    let due = t.due_at?;
    if let Some(&offset) = t.remind_before.get(n) {
        let at = due.saturating_sub(i64::try_from(offset).unwrap_or(i64::MAX));
        return Some((at, TaskStep::Reminder(offset)));
    }
    let s = t.escalation.get(n - t.remind_before.len())?;
    let at = due.saturating_add(i64::try_from(s.after_due_ms).unwrap_or(i64::MAX));
    Some((at, TaskStep::Escalation(s.clone())))
}

/// The next step a pending task waits for, with its instant: what the
/// `wake` index holds it at. None for a settled task or one whose steps
/// have all fired.
pub fn next_step(t: &Task) -> Option<(Timestamp, TaskStep)> {
    if !t.state.is_pending() {
        return None;
    }
    step(t, usize::try_from(t.steps_done).ok()?)
}

/// How many steps of `now`'s timeline count as fired once `was` becomes
/// `now` by a change of its due time, reminders or chain: the steps from
/// the first that fall at or before the last step `was` fired, while each
/// is a reminder (a reminder whose moment has passed is worth nothing
/// late) or a chain step `was` already fired. A chain step that never
/// fired is never skipped: it and all after it fire as their instants
/// come, at the next sweep for one already past.
pub fn rearmed(was: &Task, now: &Task) -> u32 {
    if was.due_at == now.due_at
        && was.remind_before == now.remind_before
        && was.escalation == now.escalation
    {
        return was.steps_done;
    }
    let fired: Vec<(Timestamp, TaskStep)> = (0..usize::try_from(was.steps_done).unwrap_or(0))
        .filter_map(|n| step(was, n))
        .collect();
    let Some(&(fired_through, _)) = fired.last() else {
        return 0;
    };
    let total = now.remind_before.len() + now.escalation.len();
    let done = (0..total)
        .map_while(|n| step(now, n))
        .take_while(|(at, s)| {
            *at <= fired_through
                && (matches!(s, TaskStep::Reminder(_)) || fired.iter().any(|(_, f)| f == s))
        })
        .count();
    u32::try_from(done).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{OnExpiry, Priority, TaskState};

    fn task(due: Option<Timestamp>, remind: &[u64], chain: &[(u64, StepAction)]) -> Task {
        Task {
            id: "t".into(),
            run: "r".into(),
            case: None,
            kind: "k".into(),
            justification: "{}".into(),
            candidate_roles: vec!["clerk".into()],
            assignee: None,
            lease_until: None,
            priority: Priority::Normal,
            state: TaskState::Open,
            on_expiry: OnExpiry::Deny,
            escalate_to: vec![],
            excluded_actors: vec![],
            created_at: 0,
            due_at: due,
            revision: 0,
            decision: None,
            outcomes: vec![],
            remind_before: remind.to_vec(),
            escalation: chain
                .iter()
                .map(|(a, action)| EscalationStep {
                    after_due_ms: *a,
                    action: action.clone(),
                })
                .collect(),
            steps_done: 0,
        }
    }

    fn esc(role: &str) -> StepAction {
        StepAction::Escalate(vec![role.into()])
    }

    #[test]
    fn reminders_come_earliest_first_then_the_chain_in_order() {
        let t = task(
            Some(10_000),
            &[1_000, 5_000, 1_000],
            &[
                (0, esc("leads")),
                (4_000, esc("directors")),
                (9_000, StepAction::Expire),
            ],
        );
        let (r, c) =
            checked("", t.due_at, 0, &t.remind_before, &t.escalation).expect("the call succeeds");
        assert_eq!(r, [5_000, 1_000]);
        let t = Task {
            remind_before: r,
            escalation: c,
            ..t
        };
        let at: Vec<_> = (0..6).map(|n| step(&t, n).map(|(at, _)| at)).collect();
        assert_eq!(
            at,
            [
                Some(5_000),
                Some(9_000),
                Some(10_000),
                Some(14_000),
                Some(19_000),
                None
            ]
        );
        assert_eq!(
            step(&t, 0).expect("the call succeeds").1,
            TaskStep::Reminder(5_000)
        );
    }

    #[test]
    fn each_bad_input_is_refused_naming_its_field() {
        type Case = (
            Option<Timestamp>,
            Vec<u64>,
            Vec<(u64, StepAction)>,
            &'static str,
        );
        let cases: Vec<Case> = vec![
            (None, vec![1], vec![], "remind-before: reminders"),
            (
                None,
                vec![],
                vec![(0, StepAction::Expire)],
                "escalation: reminders",
            ),
            (Some(100), vec![0], vec![], "remind-before[0] is 0"),
            (
                Some(100),
                vec![50, 101],
                vec![],
                "remind-before[1] is 101 ms, more than the 100 ms",
            ),
            (
                Some(100),
                vec![],
                vec![(5, esc("a")), (5, esc("b"))],
                "escalation[1].after-due-ms is 5",
            ),
            (
                Some(100),
                vec![],
                vec![(0, StepAction::Expire), (5, esc("b"))],
                "escalation[0].action: expire",
            ),
            (
                Some(100),
                vec![],
                vec![(0, StepAction::Escalate(vec![]))],
                "escalation[0].action: escalate names no role",
            ),
            (
                Some(100),
                vec![],
                vec![(0, StepAction::Escalate(vec!["".into()]))],
                "escalation[0].action.escalate[0]",
            ),
            (
                Some(100),
                vec![],
                vec![(u64::MAX, StepAction::Expire)],
                "escalation[0].after-due-ms",
            ),
            (Some(100), vec![1; 9], vec![], "more than 8"),
        ];
        for (due, remind, chain, want) in cases {
            let t = task(due, &remind, &chain);
            let err =
                checked("changes.", due, 0, &t.remind_before, &t.escalation).expect_err("refused");
            let StoreError::Invalid(why) = err else {
                panic!("{err:?}")
            };
            assert!(why.starts_with("changes."), "{why}");
            assert!(why.contains(want), "{why} lacks {want}");
        }
    }

    #[test]
    fn a_settled_task_or_one_whose_steps_fired_waits_for_nothing() {
        let mut t = task(Some(10_000), &[1_000], &[(0, esc("leads"))]);
        assert_eq!(next_step(&t).map(|s| s.0), Some(9_000));
        t.steps_done = 2;
        assert_eq!(next_step(&t), None);
        t.steps_done = 1;
        t.state = TaskState::Completed;
        assert_eq!(next_step(&t), None);
    }

    #[test]
    fn a_change_rearms_what_falls_after_the_last_step_fired() {
        let mut was = task(
            Some(10_000),
            &[1_000],
            &[(0, esc("leads")), (4_000, esc("directors"))],
        );
        was.steps_done = 2; // the reminder at 9,000 and leads at 10,000 fired
        // Unchanged timeline: as it was.
        assert_eq!(rearmed(&was, &was.clone()), 2);
        // The due time moved a day later: everything is ahead again.
        let later = Task {
            due_at: Some(86_410_000),
            ..was.clone()
        };
        assert_eq!(rearmed(&was, &later), 0);
        // Moved earlier: the reminder and `leads`, at or before 10,000,
        // count as fired; `directors` never fired, so it fires next.
        let earlier = Task {
            due_at: Some(5_000),
            ..was.clone()
        };
        assert_eq!(rearmed(&was, &earlier), 2);
        let much_earlier = Task {
            due_at: Some(1_000),
            remind_before: vec![500],
            ..was.clone()
        };
        assert_eq!(rearmed(&was, &much_earlier), 2);
        // A reminder added before what fired is passed over, not sent late.
        let reminded = Task {
            remind_before: vec![3_000, 1_000],
            ..was.clone()
        };
        assert_eq!(rearmed(&was, &reminded), 3);
        // A chain step added after what fired fires; nothing refires.
        let longer = Task {
            escalation: vec![
                EscalationStep {
                    after_due_ms: 0,
                    action: esc("leads"),
                },
                EscalationStep {
                    after_due_ms: 1_000,
                    action: esc("heads"),
                },
                EscalationStep {
                    after_due_ms: 4_000,
                    action: esc("directors"),
                },
            ],
            ..was.clone()
        };
        assert_eq!(rearmed(&was, &longer), 2);
        // Nothing fired: nothing counts.
        let fresh = Task {
            steps_done: 0,
            ..was.clone()
        };
        assert_eq!(rearmed(&fresh, &later), 0);
    }
}
