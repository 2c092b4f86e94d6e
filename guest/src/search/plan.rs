//! Which index drives a search: chosen from its sort and the most selective
//! filter an index of that order serves, as one or more ranges of entries
//! whose positions share one shape, so they merge into the sort's order.
//!
//! | sort | index (first that applies) | filters it decides |
//! | --- | --- | --- |
//! | created-at | `assigned` (assignee is an actor), `case`, `by-run`, `by-kind` (kinds, each with every state asked), `by-state` (the states asked, or all six) | that one, states with kinds, and the created range |
//! | due-at | `by-due` | the due range and `overdue-at` as bounds; the rest row by row |
//! | queue-order, priority | `queue-role` (a role, with states all queued), else `by-priority` | the role and queued states; `priority-at-least` as a bound; the rest row by row |
//!
//! Everything a driving index does not decide is checked on the rows it
//! names, within the scan budget. This module decides and never reads.

#[allow(unused_imports)]
use crate::prelude::*;

use crate::keys::{self, Elem, Key};
use crate::model::TaskState;
use crate::schema;

use super::model::{AssigneeFilter, SortKey, TaskFilter, TaskSort, reversed};

/// The shape of a position in a plan's ranges.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shape {
    /// `(created-at, id)`.
    Created,
    /// `(n, created-at, id)`: a due time or a rank first.
    Ranked,
}

impl Shape {
    /// Whether `pos` decodes as a position of this shape.
    pub fn fits(self, pos: &[u8]) -> bool {
        matches!(
            (self, keys::decode(pos).as_deref()),
            (Shape::Created, Ok([Elem::Int(_), Elem::Str(_)]))
                | (
                    Shape::Ranked,
                    Ok([Elem::Int(_), Elem::Int(_), Elem::Str(_)])
                )
        )
    }
}

/// How a search walks.
#[derive(Clone, Debug)]
pub struct Plan {
    /// The index's name, as the answer reports it.
    pub index: &'static str,
    /// Its ranges; positions follow each prefix.
    pub prefixes: Vec<Key>,
    /// Positions from this one on (inclusive)…
    pub lo: Option<Vec<u8>>,
    /// …and before this one (exclusive).
    pub hi: Option<Vec<u8>>,
    pub reverse: bool,
    pub shape: Shape,
    /// The ranges decide the whole filter: every entry matches, and a count
    /// needs no row.
    pub decides_all: bool,
}

fn states_or_all(f: &TaskFilter) -> Vec<TaskState> {
    if f.states.is_empty() {
        crate::model::ALL_STATES.to_vec()
    } else {
        f.states.clone()
    }
}

/// The plan for a checked filter and a sort.
pub fn plan(f: &TaskFilter, sort: TaskSort) -> Plan {
    let reverse = reversed(sort);
    match sort.key {
        SortKey::CreatedAt => Plan {
            reverse,
            ..created(f)
        },
        SortKey::DueAt => {
            let overdue_end = f.overdue_at.map(|x| x.saturating_add(1));
            let hi = match (f.due_before, overdue_end) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            Plan {
                index: "by-due",
                prefixes: vec![schema::by_due()],
                lo: f.due_after.map(|t| Key::new().int(t).into_bytes()),
                hi: hi.map(|t| Key::new().int(t).into_bytes()),
                reverse,
                shape: Shape::Ranked,
                decides_all: false,
            }
        }
        SortKey::QueueOrder | SortKey::Priority
            if f.role.is_some()
                && !f.states.is_empty()
                && f.states.iter().all(|s| s.is_queued()) =>
        {
            // What the queue offers a role is its own index, in this order.
            let mut rest = f.clone();
            rest.role = None;
            if f.states.len() == 2 {
                rest.states = Vec::new();
            }
            Plan {
                index: "queue-role",
                prefixes: vec![schema::queue_role(f.role.as_deref().unwrap_or_default())],
                lo: None,
                hi: f
                    .priority_at_least
                    .map(|p| Key::new().int(p.rank() + 1).into_bytes()),
                reverse,
                shape: Shape::Ranked,
                decides_all: TaskFilter {
                    priority_at_least: None,
                    ..rest
                } == TaskFilter::default(),
            }
        }
        SortKey::QueueOrder | SortKey::Priority => Plan {
            index: "by-priority",
            prefixes: vec![schema::by_priority()],
            lo: None,
            hi: f
                .priority_at_least
                .map(|p| Key::new().int(p.rank() + 1).into_bytes()),
            reverse,
            shape: Shape::Ranked,
            decides_all: *f
                == TaskFilter {
                    priority_at_least: f.priority_at_least,
                    ..TaskFilter::default()
                },
        },
    }
}

/// The plan in creation order (ascending) over the most selective index
/// the filter names: what a created-at sort and every count walk.
pub fn created(f: &TaskFilter) -> Plan {
    let mut rest = f.clone();
    rest.created_after = None;
    rest.created_before = None;
    let (index, prefixes) = if let Some(AssigneeFilter::Actor(a)) = &f.assignee {
        rest.assignee = None;
        ("assigned", vec![schema::assigned(a)])
    } else if let Some(c) = &f.case {
        rest.case = None;
        ("case", vec![schema::case(c)])
    } else if let Some(r) = &f.run {
        rest.run = None;
        ("by-run", vec![schema::by_run(r)])
    } else if !f.kinds.is_empty() {
        rest.kinds = Vec::new();
        rest.states = Vec::new();
        let states = states_or_all(f);
        let prefixes = f
            .kinds
            .iter()
            .flat_map(|k| states.iter().map(move |s| schema::by_kind(k, s.as_str())))
            .collect();
        ("by-kind", prefixes)
    } else {
        rest.states = Vec::new();
        let prefixes = states_or_all(f)
            .iter()
            .map(|s| schema::by_state(s.as_str()))
            .collect();
        ("by-state", prefixes)
    };
    Plan {
        index,
        prefixes,
        lo: f.created_after.map(|t| Key::new().int(t).into_bytes()),
        hi: f.created_before.map(|t| Key::new().int(t).into_bytes()),
        reverse: false,
        shape: Shape::Created,
        decides_all: rest == TaskFilter::default(),
    }
}
