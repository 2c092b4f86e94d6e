//! The typed verbs, one method per WIT export, scoped to one tenant.
//!
//! Each method is one call of the component in one transaction. Answers are
//! checked for what the contract rules out (a task under another id, more
//! entries than the limit asked for) before they reach the caller: a faulty
//! or hostile guest is reported as a sandbox failure, never passed on.
//!
//! A call names its export by the verb and spells the answer's WIT type;
//! the arguments and the answer are checked against the component's
//! signature of that one function when the call runs.

use leasehold_guest::model::{
    ArmOutcome, ClaimError, Discrepancy, Page, QueueQuery, SealOutcome, Settlement, StoreError,
    Task, Timer, Timestamp,
};

use crate::bindings::{WitQueueQuery, wit};
use crate::engine::{Engine, Mode};
use crate::error::{Error, SandboxError};

/// One tenant of an [`Engine`]. Cheap to clone; share it between threads.
#[derive(Clone, Debug)]
pub struct Tenant {
    engine: Engine,
    name: String,
    prefix: Vec<u8>,
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

impl Tenant {
    pub(crate) fn new(engine: Engine, name: String, prefix: Vec<u8>) -> Self {
        Tenant {
            engine,
            name,
            prefix,
        }
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub(crate) fn prefix(&self) -> &[u8] {
        &self.prefix
    }

    /// Creates a task; first open wins (see the contract).
    pub fn open(&self, task: &Task) -> Result<Task, Error> {
        let t = wit::Task::from(task.clone());
        let a: StoreAnswer<wit::Task> = self
            .engine
            .call(self, "open", Mode::Write, |x, s| x.call(s, (&t,)))?;
        same_task(store(a)?, &task.id)
    }

    pub fn get(&self, id: &str) -> Result<Option<Task>, Error> {
        let a: StoreAnswer<Option<wit::Task>> =
            self.engine
                .call(self, "get", Mode::Read, |x, s| x.call(s, (id,)))?;
        store(a)?.map(|t| same_task(t, id)).transpose()
    }

    pub fn claim(&self, id: &str, actor: &str, roles: &[&str]) -> Result<Task, Error> {
        let roles = strings(roles);
        let a: ClaimAnswer<wit::Task> = self.engine.call(self, "claim", Mode::Write, |x, s| {
            x.call(s, (id, actor, roles.as_slice()))
        })?;
        same_task(claim(a)?, id)
    }

    pub fn release(&self, id: &str, actor: &str) -> Result<(), Error> {
        let a: ClaimAnswer<()> = self
            .engine
            .call(self, "release", Mode::Write, |x, s| x.call(s, (id, actor)))?;
        claim(a)
    }

    pub fn take_over(
        &self,
        id: &str,
        from: &str,
        actor: &str,
        roles: &[&str],
    ) -> Result<Task, Error> {
        let roles = strings(roles);
        let a: ClaimAnswer<wit::Task> =
            self.engine.call(self, "take-over", Mode::Write, |x, s| {
                x.call(s, (id, from, actor, roles.as_slice()))
            })?;
        same_task(claim(a)?, id)
    }

    /// Compare-and-set from pending: `true` when this call settled the task.
    pub fn settle(&self, id: &str, settlement: Settlement) -> Result<bool, Error> {
        let settlement = wit::Settlement::from(settlement);
        let a: StoreAnswer<bool> = self.engine.call(self, "settle", Mode::Write, |x, s| {
            x.call(s, (id, settlement))
        })?;
        store(a)
    }

    pub fn withdraw_run(&self, run: &str, awaited: &[&str]) -> Result<u32, Error> {
        let awaited = strings(awaited);
        let a: StoreAnswer<u32> = self
            .engine
            .call(self, "withdraw-run", Mode::Write, |x, s| {
                x.call(s, (run, awaited.as_slice()))
            })?;
        store(a)
    }

    pub fn escalate(&self, id: &str) -> Result<Task, Error> {
        let a: StoreAnswer<wit::Task> =
            self.engine
                .call(self, "escalate", Mode::Write, |x, s| x.call(s, (id,)))?;
        same_task(store(a)?, id)
    }

    pub fn queue(&self, query: &QueueQuery) -> Result<Page, Error> {
        let q = WitQueueQuery {
            roles: query.roles.clone(),
            actor: query.actor.clone(),
            limit: query.limit,
            after: query.after.clone(),
        };
        let a: StoreAnswer<wit::Page> = self
            .engine
            .call(self, "queue", Mode::Read, |x, s| x.call(s, (&q,)))?;
        page(store(a)?, query.limit, "queue")
    }

    pub fn for_case(&self, case: &str, limit: u32, after: Option<&str>) -> Result<Page, Error> {
        let a: StoreAnswer<wit::Page> =
            self.engine.call(self, "for-case", Mode::Read, |x, s| {
                x.call(s, (case, limit, after))
            })?;
        page(store(a)?, limit, "for-case")
    }

    /// Pending tasks (claimed ones count). One counter read.
    pub fn open_count(&self) -> Result<u64, Error> {
        let a: StoreAnswer<u64> = self
            .engine
            .call(self, "open-count", Mode::Read, |x, s| x.call(s, ()))?;
        store(a)
    }

    pub fn overdue(&self, now: Timestamp, limit: u32) -> Result<Vec<Task>, Error> {
        let a: StoreAnswer<Vec<wit::Task>> =
            self.engine
                .call(self, "overdue", Mode::Read, |x, s| x.call(s, (now, limit)))?;
        let tasks = at_most(store(a)?, limit, "overdue")?;
        Ok(tasks.into_iter().map(Into::into).collect())
    }

    pub fn arm(&self, timer: &Timer) -> Result<ArmOutcome, Error> {
        let t = wit::Timer::from(timer.clone());
        let a: StoreAnswer<wit::ArmOutcome> =
            self.engine
                .call(self, "arm", Mode::Write, |x, s| x.call(s, (&t,)))?;
        Ok(store(a)?.into())
    }

    /// Claims up to `limit` due timers under a lease of `lease_ms`.
    pub fn claim_due(
        &self,
        now: Timestamp,
        limit: u32,
        lease_ms: u32,
    ) -> Result<Vec<Timer>, Error> {
        let a: StoreAnswer<Vec<wit::Timer>> =
            self.engine.call(self, "claim-due", Mode::Write, |x, s| {
                x.call(s, (now, limit, lease_ms))
            })?;
        let timers = at_most(store(a)?, limit, "claim-due")?;
        Ok(timers.into_iter().map(Into::into).collect())
    }

    pub fn disarm(&self, run: &str, effect: &str) -> Result<bool, Error> {
        let a: StoreAnswer<bool> = self
            .engine
            .call(self, "disarm", Mode::Write, |x, s| x.call(s, (run, effect)))?;
        store(a)
    }

    pub fn disarm_run(&self, run: &str) -> Result<u32, Error> {
        let a: StoreAnswer<u32> = self
            .engine
            .call(self, "disarm-run", Mode::Write, |x, s| x.call(s, (run,)))?;
        store(a)
    }

    /// Armed timers. One counter read.
    pub fn pending_count(&self) -> Result<u64, Error> {
        let a: StoreAnswer<u64> = self
            .engine
            .call(self, "pending-count", Mode::Read, |x, s| x.call(s, ()))?;
        store(a)
    }

    pub fn next_due(&self) -> Result<Option<Timestamp>, Error> {
        let a: StoreAnswer<Option<Timestamp>> =
            self.engine
                .call(self, "next-due", Mode::Read, |x, s| x.call(s, ()))?;
        store(a)
    }

    pub fn seal(&self, run: &str, awaited: &[&str]) -> Result<SealOutcome, Error> {
        let awaited = strings(awaited);
        let a: StoreAnswer<wit::SealOutcome> =
            self.engine.call(self, "seal", Mode::Write, |x, s| {
                x.call(s, (run, awaited.as_slice()))
            })?;
        Ok(store(a)?.into())
    }

    pub fn is_sealed(&self, run: &str) -> Result<bool, Error> {
        let a: StoreAnswer<bool> = self
            .engine
            .call(self, "is-sealed", Mode::Read, |x, s| x.call(s, (run,)))?;
        store(a)
    }

    /// The consistency check: every discrepancy between this tenant's rows
    /// and its indexes and counters. Empty means consistent.
    pub fn check(&self) -> Result<Vec<Discrepancy>, Error> {
        let a: StoreAnswer<Vec<wit::Discrepancy>> =
            self.engine
                .call(self, "check", Mode::Read, |x, s| x.call(s, ()))?;
        Ok(store(a)?.into_iter().map(Into::into).collect())
    }
}
