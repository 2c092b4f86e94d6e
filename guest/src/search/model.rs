//! What a search, a count and a saved view are, as plain values: the
//! filter, its sort, who asks, and the answers. What a filter matches and
//! what a viewer may see are decided here, on one task at a time, so the
//! index walk and a brute-force evaluation agree by construction. This
//! module never reads storage.

#[allow(unused_imports)]
use crate::prelude::*;

use serde::{Deserialize, Serialize};

use crate::model::{Priority, Task, TaskState, Timestamp};

/// Who holds a task (WIT `assignee-filter`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum AssigneeFilter {
    Nobody,
    Actor(String),
}

/// What a task must be to match (WIT `task-filter`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskFilter {
    pub states: Vec<TaskState>,
    pub kinds: Vec<String>,
    pub role: Option<String>,
    pub assignee: Option<AssigneeFilter>,
    pub case: Option<String>,
    pub run: Option<String>,
    pub priority_at_least: Option<Priority>,
    pub due_before: Option<Timestamp>,
    pub due_after: Option<Timestamp>,
    pub created_before: Option<Timestamp>,
    pub created_after: Option<Timestamp>,
    pub overdue_at: Option<Timestamp>,
}

/// The orders a search pages in (WIT `sort-key`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum SortKey {
    #[default]
    QueueOrder,
    DueAt,
    CreatedAt,
    Priority,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskSort {
    pub key: SortKey,
    pub descending: bool,
}

/// A reviewer asking (WIT `viewer`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Viewer {
    pub actor: String,
    pub roles: Vec<String>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SearchQuery {
    pub filter: TaskFilter,
    pub sort: TaskSort,
    pub limit: u32,
    pub after: Option<String>,
    pub viewer: Option<Viewer>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SearchPage {
    pub tasks: Vec<Task>,
    pub next: Option<String>,
    pub budget_spent: bool,
    pub index: String,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CountAnswer {
    pub count: u64,
    pub exact: bool,
    pub next: Option<String>,
    pub index: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IndexProgress {
    pub built: bool,
    pub indexed: u32,
}

/// A tenant's named, shared search (WIT `saved-view`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SavedView {
    pub name: String,
    pub filter: TaskFilter,
    pub sort: TaskSort,
    pub revision: u64,
    pub by: Option<String>,
    pub at: Timestamp,
}

impl TaskFilter {
    /// Whether `t` matches every condition given.
    pub fn matches(&self, t: &Task) -> bool {
        (self.states.is_empty() || self.states.contains(&t.state))
            && (self.kinds.is_empty() || self.kinds.contains(&t.kind))
            && self
                .role
                .as_ref()
                .is_none_or(|r| t.candidate_roles.contains(r))
            && match &self.assignee {
                None => true,
                Some(AssigneeFilter::Nobody) => t.assignee.is_none(),
                Some(AssigneeFilter::Actor(a)) => t.assignee.as_ref() == Some(a),
            }
            && self
                .case
                .as_ref()
                .is_none_or(|c| t.case.as_ref() == Some(c))
            && self.run.as_ref().is_none_or(|r| &t.run == r)
            && self
                .priority_at_least
                .is_none_or(|p| t.priority.rank() <= p.rank())
            && self
                .due_before
                .is_none_or(|x| t.due_at.is_some_and(|d| d < x))
            && self
                .due_after
                .is_none_or(|x| t.due_at.is_some_and(|d| d >= x))
            && self.created_before.is_none_or(|x| t.created_at < x)
            && self.created_after.is_none_or(|x| t.created_at >= x)
            && self
                .overdue_at
                .is_none_or(|x| t.state.is_pending() && t.due_at.is_some_and(|d| d <= x))
    }

    /// Whether only states are given: the counters answer it.
    pub fn states_only(&self) -> bool {
        self.kinds.is_empty()
            && self.role.is_none()
            && self.assignee.is_none()
            && self.case.is_none()
            && self.run.is_none()
            && self.priority_at_least.is_none()
            && self.due_before.is_none()
            && self.due_after.is_none()
            && self.created_before.is_none()
            && self.created_after.is_none()
            && self.overdue_at.is_none()
    }
}

impl Viewer {
    /// What a reviewer may see: a task it holds, or one the queue would
    /// offer it (queued, offered to one of its roles or to anyone, and not
    /// excluding it).
    pub fn sees(&self, t: &Task) -> bool {
        let holds = t.state == TaskState::Claimed && t.assignee.as_ref() == Some(&self.actor);
        let may_take = t.state.is_queued()
            && !t.excluded_actors.contains(&self.actor)
            && (t.candidate_roles.is_empty()
                || t.candidate_roles.iter().any(|r| self.roles.contains(r)));
        holds || may_take
    }
}

impl SortKey {
    pub fn name(self) -> &'static str {
        match self {
            SortKey::QueueOrder => "queue-order",
            SortKey::DueAt => "due-at",
            SortKey::CreatedAt => "created-at",
            SortKey::Priority => "priority",
        }
    }
}

/// The order `sort` lists tasks in, as a total order: what the index walk
/// produces, and what a brute-force evaluation sorts by.
pub fn order_key(sort: TaskSort, t: &Task) -> (i64, i64, String) {
    match sort.key {
        SortKey::CreatedAt => (0, t.created_at, t.id.clone()),
        SortKey::DueAt => (
            t.due_at.unwrap_or(crate::schema::NEVER_DUE),
            t.created_at,
            t.id.clone(),
        ),
        SortKey::QueueOrder | SortKey::Priority => (t.priority.rank(), t.created_at, t.id.clone()),
    }
}

/// Whether `sort` walks its order key backwards.
pub fn reversed(sort: TaskSort) -> bool {
    sort.descending != (sort.key == SortKey::Priority)
}
