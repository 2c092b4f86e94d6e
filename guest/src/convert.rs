//! Conversions between the domain types and a set of WIT-generated types.
//!
//! The component (wit-bindgen) and the host (wasmtime's `bindgen!`) each
//! generate their own copy of the `types` interface; both have the same field
//! and variant names, so one macro writes every `From` in both directions for
//! either side, and the two boundaries cannot drift apart.

/// Writes `From` conversions, both ways, between `$crate::model` and the
/// generated types module that `$wit` names in the calling scope (bring it in
/// with `use …::leasehold::engine::types as wit;`).
#[macro_export]
macro_rules! wit_conversions {
    ($wit:ident) => {
        $crate::wit_conversions!(@enum $wit, Priority, Low, Normal, High, Urgent);
        $crate::wit_conversions!(@enum $wit, TaskState, Open, Claimed, Escalated, Completed, Expired, Withdrawn);
        $crate::wit_conversions!(@enum $wit, OnExpiry, Deny, Escalate, Proceed);
        $crate::wit_conversions!(@enum $wit, Settlement, Completed, Expired, Withdrawn);
        $crate::wit_conversions!(@enum $wit, Phase, Forward, Compensating);
        $crate::wit_conversions!(@enum $wit, ArmOutcome, Armed, AlreadyArmed, RunSealed);
        $crate::wit_conversions!(@enum $wit, TimerEvent, Armed, Claimed, Retired, Rescheduled);
        $crate::wit_conversions!(@record $wit, TimerInfo,; timer; lease_until);
        $crate::wit_conversions!(@record $wit, TimerChange, run, effect, at, verb; what;
            fire_at, lease_until);
        $crate::wit_conversions!(@record $wit, TaskChange, id; entry; run, kind);
        $crate::wit_conversions!(@record $wit, OutcomeRule, name, needs_reason, output_schema;;);
        $crate::wit_conversions!(@record $wit, Decision, outcome, reason, output;;);
        $crate::wit_conversions!(@record $wit, DecisionRecord, outcome, reason, output, by, at;;);
        $crate::wit_conversions!(@record $wit, Guard, revision, job;;);
        $crate::wit_conversions!(@record $wit, FieldChange, field, before, after;;);
        $crate::wit_conversions!(@record $wit, EscalationStep, after_due_ms; action;);
        $crate::wit_conversions!(@variant $wit, TaskStep, Reminder; Escalation);
        $crate::wit_conversions!(@record $wit, FeedEntry, position; change;);
        $crate::wit_conversions!(@record $wit, FeedPlace, slot, seq;;);
        $crate::wit_conversions!(@record $wit, TrimOutcome, feed_removed, history_removed, more;;);
        $crate::wit_conversions!(@variant $wit, Change,; Task, Timer);
        $crate::wit_conversions!(@variant $wit, FeedRead, Gone; Page);

        $crate::wit_conversions!(@record $wit, Lease, now, lease_ms;;);
        $crate::wit_conversions!(@record $wit, Timer, run, case, effect, step; phase; fire_at);
        $crate::wit_conversions!(@record $wit, SealOutcome, timers_disarmed, tasks_withdrawn;;);
        $crate::wit_conversions!(@record $wit, Discrepancy, structure, subject, detail;;);
        $crate::wit_conversions!(@variant $wit, StoreError, NotFound, Invalid, Corrupt, Storage, NewerLayout, Stale;);
        $crate::wit_conversions!(@variant $wit, ClaimError,
            NotFound, Excluded, WrongRole, AlreadyClaimed, NotHeld, Stale; NotPending, Store);

        impl From<$wit::StepAction> for $crate::model::StepAction {
            fn from(a: $wit::StepAction) -> Self {
                match a {
                    $wit::StepAction::Escalate(roles) => $crate::model::StepAction::Escalate(roles),
                    $wit::StepAction::Expire => $crate::model::StepAction::Expire,
                }
            }
        }
        impl From<$crate::model::StepAction> for $wit::StepAction {
            fn from(a: $crate::model::StepAction) -> Self {
                match a {
                    $crate::model::StepAction::Escalate(roles) => $wit::StepAction::Escalate(roles),
                    $crate::model::StepAction::Expire => $wit::StepAction::Expire,
                }
            }
        }
        impl From<$wit::Task> for $crate::model::Task {
            fn from(t: $wit::Task) -> Self {
                $crate::model::Task {
                    id: t.id,
                    run: t.run,
                    case: t.case,
                    kind: t.kind,
                    justification: t.justification,
                    candidate_roles: t.candidate_roles,
                    assignee: t.assignee,
                    lease_until: t.lease_until,
                    priority: t.priority.into(),
                    state: t.state.into(),
                    on_expiry: t.on_expiry.into(),
                    escalate_to: t.escalate_to,
                    excluded_actors: t.excluded_actors,
                    created_at: t.created_at,
                    due_at: t.due_at,
                    revision: t.revision,
                    decision: t.decision.map(Into::into),
                    outcomes: t.outcomes.into_iter().map(Into::into).collect(),
                    remind_before: t.remind_before,
                    escalation: t.escalation.into_iter().map(Into::into).collect(),
                    steps_done: t.steps_done,
                }
            }
        }
        impl From<$crate::model::Task> for $wit::Task {
            fn from(t: $crate::model::Task) -> Self {
                $wit::Task {
                    id: t.id,
                    run: t.run,
                    case: t.case,
                    kind: t.kind,
                    justification: t.justification,
                    candidate_roles: t.candidate_roles,
                    assignee: t.assignee,
                    lease_until: t.lease_until,
                    priority: t.priority.into(),
                    state: t.state.into(),
                    on_expiry: t.on_expiry.into(),
                    escalate_to: t.escalate_to,
                    excluded_actors: t.excluded_actors,
                    created_at: t.created_at,
                    due_at: t.due_at,
                    revision: t.revision,
                    decision: t.decision.map(Into::into),
                    outcomes: t.outcomes.into_iter().map(Into::into).collect(),
                    remind_before: t.remind_before,
                    escalation: t.escalation.into_iter().map(Into::into).collect(),
                    steps_done: t.steps_done,
                }
            }
        }
        impl From<$wit::TaskChanges> for $crate::model::TaskChanges {
            fn from(c: $wit::TaskChanges) -> Self {
                $crate::model::TaskChanges {
                    due_at: c.due_at,
                    priority: c.priority.map(Into::into),
                    candidate_roles: c.candidate_roles,
                    escalate_to: c.escalate_to,
                    excluded_actors: c.excluded_actors,
                    on_expiry: c.on_expiry.map(Into::into),
                    outcomes: c.outcomes.map(|o| o.into_iter().map(Into::into).collect()),
                    remind_before: c.remind_before,
                    escalation: c.escalation.map(|e| e.into_iter().map(Into::into).collect()),
                }
            }
        }
        impl From<$crate::model::TaskChanges> for $wit::TaskChanges {
            fn from(c: $crate::model::TaskChanges) -> Self {
                $wit::TaskChanges {
                    due_at: c.due_at,
                    priority: c.priority.map(Into::into),
                    candidate_roles: c.candidate_roles,
                    escalate_to: c.escalate_to,
                    excluded_actors: c.excluded_actors,
                    on_expiry: c.on_expiry.map(Into::into),
                    outcomes: c.outcomes.map(|o| o.into_iter().map(Into::into).collect()),
                    remind_before: c.remind_before,
                    escalation: c.escalation.map(|e| e.into_iter().map(Into::into).collect()),
                }
            }
        }
        impl From<$wit::HistoryEntry> for $crate::model::HistoryEntry {
            fn from(e: $wit::HistoryEntry) -> Self {
                $crate::model::HistoryEntry {
                    seq: e.seq,
                    at: e.at,
                    verb: e.verb,
                    actor: e.actor,
                    before: e.before.map(Into::into),
                    after: e.after.into(),
                    assignee: e.assignee,
                    lease_until: e.lease_until,
                    candidate_roles: e.candidate_roles,
                    excluded_actors: e.excluded_actors,
                    revision: e.revision,
                    changes: e.changes.into_iter().map(Into::into).collect(),
                    decision: e.decision.map(Into::into),
                    note: e.note,
                    job: e.job,
                    step: e.step.map(Into::into),
                }
            }
        }
        impl From<$crate::model::HistoryEntry> for $wit::HistoryEntry {
            fn from(e: $crate::model::HistoryEntry) -> Self {
                $wit::HistoryEntry {
                    seq: e.seq,
                    at: e.at,
                    verb: e.verb,
                    actor: e.actor,
                    before: e.before.map(Into::into),
                    after: e.after.into(),
                    assignee: e.assignee,
                    lease_until: e.lease_until,
                    candidate_roles: e.candidate_roles,
                    excluded_actors: e.excluded_actors,
                    revision: e.revision,
                    changes: e.changes.into_iter().map(Into::into).collect(),
                    decision: e.decision.map(Into::into),
                    note: e.note,
                    job: e.job,
                    step: e.step.map(Into::into),
                }
            }
        }
        impl From<$wit::FeedPage> for $crate::model::FeedPage {
            fn from(p: $wit::FeedPage) -> Self {
                $crate::model::FeedPage {
                    entries: p.entries.into_iter().map(Into::into).collect(),
                    next: p.next,
                    head: p.head,
                }
            }
        }
        impl From<$crate::model::FeedPage> for $wit::FeedPage {
            fn from(p: $crate::model::FeedPage) -> Self {
                $wit::FeedPage {
                    entries: p.entries.into_iter().map(Into::into).collect(),
                    next: p.next,
                    head: p.head,
                }
            }
        }
        impl From<$wit::TimerPage> for $crate::model::TimerPage {
            fn from(p: $wit::TimerPage) -> Self {
                $crate::model::TimerPage {
                    timers: p.timers.into_iter().map(Into::into).collect(),
                    next: p.next,
                }
            }
        }
        impl From<$crate::model::TimerPage> for $wit::TimerPage {
            fn from(p: $crate::model::TimerPage) -> Self {
                $wit::TimerPage {
                    timers: p.timers.into_iter().map(Into::into).collect(),
                    next: p.next,
                }
            }
        }
        impl From<$wit::TimerError> for $crate::model::TimerError {
            fn from(e: $wit::TimerError) -> Self {
                match e {
                    $wit::TimerError::NotFound => $crate::model::TimerError::NotFound,
                    $wit::TimerError::Held(at) => $crate::model::TimerError::Held(at),
                    $wit::TimerError::RunSealed => $crate::model::TimerError::RunSealed,
                    $wit::TimerError::Store(e) => $crate::model::TimerError::Store(e.into()),
                }
            }
        }
        impl From<$crate::model::TimerError> for $wit::TimerError {
            fn from(e: $crate::model::TimerError) -> Self {
                match e {
                    $crate::model::TimerError::NotFound => $wit::TimerError::NotFound,
                    $crate::model::TimerError::Held(at) => $wit::TimerError::Held(at),
                    $crate::model::TimerError::RunSealed => $wit::TimerError::RunSealed,
                    $crate::model::TimerError::Store(e) => $wit::TimerError::Store(e.into()),
                }
            }
        }
        impl From<$wit::Page> for $crate::model::Page {
            fn from(p: $wit::Page) -> Self {
                $crate::model::Page {
                    tasks: p.tasks.into_iter().map(Into::into).collect(),
                    next: p.next,
                }
            }
        }
        impl From<$crate::model::Page> for $wit::Page {
            fn from(p: $crate::model::Page) -> Self {
                $wit::Page {
                    tasks: p.tasks.into_iter().map(Into::into).collect(),
                    next: p.next,
                }
            }
        }
    };
    (@enum $wit:ident, $name:ident, $($v:ident),+) => {
        impl From<$wit::$name> for $crate::model::$name {
            fn from(v: $wit::$name) -> Self {
                match v { $($wit::$name::$v => $crate::model::$name::$v),+ }
            }
        }
        impl From<$crate::model::$name> for $wit::$name {
            fn from(v: $crate::model::$name) -> Self {
                match v { $($crate::model::$name::$v => $wit::$name::$v),+ }
            }
        }
    };
    // Fields before the first `;` move as they are, between the two `;` they
    // convert, after the second they move as they are again.
    (@record $wit:ident, $name:ident, $($same:ident),*; $($conv:ident),*; $($rest:ident),*) => {
        impl From<$wit::$name> for $crate::model::$name {
            fn from(r: $wit::$name) -> Self {
                $crate::model::$name {
                    $($same: r.$same,)* $($conv: r.$conv.into(),)* $($rest: r.$rest,)*
                }
            }
        }
        impl From<$crate::model::$name> for $wit::$name {
            fn from(r: $crate::model::$name) -> Self {
                $wit::$name {
                    $($same: r.$same,)* $($conv: r.$conv.into(),)* $($rest: r.$rest,)*
                }
            }
        }
    };
    // Variants before the `;` carry their payload as it is, after it they
    // convert it.
    (@variant $wit:ident, $name:ident, $($same:ident),*; $($conv:ident),*) => {
        impl From<$wit::$name> for $crate::model::$name {
            fn from(e: $wit::$name) -> Self {
                match e {
                    $($wit::$name::$same(x) => $crate::model::$name::$same(x),)*
                    $($wit::$name::$conv(x) => $crate::model::$name::$conv(x.into()),)*
                }
            }
        }
        impl From<$crate::model::$name> for $wit::$name {
            fn from(e: $crate::model::$name) -> Self {
                match e {
                    $($crate::model::$name::$same(x) => $wit::$name::$same(x),)*
                    $($crate::model::$name::$conv(x) => $wit::$name::$conv(x.into()),)*
                }
            }
        }
    };
}

/// Writes `From` conversions, both ways, between the schedules' domain
/// types (`schedules::ScheduleDef`, `schedules::Schedule`) and the
/// generated `schedules` interface module that `$api` names in the calling
/// scope (its `schedule-spec` and `schedule`), for the component and the
/// host alike. A jitter of 0 on the wire is none in the domain.
#[macro_export]
macro_rules! schedule_conversions {
    ($api:ident) => {
        impl From<$api::ScheduleSpec> for $crate::schedules::ScheduleDef {
            fn from(w: $api::ScheduleSpec) -> Self {
                use $crate::calendar::{CatchUp, GapPolicy, Overlap, RepeatPolicy, Rule};
                $crate::schedules::ScheduleDef {
                    id: w.id,
                    run: w.run,
                    case: w.case,
                    step: w.step,
                    phase: w.phase.into(),
                    spec: $crate::calendar::ScheduleSpec {
                        rule: match w.recurrence {
                            $api::Recurrence::Cron(expr) => Rule::Cron { expr },
                            $api::Recurrence::Every(i) => Rule::Interval {
                                every_ms: i.every_ms,
                                anchor: i.anchor,
                            },
                        },
                        zone: w.zone,
                        start: w.start,
                        end: w.end,
                        gap: match w.gap {
                            $api::GapPolicy::ShiftForward => GapPolicy::ShiftForward,
                            $api::GapPolicy::Skip => GapPolicy::Skip,
                        },
                        repeat: match w.repeat {
                            $api::RepeatPolicy::First => RepeatPolicy::First,
                            $api::RepeatPolicy::Both => RepeatPolicy::Both,
                        },
                        jitter_ms: (w.jitter_ms > 0).then_some(u64::from(w.jitter_ms)),
                        overlap: match w.overlap {
                            $api::OverlapPolicy::Skip => Overlap::Skip,
                            $api::OverlapPolicy::BufferOne => Overlap::BufferOne,
                            $api::OverlapPolicy::BufferAll => Overlap::BufferAll,
                        },
                        catch_up: match w.catch_up {
                            $api::CatchUp::AllWithin(window_ms) => {
                                CatchUp::AllWithinWindow { window_ms }
                            }
                            $api::CatchUp::LatestWithin(window_ms) => CatchUp::Latest { window_ms },
                            $api::CatchUp::None => CatchUp::None,
                        },
                    },
                }
            }
        }

        impl From<$crate::schedules::ScheduleDef> for $api::ScheduleSpec {
            fn from(d: $crate::schedules::ScheduleDef) -> Self {
                use $crate::calendar::{CatchUp, GapPolicy, Overlap, RepeatPolicy, Rule};
                let s = d.spec;
                $api::ScheduleSpec {
                    id: d.id,
                    run: d.run,
                    case: d.case,
                    step: d.step,
                    phase: d.phase.into(),
                    recurrence: match s.rule {
                        Rule::Cron { expr } => $api::Recurrence::Cron(expr),
                        Rule::Interval { every_ms, anchor } => {
                            $api::Recurrence::Every($api::Interval { every_ms, anchor })
                        }
                    },
                    zone: s.zone,
                    start: s.start,
                    end: s.end,
                    gap: match s.gap {
                        GapPolicy::ShiftForward => $api::GapPolicy::ShiftForward,
                        GapPolicy::Skip => $api::GapPolicy::Skip,
                    },
                    repeat: match s.repeat {
                        RepeatPolicy::First => $api::RepeatPolicy::First,
                        RepeatPolicy::Both => $api::RepeatPolicy::Both,
                    },
                    overlap: match s.overlap {
                        Overlap::Skip => $api::OverlapPolicy::Skip,
                        Overlap::BufferOne => $api::OverlapPolicy::BufferOne,
                        Overlap::BufferAll => $api::OverlapPolicy::BufferAll,
                    },
                    catch_up: match s.catch_up {
                        CatchUp::AllWithinWindow { window_ms } => {
                            $api::CatchUp::AllWithin(window_ms)
                        }
                        CatchUp::Latest { window_ms } => $api::CatchUp::LatestWithin(window_ms),
                        CatchUp::None => $api::CatchUp::None,
                    },
                    // A checked jitter is at most a day. Beyond u32 is sent
                    // as the most, which the rules refuse as out of range
                    // rather than cut short.
                    jitter_ms: s
                        .jitter_ms
                        .map_or(0, |j| u32::try_from(j).unwrap_or(u32::MAX)),
                }
            }
        }

        impl From<$api::Schedule> for $crate::schedules::Schedule {
            fn from(s: $api::Schedule) -> Self {
                $crate::schedules::Schedule {
                    def: s.spec.into(),
                    paused: s.paused,
                    next_at: s.next_at,
                    last_at: s.last_at,
                    waiting: s.waiting,
                    revision: s.revision,
                }
            }
        }

        impl From<$crate::schedules::Schedule> for $api::Schedule {
            fn from(s: $crate::schedules::Schedule) -> Self {
                $api::Schedule {
                    spec: s.def.into(),
                    paused: s.paused,
                    next_at: s.next_at,
                    last_at: s.last_at,
                    waiting: s.waiting,
                    revision: s.revision,
                }
            }
        }
    };
}
