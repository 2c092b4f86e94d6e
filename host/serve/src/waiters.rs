//! The callers that wait, and the bounds on them: the places of event
//! streams and of waiting long-polls (each a hold, `crate::holds`, bounded
//! in all, per tenant and per caller), the tenants' shared reads of the
//! feed they follow (`crate::shared_reads`), and the bounds and pace of
//! streams. It owns none of the waiting itself (that is `crate::sse` and
//! `crate::long_poll`), and must never hand a place past a bound.

use std::sync::Arc;
use std::time::Duration;

use crate::holds::{Bounds, Hold, Holds};
use crate::principal::Principal;
use crate::problem::ApiError;
use crate::shared_reads::Feeds;

/// The callers that wait: event streams and long-polls, each bounded in
/// all, per tenant and per caller, and the tenants' shared reads of the
/// feed they follow.
pub struct Waiters {
    streams: Arc<Holds>,
    polls: Arc<Holds>,
    /// The tenants' shared reads of the feed (the long-polls' too).
    pub feeds: Feeds,
}

/// The name a caller's holds are counted under: its tenant, actor and
/// scope, each ended by a byte no name may hold.
pub fn caller_key(p: &Principal) -> String {
    format!("{}\u{0}{}\u{0}{}", p.tenant, p.actor, p.scope)
}

impl Waiters {
    pub fn new(streams: Bounds, polls: Bounds) -> Arc<Self> {
        Arc::new(Waiters {
            streams: Holds::new("event stream", streams),
            polls: Holds::new("waiting request", polls),
            feeds: Feeds::default(),
        })
    }

    /// A place for one more waiting long-poll of `p`, or `overloaded`.
    pub fn poll(&self, p: &Principal) -> Result<Hold, ApiError> {
        self.polls.take(&p.tenant, &caller_key(p))
    }

    /// A place for one more event stream of `p`, or `overloaded`.
    pub fn stream(&self, p: &Principal) -> Result<Hold, ApiError> {
        self.streams.take(&p.tenant, &caller_key(p))
    }
}

/// The bounds and pace of event streams.
#[derive(Clone, Copy, Debug)]
pub struct EventOptions {
    /// Most subscribers in all.
    pub max_subscribers: usize,
    /// Most subscribers of one tenant.
    pub max_subscribers_per_tenant: usize,
    /// Most subscribers of one caller (one credential's tenant, actor and
    /// scope).
    pub max_subscribers_per_caller: usize,
    /// Events queued for one subscriber before it is dropped as too slow.
    pub buffer: usize,
    /// Bytes of events queued for one subscriber before it is dropped as
    /// too slow.
    pub buffer_bytes: usize,
    /// Bytes of events queued for all of one tenant's subscribers; a
    /// stream whose next event would pass it, or pass a quarter of it for
    /// the streams of its caller together (`crate::sse::CALLER_SHARE`), is
    /// dropped as too slow.
    pub tenant_buffer_bytes: usize,
    /// How often an idle stream sends a heartbeat comment.
    pub heartbeat: Duration,
}

impl EventOptions {
    /// The bounds on streams, as holds.
    pub fn bounds(&self) -> Bounds {
        Bounds {
            all: self.max_subscribers,
            per_tenant: self.max_subscribers_per_tenant,
            per_caller: self.max_subscribers_per_caller,
        }
    }
}

impl Default for EventOptions {
    fn default() -> Self {
        EventOptions {
            max_subscribers: 512,
            max_subscribers_per_tenant: 128,
            max_subscribers_per_caller: 32,
            buffer: 1024,
            buffer_bytes: 256 * 1024,
            tenant_buffer_bytes: 16 * 1024 * 1024,
            heartbeat: Duration::from_secs(15),
        }
    }
}
