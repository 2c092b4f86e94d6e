//! The `tasks` interface: the worklist's verbs, one method each, with the
//! checks their answers must pass (a claim's answer held by the claimant, a
//! sweep's tasks distinct and moved as the verb says, a worker's batch
//! held by the worker, one answer per finished task).

use leasehold_guest::model::{
    Decision, Finished, Lease, Page, QueueQuery, SettleAnswer, SettledAndClaimed, Settlement, Task,
    TaskChanges, TaskState, Timestamp,
};

use crate::bindings::{WitFinished, WitSettledAndClaimed, wit};
use crate::error::Error;
use crate::verbs::Verb;

use super::Tenant;
use super::checks::{
    ClaimAnswer, StoreAnswer, at_most, claim, distinct, held, held_task, malformed, page,
    same_task, store, strings, wit_query,
};

impl Tenant {
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
        let guard = self.wit_guard();
        self.call(
            Verb::Claim,
            |x, s| x.call(s, (id, actor, roles.as_slice(), lease, &guard)),
            |a: ClaimAnswer<wit::Task>| held_task(claim(a)?, id, actor),
        )
    }

    /// Returns a task `actor` holds to the queue (`escalated` if it ever
    /// was, else `open`); anyone else is refused with `not-held`.
    pub fn release(&self, id: &str, actor: &str) -> Result<(), Error> {
        let guard = self.wit_guard();
        self.call(
            Verb::Release,
            |x, s| x.call(s, (id, actor, &guard)),
            claim::<()>,
        )
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
        let guard = self.wit_guard();
        self.call(
            Verb::TakeOver,
            |x, s| x.call(s, (id, from, actor, roles.as_slice(), lease, &guard)),
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
        let guard = self.wit_guard();
        self.call(
            Verb::Renew,
            |x, s| x.call(s, (id, actor, now, lease_ms, &guard)),
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
    /// `on-expiry` (escalated, or settled `expired`), then, within the same
    /// limit, fires the due reminder or escalation step of pending tasks
    /// (one step per task per call, each recorded with its `step`),
    /// answering them as they now stand. No task or step is acted on twice,
    /// however many sweepers call it.
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
                // A reminder leaves a task as it was but for its step
                // count; anything else is escalated (unheld) or expired.
                let reminded = |t: &Task| {
                    t.state.is_pending()
                        && t.steps_done >= 1
                        && t.steps_done as usize <= t.remind_before.len()
                };
                if let Some(t) = tasks.iter().find(|t| {
                    !(matches!(t.state, TaskState::Escalated | TaskState::Expired) || reminded(t))
                        || (t.state == TaskState::Escalated
                            && t.assignee.is_some()
                            && !reminded(t))
                }) {
                    return Err(malformed(format!(
                        "expire-overdue answered task {} as {} by {:?}, neither escalated, expired nor reminded",
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
        self.decide(id, settlement, holder, None)
    }

    /// [`Tenant::settle`] with a decision (outcome, reason, output), kept
    /// with the task and its record with who decided. It is checked against
    /// the outcomes the task, or else its kind, declares; a decision they
    /// refuse is `invalid`, naming the field (the output's first violation
    /// by its path), and nothing is written. A settled task answers
    /// `false`, its decision unchecked.
    pub fn decide(
        &self,
        id: &str,
        settlement: Settlement,
        holder: Option<&str>,
        decision: Option<&Decision>,
    ) -> Result<bool, Error> {
        let settlement = wit::Settlement::from(settlement);
        let decision = decision.cloned().map(wit::Decision::from);
        let guard = self.wit_guard();
        self.call(
            Verb::Settle,
            |x, s| x.call(s, (id, settlement, holder, &decision, &guard)),
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
        let guard = self.wit_guard();
        self.call(
            Verb::Escalate,
            |x, s| x.call(s, (id, &guard)),
            |a: ClaimAnswer<wit::Task>| same_task(claim(a)?, id),
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

    /// The earliest instant at which [`Tenant::expire_overdue`] has
    /// something to do: a due time owed its expiry, or a reminder or
    /// escalation step to fire. What a sweeper sleeps until.
    pub fn next_wake(&self) -> Result<Option<Timestamp>, Error> {
        self.call(
            Verb::NextWake,
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

    /// One page of the tasks `actor` holds, soonest lease end first,
    /// claims without a lease last, then by id; pass `next` back as
    /// `after`. Reads O(limit) index entries however many tasks others
    /// hold.
    pub fn held(&self, actor: &str, limit: u32, after: Option<&str>) -> Result<Page, Error> {
        self.call(
            Verb::Held,
            |x, s| x.call(s, (actor, limit, after)),
            |a: StoreAnswer<wit::Page>| {
                let p = page(store(a)?, limit, "held")?;
                if let Some(t) = p.tasks.iter().find(|&t| held(t.clone(), actor).is_err()) {
                    return Err(malformed(format!(
                        "held answered task {} as {} by {:?}, not held by {actor}",
                        t.id, t.state, t.assignee
                    )));
                }
                Ok(p)
            },
        )
    }

    /// Changes fields of a pending task, each by `open`'s rules; `by` is
    /// recorded as who changed it. A change that excludes the holder ends
    /// the claim in the same change. Answers the task as it now stands.
    pub fn update(&self, id: &str, by: Option<&str>, changes: &TaskChanges) -> Result<Task, Error> {
        let changes = wit::TaskChanges::from(changes.clone());
        let guard = self.wit_guard();
        self.call(
            Verb::Update,
            |x, s| x.call(s, (id, by, &changes, &guard)),
            |a: ClaimAnswer<wit::Task>| same_task(claim(a)?, id),
        )
    }

    /// A manager claims the task for `to`, from whoever holds it, by the
    /// claim ladder for `to` (the roles rung skipped only with
    /// `override_roles`, which the record then says). Answers the task,
    /// held by `to`.
    #[allow(clippy::too_many_arguments)]
    pub fn assign(
        &self,
        id: &str,
        to: &str,
        roles: &[&str],
        lease: Option<Lease>,
        override_roles: bool,
        by: Option<&str>,
    ) -> Result<Task, Error> {
        let roles = strings(roles);
        let lease = lease.map(wit::Lease::from);
        let guard = self.wit_guard();
        self.call(
            Verb::Assign,
            |x, s| {
                x.call(
                    s,
                    (id, to, roles.as_slice(), lease, override_roles, by, &guard),
                )
            },
            |a: ClaimAnswer<wit::Task>| held_task(claim(a)?, id, to),
        )
    }

    /// Back to the queue from whoever holds it; a pending task nobody holds
    /// is answered as it stands.
    pub fn unassign(&self, id: &str, by: Option<&str>) -> Result<Task, Error> {
        let guard = self.wit_guard();
        self.call(
            Verb::Unassign,
            |x, s| x.call(s, (id, by, &guard)),
            |a: ClaimAnswer<wit::Task>| {
                let t = same_task(claim(a)?, id)?;
                if t.state == TaskState::Claimed {
                    return Err(malformed(format!(
                        "unassign answered task {id} still claimed by {:?}",
                        t.assignee
                    )));
                }
                Ok(t)
            },
        )
    }

    /// The holder `from` hands the task to `to`, by the claim ladder for
    /// `to`; anyone but the holder is refused with `not-held(from)`.
    pub fn delegate(
        &self,
        id: &str,
        from: &str,
        to: &str,
        roles: &[&str],
        lease: Option<Lease>,
    ) -> Result<Task, Error> {
        let roles = strings(roles);
        let lease = lease.map(wit::Lease::from);
        let guard = self.wit_guard();
        self.call(
            Verb::Delegate,
            |x, s| x.call(s, (id, from, to, roles.as_slice(), lease, &guard)),
            |a: ClaimAnswer<wit::Task>| held_task(claim(a)?, id, to),
        )
    }

    /// An append-only remark by `actor` (1 byte to 4 KiB), kept in the
    /// task's history. Answers the task.
    pub fn note(&self, id: &str, actor: &str, text: &str) -> Result<Task, Error> {
        let guard = self.wit_guard();
        self.call(
            Verb::Note,
            |x, s| x.call(s, (id, actor, text, &guard)),
            |a: ClaimAnswer<wit::Task>| same_task(claim(a)?, id),
        )
    }

    /// Claims up to `count` (1–100) heads of `query`'s queue for
    /// `query.actor` (required), in queue order, each under `lease` if
    /// given; fewer, or none, when the queue runs short.
    pub fn claim_batch(
        &self,
        query: &QueueQuery,
        lease: Option<Lease>,
        count: u32,
    ) -> Result<Vec<Task>, Error> {
        let q = wit_query(query);
        let lease = lease.map(wit::Lease::from);
        let actor = query.actor.as_deref().unwrap_or_default();
        self.call(
            Verb::ClaimBatch,
            |x, s| x.call(s, (&q, lease, count)),
            |a: StoreAnswer<Vec<wit::Task>>| claimed(store(a)?, count, actor, "claim-batch"),
        )
    }

    /// Settles each of `done` that `query.actor` holds, each answered on
    /// its own in the order given, then claims up to `count` (0–100) more as
    /// [`Tenant::claim_batch`] does: a steady worker's one call per batch.
    pub fn settle_and_claim(
        &self,
        done: &[Finished],
        query: &QueueQuery,
        lease: Option<Lease>,
        count: u32,
    ) -> Result<SettledAndClaimed, Error> {
        let d: Vec<WitFinished> = done.iter().cloned().map(Into::into).collect();
        let q = wit_query(query);
        let lease = lease.map(wit::Lease::from);
        let actor = query.actor.as_deref().unwrap_or_default();
        self.call(
            Verb::SettleAndClaim,
            |x, s| x.call(s, (d.as_slice(), &q, lease, count)),
            |a: StoreAnswer<WitSettledAndClaimed>| {
                let answer = store(a)?;
                if answer.settled.len() != done.len() {
                    return Err(malformed(format!(
                        "settle-and-claim answered {} of {} finished tasks",
                        answer.settled.len(),
                        done.len()
                    )));
                }
                let settled: Vec<SettleAnswer> =
                    answer.settled.into_iter().map(Into::into).collect();
                let claimed = claimed(answer.claimed, count, actor, "settle-and-claim")?;
                if let Some(t) = claimed.iter().find(|t| {
                    done.iter()
                        .zip(&settled)
                        .any(|(f, a)| f.id == t.id && *a == SettleAnswer::Settled)
                }) {
                    return Err(malformed(format!(
                        "settle-and-claim settled task {} and claimed it again",
                        t.id
                    )));
                }
                Ok(SettledAndClaimed { settled, claimed })
            },
        )
    }
}

/// A batch of claims: at most `count`, distinct, each held by `actor`.
fn claimed(tasks: Vec<wit::Task>, count: u32, actor: &str, verb: &str) -> Result<Vec<Task>, Error> {
    if tasks.len() > count as usize {
        return Err(malformed(format!(
            "{verb} claimed {} tasks, more than the {count} asked for",
            tasks.len()
        )));
    }
    let tasks = tasks
        .into_iter()
        .map(|t| held(t.into(), actor))
        .collect::<Result<Vec<Task>, Error>>()?;
    distinct(&tasks, verb)?;
    Ok(tasks)
}
