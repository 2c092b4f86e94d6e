//! The bulk jobs duty: steps a tenant's runnable jobs (`runnable-jobs`),
//! one `step-job` per call of its turn's budget, until none has work left;
//! then it asks again only after the tenant commits (a new job is a
//! commit). Not among the standard duties yet: an embedder adds it with
//! [`Sweeper::start_with`](crate::Sweeper::start_with). It keeps, per
//! tenant, only whether it is known to have no job to step; it never
//! decides what a job does.

use std::collections::HashSet;
use std::sync::Arc;

use leasehold_guest::jobs::JobState;
use leasehold_guest::model::Timestamp;

use crate::error::Error;
use crate::tenant::Tenant;

use super::duty::{Duty, Turn};
use super::report::JOB_STEPS;

/// Most runnable jobs one listing reads.
const LISTED: u32 = 16;

/// Steps every runnable job of a tenant, a step a call.
#[derive(Default)]
pub struct StepJobs {
    /// Tenants known to have no job with work left, until they commit.
    idle: HashSet<Arc<str>>,
}

impl Duty for StepJobs {
    fn name(&self) -> &'static str {
        "step-jobs"
    }

    fn heard(&mut self, tenant: &Arc<str>) {
        self.idle.remove(tenant);
    }

    fn next(&mut self, tenant: &Tenant, now: Timestamp) -> Result<Option<Timestamp>, Error> {
        if self.idle.contains(tenant.name()) {
            return Ok(None);
        }
        if tenant.runnable_jobs(1)?.is_empty() {
            self.idle.insert(Arc::from(tenant.name()));
            return Ok(None);
        }
        Ok(Some(now))
    }

    fn act(&mut self, tenant: &Tenant, turn: &mut Turn<'_>) -> Result<(), Error> {
        if self.idle.contains(tenant.name()) {
            return Ok(());
        }
        let mut steps = 0u64;
        let mut listed: Vec<String> = Vec::new();
        // Each listing and each step is a call of the turn; a job is
        // stepped until it has no work left, then the next one.
        while turn.take_call() {
            let Some(id) = listed.first().cloned() else {
                listed = tenant.runnable_jobs(LISTED)?;
                if listed.is_empty() {
                    self.idle.insert(Arc::from(tenant.name()));
                    break;
                }
                continue;
            };
            let job = tenant.step_job(&id)?;
            steps += 1;
            if !matches!(job.state, JobState::Counting | JobState::Running) {
                // A cancelled job may still have chunks to drop: the next
                // listing says so.
                listed.remove(0);
            }
        }
        turn.count(JOB_STEPS, steps);
        Ok(())
    }

    /// A call kept in each turn while the tenant may have a job to step;
    /// none once it is known to have none.
    fn least_calls(&self, tenant: &str) -> u32 {
        u32::from(!self.idle.contains(tenant))
    }
}
