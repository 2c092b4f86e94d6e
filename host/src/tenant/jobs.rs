//! The `jobs` interface: bulk jobs, one method per verb. The component
//! counts a job's set and changes its tasks a step at a time; this module
//! only checks what it answers. A job is held to the id asked about and to
//! counts that add up (no more taken than found, no more reasons kept than
//! the contract keeps); a new job to having taken nothing; a cancelled one
//! to having stopped; a listing to id order within its limit. It never
//! repairs an answer: what the contract rules out is a sandbox failure.

use leasehold_guest::jobs::{Job, JobAction, JobState, KEPT_MISSES};
use leasehold_guest::search::TaskFilter;

use crate::bindings::wit_jobs;
use crate::error::Error;
use crate::verbs::Verb;

use super::Tenant;
use super::checks::{StoreAnswer, at_most, malformed, store};

/// A job answered about another id, or whose counts do not add up, is no
/// answer.
fn checked_job(j: wit_jobs::Job, id: &str, verb: &str) -> Result<Job, Error> {
    let job = Job::from(j);
    if job.id != id {
        return Err(malformed(format!(
            "{verb} asked for job {id:?}, answered job {:?}",
            job.id
        )));
    }
    let taken = job
        .done
        .checked_add(job.skipped)
        .and_then(|n| n.checked_add(job.failed));
    if taken.is_none_or(|n| n > job.total)
        || job.last_failures.len() > KEPT_MISSES
        || job.last_skipped.len() > KEPT_MISSES
        || job.last_failures.len() as u64 > job.failed
        || job.last_skipped.len() as u64 > job.skipped
        || (job.state == JobState::Done && taken != Some(job.total))
    {
        return Err(malformed(format!(
            "{verb} answered job {id:?} with counts that do not add up: {} found, {} done, \
             {} skipped, {} failed, {} failures and {} skips kept, {}",
            job.total,
            job.done,
            job.skipped,
            job.failed,
            job.last_failures.len(),
            job.last_skipped.len(),
            job.state.name()
        )));
    }
    Ok(job)
}

/// Ids strictly ascending, and after `after`.
fn in_id_order<'a>(
    ids: impl Iterator<Item = &'a str> + Clone,
    after: Option<&str>,
    verb: &str,
) -> Result<(), Error> {
    let mut prev: Option<&str> = after;
    for id in ids {
        if prev.is_some_and(|p| p >= id) {
            return Err(malformed(format!("{verb} answered out of id order")));
        }
        prev = Some(id);
    }
    Ok(())
}

impl Tenant {
    /// Starts job `id`: `action` over the tasks matching `filter` created
    /// at or before `now`, counted and run by [`step_job`](Tenant::step_job).
    /// A bad id, an id in use, a bad filter or action: `Invalid`, naming
    /// the field. A filter that matches nothing answers a job of total 0,
    /// `done` after its first step (or at once when no instant is left).
    pub fn start_job(
        &self,
        id: &str,
        filter: &TaskFilter,
        action: &JobAction,
        by: Option<&str>,
        now: i64,
    ) -> Result<Job, Error> {
        let wire_filter: crate::bindings::wit_search::TaskFilter = filter.clone().into();
        let wire_action: wit_jobs::JobAction = action.clone().into();
        self.call(
            Verb::StartJob,
            |x, s| x.call(s, (id, &wire_filter, &wire_action, by, now)),
            |a: StoreAnswer<wit_jobs::Job>| {
                let job = checked_job(store(a)?, id, "start-job")?;
                let fresh = job.total == 0
                    && matches!(job.state, JobState::Counting | JobState::Done)
                    && job.created_at == now;
                if !fresh {
                    return Err(malformed(format!(
                        "start-job answered job {id:?} {} with {} found, created at {}",
                        job.state.name(),
                        job.total,
                        job.created_at
                    )));
                }
                Ok(job)
            },
        )
    }

    /// Counts the next stretch of a counting job, or applies a running
    /// job's action to its next task (one task, one transaction), or drops
    /// the next chunks of a cancelled one; a job with no work left answers
    /// as it stands. `NotFound` for an unknown id.
    pub fn step_job(&self, id: &str) -> Result<Job, Error> {
        self.call(
            Verb::StepJob,
            |x, s| x.call(s, (id,)),
            |a: StoreAnswer<wit_jobs::Job>| checked_job(store(a)?, id, "step-job"),
        )
    }

    /// Stops a job at once (no task is changed by it after); a finished job
    /// answers as it stands.
    pub fn cancel_job(&self, id: &str) -> Result<Job, Error> {
        self.call(
            Verb::CancelJob,
            |x, s| x.call(s, (id,)),
            |a: StoreAnswer<wit_jobs::Job>| {
                let job = checked_job(store(a)?, id, "cancel-job")?;
                if matches!(job.state, JobState::Counting | JobState::Running) {
                    return Err(malformed(format!(
                        "cancel-job answered job {id:?} still {}",
                        job.state.name()
                    )));
                }
                Ok(job)
            },
        )
    }

    /// One job, if it exists.
    pub fn get_job(&self, id: &str) -> Result<Option<Job>, Error> {
        self.call(
            Verb::GetJob,
            |x, s| x.call(s, (id,)),
            |a: StoreAnswer<Option<wit_jobs::Job>>| {
                store(a)?.map(|j| checked_job(j, id, "get-job")).transpose()
            },
        )
    }

    /// Jobs in id order, after `after`, at most `limit` (1–1000).
    pub fn list_jobs(&self, limit: u32, after: Option<&str>) -> Result<Vec<Job>, Error> {
        self.call(
            Verb::ListJobs,
            |x, s| x.call(s, (limit, after)),
            |a: StoreAnswer<Vec<wit_jobs::Job>>| {
                let list = at_most(store(a)?, limit, "list-jobs")?;
                in_id_order(list.iter().map(|j| j.id.as_str()), after, "list-jobs")?;
                list.into_iter()
                    .map(|j| {
                        let id = j.id.clone();
                        checked_job(j, &id, "list-jobs")
                    })
                    .collect()
            },
        )
    }

    /// The ids of jobs with work left, in id order, at most `limit`
    /// (1–1000): what a sweeper steps.
    pub fn runnable_jobs(&self, limit: u32) -> Result<Vec<String>, Error> {
        self.call(
            Verb::RunnableJobs,
            |x, s| x.call(s, (limit,)),
            |a: StoreAnswer<Vec<String>>| {
                let ids = at_most(store(a)?, limit, "runnable-jobs")?;
                in_id_order(ids.iter().map(String::as_str), None, "runnable-jobs")?;
                Ok(ids)
            },
        )
    }
}
