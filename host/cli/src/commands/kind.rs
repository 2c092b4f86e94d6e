//! `leasehold kind …`: task kinds, the per-tenant definitions of what a
//! decision on a task of a kind may be (`define-kind` from a JSON file,
//! `get-kind`, `list-kinds`, `remove-kind`; `define`, `get`, `list` and
//! `remove` for short). Whether a definition is valid is the engine's (it
//! compiles each schema when defined); this module reads the file, asks
//! and reports.

use std::fmt::Write as _;
use std::io::Write;
use std::path::PathBuf;

use clap::{Args, Subcommand};
use leasehold_host::{KindDefinition, OutcomeRule};
use serde::Deserialize;
use serde_json::json;

use crate::answer::Answer;
use crate::context::Context;
use crate::error::CliError;
use crate::input::{invalid_document, parse, read_source};
use crate::render::{count, table};
use crate::values::parse_limit;

#[derive(Debug, Subcommand)]
pub enum KindCommand {
    /// Define a kind, or replace its definition, from JSON (a file, or
    /// standard input for - or nothing): {"kind": NAME, "outcomes":
    /// [{"name", "needs_reason", "output_schema"}]}, where a schema is a
    /// JSON Schema document
    #[command(name = "define-kind", visible_alias = "define")]
    DefineKind(DefineKind),
    /// Show a kind's definition
    #[command(name = "get-kind", visible_alias = "get")]
    GetKind(GetKind),
    /// The defined kinds, in name order
    #[command(name = "list-kinds", visible_alias = "list")]
    ListKinds(ListKinds),
    /// Remove a kind's definition
    #[command(name = "remove-kind", visible_alias = "remove")]
    RemoveKind(GetKind),
}

impl KindCommand {
    /// The verbs the command calls, by their WIT names.
    pub fn verbs(&self) -> &'static [&'static str] {
        match self {
            KindCommand::DefineKind(_) => &["define-kind"],
            KindCommand::GetKind(_) => &["get-kind"],
            KindCommand::ListKinds(_) => &["list-kinds"],
            KindCommand::RemoveKind(_) => &["remove-kind"],
        }
    }

    pub fn run(&self, cx: &Context, out: &mut dyn Write) -> Result<u8, CliError> {
        match self {
            KindCommand::DefineKind(c) => c.run(cx, out),
            KindCommand::GetKind(c) => {
                let kind = &c.kind;
                let found = cx.tenant()?.get_kind(kind)?.ok_or_else(|| {
                    CliError::Engine(leasehold_host::Error::Store(
                        leasehold_host::StoreError::NotFound(kind.clone()),
                    ))
                })?;
                let answer = Kinds {
                    list: vec![found],
                    one: true,
                };
                cx.answer(&answer, out)
            }
            KindCommand::ListKinds(c) => {
                let kinds = cx.tenant()?.list_kinds(c.limit, c.after.as_deref())?;
                let answer = Kinds {
                    list: kinds,
                    one: false,
                };
                cx.answer(&answer, out)
            }
            KindCommand::RemoveKind(c) => {
                let removed = cx.tenant()?.remove_kind(&c.kind)?;
                cx.answer(
                    &Removed {
                        kind: &c.kind,
                        removed,
                    },
                    out,
                )
            }
        }
    }
}

/// A definition as the file spells it: a schema is a JSON document, not
/// its text, and `needs_reason` defaults to false.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct DefinitionFile {
    kind: String,
    #[serde(default)]
    outcomes: Vec<RuleFile>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RuleFile {
    name: String,
    #[serde(default)]
    needs_reason: bool,
    #[serde(default)]
    output_schema: Option<serde_json::Value>,
}

#[derive(Debug, Args)]
pub struct DefineKind {
    /// JSON file holding the definition; - or nothing reads standard input
    #[arg(value_name = "FILE|-")]
    file: Option<PathBuf>,
    /// Define it only if its revision is still N (0: not yet defined);
    /// else refused as stale with the current revision
    #[arg(long = "if-revision", value_name = "N")]
    if_revision: Option<u64>,
}

impl DefineKind {
    fn run(&self, cx: &Context, out: &mut dyn Write) -> Result<u8, CliError> {
        let source = read_source(self.file.as_deref(), "a kind definition")?;
        let file: DefinitionFile = parse(&source, "a kind definition")?;
        let definition = KindDefinition {
            kind: file.kind,
            outcomes: file
                .outcomes
                .into_iter()
                .map(|r| OutcomeRule {
                    name: r.name,
                    needs_reason: r.needs_reason,
                    output_schema: r.output_schema.map(|s| s.to_string()),
                })
                .collect(),
            revision: 0,
        };
        let defined = cx
            .tenant()?
            .define_kind(&definition, self.if_revision)
            .map_err(|e| invalid_document(&source, "the definition", e))?;
        let answer = Kinds {
            list: vec![defined],
            one: true,
        };
        cx.answer(&answer, out)
    }
}

#[derive(Debug, Args)]
pub struct GetKind {
    kind: String,
}

#[derive(Debug, Args)]
pub struct ListKinds {
    /// Most kinds to list (1-1000)
    #[arg(long, default_value_t = 100, value_name = "N", value_parser = parse_limit, allow_negative_numbers = true)]
    limit: u32,
    /// Continue after this kind, as the previous page ended
    #[arg(long, value_name = "KIND")]
    after: Option<String>,
}

/// Definitions: one (define, get: an object under --json) or a page (list:
/// an array).
struct Kinds {
    list: Vec<KindDefinition>,
    one: bool,
}

impl Answer for Kinds {
    fn json(&self) -> serde_json::Result<String> {
        match (self.one, self.list.as_slice()) {
            (true, [one]) => serde_json::to_string(one),
            (_, all) => serde_json::to_string(all),
        }
    }

    fn human(&self) -> String {
        if self.list.is_empty() {
            return "No kinds are defined.\n".to_owned();
        }
        let rows = self
            .list
            .iter()
            .flat_map(|k| {
                let head = [k.kind.clone(), k.revision.to_string()];
                let rules: Vec<Vec<String>> = if k.outcomes.is_empty() {
                    vec![vec!["(any)".into(), "-".into(), "-".into()]]
                } else {
                    k.outcomes
                        .iter()
                        .map(|o| {
                            vec![
                                o.name.clone(),
                                if o.needs_reason { "yes" } else { "no" }.into(),
                                o.output_schema.clone().unwrap_or_else(|| "-".into()),
                            ]
                        })
                        .collect()
                };
                rules.into_iter().enumerate().map(move |(i, r)| {
                    let mut row = if i == 0 {
                        head.to_vec()
                    } else {
                        vec![String::new(), String::new()]
                    };
                    row.extend(r);
                    row
                })
            })
            .collect();
        let mut out = table(
            &["KIND", "REVISION", "OUTCOME", "REASON", "OUTPUT SCHEMA"],
            rows,
        );
        let _ = writeln!(out, "{}.", count(self.list.len() as u64, "kind", "kinds"));
        out
    }
}

struct Removed<'a> {
    kind: &'a str,
    removed: bool,
}

impl Answer for Removed<'_> {
    fn json(&self) -> serde_json::Result<String> {
        serde_json::to_string(&json!({"kind": self.kind, "removed": self.removed}))
    }

    fn human(&self) -> String {
        if self.removed {
            format!("Removed kind {}.\n", self.kind)
        } else {
            format!("Kind {} was not defined; nothing was removed.\n", self.kind)
        }
    }
}
