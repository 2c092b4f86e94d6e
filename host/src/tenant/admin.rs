//! The `admin` interface: the consistency check, which walks the whole
//! tenant under the longer deadline.

use leasehold_guest::model::Discrepancy;

use crate::bindings::wit;
use crate::error::Error;
use crate::verbs::Verb;

use super::Tenant;
use super::checks::{StoreAnswer, store};

impl Tenant {
    /// The consistency check: every discrepancy between this tenant's rows
    /// and its indexes and counters. Empty means consistent.
    pub fn check(&self) -> Result<Vec<Discrepancy>, Error> {
        self.call(
            Verb::Check,
            |x, s| x.call(s, ()),
            |a: StoreAnswer<Vec<wit::Discrepancy>>| {
                Ok(store(a)?.into_iter().map(Into::into).collect())
            },
        )
    }
}
