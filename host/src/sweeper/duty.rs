//! What a sweeper does for a tenant is a list of duties, each a [`Duty`]:
//! the next instant it cares about for a tenant, and acting for one turn
//! within the turn's call budget ([`Turn`]). The loop, its timetable and the
//! fairness across tenants know nothing of any particular duty: a tenant
//! comes due at the earliest instant any duty names, and its turn asks each
//! duty in order to act, sharing one budget of calls, so that a duty added
//! (by an embedder, or by `serve`) is kept to the same turns as the
//! standard ones. This file owns the contract between the loop and a duty;
//! it must never name one.

use std::sync::Arc;

use leasehold_guest::model::Timestamp;

use crate::error::Error;
use crate::tenant::Tenant;

use super::report::SweepReport;

/// One thing a sweeper does for each tenant it keeps time for: returning
/// lapsed leases to the queue, acting on overdue tasks, trimming the
/// record, and any duty an embedder adds ([`Sweeper::start_with`]).
///
/// Every method runs on the sweeper's thread, one at a time, so a duty
/// keeps what it knows of tenants in itself. A duty makes calls of the
/// tenant it is handed and of no other. Its work must be safe to run in
/// several sweepers at once (the standard duties' verbs are exactly-once in
/// the rules) and to run again after a failure.
///
/// [`Sweeper::start_with`]: crate::Sweeper::start_with
pub trait Duty: Send {
    /// Its name, for logs.
    fn name(&self) -> &'static str;

    /// The tenant committed (in this process or, on a shared database, in
    /// another), or the sweeper learnt of it: what the duty keeps of it may
    /// be stale. Its instants are read again soon after.
    fn heard(&mut self, _tenant: &Arc<str>) {}

    /// The earliest instant, by the sweeper's clock, at which the duty has
    /// something to do for `tenant` (`now` or earlier: at once), or `None`
    /// while it has nothing until the tenant commits again. Read when the
    /// sweeper learns of the tenant, after its commits, and after each turn
    /// that finished its work; it may call the tenant's reads.
    fn next(&mut self, tenant: &Tenant, now: Timestamp) -> Result<Option<Timestamp>, Error>;

    /// Acts for `tenant` in its turn, which every duty of the sweeper shares:
    /// before each call it takes one from the turn's budget
    /// ([`Turn::take_call`]), and it stops when none is left, leaving the
    /// rest for the tenant's next turn. It counts what it did
    /// ([`Turn::count`]). A duty with nothing due returns at once, taking
    /// nothing. An error ends the turn; the tenant is tried again after the
    /// sweeper's `retry`.
    fn act(&mut self, tenant: &Tenant, turn: &mut Turn<'_>) -> Result<(), Error>;

    /// Before the sweeper's first turn, reading only: logs what the duty's
    /// first turn for `tenant` would do, and answers whether it would act;
    /// `None` when it has nothing to say.
    fn foresee(&mut self, _tenant: &Tenant, _now: Timestamp) -> Result<Option<bool>, Error> {
        Ok(None)
    }

    /// The calls a turn of `tenant` keeps for this duty at least: a turn's
    /// budget is at least the sum over its duties, so a turn always
    /// reaches the last one with work. One by default, since a duty with
    /// nothing to do may spend a call finding that out (the task duties
    /// do); a duty that knows without a call that it has nothing to do for
    /// `tenant` answers 0, and adds nothing to the turn.
    fn least_calls(&self, _tenant: &str) -> u32 {
        1
    }
}

/// One turn of one tenant, as its duties see it: the instant it runs at,
/// the calls left in its budget, and its report.
pub struct Turn<'a> {
    now: Timestamp,
    calls: u32,
    capped: bool,
    report: &'a mut SweepReport,
}

impl<'a> Turn<'a> {
    /// A turn at `now` with a budget of `calls`, counting into `report`: the
    /// sweeper makes one for each turn; a duty's own tests may make one.
    pub fn new(now: Timestamp, calls: u32, report: &'a mut SweepReport) -> Turn<'a> {
        Turn {
            now,
            calls,
            capped: false,
            report,
        }
    }

    /// The instant the turn runs at, by the sweeper's clock: the `now` of
    /// every call it makes.
    pub fn now(&self) -> Timestamp {
        self.now
    }

    /// Calls left in the turn's budget.
    pub fn calls_left(&self) -> u32 {
        self.calls
    }

    /// Takes one call from the budget; `false` when none is left, and the
    /// turn then ends with more to do: its tenant goes to the back of the
    /// line of due tenants, and its next turn carries on.
    pub fn take_call(&mut self) -> bool {
        if self.calls == 0 {
            self.capped = true;
            return false;
        }
        self.calls -= 1;
        true
    }

    /// Counts `n` of `what` in the turn's report and the sweeper's counts
    /// ([`Sweeper::counted`](crate::Sweeper::counted)).
    pub fn count(&mut self, what: &'static str, n: u64) {
        self.report.count(what, n);
    }

    /// Whether a duty stopped for want of calls: the turn ends at its cap.
    pub fn capped(&self) -> bool {
        self.capped
    }
}
