//! Finding tasks from the command line: `search` (a page of the tasks that
//! match, in an order), `count` (how many match, following the engine's
//! cursor until the count is whole) and `build-search-index` (building an
//! old keyspace's index until done), with the filter, sort and viewer
//! flags `view put-view` shares. Which index answers, and what a filter
//! matches, is the engine's; this module turns flags into a query, asks,
//! and lays the answer out.

use std::fmt::Write as _;
use std::io::Write;

use clap::{Args, ValueEnum};
use leasehold_host::{
    AssigneeFilter, Error, Priority, SearchQuery, SortKey, StoreError, Task, TaskFilter, TaskSort,
    TaskState, Timestamp, Viewer,
};
use serde_json::{Value, json};

use crate::answer::Answer;
use crate::commands::task::PriorityArg;
use crate::context::Context;
use crate::error::CliError;
use crate::keys::progress::Show;
use crate::render::{count, priority, roles, table};
use crate::values::{format_time, parse_limit, parse_time};

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum StateArg {
    Open,
    Claimed,
    Escalated,
    Completed,
    Expired,
    Withdrawn,
}

impl From<StateArg> for TaskState {
    fn from(s: StateArg) -> Self {
        match s {
            StateArg::Open => TaskState::Open,
            StateArg::Claimed => TaskState::Claimed,
            StateArg::Escalated => TaskState::Escalated,
            StateArg::Completed => TaskState::Completed,
            StateArg::Expired => TaskState::Expired,
            StateArg::Withdrawn => TaskState::Withdrawn,
        }
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum SortArg {
    #[default]
    QueueOrder,
    DueAt,
    CreatedAt,
    Priority,
}

impl From<SortArg> for SortKey {
    fn from(s: SortArg) -> Self {
        match s {
            SortArg::QueueOrder => SortKey::QueueOrder,
            SortArg::DueAt => SortKey::DueAt,
            SortArg::CreatedAt => SortKey::CreatedAt,
            SortArg::Priority => SortKey::Priority,
        }
    }
}

/// What a task must be to match: every flag given must hold (a repeated
/// flag: one of its values).
#[derive(Debug, Args)]
pub struct FilterArgs {
    /// In this state (repeat for any of several)
    #[arg(long = "state", value_name = "STATE")]
    states: Vec<StateArg>,
    /// Of this kind (repeat for any of several, at most 32)
    #[arg(long = "kind", value_name = "KIND")]
    kinds: Vec<String>,
    /// Offered to this role (one of its candidate roles)
    #[arg(long, value_name = "ROLE")]
    role: Option<String>,
    /// Held (or, once settled, last held) by this actor; `nobody` for the
    /// tasks nobody holds
    #[arg(long, value_name = "ACTOR|nobody")]
    assignee: Option<String>,
    /// Of this case
    #[arg(long, value_name = "CASE")]
    case: Option<String>,
    /// Of this run
    #[arg(long, value_name = "RUN")]
    run: Option<String>,
    /// Of this priority or a higher one
    #[arg(long, value_name = "PRIORITY")]
    priority_at_least: Option<PriorityArg>,
    /// Due strictly before this time (a task with no due time never
    /// matches)
    #[arg(long, value_name = "TIME", value_parser = parse_time, allow_negative_numbers = true)]
    due_before: Option<Timestamp>,
    /// Due at or after this time
    #[arg(long, value_name = "TIME", value_parser = parse_time, allow_negative_numbers = true)]
    due_after: Option<Timestamp>,
    /// Created strictly before this time
    #[arg(long, value_name = "TIME", value_parser = parse_time, allow_negative_numbers = true)]
    created_before: Option<Timestamp>,
    /// Created at or after this time
    #[arg(long, value_name = "TIME", value_parser = parse_time, allow_negative_numbers = true)]
    created_after: Option<Timestamp>,
    /// Pending and due at or before this time
    #[arg(long, value_name = "TIME", value_parser = parse_time, allow_negative_numbers = true)]
    overdue_at: Option<Timestamp>,
}

impl FilterArgs {
    pub fn filter(&self) -> TaskFilter {
        TaskFilter {
            states: self.states.iter().map(|s| (*s).into()).collect(),
            kinds: self.kinds.clone(),
            role: self.role.clone(),
            assignee: self.assignee.as_deref().map(|a| match a {
                "nobody" => AssigneeFilter::Nobody,
                actor => AssigneeFilter::Actor(actor.to_owned()),
            }),
            case: self.case.clone(),
            run: self.run.clone(),
            priority_at_least: self.priority_at_least.map(Priority::from),
            due_before: self.due_before,
            due_after: self.due_after,
            created_before: self.created_before,
            created_after: self.created_after,
            overdue_at: self.overdue_at,
        }
    }
}

/// The order a search pages in.
#[derive(Debug, Args)]
pub struct SortArgs {
    /// The order: queue-order (higher priority, then older, first), due-at
    /// (earliest first, none last), created-at (oldest first) or priority
    /// (lowest first)
    #[arg(long, value_name = "KEY", default_value = "queue-order")]
    sort: SortArg,
    /// Reverse the whole order
    #[arg(long)]
    desc: bool,
}

impl SortArgs {
    pub fn sort(&self) -> TaskSort {
        TaskSort {
            key: self.sort.into(),
            descending: self.desc,
        }
    }
}

/// A reviewer asking: only the tasks it holds and those it may take.
#[derive(Debug, Args)]
pub struct ViewerArgs {
    /// Answer as this reviewer sees the tenant
    #[arg(long, value_name = "ACTOR")]
    as_actor: Option<String>,
    /// The reviewer's roles (repeat, or list several after one --roles)
    #[arg(long, value_name = "ROLE", num_args = 1.., requires = "as_actor")]
    roles: Vec<String>,
}

impl ViewerArgs {
    fn viewer(&self) -> Option<Viewer> {
        self.as_actor.as_ref().map(|actor| Viewer {
            actor: actor.clone(),
            roles: self.roles.clone(),
        })
    }
}

/// The engine names a field of the query it refuses (`filter.due-before`);
/// the command line names the flag that set it.
pub fn flagged(e: Error) -> CliError {
    const FLAGS: [(&str, &str); 16] = [
        ("filter.states", "--state"),
        ("filter.kinds", "--kind"),
        ("filter.role", "--role"),
        ("filter.assignee", "--assignee"),
        ("filter.case", "--case"),
        ("filter.run", "--run"),
        ("filter.priority-at-least", "--priority-at-least"),
        ("filter.due-before", "--due-before"),
        ("filter.due-after", "--due-after"),
        ("filter.created-before", "--created-before"),
        ("filter.created-after", "--created-after"),
        ("filter.overdue-at", "--overdue-at"),
        ("viewer.actor", "--as-actor"),
        ("viewer.roles", "--roles"),
        ("limit", "--limit"),
        ("after", "--after"),
    ];
    match e {
        Error::Store(StoreError::Invalid(m)) => {
            let flag = FLAGS
                .iter()
                .find(|(field, _)| m.starts_with(field))
                .map(|(_, flag)| *flag);
            match flag {
                Some(flag) => CliError::Input(format!("{flag}: {m}")),
                None => CliError::Engine(Error::Store(StoreError::Invalid(m))),
            }
        }
        other => CliError::Engine(other),
    }
}

#[derive(Debug, Args)]
pub struct Search {
    #[command(flatten)]
    filter: FilterArgs,
    #[command(flatten)]
    sort: SortArgs,
    #[command(flatten)]
    viewer: ViewerArgs,
    /// Most tasks on this page (1-1000)
    #[arg(long, default_value_t = 20, value_name = "N", value_parser = parse_limit, allow_negative_numbers = true)]
    limit: u32,
    /// Continue from this cursor, the `next` of the previous page of the
    /// same search
    #[arg(long, value_name = "CURSOR")]
    after: Option<String>,
}

impl Search {
    pub fn run(&self, cx: &Context, out: &mut dyn Write) -> Result<u8, CliError> {
        let query = SearchQuery {
            filter: self.filter.filter(),
            sort: self.sort.sort(),
            limit: self.limit,
            after: self.after.clone(),
            viewer: self.viewer.viewer(),
        };
        let page = cx.tenant()?.search(&query).map_err(flagged)?;
        let answer = Found {
            tasks: page.tasks,
            next: page.next,
            budget_spent: page.budget_spent,
            index: page.index,
        };
        cx.answer(&answer, out)
    }
}

struct Found {
    tasks: Vec<Task>,
    next: Option<String>,
    budget_spent: bool,
    index: String,
}

impl Answer for Found {
    fn json(&self) -> serde_json::Result<String> {
        serde_json::to_string(&json!({
            "tasks": self.tasks,
            "next": self.next,
            "budget_spent": self.budget_spent,
            "index": self.index,
        }))
    }

    fn human(&self) -> String {
        let mut out = String::new();
        if self.tasks.is_empty() {
            out.push_str("No tasks match on this page.\n");
        } else {
            let rows = self
                .tasks
                .iter()
                .map(|t| {
                    vec![
                        t.id.clone(),
                        priority(t.priority).to_owned(),
                        t.state.to_string(),
                        t.kind.clone(),
                        roles(&t.candidate_roles),
                        t.assignee.clone().unwrap_or_else(|| "-".into()),
                        format_time(t.created_at),
                        t.due_at.map_or_else(|| "-".into(), format_time),
                    ]
                })
                .collect();
            out = table(
                &[
                    "ID", "PRIORITY", "STATE", "KIND", "ROLES", "HOLDER", "CREATED", "DUE",
                ],
                rows,
            );
        }
        let _ = write!(
            out,
            "{} (by {})",
            count(self.tasks.len() as u64, "task", "tasks"),
            self.index
        );
        if self.budget_spent {
            out.push_str("; the page stopped at the scan budget before it was full");
        }
        match &self.next {
            Some(next) => {
                let _ = writeln!(out, ".\nnext: {next}");
            }
            None => out.push_str(".\n"),
        }
        out
    }
}

#[derive(Debug, Args)]
pub struct Count {
    #[command(flatten)]
    filter: FilterArgs,
    #[command(flatten)]
    viewer: ViewerArgs,
    /// Start from this cursor (a count's own `next`)
    #[arg(long, value_name = "CURSOR")]
    after: Option<String>,
}

impl Count {
    pub fn run(&self, cx: &Context, out: &mut dyn Write) -> Result<u8, CliError> {
        let t = cx.tenant()?;
        let (filter, viewer) = (self.filter.filter(), self.viewer.viewer());
        // Each call counts within the engine's scan budget, in its own
        // read; the count is whole once a call answers exact.
        let (mut total, mut calls, mut after) = (0u64, 0u32, self.after.clone());
        loop {
            let c = t
                .count(&filter, viewer.as_ref(), after.as_deref())
                .map_err(flagged)?;
            total = total.saturating_add(c.count);
            calls += 1;
            if c.exact {
                let answer = Counted {
                    count: total,
                    calls,
                    index: c.index,
                };
                return cx.answer(&answer, out);
            }
            after = c.next;
        }
    }
}

struct Counted {
    count: u64,
    calls: u32,
    index: String,
}

impl Answer for Counted {
    fn json(&self) -> serde_json::Result<String> {
        serde_json::to_string(&json!({
            "count": self.count,
            "calls": self.calls,
            "index": self.index,
        }))
    }

    fn human(&self) -> String {
        let by = if self.index == "counters" {
            "from the kept counters".to_owned()
        } else {
            format!(
                "along {} in {}",
                self.index,
                count(u64::from(self.calls), "call", "calls")
            )
        };
        format!("{} match ({by}).\n", count(self.count, "task", "tasks"))
    }
}

/// A `build-search-index` limit, up to the engine's own bound.
fn parse_build_limit(text: &str) -> Result<u32, String> {
    crate::values::parse_limit_to(text, leasehold_guest::search::MAX_BUILD)
}

#[derive(Debug, Args)]
pub struct BuildSearchIndex {
    /// Most tasks given their entries per call (1-10000); each call is one
    /// transaction
    #[arg(long, default_value_t = 1000, value_name = "N", value_parser = parse_build_limit, allow_negative_numbers = true)]
    limit: u32,
}

impl BuildSearchIndex {
    pub fn run(&self, cx: &Context, out: &mut dyn Write) -> Result<u8, CliError> {
        let t = cx.tenant()?;
        let show = cx.progress();
        let (mut indexed, mut calls) = (0u64, 0u32);
        // One call per batch, each its own transaction, until the engine
        // answers that every task has its entries.
        loop {
            let p = t.build_search_index(self.limit)?;
            indexed += u64::from(p.indexed);
            calls += 1;
            if p.built {
                break;
            }
            let line = match show {
                Show::Never => None,
                Show::Text => Some(format!(
                    "build-search-index: {} {indexed} tasks indexed so far",
                    t.name()
                )),
                Show::Json => Some(
                    json!({"progress": "build-search-index", "tenant": t.name(), "indexed": indexed})
                        .to_string(),
                ),
            };
            if let Some(line) = line {
                eprintln!("{line}");
            }
        }
        cx.answer(&Built { indexed, calls }, out)
    }
}

struct Built {
    indexed: u64,
    calls: u32,
}

impl Answer for Built {
    fn json(&self) -> serde_json::Result<String> {
        serde_json::to_string(&json!({"built": true, "indexed": self.indexed, "calls": self.calls}))
    }

    fn human(&self) -> String {
        if self.indexed == 0 {
            return "The search index is built; nothing was left to index.\n".to_owned();
        }
        format!(
            "The search index is built: {} indexed in {}.\n",
            count(self.indexed, "task", "tasks"),
            count(u64::from(self.calls), "call", "calls")
        )
    }
}

/// A filter as the command line's JSON spells it: snake_case, an
/// assignee `"nobody"` or `{"actor": A}`.
pub fn filter_json(f: &TaskFilter) -> Value {
    json!({
        "states": f.states,
        "kinds": f.kinds,
        "role": f.role,
        "assignee": f.assignee.as_ref().map(|a| match a {
            AssigneeFilter::Nobody => json!("nobody"),
            AssigneeFilter::Actor(actor) => json!({"actor": actor}),
        }),
        "case": f.case,
        "run": f.run,
        "priority_at_least": f.priority_at_least,
        "due_before": f.due_before,
        "due_after": f.due_after,
        "created_before": f.created_before,
        "created_after": f.created_after,
        "overdue_at": f.overdue_at,
    })
}

/// A filter in a line, as the flags that would give it.
pub fn filter_text(f: &TaskFilter) -> String {
    let mut parts: Vec<String> = Vec::new();
    for s in &f.states {
        parts.push(format!("--state {s}"));
    }
    for k in &f.kinds {
        parts.push(format!("--kind {k}"));
    }
    let texts = [
        ("--role", f.role.clone()),
        (
            "--assignee",
            f.assignee.as_ref().map(|a| match a {
                AssigneeFilter::Nobody => "nobody".to_owned(),
                AssigneeFilter::Actor(actor) => actor.clone(),
            }),
        ),
        ("--case", f.case.clone()),
        ("--run", f.run.clone()),
        (
            "--priority-at-least",
            f.priority_at_least.map(|p| priority(p).to_owned()),
        ),
        ("--due-before", f.due_before.map(format_time)),
        ("--due-after", f.due_after.map(format_time)),
        ("--created-before", f.created_before.map(format_time)),
        ("--created-after", f.created_after.map(format_time)),
        ("--overdue-at", f.overdue_at.map(format_time)),
    ];
    for (flag, value) in texts {
        if let Some(v) = value {
            parts.push(format!("{flag} {v}"));
        }
    }
    if parts.is_empty() {
        "every task".to_owned()
    } else {
        parts.join(" ")
    }
}
