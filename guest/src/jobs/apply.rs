//! Applying a job's action to one task: read it again, check the job's
//! filter again, then run the task verb the action names with a guard
//! naming the job, so the change is recorded as the job's. The verb runs
//! over a buffer of its own on top of the call's: its writes join the
//! call's only when it answers `ok`, so a refusal leaves the task as it was
//! and the job still records the refusal in the same call. This module
//! never writes a job's keys.

#[allow(unused_imports)]
use crate::prelude::*;

use crate::kv::{self, Entry, Kv, KvError, ScanRequest, Snapshot, Write};
use crate::model::{ClaimError, Guard, Settlement, StoreError, Task};
use crate::search::{AssigneeFilter, TaskFilter};
use crate::tasks;
use crate::time::Timestamp;

use super::model::{JobAction, Outcome};

/// The call's store, as a snapshot under a nested buffer.
struct Under<'a, K: ?Sized>(&'a mut K);

impl<K: Kv + ?Sized> Snapshot for Under<'_, K> {
    fn concurrent_writers(&mut self) -> bool {
        self.0.concurrent_writers()
    }
    fn writer_slot(&mut self) -> u32 {
        self.0.writer_slot()
    }
    fn call_time(&mut self) -> Timestamp {
        self.0.call_time()
    }
    fn get(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>, KvError> {
        self.0.get(key)
    }
    fn get_many(&mut self, keys: &[Vec<u8>]) -> Result<Vec<Option<Vec<u8>>>, KvError> {
        self.0.get_many(keys)
    }
    fn scan(
        &mut self,
        start: &[u8],
        end: Option<&[u8]>,
        limit: u32,
        reverse: bool,
    ) -> Result<Vec<Entry>, KvError> {
        self.0.scan(start, end, limit, reverse)
    }
    fn scan_many(&mut self, requests: &[ScanRequest]) -> Result<Vec<Vec<Entry>>, KvError> {
        self.0.scan_many(requests)
    }
}

/// Runs `verb` over a buffer of its own: its writes reach `kv` only when it
/// answers `ok`.
fn nested<K: Kv + ?Sized, T>(
    kv: &mut K,
    verb: impl FnOnce(&mut kv::Buffered<Under<'_, K>>) -> Result<T, ClaimError>,
) -> Result<T, ClaimError> {
    let (answer, batch) = kv::buffered(Under(kv), verb);
    for w in batch {
        match w {
            Write::Put(k, v) => kv.set(&k, &v)?,
            Write::Delete(k) => kv.delete(&k)?,
        }
    }
    answer
}

/// Why `t` no longer matches `f`: the first condition it fails.
pub fn mismatch(f: &TaskFilter, t: &Task) -> Option<String> {
    if f.matches(t) {
        return None;
    }
    let only = |g: TaskFilter| g.matches(t);
    let none = TaskFilter::default;
    let reasons: [(bool, String); 10] = [
        (
            only(TaskFilter {
                states: f.states.clone(),
                ..none()
            }),
            format!("its state is now {}", t.state.as_str()),
        ),
        (
            only(TaskFilter {
                kinds: f.kinds.clone(),
                ..none()
            }),
            format!("its kind is {}", t.kind),
        ),
        (
            only(TaskFilter {
                role: f.role.clone(),
                ..none()
            }),
            "it is no longer offered to the role".into(),
        ),
        (
            only(TaskFilter {
                assignee: f.assignee.clone(),
                ..none()
            }),
            match (&f.assignee, &t.assignee) {
                (Some(AssigneeFilter::Nobody), Some(a)) => format!("it is now held by {a}"),
                (_, Some(a)) => format!("its assignee is now {a}"),
                (_, None) => "nobody holds it now".into(),
            },
        ),
        (
            only(TaskFilter {
                case: f.case.clone(),
                ..none()
            }),
            "its case differs".into(),
        ),
        (
            only(TaskFilter {
                run: f.run.clone(),
                ..none()
            }),
            "its run differs".into(),
        ),
        (
            only(TaskFilter {
                priority_at_least: f.priority_at_least,
                ..none()
            }),
            "its priority is now lower".into(),
        ),
        (
            only(TaskFilter {
                due_before: f.due_before,
                due_after: f.due_after,
                ..none()
            }),
            "its due time is now outside the range".into(),
        ),
        (
            only(TaskFilter {
                created_before: f.created_before,
                created_after: f.created_after,
                ..none()
            }),
            "it was created outside the range".into(),
        ),
        (
            only(TaskFilter {
                overdue_at: f.overdue_at,
                ..none()
            }),
            "it is no longer pending and overdue".into(),
        ),
    ];
    let why = reasons
        .into_iter()
        .find(|(ok, _)| !ok)
        .map_or_else(|| "it no longer matches".into(), |(_, why)| why);
    Some(format!("no longer matches the job's filter: {why}"))
}

/// What `action` makes of task `id` for job `job`: the task changed through
/// its verb (`Done`), or why not. Only damage and storage failures are
/// errors; the caller's call then writes nothing.
pub fn apply<K: Kv + ?Sized>(
    kv: &mut K,
    job: &str,
    filter: &TaskFilter,
    action: &JobAction,
    by: Option<&str>,
    id: &str,
) -> Result<Outcome, StoreError> {
    let Some(task) = tasks::get(kv, id)? else {
        return Ok(Outcome::Skipped("the task is gone".into()));
    };
    if let Some(why) = mismatch(filter, &task) {
        return Ok(Outcome::Skipped(why));
    }
    let guard = Guard {
        revision: Some(task.revision),
        job: Some(job.to_owned()),
    };
    let g = Some(&guard);
    let answer = nested(kv, |kv| match action {
        JobAction::Release => tasks::unassign(kv, id, by, g).map(|t| t.revision),
        JobAction::Assign(a) => {
            tasks::assign(kv, id, &a.to, &a.roles, None, a.override_roles, by, g)
                .map(|t| t.revision)
        }
        JobAction::Update(c) => tasks::update(kv, id, by, c, g).map(|t| t.revision),
        JobAction::Escalate => tasks::escalate(kv, id, g).map(|t| t.revision),
        JobAction::Withdraw => {
            tasks::settle(kv, id, Settlement::Withdrawn, None, None, g).map(|settled| {
                if settled {
                    task.revision.saturating_add(1)
                } else {
                    task.revision
                }
            })
        }
    });
    match answer {
        Ok(revision) if revision == task.revision => Ok(Outcome::Skipped(format!(
            "{} changes nothing on a task that is {}",
            action.name(),
            task.state.as_str()
        ))),
        Ok(_) => Ok(Outcome::Done),
        Err(ClaimError::Store(
            e @ (StoreError::Corrupt(_) | StoreError::Storage(_) | StoreError::NewerLayout(_)),
        )) => Err(e),
        Err(e) => Ok(Outcome::Failed(format!("{}: {e}", action.name()))),
    }
}
