//! The subcommands, a group per file as wasmtime's `src/commands/` has
//! them: each group owns its clap definition, the calls it makes and the
//! rendering of its answers. A command that calls a verb is named as the
//! verb is in the WIT (`host/src/verbs.rs`); an older spelling stays as an
//! alias for a release. This module only lists the commands, says which
//! verbs each calls and dispatches; it must never make a call or render an
//! answer itself.

pub mod admin;
pub mod backup;
pub mod changes;
pub mod component;
pub mod copy;
pub mod demo;
pub mod feed;
pub mod job_answers;
pub mod jobs;
pub mod kind;
pub mod queue;
pub mod restore;
pub mod run;
pub mod schedule_answers;
pub mod schedules;
pub mod search;
pub mod serve;
pub mod stats;
pub mod subscription_answers;
pub mod subscriptions;
pub mod task;
pub mod tenant;
pub mod timer;
pub mod timer_moves;
pub mod token;
pub mod views;

use std::io::Write;

use clap::Subcommand;

use crate::context::Context;
use crate::error::CliError;

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Open, read, claim and settle one task
    #[command(subcommand)]
    Task(task::TaskCommand),
    /// Queued tasks an actor with these roles may claim, urgent first
    Queue(queue::Queue),
    /// The tasks an actor holds, soonest lease end first, claims without a
    /// lease last
    Held(queue::Held),
    /// Define, read, list and remove task kinds: the outcomes a decision on
    /// a task of the kind may have
    #[command(subcommand)]
    Kind(kind::KindCommand),
    /// Tasks past their due time that still await expiry, earliest first
    Overdue(queue::Overdue),
    /// Tasks that match a filter (state, kind, role, assignee, case, run,
    /// priority, due and creation times), a page at a time in an order;
    /// prints the cursor of the next page
    Search(search::Search),
    /// How many tasks match a filter (the same flags as search)
    Count(search::Count),
    /// Save, read, list and delete views: named searches the tenant's
    /// users share
    #[command(subcommand)]
    View(views::ViewCommand),
    /// Bulk jobs: one action (release, assign, a new priority or due time,
    /// escalate, withdraw) over every task a filter matches, a task a
    /// transaction, durable and resumable; start, run, get, list, cancel
    #[command(subcommand, visible_alias = "job")]
    Jobs(jobs::JobsCommand),
    /// Every task of a case, in any state, oldest first
    #[command(visible_alias = "case")]
    ForCase(queue::ForCase),
    /// Arm, claim and disarm durable timers
    #[command(subcommand)]
    Timer(timer::TimerCommand),
    /// Seal a run, or ask whether it is sealed
    #[command(subcommand)]
    Run(run::RunCommand),
    /// Add, read, pause, resume, trigger and remove recurring schedules
    /// (cron or interval, in an IANA time zone) whose occurrences are
    /// timers of a run
    #[command(subcommand)]
    Schedule(schedules::ScheduleCommand),
    /// Add, read, change, pause, resume, re-key, replay and remove webhook
    /// subscriptions: where the tenant's changes are pushed, signed, and
    /// how far deliveries have come
    #[command(subcommand)]
    Subscription(subscriptions::SubscriptionCommand),
    /// Pending and leased tasks, armed timers, and the next due timer and
    /// lease end for the tenant; or one of them
    Stats(stats::Stats),
    /// Run the consistency check; exits 1 when it finds any discrepancy
    Check,
    /// The tenant's feed of changes: every committed change of a task or a
    /// timer, once, in commit order per task. Prints where to read on; exits
    /// 1 when what follows --after was trimmed
    #[command(visible_alias = "events")]
    Feed(feed::Feed),
    /// Give the tasks of a database laid out before search their search
    /// entries and counts, a batch a call, until every one has them
    /// (`serve`'s sweeper does this by itself); search and count answer
    /// once it is done
    BuildSearchIndex(search::BuildSearchIndex),
    /// Remove old feed entries, with the history they cover (never a task's
    /// last history entry); give --before, --keep or both. Runs until
    /// nothing more is due
    Trim(changes::Trim),
    /// Repair a database file whose writer stopped without closing it
    /// (killed, or the machine lost power); a file closed cleanly is left
    /// as it is. Reading commands do this by themselves when they may write
    /// the file
    Repair,
    /// Walk through a short narrated scenario on a fresh database (a
    /// temporary file unless --db names a new one)
    Demo,
    /// Serve the HTTP API (JSON under /v1) until SIGTERM or SIGINT
    Serve(Box<serve::Serve>),
    /// Make credentials for `serve`
    #[command(subcommand)]
    Token(token::TokenCommand),
    /// Copy tenants' keys from one database to another (a redb file or a
    /// PostgreSQL URL each): the tenants named with --tenant, else every
    /// tenant of the source, all in one transaction on the target. Refuses
    /// a target tenant that is neither empty nor already exactly the
    /// source (writing nothing); ends with `check` and a digest of both
    /// sides, and exits 1 if they disagree
    Copy(copy::Copy),
    /// Export, import or delete one tenant's keys (--tenant)
    #[command(subcommand)]
    Tenant(tenant::TenantCommand),
    /// Back up every tenant (or those named with --tenant) to one file:
    /// from a running `serve` (--server, with an operator's token) while it
    /// serves, or from a database nobody holds (--db). Each tenant is one
    /// snapshot taken after the backup began; every digest is checked as
    /// the file is written
    Backup(backup::Backup),
    /// Restore a backup (every tenant, or those named with --tenant) into a
    /// database whose tenants of those names are empty: every digest is
    /// checked before anything is written, and each tenant ends with
    /// `check` and a digest of what was written
    Restore(restore::Restore),
    /// Write the component this binary embeds to a file and print its
    /// SHA-256, so another host (JavaScript, Python) can run the same bytes
    Component(component::Component),
}

impl Command {
    /// The verbs the command calls, by their WIT names: the context opens
    /// the database read-only unless one of them writes. A command that
    /// moves keys, serves or narrates opens what it needs itself and calls
    /// no verb through the context.
    pub fn verbs(&self) -> &'static [&'static str] {
        match self {
            Command::Task(c) => c.verbs(),
            Command::Queue(_) => &["queue"],
            Command::Held(_) => &["held"],
            Command::Kind(c) => c.verbs(),
            Command::Overdue(_) => &["overdue"],
            Command::Search(_) => &["search"],
            Command::Count(_) => &["count"],
            Command::View(c) => c.verbs(),
            Command::BuildSearchIndex(_) => &["build-search-index"],
            Command::Jobs(c) => c.verbs(),
            Command::ForCase(_) => &["for-case"],
            Command::Timer(c) => c.verbs(),
            Command::Run(c) => c.verbs(),
            Command::Schedule(c) => c.verbs(),
            Command::Subscription(c) => c.verbs(),
            Command::Stats(c) => c.verbs(),
            Command::Check => &["check"],
            Command::Feed(_) => &["feed"],
            Command::Trim(_) => &["trim"],
            Command::Repair
            | Command::Demo
            | Command::Serve(_)
            | Command::Token(_)
            | Command::Copy(_)
            | Command::Tenant(_)
            | Command::Backup(_)
            | Command::Restore(_)
            | Command::Component(_) => &[],
        }
    }

    /// Whether the command takes `--tenant` more than once.
    pub fn takes_several_tenants(&self) -> bool {
        matches!(
            self,
            Command::Copy(_) | Command::Backup(_) | Command::Restore(_)
        )
    }

    /// Runs the command, writing its answer to `out`; answers the exit
    /// code.
    pub fn run(&self, cx: &Context, out: &mut dyn Write) -> Result<u8, CliError> {
        match self {
            Command::Task(c) => c.run(cx, out),
            Command::Queue(c) => c.run(cx, out),
            Command::Held(c) => c.run(cx, out),
            Command::Kind(c) => c.run(cx, out),
            Command::Overdue(c) => c.run(cx, out),
            Command::Search(c) => c.run(cx, out),
            Command::Count(c) => c.run(cx, out),
            Command::View(c) => c.run(cx, out),
            Command::BuildSearchIndex(c) => c.run(cx, out),
            Command::Jobs(c) => c.run(cx, out),
            Command::ForCase(c) => c.run(cx, out),
            Command::Timer(c) => c.run(cx, out),
            Command::Run(c) => c.run(cx, out),
            Command::Schedule(c) => c.run(cx, out),
            Command::Subscription(c) => c.run(cx, out),
            Command::Stats(c) => c.run(cx, out),
            Command::Check => admin::check(cx, out),
            Command::Feed(c) => c.run(cx, out),
            Command::Trim(c) => c.run(cx, out),
            Command::Repair => admin::repair(cx, out),
            Command::Demo => demo::run(cx, out),
            Command::Serve(c) => c.run(cx),
            Command::Token(c) => c.run(cx, out),
            Command::Copy(c) => c.run(cx, out),
            Command::Tenant(c) => c.run(cx, out),
            Command::Backup(c) => c.run(cx, out),
            Command::Restore(c) => c.run(cx, out),
            Command::Component(c) => c.run(cx, out),
        }
    }
}
