//! A task's record of changes, and keeping it short: `task history`, `task
//! entry-place` and `trim`, each with its call and what it says (the feed
//! itself is `feed`'s). This module only asks and reports.

use std::fmt::Write as _;
use std::io::Write;

use clap::Args;
use leasehold_guest::validate::MAX_LIMIT;
use leasehold_host::{FeedPlace, HistoryEntry, Timestamp, TrimOutcome};
use serde_json::json;

use crate::answer::Answer;
use crate::context::Context;
use crate::error::CliError;
use crate::render::{count, state_change, table};
use crate::values::{format_time, parse_limit, parse_time};

#[derive(Debug, Args)]
pub struct History {
    id: String,
    /// Continue after this entry number, as printed by the previous page
    #[arg(long, value_name = "SEQ")]
    after: Option<u64>,
    /// Most entries on this page (1-1000)
    #[arg(
        long,
        default_value_t = 100,
        value_name = "N",
        value_parser = parse_limit,
        allow_negative_numbers = true
    )]
    limit: u32,
}

impl History {
    pub fn run(&self, cx: &Context, out: &mut dyn Write) -> Result<u8, CliError> {
        let entries = cx.tenant()?.history(&self.id, self.after, self.limit)?;
        let answer = HistoryPage {
            id: &self.id,
            entries,
            limit: self.limit,
        };
        cx.answer(&answer, out)
    }
}

/// A page of a task's history; a full page may have more after it.
struct HistoryPage<'a> {
    id: &'a str,
    entries: Vec<HistoryEntry>,
    limit: u32,
}

impl Answer for HistoryPage<'_> {
    fn json(&self) -> serde_json::Result<String> {
        serde_json::to_string(&self.entries)
    }

    fn human(&self) -> String {
        let (id, entries) = (self.id, &self.entries);
        if entries.is_empty() {
            return format!("No history entries of task {id} here.\n");
        }
        let rows = entries
            .iter()
            .map(|e| {
                vec![
                    e.seq.to_string(),
                    format_time(e.at),
                    e.verb.clone(),
                    e.actor.clone().unwrap_or_else(|| "(service)".into()),
                    state_change(e.before, e.after),
                    e.assignee.clone().unwrap_or_else(|| "-".into()),
                    e.lease_until.map_or_else(|| "-".into(), format_time),
                ]
            })
            .collect();
        let mut out = table(
            &["SEQ", "AT", "VERB", "BY", "STATE", "HOLDER", "LEASE UNTIL"],
            rows,
        );
        // What the table has no column for: each field's before and
        // after, a decision, a note, the job that made the change.
        for e in entries {
            let mut said = Vec::new();
            for c in &e.changes {
                said.push(format!("{}: {} -> {}", c.field, c.before, c.after));
            }
            if let Some(d) = &e.decision {
                let reason = d
                    .reason
                    .as_deref()
                    .map_or_else(String::new, |r| format!(" ({r})"));
                said.push(format!("decision: {}{reason}", d.outcome));
                if let Some(output) = &d.output {
                    said.push(format!("output: {output}"));
                }
            }
            if let Some(note) = &e.note {
                said.push(format!("note: {note}"));
            }
            if let Some(job) = &e.job {
                said.push(format!("job: {job}"));
            }
            if let Some(step) = &e.step {
                said.push(crate::render::fired(step));
            }
            for line in said {
                let _ = writeln!(out, "  {} {line}", e.seq);
            }
        }
        let last = entries.last().map_or(0, |e| e.seq);
        if entries.len() == self.limit as usize {
            let _ = writeln!(out, "More may follow: --after {last}");
        } else {
            let _ = writeln!(
                out,
                "{} of task {id}.",
                count(entries.len() as u64, "entry", "entries")
            );
        }
        out
    }
}

#[derive(Debug, Args)]
pub struct EntryPlace {
    id: String,
    seq: u64,
}

impl EntryPlace {
    pub fn run(&self, cx: &Context, out: &mut dyn Write) -> Result<u8, CliError> {
        let place = cx.tenant()?.entry_place(&self.id, self.seq)?;
        let answer = Placed {
            id: &self.id,
            seq: self.seq,
            place,
        };
        cx.answer(&answer, out)
    }
}

/// Where one history entry sits in the feed.
struct Placed<'a> {
    id: &'a str,
    seq: u64,
    place: Option<FeedPlace>,
}

impl Answer for Placed<'_> {
    fn json(&self) -> serde_json::Result<String> {
        serde_json::to_string(&self.place)
    }

    fn human(&self) -> String {
        let (id, seq) = (self.id, self.seq);
        match &self.place {
            Some(p) => format!(
                "Entry {seq} of {id} is number {} of the feed's slot {}.",
                p.seq, p.slot
            ),
            None => format!("Entry {seq} of {id} is not kept (trimmed, or never recorded)."),
        }
    }
}

#[derive(Debug, Args)]
pub struct Trim {
    /// Remove entries recorded before this time
    #[arg(long, value_name = "TIME", value_parser = parse_time, allow_negative_numbers = true)]
    before: Option<Timestamp>,
    /// Keep at most this many entries, the newest
    #[arg(long, value_name = "N")]
    keep: Option<u64>,
    /// Most entries removed per call (1-1000); each call is one
    /// transaction
    #[arg(
        long,
        default_value_t = MAX_LIMIT,
        value_name = "N",
        value_parser = parse_limit,
        allow_negative_numbers = true
    )]
    limit: u32,
}

impl Trim {
    pub fn run(&self, cx: &Context, out: &mut dyn Write) -> Result<u8, CliError> {
        let t = cx.tenant()?;
        let mut total = TrimOutcome::default();
        // One call per batch, each its own transaction, until the rule
        // removes nothing more.
        loop {
            let out = t.trim(self.before, self.keep, self.limit)?;
            total.feed_removed += out.feed_removed;
            total.history_removed += out.history_removed;
            if !out.more {
                break;
            }
        }
        cx.answer(&Trimmed(total), out)
    }
}

struct Trimmed(TrimOutcome);

impl Answer for Trimmed {
    fn json(&self) -> serde_json::Result<String> {
        serde_json::to_string(&json!({
            "feed_removed": self.0.feed_removed,
            "history_removed": self.0.history_removed,
        }))
    }

    fn human(&self) -> String {
        format!(
            "Removed {} from the feed and {} from task histories.\n",
            count(u64::from(self.0.feed_removed), "entry", "entries"),
            count(u64::from(self.0.history_removed), "entry", "entries"),
        )
    }
}
