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
pub(crate) use generated::leasehold::engine::kv;
pub(crate) use generated::leasehold::engine::types as wit;

use leasehold_guest::calendar::{CatchUp, GapPolicy, Overlap, RepeatPolicy, Rule, ScheduleSpec};
use leasehold_guest::schedules::{Schedule, ScheduleDef};

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

/// A schedule's definition as the WIT spells it (a jitter of 0 is none).
pub(crate) fn schedule_spec_in(d: &ScheduleDef) -> wit_schedules::ScheduleSpec {
    use wit_schedules as api;
    let s = &d.spec;
    api::ScheduleSpec {
        id: d.id.clone(),
        run: d.run.clone(),
        case: d.case.clone(),
        step: d.step,
        phase: d.phase.into(),
        recurrence: match &s.rule {
            Rule::Cron { expr } => api::Recurrence::Cron(expr.clone()),
            Rule::Interval { every_ms, anchor } => api::Recurrence::Every(api::Interval {
                every_ms: *every_ms,
                anchor: *anchor,
            }),
        },
        zone: s.zone.clone(),
        start: s.start,
        end: s.end,
        gap: match s.gap {
            GapPolicy::ShiftForward => api::GapPolicy::ShiftForward,
            GapPolicy::Skip => api::GapPolicy::Skip,
        },
        repeat: match s.repeat {
            RepeatPolicy::First => api::RepeatPolicy::First,
            RepeatPolicy::Both => api::RepeatPolicy::Both,
        },
        overlap: match s.overlap {
            Overlap::Skip => api::OverlapPolicy::Skip,
            Overlap::BufferOne => api::OverlapPolicy::BufferOne,
            Overlap::BufferAll => api::OverlapPolicy::BufferAll,
        },
        catch_up: match s.catch_up {
            CatchUp::AllWithinWindow { window_ms } => api::CatchUp::AllWithin(window_ms),
            CatchUp::Latest { window_ms } => api::CatchUp::LatestWithin(window_ms),
            CatchUp::None => api::CatchUp::None,
        },
        // Beyond u32 is beyond the one-day bound: sent as the most, which
        // the component refuses as out of range rather than cut short.
        jitter_ms: s
            .jitter_ms
            .map_or(0, |j| u32::try_from(j).unwrap_or(u32::MAX)),
    }
}

/// A schedule as the component answers it.
pub(crate) fn schedule_out(s: wit_schedules::Schedule) -> Schedule {
    use wit_schedules as api;
    let w = s.spec;
    let rule = match w.recurrence {
        api::Recurrence::Cron(expr) => Rule::Cron { expr },
        api::Recurrence::Every(i) => Rule::Interval {
            every_ms: i.every_ms,
            anchor: i.anchor,
        },
    };
    Schedule {
        def: ScheduleDef {
            id: w.id,
            run: w.run,
            case: w.case,
            step: w.step,
            phase: w.phase.into(),
            spec: ScheduleSpec {
                rule,
                zone: w.zone,
                start: w.start,
                end: w.end,
                gap: match w.gap {
                    api::GapPolicy::ShiftForward => GapPolicy::ShiftForward,
                    api::GapPolicy::Skip => GapPolicy::Skip,
                },
                repeat: match w.repeat {
                    api::RepeatPolicy::First => RepeatPolicy::First,
                    api::RepeatPolicy::Both => RepeatPolicy::Both,
                },
                jitter_ms: (w.jitter_ms > 0).then_some(u64::from(w.jitter_ms)),
                overlap: match w.overlap {
                    api::OverlapPolicy::Skip => Overlap::Skip,
                    api::OverlapPolicy::BufferOne => Overlap::BufferOne,
                    api::OverlapPolicy::BufferAll => Overlap::BufferAll,
                },
                catch_up: match w.catch_up {
                    api::CatchUp::AllWithin(window_ms) => CatchUp::AllWithinWindow { window_ms },
                    api::CatchUp::LatestWithin(window_ms) => CatchUp::Latest { window_ms },
                    api::CatchUp::None => CatchUp::None,
                },
            },
        },
        paused: s.paused,
        next_at: s.next_at,
        last_at: s.last_at,
        waiting: s.waiting,
        revision: s.revision,
    }
}
