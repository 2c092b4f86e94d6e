//! `leasehold view …`: a tenant's saved views, named searches everyone of
//! the tenant shares (`put-view` with the search's filter and sort flags,
//! `get-view`, `list-views`, `delete-view`; `put`, `get`, `list` and
//! `delete` for short). Whether a view is valid and which revision wins
//! is the engine's; this module turns flags into a view, asks and
//! reports.

use std::io::Write;

use clap::{Args, Subcommand};
use leasehold_host::{SavedView, StoreError};
use serde_json::json;

use crate::answer::Answer;
use crate::commands::search::{FilterArgs, SortArgs, filter_json, filter_text, flagged};
use crate::context::Context;
use crate::error::CliError;
use crate::render::{count, table};
use crate::values::{self, format_time, parse_limit};

#[derive(Debug, Subcommand)]
pub enum ViewCommand {
    /// Save a view: a named search (its filter and sort flags as `search`
    /// takes them). A new name makes one; --expected N changes the view at
    /// revision N
    #[command(name = "put-view", visible_alias = "put")]
    PutView(Box<PutView>),
    /// Show a view
    #[command(name = "get-view", visible_alias = "get")]
    GetView(GetView),
    /// The saved views, in name order
    #[command(name = "list-views", visible_alias = "list")]
    ListViews(ListViews),
    /// Delete a view
    #[command(name = "delete-view", visible_alias = "delete")]
    DeleteView(Named),
}

impl ViewCommand {
    /// The verbs the command calls, by their WIT names.
    pub fn verbs(&self) -> &'static [&'static str] {
        match self {
            ViewCommand::PutView(_) => &["put-view"],
            ViewCommand::GetView(_) => &["get-view"],
            ViewCommand::ListViews(_) => &["list-views"],
            ViewCommand::DeleteView(_) => &["delete-view"],
        }
    }

    pub fn run(&self, cx: &Context, out: &mut dyn Write) -> Result<u8, CliError> {
        match self {
            ViewCommand::PutView(c) => c.run(cx, out),
            ViewCommand::GetView(c) => {
                let found = cx.tenant()?.get_view(&c.name)?.ok_or_else(|| {
                    CliError::Engine(leasehold_host::Error::Store(StoreError::NotFound(
                        c.name.clone(),
                    )))
                })?;
                cx.answer(
                    &Views {
                        list: vec![found],
                        one: true,
                    },
                    out,
                )
            }
            ViewCommand::ListViews(c) => {
                let list = cx
                    .tenant()?
                    .list_views(c.limit, c.after.as_deref())
                    .map_err(flagged)?;
                cx.answer(&Views { list, one: false }, out)
            }
            ViewCommand::DeleteView(c) => {
                let deleted = cx.tenant()?.delete_view(&c.name, c.expected)?;
                cx.answer(
                    &Deleted {
                        name: &c.name,
                        deleted,
                    },
                    out,
                )
            }
        }
    }
}

#[derive(Debug, Args)]
pub struct PutView {
    /// The view's name (1-128 characters)
    #[arg(long, value_name = "NAME")]
    name: String,
    #[command(flatten)]
    filter: FilterArgs,
    #[command(flatten)]
    sort: SortArgs,
    /// Change the view only at this revision (else refused as stale with
    /// the current one); without it, the name must be new
    #[arg(long, value_name = "N")]
    expected: Option<u64>,
    /// Who makes the change, recorded with the view
    #[arg(long, value_name = "ACTOR")]
    by: Option<String>,
}

impl PutView {
    fn run(&self, cx: &Context, out: &mut dyn Write) -> Result<u8, CliError> {
        let view = SavedView {
            name: self.name.clone(),
            filter: self.filter.filter(),
            sort: self.sort.sort(),
            revision: 0,
            by: self.by.clone(),
            at: values::now(),
        };
        let put = cx
            .tenant()?
            .put_view(&view, self.expected)
            .map_err(|e| match e {
                leasehold_host::Error::Store(StoreError::Invalid(m)) if m.starts_with("name") => {
                    CliError::Input(format!("--name: {m}"))
                }
                leasehold_host::Error::Store(StoreError::Invalid(m)) if m.starts_with("by") => {
                    CliError::Input(format!("--by: {m}"))
                }
                other => flagged(other),
            })?;
        cx.answer(
            &Views {
                list: vec![put],
                one: true,
            },
            out,
        )
    }
}

#[derive(Debug, Args)]
pub struct GetView {
    name: String,
}

#[derive(Debug, Args)]
pub struct Named {
    name: String,
    /// Only at this revision (else refused as stale with the current one)
    #[arg(long, value_name = "N")]
    expected: Option<u64>,
}

#[derive(Debug, Args)]
pub struct ListViews {
    /// Most views to list (1-1000)
    #[arg(long, default_value_t = 100, value_name = "N", value_parser = parse_limit, allow_negative_numbers = true)]
    limit: u32,
    /// Continue after this view name, as the previous page ended
    #[arg(long, value_name = "NAME")]
    after: Option<String>,
}

/// Views: one (put, get: an object under --json) or a page (list: an
/// array).
struct Views {
    list: Vec<SavedView>,
    one: bool,
}

fn view_json(v: &SavedView) -> serde_json::Value {
    json!({
        "name": v.name,
        "filter": filter_json(&v.filter),
        "sort": {"key": v.sort.key.name(), "descending": v.sort.descending},
        "revision": v.revision,
        "by": v.by,
        "at": v.at,
    })
}

impl Answer for Views {
    fn json(&self) -> serde_json::Result<String> {
        match (self.one, self.list.as_slice()) {
            (true, [one]) => serde_json::to_string(&view_json(one)),
            (_, all) => serde_json::to_string(&all.iter().map(view_json).collect::<Vec<_>>()),
        }
    }

    fn human(&self) -> String {
        if self.list.is_empty() {
            return "No views are saved.\n".to_owned();
        }
        let rows = self
            .list
            .iter()
            .map(|v| {
                let desc = if v.sort.descending { " --desc" } else { "" };
                vec![
                    v.name.clone(),
                    v.revision.to_string(),
                    filter_text(&v.filter),
                    format!("--sort {}{desc}", v.sort.key.name()),
                    v.by.clone().unwrap_or_else(|| "-".into()),
                    format_time(v.at),
                ]
            })
            .collect();
        let mut out = table(
            &["NAME", "REVISION", "FILTER", "SORT", "BY", "CHANGED"],
            rows,
        );
        if !self.one {
            out.push_str(&format!(
                "{}.\n",
                count(self.list.len() as u64, "view", "views")
            ));
        }
        out
    }
}

struct Deleted<'a> {
    name: &'a str,
    deleted: bool,
}

impl Answer for Deleted<'_> {
    fn json(&self) -> serde_json::Result<String> {
        serde_json::to_string(&json!({"name": self.name, "deleted": self.deleted}))
    }

    fn human(&self) -> String {
        if self.deleted {
            format!("Deleted view {}.\n", self.name)
        } else {
            format!("No view is named {}; nothing was deleted.\n", self.name)
        }
    }
}
