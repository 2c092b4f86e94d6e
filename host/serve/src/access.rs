//! Access to a task: the one rule of which tasks, and which changes of
//! tasks, a caller may see, and the only way a handler reaches one task.
//!
//! Services and operators see every task. A reviewer sees a task it holds,
//! or one it may take (offered to one of its roles, or to no role in
//! particular, and not excluding it); a change of a task as the change left
//! it (so a reviewer sees a task leave its queue when someone else takes
//! it), and no timer's. The handlers, the feed and the event stream all ask
//! [`may_see_task`] or [`may_see_change`], which are one rule over what a
//! task or an entry says of its holder, exclusions and roles.
//!
//! A path's task id is a [`TaskId`], opaque outside this module: a handler
//! reaches the task it names only through [`Caller::task`], whose calls
//! answer a reviewer about a task it may not see exactly as about a task
//! that does not exist (`not-found`, after the same one read), so no answer
//! tells it the task exists. A handler that forgot would have no id to
//! pass to the engine, and does not compile. It must never let a refusal,
//! a timing or a field tell a reviewer of a task it may not see.

use std::time::Instant;

use leasehold_guest::model::Guard;
use leasehold_host::{self as host, Tenant, Verb};
use serde::Deserialize;

use crate::auth::{Principal, Scope};
use crate::extract::Caller;
use crate::problem::ApiError;
use crate::revision::IfMatch;

/// How many times a change made on the task as seen reads it again when it
/// changed between the read and the change.
const SEEN_TRIES: usize = 3;

/// What a task, or one change of it, says of who may see it.
struct Standing<'a> {
    assignee: Option<&'a String>,
    excluded_actors: &'a [String],
    candidate_roles: &'a [String],
}

impl<'a> From<&'a host::Task> for Standing<'a> {
    fn from(t: &'a host::Task) -> Self {
        Standing {
            assignee: t.assignee.as_ref(),
            excluded_actors: &t.excluded_actors,
            candidate_roles: &t.candidate_roles,
        }
    }
}

impl<'a> From<&'a host::HistoryEntry> for Standing<'a> {
    fn from(e: &'a host::HistoryEntry) -> Self {
        Standing {
            assignee: e.assignee.as_ref(),
            excluded_actors: &e.excluded_actors,
            candidate_roles: &e.candidate_roles,
        }
    }
}

/// The rule: a service or operator sees everything; a reviewer a task it
/// holds, or one offered to its roles (or to none in particular) that does
/// not exclude it.
fn may_see(p: &Principal, t: Standing<'_>) -> bool {
    if p.scope != Scope::Reviewer {
        return true;
    }
    let me = &p.actor;
    t.assignee == Some(me)
        || (!t.excluded_actors.contains(me)
            && (t.candidate_roles.is_empty()
                || t.candidate_roles.iter().any(|r| p.roles.contains(r))))
}

/// Whether `p` may see the task as it stands.
pub fn may_see_task(p: &Principal, t: &host::Task) -> bool {
    may_see(p, t.into())
}

/// Whether `p` may see a feed entry: a change of a task as the change left
/// it; a timer's only if it is not a reviewer.
pub fn may_see_change(p: &Principal, change: &host::Change) -> bool {
    match change {
        host::Change::Task(t) => may_see(p, (&t.entry).into()),
        host::Change::Timer(_) => p.scope != Scope::Reviewer,
    }
}

/// A task id as a path names it. Opaque: only [`Caller::task`] reads it.
#[derive(Deserialize)]
#[serde(transparent)]
pub struct TaskId(String);

/// The task a path names.
#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Path)]
pub struct TaskPath {
    /// The task id.
    #[param(schema_with = crate::schema::name)]
    pub id: TaskId,
}

/// One entry of a task's history, as a path names it.
#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Path)]
pub struct EntryPath {
    /// The task id.
    #[param(schema_with = crate::schema::name)]
    pub id: TaskId,
    /// The entry's `seq`.
    #[param(schema_with = crate::schema::entry_seq)]
    pub seq: u64,
}

impl Caller {
    /// The task `id` names, as this caller may reach it: the only way to
    /// one task.
    pub fn task(&self, id: TaskId) -> OneTask<'_> {
        OneTask {
            caller: self,
            id: id.0,
            expected: None,
        }
    }

    /// Whether this caller may see the task as it stands (a list's item).
    pub fn may_see(&self, t: &host::Task) -> bool {
        may_see_task(&self.principal, t)
    }
}

/// One task, as a caller reaches it.
pub struct OneTask<'c> {
    caller: &'c Caller,
    id: String,
    /// The revision the caller was shown (`If-Match`), the guard of every
    /// change made through it.
    expected: Option<u64>,
}

impl OneTask<'_> {
    /// Changes made through this handle go ahead only on the revision
    /// `If-Match` names (if it names one).
    pub fn expecting(mut self, if_match: IfMatch) -> Self {
        self.expected = if_match.0;
        self
    }

    /// No such task, in the words every route about a task uses.
    fn missing(&self) -> ApiError {
        ApiError::NotFound(format!("no task {}", self.id))
    }

    /// Not found, in words of the handler's own that name the task.
    pub fn not_found(&self, detail: impl FnOnce(&str) -> String) -> ApiError {
        ApiError::NotFound(detail(&self.id))
    }

    async fn read(&self) -> Result<Option<host::Task>, ApiError> {
        self.read_by(self.caller.deadline()).await
    }

    async fn read_by(&self, deadline: Instant) -> Result<Option<host::Task>, ApiError> {
        let id = self.id.clone();
        self.caller
            .call_at(deadline, Verb::Get, move |x| x.get(&id))
            .await
    }

    /// The id the path named, as the caller gave it.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The task, when it exists and the caller may see it.
    pub async fn get(&self) -> Result<host::Task, ApiError> {
        self.get_at(self.caller.deadline()).await
    }

    /// [`get`](Self::get), decided by `deadline` (a long-poll's later
    /// tries).
    pub async fn get_at(&self, deadline: Instant) -> Result<host::Task, ApiError> {
        match self.read_by(deadline).await? {
            Some(t) if self.caller.may_see(&t) => Ok(t),
            _ => Err(self.missing()),
        }
    }

    /// Runs `verb` on the task (`f` is handed its id). A reviewer is
    /// answered a refusal about it (or its absence) as `get` would answer:
    /// the refusal only about a task it may see, else not found. Every such
    /// refusal reads the task once to decide, so a hidden task and a
    /// missing one cost the same work and take the same time.
    pub async fn act<T, F>(&self, verb: Verb, f: F) -> Result<T, ApiError>
    where
        T: Send + 'static,
        F: FnOnce(&Tenant, &str) -> Result<T, host::Error> + Send + 'static,
    {
        let id = self.id.clone();
        let guard = self.expected.map(|revision| Guard {
            revision: Some(revision),
            job: None,
        });
        let answer = self
            .caller
            .call(verb, move |x| match guard {
                Some(g) => f(&x.guarded(g), &id),
                None => f(x, &id),
            })
            .await;
        if self.caller.principal.scope != Scope::Reviewer {
            return answer;
        }
        // A refusal or a stale revision says the task exists: told only
        // of one it may see. (The rules check a revision before a holder.)
        let refusal = match answer {
            Err(e @ (ApiError::Refused(_) | ApiError::NotFound(_) | ApiError::Stale(_))) => e,
            other => return other,
        };
        match self.read().await? {
            Some(t) if self.caller.may_see(&t) && !matches!(refusal, ApiError::NotFound(_)) => {
                Err(refusal)
            }
            _ => Err(self.missing()),
        }
    }

    /// Runs `verb`, which the rules allow anyone to call on any task, once
    /// the caller is known to see the task, on the task as it saw it: on
    /// the revision `If-Match` names, or else the one just read, so a task
    /// that changed in between (perhaps out of the caller's sight) is read
    /// again, a few times, rather than changed unseen.
    pub async fn act_seen<T, F>(&self, verb: Verb, f: F) -> Result<T, ApiError>
    where
        T: Send + 'static,
        F: Fn(&Tenant, &str) -> Result<T, host::Error> + Send + Sync + 'static,
    {
        let f = std::sync::Arc::new(f);
        for _ in 0..SEEN_TRIES {
            let seen = self.get().await?;
            let revision = self.expected.unwrap_or(seen.revision);
            let (id, f) = (self.id.clone(), f.clone());
            let guard = Guard {
                revision: Some(revision),
                job: None,
            };
            match self
                .caller
                .call(verb, move |x| f(&x.guarded(guard), &id))
                .await
            {
                Err(ApiError::Stale(_)) if self.expected.is_none() => continue,
                other => return other,
            }
        }
        Err(ApiError::Unavailable {
            kind: "conflict",
            detail: format!("task {} changed on each of {SEEN_TRIES} tries", self.id),
        })
    }

    /// Runs `verb`, a read of the task's record, once the task is known to
    /// exist and the caller may see it (else not found, for every caller).
    pub async fn read_record<T, F>(&self, verb: Verb, f: F) -> Result<T, ApiError>
    where
        T: Send + 'static,
        F: FnOnce(&Tenant, &str) -> Result<T, host::Error> + Send + 'static,
    {
        self.get().await?;
        let id = self.id.clone();
        self.caller.call(verb, move |x| f(x, &id)).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn who(scope: Scope) -> Principal {
        Principal {
            tenant: "acme".into(),
            actor: "alice".into(),
            roles: vec!["finance".into()],
            scope,
        }
    }

    fn task(roles: &[&str], assignee: Option<&str>, excluded: &[&str]) -> host::Task {
        host::Task {
            id: "t".into(),
            run: "r".into(),
            case: None,
            kind: "k".into(),
            justification: "{}".into(),
            candidate_roles: roles.iter().map(|r| (*r).to_owned()).collect(),
            assignee: assignee.map(str::to_owned),
            lease_until: None,
            priority: host::Priority::Normal,
            state: host::TaskState::Open,
            on_expiry: host::OnExpiry::Deny,
            escalate_to: Vec::new(),
            excluded_actors: excluded.iter().map(|a| (*a).to_owned()).collect(),
            created_at: 0,
            due_at: None,
            revision: 0,
            decision: None,
            outcomes: Vec::new(),
            remind_before: Vec::new(),
            escalation: Vec::new(),
            steps_done: 0,
        }
    }

    /// The change a task's entry records, standing as the task does.
    fn change_of(t: &host::Task) -> host::Change {
        host::Change::Task(host::TaskChange {
            id: t.id.clone(),
            entry: host::HistoryEntry {
                seq: 1,
                at: 0,
                verb: Verb::Open.name().into(),
                actor: None,
                before: None,
                after: t.state,
                assignee: t.assignee.clone(),
                lease_until: t.lease_until,
                candidate_roles: t.candidate_roles.clone(),
                excluded_actors: t.excluded_actors.clone(),
                revision: t.revision,
                changes: Vec::new(),
                decision: None,
                note: None,
                job: None,
                step: None,
            },
            run: Some(t.run.clone()),
            kind: Some(t.kind.clone()),
        })
    }

    /// A task and a change that leaves the task as it stands are seen by
    /// the same callers: one rule, whichever a reader holds.
    #[test]
    fn a_task_and_its_change_are_seen_by_the_same_callers() {
        let cases = [
            (task(&["finance"], None, &[]), true),
            (task(&[], None, &[]), true),
            (task(&["legal"], None, &[]), false),
            (task(&["legal"], Some("alice"), &[]), true),
            (task(&["finance"], None, &["alice"]), false),
            (task(&["finance"], Some("alice"), &["alice"]), true),
            (task(&["finance"], Some("bob"), &[]), true),
            (task(&["legal"], Some("bob"), &[]), false),
        ];
        for (t, reviewer_sees) in &cases {
            let change = change_of(t);
            let alice = who(Scope::Reviewer);
            assert_eq!(may_see_task(&alice, t), *reviewer_sees, "{t:?}");
            assert_eq!(may_see_change(&alice, &change), *reviewer_sees, "{t:?}");
            for scope in [Scope::Service, Scope::Operator] {
                assert!(may_see_task(&who(scope), t));
                assert!(may_see_change(&who(scope), &change));
            }
        }
    }

    #[test]
    fn a_reviewer_sees_no_timer() {
        let timer = host::Change::Timer(host::TimerChange {
            run: "r".into(),
            effect: "e".into(),
            at: 0,
            verb: Verb::Arm.name().into(),
            what: host::TimerEvent::Armed,
            fire_at: 1,
            lease_until: None,
        });
        assert!(!may_see_change(&who(Scope::Reviewer), &timer));
        assert!(may_see_change(&who(Scope::Service), &timer));
    }
}
