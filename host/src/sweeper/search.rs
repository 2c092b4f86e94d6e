//! The search index duty: gives a keyspace laid out before search (layouts
//! 3 to 9) its search entries and counts, `build-search-index`
//! [`INDEX_BATCH`] tasks a call, within its turn's call budget like every
//! duty, until the component answers that the index is built; then it
//! never calls it for that tenant again. Until then the tenant's `search`
//! and `count` are refused, so the duty is due at once. It keeps, per
//! tenant, only whether the index is known to be built; it never decides
//! what an index holds.

use std::collections::HashSet;
use std::sync::Arc;

use leasehold_guest::model::{StoreError, Timestamp};
use leasehold_guest::search::TaskFilter;

use crate::error::Error;
use crate::tenant::Tenant;

use super::duty::{Duty, Turn};
use super::report::INDEXED;

/// Most tasks one call of the search index duty gives their entries: a
/// task's entries and counts are a handful of small writes, so a call stays
/// far within the sandbox's per-call bounds.
pub(super) const INDEX_BATCH: u32 = 500;

#[derive(Default)]
pub(super) struct BuildSearchIndex {
    /// Tenants whose index is known to be built. A built index stays built
    /// (every change keeps it), so a tenant once here is never asked again.
    built: HashSet<Arc<str>>,
}

impl Duty for BuildSearchIndex {
    fn name(&self) -> &'static str {
        "build-search-index"
    }

    fn next(&mut self, tenant: &Tenant, now: Timestamp) -> Result<Option<Timestamp>, Error> {
        if self.built.contains(tenant.name()) {
            return Ok(None);
        }
        // A read tells, on a snapshot and with no write, whether the index
        // is built: a count of every task is answered from the counters
        // once it is, and refused as `storage` while it is being built.
        // Any other `storage` refusal is tried by a turn all the same,
        // whose `build-search-index` answers built or fails by itself.
        match tenant.count(&TaskFilter::default(), None, None) {
            Ok(_) => {
                self.built.insert(Arc::from(tenant.name()));
                Ok(None)
            }
            Err(Error::Store(StoreError::Storage(_))) => Ok(Some(now)),
            Err(e) => Err(e),
        }
    }

    fn act(&mut self, tenant: &Tenant, turn: &mut Turn<'_>) -> Result<(), Error> {
        if self.built.contains(tenant.name()) {
            return Ok(());
        }
        let mut indexed = 0u64;
        let mut built = false;
        while turn.take_call() {
            let progress = tenant.build_search_index(INDEX_BATCH)?;
            indexed += u64::from(progress.indexed);
            if progress.built {
                built = true;
                break;
            }
        }
        turn.count(INDEXED, indexed);
        if built {
            tracing::info!(tenant = %tenant.name(), indexed, "the search index is built");
            self.built.insert(Arc::from(tenant.name()));
        }
        Ok(())
    }

    /// A call kept in each turn while the tenant's index is being built,
    /// so that duties before it cannot leave it none; none once it is
    /// built, when a turn costs this duty nothing.
    fn least_calls(&self, tenant: &str) -> u32 {
        u32::from(!self.built.contains(tenant))
    }
}
