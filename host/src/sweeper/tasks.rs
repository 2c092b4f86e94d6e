//! The task duties: lapsed leases back to the queue (`reclaim-lapsed`), then
//! overdue tasks by their `on-expiry` (`expire-overdue`), `batch` tasks a
//! call. The sweeper runs them in that order, so a lease that lapsed is
//! returned before its task can expire. Their first turn is foreseen as one
//! [`FirstSweepPlan`], logged by the first of them. Both verbs are
//! exactly-once in the rules (a task leaves the index it was swept from as
//! it is moved), so sweepers in several processes share the work without
//! doing anything twice; neither duty decides a rule.

use leasehold_guest::model::{TaskState, Timestamp};

use crate::error::Error;
use crate::tenant::Tenant;

use super::duty::{Duty, Turn};
use super::plan::FirstSweepPlan;
use super::report::{ESCALATED, EXPIRED, RECLAIMED, REMINDED};

/// Returns lapsed leases to the queue: due at the earliest lease end.
pub(super) struct ReclaimLapsed {
    pub(super) batch: u32,
}

impl Duty for ReclaimLapsed {
    fn name(&self) -> &'static str {
        "reclaim-lapsed"
    }

    fn next(&mut self, tenant: &Tenant, _now: Timestamp) -> Result<Option<Timestamp>, Error> {
        tenant.next_lease_end()
    }

    fn act(&mut self, tenant: &Tenant, turn: &mut Turn<'_>) -> Result<(), Error> {
        // Called in every turn, whatever its tenant came due for: a lease
        // that lapsed since its instants were read is returned all the same.
        while turn.take_call() {
            let moved = tenant.reclaim_lapsed(turn.now(), self.batch)?;
            turn.count(RECLAIMED, moved.len() as u64);
            if moved.len() < self.batch as usize {
                break;
            }
        }
        Ok(())
    }

    /// The plan of both task duties, since a turn starts with this one.
    fn foresee(&mut self, tenant: &Tenant, now: Timestamp) -> Result<Option<bool>, Error> {
        let plan = FirstSweepPlan::of(tenant, now)?;
        plan.log();
        Ok(Some(plan.acts()))
    }
}

/// Acts on overdue tasks by their `on-expiry`, and fires reminders and
/// escalation steps: due at the earliest instant either is owed
/// (`next-wake`).
pub(super) struct ExpireOverdue {
    pub(super) batch: u32,
}

impl Duty for ExpireOverdue {
    fn name(&self) -> &'static str {
        "expire-overdue"
    }

    fn next(&mut self, tenant: &Tenant, _now: Timestamp) -> Result<Option<Timestamp>, Error> {
        tenant.next_wake()
    }

    fn act(&mut self, tenant: &Tenant, turn: &mut Turn<'_>) -> Result<(), Error> {
        while turn.take_call() {
            let acted = tenant.expire_overdue(turn.now(), self.batch)?;
            // Counted by the state each task is left in: a reminder leaves
            // one open or claimed (on an escalated task it counts as
            // escalated, as the answer cannot tell the two apart).
            let count = |state: &[TaskState]| {
                acted.iter().filter(|t| state.contains(&t.state)).count() as u64
            };
            turn.count(ESCALATED, count(&[TaskState::Escalated]));
            turn.count(EXPIRED, count(&[TaskState::Expired]));
            turn.count(REMINDED, count(&[TaskState::Open, TaskState::Claimed]));
            if acted.len() < self.batch as usize {
                break;
            }
        }
        Ok(())
    }
}

/// The task duties in their order, `batch` tasks a call (at least 1).
pub(super) fn task_duties(batch: u32) -> [Box<dyn Duty>; 2] {
    let batch = batch.max(1);
    [
        Box::new(ReclaimLapsed { batch }),
        Box::new(ExpireOverdue { batch }),
    ]
}
