//! `leasehold feed` (`events` until the next release): the tenant's feed
//! of changes, a page at a time, or followed as changes commit. A follower
//! reads on from the last position it printed, so it prints every change
//! once, and stops (exit 1) when the feed no longer holds what follows that
//! position.
//!
//! On PostgreSQL a follower keeps one read-only engine and wakes when any
//! host commits on the tenant (the engine's `watch`), reading again at
//! least every [`REREAD`] in case a wake-up was lost. A redb file admits
//! one process at a time, so there it opens the file read-only for each
//! read and lets it go between reads, every [`POLL`], and a read that finds
//! the file held by another process waits for the next round. It prints; it
//! never writes the database.

use std::fmt::Write as _;
use std::io::Write;
use std::time::Duration;

use clap::Args;
use leasehold_host::{Change, Error, FeedEntry, FeedRead, OpenError, TimerEvent};

use crate::answer::Answer;
use crate::context::Context;
use crate::error::CliError;
use crate::exit::REFUSED;
use crate::render::state_change;
use crate::values::{format_time, parse_limit};

/// How long a follower on PostgreSQL waits for a wake-up before it reads
/// again anyway.
const REREAD: Duration = Duration::from_secs(10);

/// How often a follower of a redb file reads it.
const POLL: Duration = Duration::from_secs(1);

/// `leasehold feed`: where to read from, and whether to keep following.
#[derive(Debug, Args)]
pub struct Feed {
    /// Read on from this position, as printed by the previous read
    /// [default: the oldest entry kept]
    #[arg(long, value_name = "POSITION")]
    after: Option<String>,
    /// Most entries to print per read (1-1000)
    #[arg(
        long,
        default_value_t = 100,
        value_name = "N",
        value_parser = parse_limit,
        allow_negative_numbers = true
    )]
    limit: u32,
    /// Keep printing changes as they commit, until interrupted (with --json,
    /// one JSON object per line). On PostgreSQL it wakes when any host
    /// commits; on a redb file it reads again every second, whenever no
    /// other process holds the file
    #[arg(long)]
    follow: bool,
}

impl Feed {
    pub fn run(&self, cx: &Context, out: &mut dyn Write) -> Result<u8, CliError> {
        if self.follow {
            return follow(self, cx, out);
        }
        let read = cx.tenant()?.feed(self.after.as_deref(), self.limit)?;
        let answer = FeedAnswer {
            read,
            after: self.after.is_some(),
        };
        cx.answer(&answer, out)
    }
}

/// A read of the feed, after a position or from the oldest entry kept.
struct FeedAnswer {
    read: FeedRead,
    after: bool,
}

impl Answer for FeedAnswer {
    fn json(&self) -> serde_json::Result<String> {
        serde_json::to_string(&self.read)
    }

    fn human(&self) -> String {
        let page = match &self.read {
            FeedRead::Page(page) => page,
            FeedRead::Gone(head) => return gone(head),
        };
        let mut out = String::new();
        for e in &page.entries {
            out.push_str(&event_line(e));
        }
        if page.entries.is_empty() {
            let since = if self.after {
                " after that position"
            } else {
                ""
            };
            let _ = writeln!(out, "No changes{since}.");
        }
        if page.next == page.head {
            let _ = writeln!(out, "Caught up; follow on with --after {}", page.next);
        } else {
            let _ = writeln!(out, "More follow: --after {}", page.next);
        }
        out
    }

    /// A reader whose position was trimmed must read the tasks again.
    fn exit_code(&self) -> u8 {
        match self.read {
            FeedRead::Gone(_) => REFUSED,
            FeedRead::Page(_) => 0,
        }
    }
}

/// What a reader whose position was trimmed must do.
fn gone(head: &str) -> String {
    format!(
        "The feed no longer holds what follows that position (it was trimmed, or the position \
         is not this feed's): read the tasks again, then follow on with --after {head}\n"
    )
}

/// One change, on one line, for a person following the feed.
fn event_line(e: &FeedEntry) -> String {
    match &e.change {
        Change::Task(t) => {
            let x = &t.entry;
            let by = x
                .actor
                .as_deref()
                .map(|a| format!(" by {a}"))
                .unwrap_or_default();
            let holder = x
                .assignee
                .as_deref()
                .map(|a| format!(", held by {a}"))
                .unwrap_or_default();
            format!(
                "{}  task {} #{}: {}{by}, {}{holder}\n",
                format_time(x.at),
                t.id,
                x.seq,
                x.verb,
                state_change(x.before, x.after)
            )
        }
        Change::Timer(t) => {
            let what = match t.what {
                TimerEvent::Armed => format!("armed to fire at {}", format_time(t.fire_at)),
                TimerEvent::Claimed => format!(
                    "claimed until {}",
                    t.lease_until.map_or_else(|| "-".into(), format_time)
                ),
                TimerEvent::Retired => "retired".to_owned(),
                TimerEvent::Rescheduled => {
                    format!("moved to fire at {}", format_time(t.fire_at))
                }
            };
            format!(
                "{}  timer {}/{}: {} {what}\n",
                format_time(t.at),
                t.run,
                t.effect,
                t.verb
            )
        }
    }
}

fn follow(args: &Feed, cx: &Context, out: &mut dyn Write) -> Result<u8, CliError> {
    let db = cx.db_path();
    let url = db.to_str().filter(|d| leasehold_host::is_url(d));
    let mut after = args.after.clone();
    match url {
        Some(url) => {
            let engine = cx.engine()?.postgres(url)?;
            let t = engine.tenant(cx.tenant_name())?;
            let mut woken = engine.watch(cx.tenant_name())?;
            loop {
                if let Some(code) = drain(cx, args, &mut after, out, |a, n| t.feed(a, n))? {
                    return Ok(code);
                }
                // A wake-up is a hint: what it carries is read from the feed.
                let _ = woken.wait(REREAD);
            }
        }
        None => {
            // Holds the compiled component between reads, which each open
            // the file afresh.
            let _compiled = cx.builder().in_memory()?;
            loop {
                match cx.tenant() {
                    Ok(t) => {
                        if let Some(code) = drain(cx, args, &mut after, out, |a, n| t.feed(a, n))? {
                            return Ok(code);
                        }
                    }
                    // Another process holds the file: read in the next round.
                    Err(CliError::Engine(Error::Open(OpenError::Busy { .. }))) => {}
                    Err(e) => return Err(e),
                }
                std::thread::sleep(POLL);
            }
        }
    }
}

/// Reads and prints until caught up; `Some(exit code)` when the follower
/// must stop.
fn drain(
    cx: &Context,
    args: &Feed,
    after: &mut Option<String>,
    out: &mut dyn Write,
    read: impl Fn(Option<&str>, u32) -> Result<FeedRead, Error>,
) -> Result<Option<u8>, CliError> {
    loop {
        match read(after.as_deref(), args.limit)? {
            FeedRead::Gone(head) => {
                if cx.json() {
                    let line = serde_json::to_string(&FeedRead::Gone(head))
                        .map_err(|e| CliError::Failed(format!("cannot encode the answer: {e}")))?;
                    writeln!(out, "{line}")?;
                } else {
                    out.write_all(gone(&head).as_bytes())?;
                }
                out.flush()?;
                return Ok(Some(REFUSED));
            }
            FeedRead::Page(page) => {
                for e in &page.entries {
                    if cx.json() {
                        let line = serde_json::to_string(e).map_err(|e| {
                            CliError::Failed(format!("cannot encode the answer: {e}"))
                        })?;
                        writeln!(out, "{line}")?;
                    } else {
                        out.write_all(event_line(e).as_bytes())?;
                    }
                }
                out.flush()?;
                let caught_up = page.entries.is_empty() || page.next == page.head;
                *after = Some(page.next);
                if caught_up {
                    return Ok(None);
                }
            }
        }
    }
}
