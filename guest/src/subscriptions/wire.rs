//! `From` conversions, both ways, between the subscriptions' domain types
//! and a generated `subscriptions` interface module, written by the
//! [`subscription_conversions!`](crate::subscription_conversions) macro so
//! the component and the Rust host share one spelling. It converts only.

/// Writes `From` conversions between `subscriptions::{SubFilter, SubState,
/// SigningKey, Attempt, Subscription}` and the generated interface module
/// `$api` names in the calling scope.
#[macro_export]
macro_rules! subscription_conversions {
    ($api:ident) => {
        impl From<$api::SubFilter> for $crate::subscriptions::SubFilter {
            fn from(w: $api::SubFilter) -> Self {
                $crate::subscriptions::SubFilter {
                    tasks: w.tasks,
                    timers: w.timers,
                    verbs: w.verbs,
                    kinds: w.kinds,
                    runs: w.runs,
                    settling_only: w.settling_only,
                }
            }
        }
        impl From<$crate::subscriptions::SubFilter> for $api::SubFilter {
            fn from(d: $crate::subscriptions::SubFilter) -> Self {
                $api::SubFilter {
                    tasks: d.tasks,
                    timers: d.timers,
                    verbs: d.verbs,
                    kinds: d.kinds,
                    runs: d.runs,
                    settling_only: d.settling_only,
                }
            }
        }
        impl From<$api::SubState> for $crate::subscriptions::SubState {
            fn from(w: $api::SubState) -> Self {
                match w {
                    $api::SubState::Active => $crate::subscriptions::SubState::Active,
                    $api::SubState::Paused => $crate::subscriptions::SubState::Paused,
                    $api::SubState::Failing => $crate::subscriptions::SubState::Failing,
                    $api::SubState::Gone => $crate::subscriptions::SubState::Gone,
                }
            }
        }
        impl From<$crate::subscriptions::SubState> for $api::SubState {
            fn from(d: $crate::subscriptions::SubState) -> Self {
                match d {
                    $crate::subscriptions::SubState::Active => $api::SubState::Active,
                    $crate::subscriptions::SubState::Paused => $api::SubState::Paused,
                    $crate::subscriptions::SubState::Failing => $api::SubState::Failing,
                    $crate::subscriptions::SubState::Gone => $api::SubState::Gone,
                }
            }
        }
        impl From<$api::Attempt> for $crate::subscriptions::Attempt {
            fn from(w: $api::Attempt) -> Self {
                $crate::subscriptions::Attempt {
                    message_id: w.message_id,
                    at: w.at,
                    attempt: w.attempt,
                    outcome: w.outcome,
                    latency_ms: w.latency_ms,
                }
            }
        }
        impl From<$crate::subscriptions::Attempt> for $api::Attempt {
            fn from(d: $crate::subscriptions::Attempt) -> Self {
                $api::Attempt {
                    message_id: d.message_id,
                    at: d.at,
                    attempt: d.attempt,
                    outcome: d.outcome,
                    latency_ms: d.latency_ms,
                }
            }
        }
        impl From<$api::Subscription> for $crate::subscriptions::Subscription {
            fn from(w: $api::Subscription) -> Self {
                $crate::subscriptions::Subscription {
                    id: w.id,
                    url: w.url,
                    filter: w.filter.into(),
                    state: w.state.into(),
                    note: w.note,
                    position: w.position,
                    keys: w
                        .keys
                        .into_iter()
                        .map(|k| $crate::subscriptions::SigningKey {
                            key: k.key,
                            until: k.until,
                        })
                        .collect(),
                    created_at: w.created_at,
                    revision: w.revision,
                    attempts: w.attempts.into_iter().map(Into::into).collect(),
                    lease_holder: w.lease_holder,
                    lease_until: w.lease_until,
                }
            }
        }
        impl From<$crate::subscriptions::Subscription> for $api::Subscription {
            fn from(d: $crate::subscriptions::Subscription) -> Self {
                $api::Subscription {
                    id: d.id,
                    url: d.url,
                    filter: d.filter.into(),
                    state: d.state.into(),
                    note: d.note,
                    position: d.position,
                    keys: d
                        .keys
                        .into_iter()
                        .map(|k| $api::SigningKey {
                            key: k.key,
                            until: k.until,
                        })
                        .collect(),
                    created_at: d.created_at,
                    revision: d.revision,
                    attempts: d.attempts.into_iter().map(Into::into).collect(),
                    lease_holder: d.lease_holder,
                    lease_until: d.lease_until,
                }
            }
        }
    };
}
