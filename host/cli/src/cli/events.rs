//! `leasehold events --follow`: the tenant's feed, printed as changes
//! commit, until interrupted. It reads on from the last position it printed,
//! so it prints every change once, and stops (exit 1) when the feed no
//! longer holds what follows that position.
//!
//! On PostgreSQL it keeps one read-only engine and wakes when any host
//! commits on the tenant (the engine's `watch`), reading again at least
//! every [`REREAD`] in case a wake-up was lost. A redb file admits one
//! process at a time, so there it opens the file read-only for each read and
//! lets it go between reads, every [`POLL`], and a read that finds the file
//! held by another process waits for the next round. It prints; it never
//! writes the database.

use std::io::Write;
use std::time::Duration;

use leasehold_host::{Error, FeedRead, OpenError};

use super::args::{Cli, EventsArgs};
use super::commands::{builder, db_path, tenant};
use super::error::{CliError, REFUSED};
use super::output::{event_line, gone};

/// How long a follower on PostgreSQL waits for a wake-up before it reads
/// again anyway.
const REREAD: Duration = Duration::from_secs(10);

/// How often a follower of a redb file reads it.
const POLL: Duration = Duration::from_secs(1);

pub fn follow(cli: &Cli, args: &EventsArgs, out: &mut impl Write) -> Result<u8, CliError> {
    let db = db_path(cli);
    let url = db.to_str().filter(|d| leasehold_host::is_url(d));
    let mut after = args.after.clone();
    match url {
        Some(url) => {
            let engine = builder(cli).read_only().postgres(url)?;
            let t = engine.tenant(cli.tenant())?;
            let mut woken = engine.watch(cli.tenant())?;
            loop {
                if let Some(code) = drain(cli, args, &mut after, out, |a, n| t.feed(a, n))? {
                    return Ok(code);
                }
                // A wake-up is a hint: what it carries is read from the feed.
                let _ = woken.wait(REREAD);
            }
        }
        None => {
            // Holds the compiled component between reads, which each open
            // the file afresh.
            let _compiled = builder(cli).in_memory()?;
            loop {
                match tenant(cli) {
                    Ok(t) => {
                        if let Some(code) = drain(cli, args, &mut after, out, |a, n| t.feed(a, n))?
                        {
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
    cli: &Cli,
    args: &EventsArgs,
    after: &mut Option<String>,
    out: &mut impl Write,
    read: impl Fn(Option<&str>, u32) -> Result<FeedRead, Error>,
) -> Result<Option<u8>, CliError> {
    loop {
        match read(after.as_deref(), args.limit)? {
            FeedRead::Gone(head) => {
                if cli.json {
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
                    if cli.json {
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
