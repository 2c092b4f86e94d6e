//! The typed verbs, one method per WIT export, scoped to one tenant. It owns
//! what an answer may be; it must never hand a caller an answer it has not
//! checked, and never reach storage except through a call.
//!
//! Each method is one call of the component in one transaction. Answers are
//! checked for what the contract rules out (a task under another id, a claim
//! answered for someone else, more entries than the limit asked for, one
//! task twice) before they reach the caller: a faulty or hostile guest is
//! reported as a sandbox failure, never passed on.
//!
//! A call names its verb (see [`crate::verbs`]) and spells the answer's WIT
//! type; the arguments and the answer are checked against the component's
//! signature of that one function when the call runs. The answer is checked
//! before the call's writes commit, so a faulty guest's answer commits
//! nothing.

use leasehold_guest::model::{
    ArmOutcome, ClaimError, Discrepancy, FeedPlace, FeedRead, HistoryEntry, Lease, Page,
    QueueQuery, SealOutcome, Settlement, StoreError, Task, TaskState, Timer, Timestamp,
    TrimOutcome,
};

use std::sync::Arc;
use std::time::Instant;

use wasmtime::Store;

use crate::bindings::{WitQueueQuery, wit};
use crate::call::call;
use crate::ctx::{CallCtx, Export};
use crate::error::{Error, SandboxError};
use crate::runtime::Shared;
use crate::verbs::Verb;

/// One tenant of an [`Engine`](crate::Engine). Cheap to clone; share it
/// between threads.
#[derive(Clone)]
pub struct Tenant {
    shared: Arc<Shared>,
    /// Shared with the instances kept for this tenant (see `keep`).
    name: Arc<str>,
    /// The caller's deadline (see [`Tenant::until`]).
    until: Option<Instant>,
}

impl std::fmt::Debug for Tenant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tenant")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

fn strings(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| (*s).to_owned()).collect()
}

fn malformed(what: String) -> Error {
    Error::Sandbox(SandboxError::Malformed(what))
}

/// A single-task answer must be the task that was asked about.
fn same_task(task: wit::Task, id: &str) -> Result<Task, Error> {
    if task.id != id {
        return Err(malformed(format!(
            "asked for task {id}, answered task {}",
            task.id
        )));
    }
    Ok(task.into())
}

/// A claim's answer must be the task, now held by the claimant.
fn held_task(task: wit::Task, id: &str, actor: &str) -> Result<Task, Error> {
    let task = same_task(task, id)?;
    held(task, actor)
}

fn held(task: Task, actor: &str) -> Result<Task, Error> {
    if task.state != TaskState::Claimed || task.assignee.as_deref() != Some(actor) {
        return Err(malformed(format!(
            "answered task {} as {} by {:?}, not claimed by {actor}",
            task.id, task.state, task.assignee
        )));
    }
    Ok(task)
}

/// Tasks a verb moved must be distinct: one task moved twice in one call is
/// no answer the rules can give.
fn distinct(tasks: &[Task], what: &str) -> Result<(), Error> {
    for (i, t) in tasks.iter().enumerate() {
        if tasks[..i].iter().any(|u| u.id == t.id) {
            return Err(malformed(format!("{what} answered task {} twice", t.id)));
        }
    }
    Ok(())
}

fn at_most<T>(list: Vec<T>, limit: u32, what: &str) -> Result<Vec<T>, Error> {
    if list.len() > limit as usize {
        return Err(malformed(format!(
            "{what} answered {} entries for a limit of {limit}",
            list.len()
        )));
    }
    Ok(list)
}

fn page(p: wit::Page, limit: u32, what: &str) -> Result<Page, Error> {
    let p = Page::from(p);
    Ok(Page {
        tasks: at_most(p.tasks, limit, what)?,
        next: p.next,
    })
}

type StoreAnswer<T> = Result<T, wit::StoreError>;
type ClaimAnswer<T> = Result<T, wit::ClaimError>;

fn store<T>(a: StoreAnswer<T>) -> Result<T, Error> {
    a.map_err(|e| Error::Store(StoreError::from(e)))
}

fn claim<T>(a: ClaimAnswer<T>) -> Result<T, Error> {
    a.map_err(|e| Error::from(ClaimError::from(e)))
}

fn wit_query(query: &QueueQuery) -> WitQueueQuery {
    WitQueueQuery {
        roles: query.roles.clone(),
        actor: query.actor.clone(),
        limit: query.limit,
        after: query.after.clone(),
    }
}

impl Tenant {
    pub(crate) fn new(shared: Arc<Shared>, name: Arc<str>) -> Self {
        Tenant {
            shared,
            name,
            until: None,
        }
    }

    /// This tenant, for calls that must be decided by `deadline`: a call
    /// still waiting for its turn, running, or about to commit when the
    /// deadline passes commits nothing and answers [`Error::DeadlinePassed`],
    /// so its caller may make it again. A call whose commit has begun by
    /// then is not stopped: it answers its true outcome, late. The
    /// sandbox's own deadlines still apply.
    pub fn until(&self, deadline: Instant) -> Tenant {
        Tenant {
            until: Some(deadline),
            ..self.clone()
        }
    }

    /// One call of `verb` on this tenant (see [`crate::call`]).
    fn call<R, T>(
        &self,
        verb: Verb,
        f: impl Fn(&Export, &mut Store<CallCtx>) -> wasmtime::Result<R>,
        check: impl Fn(R) -> Result<T, Error>,
    ) -> Result<T, Error> {
        call(&self.shared, &self.name, self.until, verb, f, check)
    }

    /// The tenant this handle is scoped to.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Creates a task; first open wins (see the contract).
    pub fn open(&self, task: &Task) -> Result<Task, Error> {
        let t = wit::Task::from(task.clone());
        self.call(
            Verb::Open,
            |x, s| x.call(s, (&t,)),
            |a: StoreAnswer<wit::Task>| same_task(store(a)?, &task.id),
        )
    }

    /// Task `id`, if there is one.
    pub fn get(&self, id: &str) -> Result<Option<Task>, Error> {
        self.call(
            Verb::Get,
            |x, s| x.call(s, (id,)),
            |a: StoreAnswer<Option<wit::Task>>| store(a)?.map(|t| same_task(t, id)).transpose(),
        )
    }

    /// Reserves the task for `actor`: under `lease` until its end, or
    /// without one until released.
    pub fn claim(
        &self,
        id: &str,
        actor: &str,
        roles: &[&str],
        lease: Option<Lease>,
    ) -> Result<Task, Error> {
        let roles = strings(roles);
        let lease = lease.map(wit::Lease::from);
        self.call(
            Verb::Claim,
            |x, s| x.call(s, (id, actor, roles.as_slice(), lease)),
            |a: ClaimAnswer<wit::Task>| held_task(claim(a)?, id, actor),
        )
    }

    /// Returns a task `actor` holds to the queue (`escalated` if it ever
    /// was, else `open`); anyone else is refused with `not-held`.
    pub fn release(&self, id: &str, actor: &str) -> Result<(), Error> {
        self.call(Verb::Release, |x, s| x.call(s, (id, actor)), claim::<()>)
    }

    /// Moves a claim from `from` to `actor`, who holds it under `lease` or,
    /// without one, until released.
    pub fn take_over(
        &self,
        id: &str,
        from: &str,
        actor: &str,
        roles: &[&str],
        lease: Option<Lease>,
    ) -> Result<Task, Error> {
        let roles = strings(roles);
        let lease = lease.map(wit::Lease::from);
        self.call(
            Verb::TakeOver,
            |x, s| x.call(s, (id, from, actor, roles.as_slice(), lease)),
            |a: ClaimAnswer<wit::Task>| held_task(claim(a)?, id, actor),
        )
    }

    /// The holder of a leased claim moves its end to `now + lease_ms`.
    pub fn renew(
        &self,
        id: &str,
        actor: &str,
        now: Timestamp,
        lease_ms: u32,
    ) -> Result<Task, Error> {
        self.call(
            Verb::Renew,
            |x, s| x.call(s, (id, actor, now, lease_ms)),
            |a: ClaimAnswer<wit::Task>| held_task(claim(a)?, id, actor),
        )
    }

    /// Returns up to `limit` tasks whose lease ended at or before `now` to
    /// the queue, answering them as they now stand.
    pub fn reclaim_lapsed(&self, now: Timestamp, limit: u32) -> Result<Vec<Task>, Error> {
        self.call(
            Verb::ReclaimLapsed,
            |x, s| x.call(s, (now, limit)),
            |a: StoreAnswer<Vec<wit::Task>>| {
                let tasks: Vec<Task> = at_most(store(a)?, limit, "reclaim-lapsed")?
                    .into_iter()
                    .map(Into::into)
                    .collect();
                distinct(&tasks, "reclaim-lapsed")?;
                if let Some(t) = tasks
                    .iter()
                    .find(|t| !t.state.is_queued() || t.assignee.is_some())
                {
                    return Err(malformed(format!(
                        "reclaim-lapsed answered task {} as {} by {:?}, not back in the queue",
                        t.id, t.state, t.assignee
                    )));
                }
                Ok(tasks)
            },
        )
    }

    /// Acts on up to `limit` tasks overdue at `now`, each by its
    /// `on-expiry` (escalated, or settled `expired`), answering them as they
    /// now stand. No task is acted on twice, however many sweepers call it.
    pub fn expire_overdue(&self, now: Timestamp, limit: u32) -> Result<Vec<Task>, Error> {
        self.call(
            Verb::ExpireOverdue,
            |x, s| x.call(s, (now, limit)),
            |a: StoreAnswer<Vec<wit::Task>>| {
                let tasks: Vec<Task> = at_most(store(a)?, limit, "expire-overdue")?
                    .into_iter()
                    .map(Into::into)
                    .collect();
                distinct(&tasks, "expire-overdue")?;
                if let Some(t) = tasks.iter().find(|t| {
                    !matches!(t.state, TaskState::Escalated | TaskState::Expired)
                        || (t.state == TaskState::Escalated && t.assignee.is_some())
                }) {
                    return Err(malformed(format!(
                        "expire-overdue answered task {} as {} by {:?}, neither escalated nor expired",
                        t.id, t.state, t.assignee
                    )));
                }
                Ok(tasks)
            },
        )
    }

    /// Claims the head of `query`'s queue for `query.actor` (required), under
    /// `lease` if given; `None` when the queue is empty.
    pub fn claim_next(
        &self,
        query: &QueueQuery,
        lease: Option<Lease>,
    ) -> Result<Option<Task>, Error> {
        let q = wit_query(query);
        let lease = lease.map(wit::Lease::from);
        self.call(
            Verb::ClaimNext,
            |x, s| x.call(s, (&q, lease)),
            |a: StoreAnswer<Option<wit::Task>>| match store(a)? {
                None => Ok(None),
                Some(t) => {
                    // Only an actor can hold a task; without one the guest
                    // must have answered `invalid`.
                    let actor = query.actor.as_deref().unwrap_or_default();
                    held(t.into(), actor).map(Some)
                }
            },
        )
    }

    /// Compare-and-set from pending: `true` when this call settled the task.
    /// With `holder`, the task must be claimed by exactly that actor, else
    /// [`Refusal::NotHeld`](crate::Refusal::NotHeld) and nothing changes.
    pub fn settle(
        &self,
        id: &str,
        settlement: Settlement,
        holder: Option<&str>,
    ) -> Result<bool, Error> {
        let settlement = wit::Settlement::from(settlement);
        self.call(
            Verb::Settle,
            |x, s| x.call(s, (id, settlement, holder)),
            claim::<bool>,
        )
    }

    /// Withdraws each pending task of `run` among `awaited`, ignoring the
    /// rest; answers how many moved.
    pub fn withdraw_run(&self, run: &str, awaited: &[&str]) -> Result<u32, Error> {
        let awaited = strings(awaited);
        self.call(
            Verb::WithdrawRun,
            |x, s| x.call(s, (run, awaited.as_slice())),
            |a: StoreAnswer<u32>| {
                let moved = store(a)?;
                if moved as usize > awaited.len() {
                    return Err(malformed(format!(
                        "withdraw-run moved {moved} of {} awaited tasks",
                        awaited.len()
                    )));
                }
                Ok(moved)
            },
        )
    }

    /// Escalates a pending task: `escalated`, its holder and lease cleared,
    /// `escalate_to` added to its candidate roles. A settled task is
    /// answered as it stands.
    pub fn escalate(&self, id: &str) -> Result<Task, Error> {
        self.call(
            Verb::Escalate,
            |x, s| x.call(s, (id,)),
            |a: StoreAnswer<wit::Task>| same_task(store(a)?, id),
        )
    }

    /// One page of the queued tasks the caller is eligible for, urgent
    /// first, then oldest, then by id.
    pub fn queue(&self, query: &QueueQuery) -> Result<Page, Error> {
        let q = wit_query(query);
        self.call(
            Verb::Queue,
            |x, s| x.call(s, (&q,)),
            |a: StoreAnswer<wit::Page>| page(store(a)?, query.limit, "queue"),
        )
    }

    /// One page of every task of `case`, in any state, oldest first.
    pub fn for_case(&self, case: &str, limit: u32, after: Option<&str>) -> Result<Page, Error> {
        self.call(
            Verb::ForCase,
            |x, s| x.call(s, (case, limit, after)),
            |a: StoreAnswer<wit::Page>| page(store(a)?, limit, "for-case"),
        )
    }

    /// Pending tasks (claimed ones count). One counter read.
    pub fn open_count(&self) -> Result<u64, Error> {
        self.call(Verb::OpenCount, |x, s| x.call(s, ()), store::<u64>)
    }

    /// Tasks claimed under a lease, lapsed or not. One counter read.
    pub fn leased_count(&self) -> Result<u64, Error> {
        self.call(Verb::LeasedCount, |x, s| x.call(s, ()), store::<u64>)
    }

    /// The earliest lease end among leased claims.
    pub fn next_lease_end(&self) -> Result<Option<Timestamp>, Error> {
        self.call(
            Verb::NextLeaseEnd,
            |x, s| x.call(s, ()),
            store::<Option<Timestamp>>,
        )
    }

    /// Tasks due at or before `now` that still await expiry, earliest due
    /// first, at most `limit`.
    pub fn overdue(&self, now: Timestamp, limit: u32) -> Result<Vec<Task>, Error> {
        self.call(
            Verb::Overdue,
            |x, s| x.call(s, (now, limit)),
            |a: StoreAnswer<Vec<wit::Task>>| {
                let tasks = at_most(store(a)?, limit, "overdue")?;
                Ok(tasks.into_iter().map(Into::into).collect())
            },
        )
    }

    /// Arms a timer; the first arming of a `(run, effect)` wins, and a
    /// sealed run gets none.
    pub fn arm(&self, timer: &Timer) -> Result<ArmOutcome, Error> {
        let t = wit::Timer::from(timer.clone());
        self.call(
            Verb::Arm,
            |x, s| x.call(s, (&t,)),
            |a: StoreAnswer<wit::ArmOutcome>| Ok(store(a)?.into()),
        )
    }

    /// Claims up to `limit` due timers under a lease of `lease_ms`.
    pub fn claim_due(
        &self,
        now: Timestamp,
        limit: u32,
        lease_ms: u32,
    ) -> Result<Vec<Timer>, Error> {
        self.call(
            Verb::ClaimDue,
            |x, s| x.call(s, (now, limit, lease_ms)),
            |a: StoreAnswer<Vec<wit::Timer>>| {
                let timers: Vec<Timer> = at_most(store(a)?, limit, "claim-due")?
                    .into_iter()
                    .map(Into::into)
                    .collect();
                for (i, t) in timers.iter().enumerate() {
                    if timers[..i]
                        .iter()
                        .any(|u| u.run == t.run && u.effect == t.effect)
                    {
                        return Err(malformed(format!(
                            "claim-due answered timer {}/{} twice",
                            t.run, t.effect
                        )));
                    }
                }
                Ok(timers)
            },
        )
    }

    /// Retires one timer; answers whether it existed.
    pub fn disarm(&self, run: &str, effect: &str) -> Result<bool, Error> {
        self.call(Verb::Disarm, |x, s| x.call(s, (run, effect)), store::<bool>)
    }

    /// Retires every timer of `run`; answers how many.
    pub fn disarm_run(&self, run: &str) -> Result<u32, Error> {
        self.call(Verb::DisarmRun, |x, s| x.call(s, (run,)), store::<u32>)
    }

    /// Armed timers. One counter read.
    pub fn pending_count(&self) -> Result<u64, Error> {
        self.call(Verb::PendingCount, |x, s| x.call(s, ()), store::<u64>)
    }

    /// The earliest instant an armed timer becomes claimable (its fire
    /// time, or its lease end while held).
    pub fn next_due(&self) -> Result<Option<Timestamp>, Error> {
        self.call(
            Verb::NextDue,
            |x, s| x.call(s, ()),
            store::<Option<Timestamp>>,
        )
    }

    /// Seals `run`: retires its timers and withdraws its pending tasks among
    /// `awaited`, in one transaction.
    pub fn seal(&self, run: &str, awaited: &[&str]) -> Result<SealOutcome, Error> {
        let awaited = strings(awaited);
        self.call(
            Verb::Seal,
            |x, s| x.call(s, (run, awaited.as_slice())),
            |a: StoreAnswer<wit::SealOutcome>| Ok(store(a)?.into()),
        )
    }

    /// Whether `run` is sealed.
    pub fn is_sealed(&self, run: &str) -> Result<bool, Error> {
        self.call(Verb::IsSealed, |x, s| x.call(s, (run,)), store::<bool>)
    }

    /// Task `id`'s history: its entries after `after` (a `seq`; from the
    /// first kept one without it), oldest first, at most `limit`. A task
    /// written before history was kept answers first, without `after`, an
    /// entry with `seq` 0 and verb `before-history` (see the WIT).
    pub fn history(
        &self,
        id: &str,
        after: Option<u64>,
        limit: u32,
    ) -> Result<Vec<HistoryEntry>, Error> {
        self.call(
            Verb::History,
            |x, s| x.call(s, (id, after, limit)),
            |a: StoreAnswer<Vec<wit::HistoryEntry>>| {
                let entries: Vec<HistoryEntry> = at_most(store(a)?, limit, "history")?
                    .into_iter()
                    .map(Into::into)
                    .collect();
                let mut last = after;
                for (i, e) in entries.iter().enumerate() {
                    // Entry 0 says the task predates its history: only ever
                    // first, and only on a read from the start.
                    let opening = i == 0 && after.is_none() && e.verb == "before-history";
                    if last.is_some_and(|l| e.seq <= l) || (e.seq == 0 && !opening) {
                        return Err(malformed(format!(
                            "history answered entry {} of task {id} after {last:?}",
                            e.seq
                        )));
                    }
                    last = Some(e.seq);
                }
                Ok(entries)
            },
        )
    }

    /// Where entry `seq` of task `id`'s history sits in the feed (its writer
    /// slot and its number there); none when that entry is not kept. For a
    /// host that gives its own positions to readers who see part of the
    /// feed; a reader of the whole feed never needs it.
    pub fn entry_place(&self, id: &str, seq: u64) -> Result<Option<FeedPlace>, Error> {
        self.call(
            Verb::FeedPlace,
            |x, s| x.call(s, (id, seq)),
            |a: StoreAnswer<Option<wit::FeedPlace>>| Ok(store(a)?.map(Into::into)),
        )
    }

    /// The feed after position `after` (from the oldest entry kept without
    /// it), at most `limit` entries: a page, or [`FeedRead::Gone`] when
    /// entries after `after` were trimmed or `after` is not a position of
    /// this feed.
    pub fn feed(&self, after: Option<&str>, limit: u32) -> Result<FeedRead, Error> {
        self.call(
            Verb::Feed,
            |x, s| x.call(s, (after, limit)),
            |a: StoreAnswer<wit::FeedRead>| {
                let read = FeedRead::from(store(a)?);
                if let FeedRead::Page(p) = &read
                    && p.entries.len() > limit as usize
                {
                    return Err(malformed(format!(
                        "feed answered {} entries for a limit of {limit}",
                        p.entries.len()
                    )));
                }
                Ok(read)
            },
        )
    }

    /// Removes the oldest feed entries recorded before `before`, or beyond
    /// the newest `keep` (at least one given), at most `limit` of them,
    /// with the history they cover (never a task's last entry).
    pub fn trim(
        &self,
        before: Option<Timestamp>,
        keep: Option<u64>,
        limit: u32,
    ) -> Result<TrimOutcome, Error> {
        self.call(
            Verb::Trim,
            |x, s| x.call(s, (before, keep, limit)),
            |a: StoreAnswer<wit::TrimOutcome>| {
                let out = TrimOutcome::from(store(a)?);
                if out.feed_removed > limit {
                    return Err(malformed(format!(
                        "trim removed {} entries for a limit of {limit}",
                        out.feed_removed
                    )));
                }
                Ok(out)
            },
        )
    }

    /// The consistency check: every discrepancy between this tenant's rows
    /// and its indexes and counters. Empty means consistent.
    pub fn check(&self) -> Result<Vec<Discrepancy>, Error> {
        self.call(
            Verb::Check,
            |x, s| x.call(s, ()),
            |a: StoreAnswer<Vec<wit::Discrepancy>>| {
                Ok(store(a)?.into_iter().map(Into::into).collect())
            },
        )
    }
}
