//! What a tenant's first sweep would do for its tasks, read before it runs
//! ([`FirstSweepPlan`]): leases held and whether one lapsed, overdue tasks
//! by what their expiry does, and timers due for workers. The task duties
//! log it for each tenant before the sweeper's first turn. It reads only,
//! and must never act.

use leasehold_guest::model::{OnExpiry, Timestamp};

use crate::engine::Engine;
use crate::error::Error;
use crate::tenant::Tenant;

/// What a tenant's first sweep would do, read before it runs (at most
/// [`PLAN_LIMIT`] tasks of each kind are counted). The rules name no read
/// that counts lapsed leases, so they are given as the leases held and
/// whether the earliest of them has lapsed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct FirstSweepPlan {
    /// The tenant.
    pub tenant: String,
    /// The instant the plan was read at.
    pub now: Timestamp,
    /// Tasks claimed under a lease.
    pub leased: u64,
    /// The earliest lease end, if one is held.
    pub earliest_lease_end: Option<Timestamp>,
    /// Whether at least one lease has lapsed (it is reclaimed first).
    pub lapsed: bool,
    /// Overdue tasks whose `on-expiry` is `escalate`.
    pub to_escalate: u64,
    /// Overdue tasks whose `on-expiry` settles them (`deny`, `proceed`).
    pub to_expire: u64,
    /// Armed timers (the sweep does not fire timers: workers claim them
    /// with `claim-due`).
    pub timers_armed: u64,
    /// Whether the earliest armed timer is due.
    pub timer_due: bool,
}

/// The most overdue tasks a [`FirstSweepPlan`] counts.
pub const PLAN_LIMIT: u32 = 1000;

impl FirstSweepPlan {
    /// Whether the first sweep would change anything.
    pub fn acts(&self) -> bool {
        self.lapsed || self.to_escalate > 0 || self.to_expire > 0
    }

    /// Reads what `tenant`'s first sweep at `now` would do; reads only.
    pub fn read(engine: &Engine, tenant: &str, now: Timestamp) -> Result<FirstSweepPlan, Error> {
        FirstSweepPlan::of(&engine.tenant(tenant)?, now)
    }

    /// [`FirstSweepPlan::read`] of a tenant in hand.
    pub(super) fn of(t: &Tenant, now: Timestamp) -> Result<FirstSweepPlan, Error> {
        let earliest_lease_end = t.next_lease_end()?;
        let mut plan = FirstSweepPlan {
            tenant: t.name().to_owned(),
            now,
            leased: t.leased_count()?,
            earliest_lease_end,
            lapsed: earliest_lease_end.is_some_and(|end| end <= now),
            timers_armed: t.pending_count()?,
            timer_due: t.next_due()?.is_some_and(|at| at <= now),
            ..FirstSweepPlan::default()
        };
        for task in t.overdue(now, PLAN_LIMIT)? {
            if task.on_expiry == OnExpiry::Escalate {
                plan.to_escalate += 1;
            } else {
                plan.to_expire += 1;
            }
        }
        Ok(plan)
    }

    /// Logs the plan, where the first sweep acts or a timer is due.
    pub(super) fn log(&self) {
        if !self.acts() && !self.timer_due {
            return;
        }
        tracing::info!(
            tenant = %self.tenant,
            leased = self.leased,
            lapsed = self.lapsed,
            earliest_lease_end = self.earliest_lease_end,
            to_escalate = self.to_escalate,
            to_expire = self.to_expire,
            timers_armed = self.timers_armed,
            timer_due = self.timer_due,
            "first sweep plan: {}{} overdue to escalate, {} to expire (at most {PLAN_LIMIT} counted){}",
            if self.lapsed { "lapsed leases to reclaim; " } else { "" },
            self.to_escalate,
            self.to_expire,
            if self.timer_due { "; timers due for workers" } else { "" },
        );
    }
}
