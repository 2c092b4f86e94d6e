//! Where a cron pattern's wall times fall as instants in a time zone, with
//! the daylight-saving policies: the walk from an instant through the zone's
//! offset segments (the spans between two transitions, where wall time and
//! instant differ by one fixed offset) to the first occurrence after it.
//! Never reads a clock; the instant to start from is the caller's.
//!
//! The rules, for a wall time `w` the pattern matches:
//! - `w` exists once: it fires at that instant;
//! - `w` falls in a gap (the clock jumps from before `w` to after it):
//!   [`GapPolicy::ShiftForward`] fires at the instant of the jump (so every
//!   matching wall time of one gap fires once, there), [`GapPolicy::Skip`]
//!   does not fire;
//! - `w` happens twice (the clock is set back over it):
//!   [`RepeatPolicy::First`] fires at the earlier instant only,
//!   [`RepeatPolicy::Both`] at both.
//!
//! Instants that coincide fire once. Cost: one civil search
//! ([`Cron::next_match`]) per segment whose walls it must look past, and a
//! transition lookup per segment crossed, so at most a couple of steps a year
//! of a zone's daylight saving between the start and the occurrence.

use jiff::Timestamp;
use jiff::tz::TimeZone;

use super::cron::Cron;
use super::policy::{GapPolicy, RepeatPolicy};

/// How far back a walk looks for a transition whose repeated wall times it
/// must not fire again. Every backward shift of the IANA database is shorter
/// than this (the longest, Alaska's in 1867, is one day).
const LOOKBACK_SECS: i64 = 2 * 86_400;

/// The first instant, in milliseconds, strictly after `after_ms` at which
/// `cron` fires in `zone` under the two policies.
pub(super) fn next_cron_after(
    cron: &Cron,
    zone: &TimeZone,
    gap: GapPolicy,
    repeat: RepeatPolicy,
    after_ms: i64,
) -> Option<i64> {
    let after = Timestamp::from_millisecond(after_ms).ok()?;
    let first_only = repeat == RepeatPolicy::First;
    let mut offset = i64::from(zone.to_offset(after).seconds());
    // Wall times are whole seconds: the first one after `after`'s.
    let mut lo = after_ms.div_euclid(1000) + offset + 1;
    // Under `First`, the wall times already lived through (before a backward
    // shift) do not fire again: `high` is where they end.
    let mut high = if first_only {
        walls_lived_before(zone, after)
    } else {
        i64::MIN
    };
    lo = lo.max(high);
    let mut end = transition_after(zone, after);
    // The last search and where it started: still right for a later start
    // that does not pass the match.
    let mut found: Option<(i64, i64)> = None;
    loop {
        let wall = match found {
            Some((from, wall)) if from <= lo && lo <= wall => wall,
            _ => {
                let wall = cron.next_match(lo)?;
                found = Some((lo, wall));
                wall
            }
        };
        let Some((at, next_offset)) = end else {
            return (wall - offset).checked_mul(1000);
        };
        if wall < at + offset {
            return (wall - offset).checked_mul(1000);
        }
        // The match lies past this segment: cross the transition at `at`.
        if next_offset > offset {
            // A gap: walls [at + offset, at + next_offset) never happen.
            if gap == GapPolicy::ShiftForward && wall < at + next_offset {
                return at.checked_mul(1000);
            }
            lo = lo.max(at + next_offset);
        } else {
            // A repeat (or no change): walls from at + next_offset on happen
            // again.
            high = high.max(at + offset);
            lo = if first_only {
                (at + next_offset).max(high)
            } else {
                at + next_offset
            };
        }
        offset = next_offset;
        end = transition_after(zone, Timestamp::from_second(at).ok()?);
    }
}

/// The next transition strictly after `t`: its instant (seconds) and the
/// offset (seconds) from then on.
fn transition_after(zone: &TimeZone, t: Timestamp) -> Option<(i64, i64)> {
    let next = zone.following(t).next()?;
    Some((
        next.timestamp().as_second(),
        i64::from(next.offset().seconds()),
    ))
}

/// Where the wall times of the segments before the one holding `t` end, for
/// transitions at most [`LOOKBACK_SECS`] before `t`: the walls already lived
/// through that a backward shift brings round again.
fn walls_lived_before(zone: &TimeZone, t: Timestamp) -> i64 {
    let mut high = i64::MIN;
    let Ok(through) = t.checked_add(jiff::SignedDuration::from_nanos(1)) else {
        return high;
    };
    let horizon = t.as_second().saturating_sub(LOOKBACK_SECS);
    for transition in zone.preceding(through) {
        let at = transition.timestamp();
        if at.as_second() < horizon {
            break;
        }
        let Ok(just_before) = at.checked_sub(jiff::SignedDuration::from_secs(1)) else {
            break;
        };
        let before = i64::from(zone.to_offset(just_before).seconds());
        high = high.max(at.as_second() + before);
    }
    high
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::calendar::zone::lookup;

    /// An RFC 3339 instant, in milliseconds.
    fn instant(text: &str) -> i64 {
        let t: Timestamp = text.parse().expect("an instant");
        t.as_millisecond()
    }

    fn show(zone: &TimeZone, ms: i64) -> String {
        let t = Timestamp::from_millisecond(ms).expect("in range");
        let z = t.to_zoned_datetime(zone.clone());
        format!("{}{}", z.datetime(), z.offset())
    }

    fn walk(
        expr: &str,
        zone: &str,
        gap: GapPolicy,
        repeat: RepeatPolicy,
        from: &str,
        n: usize,
    ) -> Vec<String> {
        let cron = Cron::parse(expr).expect(expr);
        let (_, zone) = lookup(zone).expect("a zone");
        let mut at = instant(from);
        let mut out = Vec::new();
        for _ in 0..n {
            let Some(next) = next_cron_after(&cron, &zone, gap, repeat, at) else {
                break;
            };
            assert!(next > at);
            out.push(show(&zone, next));
            at = next;
        }
        out
    }

    const NY_SPRING: &str = "2024-03-09T23:00:00-05:00";
    const NY_FALL: &str = "2024-11-03T00:00:00-04:00";

    #[test]
    fn calendar_walk_gap_shifts_forward_once() {
        use GapPolicy::*;
        use RepeatPolicy::*;
        // 02:00, 02:30 do not exist on 2024-03-10: both fire once at 03:00
        // EDT, which is also the 03:00 occurrence.
        assert_eq!(
            walk(
                "0,30 1-3 * * *",
                "America/New_York",
                ShiftForward,
                First,
                NY_SPRING,
                5
            ),
            [
                "2024-03-10T01:00:00-05",
                "2024-03-10T01:30:00-05",
                "2024-03-10T03:00:00-04",
                "2024-03-10T03:30:00-04",
                "2024-03-11T01:00:00-04"
            ]
        );
        assert_eq!(
            walk("30 2 * * *", "America/New_York", Skip, First, NY_SPRING, 2),
            ["2024-03-11T02:30:00-04", "2024-03-12T02:30:00-04"]
        );
    }

    #[test]
    fn calendar_walk_repeat_fires_first_or_both() {
        use GapPolicy::*;
        use RepeatPolicy::*;
        assert_eq!(
            walk(
                "0,30 1-2 * * *",
                "America/New_York",
                ShiftForward,
                First,
                NY_FALL,
                4
            ),
            [
                "2024-11-03T01:00:00-04",
                "2024-11-03T01:30:00-04",
                "2024-11-03T02:00:00-05",
                "2024-11-03T02:30:00-05"
            ]
        );
        assert_eq!(
            walk(
                "0,30 1-2 * * *",
                "America/New_York",
                ShiftForward,
                Both,
                NY_FALL,
                6
            ),
            [
                "2024-11-03T01:00:00-04",
                "2024-11-03T01:30:00-04",
                "2024-11-03T01:00:00-05",
                "2024-11-03T01:30:00-05",
                "2024-11-03T02:00:00-05",
                "2024-11-03T02:30:00-05"
            ]
        );
    }

    #[test]
    fn calendar_walk_starting_inside_the_repeated_hour() {
        use GapPolicy::*;
        use RepeatPolicy::*;
        // 01:10 EST, the second pass: 01:30 fired already at 01:30 EDT.
        let from = "2024-11-03T01:10:00-05:00";
        assert_eq!(
            walk(
                "30 1,2 * * *",
                "America/New_York",
                ShiftForward,
                First,
                from,
                1
            ),
            ["2024-11-03T02:30:00-05"]
        );
        assert_eq!(
            walk(
                "30 1,2 * * *",
                "America/New_York",
                ShiftForward,
                Both,
                from,
                1
            ),
            ["2024-11-03T01:30:00-05"]
        );
        // 01:40 EDT, the first pass: 01:30 EST is a repeat.
        let from = "2024-11-03T01:40:00-04:00";
        assert_eq!(
            walk(
                "30 1 * * *",
                "America/New_York",
                ShiftForward,
                First,
                from,
                1
            ),
            ["2024-11-04T01:30:00-05"]
        );
        assert_eq!(
            walk(
                "30 1 * * *",
                "America/New_York",
                ShiftForward,
                Both,
                from,
                1
            ),
            ["2024-11-03T01:30:00-05"]
        );
    }

    #[test]
    fn calendar_walk_a_skipped_day() {
        use GapPolicy::*;
        use RepeatPolicy::*;
        // Samoa skipped 2011-12-30 altogether.
        let from = "2011-12-29T12:00:00-10:00";
        assert_eq!(
            walk("0 9 * * *", "Pacific/Apia", ShiftForward, First, from, 2),
            ["2011-12-31T00:00:00+14", "2011-12-31T09:00:00+14"]
        );
        assert_eq!(
            walk("0 9 * * *", "Pacific/Apia", Skip, First, from, 1),
            ["2011-12-31T09:00:00+14"]
        );
    }

    #[test]
    fn calendar_walk_rare_patterns_cross_many_transitions() {
        let from = "2073-01-01T00:00:00-05:00";
        assert_eq!(
            walk(
                "0 12 * 2 MON#5",
                "America/New_York",
                GapPolicy::ShiftForward,
                RepeatPolicy::First,
                from,
                1
            ),
            ["2112-02-29T12:00:00-05"]
        );
    }
}
