//! Signed webhooks driven by a Leasehold tenant's feed.
//!
//! Each subscription (an endpoint, a filter, signing keys, a state and a
//! durable position in its tenant's feed) is delivered by one worker, on
//! whichever server holds its lease, in the wire format of
//! [Standard Webhooks](https://www.standardwebhooks.com/): at least once,
//! each task's (or timer's) changes in feed order, the position moving
//! only past what was acknowledged or matched nothing. The crate's README
//! gives the design and its reasons; this file only names the modules and
//! what is public.
//!
//! The pieces, each usable alone:
//! - [`signing`]: secrets, `webhook-id`s and signatures;
//! - [`address`] and [`Sender`]: one attempt, refusing internal addresses;
//! - [`retry`]: the schedule and what an answer means;
//! - [`Filter`]: which entries a subscription is sent;
//! - [`SubscriptionStore`] and [`FeedSource`]: what the engine needs of
//!   the host (a [`leasehold_host::Engine`] is a source as it is, and
//!   [`ComponentStore`] keeps subscriptions in the tenants' keyspaces);
//! - [`Deliveries`]: the engine; [`SubscriptionStatus`] and
//!   [`SubscriptionMetrics`]: what an operator sees.

#![warn(missing_docs)]

pub mod address;
mod component;
mod config;
mod delivery;
mod engine;
mod filter;
mod memory;
pub mod retry;
mod sender;
mod shared;
pub mod signing;
mod source;
mod stats;
mod store;
mod worker;

pub use address::{AddressPolicy, Refused};
pub use component::{
    ComponentStore, filter_from_row, filter_to_row, from_row, outcome_from_text, outcome_text,
    state_from_row, state_to_row,
};
pub use config::{Options, Parts, TenantLimits};
pub use engine::{Deliveries, ReplayError};
pub use filter::{
    Facts, Filter, FilterError, Key, MAX_FILTER_ITEM_BYTES, MAX_FILTER_ITEMS, facts_on_entry,
};
pub use memory::{ATTEMPTS_KEPT, MemoryStore};
pub use retry::RetryPolicy;
pub use sender::{
    Attempted, MAX_URL_BYTES, Outcome, Sender, SenderError, SenderOptions, Signed, UrlError,
};
pub use signing::{EntryPlace, Secret, SecretError, message_id, signature_header};
pub use source::{
    FeedSource, RenderBody, START, SourceError, change_at, default_body, entries_between,
    place_between,
};
pub use stats::{
    Histogram, LATENCY_BUCKETS, Running, SubscriptionMetrics, SubscriptionStatus, render_prometheus,
};
pub use store::{
    AttemptRecord, SigningKey, StoreError, SubState, Subscription, SubscriptionStore, Update,
};

// The README's example, compiled as a doctest so it cannot drift.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeExamples;
