//! Recurring schedules as pure calendar arithmetic: a spec (a cron
//! expression or an interval, an IANA time zone, optional start and end,
//! policies for daylight-saving gaps and repeats, jitter, overlap and
//! catch-up) checked into a [`Schedule`], whose occurrences are computed
//! the same on every host from the embedded time zone database
//! ([`tzdb_version`]) and jiff's civil arithmetic.
//!
//! This module owns what instants a schedule names and nothing else: it
//! never reads a clock (every "now" and "after" is the caller's), storage,
//! the environment or a random source, and it decides nothing about timers,
//! claims or what has fired; the schedule verbs do, with these answers.
//!
//! - [`Schedule::next_after`]: the first occurrence strictly after an
//!   instant; [`Schedule::occurrences`]: the first `n` from an instant on.
//! - [`Schedule::fire_at`]: an occurrence's jittered firing instant.
//! - [`Schedule::catch_up`]: which missed occurrences fire after downtime.
//! - [`Overlap::admit`]: what an occurrence due during a running one does.

mod catch_up;
mod cron;
mod error;
mod jitter;
mod policy;
mod schedule;
mod search;
mod walk;
mod zone;

#[cfg(test)]
mod tests;

pub use catch_up::CatchUpPlan;
pub use cron::Cron;
pub use error::{CronError, CronField, CronProblem, SpecError};
pub use jitter::{MAX_JITTER_MS, jitter_offset};
pub use policy::{
    Admission, CatchUp, DEFAULT_CATCH_UP_WINDOW_MS, GapPolicy, Overlap, RepeatPolicy,
};
pub use schedule::{Occurrences, Rule, Schedule, ScheduleSpec};
pub use zone::tzdb_version;
