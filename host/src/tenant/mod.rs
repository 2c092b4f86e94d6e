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
//!
//! The methods are split by the WIT interface that exports their verb, one
//! file each, as wasmtime's hosts keep one file per interface: `tasks`,
//! `kinds`, `timers`, `runs`, `changes`, `admin`, `schedules`,
//! `subscriptions`, `search`, `jobs`; the answers' checks they share are
//! in `checks`. This file holds the handle, its deadline, its guard and the one way a
//! method makes its call; a new verb's method goes in its interface's file.

mod admin;
mod changes;
mod checks;
mod jobs;
mod kinds;
mod runs;
pub(crate) mod schedules;
mod search;
pub(crate) mod subscriptions;
mod tasks;
pub(crate) mod timers;

use std::sync::Arc;
use std::time::Instant;

use wasmtime::Store;

use crate::call::call;
use crate::ctx::{CallCtx, Export};
use crate::error::Error;
use crate::runtime::Shared;
use crate::verbs::Verb;
use leasehold_guest::model::Guard;

/// One tenant of an [`Engine`](crate::Engine). Cheap to clone; share it
/// between threads.
#[derive(Clone)]
pub struct Tenant {
    shared: Arc<Shared>,
    /// Shared with the instances kept for this tenant (see `keep`).
    name: Arc<str>,
    /// The caller's deadline (see [`Tenant::until`]).
    until: Option<Instant>,
    /// What the verbs that change one task are guarded by (see
    /// [`Tenant::guarded`]).
    guard: Option<Guard>,
}

impl std::fmt::Debug for Tenant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tenant")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl Tenant {
    pub(crate) fn new(shared: Arc<Shared>, name: Arc<str>) -> Self {
        Tenant {
            shared,
            name,
            until: None,
            guard: None,
        }
    }

    /// This tenant, for calls guarded by `guard`: every verb that changes
    /// one task (claim, release, take-over, renew, settle and decide,
    /// escalate, update, assign, unassign, delegate, note) goes ahead only
    /// on the task at `guard.revision`, if it names one (else
    /// [`Refusal::Stale`](crate::Refusal::Stale) with the current revision,
    /// and nothing written), and records `guard.job` in the change's
    /// history entry. Meant for one call: the revision moves with every
    /// change. Other verbs ignore it.
    pub fn guarded(&self, guard: Guard) -> Tenant {
        Tenant {
            guard: Some(guard),
            ..self.clone()
        }
    }

    /// The guard as the WIT takes it.
    fn wit_guard(&self) -> Option<crate::bindings::wit::Guard> {
        self.guard.clone().map(Into::into)
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
}
