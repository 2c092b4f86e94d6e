//! The conversions between the job values and their WIT types, written
//! once for the component (wit-bindgen) and the host (wasmtime's
//! `bindgen!`), which each generate their own copy of the `jobs` interface.

/// Writes `From` conversions, both ways, between `$crate::jobs` and the
/// generated `jobs` interface module `$api` names in the calling scope (with
/// the `types` and `search` conversions already in place).
#[macro_export]
macro_rules! job_conversions {
    ($api:ident) => {
        impl From<$api::JobAction> for $crate::jobs::JobAction {
            fn from(w: $api::JobAction) -> Self {
                match w {
                    $api::JobAction::Release => $crate::jobs::JobAction::Release,
                    $api::JobAction::Assign(a) => {
                        $crate::jobs::JobAction::Assign($crate::jobs::JobAssign {
                            to: a.to,
                            roles: a.roles,
                            override_roles: a.override_roles,
                        })
                    }
                    $api::JobAction::Update(c) => $crate::jobs::JobAction::Update(c.into()),
                    $api::JobAction::Escalate => $crate::jobs::JobAction::Escalate,
                    $api::JobAction::Withdraw => $crate::jobs::JobAction::Withdraw,
                }
            }
        }
        impl From<$crate::jobs::JobAction> for $api::JobAction {
            fn from(d: $crate::jobs::JobAction) -> Self {
                match d {
                    $crate::jobs::JobAction::Release => $api::JobAction::Release,
                    $crate::jobs::JobAction::Assign(a) => {
                        $api::JobAction::Assign($api::JobAssign {
                            to: a.to,
                            roles: a.roles,
                            override_roles: a.override_roles,
                        })
                    }
                    $crate::jobs::JobAction::Update(c) => $api::JobAction::Update(c.into()),
                    $crate::jobs::JobAction::Escalate => $api::JobAction::Escalate,
                    $crate::jobs::JobAction::Withdraw => $api::JobAction::Withdraw,
                }
            }
        }
        impl From<$crate::jobs::JobState> for $api::JobState {
            fn from(d: $crate::jobs::JobState) -> Self {
                match d {
                    $crate::jobs::JobState::Counting => $api::JobState::Counting,
                    $crate::jobs::JobState::Running => $api::JobState::Running,
                    $crate::jobs::JobState::Cancelled => $api::JobState::Cancelled,
                    $crate::jobs::JobState::Done => $api::JobState::Done,
                }
            }
        }
        impl From<$api::JobState> for $crate::jobs::JobState {
            fn from(w: $api::JobState) -> Self {
                match w {
                    $api::JobState::Counting => $crate::jobs::JobState::Counting,
                    $api::JobState::Running => $crate::jobs::JobState::Running,
                    $api::JobState::Cancelled => $crate::jobs::JobState::Cancelled,
                    $api::JobState::Done => $crate::jobs::JobState::Done,
                }
            }
        }
        impl From<$crate::jobs::JobFailure> for $api::JobFailure {
            fn from(d: $crate::jobs::JobFailure) -> Self {
                $api::JobFailure {
                    id: d.id,
                    reason: d.reason,
                }
            }
        }
        impl From<$api::JobFailure> for $crate::jobs::JobFailure {
            fn from(w: $api::JobFailure) -> Self {
                $crate::jobs::JobFailure {
                    id: w.id,
                    reason: w.reason,
                }
            }
        }
        impl From<$crate::jobs::Job> for $api::Job {
            fn from(d: $crate::jobs::Job) -> Self {
                $api::Job {
                    id: d.id,
                    filter: d.filter.into(),
                    action: d.action.into(),
                    by: d.by,
                    state: d.state.into(),
                    total: d.total,
                    done: d.done,
                    skipped: d.skipped,
                    failed: d.failed,
                    last_failures: d.last_failures.into_iter().map(Into::into).collect(),
                    last_skipped: d.last_skipped.into_iter().map(Into::into).collect(),
                    created_at: d.created_at,
                }
            }
        }
        impl From<$api::Job> for $crate::jobs::Job {
            fn from(w: $api::Job) -> Self {
                $crate::jobs::Job {
                    id: w.id,
                    filter: w.filter.into(),
                    action: w.action.into(),
                    by: w.by,
                    state: w.state.into(),
                    total: w.total,
                    done: w.done,
                    skipped: w.skipped,
                    failed: w.failed,
                    last_failures: w.last_failures.into_iter().map(Into::into).collect(),
                    last_skipped: w.last_skipped.into_iter().map(Into::into).collect(),
                    created_at: w.created_at,
                }
            }
        }
    };
}
