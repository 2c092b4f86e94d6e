//! The generated bindings for the `leasehold:engine/engine` world, and the
//! conversions between their types and the domain types the public API uses.
//! Nobody reads the generated code to understand the host; this file is the
//! whole boundary, and no other module may name a generated type except
//! through it.

mod generated {
    wasmtime::component::bindgen!({
        world: "engine",
        path: "../wit",
        // The outer result of a host function is a trap: the call aborts.
        imports: { default: trappable },
    });
}

pub(crate) use generated::EnginePre as WorldPre;
pub(crate) use generated::exports::leasehold::engine::kinds::KindDefinition as WitKindDefinition;
pub(crate) use generated::exports::leasehold::engine::tasks::QueueQuery as WitQueueQuery;
pub(crate) use generated::exports::leasehold::engine::tasks::{
    Finished as WitFinished, SettleAnswer as WitSettleAnswer,
    SettledAndClaimed as WitSettledAndClaimed,
};
pub(crate) use generated::leasehold::engine::kv;
pub(crate) use generated::leasehold::engine::types as wit;

leasehold_guest::wit_conversions!(wit);

impl From<WitKindDefinition> for leasehold_guest::model::KindDefinition {
    fn from(d: WitKindDefinition) -> Self {
        leasehold_guest::model::KindDefinition {
            kind: d.kind,
            outcomes: d.outcomes.into_iter().map(Into::into).collect(),
            revision: d.revision,
        }
    }
}

impl From<leasehold_guest::model::KindDefinition> for WitKindDefinition {
    fn from(d: leasehold_guest::model::KindDefinition) -> Self {
        WitKindDefinition {
            kind: d.kind,
            outcomes: d.outcomes.into_iter().map(Into::into).collect(),
            revision: d.revision,
        }
    }
}

pub(crate) use generated::exports::leasehold::engine::schedules as wit_schedules;

leasehold_guest::schedule_conversions!(wit_schedules);

pub(crate) use generated::exports::leasehold::engine::subscriptions as wit_subscriptions;

leasehold_guest::subscription_conversions!(wit_subscriptions);

pub(crate) use generated::exports::leasehold::engine::search as wit_search;

leasehold_guest::search_conversions!(wit_search);

pub(crate) use generated::exports::leasehold::engine::jobs as wit_jobs;

leasehold_guest::job_conversions!(wit_jobs);

impl From<leasehold_guest::model::Finished> for WitFinished {
    fn from(f: leasehold_guest::model::Finished) -> Self {
        WitFinished {
            id: f.id,
            settlement: f.settlement.into(),
            decision: f.decision.map(Into::into),
        }
    }
}

impl From<WitSettleAnswer> for leasehold_guest::model::SettleAnswer {
    fn from(a: WitSettleAnswer) -> Self {
        use leasehold_guest::model::SettleAnswer as A;
        match a {
            WitSettleAnswer::Settled => A::Settled,
            WitSettleAnswer::Already(s) => A::Already(s.into()),
            WitSettleAnswer::NotHeld(h) => A::NotHeld(h),
            WitSettleAnswer::NotFound => A::NotFound,
            WitSettleAnswer::Refused(m) => A::Refused(m),
        }
    }
}
