//! The retention duty: trims a tenant's change record to the retention
//! (`trim`, [`TRIM_BATCH`] feed entries a call) once it has committed since
//! it was last trimmed, at most once every `trim_every` by the sweeper's
//! clock, and within its turn's call budget like every duty, so a tenant
//! with much to trim holds up another tenant's sweep by at most one turn.
//! It keeps, per tenant, whether it committed since and when it was last
//! trimmed; it never trims a tenant that has not committed since.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use leasehold_guest::model::Timestamp;

use crate::error::Error;
use crate::tenant::Tenant;

use super::duty::{Duty, Turn};
use super::options::{Retention, millis};
use super::report::TRIMMED;

/// Most feed entries one call of the retention duty trims.
pub(super) const TRIM_BATCH: u32 = 1000;

pub(super) struct TrimRecord {
    retention: Retention,
    /// The least time between two trims of one tenant, in milliseconds.
    every: i64,
    /// Tenants that committed since they were last trimmed to the end.
    untrimmed: HashSet<Arc<str>>,
    /// When each tenant was last trimmed to the end.
    last: HashMap<Arc<str>, Timestamp>,
}

impl TrimRecord {
    pub(super) fn new(retention: Retention, every: std::time::Duration) -> TrimRecord {
        TrimRecord {
            retention,
            every: millis(every),
            untrimmed: HashSet::new(),
            last: HashMap::new(),
        }
    }

    /// When `tenant` may next be trimmed, if it committed since it was.
    fn due(&self, tenant: &str, now: Timestamp) -> Option<Timestamp> {
        if !self.untrimmed.contains(tenant) {
            return None;
        }
        Some(
            self.last
                .get(tenant)
                .map_or(now, |at| at.saturating_add(self.every)),
        )
    }
}

impl Duty for TrimRecord {
    fn name(&self) -> &'static str {
        "trim"
    }

    fn heard(&mut self, tenant: &Arc<str>) {
        if !self.untrimmed.contains(tenant) {
            self.untrimmed.insert(tenant.clone());
        }
    }

    fn next(&mut self, tenant: &Tenant, now: Timestamp) -> Result<Option<Timestamp>, Error> {
        Ok(self.due(tenant.name(), now))
    }

    fn act(&mut self, tenant: &Tenant, turn: &mut Turn<'_>) -> Result<(), Error> {
        let now = turn.now();
        if self.due(tenant.name(), now).is_none_or(|at| at > now) {
            return Ok(());
        }
        let before = self
            .retention
            .max_age
            .map(|age| now.saturating_sub(millis(age)).max(0));
        let mut removed = 0u64;
        let mut done = false;
        while turn.take_call() {
            let out = tenant.trim(before, self.retention.keep, TRIM_BATCH)?;
            removed += u64::from(out.feed_removed);
            if !out.more {
                done = true;
                break;
            }
        }
        turn.count(TRIMMED, removed);
        if removed > 0 {
            tracing::info!(tenant = %tenant.name(), removed, "trimmed the change record");
        }
        if done {
            let name: Arc<str> = Arc::from(tenant.name());
            self.untrimmed.remove(&name);
            self.last.insert(name, now);
        }
        Ok(())
    }
}
