//! The `timers` interface: durable timers under leases, one method per
//! verb; `claim-due` answers no timer twice and no more than its limit, a
//! move answers the timer it was asked to move, and a listing no more than
//! its limit.

use leasehold_guest::model::{ArmOutcome, Timer, TimerError, TimerInfo, TimerPage, Timestamp};

use crate::bindings::wit;
use crate::error::Error;
use crate::verbs::Verb;

use super::Tenant;
use super::checks::{StoreAnswer, at_most, malformed, store};

/// What `reschedule` did: the timer moved, or why it did not (nothing was
/// written).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Rescheduled {
    /// Moved: the timer as it now waits, unclaimed.
    Moved(TimerInfo),
    /// No timer is armed under this run and effect.
    NotFound,
    /// A sweeper holds it under a lease ending at this instant; ask with
    /// `take_back` to move it anyway.
    Held(Timestamp),
    /// The run is sealed.
    RunSealed,
}

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

    /// Retires every timer of `run`; answers how many. A schedule whose
    /// occurrence this retires ends (no next occurrence, nothing waiting).
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

    /// Moves the armed timer `(run, effect)` to `fire_at`, keeping its
    /// identity; one under a sweeper's unexpired lease only with
    /// `take_back`.
    pub fn reschedule(
        &self,
        run: &str,
        effect: &str,
        fire_at: Timestamp,
        take_back: bool,
    ) -> Result<Rescheduled, Error> {
        self.call(
            Verb::Reschedule,
            |x, s| x.call(s, (run, effect, fire_at, take_back)),
            |a: Result<wit::TimerInfo, wit::TimerError>| match a.map_err(TimerError::from) {
                Ok(info) => {
                    let info = TimerInfo::from(info);
                    if info.timer.run != run || info.timer.effect != effect {
                        return Err(malformed(format!(
                            "asked to move timer {run}/{effect}, answered {}/{}",
                            info.timer.run, info.timer.effect
                        )));
                    }
                    Ok(Rescheduled::Moved(info))
                }
                Err(TimerError::NotFound) => Ok(Rescheduled::NotFound),
                Err(TimerError::Held(until)) => Ok(Rescheduled::Held(until)),
                Err(TimerError::RunSealed) => Ok(Rescheduled::RunSealed),
                Err(TimerError::Store(e)) => Err(Error::Store(e)),
            },
        )
    }

    /// The timers armed for `run`, by effect, a page of at most `limit`
    /// after the cursor `after`.
    pub fn timers_of(
        &self,
        run: &str,
        limit: u32,
        after: Option<&str>,
    ) -> Result<TimerPage, Error> {
        self.call(
            Verb::TimersOf,
            |x, s| x.call(s, (run, limit, after)),
            |a: StoreAnswer<wit::TimerPage>| {
                let page = timer_page(store(a)?, limit, "timers-of")?;
                if let Some(t) = page.timers.iter().find(|t| t.timer.run != run) {
                    return Err(malformed(format!(
                        "timers-of {run} answered a timer of run {}",
                        t.timer.run
                    )));
                }
                Ok(page)
            },
        )
    }

    /// The timers that become claimable in `[from, to)`, in the order
    /// `claim_due` takes them, a page of at most `limit` after `after`.
    pub fn due_between(
        &self,
        from: Timestamp,
        to: Timestamp,
        limit: u32,
        after: Option<&str>,
    ) -> Result<TimerPage, Error> {
        self.call(
            Verb::DueBetween,
            |x, s| x.call(s, (from, to, limit, after)),
            |a: StoreAnswer<wit::TimerPage>| timer_page(store(a)?, limit, "due-between"),
        )
    }
}

fn timer_page(p: wit::TimerPage, limit: u32, what: &str) -> Result<TimerPage, Error> {
    let p = TimerPage::from(p);
    Ok(TimerPage {
        timers: at_most(p.timers, limit, what)?,
        next: p.next,
    })
}
