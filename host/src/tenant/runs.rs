//! The `runs` interface: sealing a finished run, and asking whether one is.

use leasehold_guest::model::SealOutcome;

use crate::bindings::wit;
use crate::error::Error;
use crate::verbs::Verb;

use super::Tenant;
use super::checks::{StoreAnswer, store, strings};

impl Tenant {
    /// Seals `run`: retires its timers (its schedules end with them: no
    /// next occurrence, nothing waiting) and withdraws its pending tasks
    /// among `awaited`, in one transaction.
    pub fn seal(&self, run: &str, awaited: &[&str]) -> Result<SealOutcome, Error> {
        let awaited = strings(awaited);
        self.call(
            Verb::Seal,
            |x, s| x.call(s, (run, awaited.as_slice())),
            |a: StoreAnswer<wit::SealOutcome>| Ok(store(a)?.into()),
        )
    }

    /// Whether `run` is sealed.
    pub fn is_sealed(&self, run: &str) -> Result<bool, Error> {
        self.call(Verb::IsSealed, |x, s| x.call(s, (run,)), store::<bool>)
    }
}
