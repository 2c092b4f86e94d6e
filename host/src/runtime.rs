//! What every call of one engine shares: the compiled component and its
//! instance pool, the backend, the limits, the instances kept between calls,
//! the clock calls are recorded by, the waiters for commits, and the count
//! of calls run again.
//! It owns these values and nothing of what a call does with them; it must
//! never hold a call's state, so that engines and tenants are cheap to
//! clone and share between threads.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use crate::clock::Clock;
use crate::compiled::Compiled;
use crate::config::{Durability, Limits};
use crate::keep::Keeper;
use crate::storage::backend::Backend;
use crate::watch::Hub;

pub(crate) struct Shared {
    pub(crate) compiled: Arc<Compiled>,
    pub(crate) backend: Arc<dyn Backend>,
    pub(crate) limits: Limits,
    pub(crate) durability: Durability,
    /// Idle instances, for an engine that reuses them.
    pub(crate) keeper: Keeper,
    /// Calls run again after a serialization conflict.
    pub(crate) retries: AtomicU64,
    /// The time each writing call is recorded at.
    pub(crate) clock: Arc<dyn Clock>,
    /// Who waits for commits.
    pub(crate) hub: Arc<Hub>,
    /// Where compiled components are kept, for [`Engine::with_component`].
    ///
    /// [`Engine::with_component`]: crate::Engine::with_component
    pub(crate) cache_dir: Option<PathBuf>,
}
