//! What the `subscription` commands answer, each rendered two ways side by
//! side: under `--json` a subscription as an HTTP API would spell it
//! (snake_case, times in milliseconds, its keys as how long each signs),
//! for a person where it sends, what, how far it has come and how many
//! keys sign until when. A secret just made is shown in the answer of the
//! call that stored it, once, said as such. It renders only; the calls
//! are `super::subscriptions`'. It must never render a stored key's bytes.

use std::fmt::Write as _;

use leasehold_host::{Attempt, SubFilter, SubState, Subscription, SubscriptionPage, Timestamp};
use serde::Serialize;
use serde_json::json;

use crate::answer::Answer;
use crate::render::{count, table, when};
use crate::values::{self, format_time};

/// What a person is told beside a secret: it is shown here only.
const SHOWN_ONCE: &str = "give the receiver this secret; it is not shown again";

fn state(s: SubState) -> &'static str {
    match s {
        SubState::Active => "active",
        SubState::Paused => "paused",
        SubState::Failing => "failing",
        SubState::Gone => "gone",
    }
}

/// A signing key as it is shown: how long it signs, never its bytes.
#[derive(Serialize)]
struct KeyJson {
    /// None while it is the current key.
    until: Option<Timestamp>,
}

/// A subscription as `--json` spells it.
#[derive(Serialize)]
struct SubscriptionJson<'a> {
    id: &'a str,
    url: &'a str,
    filter: &'a SubFilter,
    state: &'static str,
    note: Option<&'a str>,
    /// None for the feed's start.
    position: Option<&'a str>,
    /// Oldest first; the last is the current key.
    keys: Vec<KeyJson>,
    created_at: Timestamp,
    revision: u64,
    attempts: &'a [Attempt],
    lease_holder: Option<&'a str>,
    lease_until: Option<Timestamp>,
}

impl<'a> From<&'a Subscription> for SubscriptionJson<'a> {
    fn from(s: &'a Subscription) -> Self {
        SubscriptionJson {
            id: &s.id,
            url: &s.url,
            filter: &s.filter,
            state: state(s.state),
            note: s.note.as_deref(),
            position: s.position.as_deref(),
            keys: s.keys.iter().map(|k| KeyJson { until: k.until }).collect(),
            created_at: s.created_at,
            revision: s.revision,
            attempts: &s.attempts,
            lease_holder: s.lease_holder.as_deref(),
            lease_until: s.lease_until,
        }
    }
}

/// What kinds of change it is sent: `tasks and timers`, `tasks (only the
/// settling change)`, `timers`.
fn sends(f: &SubFilter) -> String {
    let tasks = if f.settling_only {
        "tasks (only the change that settled each)"
    } else {
        "tasks"
    };
    match (f.tasks, f.timers) {
        (true, true) => format!("changes of {tasks} and timers"),
        (true, false) => format!("changes of {tasks}"),
        (false, true) => "changes of timers".to_owned(),
        // The rules refuse a filter of neither.
        (false, false) => "nothing".to_owned(),
    }
}

/// The filter's lists, or none when they place no condition.
fn only(f: &SubFilter) -> Option<String> {
    let mut parts = Vec::new();
    if !f.verbs.is_empty() {
        parts.push(format!("made by {}", f.verbs.join(", ")));
    }
    if !f.kinds.is_empty() {
        parts.push(format!("tasks of kind {}", f.kinds.join(", ")));
    }
    if !f.runs.is_empty() {
        parts.push(format!("of run {}", f.runs.join(", ")));
    }
    (!parts.is_empty()).then(|| parts.join("; "))
}

fn position(p: Option<&str>) -> String {
    match p {
        Some(p) => p.to_owned(),
        None => "the feed's start".to_owned(),
    }
}

/// How many keys sign, and until when: `1 key, the current one`, `2 keys:
/// the current one, and 1 older key until 2026-05-05T09:00:00Z (in 23h)`.
fn signing(s: &Subscription, now: Timestamp) -> String {
    let old: Vec<Timestamp> = s.keys.iter().filter_map(|k| k.until).collect();
    let n = count(s.keys.len() as u64, "key", "keys");
    if old.is_empty() {
        return format!("{n}, the current one");
    }
    let until: Vec<String> = old.iter().map(|&u| when(u, now)).collect();
    format!(
        "{n}: the current one, and {} until {}",
        count(old.len() as u64, "older key", "older keys"),
        until.join(", ")
    )
}

/// One subscription's lines for a person.
fn described(s: &Subscription) -> String {
    let now = values::now();
    let mut out = format!(
        "Subscription {} (revision {}): {}\n",
        s.id,
        s.revision,
        state(s.state)
    );
    if let Some(note) = &s.note {
        let _ = writeln!(out, "  Note: {note}");
    }
    let _ = writeln!(out, "  URL: {}", s.url);
    let _ = writeln!(out, "  Sends: {}", sends(&s.filter));
    if let Some(only) = only(&s.filter) {
        let _ = writeln!(out, "  Only: {only}");
    }
    let _ = writeln!(
        out,
        "  Delivered up to: {}",
        position(s.position.as_deref())
    );
    let _ = writeln!(out, "  Signing: {}", signing(s, now));
    let _ = writeln!(out, "  Created: {}", format_time(s.created_at));
    if let (Some(holder), Some(until)) = (&s.lease_holder, s.lease_until) {
        let _ = writeln!(
            out,
            "  Delivered by: {holder}, leased until {}",
            when(until, now)
        );
    }
    if !s.attempts.is_empty() {
        let _ = writeln!(
            out,
            "  Last {}:",
            count(s.attempts.len() as u64, "attempt", "attempts")
        );
        let rows = s
            .attempts
            .iter()
            .map(|a| {
                vec![
                    format_time(a.at),
                    a.message_id.clone(),
                    a.attempt.to_string(),
                    a.outcome.clone(),
                    format!("{} ms", a.latency_ms),
                ]
            })
            .collect();
        let t = table(&["AT", "MESSAGE", "ATTEMPT", "OUTCOME", "LATENCY"], rows);
        for line in t.lines() {
            let _ = writeln!(out, "    {line}");
        }
    }
    out
}

/// One subscription (get, change, a state set, replay): the object under
/// --json.
pub struct One(pub Subscription);

impl Answer for One {
    fn json(&self) -> serde_json::Result<String> {
        serde_json::to_string(&SubscriptionJson::from(&self.0))
    }

    fn human(&self) -> String {
        described(&self.0)
    }
}

/// A subscription just added or given a new key, with the secret made for
/// it: the one time that secret is shown.
pub struct WithSecret {
    pub sub: Subscription,
    /// The new key, in the `whsec_…` form a receiver configures.
    pub secret: String,
    /// A rotation rather than an add.
    pub rotated: bool,
}

impl Answer for WithSecret {
    fn json(&self) -> serde_json::Result<String> {
        #[derive(Serialize)]
        struct Shown<'a> {
            #[serde(flatten)]
            sub: SubscriptionJson<'a>,
            secret: &'a str,
        }
        serde_json::to_string(&Shown {
            sub: SubscriptionJson::from(&self.sub),
            secret: &self.secret,
        })
    }

    fn human(&self) -> String {
        let s = &self.sub;
        let mut out = if self.rotated {
            format!(
                "Subscription {} signs with a new key (revision {}); {}.\n",
                s.id,
                s.revision,
                signing(s, values::now())
            )
        } else {
            let from = match &s.position {
                Some(p) => format!("after position {p}"),
                None => "from the feed's start".to_owned(),
            };
            format!(
                "Added subscription {} (revision {}), active: {} go to {}, {from}.\n",
                s.id,
                s.revision,
                sends(&s.filter),
                s.url,
            )
        };
        let _ = write!(out, "\nSigning secret ({SHOWN_ONCE}):\n  {}\n", self.secret);
        out
    }
}

pub struct Listed(pub SubscriptionPage);

impl Answer for Listed {
    fn json(&self) -> serde_json::Result<String> {
        let subscriptions: Vec<SubscriptionJson> = self
            .0
            .subscriptions
            .iter()
            .map(SubscriptionJson::from)
            .collect();
        serde_json::to_string(&json!({"subscriptions": subscriptions, "next": self.0.next}))
    }

    fn human(&self) -> String {
        if self.0.subscriptions.is_empty() {
            return "No subscriptions.\n".to_owned();
        }
        let rows = self
            .0
            .subscriptions
            .iter()
            .map(|s| {
                let f = &s.filter;
                let mut what = Vec::new();
                if f.tasks {
                    what.push(if f.settling_only {
                        "tasks (settling)"
                    } else {
                        "tasks"
                    });
                }
                if f.timers {
                    what.push("timers");
                }
                vec![
                    s.id.clone(),
                    state(s.state).to_owned(),
                    what.join(", "),
                    only(f).unwrap_or_else(|| "-".to_owned()),
                    position(s.position.as_deref()),
                    s.keys.len().to_string(),
                    s.url.clone(),
                ]
            })
            .collect();
        let mut out = table(
            &[
                "ID",
                "STATE",
                "SENDS",
                "ONLY",
                "DELIVERED UP TO",
                "KEYS",
                "URL",
            ],
            rows,
        );
        if let Some(next) = &self.0.next {
            let _ = writeln!(out, "More follow: --after {next}");
        }
        out
    }
}

pub struct Removed<'a> {
    pub id: &'a str,
    pub removed: bool,
}

impl Answer for Removed<'_> {
    fn json(&self) -> serde_json::Result<String> {
        serde_json::to_string(&json!({"id": self.id, "removed": self.removed}))
    }

    fn human(&self) -> String {
        if self.removed {
            format!(
                "Removed subscription {}; nothing more is sent to it.\n",
                self.id
            )
        } else {
            format!("No subscription {}; nothing was removed.\n", self.id)
        }
    }
}
