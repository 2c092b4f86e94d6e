//! `leasehold task …`: one task's life, each command named as the verb it
//! calls (`task reclaim-lapsed`, `task entry-place`; the old spellings are
//! aliases for a release). The commands sit by what they do: opening and
//! reading (`open`), the claim ladder (`claim`), a worker's batches
//! (`batch`), settling (`settle`),
//! changes after open (`change`), `--if-revision` (`guard`), and the
//! sweeps over every task (`sweep`); a task's history and its place in
//! the feed are the `changes` group's. This module only lists them and
//! dispatches.

mod batch;
mod change;
pub use change::PriorityArg;
mod claim;
mod guard;
mod open;
mod settle;
mod shown;
mod sweep;
mod timeline;

use std::io::Write;

use clap::Subcommand;

use crate::commands::changes::{EntryPlace, History};
use crate::context::Context;
use crate::error::CliError;

#[derive(Debug, Subcommand)]
pub enum TaskCommand {
    /// Open a task from JSON (a file, or standard input for - or nothing)
    ///
    /// Required fields: id, run, kind. Optional (null is the same as
    /// leaving it out): case, justification (any JSON document, inline or
    /// as a string of its text; default {}), candidate_roles, escalate_to,
    /// excluded_actors (default empty), priority (low|normal|high|urgent,
    /// default normal), on_expiry (deny|escalate|proceed, default deny),
    /// created_at (default now), due_at. Times are RFC 3339 strings or
    /// integer milliseconds. If the id exists, the stored task stands
    /// unchanged (first open wins).
    Open(open::Open),
    /// Show one task: its fields, revision and decision
    #[command(visible_alias = "show")]
    Get(open::Get),
    /// Reserve a task for an actor, until released or under a lease
    Claim(claim::Claim),
    /// Claim the first task of the actor's queue (same order and eligibility
    /// as `queue`); says so when the queue is empty
    ClaimNext(claim::ClaimNext),
    /// Claim up to --count heads of the actor's queue in one call
    ClaimBatch(batch::ClaimBatch),
    /// Settle the tasks the actor finished, each answered on its own, then
    /// claim up to --count more, in one call
    SettleAndClaim(batch::SettleAndClaim),
    /// Extend the lease of a task the actor holds under one, to end a lease
    /// from now
    Renew(claim::Renew),
    /// Put the tasks whose lease ended at or before now back in the queue
    #[command(visible_alias = "reclaim")]
    ReclaimLapsed(sweep::ReclaimLapsed),
    /// Act on the tasks past their due time by their on-expiry policy:
    /// escalate them, or settle them expired
    #[command(visible_alias = "expire")]
    ExpireOverdue(sweep::ExpireOverdue),
    /// Give back a task the actor holds
    Release(claim::Release),
    /// Move a claim from one holder to another actor
    TakeOver(claim::TakeOver),
    /// Settle a pending task; a task already settled is left as it stands
    Settle(settle::Settle),
    /// Escalate a pending task: clear its holder and widen its audience
    Escalate(settle::Escalate),
    /// Every change of a task, oldest first: who, what, when
    History(History),
    /// Where entry SEQ of a task's history sits in the feed: its writer
    /// slot and its number there (none when that entry is not kept)
    #[command(visible_alias = "place")]
    EntryPlace(EntryPlace),
    /// Withdraw the listed tasks that belong to RUN and are still pending
    WithdrawRun(settle::WithdrawRun),
    /// Change a pending task's due time, priority, roles, escalation roles,
    /// excluded actors, expiry policy, reminders or escalation chain (each
    /// by open's rules); excluding the holder ends the claim
    Update(change::Update),
    /// Claim a task for a named actor, from whoever holds it
    Assign(change::Assign),
    /// Put a task back in the queue, from whoever holds it
    Unassign(change::Unassign),
    /// Hand a task the actor holds on to another actor
    Delegate(change::Delegate),
    /// Add a note to a task's history
    Note(change::Note),
}

impl TaskCommand {
    /// The verbs the command calls, by their WIT names.
    pub fn verbs(&self) -> &'static [&'static str] {
        match self {
            // `get` only to say whether the task was there before.
            TaskCommand::Open(_) => &["get", "open"],
            TaskCommand::Get(_) => &["get"],
            TaskCommand::Claim(_) => &["claim"],
            TaskCommand::ClaimNext(_) => &["claim-next"],
            TaskCommand::ClaimBatch(_) => &["claim-batch"],
            TaskCommand::SettleAndClaim(_) => &["settle-and-claim"],
            TaskCommand::Renew(_) => &["renew"],
            TaskCommand::ReclaimLapsed(_) => &["reclaim-lapsed"],
            TaskCommand::ExpireOverdue(_) => &["expire-overdue"],
            TaskCommand::Release(_) => &["release"],
            TaskCommand::TakeOver(_) => &["take-over"],
            TaskCommand::Settle(_) => &["settle"],
            TaskCommand::Escalate(_) => &["escalate"],
            TaskCommand::History(_) => &["history"],
            TaskCommand::EntryPlace(_) => &["entry-place"],
            TaskCommand::WithdrawRun(_) => &["withdraw-run"],
            TaskCommand::Update(_) => &["update"],
            TaskCommand::Assign(_) => &["assign"],
            TaskCommand::Unassign(_) => &["unassign"],
            TaskCommand::Delegate(_) => &["delegate"],
            TaskCommand::Note(_) => &["note"],
        }
    }

    pub fn run(&self, cx: &Context, out: &mut dyn Write) -> Result<u8, CliError> {
        match self {
            TaskCommand::Open(c) => c.run(cx, out),
            TaskCommand::Get(c) => c.run(cx, out),
            TaskCommand::Claim(c) => c.run(cx, out),
            TaskCommand::ClaimNext(c) => c.run(cx, out),
            TaskCommand::ClaimBatch(c) => c.run(cx, out),
            TaskCommand::SettleAndClaim(c) => c.run(cx, out),
            TaskCommand::Renew(c) => c.run(cx, out),
            TaskCommand::ReclaimLapsed(c) => c.run(cx, out),
            TaskCommand::ExpireOverdue(c) => c.run(cx, out),
            TaskCommand::Release(c) => c.run(cx, out),
            TaskCommand::TakeOver(c) => c.run(cx, out),
            TaskCommand::Settle(c) => c.run(cx, out),
            TaskCommand::Escalate(c) => c.run(cx, out),
            TaskCommand::History(c) => c.run(cx, out),
            TaskCommand::EntryPlace(c) => c.run(cx, out),
            TaskCommand::WithdrawRun(c) => c.run(cx, out),
            TaskCommand::Update(c) => c.run(cx, out),
            TaskCommand::Assign(c) => c.run(cx, out),
            TaskCommand::Unassign(c) => c.run(cx, out),
            TaskCommand::Delegate(c) => c.run(cx, out),
            TaskCommand::Note(c) => c.run(cx, out),
        }
    }
}
