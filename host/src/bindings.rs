//! The generated bindings for the `leasehold:engine/engine` world, and the
//! conversions between their types and the domain types the public API uses.
//! Nobody reads the generated code to understand the host; this file is the
//! whole boundary.

mod generated {
    wasmtime::component::bindgen!({
        world: "engine",
        path: "../wit",
        // The outer result of a host function is a trap: the call aborts.
        imports: { default: trappable },
    });
}

pub(crate) use generated::Engine as World;
pub(crate) use generated::EnginePre as WorldPre;
pub(crate) use generated::exports::leasehold::engine::tasks::QueueQuery as WitQueueQuery;
pub(crate) use generated::leasehold::engine::kv;
pub(crate) use generated::leasehold::engine::types as wit;

use leasehold_guest::model;

macro_rules! same_enum {
    ($wit:ty, $model:ty, $($v:ident),+) => {
        impl From<$wit> for $model {
            fn from(v: $wit) -> Self {
                match v { $(<$wit>::$v => <$model>::$v),+ }
            }
        }
        impl From<$model> for $wit {
            fn from(v: $model) -> Self {
                match v { $(<$model>::$v => <$wit>::$v),+ }
            }
        }
    };
}

same_enum!(wit::Priority, model::Priority, Low, Normal, High, Urgent);
same_enum!(
    wit::TaskState,
    model::TaskState,
    Open,
    Claimed,
    Escalated,
    Completed,
    Expired,
    Withdrawn
);
same_enum!(wit::OnExpiry, model::OnExpiry, Deny, Escalate, Proceed);
same_enum!(
    wit::Settlement,
    model::Settlement,
    Completed,
    Expired,
    Withdrawn
);
same_enum!(wit::Phase, model::Phase, Forward, Compensating);
same_enum!(
    wit::ArmOutcome,
    model::ArmOutcome,
    Armed,
    AlreadyArmed,
    RunSealed
);

pub(crate) fn task_to_wit(t: &model::Task) -> wit::Task {
    wit::Task {
        id: t.id.clone(),
        run: t.run.clone(),
        case: t.case.clone(),
        kind: t.kind.clone(),
        justification: t.justification.clone(),
        candidate_roles: t.candidate_roles.clone(),
        assignee: t.assignee.clone(),
        priority: t.priority.into(),
        state: t.state.into(),
        on_expiry: t.on_expiry.into(),
        escalate_to: t.escalate_to.clone(),
        excluded_actors: t.excluded_actors.clone(),
        created_at: t.created_at,
        due_at: t.due_at,
    }
}

impl From<wit::Task> for model::Task {
    fn from(t: wit::Task) -> Self {
        model::Task {
            id: t.id,
            run: t.run,
            case: t.case,
            kind: t.kind,
            justification: t.justification,
            candidate_roles: t.candidate_roles,
            assignee: t.assignee,
            priority: t.priority.into(),
            state: t.state.into(),
            on_expiry: t.on_expiry.into(),
            escalate_to: t.escalate_to,
            excluded_actors: t.excluded_actors,
            created_at: t.created_at,
            due_at: t.due_at,
        }
    }
}

pub(crate) fn timer_to_wit(t: &model::Timer) -> wit::Timer {
    wit::Timer {
        run: t.run.clone(),
        case: t.case.clone(),
        effect: t.effect.clone(),
        step: t.step,
        phase: t.phase.into(),
        fire_at: t.fire_at,
    }
}

impl From<wit::Timer> for model::Timer {
    fn from(t: wit::Timer) -> Self {
        model::Timer {
            run: t.run,
            case: t.case,
            effect: t.effect,
            step: t.step,
            phase: t.phase.into(),
            fire_at: t.fire_at,
        }
    }
}

impl From<wit::Page> for model::Page {
    fn from(p: wit::Page) -> Self {
        model::Page {
            tasks: p.tasks.into_iter().map(Into::into).collect(),
            next: p.next,
        }
    }
}

impl From<wit::SealOutcome> for model::SealOutcome {
    fn from(o: wit::SealOutcome) -> Self {
        model::SealOutcome {
            timers_disarmed: o.timers_disarmed,
            tasks_withdrawn: o.tasks_withdrawn,
        }
    }
}

impl From<wit::Discrepancy> for model::Discrepancy {
    fn from(d: wit::Discrepancy) -> Self {
        model::Discrepancy {
            structure: d.structure,
            subject: d.subject,
            detail: d.detail,
        }
    }
}

impl From<wit::StoreError> for model::StoreError {
    fn from(e: wit::StoreError) -> Self {
        match e {
            wit::StoreError::NotFound(s) => model::StoreError::NotFound(s),
            wit::StoreError::Invalid(s) => model::StoreError::Invalid(s),
            wit::StoreError::Corrupt(s) => model::StoreError::Corrupt(s),
            wit::StoreError::Storage(s) => model::StoreError::Storage(s),
        }
    }
}

impl From<wit::ClaimError> for model::ClaimError {
    fn from(e: wit::ClaimError) -> Self {
        match e {
            wit::ClaimError::NotFound(s) => model::ClaimError::NotFound(s),
            wit::ClaimError::Excluded(s) => model::ClaimError::Excluded(s),
            wit::ClaimError::WrongRole(s) => model::ClaimError::WrongRole(s),
            wit::ClaimError::NotPending(s) => model::ClaimError::NotPending(s.into()),
            wit::ClaimError::AlreadyClaimed(s) => model::ClaimError::AlreadyClaimed(s),
            wit::ClaimError::NotHeld(s) => model::ClaimError::NotHeld(s),
            wit::ClaimError::Store(s) => model::ClaimError::Store(s.into()),
        }
    }
}
