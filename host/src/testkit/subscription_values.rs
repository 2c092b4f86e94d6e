//! Subscriptions as the scenarios spell them (the WIT's `sub-filter`,
//! `sub-state`, `attempt`, `subscription` and `subscription-page` in JSON,
//! kebab-case, a `list<u8>` a list of numbers), to and from the host's
//! types. A filter argument names only what it sets; the scenario README
//! lists the defaults of the rest. It converts only.

use serde_json::{Value, json};

use leasehold_guest::subscriptions::{
    Attempt, SubFilter, SubState, Subscription, SubscriptionPage,
};

fn field<'v>(v: &'v Value, name: &str) -> Option<&'v Value> {
    v.get(name).filter(|x| !x.is_null())
}

fn flag(v: &Value, name: &str) -> bool {
    field(v, name).is_some_and(|x| x.as_bool().unwrap_or_else(|| panic!("{name} is a bool")))
}

fn words(v: &Value, name: &str) -> Vec<String> {
    field(v, name).map_or_else(Vec::new, |x| {
        x.as_array()
            .unwrap_or_else(|| panic!("{name} is a list"))
            .iter()
            .map(|s| s.as_str().expect("a list of strings").to_owned())
            .collect()
    })
}

/// A `sub-filter` argument: `tasks`, `timers` and `settling-only` default
/// to false, the lists to empty.
pub(super) fn filter_arg(v: &Value) -> SubFilter {
    SubFilter {
        tasks: flag(v, "tasks"),
        timers: flag(v, "timers"),
        verbs: words(v, "verbs"),
        kinds: words(v, "kinds"),
        runs: words(v, "runs"),
        settling_only: flag(v, "settling-only"),
    }
}

/// A `list<u8>` argument: a list of numbers, each a byte.
pub(super) fn bytes_arg(v: &Value) -> Vec<u8> {
    v.as_array()
        .unwrap_or_else(|| panic!("a list of bytes, not {v}"))
        .iter()
        .map(|b| {
            b.as_u64()
                .and_then(|b| u8::try_from(b).ok())
                .unwrap_or_else(|| panic!("a byte, not {b}"))
        })
        .collect()
}

/// A `sub-state` argument, by its WIT case name.
pub(super) fn state_arg(v: &Value) -> SubState {
    match v.as_str() {
        Some("active") => SubState::Active,
        Some("paused") => SubState::Paused,
        Some("failing") => SubState::Failing,
        Some("gone") => SubState::Gone,
        _ => panic!("no sub-state {v}"),
    }
}

fn state_name(s: SubState) -> &'static str {
    match s {
        SubState::Active => "active",
        SubState::Paused => "paused",
        SubState::Failing => "failing",
        SubState::Gone => "gone",
    }
}

/// A `list<attempt>` argument; every field is required.
pub(super) fn attempts_arg(v: &Value) -> Vec<Attempt> {
    v.as_array()
        .unwrap_or_else(|| panic!("attempts is a list, not {v}"))
        .iter()
        .map(|a| {
            let text = |name: &str| {
                a[name]
                    .as_str()
                    .unwrap_or_else(|| panic!("an attempt's {name} is a string"))
                    .to_owned()
            };
            let number = |name: &str| {
                a[name]
                    .as_u64()
                    .unwrap_or_else(|| panic!("an attempt's {name} is a number"))
            };
            Attempt {
                message_id: text("message-id"),
                at: a["at"].as_i64().expect("an attempt's at is a timestamp"),
                attempt: u32::try_from(number("attempt")).expect("an attempt's attempt is a u32"),
                outcome: text("outcome"),
                latency_ms: number("latency-ms"),
            }
        })
        .collect()
}

/// A `subscription` answer, as the WIT spells it.
pub(super) fn subscription_value(s: &Subscription) -> Value {
    let f = &s.filter;
    json!({
        "id": s.id,
        "url": s.url,
        "filter": {
            "tasks": f.tasks,
            "timers": f.timers,
            "verbs": f.verbs,
            "kinds": f.kinds,
            "runs": f.runs,
            "settling-only": f.settling_only,
        },
        "state": state_name(s.state),
        "note": s.note,
        "position": s.position,
        "keys": s.keys.iter().map(|k| json!({"key": k.key, "until": k.until})).collect::<Vec<_>>(),
        "created-at": s.created_at,
        "revision": s.revision,
        "attempts": s.attempts.iter().map(|a| json!({
            "message-id": a.message_id,
            "at": a.at,
            "attempt": a.attempt,
            "outcome": a.outcome,
            "latency-ms": a.latency_ms,
        })).collect::<Vec<_>>(),
        "lease-holder": s.lease_holder,
        "lease-until": s.lease_until,
    })
}

/// A `subscription-page` answer.
pub(super) fn page_value(p: &SubscriptionPage) -> Value {
    json!({
        "subscriptions": p.subscriptions.iter().map(subscription_value).collect::<Vec<_>>(),
        "next": p.next,
    })
}
