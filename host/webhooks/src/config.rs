//! How the delivery engine is configured and what it is built from:
//! [`Options`], [`TenantLimits`] and [`Parts`]. Plain data; it must never
//! start anything.

use std::sync::Arc;
use std::time::Duration;

use crate::retry::RetryPolicy;
use crate::sender::Sender;
use crate::source::{FeedSource, RenderBody, default_body};
use crate::store::SubscriptionStore;

/// Bounds on what one tenant's deliveries hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TenantLimits {
    /// Active subscriptions delivered (in id order; the rest wait, shown as
    /// over the bound).
    pub subscriptions: usize,
    /// HTTP requests in flight at once, over all its subscriptions.
    pub in_flight: usize,
    /// Bytes of bodies read ahead and held, over all its subscriptions.
    pub queued_bytes: usize,
}

impl Default for TenantLimits {
    fn default() -> Self {
        TenantLimits {
            subscriptions: 64,
            in_flight: 32,
            queued_bytes: 16 << 20,
        }
    }
}

/// How the engine runs.
#[derive(Clone, Debug)]
pub struct Options {
    /// This server's name in leases: unique among the servers sharing a
    /// store.
    pub holder: String,
    /// How long a lease lasts; it is renewed every third of it.
    pub lease: Duration,
    /// Tasks (or timers) delivered at once per subscription.
    pub endpoint_parallelism: usize,
    /// The per-tenant bounds.
    pub tenant: TenantLimits,
    /// Entries per read of the feed.
    pub page: u32,
    /// How often a caught-up worker reads the feed without being woken,
    /// and a supervisor lists its tenant's subscriptions.
    pub poll: Duration,
    /// How often, at most, a worker writes its position.
    pub checkpoint: Duration,
    /// Most entries a worker reads ahead of its position.
    pub window_entries: usize,
    /// Attempts a running worker shows.
    pub attempts_shown: usize,
    /// The retry schedule.
    pub retry: RetryPolicy,
}

impl Default for Options {
    fn default() -> Self {
        let mut random = [0u8; 6];
        let suffix = match getrandom::fill(&mut random) {
            Ok(()) => random.iter().map(|b| format!("{b:02x}")).collect(),
            Err(_) => format!("{:x}", fastrand::u64(..)),
        };
        Options {
            holder: format!("deliveries-{}-{suffix}", std::process::id()),
            lease: Duration::from_secs(30),
            endpoint_parallelism: 8,
            tenant: TenantLimits::default(),
            page: 100,
            poll: Duration::from_secs(2),
            checkpoint: Duration::from_millis(250),
            window_entries: 10_000,
            attempts_shown: 20,
            retry: RetryPolicy::default(),
        }
    }
}

/// What the engine is built from.
pub struct Parts {
    /// Where subscriptions are kept.
    pub store: Arc<dyn SubscriptionStore>,
    /// The tenants' feeds.
    pub source: Arc<dyn FeedSource>,
    /// The HTTP sender.
    pub sender: Sender,
    /// The body of a delivery ([`default_body`] unless the server has its
    /// own wire type).
    pub render: RenderBody,
}

impl Parts {
    /// Parts with the default body.
    pub fn new(
        store: Arc<dyn SubscriptionStore>,
        source: Arc<dyn FeedSource>,
        sender: Sender,
    ) -> Parts {
        Parts {
            store,
            source,
            sender,
            render: Arc::new(default_body),
        }
    }
}
