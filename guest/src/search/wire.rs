//! The conversions between the search values and their WIT types, written
//! once for the component (wit-bindgen) and the host (wasmtime's
//! `bindgen!`), which each generate their own copy of the `search`
//! interface.

/// Writes `From` conversions, both ways, between `$crate::search` and the
/// generated `search` interface module `$api` names in the calling scope
/// (with the `types` conversions of [`wit_conversions`](crate::wit_conversions)
/// already in place).
#[macro_export]
macro_rules! search_conversions {
    ($api:ident) => {
        impl From<$api::AssigneeFilter> for $crate::search::AssigneeFilter {
            fn from(w: $api::AssigneeFilter) -> Self {
                match w {
                    $api::AssigneeFilter::Nobody => $crate::search::AssigneeFilter::Nobody,
                    $api::AssigneeFilter::Actor(a) => $crate::search::AssigneeFilter::Actor(a),
                }
            }
        }
        impl From<$crate::search::AssigneeFilter> for $api::AssigneeFilter {
            fn from(d: $crate::search::AssigneeFilter) -> Self {
                match d {
                    $crate::search::AssigneeFilter::Nobody => $api::AssigneeFilter::Nobody,
                    $crate::search::AssigneeFilter::Actor(a) => $api::AssigneeFilter::Actor(a),
                }
            }
        }
        impl From<$api::TaskFilter> for $crate::search::TaskFilter {
            fn from(w: $api::TaskFilter) -> Self {
                $crate::search::TaskFilter {
                    states: w.states.into_iter().map(Into::into).collect(),
                    kinds: w.kinds,
                    role: w.role,
                    assignee: w.assignee.map(Into::into),
                    case: w.case,
                    run: w.run,
                    priority_at_least: w.priority_at_least.map(Into::into),
                    due_before: w.due_before,
                    due_after: w.due_after,
                    created_before: w.created_before,
                    created_after: w.created_after,
                    overdue_at: w.overdue_at,
                }
            }
        }
        impl From<$crate::search::TaskFilter> for $api::TaskFilter {
            fn from(d: $crate::search::TaskFilter) -> Self {
                $api::TaskFilter {
                    states: d.states.into_iter().map(Into::into).collect(),
                    kinds: d.kinds,
                    role: d.role,
                    assignee: d.assignee.map(Into::into),
                    case: d.case,
                    run: d.run,
                    priority_at_least: d.priority_at_least.map(Into::into),
                    due_before: d.due_before,
                    due_after: d.due_after,
                    created_before: d.created_before,
                    created_after: d.created_after,
                    overdue_at: d.overdue_at,
                }
            }
        }
        impl From<$api::TaskSort> for $crate::search::TaskSort {
            fn from(w: $api::TaskSort) -> Self {
                $crate::search::TaskSort {
                    key: match w.key {
                        $api::SortKey::QueueOrder => $crate::search::SortKey::QueueOrder,
                        $api::SortKey::DueAt => $crate::search::SortKey::DueAt,
                        $api::SortKey::CreatedAt => $crate::search::SortKey::CreatedAt,
                        $api::SortKey::Priority => $crate::search::SortKey::Priority,
                    },
                    descending: w.descending,
                }
            }
        }
        impl From<$crate::search::TaskSort> for $api::TaskSort {
            fn from(d: $crate::search::TaskSort) -> Self {
                $api::TaskSort {
                    key: match d.key {
                        $crate::search::SortKey::QueueOrder => $api::SortKey::QueueOrder,
                        $crate::search::SortKey::DueAt => $api::SortKey::DueAt,
                        $crate::search::SortKey::CreatedAt => $api::SortKey::CreatedAt,
                        $crate::search::SortKey::Priority => $api::SortKey::Priority,
                    },
                    descending: d.descending,
                }
            }
        }
        impl From<$api::Viewer> for $crate::search::Viewer {
            fn from(w: $api::Viewer) -> Self {
                $crate::search::Viewer {
                    actor: w.actor,
                    roles: w.roles,
                }
            }
        }
        impl From<$crate::search::Viewer> for $api::Viewer {
            fn from(d: $crate::search::Viewer) -> Self {
                $api::Viewer {
                    actor: d.actor,
                    roles: d.roles,
                }
            }
        }
        impl From<$api::SearchQuery> for $crate::search::SearchQuery {
            fn from(w: $api::SearchQuery) -> Self {
                $crate::search::SearchQuery {
                    filter: w.filter.into(),
                    sort: w.sort.into(),
                    limit: w.limit,
                    after: w.after,
                    viewer: w.viewer.map(Into::into),
                }
            }
        }
        impl From<$crate::search::SearchQuery> for $api::SearchQuery {
            fn from(d: $crate::search::SearchQuery) -> Self {
                $api::SearchQuery {
                    filter: d.filter.into(),
                    sort: d.sort.into(),
                    limit: d.limit,
                    after: d.after,
                    viewer: d.viewer.map(Into::into),
                }
            }
        }
        impl From<$api::SearchPage> for $crate::search::SearchPage {
            fn from(w: $api::SearchPage) -> Self {
                $crate::search::SearchPage {
                    tasks: w.tasks.into_iter().map(Into::into).collect(),
                    next: w.next,
                    budget_spent: w.budget_spent,
                    index: w.index,
                }
            }
        }
        impl From<$crate::search::SearchPage> for $api::SearchPage {
            fn from(d: $crate::search::SearchPage) -> Self {
                $api::SearchPage {
                    tasks: d.tasks.into_iter().map(Into::into).collect(),
                    next: d.next,
                    budget_spent: d.budget_spent,
                    index: d.index,
                }
            }
        }
        impl From<$api::CountAnswer> for $crate::search::CountAnswer {
            fn from(w: $api::CountAnswer) -> Self {
                $crate::search::CountAnswer {
                    count: w.count,
                    exact: w.exact,
                    next: w.next,
                    index: w.index,
                }
            }
        }
        impl From<$crate::search::CountAnswer> for $api::CountAnswer {
            fn from(d: $crate::search::CountAnswer) -> Self {
                $api::CountAnswer {
                    count: d.count,
                    exact: d.exact,
                    next: d.next,
                    index: d.index,
                }
            }
        }
        impl From<$api::IndexProgress> for $crate::search::IndexProgress {
            fn from(w: $api::IndexProgress) -> Self {
                $crate::search::IndexProgress {
                    built: w.built,
                    indexed: w.indexed,
                }
            }
        }
        impl From<$crate::search::IndexProgress> for $api::IndexProgress {
            fn from(d: $crate::search::IndexProgress) -> Self {
                $api::IndexProgress {
                    built: d.built,
                    indexed: d.indexed,
                }
            }
        }
        impl From<$api::SavedView> for $crate::search::SavedView {
            fn from(w: $api::SavedView) -> Self {
                $crate::search::SavedView {
                    name: w.name,
                    filter: w.filter.into(),
                    sort: w.sort.into(),
                    revision: w.revision,
                    by: w.by,
                    at: w.at,
                }
            }
        }
        impl From<$crate::search::SavedView> for $api::SavedView {
            fn from(d: $crate::search::SavedView) -> Self {
                $api::SavedView {
                    name: d.name,
                    filter: d.filter.into(),
                    sort: d.sort.into(),
                    revision: d.revision,
                    by: d.by,
                    at: d.at,
                }
            }
        }
    };
}
