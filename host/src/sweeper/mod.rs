//! The sweeper: keeping time for an engine's tenants, so that lapsed leases
//! come back to the queue, overdue tasks act on their `on-expiry` and the
//! change record is trimmed to its retention, without anyone calling.
//!
//! What it does for a tenant is a list of duties ([`Duty`]): each names the
//! next instant it cares about for a tenant (the earliest lease end, the
//! earliest due time of a task still owed its expiry, the next trim of a
//! tenant that committed), and acts for one turn within the turn's call
//! budget. The standard duties ([`standard_duties`]) are `reclaim-lapsed`,
//! `expire-overdue`, with a retention trimming, and building the search
//! index of a keyspace laid out before search; an embedder (or
//! `serve`) adds its own with [`Sweeper::start_with`]. For each tenant it
//! knows, the sweeper keeps the earliest instant any duty names, sleeps
//! until the earliest over all tenants, and at that instant gives that
//! tenant alone its turn. A commit (in this process, or in another on a
//! shared PostgreSQL database) may move a tenant's instants, so the tenants
//! it names are read again; nothing else is read while nothing is due.
//!
//! Before its first turn it logs, per tenant it knows, what that turn would
//! do (each duty foresees its own; the task duties as a [`FirstSweepPlan`],
//! read only), and waits `first_sweep_after`: on a database nobody swept for
//! a while, the first sweep may move many tasks at once, and an operator
//! should see that before it happens.
//!
//! Tenants take turns. A tenant whose instant has come joins the back of a
//! line of due tenants; its turn makes at most `calls_per_turn` calls over
//! all its duties; a tenant with more to do then goes to the back of the
//! line again, behind every tenant that came due during its turn. So one
//! tenant's backlog, however large (tasks to move, or a record to trim),
//! holds up another tenant's sweep by at most one turn. The schedule keeps
//! one entry per tenant (the instant it waits for, or its place in the
//! line), so it grows with the tenants it knows and never with their
//! commits.
//!
//! The tenants it knows are those it is given, those its backend lists when
//! it starts (so a tenant nobody has called since a restart is still
//! swept), and those it hears commit. The files below: the handle
//! (`handle`), its options (`options`), what it reports (`report`), the
//! contract of a duty (`duty`), the standard duties (`tasks`, `retention`, `search`),
//! the bulk jobs duty an embedder adds (`jobs`) and the task duties' first-sweep plan (`plan`), the loop (`schedule`),
//! its timetable (`timetable`) and what its threads share (`bell`). This
//! file only names them and what is public.

mod bell;
mod duty;
mod handle;
mod jobs;
mod options;
mod plan;
mod report;
mod retention;
mod schedule;
mod search;
mod tasks;
mod timetable;

pub use duty::{Duty, Turn};
pub use handle::{Sweeper, standard_duties};
pub use jobs::StepJobs;
pub use options::{OnSweep, Retention, SweeperError, SweeperOptions};
pub use plan::{FirstSweepPlan, PLAN_LIMIT};
pub use report::{SweepReport, SweeperStats};
