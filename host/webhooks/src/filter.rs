//! Which feed entries a subscription is sent, and which entries must keep
//! their order. A filter is matched at the sender, entry by entry as the
//! feed is read (as Svix, Stripe and GitHub filter by event type before
//! anything is queued), so an entry outside it costs a receiver nothing
//! and moves the subscription's position on at once. Ordering is per
//! task, or per timer (its run and effect): the feed promises no more, and
//! a receiver needs no more to apply a task's changes in order. This
//! module only judges entries; it must never read the store (facts it
//! needs beyond the entry are handed to it).

use leasehold_host::{Change, TaskState};
use serde::{Deserialize, Serialize};

/// Most items in one of a filter's lists.
pub const MAX_FILTER_ITEMS: usize = 64;
/// Most bytes in one item of a filter's lists.
pub const MAX_FILTER_ITEM_BYTES: usize = 256;

/// What a subscription is sent. Empty lists place no condition.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Filter {
    /// Changes of tasks.
    pub tasks: bool,
    /// Changes of timers.
    pub timers: bool,
    /// Only changes made by these verbs (task verbs such as `claim` or
    /// `settle`, timer verbs such as `arm` or `claim-due`).
    pub verbs: Vec<String>,
    /// Only tasks of these kinds (timers have no kind: this list does not
    /// restrict them).
    pub kinds: Vec<String>,
    /// Only tasks and timers of these runs.
    pub runs: Vec<String>,
    /// Of tasks, only the change that settled each (to `completed`,
    /// `expired` or `withdrawn`): what a workflow waiting on a person
    /// needs. Does not restrict timers.
    pub settling_only: bool,
}

impl Default for Filter {
    /// Every change of every task and timer.
    fn default() -> Self {
        Filter {
            tasks: true,
            timers: true,
            verbs: Vec::new(),
            kinds: Vec::new(),
            runs: Vec::new(),
            settling_only: false,
        }
    }
}

/// Why a filter was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FilterError {
    /// Neither tasks nor timers: it would match nothing.
    #[error("a filter takes tasks, timers or both")]
    Empty,
    /// A list is too long, or an item empty or too long.
    #[error("{list} holds at most {MAX_FILTER_ITEMS} items of 1 to {MAX_FILTER_ITEM_BYTES} bytes")]
    List {
        /// `verbs`, `kinds` or `runs`.
        list: &'static str,
    },
}

/// What a task entry's filter may need beyond the entry: its kind and run,
/// which never change over a task's life.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Facts {
    /// The task's kind.
    pub kind: Option<String>,
    /// The task's run.
    pub run: Option<String>,
}

/// The facts an entry carries itself. Timer entries carry their run; task
/// entries of this contract (`leasehold:engine@0.2.0`) carry neither kind
/// nor run, so a filter on them asks [`crate::FeedSource::task_facts`].
/// From 0.3.0 task entries carry both: read them here.
pub fn facts_on_entry(change: &Change) -> Facts {
    match change {
        Change::Task(_) => Facts::default(),
        Change::Timer(t) => Facts {
            kind: None,
            run: Some(t.run.clone()),
        },
    }
}

/// What must keep its order: one task's changes, or one timer's.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Key {
    /// A task, by id.
    Task(String),
    /// A timer, by run and effect.
    Timer(String, String),
}

impl Key {
    /// The key of an entry's change.
    pub fn of(change: &Change) -> Key {
        match change {
            Change::Task(t) => Key::Task(t.id.clone()),
            Change::Timer(t) => Key::Timer(t.run.clone(), t.effect.clone()),
        }
    }
}

fn list_ok(items: &[String]) -> bool {
    items.len() <= MAX_FILTER_ITEMS
        && items
            .iter()
            .all(|i| !i.is_empty() && i.len() <= MAX_FILTER_ITEM_BYTES)
}

impl Filter {
    /// Whether the filter is one a subscription may hold.
    pub fn check(&self) -> Result<(), FilterError> {
        if !self.tasks && !self.timers {
            return Err(FilterError::Empty);
        }
        for (list, items) in [
            ("verbs", &self.verbs),
            ("kinds", &self.kinds),
            ("runs", &self.runs),
        ] {
            if !list_ok(items) {
                return Err(FilterError::List { list });
            }
        }
        Ok(())
    }

    /// Whether matching `change` needs facts it does not carry: a task
    /// entry, under a filter on kinds or runs, without them.
    pub fn needs_facts(&self, change: &Change) -> bool {
        match change {
            Change::Task(_) if self.tasks => {
                let on = facts_on_entry(change);
                (!self.kinds.is_empty() && on.kind.is_none())
                    || (!self.runs.is_empty() && on.run.is_none())
            }
            _ => false,
        }
    }

    /// Whether `change` is sent. `facts` are what was looked up for a task
    /// entry that needs them; a task whose facts are unknown (its row is
    /// gone) matches no filter on kinds or runs.
    pub fn matches(&self, change: &Change, facts: Option<&Facts>) -> bool {
        let on = facts_on_entry(change);
        let kind = on.kind.as_deref().or(facts.and_then(|f| f.kind.as_deref()));
        let run = on.run.as_deref().or(facts.and_then(|f| f.run.as_deref()));
        let listed = |list: &[String], v: Option<&str>| {
            list.is_empty() || v.is_some_and(|v| list.iter().any(|i| i == v))
        };
        match change {
            Change::Task(t) => {
                let e = &t.entry;
                self.tasks
                    && listed(&self.verbs, Some(&e.verb))
                    && listed(&self.kinds, kind)
                    && listed(&self.runs, run)
                    && (!self.settling_only || settles(e.before, e.after))
            }
            Change::Timer(t) => {
                self.timers && listed(&self.verbs, Some(&t.verb)) && listed(&self.runs, run)
            }
        }
    }
}

/// The change that took a task from pending to settled.
fn settles(before: Option<TaskState>, after: TaskState) -> bool {
    !after.is_pending() && before.is_none_or(|b| b.is_pending())
}

#[cfg(test)]
mod tests {
    use super::*;
    use leasehold_host::{HistoryEntry, TaskChange, TimerChange, TimerEvent};

    fn task(id: &str, verb: &str, before: Option<TaskState>, after: TaskState) -> Change {
        Change::Task(TaskChange {
            id: id.into(),
            entry: HistoryEntry {
                seq: 1,
                at: 0,
                verb: verb.into(),
                actor: None,
                before,
                after,
                assignee: None,
                lease_until: None,
                candidate_roles: vec![],
                excluded_actors: vec![],
                revision: 0,
                changes: vec![],
                decision: None,
                note: None,
                job: None,
                step: None,
            },
            run: None,
            kind: None,
        })
    }

    fn timer(run: &str, effect: &str, verb: &str) -> Change {
        Change::Timer(TimerChange {
            run: run.into(),
            effect: effect.into(),
            at: 0,
            verb: verb.into(),
            what: TimerEvent::Armed,
            fire_at: 0,
            lease_until: None,
        })
    }

    use TaskState::*;

    #[test]
    fn tasks_timers_and_verbs_select_entries() {
        let open = task("t", "open", None, Open);
        let claim = task("t", "claim", Some(Open), Claimed);
        let arm = timer("r", "e", "arm");
        let all = Filter::default();
        assert!(all.matches(&open, None) && all.matches(&arm, None));
        let tasks = Filter {
            timers: false,
            ..Filter::default()
        };
        assert!(tasks.matches(&open, None) && !tasks.matches(&arm, None));
        let timers = Filter {
            tasks: false,
            ..Filter::default()
        };
        assert!(!timers.matches(&open, None) && timers.matches(&arm, None));
        let claims = Filter {
            verbs: vec!["claim".into(), "arm".into()],
            ..Filter::default()
        };
        assert!(!claims.matches(&open, None));
        assert!(claims.matches(&claim, None) && claims.matches(&arm, None));
    }

    #[test]
    fn settling_only_takes_the_change_that_settled_each_task() {
        let f = Filter {
            settling_only: true,
            ..Filter::default()
        };
        assert!(f.matches(&task("t", "settle", Some(Claimed), Completed), None));
        assert!(f.matches(&task("t", "expire-overdue", Some(Open), Expired), None));
        assert!(f.matches(&task("t", "withdraw-run", Some(Escalated), Withdrawn), None));
        assert!(!f.matches(&task("t", "claim", Some(Open), Claimed), None));
        assert!(!f.matches(&task("t", "open", None, Open), None));
        // Timers are not restricted by it.
        assert!(f.matches(&timer("r", "e", "arm"), None));
    }

    #[test]
    fn kinds_and_runs_match_on_facts_and_unknown_facts_match_nothing() {
        let f = Filter {
            kinds: vec!["review".into()],
            runs: vec!["run-1".into()],
            ..Filter::default()
        };
        let open = task("t", "open", None, Open);
        assert!(f.needs_facts(&open));
        let facts = |k: &str, r: &str| Facts {
            kind: Some(k.into()),
            run: Some(r.into()),
        };
        assert!(f.matches(&open, Some(&facts("review", "run-1"))));
        assert!(!f.matches(&open, Some(&facts("approve", "run-1"))));
        assert!(!f.matches(&open, Some(&facts("review", "run-2"))));
        assert!(!f.matches(&open, None));
        // Timers carry their run and have no kind.
        assert!(!f.needs_facts(&timer("run-1", "e", "arm")));
        assert!(f.matches(&timer("run-1", "e", "arm"), None));
        assert!(!f.matches(&timer("run-2", "e", "arm"), None));
        // A filter without kinds or runs needs nothing.
        assert!(!Filter::default().needs_facts(&open));
    }

    #[test]
    fn keys_order_a_task_or_a_timer() {
        assert_eq!(
            Key::of(&task("t1", "open", None, Open)),
            Key::Task("t1".into())
        );
        assert_eq!(
            Key::of(&timer("r", "e", "arm")),
            Key::Timer("r".into(), "e".into())
        );
        assert_ne!(
            Key::of(&timer("r", "e", "arm")),
            Key::of(&timer("r", "f", "arm"))
        );
    }

    #[test]
    fn filters_are_checked() {
        assert_eq!(Filter::default().check(), Ok(()));
        let none = Filter {
            tasks: false,
            timers: false,
            ..Filter::default()
        };
        assert_eq!(none.check(), Err(FilterError::Empty));
        let long = Filter {
            verbs: vec!["v".into(); MAX_FILTER_ITEMS + 1],
            ..Filter::default()
        };
        assert_eq!(long.check(), Err(FilterError::List { list: "verbs" }));
        let blank = Filter {
            runs: vec![String::new()],
            ..Filter::default()
        };
        assert_eq!(blank.check(), Err(FilterError::List { list: "runs" }));
    }
}
