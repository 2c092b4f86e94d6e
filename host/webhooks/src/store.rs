//! Where subscriptions live, as the delivery engine sees them: a
//! subscription (its endpoint, filter, secrets, state and durable
//! position), and [`SubscriptionStore`], the few operations the engine
//! needs of whatever keeps them. The design keeps them as rows in the
//! tenant's own keyspace (the component's `subscriptions` interface), so
//! backup, restore, copy and export carry them and feed trimming can see
//! their positions; this crate ships only an in-process store
//! ([`crate::MemoryStore`]) for tests and examples. This module defines
//! the contract; it must never deliver anything.

use std::error::Error as StdError;

use serde::{Deserialize, Serialize};

use crate::filter::Filter;
use crate::sender::Outcome;
use crate::signing::Secret;

/// A subscription's state.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SubState {
    /// Delivering.
    Active,
    /// Stopped by an operator, or by the receiver's `410 Gone`.
    Paused,
    /// An entry went unacknowledged through the whole retry schedule: the
    /// position stops before it until an operator resumes.
    Failing,
    /// The feed was trimmed past the position before the entries were
    /// delivered; the note says where.
    Gone,
}

impl SubState {
    /// The state's name, as metrics and notes spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            SubState::Active => "active",
            SubState::Paused => "paused",
            SubState::Failing => "failing",
            SubState::Gone => "gone",
        }
    }
}

/// One signing key of a subscription. After a rotation the old key keeps
/// signing beside the new one until `until`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SigningKey {
    /// The key.
    pub secret: Secret,
    /// Until when it signs (ms since 1970); `None` while it is current.
    pub until: Option<i64>,
}

/// One attempt, as kept for an operator.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AttemptRecord {
    /// The `webhook-id` sent.
    pub message_id: String,
    /// When the attempt began (ms since 1970).
    pub at: i64,
    /// 1 for an entry's first attempt, then one more each time.
    pub attempt: u32,
    /// What happened.
    pub outcome: Outcome,
    /// How long it took (ms).
    pub latency_ms: u64,
}

/// A webhook subscription.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Subscription {
    /// Its id, unique within the tenant. Part of every `webhook-id`, so a
    /// server should make it (random), not take it from a caller.
    pub id: String,
    /// Where deliveries go.
    pub url: String,
    /// What is delivered.
    pub filter: Filter,
    /// Whether it delivers.
    pub state: SubState,
    /// The feed position every entry up to which has been delivered (or
    /// was outside the filter); `None` for the feed's very start.
    pub position: Option<String>,
    /// Its signing keys, oldest first.
    pub secrets: Vec<SigningKey>,
    /// Why it is in its state, when not active.
    pub note: Option<String>,
    /// When it was made (ms since 1970).
    pub created_at: i64,
    /// One more at every change of its URL, filter, keys, state or
    /// position by anyone but its deliveries (which only move the position
    /// on): a delivery worker started at another revision stops.
    pub revision: u64,
    /// The last attempts recorded (failures, as the engine records them),
    /// oldest first.
    pub attempts: Vec<AttemptRecord>,
}

impl Subscription {
    /// The keys that sign at `now` (ms), newest first.
    pub fn signing_secrets(&self, now: i64) -> Vec<&Secret> {
        self.secrets
            .iter()
            .rev()
            .filter(|k| k.until.is_none_or(|u| u > now))
            .map(|k| &k.secret)
            .collect()
    }
}

/// What an update of a subscription found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Update {
    /// Done: the subscription as it now is.
    Done(Subscription),
    /// Refused: the subscription is at another revision than the one the
    /// caller named (it is given as it is).
    Stale(Subscription),
    /// There is no such subscription (any more).
    Missing,
}

/// A store failed (it could not be reached, or refused the call).
#[derive(Debug, thiserror::Error)]
#[error("the subscription store failed: {0}")]
pub struct StoreError(#[source] pub Box<dyn StdError + Send + Sync>);

impl StoreError {
    /// A store error from any error.
    pub fn new(e: impl Into<Box<dyn StdError + Send + Sync>>) -> StoreError {
        StoreError(e.into())
    }
}

impl From<leasehold_host::Error> for StoreError {
    fn from(e: leasehold_host::Error) -> Self {
        StoreError(Box::new(e))
    }
}

/// What the delivery engine needs of the place subscriptions are kept.
/// Calls are blocking (the engine makes them on tokio's blocking threads),
/// each one transaction: the component's calls are, and so is
/// [`crate::MemoryStore`]. Making, changing and deleting subscriptions are
/// the store's own API (the server's), not the engine's.
pub trait SubscriptionStore: Send + Sync + 'static {
    /// The tenant's subscriptions, in id order.
    fn list(&self, tenant: &str) -> Result<Vec<Subscription>, StoreError>;

    /// One subscription.
    fn get(&self, tenant: &str, id: &str) -> Result<Option<Subscription>, StoreError>;

    /// Takes or renews the subscription's delivery lease for `holder` until
    /// `now + lease_ms`: `true` when `holder` holds it now (it was free,
    /// had lapsed, or was already `holder`'s), `false` when another holds
    /// it, or there is no such subscription.
    fn lease(
        &self,
        tenant: &str,
        id: &str,
        holder: &str,
        now: i64,
        lease_ms: u32,
    ) -> Result<bool, StoreError>;

    /// Gives the lease up, if `holder` holds it, so another server may
    /// take the subscription over at once.
    fn release(&self, tenant: &str, id: &str, holder: &str) -> Result<(), StoreError>;

    /// Moves the position on to `position`, if the subscription is still at
    /// `revision`: never back (per writer slot, the later of the two
    /// numbers), never past the feed's head. The revision does not change.
    fn advance(
        &self,
        tenant: &str,
        id: &str,
        revision: u64,
        position: &str,
    ) -> Result<Update, StoreError>;

    /// Sets the state and its note, if the subscription is still at
    /// `revision`; the revision goes up by one.
    fn set_state(
        &self,
        tenant: &str,
        id: &str,
        revision: u64,
        state: SubState,
        note: Option<String>,
    ) -> Result<Update, StoreError>;

    /// Keeps `attempts` among the subscription's last attempts (a store
    /// keeps a bounded number, dropping the oldest).
    fn record_attempts(
        &self,
        tenant: &str,
        id: &str,
        attempts: &[AttemptRecord],
    ) -> Result<(), StoreError>;

    /// Replay: sets the position to `position` (back or forward; `None`
    /// for the feed's start) and the state to active, clearing the note;
    /// the revision goes up by one, so whoever delivers it starts again
    /// from there.
    fn rewind(&self, tenant: &str, id: &str, position: Option<&str>) -> Result<Update, StoreError>;
}
