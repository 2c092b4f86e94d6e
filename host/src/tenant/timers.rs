//! The `timers` interface: durable timers under leases, one method per
//! verb; `claim-due` answers no timer twice and no more than its limit.

use leasehold_guest::model::{ArmOutcome, Timer, Timestamp};

use crate::bindings::wit;
use crate::error::Error;
use crate::verbs::Verb;

use super::Tenant;
use super::checks::{StoreAnswer, at_most, malformed, store};

impl Tenant {
    /// Arms a timer; the first arming of a `(run, effect)` wins, and a
    /// sealed run gets none.
    pub fn arm(&self, timer: &Timer) -> Result<ArmOutcome, Error> {
        let t = wit::Timer::from(timer.clone());
        self.call(
            Verb::Arm,
            |x, s| x.call(s, (&t,)),
            |a: StoreAnswer<wit::ArmOutcome>| Ok(store(a)?.into()),
        )
    }

    /// Claims up to `limit` due timers under a lease of `lease_ms`.
    pub fn claim_due(
        &self,
        now: Timestamp,
        limit: u32,
        lease_ms: u32,
    ) -> Result<Vec<Timer>, Error> {
        self.call(
            Verb::ClaimDue,
            |x, s| x.call(s, (now, limit, lease_ms)),
            |a: StoreAnswer<Vec<wit::Timer>>| {
                let timers: Vec<Timer> = at_most(store(a)?, limit, "claim-due")?
                    .into_iter()
                    .map(Into::into)
                    .collect();
                for (i, t) in timers.iter().enumerate() {
                    if timers[..i]
                        .iter()
                        .any(|u| u.run == t.run && u.effect == t.effect)
                    {
                        return Err(malformed(format!(
                            "claim-due answered timer {}/{} twice",
                            t.run, t.effect
                        )));
                    }
                }
                Ok(timers)
            },
        )
    }

    /// Retires one timer; answers whether it existed.
    pub fn disarm(&self, run: &str, effect: &str) -> Result<bool, Error> {
        self.call(Verb::Disarm, |x, s| x.call(s, (run, effect)), store::<bool>)
    }

    /// Retires every timer of `run`; answers how many.
    pub fn disarm_run(&self, run: &str) -> Result<u32, Error> {
        self.call(Verb::DisarmRun, |x, s| x.call(s, (run,)), store::<u32>)
    }

    /// Armed timers. One counter read.
    pub fn pending_count(&self) -> Result<u64, Error> {
        self.call(Verb::PendingCount, |x, s| x.call(s, ()), store::<u64>)
    }

    /// The earliest instant an armed timer becomes claimable (its fire
    /// time, or its lease end while held).
    pub fn next_due(&self) -> Result<Option<Timestamp>, Error> {
        self.call(
            Verb::NextDue,
            |x, s| x.call(s, ()),
            store::<Option<Timestamp>>,
        )
    }
}
