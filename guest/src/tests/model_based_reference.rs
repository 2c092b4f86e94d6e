//! The reference model the model-based test holds the verbs to: what the
//! contract says each verb does, over plain maps, with no key, index or
//! counter to keep.

use std::collections::{BTreeMap, BTreeSet};

use super::*;
use crate::model::{
    ArmOutcome, ClaimError, DecisionRecord, Lease, SettleAnswer, Settlement, TaskChanges,
    TimerError, TimerInfo,
};

fn dedup(list: &[String]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for s in list {
        if !out.contains(s) {
            out.push(s.clone());
        }
    }
    out
}

/// What the contract says, in plain structs.
#[derive(Default)]
pub(super) struct Model {
    /// Each task with whether it was ever escalated.
    pub(super) tasks: BTreeMap<String, (Task, bool)>,
    /// Each timer with its lease.
    pub(super) timers: BTreeMap<(String, String), (Timer, Option<i64>)>,
    pub(super) sealed: BTreeSet<String>,
}

impl Model {
    fn ladder(t: &Task, actor: &str, roles: &[String]) -> Result<(), ClaimError> {
        if t.excluded_actors.iter().any(|a| a == actor) {
            return Err(ClaimError::Excluded(actor.to_owned()));
        }
        if !t.candidate_roles.is_empty() && !t.candidate_roles.iter().any(|r| roles.contains(r)) {
            return Err(ClaimError::WrongRole(actor.to_owned()));
        }
        if !t.state.is_pending() {
            return Err(ClaimError::NotPending(t.state));
        }
        Ok(())
    }

    pub(super) fn open(&mut self, t: &Task) -> Result<Task, StoreError> {
        if let Some((found, _)) = self.tasks.get(&t.id) {
            return Ok(found.clone());
        }
        let t = Task {
            candidate_roles: dedup(&t.candidate_roles),
            escalate_to: dedup(&t.escalate_to),
            excluded_actors: dedup(&t.excluded_actors),
            revision: 1,
            ..t.clone()
        };
        self.tasks.insert(t.id.clone(), (t.clone(), false));
        Ok(t)
    }

    pub(super) fn claim(
        &mut self,
        id: &str,
        actor: &str,
        roles: &[String],
        lease: Option<Lease>,
    ) -> Result<Task, ClaimError> {
        let Some((t, _)) = self.tasks.get_mut(id) else {
            return Err(ClaimError::NotFound(id.to_owned()));
        };
        Self::ladder(t, actor, roles)?;
        if t.state == TaskState::Claimed {
            let holder = t.assignee.clone().unwrap_or_default();
            if holder != actor {
                return Err(ClaimError::AlreadyClaimed(holder));
            }
            Self::relet(t, lease);
            return Ok(t.clone());
        }
        Self::hand(t, actor, lease);
        Ok(t.clone())
    }

    /// A repeat by the holder: a lease with another end is a change.
    fn relet(t: &mut Task, lease: Option<Lease>) {
        if let Some(l) = lease {
            let end = l.now + i64::from(l.lease_ms);
            if t.lease_until != Some(end) {
                t.lease_until = Some(end);
                t.revision += 1;
            }
        }
    }

    /// The task claimed by `actor`: always a change.
    fn hand(t: &mut Task, actor: &str, lease: Option<Lease>) {
        t.state = TaskState::Claimed;
        t.assignee = Some(actor.to_owned());
        t.lease_until = lease.map(|l| l.now + i64::from(l.lease_ms));
        t.revision += 1;
    }

    pub(super) fn take_over(
        &mut self,
        id: &str,
        from: &str,
        actor: &str,
        roles: &[String],
        lease: Option<Lease>,
    ) -> Result<Task, ClaimError> {
        let Some((t, _)) = self.tasks.get_mut(id) else {
            return Err(ClaimError::NotFound(id.to_owned()));
        };
        Self::ladder(t, actor, roles)?;
        if t.state != TaskState::Claimed || t.assignee.as_deref() != Some(from) {
            return Err(ClaimError::NotHeld(from.to_owned()));
        }
        if from == actor {
            Self::relet(t, lease);
        } else {
            Self::hand(t, actor, lease);
        }
        Ok(t.clone())
    }

    fn put_back(t: &mut Task, ever: bool) {
        t.assignee = None;
        t.lease_until = None;
        t.state = if ever {
            TaskState::Escalated
        } else {
            TaskState::Open
        };
        t.revision += 1;
    }

    pub(super) fn release(&mut self, id: &str, actor: &str) -> Result<(), ClaimError> {
        let Some((t, ever)) = self.tasks.get_mut(id) else {
            return Err(ClaimError::NotFound(id.to_owned()));
        };
        if t.state != TaskState::Claimed || t.assignee.as_deref() != Some(actor) {
            return Err(ClaimError::NotHeld(actor.to_owned()));
        }
        Self::put_back(t, *ever);
        Ok(())
    }

    pub(super) fn renew(
        &mut self,
        id: &str,
        actor: &str,
        lease: Lease,
    ) -> Result<Task, ClaimError> {
        let Some((t, _)) = self.tasks.get_mut(id) else {
            return Err(ClaimError::NotFound(id.to_owned()));
        };
        if t.state != TaskState::Claimed
            || t.assignee.as_deref() != Some(actor)
            || t.lease_until.is_none()
        {
            return Err(ClaimError::NotHeld(actor.to_owned()));
        }
        Self::relet(t, Some(lease));
        Ok(t.clone())
    }

    pub(super) fn reclaim_lapsed(&mut self, now: i64, limit: u32) -> Vec<Task> {
        let mut lapsed: Vec<(i64, String)> = self
            .tasks
            .values()
            .filter(|(t, _)| t.state == TaskState::Claimed)
            .filter_map(|(t, _)| {
                t.lease_until
                    .filter(|e| *e <= now)
                    .map(|e| (e, t.id.clone()))
            })
            .collect();
        lapsed.sort();
        lapsed
            .into_iter()
            .take(limit as usize)
            .filter_map(|(_, id)| {
                let (t, ever) = self.tasks.get_mut(&id)?;
                Self::put_back(t, *ever);
                Some(t.clone())
            })
            .collect()
    }

    pub(super) fn claim_next(
        &mut self,
        roles: &[String],
        actor: &str,
        lease: Option<Lease>,
    ) -> Option<Task> {
        let head = self.queue(roles, Some(actor)).into_iter().next()?;
        self.claim(&head, actor, roles, lease).ok()
    }

    /// `claim-batch`: `claim-next`, `count` times, until the queue runs out.
    pub(super) fn claim_batch(
        &mut self,
        roles: &[String],
        actor: &str,
        lease: Option<Lease>,
        count: u32,
    ) -> Vec<Task> {
        let mut claimed = Vec::new();
        for _ in 0..count {
            match self.claim_next(roles, actor, lease) {
                Some(t) => claimed.push(t),
                None => break,
            }
        }
        claimed
    }

    /// One finished task of `settle-and-claim`, settled only if `actor`
    /// holds it.
    pub(super) fn settle_held(
        &mut self,
        id: &str,
        s: Settlement,
        actor: &str,
        decision: Option<(&str, i64)>,
    ) -> SettleAnswer {
        let Some((t, _)) = self.tasks.get(id) else {
            return SettleAnswer::NotFound;
        };
        if !t.state.is_pending() {
            return SettleAnswer::Already(t.state);
        }
        if t.state != TaskState::Claimed || t.assignee.as_deref() != Some(actor) {
            let holder = (t.state == TaskState::Claimed)
                .then(|| t.assignee.clone())
                .flatten();
            return SettleAnswer::NotHeld(holder);
        }
        match self.settle(id, s, Some(actor), decision) {
            Ok(true) => SettleAnswer::Settled,
            other => panic!("a held task settles, not {other:?}"),
        }
    }

    pub(super) fn settle(
        &mut self,
        id: &str,
        s: Settlement,
        holder: Option<&str>,
        decision: Option<(&str, i64)>,
    ) -> Result<bool, ClaimError> {
        let Some((t, _)) = self.tasks.get_mut(id) else {
            return Err(ClaimError::NotFound(id.to_owned()));
        };
        if let Some(h) = holder
            && (t.state != TaskState::Claimed || t.assignee.as_deref() != Some(h))
        {
            return Err(ClaimError::NotHeld(h.to_owned()));
        }
        if !t.state.is_pending() {
            return Ok(false);
        }
        t.state = s.state();
        t.lease_until = None;
        t.decision = decision.map(|(outcome, at)| DecisionRecord {
            outcome: outcome.to_owned(),
            reason: Some(format!("because {outcome}")),
            output: None,
            by: holder.map(str::to_owned),
            at,
        });
        t.revision += 1;
        Ok(true)
    }

    pub(super) fn escalate(&mut self, id: &str) -> Result<Task, ClaimError> {
        let Some((t, ever)) = self.tasks.get_mut(id) else {
            return Err(ClaimError::NotFound(id.to_owned()));
        };
        if t.state.is_pending() {
            let was = (t.clone(), *ever);
            *ever = true;
            t.state = TaskState::Escalated;
            t.assignee = None;
            t.lease_until = None;
            if !t.candidate_roles.is_empty() {
                for r in t.escalate_to.clone() {
                    if !t.candidate_roles.contains(&r) {
                        t.candidate_roles.push(r);
                    }
                }
            }
            if (t.clone(), *ever) != was {
                t.revision += 1;
            }
        }
        Ok(t.clone())
    }

    pub(super) fn withdraw(&mut self, run: &str, awaited: &[String]) -> u32 {
        let mut moved = 0;
        for id in dedup(awaited) {
            if let Some((t, _)) = self.tasks.get_mut(&id)
                && t.run == run
                && t.state.is_pending()
            {
                t.state = TaskState::Withdrawn;
                t.lease_until = None;
                t.revision += 1;
                moved += 1;
            }
        }
        moved
    }

    pub(super) fn arm(&mut self, t: &Timer) -> ArmOutcome {
        if self.sealed.contains(&t.run) {
            return ArmOutcome::RunSealed;
        }
        let key = (t.run.clone(), t.effect.clone());
        if self.timers.contains_key(&key) {
            return ArmOutcome::AlreadyArmed;
        }
        self.timers.insert(key, (t.clone(), None));
        ArmOutcome::Armed
    }

    fn claimable_at(entry: &(Timer, Option<i64>)) -> i64 {
        entry.1.unwrap_or(entry.0.fire_at)
    }

    pub(super) fn claim_due(&mut self, now: i64, limit: u32, lease: u32) -> Vec<Timer> {
        let mut due: Vec<(i64, String, String)> = self
            .timers
            .iter()
            .filter(|(_, e)| Self::claimable_at(e) <= now)
            .map(|((r, f), e)| (Self::claimable_at(e), r.clone(), f.clone()))
            .collect();
        due.sort();
        let mut out = Vec::new();
        for (_, run, effect) in due {
            if out.len() == limit as usize {
                break;
            }
            let key = (run, effect);
            if self.sealed.contains(&key.0) {
                self.timers.remove(&key);
                continue;
            }
            if let Some(entry) = self.timers.get_mut(&key) {
                entry.1 = Some(now + i64::from(lease));
                out.push(entry.0.clone());
            }
        }
        out
    }

    /// `reschedule` at `now`, as its rules read.
    pub(super) fn reschedule(
        &mut self,
        run: &str,
        effect: &str,
        fire_at: i64,
        take_back: bool,
        now: i64,
    ) -> Result<TimerInfo, TimerError> {
        if self.sealed.contains(run) {
            return Err(TimerError::RunSealed);
        }
        let entry = self
            .timers
            .get_mut(&(run.to_owned(), effect.to_owned()))
            .ok_or(TimerError::NotFound)?;
        if let Some(until) = entry.1
            && until > now
            && !take_back
        {
            return Err(TimerError::Held(until));
        }
        entry.0.fire_at = fire_at;
        entry.1 = None;
        Ok(TimerInfo {
            timer: entry.0.clone(),
            lease_until: None,
        })
    }

    /// A run's timers, by effect.
    pub(super) fn timers_of(&self, run: &str) -> Vec<TimerInfo> {
        self.timers
            .iter()
            .filter(|((r, _), _)| r == run)
            .map(|(_, (t, lease))| TimerInfo {
                timer: t.clone(),
                lease_until: *lease,
            })
            .collect()
    }

    /// The timers claimable in `[from, to)`, in claim-due's order.
    pub(super) fn due_between(&self, from: i64, to: i64) -> Vec<TimerInfo> {
        let mut due: Vec<(i64, &String, &String, TimerInfo)> = self
            .timers
            .iter()
            .filter(|(_, e)| (from..to).contains(&Self::claimable_at(e)))
            .map(|((r, f), e)| {
                let info = TimerInfo {
                    timer: e.0.clone(),
                    lease_until: e.1,
                };
                (Self::claimable_at(e), r, f, info)
            })
            .collect();
        due.sort_by(|a, b| (a.0, a.1, a.2).cmp(&(b.0, b.1, b.2)));
        due.into_iter().map(|(_, _, _, i)| i).collect()
    }

    pub(super) fn disarm_run(&mut self, run: &str) -> u32 {
        let before = self.timers.len();
        self.timers.retain(|(r, _), _| r != run);
        (before - self.timers.len()) as u32
    }

    pub(super) fn queue(&self, roles: &[String], actor: Option<&str>) -> Vec<String> {
        let mut found: Vec<&Task> = self
            .tasks
            .values()
            .map(|(t, _)| t)
            .filter(|t| t.state.is_queued() && t.admits_roles(roles))
            .filter(|t| actor.is_none_or(|a| !t.excluded_actors.iter().any(|x| x == a)))
            .collect();
        found.sort_by_key(|t| (t.priority.rank(), t.created_at, t.id.clone()));
        found.into_iter().map(|t| t.id.clone()).collect()
    }

    pub(super) fn overdue(&self, now: i64, limit: u32) -> Vec<Task> {
        let mut found: Vec<(i64, Task)> = self
            .tasks
            .values()
            .filter(|(t, ever)| matches!(t.state, TaskState::Open | TaskState::Claimed) && !*ever)
            .filter_map(|(t, _)| t.due_at.filter(|d| *d <= now).map(|d| (d, t.clone())))
            .collect();
        found.sort_by(|a, b| (a.0, &a.1.id).cmp(&(b.0, &b.1.id)));
        found
            .into_iter()
            .take(limit as usize)
            .map(|(_, t)| t)
            .collect()
    }

    pub(super) fn for_case(&self, case: &str) -> Vec<String> {
        let mut found: Vec<&Task> = self
            .tasks
            .values()
            .map(|(t, _)| t)
            .filter(|t| t.case.as_deref() == Some(case))
            .collect();
        found.sort_by_key(|t| (t.created_at, t.id.clone()));
        found.into_iter().map(|t| t.id.clone()).collect()
    }

    pub(super) fn next_due(&self) -> Option<i64> {
        self.timers.values().map(Self::claimable_at).min()
    }

    pub(super) fn leased_tasks(&self) -> u64 {
        self.tasks
            .values()
            .filter(|(t, _)| t.state == TaskState::Claimed && t.lease_until.is_some())
            .count() as u64
    }

    pub(super) fn next_lease_end(&self) -> Option<i64> {
        self.tasks
            .values()
            .filter(|(t, _)| t.state == TaskState::Claimed)
            .filter_map(|(t, _)| t.lease_until)
            .min()
    }

    pub(super) fn pending_tasks(&self) -> u64 {
        self.tasks
            .values()
            .filter(|(t, _)| t.state.is_pending())
            .count() as u64
    }

    /// What `held` lists for `actor`: its claims, soonest lease end first,
    /// unleased last, then by id.
    pub(super) fn held(&self, actor: &str) -> Vec<String> {
        let mut found: Vec<(i64, String)> = self
            .tasks
            .values()
            .map(|(t, _)| t)
            .filter(|t| t.state == TaskState::Claimed && t.assignee.as_deref() == Some(actor))
            .map(|t| (t.lease_until.unwrap_or(i64::MAX), t.id.clone()))
            .collect();
        found.sort();
        found.into_iter().map(|(_, id)| id).collect()
    }

    pub(super) fn update(&mut self, id: &str, c: &TaskChanges) -> Result<Task, ClaimError> {
        let Some((t, ever)) = self.tasks.get_mut(id) else {
            return Err(ClaimError::NotFound(id.to_owned()));
        };
        if !t.state.is_pending() {
            return Err(ClaimError::NotPending(t.state));
        }
        let was = t.clone();
        if let Some(d) = c.due_at {
            t.due_at = d;
        }
        if let Some(p) = c.priority {
            t.priority = p;
        }
        if let Some(r) = &c.candidate_roles {
            t.candidate_roles = dedup(r);
        }
        if let Some(x) = &c.excluded_actors {
            t.excluded_actors = dedup(x);
        }
        let holder_excluded = t.state == TaskState::Claimed
            && t.assignee
                .as_ref()
                .is_some_and(|h| t.excluded_actors.contains(h));
        if holder_excluded {
            // put_back counts the change.
            Self::put_back(t, *ever);
        } else if *t != was {
            t.revision += 1;
        }
        Ok(t.clone())
    }

    pub(super) fn assign(
        &mut self,
        id: &str,
        to: &str,
        roles: &[String],
        lease: Option<Lease>,
        override_roles: bool,
    ) -> Result<Task, ClaimError> {
        let Some((t, _)) = self.tasks.get_mut(id) else {
            return Err(ClaimError::NotFound(id.to_owned()));
        };
        let roles = if override_roles {
            t.candidate_roles.clone()
        } else {
            roles.to_vec()
        };
        Self::ladder(t, to, &roles)?;
        if t.state == TaskState::Claimed && t.assignee.as_deref() == Some(to) {
            Self::relet(t, lease);
        } else {
            Self::hand(t, to, lease);
        }
        Ok(t.clone())
    }

    pub(super) fn unassign(&mut self, id: &str) -> Result<Task, ClaimError> {
        let Some((t, ever)) = self.tasks.get_mut(id) else {
            return Err(ClaimError::NotFound(id.to_owned()));
        };
        if !t.state.is_pending() {
            return Err(ClaimError::NotPending(t.state));
        }
        if t.state == TaskState::Claimed {
            Self::put_back(t, *ever);
        }
        Ok(t.clone())
    }

    pub(super) fn delegate(
        &mut self,
        id: &str,
        from: &str,
        to: &str,
        roles: &[String],
        lease: Option<Lease>,
    ) -> Result<Task, ClaimError> {
        let Some((t, _)) = self.tasks.get_mut(id) else {
            return Err(ClaimError::NotFound(id.to_owned()));
        };
        if t.state != TaskState::Claimed || t.assignee.as_deref() != Some(from) {
            return Err(ClaimError::NotHeld(from.to_owned()));
        }
        Self::ladder(t, to, roles)?;
        if from == to {
            Self::relet(t, lease);
        } else {
            Self::hand(t, to, lease);
        }
        Ok(t.clone())
    }

    pub(super) fn note(&mut self, id: &str) -> Result<Task, ClaimError> {
        let Some((t, _)) = self.tasks.get_mut(id) else {
            return Err(ClaimError::NotFound(id.to_owned()));
        };
        t.revision += 1;
        Ok(t.clone())
    }

    /// The current revision of `id`, for a guard.
    pub(super) fn revision(&self, id: &str) -> Option<u64> {
        self.tasks.get(id).map(|(t, _)| t.revision)
    }
}
