//! What an answer of the component may be, checked before the call's writes
//! commit: a single-task answer is the task asked about, a claim's answer
//! is held by the claimant, a list holds no more than its limit and no task
//! twice; and the two WIT error answers, mapped to the public [`Error`].
//! Every interface's file checks its verbs' answers with these. A check
//! never repairs an answer: what the contract rules out is a sandbox
//! failure, never passed on.

use leasehold_guest::model::{ClaimError, Page, QueueQuery, StoreError, Task, TaskState};

use crate::bindings::{WitQueueQuery, wit};
use crate::error::{Error, SandboxError};

/// Owned strings, as a WIT `list<string>` argument takes them.
pub(super) fn strings(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| (*s).to_owned()).collect()
}

/// An answer the contract rules out: a sandbox failure, never passed on.
pub(super) fn malformed(what: String) -> Error {
    Error::Sandbox(SandboxError::Malformed(what))
}

/// A single-task answer must be the task that was asked about.
pub(super) fn same_task(task: wit::Task, id: &str) -> Result<Task, Error> {
    if task.id != id {
        return Err(malformed(format!(
            "asked for task {id}, answered task {}",
            task.id
        )));
    }
    Ok(task.into())
}

/// A claim's answer must be the task, now held by the claimant.
pub(super) fn held_task(task: wit::Task, id: &str, actor: &str) -> Result<Task, Error> {
    let task = same_task(task, id)?;
    held(task, actor)
}

pub(super) fn held(task: Task, actor: &str) -> Result<Task, Error> {
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
pub(super) fn distinct(tasks: &[Task], what: &str) -> Result<(), Error> {
    for (i, t) in tasks.iter().enumerate() {
        if tasks[..i].iter().any(|u| u.id == t.id) {
            return Err(malformed(format!("{what} answered task {} twice", t.id)));
        }
    }
    Ok(())
}

pub(super) fn at_most<T>(list: Vec<T>, limit: u32, what: &str) -> Result<Vec<T>, Error> {
    if list.len() > limit as usize {
        return Err(malformed(format!(
            "{what} answered {} entries for a limit of {limit}",
            list.len()
        )));
    }
    Ok(list)
}

pub(super) fn page(p: wit::Page, limit: u32, what: &str) -> Result<Page, Error> {
    let p = Page::from(p);
    Ok(Page {
        tasks: at_most(p.tasks, limit, what)?,
        next: p.next,
    })
}

pub(super) type StoreAnswer<T> = Result<T, wit::StoreError>;
pub(super) type ClaimAnswer<T> = Result<T, wit::ClaimError>;

pub(super) fn store<T>(a: StoreAnswer<T>) -> Result<T, Error> {
    a.map_err(|e| Error::Store(StoreError::from(e)))
}

pub(super) fn claim<T>(a: ClaimAnswer<T>) -> Result<T, Error> {
    a.map_err(|e| Error::from(ClaimError::from(e)))
}

pub(super) fn wit_query(query: &QueueQuery) -> WitQueueQuery {
    WitQueueQuery {
        roles: query.roles.clone(),
        actor: query.actor.clone(),
        limit: query.limit,
        after: query.after.clone(),
    }
}
