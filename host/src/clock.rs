//! The clock an engine reads the time of a call from: the instant every
//! change the call makes is recorded at (`kv.call-time`), read once per
//! writing call. The system's by default; a test, a replay or an embedder
//! with a clock of its own injects another. It owns telling the time and
//! nothing else: it must never be used to decide a rule, whose times are
//! the verbs' arguments.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{SystemTime, UNIX_EPOCH};

use leasehold_guest::model::Timestamp;

/// What a clock calls when it is moved by hand, so that whoever sleeps
/// until an instant by it (a sweeper) looks again.
pub type Alarm = Arc<dyn Fn() + Send + Sync>;

/// Tells the time, in milliseconds since the Unix epoch.
pub trait Clock: Send + Sync + 'static {
    /// The time now.
    fn now(&self) -> Timestamp;

    /// Calls `alarm` whenever the clock is moved other than by time
    /// passing. A clock that only runs (the system's) never calls it.
    fn on_jump(&self, alarm: Alarm) {
        let _ = alarm;
    }
}

/// The system's wall clock.
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Timestamp {
        // A clock set before 1970 reads as the epoch, and one past the range
        // of a timestamp as its end: a recorded instant, never a failed call.
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
    }
}

/// A clock that says what it is told: for tests and replays, which set the
/// time each call is recorded at, and move a sweeper's time by hand.
#[derive(Default)]
pub struct ManualClock {
    at: AtomicI64,
    alarms: Mutex<Vec<Alarm>>,
}

impl std::fmt::Debug for ManualClock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("ManualClock").field(&self.now()).finish()
    }
}

impl ManualClock {
    /// A clock that reads `at` until set otherwise.
    pub fn new(at: Timestamp) -> ManualClock {
        ManualClock {
            at: AtomicI64::new(at),
            alarms: Mutex::default(),
        }
    }

    /// Makes the clock read `at` from now on.
    pub fn set(&self, at: Timestamp) {
        self.at.store(at, Ordering::SeqCst);
        self.ring();
    }

    /// Moves the clock on by `ms` and answers the new time.
    pub fn advance(&self, ms: i64) -> Timestamp {
        let now = self.at.fetch_add(ms, Ordering::SeqCst) + ms;
        self.ring();
        now
    }

    fn ring(&self) {
        let alarms = self
            .alarms
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        for alarm in alarms {
            alarm();
        }
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Timestamp {
        self.at.load(Ordering::SeqCst)
    }

    fn on_jump(&self, alarm: Alarm) {
        self.alarms
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(alarm);
    }
}

/// A shared clock is a clock: the engine holds one, and the caller may keep
/// a handle on it (to move a [`ManualClock`]).
impl<C: Clock + ?Sized> Clock for std::sync::Arc<C> {
    fn now(&self) -> Timestamp {
        (**self).now()
    }

    fn on_jump(&self, alarm: Alarm) {
        (**self).on_jump(alarm);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_manual_clock_says_what_it_was_told() {
        let c = ManualClock::new(5);
        assert_eq!(c.now(), 5);
        assert_eq!(c.advance(10), 15);
        c.set(3);
        assert_eq!(c.now(), 3);
    }

    #[test]
    fn the_system_clock_reads_milliseconds_since_the_epoch() {
        let before = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .expect("after 1970")
            .as_millis() as i64;
        let now = SystemClock.now();
        assert!(now >= before, "{now} < {before}");
        // Milliseconds, not seconds or microseconds: within a day of it.
        assert!(now - before < 86_400_000);
    }
}
