//! Where deliveries come from: a tenant's feed, read a page at a time
//! after a position ([`FeedSource`]), and what a delivery needs to know of
//! each entry: where it sits ([`place_between`]) and the body a receiver
//! is sent ([`default_body`], or the caller's own). A [`leasehold_host::Engine`]
//! is a source as it is. This module only reads; it must never write to
//! the feed or to a task.

use std::error::Error as StdError;
use std::sync::Arc;

use leasehold_guest::changes::Cursor;
use leasehold_guest::schema::MAX_SHARDS;
use leasehold_host::{Change, FeedEntry, FeedRead};
use serde_json::json;

use crate::filter::Facts;
use crate::signing::EntryPlace;

/// Reading a tenant's feed failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SourceError {
    /// The host's call failed.
    #[error(transparent)]
    Host(#[from] leasehold_host::Error),
    /// Another source's failure.
    #[error("the feed could not be read: {0}")]
    Other(#[source] Box<dyn StdError + Send + Sync>),
}

/// A tenant's feed, as deliveries read it. Calls are blocking; the engine
/// makes them on tokio's blocking threads.
pub trait FeedSource: Send + Sync + 'static {
    /// Up to `limit` entries after `after` (a position of the tenant's
    /// feed), as the host's `feed` answers: a page, or `Gone(head)` when
    /// entries after `after` were trimmed.
    fn read(&self, tenant: &str, after: &str, limit: u32) -> Result<FeedRead, SourceError>;

    /// A task's kind and run, for a filter on them while feed entries do
    /// not carry them; `None` when the task is not found.
    fn task_facts(&self, tenant: &str, task: &str) -> Result<Option<Facts>, SourceError>;
}

impl FeedSource for leasehold_host::Engine {
    fn read(&self, tenant: &str, after: &str, limit: u32) -> Result<FeedRead, SourceError> {
        Ok(self.tenant(tenant)?.feed(Some(after), limit)?)
    }

    fn task_facts(&self, tenant: &str, task: &str) -> Result<Option<Facts>, SourceError> {
        Ok(self.tenant(tenant)?.get(task)?.map(|t| Facts {
            kind: Some(t.kind),
            run: Some(t.run),
        }))
    }
}

/// The feed's start, as a position: the position of a subscription that
/// has none.
pub const START: &str = "f";

/// Where the entry read between positions `before` and `after` sits: the
/// one slot whose number differs, at its number in `after`. `None` when
/// the two are not consecutive positions of one read.
pub fn place_between(before: &str, after: &str) -> Option<EntryPlace> {
    let (b, a) = (Cursor::parse(before).ok()?, Cursor::parse(after).ok()?);
    let mut moved = (0..MAX_SHARDS).filter(|&s| b.get(s) != a.get(s));
    let slot = moved.next()?;
    if moved.next().is_some() || a.get(slot) != b.get(slot) + 1 {
        return None;
    }
    Some(EntryPlace {
        slot,
        seq: a.get(slot),
    })
}

/// How many entries lie after `from` up to `head`, slot by slot (the feed
/// holds every number of a slot from its floor to its head).
pub fn entries_between(from: &str, head: &str) -> Option<u64> {
    let (f, h) = (Cursor::parse(from).ok()?, Cursor::parse(head).ok()?);
    Some(
        (0..MAX_SHARDS)
            .map(|s| h.get(s).saturating_sub(f.get(s)))
            .sum(),
    )
}

/// When a change was made (ms since 1970).
pub fn change_at(change: &Change) -> i64 {
    match change {
        Change::Task(t) => t.entry.at,
        Change::Timer(t) => t.at,
    }
}

/// Makes the body a subscription is sent for a feed entry: given the
/// subscription's id and the entry. A server passes its own, so the body
/// carries its wire type of a change.
pub type RenderBody = Arc<dyn Fn(&str, &FeedEntry) -> Vec<u8> + Send + Sync>;

/// The body for embedders without a wire type of their own, in the
/// payload structure the spec recommends:
///
/// ```json
/// {"type": "task.claim", "timestamp": "2025-01-02T03:04:05.678Z",
///  "subscription": "sub_…",
///  "data": {"position": "f0.12", "change": {"task": {"id": "…", "entry": {…}}}}}
/// ```
///
/// `type` is `task.` or `timer.` and the verb (`-` spelt `_`), `timestamp`
/// the change's time, `data` the feed entry as the host's types serialize
/// it (its position is where a reader resumes after it; a re-sent entry
/// may carry another, the `webhook-id` stays).
pub fn default_body(subscription: &str, entry: &FeedEntry) -> Vec<u8> {
    let (family, verb) = match &entry.change {
        Change::Task(t) => ("task", t.entry.verb.as_str()),
        Change::Timer(t) => ("timer", t.verb.as_str()),
    };
    let at = change_at(&entry.change);
    let timestamp = jiff::Timestamp::from_millisecond(at)
        .map(|t| t.to_string())
        .unwrap_or_else(|_| at.to_string());
    let body = json!({
        "type": format!("{family}.{}", verb.replace('-', "_")),
        "timestamp": timestamp,
        "subscription": subscription,
        "data": entry,
    });
    body.to_string().into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;
    use leasehold_host::{HistoryEntry, TaskChange, TaskState};

    #[test]
    fn the_place_of_an_entry_is_the_slot_that_moved() {
        assert_eq!(
            place_between("f", "f0.1"),
            Some(EntryPlace { slot: 0, seq: 1 })
        );
        assert_eq!(
            place_between("f0.4_7.2", "f0.4_7.3"),
            Some(EntryPlace { slot: 7, seq: 3 })
        );
        assert_eq!(
            place_between("f0.4", "f0.4_63.1"),
            Some(EntryPlace { slot: 63, seq: 1 })
        );
        // Not one entry apart: two slots moved, a gap, nothing moved, junk.
        assert_eq!(place_between("f", "f0.1_1.1"), None);
        assert_eq!(place_between("f0.1", "f0.3"), None);
        assert_eq!(place_between("f0.1", "f0.1"), None);
        assert_eq!(place_between("x", "f0.1"), None);
    }

    #[test]
    fn entries_between_counts_every_slot() {
        assert_eq!(entries_between("f0.2_3.5", "f0.4_3.9_5.1"), Some(7));
        assert_eq!(entries_between("f0.4", "f0.4"), Some(0));
        assert_eq!(entries_between("bad", "f"), None);
    }

    #[test]
    fn the_default_body_follows_the_specs_payload_structure() {
        let entry = FeedEntry {
            position: "f0.3".into(),
            change: Change::Task(TaskChange {
                id: "t-1".into(),
                entry: HistoryEntry {
                    seq: 2,
                    at: 1_700_000_000_123,
                    verb: "take-over".into(),
                    actor: Some("bob".into()),
                    before: Some(TaskState::Claimed),
                    after: TaskState::Claimed,
                    assignee: Some("bob".into()),
                    lease_until: None,
                    candidate_roles: vec!["r".into()],
                    excluded_actors: vec![],
                    revision: 2,
                    changes: vec![],
                    decision: None,
                    note: None,
                    job: None,
                    step: None,
                },
                run: Some("r-1".into()),
                kind: Some("approve".into()),
            }),
        };
        let body: serde_json::Value =
            serde_json::from_slice(&default_body("sub_1", &entry)).expect("json");
        assert_eq!(body["type"], "task.take_over");
        assert_eq!(body["timestamp"], "2023-11-14T22:13:20.123Z");
        assert_eq!(body["subscription"], "sub_1");
        assert_eq!(body["data"]["position"], "f0.3");
        assert_eq!(body["data"]["change"]["task"]["id"], "t-1");
        assert_eq!(body["data"]["change"]["task"]["entry"]["after"], "claimed");
    }
}
