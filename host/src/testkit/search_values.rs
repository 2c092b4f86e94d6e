//! Searches, counts and saved views as the scenarios spell them (the WIT's
//! `task-filter`, `task-sort`, `viewer`, `search-query`, `search-page`,
//! `count-answer`, `index-progress` and `saved-view` in JSON, kebab-case,
//! an `assignee-filter` as `{"nobody": null}` or `{"actor": A}`, as every
//! variant is spelt), to and from the host's types. A filter names only
//! what it sets; the rest is empty or none. It converts only.

use serde_json::{Value, json};

use leasehold_guest::model::{Priority, Task, TaskState};
use leasehold_guest::search::{
    AssigneeFilter, CountAnswer, IndexProgress, SavedView, SearchPage, SearchQuery, SortKey,
    TaskFilter, TaskSort, Viewer,
};

fn field<'v>(v: &'v Value, name: &str) -> Option<&'v Value> {
    v.get(name).filter(|x| !x.is_null())
}

fn text(v: &Value, name: &str) -> Option<String> {
    field(v, name).map(|x| {
        x.as_str()
            .unwrap_or_else(|| panic!("{name} is a string"))
            .to_owned()
    })
}

fn instant(v: &Value, name: &str) -> Option<i64> {
    field(v, name).map(|x| {
        x.as_i64()
            .unwrap_or_else(|| panic!("{name} is a timestamp"))
    })
}

fn words(v: &Value, name: &str) -> Vec<String> {
    field(v, name).map_or_else(Vec::new, |x| {
        x.as_array()
            .unwrap_or_else(|| panic!("{name} is a list"))
            .iter()
            .map(|s| s.as_str().expect("a list of strings").to_owned())
            .collect()
    })
}

fn state(name: &str) -> TaskState {
    serde_json::from_value(json!(name)).unwrap_or_else(|_| panic!("no task-state {name}"))
}

fn priority(name: &str) -> Priority {
    serde_json::from_value(json!(name)).unwrap_or_else(|_| panic!("no priority {name}"))
}

/// A `task-filter` argument.
pub(super) fn filter_arg(v: &Value) -> TaskFilter {
    let assignee = field(v, "assignee").map(|a| {
        match a
            .as_object()
            .map(|m| (m.len(), m.get("nobody"), m.get("actor")))
        {
            Some((1, Some(Value::Null), _)) => AssigneeFilter::Nobody,
            Some((1, _, Some(Value::String(actor)))) => AssigneeFilter::Actor(actor.clone()),
            _ => panic!("an assignee filter is {{\"nobody\": null}} or {{\"actor\": A}}, not {a}"),
        }
    });
    TaskFilter {
        states: words(v, "states").iter().map(|s| state(s)).collect(),
        kinds: words(v, "kinds"),
        role: text(v, "role"),
        assignee,
        case: text(v, "case"),
        run: text(v, "run"),
        priority_at_least: text(v, "priority-at-least").map(|p| priority(&p)),
        due_before: instant(v, "due-before"),
        due_after: instant(v, "due-after"),
        created_before: instant(v, "created-before"),
        created_after: instant(v, "created-after"),
        overdue_at: instant(v, "overdue-at"),
    }
}

pub(super) fn filter_value(f: &TaskFilter) -> Value {
    json!({
        "states": f.states.iter().map(|s| s.as_str()).collect::<Vec<_>>(),
        "kinds": f.kinds,
        "role": f.role,
        "assignee": f.assignee.as_ref().map(|a| match a {
            AssigneeFilter::Nobody => json!({"nobody": null}),
            AssigneeFilter::Actor(actor) => json!({"actor": actor}),
        }),
        "case": f.case,
        "run": f.run,
        "priority-at-least": f.priority_at_least.map(Priority::name),
        "due-before": f.due_before,
        "due-after": f.due_after,
        "created-before": f.created_before,
        "created-after": f.created_after,
        "overdue-at": f.overdue_at,
    })
}

/// A `task-sort` argument: `key` defaults to `queue-order`, `descending`
/// to false.
fn sort_arg(v: Option<&Value>) -> TaskSort {
    let Some(v) = v.filter(|v| !v.is_null()) else {
        return TaskSort::default();
    };
    let key = match text(v, "key").as_deref() {
        None | Some("queue-order") => SortKey::QueueOrder,
        Some("due-at") => SortKey::DueAt,
        Some("created-at") => SortKey::CreatedAt,
        Some("priority") => SortKey::Priority,
        Some(other) => panic!("no sort-key {other}"),
    };
    let descending = field(v, "descending").is_some_and(|d| d.as_bool().expect("a bool"));
    TaskSort { key, descending }
}

fn sort_value(s: TaskSort) -> Value {
    json!({"key": s.key.name(), "descending": s.descending})
}

/// A `viewer` argument, if given.
pub(super) fn viewer_arg(v: Option<&Value>) -> Option<Viewer> {
    v.filter(|v| !v.is_null()).map(|v| Viewer {
        actor: text(v, "actor").expect("a viewer's actor"),
        roles: words(v, "roles"),
    })
}

/// A `search-query` argument: the filter defaults to empty, the sort as
/// [`sort_arg`], `limit` is required.
pub(super) fn query_arg(v: &Value) -> SearchQuery {
    SearchQuery {
        filter: field(v, "filter").map(filter_arg).unwrap_or_default(),
        sort: sort_arg(v.get("sort")),
        limit: field(v, "limit")
            .and_then(Value::as_u64)
            .and_then(|n| u32::try_from(n).ok())
            .expect("a query's limit is a u32"),
        after: text(v, "after"),
        viewer: viewer_arg(v.get("viewer")),
    }
}

/// A `saved-view` argument: `revision` and `at` default to 0.
pub(super) fn view_arg(v: &Value) -> SavedView {
    SavedView {
        name: text(v, "name").expect("a view's name"),
        filter: field(v, "filter").map(filter_arg).unwrap_or_default(),
        sort: sort_arg(v.get("sort")),
        revision: field(v, "revision").map_or(0, |r| r.as_u64().expect("a revision")),
        by: text(v, "by"),
        at: instant(v, "at").unwrap_or(0),
    }
}

pub(super) fn view_value(v: &SavedView) -> Value {
    json!({
        "name": v.name,
        "filter": filter_value(&v.filter),
        "sort": sort_value(v.sort),
        "revision": v.revision,
        "by": v.by,
        "at": v.at,
    })
}

/// A `search-page` answer, each task as `task` spells it (the runner's
/// one spelling of a task).
pub(super) fn page_value(p: &SearchPage, task: impl Fn(&Task) -> Value) -> Value {
    json!({
        "tasks": p.tasks.iter().map(task).collect::<Vec<_>>(),
        "next": p.next,
        "budget-spent": p.budget_spent,
        "index": p.index,
    })
}

pub(super) fn count_value(c: &CountAnswer) -> Value {
    json!({"count": c.count, "exact": c.exact, "next": c.next, "index": c.index})
}

pub(super) fn progress_value(p: IndexProgress) -> Value {
    json!({"built": p.built, "indexed": p.indexed})
}
