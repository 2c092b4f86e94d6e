//! Catching up after downtime: given the last occurrence that fired, the
//! caller's `now` and the schedule's [`CatchUp`] policy, which missed
//! occurrences fire now and which one to arm next. Pure: never reads a clock
//! or storage; the caller records what fired.
//!
//! An occurrence is missed when it is after the last one fired and at or
//! before `now`; it is within the window when it is at or after
//! `now - window`. Decisions use occurrences' nominal instants, not their
//! jittered firing instants, so jitter never changes what is caught up.

#[allow(unused_imports)]
use crate::prelude::*;

use super::policy::CatchUp;
use super::schedule::Schedule;
use crate::time::Timestamp;

/// What to do after downtime.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CatchUpPlan {
    /// Missed occurrences to fire now, oldest first.
    pub fire: Vec<Timestamp>,
    /// More missed occurrences within the window remain than `limit` let
    /// through: ask again with `last` set to the last of `fire`.
    pub more: bool,
    /// The first occurrence after `now` (and after `last`): the one to arm.
    pub next: Option<Timestamp>,
}

impl Schedule {
    /// Which missed occurrences fire now. `last` is the last occurrence that
    /// fired, or the instant the schedule was made or resumed when none has;
    /// `limit` bounds `fire` (a page). Cost: `all-within-window` steps through
    /// the occurrences it returns; `latest` bisects the window, about 64
    /// [`Schedule::next_after`]s whatever the window holds.
    pub fn catch_up(&self, last: Timestamp, now: Timestamp, limit: usize) -> CatchUpPlan {
        let next = self.next_after(now.max(last));
        let policy = self.spec().catch_up;
        let Some(window) = policy.window_ms() else {
            return CatchUpPlan {
                fire: Vec::new(),
                more: false,
                next,
            };
        };
        let window = i64::try_from(window).unwrap_or(i64::MAX);
        // Missed and within the window: after `floor`, at or before `now`.
        // Instants start at 0, so no floor below -1 (which also keeps the
        // bisection's `now - floor` from overflowing).
        let floor = last
            .max(now.saturating_sub(window).saturating_sub(1))
            .max(-1);
        if floor >= now {
            return CatchUpPlan {
                fire: Vec::new(),
                more: false,
                next,
            };
        }
        match policy {
            CatchUp::Latest { .. } => {
                let fire = self
                    .latest_between(floor, now)
                    .into_iter()
                    .take(limit)
                    .collect();
                CatchUpPlan {
                    fire,
                    more: false,
                    next,
                }
            }
            _ => {
                let mut missed = self.occurrences_after(floor).take_while(|&o| o <= now);
                let fire: Vec<Timestamp> = missed.by_ref().take(limit).collect();
                let more = missed.next().is_some();
                CatchUpPlan { fire, more, next }
            }
        }
    }

    /// The latest occurrence after `floor` and at or before `now`: the
    /// largest `t` in `[floor, now)` whose next occurrence is at or before
    /// `now`, found by bisection (the next occurrence never moves back as
    /// `t` grows), has it as its next occurrence.
    fn latest_between(&self, floor: Timestamp, now: Timestamp) -> Option<Timestamp> {
        let due = |t: Timestamp| self.next_after(t).filter(|&o| o <= now);
        due(floor)?;
        let (mut lo, mut hi) = (floor, now);
        while hi - lo > 1 {
            let mid = lo + (hi - lo) / 2;
            if due(mid).is_some() {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        due(lo)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::calendar::schedule::{Rule, ScheduleSpec};

    const MINUTE: i64 = 60_000;
    /// 2024-01-01T00:00:00Z.
    const T0: i64 = 1_704_067_200_000;

    fn every_minute(catch_up: CatchUp) -> Schedule {
        let mut spec = ScheduleSpec::new(
            Rule::Cron {
                expr: "* * * * *".into(),
            },
            "UTC",
        );
        spec.catch_up = catch_up;
        Schedule::new(spec).expect("a valid spec")
    }

    #[test]
    fn calendar_catch_up_all_within_window_pages() {
        let s = every_minute(CatchUp::AllWithinWindow {
            window_ms: 10 * MINUTE as u64,
        });
        // Down from T0 (fired) to T0 + 30 min + 30 s: the window holds
        // minutes 21 to 30.
        let now = T0 + 30 * MINUTE + 30_000;
        let plan = s.catch_up(T0, now, 4);
        assert_eq!(
            plan.fire,
            (21..=24).map(|m| T0 + m * MINUTE).collect::<Vec<_>>()
        );
        assert!(plan.more);
        assert_eq!(plan.next, Some(T0 + 31 * MINUTE));
        let rest = s.catch_up(T0 + 24 * MINUTE, now, 100);
        assert_eq!(
            rest.fire,
            (25..=30).map(|m| T0 + m * MINUTE).collect::<Vec<_>>()
        );
        assert!(!rest.more);
        // Nothing missed: nothing fires.
        let plan = s.catch_up(T0 + 30 * MINUTE, now, 100);
        assert!(plan.fire.is_empty() && !plan.more);
    }

    #[test]
    fn calendar_catch_up_takes_any_instants() {
        let s = every_minute(CatchUp::Latest {
            window_ms: u64::MAX,
        });
        assert_eq!(s.catch_up(i64::MIN, T0, 1).fire, [T0]);
        assert!(s.catch_up(i64::MAX, i64::MIN, 1).fire.is_empty());
        let s = every_minute(CatchUp::AllWithinWindow {
            window_ms: u64::MAX,
        });
        let plan = s.catch_up(i64::MIN, T0, 2);
        assert_eq!(plan.fire, [0, MINUTE]);
        assert!(plan.more);
    }

    #[test]
    fn calendar_catch_up_window_edge_is_inclusive() {
        let s = every_minute(CatchUp::AllWithinWindow {
            window_ms: 2 * MINUTE as u64,
        });
        let plan = s.catch_up(T0, T0 + 10 * MINUTE, 100);
        assert_eq!(
            plan.fire,
            [T0 + 8 * MINUTE, T0 + 9 * MINUTE, T0 + 10 * MINUTE]
        );
    }

    #[test]
    fn calendar_catch_up_latest_and_none() {
        let now = T0 + 30 * MINUTE + 30_000;
        let latest = every_minute(CatchUp::Latest {
            window_ms: 10 * MINUTE as u64,
        });
        let plan = latest.catch_up(T0, now, 100);
        assert_eq!(plan.fire, [T0 + 30 * MINUTE]);
        assert_eq!(plan.next, Some(T0 + 31 * MINUTE));
        // The latest missed one fell out of the window.
        let hourly = {
            let mut spec = ScheduleSpec::new(
                Rule::Cron {
                    expr: "0 * * * *".into(),
                },
                "UTC",
            );
            spec.catch_up = CatchUp::Latest {
                window_ms: 10 * MINUTE as u64,
            };
            Schedule::new(spec).expect("valid")
        };
        assert!(
            hourly
                .catch_up(T0 - 1, T0 + 30 * MINUTE, 100)
                .fire
                .is_empty()
        );
        let none = every_minute(CatchUp::None);
        let plan = none.catch_up(T0, now, 100);
        assert!(plan.fire.is_empty());
        assert_eq!(plan.next, Some(T0 + 31 * MINUTE));
    }

    #[test]
    fn calendar_catch_up_latest_is_the_last_of_all() {
        for (expr, zone) in [
            ("*/7 1-3 * * *", "America/New_York"),
            ("0 0 L * *", "Asia/Kathmandu"),
        ] {
            for window in [1, 59_999, 3 * 3_600_000, 90 * 86_400_000] {
                let mut spec = ScheduleSpec::new(Rule::Cron { expr: expr.into() }, zone);
                spec.catch_up = CatchUp::AllWithinWindow { window_ms: window };
                let all = Schedule::new(spec.clone()).expect("valid");
                spec.catch_up = CatchUp::Latest { window_ms: window };
                let latest = Schedule::new(spec).expect("valid");
                for now in [T0 + 7_654_321, T0 + 200 * 86_400_000 + 5_000] {
                    let every = all.catch_up(T0 - 86_400_000 * 120, now, usize::MAX).fire;
                    let one = latest.catch_up(T0 - 86_400_000 * 120, now, usize::MAX).fire;
                    assert_eq!(one.last(), every.last(), "{expr} {window} {now}");
                }
            }
        }
    }
}
