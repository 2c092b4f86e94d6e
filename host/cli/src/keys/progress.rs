//! Progress lines on stderr while keys move (`copy`, `tenant import`,
//! `tenant delete`, `restore`), at most every [`PROGRESS_EVERY`], as text
//! or JSON, and the test-only hooks that stop a move after a number of
//! batches ([`STOP_AFTER_ENV`]) or hold it after its first
//! ([`HOLD_ENV`]). It owns what the lines say and how often; it must never
//! fail a move because a line could not be written.

use std::io::Write as _;
use std::time::{Duration, Instant};

use crate::keys::error::{HOLD_ENV, HOLD_FROM_ENV, MoveError, STOP_AFTER_ENV};

/// How progress lines are shown, if at all.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Show {
    Never,
    /// A sentence a line.
    Text,
    /// A JSON object a line, for `--json`.
    Json,
}

/// The least time between two progress lines: a few a second at most, so
/// that a terminal or a log is not flooded.
const PROGRESS_EVERY: Duration = Duration::from_millis(500);

/// Counts batches across a whole run, prints progress lines (on stderr, at
/// most every [`PROGRESS_EVERY`]) and runs the test-only hook.
pub struct Progress {
    show: Show,
    /// The command, as the lines name it: "copy", "import", "delete".
    verb: &'static str,
    pub batches: u64,
    pub stop_after: Option<u64>,
    /// The named pipe a load waits on after its first batch (of tenant
    /// `hold_from` of the run).
    hold: Option<std::path::PathBuf>,
    hold_from: usize,
    last: Instant,
    /// Which tenant of how many is being worked on, counted from 1.
    place: (usize, usize),
}

impl Progress {
    pub fn new(verb: &'static str, show: Show) -> Result<Progress, MoveError> {
        let stop_after = match std::env::var(STOP_AFTER_ENV) {
            Ok(n) => Some(n.trim().parse().map_err(|_| {
                MoveError::Usage(format!("{STOP_AFTER_ENV}={n:?} is not a whole number"))
            })?),
            Err(_) => None,
        };
        Ok(Progress {
            show,
            verb,
            batches: 0,
            stop_after,
            hold: std::env::var_os(HOLD_ENV).map(Into::into),
            hold_from: match std::env::var(HOLD_FROM_ENV) {
                Ok(n) => n.trim().parse().map_err(|_| {
                    MoveError::Usage(format!("{HOLD_FROM_ENV}={n:?} is not a whole number"))
                })?,
                Err(_) => 1,
            },
            last: Instant::now(),
            place: (1, 1),
        })
    }

    /// The run moves on to tenant `number` (from 1) of `of`.
    pub fn tenant(&mut self, number: usize, of: usize) {
        self.place = (number, of);
    }

    /// One line, unless one was printed too recently. `phase` is what is
    /// being done: "copy" and "delete" with `keys` (and `bytes`) how much of
    /// the tenant so far; "checked" once a tenant's digest and check are
    /// done, with the place the number of tenants done so far.
    pub fn line(&mut self, phase: &str, tenant: &str, keys: Option<u64>, bytes: Option<u64>) {
        if self.show == Show::Never || self.last.elapsed() < PROGRESS_EVERY {
            return;
        }
        self.last = Instant::now();
        let (number, of) = self.place;
        let text = match self.show {
            Show::Json if phase == "checked" => serde_json::json!({
                "progress": phase,
                "tenant": tenant,
                "tenants_checked": number,
                "tenants": of,
            })
            .to_string(),
            Show::Json => serde_json::json!({
                "progress": phase,
                "tenant": tenant,
                "tenant_number": number,
                "tenants": of,
                "keys": keys,
                "bytes": bytes,
            })
            .to_string(),
            _ => match phase {
                "checked" => format!(
                    "leasehold {}: {tenant} checked ({number} of {of} tenants checked)",
                    self.verb
                ),
                "delete" => format!(
                    "leasehold {}: {tenant}: {} keys deleted",
                    self.verb,
                    keys.unwrap_or(0)
                ),
                _ => format!(
                    "leasehold {}: {tenant} (tenant {number} of {of}): {} keys ({} bytes) written",
                    self.verb,
                    keys.unwrap_or(0),
                    bytes.unwrap_or(0)
                ),
            },
        };
        // A progress line that cannot be written is not worth failing for.
        let _ = writeln!(std::io::stderr().lock(), "{text}");
    }

    /// Says, whenever lines are shown, that the keys are in and `tenants`
    /// are being verified, `at_once` at a time: checks are slow and say
    /// nothing until each tenant's is done.
    pub fn checking(&mut self, tenants: usize, at_once: usize) {
        let text = match self.show {
            Show::Never => return,
            Show::Json => serde_json::json!({
                "progress": "check",
                "tenants": tenants,
                "at_once": at_once,
            })
            .to_string(),
            Show::Text => format!(
                "leasehold {}: the keys are in; digests and check of {tenants} tenants, {at_once} at a time",
                self.verb
            ),
        };
        self.last = Instant::now();
        let _ = writeln!(std::io::stderr().lock(), "{text}");
    }

    /// One batch written (into the load's transaction, or a delete's
    /// own): a progress line (if due), then the test hooks.
    pub fn batch_done(
        &mut self,
        phase: &str,
        tenant: &str,
        keys: u64,
        bytes: Option<u64>,
    ) -> Result<(), MoveError> {
        self.batches += 1;
        self.line(phase, tenant, Some(keys), bytes);
        if self.stop_after.is_some_and(|n| self.batches >= n) {
            return Err(MoveError::Stopped(self.batches));
        }
        if phase == "copy"
            && self.place.0 >= self.hold_from
            && let Some(fifo) = self.hold.take()
        {
            // Opening blocks until the test opens the pipe to write; the
            // read ends when it closes it.
            let io = |source| MoveError::Io {
                what: format!("wait on {}", fifo.display()),
                source,
            };
            let mut pipe = std::fs::File::open(&fifo).map_err(io)?;
            std::io::copy(&mut pipe, &mut std::io::sink()).map_err(io)?;
        }
        Ok(())
    }
}
