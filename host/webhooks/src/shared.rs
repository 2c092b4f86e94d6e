//! What the engine's supervisors and workers share: the engine's parts and
//! options, each served tenant's runtime (its bounds, its commits, its
//! workers) and each subscription's counters. It holds state only; it must
//! never run a worker or call the store.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicU64, AtomicUsize};
use std::sync::{Arc, Mutex};

use tokio::sync::{Notify, Semaphore, watch};
use tokio::task::JoinHandle;

use crate::config::{Options, TenantLimits};
use crate::delivery::Live;
use crate::sender::Sender;
use crate::source::{FeedSource, RenderBody};
use crate::stats::SubscriptionMetrics;
use crate::store::{SubState, SubscriptionStore};

/// Why a worker stopped.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Exit {
    /// Asked to stop.
    Stopped,
    /// The subscription changed (another revision): start again.
    Reload,
    /// It was deleted.
    Missing,
    /// It left the active state (by the receiver's 410, the schedule's end,
    /// or a trimmed feed).
    Inactive(SubState),
    /// Another server holds its lease now.
    LeaseLost,
    /// The feed gave entries this worker cannot place.
    Broken(String),
}

/// Each subscription's counters, by tenant and id.
type MetricsByKey = BTreeMap<(String, String), Arc<Mutex<SubscriptionMetrics>>>;

pub(crate) struct Shared {
    pub store: Arc<dyn SubscriptionStore>,
    pub source: Arc<dyn FeedSource>,
    pub sender: Sender,
    pub render: RenderBody,
    pub options: Options,
    pub tenants: Mutex<HashMap<String, Arc<TenantRuntime>>>,
    pub metrics: Mutex<MetricsByKey>,
}

/// A worker running here.
pub(crate) struct Worker {
    pub revision: u64,
    pub stop: watch::Sender<bool>,
    pub task: JoinHandle<Exit>,
    pub live: Arc<Mutex<Live>>,
}

/// One tenant's share of the engine.
pub(crate) struct TenantRuntime {
    pub name: Arc<str>,
    pub limits: TenantLimits,
    pub permits: Arc<Semaphore>,
    pub queued_bytes: AtomicUsize,
    pub running: AtomicUsize,
    pub commits: watch::Sender<u64>,
    pub reload: Notify,
    /// The supervisor's passes begun (each numbered before it lists the
    /// store), and the number of the last one finished: a pass numbered
    /// after a change was made saw it.
    pub passes_begun: AtomicU64,
    pub pass_done: watch::Sender<u64>,
    pub workers: Mutex<HashMap<String, Worker>>,
    pub over_bound: Mutex<HashSet<String>>,
    /// Each subscription's state as the supervisor last listed it.
    pub listed: Mutex<Vec<(String, SubState)>>,
    pub supervisor: Mutex<Option<JoinHandle<()>>>,
}
